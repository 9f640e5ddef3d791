//! Where the CLI gets secrets from: a key file, a passphrase file, a passphrase
//! command, the `SQLVAULT_PASSPHRASE` environment variable, or a prompt on the
//! terminal, in that order. Never from argv. The environment variable is removed from
//! this process once read, so child processes do not inherit it.
//!
//! The prompt is written to and read from `/dev/tty`, the controlling terminal, so a
//! redirected standard input (`rec put V c k - < data.bin`) still gets a prompt, as
//! with age, borg or ssh. Without a controlling terminal (cron, CI) it is an error.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use sqlvault::Secret;
use zeroize::Zeroizing;

use crate::CliError;

pub const ENV_PASSPHRASE: &str = "SQLVAULT_PASSPHRASE";
pub const ENV_NEW_PASSPHRASE: &str = "SQLVAULT_NEW_PASSPHRASE";

/// Secret options shared by every command that opens a vault.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SecretArgs {
    /// Read the passphrase from this file (first line; trailing newline ignored).
    #[arg(long, global = true, value_name = "FILE")]
    pub passphrase_file: Option<PathBuf>,
    /// Unlock with a raw 32-byte key file instead of a passphrase.
    #[arg(long, global = true, value_name = "FILE", conflicts_with = "passphrase_file")]
    pub key_file: Option<PathBuf>,
    /// Run CMD through `sh -c` and use the first line of its standard output as the
    /// passphrase (like restic's --password-command); a failing CMD is exit code 2.
    #[arg(long, global = true, value_name = "CMD", conflicts_with_all = ["passphrase_file", "key_file"])]
    pub passphrase_command: Option<String>,
}

/// The first line of a secret's text (`\r\n` or `\n`), as a passphrase.
fn first_line(raw: &[u8], what: &str) -> Result<Zeroizing<String>, CliError> {
    let text = std::str::from_utf8(raw).map_err(|_| CliError::secret(format!("{what} is not UTF-8")))?;
    Ok(Zeroizing::new(text.split('\n').next().unwrap_or("").trim_end_matches('\r').to_string()))
}

/// Runs `--passphrase-command` through `sh -c`: its standard output is captured (only
/// the first line is used, and nothing of it is printed), standard input and error stay
/// the terminal's so the command may itself prompt. The passphrase variables are not
/// passed on to it.
pub fn run_passphrase_command(cmd: &str) -> Result<Zeroizing<String>, CliError> {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .env_remove(ENV_PASSPHRASE)
        .env_remove(ENV_NEW_PASSPHRASE)
        .stdin(std::process::Stdio::inherit())
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| CliError::secret(format!("cannot run passphrase command: {e}")))?;
    let stdout = Zeroizing::new(out.stdout);
    if !out.status.success() {
        let how = match out.status.code() {
            Some(c) => format!("exit status {c}"),
            None => "killed by a signal".to_string(),
        };
        return Err(CliError::secret(format!("passphrase command failed ({how})")));
    }
    let line = first_line(&stdout, "passphrase command output")?;
    if line.is_empty() {
        return Err(CliError::secret("passphrase command printed no passphrase"));
    }
    Ok(line)
}

fn read_passphrase_file(path: &Path) -> Result<Zeroizing<String>, CliError> {
    let raw = Zeroizing::new(
        std::fs::read(path)
            .map_err(|e| CliError::secret(format!("cannot read passphrase file {}: {e}", path.display())))?,
    );
    let line = first_line(&raw, "passphrase file")?;
    if line.is_empty() {
        return Err(CliError::usage(format!("passphrase file {} is empty", path.display())));
    }
    Ok(line)
}

/// Reads and removes an environment variable, and overwrites its value in place.
///
/// `remove_var` alone only unlinks the variable: its bytes stay in the block the
/// kernel copied at exec, which `/proc/PID/environ` shows for the life of the process
/// and of any child forked from it (the `mount -d` server). Zeroing them closes that.
fn take_env(name: &str) -> Option<Zeroizing<String>> {
    let v = std::env::var(name).ok().map(Zeroizing::new);
    if v.is_some() {
        let cname = std::ffi::CString::new(name).ok()?;
        // SAFETY: the CLI reads secrets while it is still single-threaded (before any
        // mount, progress bar or SQLite thread exists), so nothing else touches the
        // environment; `getenv` returns a NUL-terminated string we may overwrite.
        unsafe {
            let p = libc::getenv(cname.as_ptr());
            if !p.is_null() {
                std::ptr::write_bytes(p, 0, libc::strlen(p));
            }
        }
        std::env::remove_var(name);
    }
    v.filter(|s| !s.is_empty())
}

/// Asks on the controlling terminal (`/dev/tty`), whatever standard input is.
fn prompt(label: &str) -> Result<Zeroizing<String>, CliError> {
    if std::fs::OpenOptions::new().read(true).write(true).open("/dev/tty").is_err() {
        return Err(CliError::usage(format!(
            "no passphrase given: use --passphrase-file, --passphrase-command, --key-file or {ENV_PASSPHRASE} \
             (no terminal to prompt on)"
        )));
    }
    rpassword::prompt_password(label)
        .map(Zeroizing::new)
        .map_err(|e| CliError::usage(format!("cannot read passphrase: {e}")))
}

/// A key file that is missing, unreadable or not 32 bytes is a missing key: exit 2,
/// like a wrong one (`Exit::Access`).
fn key_file(path: &Path) -> Result<Secret, CliError> {
    Secret::from_key_file(path).map_err(|e| CliError::secret(e.to_string()))
}

/// The secret that unlocks an existing vault.
pub fn existing(args: &SecretArgs) -> Result<Secret, CliError> {
    if let Some(k) = &args.key_file {
        return key_file(k);
    }
    if let Some(p) = &args.passphrase_file {
        return Ok(Secret::Passphrase(read_passphrase_file(p)?));
    }
    if let Some(c) = &args.passphrase_command {
        return Ok(Secret::Passphrase(run_passphrase_command(c)?));
    }
    if let Some(p) = take_env(ENV_PASSPHRASE) {
        return Ok(Secret::Passphrase(p));
    }
    Ok(Secret::Passphrase(prompt("Passphrase: ")?))
}

/// A new secret: from a key file, a passphrase file, a passphrase command, an
/// environment variable, or a prompt asked twice.
pub fn new_secret(
    key_file: Option<&Path>,
    passphrase_file: Option<&Path>,
    command: Option<&str>,
    env: &str,
) -> Result<Secret, CliError> {
    if let Some(k) = key_file {
        return self::key_file(k);
    }
    if let Some(p) = passphrase_file {
        return Ok(Secret::Passphrase(read_passphrase_file(p)?));
    }
    if let Some(c) = command {
        return Ok(Secret::Passphrase(run_passphrase_command(c)?));
    }
    if let Some(p) = take_env(env) {
        return Ok(Secret::Passphrase(p));
    }
    let a = prompt("New passphrase: ")?;
    if a.is_empty() {
        return Err(CliError::usage("empty passphrase"));
    }
    let b = prompt("Repeat passphrase: ")?;
    if *a != *b {
        return Err(CliError::usage("passphrases do not match"));
    }
    Ok(Secret::Passphrase(a))
}

pub fn is_terminal() -> bool {
    std::io::stderr().is_terminal()
}
