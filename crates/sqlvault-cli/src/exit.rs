//! The exit codes of `sqlvault`, in one place. Every code the program ends with is an
//! [`Exit`]; `--help` and the man page print [`after_help`]'s list, rendered from
//! [`Exit::ALL`], and a test here fails when the table in docs/cli.md says otherwise.

/// What a run of `sqlvault` ended with. The discriminant is the process exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// Everything asked was done.
    Success = 0,
    /// The command line or its input was wrong (nothing was changed).
    Usage = 1,
    /// The secret does not open the file, or the file is not a vault.
    Access = 2,
    /// The vault is damaged.
    Damaged = 3,
    /// A path problem in the vault or on the host.
    Tree = 4,
    /// The environment failed, or `put`/`get` skipped entries.
    Environment = 5,
    /// `push` found a newer commit on the remote.
    Behind = 6,
    /// Another device holds the remote's prune lock or replication lease.
    RemoteBusy = 7,
    /// Ctrl-C or SIGTERM stopped the command.
    Interrupted = 130,
}

impl Exit {
    /// Every code, in ascending order.
    pub const ALL: [Exit; 9] = [
        Exit::Success,
        Exit::Usage,
        Exit::Access,
        Exit::Damaged,
        Exit::Tree,
        Exit::Environment,
        Exit::Behind,
        Exit::RemoteBusy,
        Exit::Interrupted,
    ];

    /// The process exit code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// What the code tells the caller, one line (plain text: `--help`, the man page and
    /// docs/cli.md show it as is).
    pub fn meaning(self) -> &'static str {
        match self {
            Exit::Success => "success",
            Exit::Usage => {
                "usage error: bad arguments, a malformed find condition, no passphrase source, \
                 passphrases differ; a SQL error or refused statement (sql)"
            }
            Exit::Access => {
                "wrong passphrase or key, a missing or malformed key or passphrase file, a failing \
                 passphrase command, or the file is not a vault (a directory included)"
            }
            Exit::Damaged => "the vault is damaged: fsck found problems, a tampered or truncated file",
            Exit::Tree => "not found, already exists, directory not empty, not a directory, invalid path and the like",
            Exit::Environment => "environment: I/O error, disk full, vault busy; or put or get skipped some entries",
            Exit::Behind => "push refused: the remote has a newer commit (pull first, or push --pull)",
            Exit::RemoteBusy => {
                "the remote is busy: another device's remote prune holds its lock (push, remote prune; \
                 try again later), or another replicator holds its lease (replicate)"
            }
            Exit::Interrupted => "interrupted (Ctrl-C or SIGTERM); the message says what was done",
        }
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> Self {
        std::process::ExitCode::from(e.code())
    }
}

/// The text after every `--help` (and in the man page): where the passphrase comes
/// from, then every exit code.
pub fn after_help() -> String {
    let mut s = String::from(
        "Passphrase: --key-file, --passphrase-file, --passphrase-command, else the\n\
         SQLVAULT_PASSPHRASE environment variable, else a prompt on the terminal (/dev/tty).\n\n\
         Times are shown in the local time zone (TZ) with their UTC offset; --json gives\n\
         nanoseconds since the epoch and ISO 8601 UTC strings.\n\n\
         Exit codes:",
    );
    for e in Exit::ALL {
        s.push_str(&format!("\n  {:<4}{}", e.code(), e.meaning()));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exit codes as the markdown table of docs/cli.md.
    fn markdown_table() -> String {
        let mut s = String::from("| code | meaning |\n|---|---|\n");
        for e in Exit::ALL {
            s.push_str(&format!("| {} | {} |\n", e.code(), e.meaning()));
        }
        s
    }

    #[test]
    fn codes_ascend_and_are_distinct() {
        assert!(Exit::ALL.windows(2).all(|w| w[0].code() < w[1].code()));
        assert_eq!(Exit::ALL.map(Exit::code), [0, 1, 2, 3, 4, 5, 6, 7, 130]);
    }

    /// docs/cli.md's exit-code table is the enum's: edit `Exit::meaning`, then paste
    /// the table this test prints.
    #[test]
    fn docs_table_is_the_enums() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/cli.md");
        let docs = std::fs::read_to_string(path).expect("docs/cli.md");
        let table = markdown_table();
        assert!(
            docs.contains(&table),
            "docs/cli.md's exit-code table differs from enum Exit; it should read:\n{table}"
        );
    }

    #[test]
    fn help_lists_every_code() {
        let help = after_help();
        for e in Exit::ALL {
            assert!(help.contains(&format!("  {:<4}{}", e.code(), e.meaning())), "{help}");
        }
    }
}
