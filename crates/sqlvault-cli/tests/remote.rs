//! `sqlvault remote add|ls|log`, `push`, `pull` and `clone` end to end against a real
//! S3-compatible server on loopback (VersityGW, see the library's tests/common/s3.rs).

mod common;
#[path = "../../sqlvault/tests/common/s3.rs"]
mod s3;

use common::{sqlvault, Env};
use s3::S3Server;

fn run(args: &[&str], extra_env: &[(&str, &str)]) -> std::process::Output {
    let mut c = sqlvault();
    c.args(args);
    for (k, v) in extra_env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn ok(args: &[&str]) -> String {
    let out = run(args, &[]);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn push_clone_pull_and_a_refused_push() {
    let server = S3Server::start(); // also sets the AWS_* test credentials, inherited by the children
    let url = format!("{}/v", server.bucket("cli"));
    let a = Env::new();
    std::fs::create_dir_all(a.path("src/sub")).unwrap();
    std::fs::write(a.path("src/sub/x.txt"), b"hello").unwrap();
    std::fs::write(a.path("src/big"), vec![7u8; 100_000]).unwrap();
    ok(&["put", a.v(), a.path("src").to_str().unwrap(), "/src"]);
    ok(&["tag", a.v(), "/src/sub/x.txt", "camera=X100V"]);
    ok(&["remote", "add", a.v(), "backup", &url, "--endpoint", &server.endpoint]);
    let ls = ok(&["remote", "ls", a.v(), "--json"]);
    assert!(ls.contains("\"backup\"") && ls.contains(&server.endpoint) && !ls.contains(s3::SECRET_KEY), "{ls}");

    let pushed: serde_json::Value = serde_json::from_str(&ok(&["push", a.v(), "backup", "--json"])).unwrap();
    assert_eq!(pushed["outcome"], "pushed", "{pushed}");

    let b = Env::new();
    let dest = b.path("clone.vault");
    ok(&["clone", &url, dest.to_str().unwrap(), "--endpoint", &server.endpoint]);
    let d = dest.to_str().unwrap();
    assert_eq!(ok(&["ls", d, "/", "-R", "-l"]), ok(&["ls", a.v(), "/", "-R", "-l"]));
    assert_eq!(ok(&["cat", d, "/src/sub/x.txt"]), "hello");
    assert_eq!(ok(&["tags", d, "/src/sub/x.txt"]), ok(&["tags", a.v(), "/src/sub/x.txt"]));
    assert!(ok(&["fsck", d]).starts_with("clean"));

    // A change on the clone, pushed; the first vault changes too: its push is refused
    // with exit code 6 and the remote is untouched.
    ok(&["mkdir", d, "/from-clone"]);
    ok(&["push", d, "origin"]);
    ok(&["mkdir", a.v(), "/from-a"]);
    let out = run(&["push", a.v(), "backup"], &[]);
    assert_eq!(out.status.code(), Some(6), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("sqlvault: ") && err.contains("pull"), "{err}");
    let log = ok(&["remote", "log", a.v(), "backup", "--json"]);
    assert_eq!(serde_json::from_str::<serde_json::Value>(&log).unwrap().as_array().unwrap().len(), 2);

    // A third replica that did not change pulls the clone's change.
    let c = Env::new();
    let third = c.path("third.vault");
    ok(&["clone", &url, third.to_str().unwrap(), "--endpoint", &server.endpoint]);
    ok(&["mkdir", d, "/second"]);
    ok(&["push", d, "origin"]);
    let pulled: serde_json::Value =
        serde_json::from_str(&ok(&["pull", third.to_str().unwrap(), "origin", "--json"])).unwrap();
    assert_eq!(pulled["outcome"], "pulled", "{pulled}");
    assert_eq!(ok(&["ls", third.to_str().unwrap(), "/"]), ok(&["ls", d, "/"]));
}

#[test]
fn errors_are_one_line() {
    let server = S3Server::start();
    let url = format!("{}/v", server.bucket("errs"));
    let a = Env::new();
    let out = run(&["push", a.v(), "nope"], &[]);
    assert_eq!(out.status.code(), Some(4));
    let out = run(&["remote", "add", a.v(), "r", "http://not-s3"], &[]);
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
    ok(&["remote", "add", a.v(), "r", &url, "--endpoint", &server.endpoint]);
    // Wrong credentials: an environment error on one line, nothing written.
    let out = run(&["push", a.v(), "r"], &[("AWS_SECRET_ACCESS_KEY", "wrong")]);
    assert_eq!(out.status.code(), Some(5), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(server.objects("errs", "v").is_empty());
    // Clone with a wrong passphrase: exit code 2, no file.
    ok(&["push", a.v(), "r"]);
    let dest = a.path("c.vault");
    let mut c = sqlvault();
    c.env("SQLVAULT_PASSPHRASE", "wrong").args(["clone", &url, dest.to_str().unwrap(), "--endpoint", &server.endpoint]);
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!dest.exists());
}

#[test]
fn pull_merges_and_push_pull_retries() {
    let server = S3Server::start();
    let url = format!("{}/v", server.bucket("merge"));
    let a = Env::new();
    ok(&["mkdir", a.v(), "/shared"]);
    ok(&["remote", "add", a.v(), "r", &url, "--endpoint", &server.endpoint]);
    ok(&["push", a.v(), "r"]);
    let b = Env::new();
    let d = b.path("b.vault");
    let d = d.to_str().unwrap();
    ok(&["clone", &url, d, "--endpoint", &server.endpoint]);
    std::fs::write(a.path("note-a"), b"from a").unwrap();
    ok(&["put", a.v(), a.path("note-a").to_str().unwrap(), "/shared/note"]);
    ok(&["push", a.v(), "r"]);
    std::fs::write(b.path("note-b"), b"from b").unwrap();
    ok(&["put", d, b.path("note-b").to_str().unwrap(), "/shared/note"]);
    ok(&["mkdir", d, "/only-b"]);
    // A plain push still exits 6 when behind (scripts rely on it); --pull merges and retries.
    let out = run(&["push", d, "origin"], &[]);
    assert_eq!(out.status.code(), Some(6), "{}", String::from_utf8_lossy(&out.stderr));
    let out = run(&["push", d, "origin", "--pull", "--json"], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["push"]["outcome"], "pushed", "{j}");
    assert_eq!(j["pulls"][0]["outcome"], "merged", "{j}");
    let kept = j["pulls"][0]["conflicts"][0]["kept_as"].as_str().unwrap().to_string();
    assert_eq!(j["pulls"][0]["conflicts"][0]["what"], "/shared/note", "{j}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("conflict: /shared/note"));
    assert_eq!(ok(&["cat", d, "/shared/note"]), "from a");
    assert_eq!(ok(&["cat", d, &kept]), "from b");
    // The first device pulls the merge (a fast-forward).
    let pulled: serde_json::Value = serde_json::from_str(&ok(&["pull", a.v(), "r", "--json"])).unwrap();
    assert_eq!(pulled["outcome"], "pulled", "{pulled}");
    assert_eq!(ok(&["ls", a.v(), "/", "-R"]), ok(&["ls", d, "/", "-R"]));
    assert!(ok(&["fsck", d]).starts_with("clean"));
}

/// Waits until `f` holds, at most 20 s.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !f() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn replicate_holds_the_lease_pushes_changes_and_stops_on_sigint() {
    use std::io::{BufRead, BufReader};
    let server = S3Server::start();
    let url = format!("{}/v", server.bucket("repl"));
    let a = Env::new();
    ok(&["remote", "add", a.v(), "r", &url, "--endpoint", &server.endpoint]);
    ok(&["push", a.v(), "r"]);
    let b = Env::new();
    let d = b.path("b.vault");
    let d = d.to_str().unwrap();
    ok(&["clone", &url, d, "--endpoint", &server.endpoint]);

    let mut child = sqlvault()
        .args(["replicate", a.v(), "r", "--every", "200ms", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["push"]["outcome"], "up_to_date", "{first}");

    // A second replicator of the same remote (another device) is refused while the
    // first holds the lease.
    let out = run(&["replicate", d, "origin", "--once"], &[]);
    assert_eq!(out.status.code(), Some(7), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("replicated by device") && err.lines().count() == 1, "{err}");

    // A change made while replicate runs reaches the other device.
    ok(&["mkdir", a.v(), "/made-while-replicating"]);
    eventually("the change to reach the remote", || {
        ok(&["pull", d, "origin"]);
        ok(&["ls", d, "/"]).contains("made-while-replicating")
    });

    // SIGINT: the current round ends, the lease is released, exit code 130.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains("interrupted") && stderr.contains("lease released"), "{stderr}");
    let summary = lines.map(|l| l.unwrap()).last().unwrap();
    let summary: serde_json::Value = serde_json::from_str(&summary).unwrap();
    assert_eq!(summary["summary"]["interrupted"], true, "{summary}");
    assert!(summary["summary"]["pushes"].as_u64().unwrap() >= 1, "{summary}");
    // Released: the other device replicates now.
    let out = run(&["replicate", d, "origin", "--once", "--json"], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
