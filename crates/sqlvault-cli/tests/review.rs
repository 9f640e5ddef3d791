//! What a newcomer tripped on when using the whole CLI from the README (the review of
//! issues 5 and 6): every case here failed before its fix.

mod common;

use std::process::Stdio;

use common::{sqlvault, Env};

fn small_tree(e: &Env) {
    let v = e.v();
    e.ok(&["mkdir", v, "/photos/sub", "-p"]);
    e.ok(&["touch", v, "/photos/a.jpg"]);
    e.ok(&["tag", v, "/photos/a.jpg", "iso=400"]);
    e.ok(&["tag", v, "/photos/sub", "iso=400"]);
}

/// `sqlvault ls --json | head -1` and the like: standard output closed before the
/// command writes. This panicked with "failed printing to stdout" (exit 101).
#[test]
fn closed_standard_output_is_not_a_panic() {
    let e = Env::new();
    small_tree(&e);
    e.ok(&["snapshot", e.v(), "s1"]);
    let v = e.v();
    for args in [
        vec!["ls", v, "/", "-R", "--json"],
        vec!["ls", v, "/photos", "-l"],
        vec!["stat", v, "/photos/a.jpg"],
        vec!["stat", v, "/photos/a.jpg", "--json"],
        vec!["info", v],
        vec!["info", v, "--json"],
        vec!["fsck", v],
        vec!["key", "ls", v],
        vec!["snapshots", v],
        vec!["snapshots", v, "--json"],
        vec!["tags", v, "/photos/a.jpg", "--json"],
        vec!["find", v, "/", "--tag", "iso", "--json"],
        vec!["rec", "ls", v, "--json"],
        vec!["rec", "ls", v, "c", "--count"],
    ] {
        let mut child =
            sqlvault().args(&args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        // Close the reading end at once: the vault is not even open yet, so every
        // write of the command meets a closed pipe.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    }
}

/// A bad command line is one line `sqlvault: ...` with exit code 1, like every other
/// error; clap printed several lines starting with `error:`.
#[test]
fn usage_errors_are_one_line() {
    let e = Env::new();
    let v = e.v();
    let err = e.fails(1, &["tag", v, "/x"]);
    assert!(err.contains("NAME=VALUE"), "names what is missing: {err}");
    let err = e.fails(1, &["find", v, "/"]);
    assert!(err.contains("--tag"), "{err}");
    let err = e.fails(1, &["snapshot"]);
    assert!(err.contains("VAULT"), "{err}");
    let err = e.fails(1, &["frobnicate", v]);
    assert!(err.contains("frobnicate") && err.contains("--help"), "{err}");
    let err = e.fails(1, &["--durability", "sometimes", "ls", v]);
    assert!(err.contains("sometimes"), "{err}");
    e.fails(1, &["rec", "ls", v, "c", "--no-such-flag"]);
    // Help is still help: several lines on stdout, exit 0.
    let help = e.ok(&["find", "--help"]);
    assert!(help.lines().count() > 5 && help.contains("Usage:"), "{help}");
    // A command left out (`sqlvault`, `sqlvault rec`): one line too, not a page of help.
    let err = e.fails(1, &[]);
    assert!(err.contains("sqlvault <COMMAND>") || err.contains("sqlvault [OPTIONS] <COMMAND>"), "{err}");
    let err = e.fails(1, &["rec"]);
    assert!(err.contains("sqlvault rec"), "{err}");
    e.fails(1, &["key"]);
}

/// Field names and formats agree across commands: `find --json` called the node type
/// `type` where `ls --json` and `stat --json` say `kind`; `snapshots --json` printed
/// `created` as `2026-11-23 08:15:00` where default snapshot names are ISO 8601.
#[test]
fn json_outputs_agree_across_commands() {
    let e = Env::new();
    small_tree(&e);
    let v = e.v();
    let found = e.json(&["find", v, "/", "--tag", "iso=400", "--json"]);
    let found = found.as_array().unwrap();
    assert_eq!(found.len(), 2);
    for f in found {
        let path = f["path"].as_str().unwrap();
        let stat = e.json(&["stat", v, path, "--json"]);
        assert_eq!(f["kind"], stat["kind"], "{path}: find {f} vs stat {stat}");
        assert_eq!(f["ino"], stat["ino"], "{path}");
        assert!(f.get("type").is_none(), "{f}");
        // `stat` without --json names the kind the same way (it printed `File`, `Dir`).
        let text = e.ok(&["stat", v, path]);
        assert!(text.contains(&format!("type: {}\n", stat["kind"].as_str().unwrap())), "{text}");
    }
    let listed = e.json(&["ls", v, "/photos", "--json"]);
    assert!(listed.as_array().unwrap().iter().all(|x| x["kind"].is_string()), "{listed}");

    let out = e.run(&["snapshot", v]);
    assert!(out.status.success());
    let snaps = e.json(&["snapshots", v, "--json"]);
    let s = &snaps[0];
    let name = s["name"].as_str().unwrap();
    let created = s["created"].as_str().unwrap();
    // Default name and `created` are both the ISO 8601 UTC time, to the second.
    let iso = |t: &str| t.len() == 20 && t.as_bytes()[10] == b'T' && t.ends_with('Z');
    assert!(iso(name), "{name}");
    assert!(iso(created), "{created}");
    let secs = |t: &str| t[11..19].split(':').map(|x| x.parse::<i64>().unwrap()).fold(0, |a, x| a * 60 + x);
    assert!((secs(created) - secs(name)).abs() <= 1, "{created} vs {name}");
}

/// `tags` printed the text "400" exactly like the number 400 (`n=400`), so its output
/// could not tell them apart nor be fed back to `tag`; text that reads as a number is
/// now shown quoted, the way `tag` takes it.
#[test]
fn tags_output_tells_text_from_numbers_and_reads_back() {
    let e = Env::new();
    let v = e.v();
    e.ok(&["touch", v, "/a"]);
    e.ok(&["touch", v, "/b"]);
    e.ok(&["tag", v, "/a", "n=400", "s='400'", "z='0400'", "r=2.5", "t=hello", "q=\"'x'\"", "e=", "h=0x00ff"]);
    let shown = e.ok(&["tags", v, "/a"]);
    assert_eq!(shown, "e=\nh='0x00ff'\nn=400\nq=''x''\nr=2.5\ns='400'\nt=hello\nz='0400'\n");
    // Every printed line, given back to `tag`, stores the same value.
    let lines: Vec<&str> = shown.lines().collect();
    let mut args = vec!["tag", v, "/b"];
    args.extend(&lines);
    e.ok(&args);
    assert_eq!(e.json(&["tags", v, "/b", "--json"]), e.json(&["tags", v, "/a", "--json"]));
}

/// A missing host path is "not found" (exit 4) like a missing vault path; `put` of a
/// missing source exited 5 (environment error).
#[test]
fn a_missing_host_path_is_not_found() {
    let e = Env::new();
    let v = e.v();
    let missing = e.dir.path().join("nosuch");
    let err = e.fails(4, &["put", v, missing.to_str().unwrap(), "/x"]);
    assert!(err.contains("nosuch"), "{err}");
    e.ok(&["touch", v, "/f"]);
    let out = e.dir.path().join("no/dir/f");
    e.fails(4, &["get", v, "/f", out.to_str().unwrap()]);
    assert_eq!(e.ok(&["ls", v, "/"]), "f\n", "nothing imported");
}

/// A missing passphrase file is a missing secret (exit 2) like a missing key file; it
/// was a usage error (1). Bad Argon2id settings are explained, not shown as Rust debug
/// output (`KdfParams { memory_kib: .. }`).
#[test]
fn secret_files_and_kdf_settings_fail_readably() {
    let e = Env::new();
    let v = e.v();
    let missing = e.path("absent");
    let err = e.fails(2, &["ls", v, "--passphrase-file", missing.to_str().unwrap()]);
    assert!(err.contains("absent"), "{err}");
    e.fails(2, &["ls", v, "--key-file", missing.to_str().unwrap()]);
    let bad = e.path("latin1");
    std::fs::write(&bad, b"caf\xe9\n").unwrap();
    e.fails(2, &["ls", v, "--passphrase-file", bad.to_str().unwrap()]);

    let other = e.path("new.vault");
    let err = e.fails(4, &["init", other.to_str().unwrap(), "--kdf-iterations", "0"]);
    assert!(err.contains("0 iterations (1 to 64)") && !err.contains("KdfParams"), "{err}");
    assert!(!other.exists(), "no vault file left behind");
}

/// `mount` on a directory holding files mounted over them (hiding them until the
/// unmount), and a second `mount -d` on a live mount point stacked a second server;
/// `--help` says the mount point must be an empty directory.
#[test]
fn mount_refuses_a_mount_point_that_is_not_empty() {
    let e = Env::new();
    let v = e.v();
    let mnt = e.path("mnt");
    std::fs::create_dir(&mnt).unwrap();
    std::fs::write(mnt.join("mine.txt"), b"keep me").unwrap();
    let err = e.fails(4, &["mount", "-d", v, mnt.to_str().unwrap()]);
    assert!(err.contains("not empty"), "{err}");
    assert_eq!(std::fs::read(mnt.join("mine.txt")).unwrap(), b"keep me", "still visible: nothing was mounted");
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    assert!(!mounts.contains(mnt.to_str().unwrap()), "{mounts}");
}

/// `rec put VAULT COLL KEY` with VALUE forgotten, typed on a terminal, read standard
/// input without a word and looked like a hang; it now says so on stderr. Run under
/// `script` (util-linux, in Debian's essential `bsdutils`) for a real terminal.
#[test]
fn rec_put_from_a_terminal_says_it_is_reading_standard_input() {
    use std::io::Write;
    let e = Env::new();
    let cmd = format!("{} rec put {} c k", env!("CARGO_BIN_EXE_sqlvault"), e.v());
    let mut child = std::process::Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("SQLVAULT_PASSPHRASE", "pw")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script (bsdutils) runs");
    let mut input = child.stdin.take().unwrap();
    input.write_all(b"typed\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(800));
    input.write_all(b"\x04").unwrap(); // Ctrl-D on the terminal
    let out = child.wait_with_output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains("reading the value of \"k\" from standard input"), "{shown}");
    assert_eq!(e.ok(&["rec", "get", e.v(), "c", "k"]), "typed\n");
}

/// `tag f 'a!=1'` stored a tag named `a!` that no `find --tag` could name (the
/// condition splits at the first `!`, `<`, `>` or `=`); such names are refused like
/// other bad tag syntax (exit 1), and nothing is stored.
#[test]
fn tag_refuses_names_find_cannot_search() {
    let e = Env::new();
    let v = e.v();
    e.ok(&["touch", v, "/f"]);
    for bad in ["a!=1", "x<y=1", "b>=2"] {
        let err = e.fails(1, &["tag", v, "/f", "ok=1", bad]);
        assert!(err.contains("find"), "{err}");
    }
    assert_eq!(e.ok(&["tags", v, "/f"]), "", "all or nothing");
    e.ok(&["tag", v, "/f", "a=x!<>y"]);
    assert_eq!(e.ok(&["find", v, "/", "--tag", "a=x!<>y"]), "/f\n", "the characters are fine in values");
}

/// `find --json` and `rec ls --json` stream their arrays; the separators were put at
/// the start of the next line (`,  {..}`), which was valid JSON but read as broken.
/// Now one element a line with its comma, like the other (pretty-printed) outputs.
#[test]
fn streamed_json_arrays_read_like_the_others() {
    let e = Env::new();
    let v = e.v();
    for f in ["/a", "/b", "/c"] {
        e.ok(&["touch", v, f]);
        e.ok(&["tag", v, f, "n=1"]);
        e.ok(&["rec", "put", v, "c", f, "x"]);
    }
    for args in [vec!["find", v, "/", "--tag", "n", "--json"], vec!["rec", "ls", v, "c", "--json"]] {
        let out = e.ok(&args);
        serde_json::from_str::<serde_json::Value>(&out).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 5, "{out}");
        assert_eq!((lines[0], lines[4]), ("[", "]"), "{out}");
        assert!(lines[1..3].iter().all(|l| l.starts_with("  {") && l.ends_with("},")), "{out}");
        assert!(lines[3].starts_with("  {") && lines[3].ends_with('}'), "{out}");
    }
    for args in [vec!["find", v, "/", "--tag", "none", "--json"], vec!["rec", "ls", v, "empty", "--json"]] {
        assert_eq!(e.json(&args), serde_json::json!([]));
    }
}
