//! `sqlvault batch VAULT`: many commands with one key derivation.
//!
//! Reads standard input one line at a time; each line is a command as on the command
//! line, without `sqlvault` and without the vault (`tag /a.jpg iso=400`,
//! `snapshot rm old`, `rec put c k 'some value'`), split with POSIX shell quoting
//! (`shlex`). Blank lines and lines starting with `#` are skipped. The vault is opened
//! once; each command is its own transaction, as it would be on its own.
//!
//! The first failing command stops the batch (its error is printed with its line
//! number and its exit code is the batch's); with `--keep-going` every line runs and
//! the exit code is the first failure's, after a summary line. Commands that manage
//! secrets or open no vault (`init`, `keygen`, `passwd`, `key add|rm`, `mount`,
//! `batch`, `completions`, `man`) and standard input as a value are refused.

use std::io::BufRead;
use std::path::PathBuf;

use clap::Args;

use crate::meta::{MetaCommand, RecCommand};
use crate::{CliError, Command, Ctx, Exit, KeyCommand};

#[derive(Args, Debug)]
pub struct BatchArgs {
    /// The vault file (opened once for every command).
    vault: PathBuf,
    /// Run every line even after a failure (the exit code is still the first failure's).
    #[arg(short = 'k', long)]
    keep_going: bool,
}

/// Subcommands whose own subcommand comes before the vault (`rec put VAULT ...`).
fn nested(first: &str, second: Option<&str>) -> bool {
    match first {
        "rec" | "key" => true,
        "snapshot" => matches!(second, Some("create" | "ls" | "rm" | "diff" | "forget")),
        _ => false,
    }
}

/// The argument vector for one line: `sqlvault WORD [WORD] VAULT REST...`.
fn argv(words: Vec<String>, vault: &std::ffi::OsStr) -> Vec<std::ffi::OsString> {
    let at = if nested(&words[0], words.get(1).map(String::as_str)) { 2.min(words.len()) } else { 1 };
    let mut out: Vec<std::ffi::OsString> = vec!["sqlvault".into()];
    let mut words = words.into_iter();
    out.extend(words.by_ref().take(at).map(Into::into));
    out.push(vault.to_owned());
    out.extend(words.map(Into::into));
    out
}

/// Why a parsed command cannot run inside a batch, if it cannot.
fn refused(cmd: &Command) -> Option<&'static str> {
    match cmd {
        Command::Init { .. } => Some("init creates a vault"),
        Command::Keygen { .. } => Some("keygen opens no vault"),
        Command::Passwd { .. } | Command::Key(KeyCommand::Add { .. } | KeyCommand::Rm { .. }) => {
            Some("changing key slots asks for secrets; run it on its own")
        }
        Command::Mount { .. } => Some("mount runs until unmounted"),
        Command::Upgrade { .. } => Some("upgrade needs the vault closed; run it on its own"),
        Command::Batch(_) => Some("batch does not nest"),
        Command::Completions { .. } | Command::Man => Some("it opens no vault"),
        Command::Meta(MetaCommand::Rec(RecCommand::Put { value: None, .. })) => {
            Some("standard input is the batch itself: give rec put its VALUE")
        }
        Command::Meta(MetaCommand::Rec(RecCommand::Put { value: Some(v), .. })) if v == "-" => {
            Some("standard input is the batch itself: give rec put its VALUE")
        }
        Command::Meta(MetaCommand::Tag { from: Some(f), .. }) if f.as_os_str() == "-" => {
            Some("standard input is the batch itself: give tag --from a FILE")
        }
        _ => None,
    }
}

/// Parses one line into a command (exit code 1 on a malformed line).
fn parse_line(line: &str, vault: &std::ffi::OsStr) -> Result<Command, CliError> {
    let words = shlex::split(line).ok_or_else(|| CliError::usage("unbalanced quotes"))?;
    let cli = crate::completions::parse(argv(words, vault))
        .map_err(|e| CliError::usage(crate::usage_line(&e.render().to_string())))?;
    if let Some(why) = refused(&cli.command) {
        return Err(CliError::usage(format!("not in a batch: {why}")));
    }
    Ok(cli.command)
}

pub fn run(ctx: &Ctx, args: BatchArgs) -> Result<Exit, CliError> {
    let v = ctx.open(&args.vault)?;
    let batch_ctx =
        Ctx { secret: ctx.secret.clone(), config: ctx.config.clone(), opened: Some((args.vault.clone(), v.clone())) };
    let (mut ran, mut failed, mut first_code) = (0u64, 0u64, Exit::Success);
    let stdin = std::io::stdin();
    for (i, text) in stdin.lock().lines().enumerate() {
        let text = text.map_err(|e| CliError { code: Exit::Environment, message: format!("standard input: {e}") })?;
        let trimmed = text.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        ran += 1;
        detail!("line {}: {trimmed}", i + 1);
        let result = parse_line(trimmed, args.vault.as_os_str()).and_then(|cmd| crate::dispatch(&batch_ctx, cmd));
        let code = match result {
            Ok(code) => code,
            Err(e) => {
                eprintln!("sqlvault: line {}: {}", i + 1, e.message.replace('\n', " "));
                e.code
            }
        };
        if code != Exit::Success {
            failed += 1;
            if first_code == Exit::Success {
                first_code = code;
            }
            if !args.keep_going {
                break;
            }
        }
    }
    drop(batch_ctx);
    v.close()?;
    if failed > 0 && args.keep_going {
        eprintln!("sqlvault: batch: {failed} of {ran} commands failed");
    } else if failed == 0 {
        note!("batch: {ran} commands");
    }
    Ok(first_code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        argv(shlex::split(s).unwrap(), "V".as_ref()).into_iter().map(|w| w.into_string().unwrap()).collect()
    }

    #[test]
    fn the_vault_goes_after_the_command() {
        assert_eq!(words("tag /a iso=400"), ["sqlvault", "tag", "V", "/a", "iso=400"]);
        assert_eq!(words("rec put c k 'two words'"), ["sqlvault", "rec", "put", "V", "c", "k", "two words"]);
        assert_eq!(words("snapshot rm s1"), ["sqlvault", "snapshot", "rm", "V", "s1"]);
        assert_eq!(words("snapshot s1"), ["sqlvault", "snapshot", "V", "s1"]);
        assert_eq!(words("rec"), ["sqlvault", "rec", "V"]);
    }

    #[test]
    fn refuses_what_cannot_run_in_a_batch() {
        let v = std::ffi::OsStr::new("V");
        assert!(parse_line("tag /a x=1", v).is_ok());
        assert_eq!(parse_line("rec put c k", v).unwrap_err().code, Exit::Usage);
        assert_eq!(parse_line("init", v).unwrap_err().code, Exit::Usage);
        assert_eq!(parse_line("tag '/a x=1", v).unwrap_err().code, Exit::Usage);
        assert_eq!(parse_line("frobnicate", v).unwrap_err().code, Exit::Usage);
    }
}
