//! Where the CLI gets secrets from: a key file, a passphrase file, the
//! `SQLVAULT_PASSPHRASE` environment variable, or a prompt on the terminal, in that
//! order. Never from argv. The environment variable is removed from this process once
//! read, so child processes do not inherit it.

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
}

fn read_passphrase_file(path: &Path) -> Result<Zeroizing<String>, CliError> {
    let raw = Zeroizing::new(
        std::fs::read(path)
            .map_err(|e| CliError::secret(format!("cannot read passphrase file {}: {e}", path.display())))?,
    );
    let text = std::str::from_utf8(&raw).map_err(|_| CliError::secret("passphrase file is not UTF-8"))?;
    let line = text.split('\n').next().unwrap_or("").trim_end_matches('\r');
    if line.is_empty() {
        return Err(CliError::usage(format!("passphrase file {} is empty", path.display())));
    }
    Ok(Zeroizing::new(line.to_string()))
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

fn prompt(label: &str) -> Result<Zeroizing<String>, CliError> {
    if !std::io::stdin().is_terminal() {
        return Err(CliError::usage(format!(
            "no passphrase given: use --passphrase-file, --key-file or {ENV_PASSPHRASE} (no terminal to prompt on)"
        )));
    }
    rpassword::prompt_password(label)
        .map(Zeroizing::new)
        .map_err(|e| CliError::usage(format!("cannot read passphrase: {e}")))
}

/// A key file that is missing, unreadable or not 32 bytes is a missing key: exit 2,
/// like a wrong one (README's exit codes).
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
    if let Some(p) = take_env(ENV_PASSPHRASE) {
        return Ok(Secret::Passphrase(p));
    }
    Ok(Secret::Passphrase(prompt("Passphrase: ")?))
}

/// A new secret: from a key file, a passphrase file, an environment variable, or a
/// prompt asked twice.
pub fn new_secret(key_file: Option<&Path>, passphrase_file: Option<&Path>, env: &str) -> Result<Secret, CliError> {
    if let Some(k) = key_file {
        return self::key_file(k);
    }
    if let Some(p) = passphrase_file {
        return Ok(Secret::Passphrase(read_passphrase_file(p)?));
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
