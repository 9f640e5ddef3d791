//! The clap command tree as a whole: parsing, shell completions (`sqlvault completions
//! bash|zsh|fish`) and the man page (`sqlvault man`), all from the same definitions.
//!
//! Options that apply to every command that opens a vault are global; the commands
//! that open none (`keygen`, `completions`, `man`) hide them from their help.

use std::ffi::OsString;
use std::io::Write;

use clap::{CommandFactory, FromArgMatches};

use crate::{Cli, CliError};

/// Global options that only matter to commands that open a vault.
const VAULT_OPTIONS: [&str; 5] = ["passphrase_file", "key_file", "passphrase_command", "cache_mib", "durability"];

/// Commands that open no vault.
const NO_VAULT: [&str; 3] = ["keygen", "completions", "man"];

/// The full command tree, with the vault options hidden where they do not apply.
///
/// clap gives a global option to every subcommand that has no argument of that id, so
/// a hidden copy of it in `keygen`, `completions` and `man` keeps it out of their help.
pub fn command() -> clap::Command {
    let mut cmd = Cli::command();
    let hidden: Vec<clap::Arg> = cmd
        .get_arguments()
        .filter(|a| VAULT_OPTIONS.contains(&a.get_id().as_str()))
        .map(|a| a.clone().hide(true))
        .collect();
    for name in NO_VAULT {
        cmd = cmd.mut_subcommand(name, |sub| sub.args(hidden.iter().cloned()));
    }
    cmd
}

/// Parses a command line with [`command`].
pub fn parse<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let mut cmd = command();
    let m = cmd.try_get_matches_from_mut(args)?;
    Cli::from_arg_matches(&m).map_err(|e| e.format(&mut cmd))
}

/// Writes the completion script for `shell` to standard output.
pub fn completions(shell: clap_complete::Shell) -> Result<(), CliError> {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command(), "sqlvault", &mut out);
    write_all(&out)
}

/// Writes the man page (roff) to standard output: `sqlvault(1)` with every subcommand.
pub fn man() -> Result<(), CliError> {
    let mut out = Vec::new();
    let cmd = command();
    clap_mangen::Man::new(cmd.clone()).render(&mut out).map_err(CliError::stdout)?;
    // One section per subcommand (and per sub-subcommand), as `git help -a` lists them.
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        render_sub(&mut out, sub, "sqlvault")?;
    }
    write_all(&out)
}

fn render_sub(out: &mut Vec<u8>, sub: &clap::Command, parent: &str) -> Result<(), CliError> {
    let name = format!("{parent} {}", sub.get_name());
    let roff = |s: &str| s.replace('\\', "\\\\").replace('-', "\\-");
    writeln!(out, ".SH \"{}\"", roff(&name.to_uppercase())).map_err(CliError::stdout)?;
    let mut page = Vec::new();
    clap_mangen::Man::new(sub.clone().bin_name(name.clone()))
        .render_synopsis_section(&mut page)
        .and_then(|()| clap_mangen::Man::new(sub.clone()).render_description_section(&mut page))
        .and_then(|()| clap_mangen::Man::new(sub.clone()).render_options_section(&mut page))
        .map_err(CliError::stdout)?;
    // Sub-sections: the page's own .SH headers become .SS under this command.
    let text = String::from_utf8_lossy(&page).replace(".SH ", ".SS ");
    out.extend_from_slice(text.as_bytes());
    for s in sub.get_subcommands().filter(|s| !s.is_hide_set()) {
        render_sub(out, s, &name)?;
    }
    Ok(())
}

fn write_all(b: &[u8]) -> Result<(), CliError> {
    let mut w = std::io::stdout().lock();
    match w.write_all(b).and_then(|()| w.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(CliError::stdout(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every argument and option of every command says what it is for.
    #[test]
    fn every_argument_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                if a.is_hide_set() || ["help", "version"].contains(&a.get_id().as_str()) {
                    continue;
                }
                if a.get_help().is_none() && a.get_long_help().is_none() {
                    missing.push(format!("{path} {}", a.get_id()));
                }
            }
            for s in cmd.get_subcommands() {
                if s.get_about().is_none() && s.get_name() != "help" {
                    missing.push(format!("{path} {} (no description)", s.get_name()));
                }
                walk(s, &format!("{path} {}", s.get_name()), missing);
            }
        }
        let mut cmd = command();
        cmd.build();
        let mut missing = Vec::new();
        walk(&cmd, "sqlvault", &mut missing);
        assert!(missing.is_empty(), "arguments without help: {missing:#?}");
    }

    #[test]
    fn commands_without_a_vault_hide_vault_options() {
        let mut cmd = command();
        cmd.build();
        let help = cmd.find_subcommand_mut("keygen").unwrap().render_help().to_string();
        for opt in ["--passphrase-file <", "--key-file <", "--passphrase-command <", "--cache-mib <", "--durability <"]
        {
            assert!(!help.contains(opt), "keygen --help lists {opt}: {help}");
        }
        let ls = cmd.find_subcommand_mut("ls").unwrap().render_help().to_string();
        assert!(ls.contains("--passphrase-file <"), "{ls}");
    }

    #[test]
    fn command_tree_is_consistent() {
        command().debug_assert();
    }
}
