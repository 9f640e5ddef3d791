//! A CLI that fits its ecosystem (issue 14): completions and a man page generated from
//! the clap definitions, help that says what every option is for, -q/-v, human sizes,
//! labelled times, streamed JSON, and clear exit codes for a directory given as the
//! vault or a malformed find condition.

mod common;

use std::process::Command;

use common::{sqlvault, Env};

fn stdout_of(args: &[&str]) -> String {
    let out = sqlvault().args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn completions_for_bash_zsh_and_fish() {
    let bash = stdout_of(&["completions", "bash"]);
    assert!(bash.contains("_sqlvault()") && bash.contains("snapshot") && bash.contains("--passphrase-command"));
    // The script is valid bash, and completes a subcommand once sourced.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("sqlvault.bash");
    std::fs::write(&f, &bash).unwrap();
    let check = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source '{}'; COMP_WORDS=(sqlvault snaps); COMP_CWORD=1; _sqlvault sqlvault snaps sqlvault; echo \"${{COMPREPLY[@]}}\"",
            f.display()
        ))
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
    let words = String::from_utf8_lossy(&check.stdout);
    assert!(words.split_whitespace().any(|w| w == "snapshots"), "{words}");

    let zsh = stdout_of(&["completions", "zsh"]);
    assert!(zsh.starts_with("#compdef sqlvault") && zsh.contains("batch"));
    let fish = stdout_of(&["completions", "fish"]);
    assert!(fish.contains("complete -c sqlvault") && fish.contains("forget"));
    let out = sqlvault().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn man_page_covers_every_command() {
    let man = stdout_of(&["man"]);
    assert!(man.contains(".TH sqlvault 1"));
    for section in ["SQLVAULT BATCH", "SQLVAULT SNAPSHOT FORGET", "SQLVAULT REC PUT", "SQLVAULT FIND"] {
        assert!(man.contains(&format!(".SH \"{section}\"")), "no section {section}");
    }
    assert!(man.contains("SQLVAULT_PASSPHRASE") && man.contains("Exit codes"));
    // Every exit code (enum Exit), 7 and 130 included.
    assert!(man.contains("replicator holds its lease") && man.contains("130"));
    // Rendered by the real man(1) when it is installed (it fails on broken roff).
    if Command::new("man").arg("--version").output().is_ok_and(|o| o.status.success()) {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("sqlvault.1");
        std::fs::write(&f, &man).unwrap();
        let out = Command::new("man").arg("-l").arg(&f).env("MANPAGER", "cat").env("MANWIDTH", "100").output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stdout).contains("keep-going"));
    }
}

#[test]
fn help_says_what_everything_is() {
    let help = stdout_of(&["--help"]);
    assert!(help.contains("Exit codes:") && help.contains("SQLVAULT_PASSPHRASE") && help.contains("/dev/tty"));
    assert!(help.contains("  7   the remote is busy") && help.contains("  130 interrupted"), "{help}");
    // Arguments that had no help before.
    let ls = stdout_of(&["ls", "--help"]);
    assert!(ls.contains("<VAULT>  The vault file") && ls.contains("--json") && ls.contains("One JSON object"), "{ls}");
    let rm = stdout_of(&["rm", "--help"]);
    assert!(rm.contains("Remove a directory and everything below it"), "{rm}");
    let ln = stdout_of(&["ln", "--help"]);
    assert!(ln.contains("Make a symbolic link"), "{ln}");
    // keygen opens no vault: no vault options in its help.
    let keygen = stdout_of(&["keygen", "--help"]);
    for opt in ["--passphrase-file <", "--key-file <", "--cache-mib", "--durability"] {
        assert!(!keygen.contains(opt), "keygen lists {opt}: {keygen}");
    }
}

#[test]
fn quiet_and_verbose() {
    let e = Env::new();
    let host = e.path("f");
    std::fs::write(&host, "hello").unwrap();
    let out = sqlvault().args(["put", e.v(), host.to_str().unwrap(), "/f", "-q"]).output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "-q: nothing but errors");
    let out = sqlvault().args(["snapshot", e.v(), "s1"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("snapshot s1: 1 files"));
    let out = sqlvault().args(["-v", "ls", e.v()]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("opened ") && err.contains("key derivation"), "{err}");
    // Errors are not silenced by -q.
    let out = sqlvault().args(["-q", "cat", e.v(), "/nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("sqlvault: "));
    let out = sqlvault().args(["-q", "-v", "ls", e.v()]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn human_sizes_and_labelled_times() {
    let e = Env::new();
    let host = e.path("big");
    std::fs::write(&host, vec![7u8; 3 * 1024 * 1024 / 2]).unwrap();
    e.ok(&["put", e.v(), host.to_str().unwrap(), "/big"]);
    e.ok(&["snapshot", e.v(), "s1"]);
    let long = e.ok(&["ls", e.v(), "-l"]);
    assert!(long.contains(" 1572864 "), "{long}");
    let human = e.ok(&["ls", e.v(), "-l", "-h"]);
    assert!(human.contains("1.50 MiB") && human.starts_with("-rw"), "{human}");
    let info = e.ok(&["info", e.v()]);
    assert!(info.contains("logical size:   1.50 MiB (1572864 bytes)"), "{info}");
    let snaps = e.ok(&["snapshots", e.v()]);
    assert!(snaps.contains("1.50 MiB"), "{snaps}");

    // Times carry their offset, in the local zone (TZ).
    let at = |tz: &str| {
        let out = sqlvault().env("TZ", tz).args(["stat", e.v(), "/big"]).output().unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    let utc = at("UTC");
    assert!(utc.lines().any(|l| l.starts_with(" mtime: ") && l.ends_with(" +00:00")), "{utc}");
    let india = at("IST-5:30");
    assert!(india.lines().any(|l| l.starts_with(" mtime: ") && l.ends_with(" +05:30")), "{india}");
    let j = e.json(&["snapshots", e.v(), "--json"]);
    assert!(j[0]["created"].as_str().unwrap().ends_with('Z'), "JSON times are UTC");
}

#[test]
fn long_listings_stream_one_json_object_a_line() {
    let e = Env::new();
    e.ok(&["mkdir", e.v(), "/d"]);
    let script: String = (0..300).map(|i| format!("touch /d/f{i:03}\n")).collect();
    assert!(e.run_stdin(&["batch", e.v()], script.as_bytes()).status.success());
    let text = e.ok(&["ls", e.v(), "/d", "--json"]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 302, "[, 300 objects, ]");
    assert_eq!((lines[0], lines[301]), ("[", "]"));
    let first: serde_json::Value = serde_json::from_str(lines[1].trim_end_matches(',')).unwrap();
    assert_eq!(first["name"], "f000");
    let all: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(all.as_array().unwrap().len(), 300);
    // Every listing takes --json.
    for args in [
        vec!["ls", e.v(), "-R", "--json"],
        vec!["snapshots", e.v(), "--json"],
        vec!["key", "ls", e.v(), "--json"],
        vec!["rec", "ls", e.v(), "--json"],
        vec!["find", e.v(), "--name", "f1*", "--json"],
        vec!["tags", e.v(), "/d", "--json"],
        vec!["info", e.v(), "--json"],
        vec!["stat", e.v(), "/d", "--json"],
        vec!["fsck", e.v(), "--json"],
    ] {
        e.json(&args);
    }
}

#[test]
fn a_directory_is_not_a_vault_and_a_bad_condition_is_a_usage_error() {
    let e = Env::new();
    let err = e.fails(2, &["ls", e.dir.path().to_str().unwrap()]);
    assert!(err.contains("not a vault"), "{err}");
    e.ok(&["touch", e.v(), "/a"]);
    e.ok(&["tag", e.v(), "/a", "iso=400"]);
    for bad in ["iso>>4", "iso=<4", "iso<>4", "iso=!4"] {
        let err = e.fails(1, &["find", e.v(), "--tag", bad]);
        assert!(err.contains("unknown operator"), "{bad}: {err}");
    }
    assert_eq!(e.ok(&["find", e.v(), "--tag", "iso>=4"]), "/a\n");
}
