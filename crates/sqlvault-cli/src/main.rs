//! `sqlvault`: the command-line program.
//!
//! Parses arguments (clap), gets the secret (see `secret`), opens the vault once per
//! run and calls the library. Every failure ends as one line on stderr and an exit
//! code, an [`exit::Exit`] (the one list of codes; `--help`, the man page and
//! docs/cli.md show it).

/// `println!` for standard output that a closed pipe (`sqlvault info | head -1`) does
/// not turn into a panic: the rest of the output is dropped and the command still
/// succeeds; any other write error (e.g. a full disk behind `>`) is exit code 5.
/// Use it only in functions returning `Result<_, CliError>`.
macro_rules! outln {
    ($($t:tt)*) => { $crate::output::write_line(format_args!($($t)*))? };
}

#[macro_use]
mod ui;
mod batch;
mod check;
mod completions;
mod copier;
mod exit;
mod extract;
mod find;
mod history;
mod meta;
mod output;
mod progress;
mod remote;
mod secret;
mod snapshots;
mod special;
mod sql;
mod transfer;
mod upgrade;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use serde::Serialize;
use sqlvault::secrets::KdfParams;
use sqlvault::{Attr, CreateOptions, Durability, EngineConfig, ErrorKind, FileOptions, FileType, Vault};

use exit::Exit;
use secret::SecretArgs;

/// An error on its way to becoming one line on stderr and an exit code.
#[derive(Debug)]
pub struct CliError {
    code: Exit,
    message: String,
}

impl CliError {
    pub fn usage(m: impl Into<String>) -> Self {
        CliError { code: Exit::Usage, message: m.into() }
    }
    /// A host file system error: a missing path is "not found" (4) as in the vault,
    /// anything else an environment error (5).
    pub fn host(path: &Path, e: std::io::Error) -> Self {
        let code = if e.kind() == std::io::ErrorKind::NotFound { Exit::Tree } else { Exit::Environment };
        CliError { code, message: format!("{}: {e}", path.display()) }
    }
    /// A secret that cannot be used: a missing or unreadable key or passphrase file (2).
    pub fn secret(m: impl Into<String>) -> Self {
        CliError { code: Exit::Access, message: m.into() }
    }
    /// A failed write to standard output.
    pub fn stdout(e: std::io::Error) -> Self {
        CliError { code: Exit::Environment, message: format!("standard output: {e}") }
    }
    pub fn vault_io(path: &str, e: std::io::Error) -> Self {
        match e.into_inner().map(|inner| inner.downcast::<sqlvault::Error>()) {
            Some(Ok(v)) => CliError::from(*v),
            Some(Err(other)) => CliError { code: Exit::Environment, message: format!("{path}: {other}") },
            None => CliError { code: Exit::Environment, message: format!("{path}: I/O error") },
        }
    }
}

impl From<sqlvault::Error> for CliError {
    fn from(e: sqlvault::Error) -> Self {
        let code = match e.kind() {
            ErrorKind::Access => Exit::Access,
            ErrorKind::Damaged => Exit::Damaged,
            ErrorKind::Tree => Exit::Tree,
            // Environment, and any class a newer library adds.
            _ => Exit::Environment,
        };
        CliError { code, message: e.to_string() }
    }
}

#[derive(Parser, Debug)]
#[command(
    name = "sqlvault",
    version,
    about = "Encrypted files, tags and records in one file",
    after_help = exit::after_help()
)]
pub(crate) struct Cli {
    #[command(flatten)]
    secret: SecretArgs,
    /// Print only results and errors (no "created ...", "imported ..." lines).
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// Say more on standard error (timings, each command of a batch).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// SQLite page cache per connection, in MiB.
    #[arg(long, global = true, default_value_t = 16, value_name = "MIB")]
    cache_mib: u32,
    /// full: every commit is synced; normal: commits survive a process crash, a power
    /// loss may lose the last ones (synced at checkpoints and on `sync`).
    #[arg(long, global = true, value_enum, default_value = "normal")]
    durability: DurabilityArg,
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub(crate) enum DurabilityArg {
    Full,
    Normal,
}

/// `init --cipher`: the names of [`sqlvault::secrets::PageCipher`].
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub(crate) enum CipherArg {
    #[value(name = "aegis-256")]
    Aegis256,
    #[value(name = "aegis-128l")]
    Aegis128L,
    #[value(name = "xchacha20-poly1305")]
    XChaCha20Poly1305,
}

impl From<CipherArg> for sqlvault::secrets::PageCipher {
    fn from(c: CipherArg) -> Self {
        use sqlvault::secrets::PageCipher as P;
        match c {
            CipherArg::Aegis256 => P::Aegis256,
            CipherArg::Aegis128L => P::Aegis128L,
            CipherArg::XChaCha20Poly1305 => P::XChaCha20Poly1305,
        }
    }
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Create a new vault (asks for a passphrase twice unless given another way).
    Init {
        /// The vault file to create (must not exist).
        vault: PathBuf,
        /// Content chunk size in KiB (power of two, 4..1024).
        #[arg(long, default_value_t = sqlvault::DEFAULT_CHUNK_SIZE / 1024, value_name = "KIB")]
        chunk_kib: u32,
        /// Database page size in KiB (power of two, 4..64).
        #[arg(long, default_value_t = sqlvault::DEFAULT_PAGE_SIZE / 1024, value_name = "KIB")]
        page_kib: u32,
        /// The AEAD sealing every page [default: aegis-256 where the CPU has AES
        /// instructions, else xchacha20-poly1305].
        #[arg(long, value_name = "NAME")]
        cipher: Option<CipherArg>,
        /// Argon2id memory cost in MiB.
        #[arg(long, default_value_t = KdfParams::default().memory_kib / 1024, value_name = "MIB")]
        kdf_memory_mib: u32,
        /// Argon2id iterations.
        #[arg(long, default_value_t = KdfParams::default().iterations, value_name = "N")]
        kdf_iterations: u32,
        /// How chunks are stored: zstd (compressed when that saves at least 1/8) or none.
        /// Kept in the vault; `sqlvault compression` changes it.
        #[arg(long, value_enum, default_value_t = CompressionArg::Zstd)]
        compression: CompressionArg,
    },
    /// Show or change how the vault stores new chunks (zstd or none); `compact
    /// --recompress` rewrites the chunks already stored.
    Compression {
        /// The vault file.
        vault: PathBuf,
        /// The new setting; without it, print the current one.
        #[arg(value_enum)]
        setting: Option<CompressionArg>,
    },
    /// Write a new random 32-byte key file (mode 0600) for --key-file.
    Keygen {
        /// The key file to write (must not exist).
        file: PathBuf,
    },
    /// Copy a host file or directory into the vault; safe to re-run (like `rclone copy`).
    ///
    /// A directory SOURCE's contents go into DEST, so running the same command again
    /// never nests DEST/SOURCE. Files with the same size and modification time are
    /// skipped (--checksum: the same content). Each file is replaced atomically: after
    /// Ctrl-C or a crash every file is either as it was or complete; run the command
    /// again to finish.
    Put(transfer::PutArgs),
    /// Copy a vault file or directory to the host; safe to re-run (like `rclone copy`).
    ///
    /// A directory SOURCE's contents go into DEST. Unchanged files are skipped; files
    /// are written under a temporary name and renamed; one sync at the end (--fsync:
    /// per file). DEST `-` writes a single file to standard output.
    Get(transfer::GetArgs),
    /// Write a file's content to standard output.
    Cat {
        /// The vault file.
        vault: PathBuf,
        /// File in the vault.
        path: String,
    },
    /// List a directory.
    #[command(disable_help_flag = true)]
    Ls {
        /// The vault file.
        vault: PathBuf,
        /// Directory (or file) in the vault.
        #[arg(default_value = "/")]
        path: String,
        /// Long format: mode, links, size, modification time.
        #[arg(short, long)]
        long: bool,
        /// Recurse into subdirectories.
        #[arg(short = 'R', long)]
        recursive: bool,
        /// Sizes as KiB, MiB, GiB (with -l).
        #[arg(short = 'h', long)]
        human_readable: bool,
        /// One JSON object per entry and line, in a JSON array (streamed).
        #[arg(long)]
        json: bool,
        /// Print help.
        #[arg(long, action = clap::ArgAction::Help)]
        help: Option<bool>,
    },
    /// Create a directory.
    Mkdir {
        /// The vault file.
        vault: PathBuf,
        /// Directory to create.
        path: String,
        /// Create missing parents; no error if it exists.
        #[arg(short, long)]
        parents: bool,
    },
    /// Remove a file, symlink, or (with -r) a directory tree.
    Rm {
        /// The vault file.
        vault: PathBuf,
        /// File, symlink or directory to remove.
        path: String,
        /// Remove a directory and everything below it, in one transaction (Ctrl-C rolls it back).
        #[arg(short, long)]
        recursive: bool,
    },
    /// Rename or move (into DEST if it is a directory).
    Mv {
        /// The vault file.
        vault: PathBuf,
        /// What to move.
        source: String,
        /// New path, or an existing directory to move SOURCE into.
        dest: String,
    },
    /// Show a node's attributes.
    Stat {
        /// The vault file.
        vault: PathBuf,
        /// File, directory or symlink (not followed).
        path: String,
        /// Print the attributes as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Make a hard link (or with -s a symbolic link) LINK pointing to TARGET.
    Ln {
        /// The vault file.
        vault: PathBuf,
        /// Existing path (hard link) or any text (symbolic link).
        target: String,
        /// The new link's path.
        link: String,
        /// Make a symbolic link instead of a hard link.
        #[arg(short, long)]
        symbolic: bool,
    },
    /// Change permission bits (octal, e.g. 640).
    Chmod {
        /// The vault file.
        vault: PathBuf,
        /// Octal permission bits, e.g. 640.
        mode: String,
        /// File or directory.
        path: String,
    },
    /// Create an empty file, or set an existing one's times to now.
    Touch {
        /// The vault file.
        vault: PathBuf,
        /// File to create or touch.
        path: String,
    },
    /// Check integrity: database structure, every chunk's hash and refcount, every tree invariant.
    Fsck {
        /// The vault file.
        vault: PathBuf,
        /// Print the report as one JSON object.
        #[arg(long)]
        json: bool,
        /// Rewrite a damaged copy of the vault header from the intact one.
        #[arg(long)]
        repair: bool,
    },
    /// Change the passphrase (rewrites one key slot; O(1) in the vault's size).
    Passwd {
        /// The vault file.
        vault: PathBuf,
        /// Read the new passphrase from this file (else SQLVAULT_NEW_PASSPHRASE, else a prompt).
        #[arg(long, value_name = "FILE")]
        new_passphrase_file: Option<PathBuf>,
        /// Replace the slot with one for this key file instead.
        #[arg(long, value_name = "FILE")]
        new_key_file: Option<PathBuf>,
        #[command(flatten)]
        kdf: KdfArgs,
    },
    /// Manage key slots (several passphrases or key files may open one vault).
    #[command(subcommand)]
    Key(KeyCommand),
    /// Mount the vault as a file system (foreground; -d for background).
    Mount {
        /// The vault file.
        vault: PathBuf,
        #[command(flatten)]
        args: sqlvault_fuse::command::MountArgs,
    },
    /// Snapshots: `snapshot VAULT [NAME]` freezes the tree; also `snapshot ls|rm`.
    Snapshot(snapshots::SnapshotArgs),
    /// List snapshots with their logical and unique sizes (= `snapshot ls`).
    Snapshots {
        /// The vault file.
        vault: PathBuf,
        /// One JSON object per snapshot and line, in a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Bring back a file, a directory or the whole tree from a snapshot, or (--at,
    /// --commit) from a commit of a remote, as a new change the next push publishes.
    Restore(snapshots::RestoreArgs),
    /// Give free pages back to the file system (VACUUM), with a progress bar; on a vault
    /// made before schema version 8, first move chunk bytes to the arrival-ordered table.
    Compact {
        /// The vault file.
        vault: PathBuf,
        /// First rewrite stored chunks to the vault's compression setting (a batch per
        /// transaction: Ctrl-C keeps what is done, a later run resumes).
        #[arg(long)]
        recompress: bool,
    },
    /// Convert a format-1 (SQLCipher) vault to format 2 in place, with a progress bar;
    /// safe to interrupt or kill (run it again to finish); a format-2 vault is left as is.
    Upgrade {
        /// The vault file.
        vault: PathBuf,
    },
    #[command(flatten)]
    Meta(meta::MetaCommand),
    #[command(flatten)]
    Remote(remote::RemoteTop),
    /// Run SQL on the application's own tables in the vault (`-` reads a script from stdin).
    Sql(sql::SqlArgs),
    /// Format, sizes, counts and deduplication ratio.
    Info {
        /// The vault file.
        vault: PathBuf,
        /// Print everything as one JSON object (sizes in bytes).
        #[arg(long)]
        json: bool,
    },
    /// Run many commands with one key derivation: one command a line from standard input.
    Batch(batch::BatchArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff; `sqlvault man | man -l -`).
    Man,
}

/// Argon2id cost of a new passphrase slot (`passwd`, `key add`).
#[derive(clap::Args, Debug, Clone, Copy)]
struct KdfArgs {
    /// Argon2id memory cost in MiB for the new passphrase.
    #[arg(long, default_value_t = KdfParams::default().memory_kib / 1024, value_name = "MIB")]
    kdf_memory_mib: u32,
    /// Argon2id iterations for the new passphrase.
    #[arg(long, default_value_t = KdfParams::default().iterations, value_name = "N")]
    kdf_iterations: u32,
}

impl KdfArgs {
    fn params(self) -> KdfParams {
        KdfParams {
            memory_kib: self.kdf_memory_mib.saturating_mul(1024),
            iterations: self.kdf_iterations,
            parallelism: 1,
        }
    }
}

#[derive(Subcommand, Debug)]
pub(crate) enum KeyCommand {
    /// List key slots.
    Ls {
        /// The vault file.
        vault: PathBuf,
        /// Print the slots as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Add a slot for a new passphrase or key file.
    Add {
        /// The vault file.
        vault: PathBuf,
        /// Read the new passphrase from this file (else SQLVAULT_NEW_PASSPHRASE, else a prompt).
        #[arg(long, value_name = "FILE")]
        new_passphrase_file: Option<PathBuf>,
        /// Add a slot for this key file instead.
        #[arg(long, value_name = "FILE")]
        new_key_file: Option<PathBuf>,
        #[command(flatten)]
        kdf: KdfArgs,
    },
    /// Remove a slot by its index (the last slot cannot be removed).
    Rm {
        /// The vault file.
        vault: PathBuf,
        /// Index of the slot (see `key ls`).
        slot: usize,
    },
}

fn main() -> ExitCode {
    let cli = match completions::parse(std::env::args_os()) {
        Ok(c) => c,
        Err(e) => {
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    let _ = e.print();
                    Exit::Success.into()
                }
                clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    // `sqlvault` or `sqlvault rec` alone: a usage error, not a page of help.
                    let help = e.render().to_string();
                    let usage = help.lines().find_map(|l| l.strip_prefix("Usage: ")).unwrap_or("sqlvault <COMMAND>");
                    eprintln!("sqlvault: a command is missing: {usage} (see --help)");
                    Exit::Usage.into()
                }
                _ => {
                    eprintln!("sqlvault: {}", usage_line(&e.render().to_string()));
                    Exit::Usage.into()
                }
            };
        }
    };
    match run(cli) {
        Ok(code) => code.into(),
        Err(e) => {
            eprintln!("sqlvault: {}", e.message.replace('\n', " "));
            e.code.into()
        }
    }
}

pub struct Ctx {
    secret: SecretArgs,
    config: EngineConfig,
    /// `batch`: the vault opened once, handed out (as clones) instead of opening again.
    opened: Option<(PathBuf, Vault)>,
}

/// How long a bulk writer's writes share one commit when it holds the vault alone
/// ([`Ctx::open_bulk`]): a commit per window instead of one per file, so a tree of small
/// files pays the rollback journal's syncs a few times a second, not per file. A kill
/// loses at most the last window's files; `put` again copies them.
pub const BULK_COMMIT_WINDOW: std::time::Duration = std::time::Duration::from_millis(100);

impl Ctx {
    pub fn open(&self, vault: &Path) -> Result<Vault, CliError> {
        if let Some((p, v)) = &self.opened {
            if p == vault {
                return Ok(v.clone());
            }
        }
        if vault.is_dir() {
            return Err(CliError::secret(format!("{}: not a vault (a directory)", vault.display())));
        }
        let secret = secret::existing(&self.secret)?;
        let t = std::time::Instant::now();
        let v = Vault::open(vault, &secret, self.config.clone())?;
        detail!("opened {} in {:.2} s (key derivation included)", vault.display(), t.elapsed().as_secs_f64());
        Ok(v)
    }

    /// [`Ctx::open`] for a bulk writer: alone (`EngineConfig::exclusive`, a rollback
    /// journal: each page written once, other opens wait until it closes) when nothing
    /// else has the vault open, else shared as [`Ctx::open`] does. Alone, its writes
    /// share commits over [`BULK_COMMIT_WINDOW`] (each commit of a rollback journal
    /// syncs three times); `close` or `sync` commits the last window and reports a
    /// commit that failed.
    pub fn open_bulk(&self, vault: &Path) -> Result<Vault, CliError> {
        if self.opened.is_some() || vault.is_dir() {
            return self.open(vault);
        }
        let secret = secret::existing(&self.secret)?;
        let t = std::time::Instant::now();
        let alone = EngineConfig { exclusive: true, ..self.config.clone() };
        let v = match Vault::open(vault, &secret, alone) {
            Ok(v) => {
                detail!("opened {} alone (rollback journal)", vault.display());
                v.inodes().set_commit_window(Some(BULK_COMMIT_WINDOW))?;
                v
            }
            Err(sqlvault::Error::Busy) => Vault::open(vault, &secret, self.config.clone())?,
            Err(e) => return Err(e.into()),
        };
        detail!("opened {} in {:.2} s (key derivation included)", vault.display(), t.elapsed().as_secs_f64());
        Ok(v)
    }
}

pub fn print_json<T: Serialize>(v: &T) -> Result<(), CliError> {
    let s = serde_json::to_string_pretty(v).map_err(|e| CliError::usage(e.to_string()))?;
    outln!("{s}");
    Ok(())
}

/// clap's multi-line usage error as one line: the message, the missing or
/// offending argument, then where to look (`--help`).
pub(crate) fn usage_line(rendered: &str) -> String {
    let body = rendered.split("\nUsage:").next().unwrap_or(rendered);
    let body = body.split("\nFor more information").next().unwrap_or(body);
    let words = body.split_whitespace().collect::<Vec<_>>().join(" ");
    let words = words.strip_prefix("error: ").unwrap_or(&words);
    format!("{words} (see --help)")
}

fn run(cli: Cli) -> Result<Exit, CliError> {
    ui::set_verbosity(cli.quiet, cli.verbose);
    let config = EngineConfig {
        cache_kib: cli.cache_mib.saturating_mul(1024),
        durability: match cli.durability {
            DurabilityArg::Full => Durability::Full,
            DurabilityArg::Normal => Durability::Normal,
        },
        ..EngineConfig::default()
    };
    let ctx = Ctx { secret: cli.secret, config, opened: None };
    dispatch(&ctx, cli.command)
}

/// Runs one command; `batch` calls it once per line with the vault already open.
pub(crate) fn dispatch(ctx: &Ctx, command: Command) -> Result<Exit, CliError> {
    match command {
        Command::Init { vault, chunk_kib, page_kib, cipher, kdf_memory_mib, kdf_iterations, compression } => {
            let secret = secret::new_secret(
                ctx.secret.key_file.as_deref(),
                ctx.secret.passphrase_file.as_deref(),
                ctx.secret.passphrase_command.as_deref(),
                secret::ENV_PASSPHRASE,
            )?;
            let opts = CreateOptions {
                chunk_size: chunk_kib.saturating_mul(1024),
                page_size: page_kib.saturating_mul(1024),
                cipher: cipher.map_or_else(sqlvault::secrets::PageCipher::default_for_cpu, Into::into),
                kdf: KdfParams {
                    memory_kib: kdf_memory_mib.saturating_mul(1024),
                    iterations: kdf_iterations,
                    parallelism: 1,
                },
                engine: ctx.config.clone(),
                compression: compression.into(),
            };
            Vault::create(&vault, &secret, &opts)?.close()?;
            note!("created {} (pages sealed with {})", vault.display(), opts.cipher);
        }
        Command::Keygen { file } => {
            sqlvault::secrets::generate_key_file(&file)?;
            note!("wrote a new 32-byte key to {} (mode 0600); keep it safe", file.display());
        }
        Command::Put(args) => return transfer::put_command(ctx, args),
        Command::Get(args) => return transfer::get_command(ctx, args),
        Command::Cat { vault, path } => {
            let v = ctx.open(&vault)?;
            let mut f = v.open_file(&path, &FileOptions::new().read(true))?;
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            match std::io::copy(&mut f, &mut out).and_then(|_| out.flush()) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                Err(e) => return Err(CliError::vault_io(&path, e)),
            }
        }
        Command::Ls { vault, path, long, recursive, human_readable, json, help: _ } => {
            let v = ctx.open(&vault)?;
            ls(&v, &path, LsFormat { long, recursive, human: human_readable, json })?;
        }
        Command::Mkdir { vault, path, parents } => {
            let v = ctx.open(&vault)?;
            if parents {
                v.create_dir_all(&path)?;
            } else {
                v.create_dir(&path, 0o755)?;
            }
            v.close()?;
        }
        Command::Rm { vault, path, recursive } => {
            let v = ctx.open(&vault)?;
            let a = v.symlink_metadata(&path)?;
            match (a.kind, recursive) {
                (FileType::Dir, true) => progress::remove_dir_all(&v, &path)?,
                (FileType::Dir, false) => {
                    return Err(CliError { code: Exit::Tree, message: format!("{path} is a directory (use rm -r)") })
                }
                _ => v.remove_file(&path)?,
            }
            v.close()?;
        }
        Command::Mv { vault, source, dest } => {
            let v = ctx.open(&vault)?;
            let dest = match v.metadata(&dest) {
                Ok(a) if a.kind == FileType::Dir && v.symlink_metadata(&source)?.ino != a.ino => {
                    let name = source.trim_end_matches('/').rsplit('/').next().unwrap_or_default();
                    sqlvault::join_path(&dest, name)
                }
                _ => dest,
            };
            v.rename(&source, &dest)?;
            v.close()?;
        }
        Command::Stat { vault, path, json } => {
            let v = ctx.open(&vault)?;
            let a = v.symlink_metadata(&path)?;
            if json {
                print_json(&a)?;
            } else {
                outln!("  path: {path}");
                outln!("  type: {}", kind_name(a.kind));
                outln!(" inode: {}", a.ino.0);
                outln!("  mode: {:04o} ({})", a.perm, ui::mode_string(&a));
                outln!("   uid: {}  gid: {}", a.uid, a.gid);
                outln!("  size: {}", a.size);
                outln!(" links: {}", a.nlink);
                outln!(" atime: {}", fmt_time(a.atime_ns));
                outln!(" mtime: {}", fmt_time(a.mtime_ns));
                outln!(" ctime: {}", fmt_time(a.ctime_ns));
                if a.kind == FileType::Symlink {
                    outln!("target: {}", v.read_link(&path)?);
                }
                if a.kind.is_device() {
                    outln!("device: {}", device_string(a.rdev));
                }
            }
        }
        Command::Ln { vault, target, link, symbolic } => {
            let v = ctx.open(&vault)?;
            if symbolic {
                v.symlink(&target, &link)?;
            } else {
                v.hard_link(&target, &link)?;
            }
            v.close()?;
        }
        Command::Chmod { vault, mode, path } => {
            let perm = u32::from_str_radix(&mode, 8)
                .ok()
                .filter(|m| *m <= 0o7777)
                .ok_or_else(|| CliError::usage(format!("mode {mode:?} is not octal (e.g. 644)")))?;
            let v = ctx.open(&vault)?;
            v.set_attr(&path, &sqlvault::SetAttr { perm: Some(perm), ..Default::default() }, true)?;
            v.close()?;
        }
        Command::Touch { vault, path } => {
            let v = ctx.open(&vault)?;
            if v.exists(&path)? {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as i64)
                    .unwrap_or(0);
                v.set_attr(
                    &path,
                    &sqlvault::SetAttr { atime_ns: Some(now), mtime_ns: Some(now), ..Default::default() },
                    true,
                )?;
            } else {
                v.open_file(&path, &FileOptions::new().write(true).create(true))?.close()?;
            }
            v.close()?;
        }
        Command::Fsck { vault, json, repair } => return check::fsck_command(ctx, &vault, json, repair),
        Command::Passwd { vault, new_passphrase_file, new_key_file, kdf } => {
            let old = secret::existing(&ctx.secret)?;
            let new = secret::new_secret(
                new_key_file.as_deref(),
                new_passphrase_file.as_deref(),
                None,
                secret::ENV_NEW_PASSPHRASE,
            )?;
            sqlvault::secrets::change_secret(&vault, &old, &new, kdf.params())?;
            note!("passphrase changed");
        }
        Command::Key(KeyCommand::Ls { vault, json }) => {
            let v = ctx.open(&vault)?;
            let slots = v.info()?.key_slots;
            if json {
                print_json(&slots)?;
            } else {
                for s in &slots {
                    outln!("slot {}: {}", s.index, describe_slot(s));
                }
            }
        }
        Command::Key(KeyCommand::Add { vault, new_passphrase_file, new_key_file, kdf }) => {
            let old = secret::existing(&ctx.secret)?;
            let new = secret::new_secret(
                new_key_file.as_deref(),
                new_passphrase_file.as_deref(),
                None,
                secret::ENV_NEW_PASSPHRASE,
            )?;
            let i = sqlvault::secrets::add_secret(&vault, &old, &new, kdf.params())?;
            note!("added key slot {i}");
        }
        Command::Key(KeyCommand::Rm { vault, slot }) => {
            let old = secret::existing(&ctx.secret)?;
            sqlvault::secrets::remove_secret(&vault, &old, slot)?;
            note!("removed key slot {slot}");
        }
        Command::Mount { vault, args } => {
            sqlvault_fuse::command::run(&vault, secret::existing(&ctx.secret)?, ctx.config.clone(), &args)?;
        }
        Command::Snapshot(args) => return snapshots::snapshot(ctx, args),
        Command::Snapshots { vault, json } => snapshots::list(ctx, vault, json)?,
        Command::Restore(args) => return snapshots::restore(ctx, args),
        Command::Compact { vault, recompress } => snapshots::compact(ctx, vault, recompress)?,
        Command::Compression { vault, setting } => {
            let v = ctx.open(&vault)?;
            match setting {
                None => outln!("{}", v.info()?.compression),
                Some(c) => {
                    v.set_compression(c.into())?;
                    v.close()?;
                    note!(
                        "new chunks are stored {}; `compact --recompress` rewrites the old ones",
                        match c {
                            CompressionArg::Zstd => "compressed (zstd)",
                            CompressionArg::None => "as they are",
                        }
                    );
                }
            }
        }
        Command::Upgrade { vault } => upgrade::upgrade(ctx, &vault)?,
        Command::Sql(args) => sql::run(ctx, args)?,
        Command::Meta(cmd) => return meta::run(ctx, cmd),
        Command::Remote(cmd) => return remote::run(ctx, cmd),
        Command::Batch(args) => return batch::run(ctx, args),
        Command::Completions { shell } => completions::completions(shell)?,
        Command::Man => completions::man()?,
        Command::Info { vault, json } => {
            let v = ctx.open(&vault)?;
            let i = v.info()?;
            if json {
                print_json(&i)?;
            } else {
                outln!("format version: {} (schema {})", i.format_version, i.schema_version);
                outln!(
                    "cipher:         {} (format {}), {} KiB pages, {} reserved bytes",
                    i.cipher.page_cipher,
                    i.format_version,
                    i.cipher.page_size / 1024,
                    i.cipher.reserve
                );
                outln!("chunk size:     {} KiB", i.chunk_size / 1024);
                for s in &i.key_slots {
                    outln!("key slot {}:     {}", s.index, describe_slot(s));
                }
                outln!("files:          {}", i.files);
                outln!("directories:    {}", i.directories);
                outln!("symlinks:       {}", i.symlinks);
                let sz = |b: u64| format!("{} ({b} bytes)", ui::human(b));
                outln!("logical size:   {}", sz(i.logical_bytes));
                outln!("unique size:    {} in {} chunks", sz(i.unique_bytes), i.chunks);
                outln!("dedup ratio:    {:.2}", i.dedup_ratio);
                outln!("stored size:    {} (compression {})", sz(i.stored_bytes), i.compression);
                outln!("compression:    {:.2}", i.compression_ratio);
                outln!("file on disk:   {}, {} free pages", sz(i.file_bytes), i.free_pages);
                outln!("reclaimable:    {} (sqlvault compact)", sz(i.reclaimable_bytes));
                if i.inline_chunk_bytes > 0 {
                    outln!(
                        "old layout:     {} of chunk data from before schema 8 (sqlvault compact moves it)",
                        sz(i.inline_chunk_bytes)
                    );
                }
                if i.pending_release_files > 0 {
                    outln!("to be released: {} removed files (in the background)", i.pending_release_files);
                }
                if i.pending_wipe_bytes > 0 {
                    outln!("to be wiped:    {} of deleted content (in the background)", sz(i.pending_wipe_bytes));
                }
                outln!("snapshots:      {}", i.snapshots);
            }
        }
    }
    Ok(Exit::Success)
}

fn describe_slot(s: &sqlvault::secrets::SlotInfo) -> String {
    match s.kdf {
        Some(k) => format!("passphrase, Argon2id m={} MiB t={} p={}", k.memory_kib / 1024, k.iterations, k.parallelism),
        None => "key file".to_string(),
    }
}

#[derive(Serialize)]
struct LsEntry {
    path: String,
    name: String,
    #[serde(flatten)]
    attr: Attr,
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<String>,
}

/// How `ls` prints.
#[derive(Clone, Copy)]
struct LsFormat {
    long: bool,
    recursive: bool,
    human: bool,
    json: bool,
}

/// Lists `path`, streaming: each entry is printed as it is read, one directory's
/// entries in memory at a time (per level of `-R`), whatever the tree's size.
fn ls(v: &Vault, path: &str, f: LsFormat) -> Result<(), CliError> {
    let top = v.metadata(path)?;
    let stdout = std::io::stdout();
    let mut w = stdout.lock();
    let mut arr = output::JsonArray::default();
    if f.json && !output::JsonArray::start(&mut w)? {
        return Ok(());
    }
    let mut each = |e: LsEntry| -> Result<bool, CliError> {
        if f.json {
            return arr.push(&mut w, &serde_json::to_value(&e).map_err(|e| CliError::usage(e.to_string()))?);
        }
        let shown = if f.recursive { &e.path } else { &e.name };
        let line = if f.long {
            let t = e.target.as_ref().map(|t| format!(" -> {t}")).unwrap_or_default();
            format!(
                "{} {:>3} {:>5} {:>5} {:>12} {} {shown}{t}",
                ui::mode_string(&e.attr),
                e.attr.nlink,
                e.attr.uid,
                e.attr.gid,
                if e.attr.kind.is_device() { device_string(e.attr.rdev) } else { ui::size(e.attr.size, f.human) },
                ui::local_minute(e.attr.mtime_ns)
            )
        } else {
            shown.to_string()
        };
        output::line(&mut w, &line)
    };
    let open = if top.kind != FileType::Dir {
        let name = path.rsplit('/').next().unwrap_or(path).to_string();
        let target = (top.kind == FileType::Symlink).then(|| v.read_link(path)).transpose()?;
        each(LsEntry { path: path.to_string(), name, attr: top, target })?
    } else {
        collect(v, path.as_bytes(), path, f.recursive, &mut each)?
    };
    if f.json && open {
        arr.finish(&mut w)?;
    }
    Ok(())
}

/// Lists directory `dir` (a vault path as raw bytes, so names that are not UTF-8, which
/// the mount stores, are shown lossily instead of failing the whole listing), printed
/// as `shown`. `Ok(false)` once `each` says stop (standard output closed).
fn collect(
    v: &Vault,
    dir: &[u8],
    shown: &str,
    recursive: bool,
    each: &mut dyn FnMut(LsEntry) -> Result<bool, CliError>,
) -> Result<bool, CliError> {
    for e in transfer::list_all(v, dir)? {
        let p = sqlvault::join_path(shown, &e.name);
        let target = e.target.as_ref().map(|t| String::from_utf8_lossy(t).into_owned());
        let is_dir = e.attr.kind == FileType::Dir;
        if !each(LsEntry { path: p.clone(), name: e.name, attr: e.attr, target })? {
            return Ok(false);
        }
        if recursive && is_dir && !collect(v, &transfer::child(dir, &e.raw_name), &p, true, each)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The node kind as the JSON outputs spell it (`file`, `dir`, `symlink`, `fifo`,
/// `socket`, `char`, `block`).
fn kind_name(kind: FileType) -> &'static str {
    match kind {
        FileType::File => "file",
        FileType::Dir => "dir",
        FileType::Symlink => "symlink",
        FileType::Fifo => "fifo",
        FileType::Socket => "socket",
        FileType::CharDevice => "char",
        FileType::BlockDevice => "block",
    }
}

/// A device number as `ls -l` shows it: `major, minor`.
fn device_string(rdev: u64) -> String {
    format!("{}, {}", libc::major(rdev), libc::minor(rdev))
}

/// A time as the text outputs show it: local time with its UTC offset.
pub(crate) fn fmt_time(ns: i64) -> String {
    ui::local_time(ns)
}

/// `--compression` and `sqlvault compression`'s values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CompressionArg {
    /// zstd, when it saves at least 1/8 of a chunk.
    Zstd,
    /// Chunks stored as they are.
    None,
}

impl From<CompressionArg> for sqlvault::Compression {
    fn from(c: CompressionArg) -> Self {
        match c {
            CompressionArg::Zstd => sqlvault::Compression::Zstd,
            CompressionArg::None => sqlvault::Compression::None,
        }
    }
}
