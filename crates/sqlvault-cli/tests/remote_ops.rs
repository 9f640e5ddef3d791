//! `sqlvault remote prune`, `restore --at | --commit` and key slots that travel, end to
//! end against a real S3-compatible server on loopback (VersityGW, see the library's
//! tests/common/s3.rs): outputs, JSON and exit codes (1 usage, 4 not found, 7 locked).

mod common;
#[path = "../../sqlvault/tests/common/s3.rs"]
mod s3;

use common::{sqlvault, Env};
use s3::S3Server;

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("{e}: {s}"))
}

/// A vault with three pushed commits, each with its own content of /f.
fn three_pushes(server: &S3Server, bucket: &str) -> (Env, String) {
    let url = format!("{}/v", server.bucket(bucket));
    let a = Env::new();
    a.ok(&["remote", "add", a.v(), "r", &url, "--endpoint", &server.endpoint]);
    for i in 0..3 {
        let host = a.path("f");
        std::fs::write(&host, format!("version {i} ").repeat(2000)).unwrap();
        a.ok(&["put", a.v(), host.to_str().unwrap(), "/f"]);
        a.ok(&["push", a.v(), "r"]);
    }
    (a, url)
}

#[test]
fn prune_with_retention_dry_run_and_json() {
    let server = S3Server::start();
    let (a, _url) = three_pushes(&server, "prune");
    assert_eq!(server.count("prune", "v", "commits"), 3);
    // No rule, a bad duration: usage errors (exit code 1), nothing deleted.
    let err = a.fails(1, &["remote", "prune", a.v(), "r"]);
    assert!(err.contains("retention rule"), "{err}");
    let out = a.run(&["remote", "prune", a.v(), "r", "--keep-within", "30x"]);
    assert_eq!(out.status.code(), Some(1));
    let err = a.fails(4, &["remote", "prune", a.v(), "nope", "--keep-last", "1"]);
    assert!(err.contains("remote nope"), "{err}");

    let dry = json(&a.ok(&["remote", "prune", a.v(), "r", "--keep-last", "1", "--grace", "0", "--dry-run", "--json"]));
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["kept_commits"].as_array().unwrap().len(), 1);
    assert_eq!(dry["deleted_commits"].as_array().unwrap().len(), 2);
    assert_eq!(server.count("prune", "v", "commits"), 3);

    // The default grace (1h) keeps everything just written.
    let kept = json(&a.ok(&["remote", "prune", a.v(), "r", "--keep-last", "1", "--json"]));
    assert_eq!(kept["objects_deleted"], 0);
    assert_eq!(server.count("prune", "v", "commits"), 3);

    let out = a.run(&["remote", "prune", a.v(), "r", "--keep-last", "1", "--grace", "0"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let note = String::from_utf8_lossy(&out.stderr);
    assert!(note.contains("deleted 2 commits") && note.contains("kept 1 commits"), "{note}");
    assert_eq!(server.count("prune", "v", "commits"), 1);
    assert_eq!(a.ok(&["remote", "log", a.v(), "r"]).lines().count(), 1);
}

#[test]
fn restore_at_or_commit_from_the_command_line() {
    let server = S3Server::start();
    let (a, _url) = three_pushes(&server, "restore");
    let log = json(&a.ok(&["remote", "log", a.v(), "r", "--json"]));
    let first = log[2]["id"].as_str().unwrap().trim_start_matches("commits/")[..12].to_string();
    let v0 = "version 0 ".repeat(2000);
    let v2 = "version 2 ".repeat(2000);

    // One path, to another place; the live /f stays.
    let r = json(&a.ok(&["restore", a.v(), "--commit", &first, "/f", "--to", "/f-old", "--json"]));
    assert_eq!(r["restored"]["files"], 1, "{r}");
    assert_eq!(a.ok(&["cat", a.v(), "/f-old"]), v0);
    assert_eq!(a.ok(&["cat", a.v(), "/f"]), v2);
    // The whole tree, to the newest commit pushed at or before now: /f-old goes again.
    a.ok(&["restore", a.v(), "--at", "0s", "--remote", "r"]);
    assert!(a.ok(&["ls", a.v(), "/"]).lines().all(|l| !l.contains("f-old")));
    a.fsck_clean();
    // A snapshot restore is unchanged.
    a.ok(&["snapshot", a.v(), "s"]);
    a.ok(&["rm", a.v(), "/f"]);
    a.ok(&["restore", a.v(), "s", "/f"]);
    assert_eq!(a.ok(&["cat", a.v(), "/f"]), v2);

    // Usage and lookup errors, one line each.
    a.fails(1, &["restore", a.v()]);
    a.fails(1, &["restore", a.v(), "--commit", &first, "/f", "/g"]);
    a.fails(1, &["restore", a.v(), "s", "--json"]);
    a.fails(4, &["restore", a.v(), "--commit", "0123456789ab"]);
    a.fails(4, &["restore", a.v(), "--commit", &first, "--remote", "nope"]);
    a.fails(1, &["restore", a.v(), "--at", "yesterday-ish"]);
}

#[test]
fn a_push_during_a_prune_exits_7_and_goes_through_after() {
    let server = S3Server::start();
    let (a, url) = three_pushes(&server, "locked");
    let b = Env::new();
    let bv = b.path("b.vault");
    let bv = bv.to_str().unwrap();
    b.ok(&["clone", &url, bv, "--endpoint", &server.endpoint]);
    b.ok(&["mkdir", bv, "/from-b"]);
    // A prune in this process holds the lock while the CLI runs.
    let va = sqlvault::Vault::open(&a.vault, &sqlvault::Secret::passphrase("pw"), sqlvault::EngineConfig::default())
        .unwrap();
    let (entered_tx, entered_rx) = std::sync::mpsc::channel::<()>();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        let va = &va;
        let pruner = s.spawn(move || {
            let once = std::sync::Once::new();
            let go_rx = std::sync::Mutex::new(go_rx);
            let progress = |p: &sqlvault::Progress| {
                if p.phase == "commits" {
                    once.call_once(|| {
                        entered_tx.send(()).unwrap();
                        go_rx.lock().unwrap().recv().unwrap();
                    });
                }
            };
            let options = sqlvault::remote::PruneOptions { keep_last: 1, ..Default::default() };
            va.remote("r").prune(&options, &sqlvault::Ops::default().progress(&progress))
        });
        entered_rx.recv().unwrap();
        let err = b.fails(7, &["push", bv, "origin"]);
        assert!(err.contains("locked") && err.contains("remote prune"), "{err}");
        let err = b.fails(7, &["remote", "prune", bv, "origin", "--keep-last", "1"]);
        assert!(err.contains("locked"), "{err}");
        go_tx.send(()).unwrap();
        pruner.join().unwrap().unwrap();
    });
    let pushed = json(&b.ok(&["push", bv, "origin", "--json"]));
    assert_eq!(pushed["outcome"], "pushed");
}

#[test]
fn passwd_then_push_the_new_passphrase_clones_the_old_does_not() {
    let server = S3Server::start();
    let (a, url) = three_pushes(&server, "passwd");
    let out = sqlvault().env("SQLVAULT_NEW_PASSPHRASE", "new pw").args(["passwd", a.v()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let pushed = json(
        &a.run_with("new pw", &["push", a.v(), "r", "--json"]).stdout.iter().map(|b| *b as char).collect::<String>(),
    );
    assert_eq!(pushed["outcome"], "up_to_date");
    let dest = a.path("c.vault");
    let d = dest.to_str().unwrap();
    let out = a.run(&["clone", &url, d, "--endpoint", &server.endpoint]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!dest.exists());
    let out = a.run_with("new pw", &["clone", &url, d, "--endpoint", &server.endpoint]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
