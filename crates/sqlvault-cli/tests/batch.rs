//! Scripts (issue 14): `sqlvault batch VAULT` runs many commands with one key
//! derivation; `tag` takes several paths or `--from FILE`.

mod common;

use common::Env;

fn tree(e: &Env) {
    e.ok(&["mkdir", e.v(), "/p/with space", "-p"]);
    for f in ["/p/a.jpg", "/p/b.jpg", "/p/c.jpg", "/p/with space/d.jpg"] {
        e.ok(&["touch", e.v(), f]);
    }
}

fn batch(e: &Env, args: &[&str], script: &str) -> std::process::Output {
    let mut a = vec!["batch", e.v()];
    a.extend_from_slice(args);
    e.run_stdin(&a, script.as_bytes())
}

#[test]
fn batch_runs_every_line_with_one_key_derivation() {
    let e = Env::new();
    tree(&e);
    let script = "\
# tag the photos
tag /p/a.jpg iso=400 camera='X100'

tag '/p/with space/d.jpg' note='two words'
rec put notes k1 \"hello there\"
snapshot s1
mkdir /q
ls /p
";
    let out = batch(&e, &["-v"], script);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(err.matches("opened ").count(), 1, "the vault (and its key) is opened once: {err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "a.jpg\nb.jpg\nc.jpg\nwith space\n");
    assert_eq!(e.lines(&["tags", e.v(), "/p/a.jpg"]), ["camera=X100", "iso=400"]);
    assert_eq!(e.ok(&["tags", e.v(), "/p/with space/d.jpg"]), "note=two words\n");
    assert_eq!(e.ok(&["rec", "get", e.v(), "notes", "k1"]), "hello there");
    assert!(e.ok(&["snapshots", e.v()]).contains("s1"));
    assert!(e.ok(&["ls", e.v()]).contains("q"));
    e.fsck_clean();
}

#[test]
fn batch_stops_at_the_first_failure_unless_keep_going() {
    let e = Env::new();
    tree(&e);
    let script = "tag /p/a.jpg n=1\ntag /p/missing.jpg n=2\ntag /p/b.jpg n=3\n";
    let out = batch(&e, &[], script);
    assert_eq!(out.status.code(), Some(4), "the failed command's exit code");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("sqlvault: line 2: ") && err.contains("missing.jpg"), "{err}");
    assert_eq!(e.ok(&["tags", e.v(), "/p/a.jpg"]), "n=1\n", "line 1 ran");
    assert_eq!(e.ok(&["tags", e.v(), "/p/b.jpg"]), "", "line 3 did not");

    let out = batch(&e, &["--keep-going"], script);
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("1 of 3 commands failed"), "{err}");
    assert_eq!(e.ok(&["tags", e.v(), "/p/b.jpg"]), "n=3\n", "line 3 ran");
}

#[test]
fn malformed_or_unsuitable_lines_are_usage_errors() {
    let e = Env::new();
    tree(&e);
    for (line, says) in [
        ("tag '/p/a.jpg x=1", "unbalanced quotes"),
        ("frobnicate /p", "frobnicate"),
        ("init", "not in a batch"),
        ("passwd", "not in a batch"),
        ("rec put c k", "give rec put its VALUE"),
        ("rec put c k -", "give rec put its VALUE"),
        ("batch", "not in a batch"),
        ("find --tag 'iso>>4'", "unknown operator"),
    ] {
        let out = batch(&e, &[], &format!("{line}\n"));
        assert_eq!(out.status.code(), Some(1), "{line}: {}", String::from_utf8_lossy(&out.stderr));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("sqlvault: line 1: ") && err.contains(says), "{line}: {err}");
    }
    // A wrong passphrase fails before any line is read.
    let out = e.run_with("wrong", &["batch", e.v()]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn tag_takes_several_paths_or_a_list() {
    let e = Env::new();
    tree(&e);
    e.ok(&["tag", e.v(), "/p/a.jpg", "/p/b.jpg", "iso=800", "lens=35mm"]);
    for f in ["/p/a.jpg", "/p/b.jpg"] {
        assert_eq!(e.lines(&["tags", e.v(), f]), ["iso=800", "lens=35mm"]);
    }
    assert_eq!(e.ok(&["tags", e.v(), "/p/c.jpg"]), "");

    // --from FILE: one path a line (spaces kept), blank lines skipped.
    let list = e.path("list.txt");
    std::fs::write(&list, "/p/c.jpg\n\n/p/with space/d.jpg\n").unwrap();
    e.ok(&["tag", e.v(), "--from", list.to_str().unwrap(), "album=trip"]);
    assert_eq!(e.lines(&["find", e.v(), "--tag", "album=trip"]), ["/p/c.jpg", "/p/with space/d.jpg"]);
    // --from - reads standard input.
    let out = e.run_stdin(&["tag", e.v(), "--from", "-", "--remove", "album"], b"/p/c.jpg\n");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(e.lines(&["find", e.v(), "--tag", "album"]), ["/p/with space/d.jpg"]);

    // All or nothing: one missing path tags none of them.
    e.fails(4, &["tag", e.v(), "/p/a.jpg", "/p/nope.jpg", "flag=1"]);
    assert!(e.lines(&["find", e.v(), "--tag", "flag"]).is_empty());
    // Several paths and --remove.
    e.ok(&["tag", e.v(), "--remove", "/p/a.jpg", "/p/b.jpg", "lens"]);
    assert_eq!(e.ok(&["tags", e.v(), "/p/b.jpg"]), "iso=800\n");
    // Paths but no tag.
    e.fails(1, &["tag", e.v(), "/p/a.jpg", "/p/b.jpg"]);
}

/// The batch example of docs/cli.md ("Scripts: batch"), run as written.
#[test]
fn the_documented_batch_example_runs() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/cli.md")).unwrap();
    let start = docs.find("sqlvault batch my.vault <<'END'\n").expect("docs/cli.md has the batch example");
    let body = &docs[start..].split_once('\n').unwrap().1;
    let script = &body[..body.find("\nEND\n").expect("the example ends with END")];
    let e = Env::new();
    e.ok(&["mkdir", e.v(), "/photos"]);
    e.ok(&["touch", e.v(), "/photos/a.jpg"]);
    e.ok(&["touch", e.v(), "/photos/with space.jpg"]);
    let out = e.run_stdin(&["batch", e.v()], script.as_bytes());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(e.lines(&["tags", e.v(), "/photos/a.jpg"]), ["camera=X100V", "iso=400"]);
    assert_eq!(e.ok(&["rec", "get", e.v(), "settings", "theme"]), "dark");
    assert!(e.ok(&["snapshots", e.v()]).contains("nightly"));
}
