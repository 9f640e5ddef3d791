//! Where the passphrase comes from (issue 14): a prompt on the controlling terminal even
//! when standard input is redirected (run under `script(1)`, which gives the command a
//! pseudo-terminal, answering at the prompt), and `--passphrase-command`.

mod common;

use std::io::{Read, Write};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{sqlvault, Env};

/// Runs `shell_cmd` under `script -qec` (a pseudo-terminal as controlling terminal),
/// with no passphrase in the environment; once `prompt` shows on the terminal, types
/// `answer` and Enter. Returns the exit status and everything the terminal showed.
fn on_a_terminal(shell_cmd: &str, prompt: &str, answer: &str) -> (Option<i32>, String) {
    let mut child = Command::new("script")
        .args(["-qec", shell_cmd, "/dev/null"])
        .env_remove("SQLVAULT_PASSPHRASE")
        .env_remove("SQLVAULT_NEW_PASSPHRASE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script(1) from util-linux (Debian bsdutils)");
    let mut out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = out.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains(prompt) {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(chunk) => seen.extend(chunk),
            Err(_) => panic!("no prompt {prompt:?} on the terminal; it showed {:?}", String::from_utf8_lossy(&seen)),
        }
    }
    // The prompt is written just before echo is turned off; type as a person would,
    // a moment after it shows.
    std::thread::sleep(Duration::from_millis(300));
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(format!("{answer}\r").as_bytes()).unwrap();
    stdin.flush().unwrap();
    let status = child.wait().unwrap();
    drop(stdin);
    reader.join().unwrap();
    seen.extend(rx.try_iter().flatten());
    (status.code(), String::from_utf8_lossy(&seen).into_owned())
}

fn quoted(p: &std::path::Path) -> String {
    format!("'{}'", p.display())
}

#[test]
fn a_redirected_standard_input_still_gets_a_prompt_on_the_terminal() {
    let e = Env::new();
    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let file = e.path("data.bin");
    std::fs::write(&file, &data).unwrap();
    let bin = env!("CARGO_BIN_EXE_sqlvault");
    let cmd = format!("{bin} rec put {} blobs key1 - < {}", quoted(&e.vault), quoted(&file));
    let (code, screen) = on_a_terminal(&cmd, "Passphrase: ", "pw");
    assert_eq!(code, Some(0), "terminal showed: {screen}");
    let out = sqlvault().args(["rec", "get", e.v(), "blobs", "key1"]).output().unwrap();
    assert!(out.status.success());
    assert_eq!(out.stdout, data, "the value came from the redirected standard input");

    // A wrong answer at the prompt is exit code 2, and nothing is written.
    let cmd = format!("{bin} rec put {} blobs key2 - < {}", quoted(&e.vault), quoted(&file));
    let (code, screen) = on_a_terminal(&cmd, "Passphrase: ", "not the passphrase");
    assert_eq!(code, Some(2), "terminal showed: {screen}");
    e.fails(4, &["rec", "get", e.v(), "blobs", "key2"]);
}

#[test]
fn init_asks_twice_on_the_terminal() {
    let e = Env::new();
    let v = e.path("new.vault");
    let bin = env!("CARGO_BIN_EXE_sqlvault");
    // `init` with standard input from /dev/null: both prompts still come.
    let cmd = format!("{bin} init {} --kdf-memory-mib 1 --kdf-iterations 1 < /dev/null", quoted(&v));
    let mut child = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env_remove("SQLVAULT_PASSPHRASE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    for prompt in ["New passphrase: ", "Repeat passphrase: "] {
        while !String::from_utf8_lossy(&seen).contains(prompt) {
            let n = out.read(&mut buf).unwrap();
            assert!(n > 0, "no {prompt:?}: {:?}", String::from_utf8_lossy(&seen));
            seen.extend(&buf[..n]);
        }
        std::thread::sleep(Duration::from_millis(300));
        stdin.write_all(b"s3cret\r").unwrap();
        stdin.flush().unwrap();
    }
    assert!(child.wait().unwrap().success(), "{:?}", String::from_utf8_lossy(&seen));
    let ok = sqlvault().env("SQLVAULT_PASSPHRASE", "s3cret").args(["ls", v.to_str().unwrap()]).output().unwrap();
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
}

#[test]
fn without_a_terminal_or_passphrase_the_error_says_what_to_do() {
    let e = Env::new();
    // setsid: a new session without a controlling terminal, as under cron.
    let out = Command::new("setsid")
        .args(["-w", env!("CARGO_BIN_EXE_sqlvault"), "ls", e.v()])
        .env_remove("SQLVAULT_PASSPHRASE")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no terminal to prompt on") && err.contains("--passphrase-command"), "{err}");
}

/// Runs with `--passphrase-command CMD` and no passphrase in the environment.
fn with_command(cmd: &str, args: &[&str]) -> Output {
    sqlvault().env_remove("SQLVAULT_PASSPHRASE").arg("--passphrase-command").arg(cmd).args(args).output().unwrap()
}

#[test]
fn passphrase_command_gives_the_passphrase() {
    let e = Env::new();
    let out = with_command("echo pw", &["mkdir", e.v(), "/a"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Only the first line counts; the output is never shown.
    let out = with_command("printf 'pw\\nsecond line\\n'", &["ls", e.v()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "a\n");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("second"));
    // The command runs through a shell, and does not see the passphrase variables.
    let out = sqlvault()
        .env("SQLVAULT_PASSPHRASE", "wrong")
        .args(["--passphrase-command", "echo \"${SQLVAULT_PASSPHRASE:-pw}\" | tr -d x", "ls", e.v()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // `init` takes its new passphrase from it too.
    let v2 = e.path("second.vault");
    let v2 = v2.to_str().unwrap();
    let out = with_command("echo other", &["init", v2, "--kdf-memory-mib", "1", "--kdf-iterations", "1"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(e.run_with("other", &["ls", v2]).status.success());
}

#[test]
fn a_failing_passphrase_command_is_a_clear_error() {
    let e = Env::new();
    for (cmd, says) in [
        ("exit 3", "passphrase command failed (exit status 3)"),
        ("true", "printed no passphrase"),
        ("echo wrong", "wrong passphrase"),
    ] {
        let out = with_command(cmd, &["ls", e.v()]);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {}", String::from_utf8_lossy(&out.stderr));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("sqlvault: ") && err.to_lowercase().contains(says), "{cmd}: {err}");
    }
    // It is one of the secret sources, not a second one.
    let out = sqlvault().args(["--passphrase-command", "echo pw", "--key-file", "/nonexistent", "ls", e.v()]).output();
    assert_eq!(out.unwrap().status.code(), Some(1));
}
