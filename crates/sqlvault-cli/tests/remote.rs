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
