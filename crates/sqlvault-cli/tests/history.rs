//! Snapshots as a backup user expects them (issue 14): `snapshot diff`, `snapshot
//! forget` with a retention policy, and `find` by name or modification time without a tag.

mod common;

use common::Env;

fn tree(e: &Env) {
    let v = e.v();
    e.ok(&["mkdir", v, "/docs/old", "-p"]);
    for (p, body) in [("/docs/a.txt", "alpha"), ("/docs/b.txt", "bravo"), ("/docs/old/c.txt", "charlie")] {
        let host = e.path("tmp");
        std::fs::write(&host, body).unwrap();
        e.ok(&["put", v, host.to_str().unwrap(), p]);
    }
    e.ok(&["ln", v, "-s", "a.txt", "/docs/link"]);
}

#[test]
fn diff_lists_added_removed_and_changed_paths() {
    let e = Env::new();
    let v = e.v();
    tree(&e);
    e.ok(&["snapshot", v, "s1"]);
    assert_eq!(e.ok(&["snapshot", "diff", v, "s1"]), "", "nothing changed since s1");

    let host = e.path("new");
    std::fs::write(&host, "ALPHA, longer").unwrap();
    e.ok(&["put", v, host.to_str().unwrap(), "/docs/a2.txt"]);
    e.ok(&["mv", v, "/docs/a2.txt", "/docs/a.txt"]); // new content under the old name
    e.ok(&["rm", v, "-r", "/docs/old"]);
    e.ok(&["chmod", v, "600", "/docs/b.txt"]); // metadata only
    e.ok(&["mkdir", v, "/new"]);
    e.ok(&["touch", v, "/new/n.txt"]);
    e.ok(&["snapshot", v, "s2"]);

    let expected = ["+ /new/", "+ /new/n.txt", "- /docs/old/", "- /docs/old/c.txt", "M /docs/a.txt", "M /docs/b.txt"];
    let mut got = e.lines(&["snapshot", "diff", v, "s1", "s2"]);
    got.sort();
    let mut want: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(got, want);
    // Against the live tree (no B): the same, until the live tree moves on.
    assert_eq!(e.lines(&["snapshot", "diff", v, "s1"]), got);
    e.ok(&["rm", v, "/docs/link"]);
    assert_eq!(e.lines(&["snapshot", "diff", v, "s2"]), ["- /docs/link"]);
    // Reversed: added and removed swap.
    assert!(e.lines(&["snapshot", "diff", v, "s2", "s1"]).contains(&"+ /docs/old/c.txt".to_string()));

    let j = e.json(&["snapshot", "diff", v, "s1", "s2", "--json"]);
    let items = j.as_array().unwrap();
    assert_eq!(items.len(), 6);
    let a = items.iter().find(|i| i["path"] == "/docs/a.txt").unwrap();
    assert_eq!(
        (a["change"].as_str(), a["kind"].as_str(), a["content"].as_bool()),
        (Some("changed"), Some("file"), Some(true))
    );
    let b = items.iter().find(|i| i["path"] == "/docs/b.txt").unwrap();
    assert_eq!(b["content"].as_bool(), Some(false), "only the mode changed");
    // One object a line (streamed), inside one array.
    assert_eq!(e.ok(&["snapshot", "diff", v, "s1", "s2", "--json"]).lines().count(), 6 + 2);

    e.fails(4, &["snapshot", "diff", v, "s1", "nope"]);
}

#[test]
fn forget_keeps_what_the_policy_says() {
    let e = Env::new();
    let v = e.v();
    tree(&e);
    for i in 1..=5 {
        e.ok(&["touch", v, &format!("/docs/f{i}")]);
        e.ok(&["snapshot", v, &format!("s{i}")]);
    }
    let names = |e: &Env| -> Vec<String> {
        e.json(&["snapshots", e.v(), "--json"])
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_string())
            .collect()
    };

    // --dry-run says what it would do and does nothing.
    let plan = e.ok(&["snapshot", "forget", v, "--keep-last", "2", "--dry-run"]);
    let lines: Vec<&str> = plan.lines().collect();
    assert_eq!(lines.len(), 5, "{plan}");
    assert!(lines[0].starts_with("keep   s5") && lines[0].contains("(last)"), "{plan}");
    assert!(lines[1].starts_with("keep   s4"), "{plan}");
    assert!(lines[2..].iter().all(|l| l.starts_with("remove ")), "{plan}");
    assert_eq!(names(&e).len(), 5);

    let j = e.json(&["snapshot", "forget", v, "--keep-last", "3", "--dry-run", "--json"]);
    let kept: Vec<&str> =
        j.as_array().unwrap().iter().filter(|d| d["keep"] == true).map(|d| d["name"].as_str().unwrap()).collect();
    assert_eq!(kept, ["s5", "s4", "s3"]);

    // All five were taken today: --keep-daily 1 keeps the newest of the day.
    e.ok(&["snapshot", "forget", v, "--keep-last", "2", "--keep-daily", "1"]);
    assert_eq!(names(&e), ["s4", "s5"]);
    e.ok(&["snapshot", "forget", v, "--keep-daily", "1"]);
    assert_eq!(names(&e), ["s5"]);
    e.fsck_clean();

    // No rule would remove everything: refused.
    let err = e.fails(1, &["snapshot", "forget", v]);
    assert!(err.contains("--keep-last"), "{err}");
    assert_eq!(names(&e), ["s5"]);
}

#[test]
fn find_by_name_or_time_without_a_tag() {
    let e = Env::new();
    let v = e.v();
    tree(&e);
    // A host file from 2020 keeps its modification time through put.
    let old = e.path("old.jpg");
    std::fs::write(&old, "x").unwrap();
    let t = std::process::Command::new("touch").args(["-d", "2020-01-02 03:04:05 UTC"]).arg(&old).status().unwrap();
    assert!(t.success());
    e.ok(&["put", v, old.to_str().unwrap(), "/docs/old/photo.jpg"]);
    e.ok(&["tag", v, "/docs/old/photo.jpg", "/docs/a.txt", "kind=x"]);

    assert_eq!(e.lines(&["find", v, "--name", "*.txt"]), ["/docs/a.txt", "/docs/b.txt", "/docs/old/c.txt"]);
    assert_eq!(e.lines(&["find", v, "/docs/old", "--name", "c.*"]), ["/docs/old/c.txt"]);
    assert_eq!(e.lines(&["find", v, "--older", "2021-01-01"]), ["/docs/old/photo.jpg"]);
    assert_eq!(e.lines(&["find", v, "--older", "2019-12-31"]), Vec::<String>::new());
    let recent = e.lines(&["find", v, "--newer", "1h", "--name", "*.txt"]);
    assert_eq!(recent, ["/docs/a.txt", "/docs/b.txt", "/docs/old/c.txt"]);
    // With a tag, the time filters the tag's hits.
    assert_eq!(e.lines(&["find", v, "--tag", "kind=x", "--newer", "2021-01-01"]), ["/docs/a.txt"]);
    assert_eq!(e.lines(&["find", v, "--tag", "kind=x", "--older", "2021-01-01T00:00:00Z"]), ["/docs/old/photo.jpg"]);
    let j = e.json(&["find", v, "--name", "photo.jpg", "--json"]);
    assert_eq!(j[0]["path"], "/docs/old/photo.jpg");

    e.fails(1, &["find", v, "--newer", "last tuesday"]);
    e.fails(1, &["find", v]);
    e.fails(4, &["find", v, "/docs/a.txt", "--name", "*"]);
}
