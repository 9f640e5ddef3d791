//! `sqlvault`: the command-line program.
//!
//! Parses arguments (clap), gets the secret (see `secret`), opens the vault once per
//! run and calls the library. Every failure ends as one line on stderr and an exit
//! code from the table below (also in README.md):
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success |
//! | 1 | usage error (bad arguments, no passphrase source, mismatched passphrases) |
//! | 2 | wrong passphrase or key, a missing key or passphrase file, or not a vault |
//! | 3 | vault is damaged (fsck found problems, tampered or truncated file) |
//! | 4 | not found, already exists, not empty, not a directory, invalid path and the like |
//! | 5 | environment: I/O error, disk full, busy vault; or some entries were skipped by put |
//! | 130 | interrupted by Ctrl-C or SIGTERM (see `progress`) |

/// `println!` for standard output that a closed pipe (`sqlvault info | head -1`) does
/// not turn into a panic: the rest of the output is dropped and the command still
/// succeeds; any other write error (e.g. a full disk behind `>`) is exit code 5.
/// Use it only in functions returning `Result<_, CliError>`.
macro_rules! outln {
    ($($t:tt)*) => { $crate::write_line(format_args!($($t)*))? };
}

mod check;
mod extract;
mod meta;
mod progress;
mod secret;
mod snapshots;
mod transfer;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use serde::Serialize;
use sqlvault::{Attr, CreateOptions, Durability, EngineConfig, ErrorKind, FileOptions, FileType, KdfParams, Vault};

use secret::SecretArgs;

/// An error on its way to becoming one line on stderr and an exit code.
#[derive(Debug)]
pub struct CliError {
    code: u8,
    message: String,
}

impl CliError {
    pub fn usage(m: impl Into<String>) -> Self {
        CliError { code: 1, message: m.into() }
    }
    /// A host file system error: a missing path is "not found" (4) as in the vault,
    /// anything else an environment error (5).
    pub fn host(path: &Path, e: std::io::Error) -> Self {
        let code = if e.kind() == std::io::ErrorKind::NotFound { 4 } else { 5 };
        CliError { code, message: format!("{}: {e}", path.display()) }
    }
    /// A secret that cannot be used: a missing or unreadable key or passphrase file (2).
    pub fn secret(m: impl Into<String>) -> Self {
        CliError { code: 2, message: m.into() }
    }
    /// A failed write to standard output.
    pub fn stdout(e: std::io::Error) -> Self {
        CliError { code: 5, message: format!("standard output: {e}") }
    }
    pub fn vault_io(path: &str, e: std::io::Error) -> Self {
        match e.into_inner().map(|inner| inner.downcast::<sqlvault::Error>()) {
            Some(Ok(v)) => CliError::from(*v),
            Some(Err(other)) => CliError { code: 5, message: format!("{path}: {other}") },
            None => CliError { code: 5, message: format!("{path}: I/O error") },
        }
    }
}

impl From<sqlvault::Error> for CliError {
    fn from(e: sqlvault::Error) -> Self {
        let code = match e.kind() {
            ErrorKind::Access => 2,
            ErrorKind::Damaged => 3,
            ErrorKind::Tree => 4,
            // Environment, and any class a newer library adds.
            _ => 5,
        };
        CliError { code, message: e.to_string() }
    }
}

#[derive(Parser, Debug)]
#[command(name = "sqlvault", version, about = "Encrypted files, tags and records in one SQLCipher file")]
struct Cli {
    #[command(flatten)]
    secret: SecretArgs,
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
enum DurabilityArg {
    Full,
    Normal,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Create a new vault (asks for a passphrase twice unless given another way).
    Init {
        vault: PathBuf,
        /// Content chunk size in KiB (power of two, 4..1024).
        #[arg(long, default_value_t = sqlvault::DEFAULT_CHUNK_SIZE / 1024, value_name = "KIB")]
        chunk_kib: u32,
        /// SQLCipher page size in KiB (power of two, 4..64).
        #[arg(long, default_value_t = sqlvault::DEFAULT_PAGE_SIZE / 1024, value_name = "KIB")]
        page_kib: u32,
        /// Argon2id memory cost in MiB.
        #[arg(long, default_value_t = KdfParams::default().memory_kib / 1024, value_name = "MIB")]
        kdf_memory_mib: u32,
        /// Argon2id iterations.
        #[arg(long, default_value_t = KdfParams::default().iterations, value_name = "N")]
        kdf_iterations: u32,
    },
    /// Write a new random 32-byte key file (mode 0600) for --key-file.
    Keygen { file: PathBuf },
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
    Cat { vault: PathBuf, path: String },
    /// List a directory.
    Ls {
        vault: PathBuf,
        #[arg(default_value = "/")]
        path: String,
        /// Long format: mode, links, size, modification time.
        #[arg(short, long)]
        long: bool,
        /// Recurse into subdirectories.
        #[arg(short = 'R', long)]
        recursive: bool,
        #[arg(long)]
        json: bool,
    },
    /// Create a directory.
    Mkdir {
        vault: PathBuf,
        path: String,
        /// Create missing parents; no error if it exists.
        #[arg(short, long)]
        parents: bool,
    },
    /// Remove a file, symlink, or (with -r) a directory tree.
    Rm {
        vault: PathBuf,
        path: String,
        /// Remove a directory and everything below it, in one transaction (Ctrl-C rolls it back).
        #[arg(short, long)]
        recursive: bool,
    },
    /// Rename or move (into DEST if it is a directory).
    Mv { vault: PathBuf, source: String, dest: String },
    /// Show a node's attributes.
    Stat {
        vault: PathBuf,
        path: String,
        #[arg(long)]
        json: bool,
    },
    /// Make a hard link (or with -s a symbolic link) LINK pointing to TARGET.
    Ln {
        vault: PathBuf,
        target: String,
        link: String,
        #[arg(short, long)]
        symbolic: bool,
    },
    /// Change permission bits (octal, e.g. 640).
    Chmod { vault: PathBuf, mode: String, path: String },
    /// Create an empty file, or set an existing one's times to now.
    Touch { vault: PathBuf, path: String },
    /// Check integrity: database structure, every chunk's hash and refcount, every tree invariant.
    Fsck {
        vault: PathBuf,
        #[arg(long)]
        json: bool,
        /// Rewrite a damaged copy of the vault header from the intact one.
        #[arg(long)]
        repair: bool,
    },
    /// Change the passphrase (rewrites one key slot; O(1) in the vault's size).
    Passwd {
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
        vault: PathBuf,
        #[command(flatten)]
        args: sqlvault_fuse::command::MountArgs,
    },
    /// Snapshots: `snapshot VAULT [NAME]` freezes the tree; also `snapshot ls|rm`.
    Snapshot(snapshots::SnapshotArgs),
    /// List snapshots with their logical and unique sizes (= `snapshot ls`).
    Snapshots {
        vault: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Bring back a file, a directory or the whole tree from a snapshot.
    Restore(snapshots::RestoreArgs),
    /// Give free pages back to the file system (VACUUM), with a progress bar.
    Compact { vault: PathBuf },
    #[command(flatten)]
    Meta(meta::MetaCommand),
    /// Format, sizes, counts and deduplication ratio.
    Info {
        vault: PathBuf,
        #[arg(long)]
        json: bool,
    },
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
enum KeyCommand {
    /// List key slots.
    Ls {
        vault: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Add a slot for a new passphrase or key file.
    Add {
        vault: PathBuf,
        #[arg(long, value_name = "FILE")]
        new_passphrase_file: Option<PathBuf>,
        #[arg(long, value_name = "FILE")]
        new_key_file: Option<PathBuf>,
        #[command(flatten)]
        kdf: KdfArgs,
    },
    /// Remove a slot by its index (the last slot cannot be removed).
    Rm { vault: PathBuf, slot: usize },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    let _ = e.print();
                    ExitCode::SUCCESS
                }
                clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    // `sqlvault` or `sqlvault rec` alone: a usage error, not a page of help.
                    let help = e.render().to_string();
                    let usage = help.lines().find_map(|l| l.strip_prefix("Usage: ")).unwrap_or("sqlvault <COMMAND>");
                    eprintln!("sqlvault: a command is missing: {usage} (see --help)");
                    ExitCode::from(1)
                }
                _ => {
                    eprintln!("sqlvault: {}", usage_line(&e.render().to_string()));
                    ExitCode::from(1)
                }
            };
        }
    };
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("sqlvault: {}", e.message.replace('\n', " "));
            ExitCode::from(e.code)
        }
    }
}

pub struct Ctx {
    secret: SecretArgs,
    config: EngineConfig,
}

impl Ctx {
    pub fn open(&self, vault: &Path) -> Result<Vault, CliError> {
        let secret = secret::existing(&self.secret)?;
        Ok(Vault::open(vault, &secret, self.config.clone())?)
    }
}

pub fn print_json<T: Serialize>(v: &T) -> Result<(), CliError> {
    let s = serde_json::to_string_pretty(v).map_err(|e| CliError::usage(e.to_string()))?;
    outln!("{s}");
    Ok(())
}

/// Writes one line to standard output; see `outln!`.
pub fn write_line(args: std::fmt::Arguments<'_>) -> Result<(), CliError> {
    let mut w = std::io::stdout().lock();
    match w.write_fmt(args).and_then(|()| w.write_all(b"\n")) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(CliError::stdout(e)),
    }
}

/// clap's multi-line usage error as one line: the message, the missing or
/// offending argument, then where to look (`--help`).
fn usage_line(rendered: &str) -> String {
    let body = rendered.split("\nUsage:").next().unwrap_or(rendered);
    let body = body.split("\nFor more information").next().unwrap_or(body);
    let words = body.split_whitespace().collect::<Vec<_>>().join(" ");
    let words = words.strip_prefix("error: ").unwrap_or(&words);
    format!("{words} (see --help)")
}

fn run(cli: Cli) -> Result<u8, CliError> {
    let config = EngineConfig {
        cache_kib: cli.cache_mib.saturating_mul(1024),
        durability: match cli.durability {
            DurabilityArg::Full => Durability::Full,
            DurabilityArg::Normal => Durability::Normal,
        },
        ..EngineConfig::default()
    };
    let ctx = Ctx { secret: cli.secret, config };
    match cli.command {
        Command::Init { vault, chunk_kib, page_kib, kdf_memory_mib, kdf_iterations } => {
            let secret = secret::new_secret(
                ctx.secret.key_file.as_deref(),
                ctx.secret.passphrase_file.as_deref(),
                secret::ENV_PASSPHRASE,
            )?;
            let opts = CreateOptions {
                chunk_size: chunk_kib.saturating_mul(1024),
                page_size: page_kib.saturating_mul(1024),
                kdf: KdfParams {
                    memory_kib: kdf_memory_mib.saturating_mul(1024),
                    iterations: kdf_iterations,
                    parallelism: 1,
                },
                engine: ctx.config.clone(),
                ..CreateOptions::default()
            };
            Vault::create(&vault, &secret, &opts)?.close()?;
            eprintln!("created {}", vault.display());
        }
        Command::Keygen { file } => {
            sqlvault::generate_key_file(&file)?;
            eprintln!("wrote a new 32-byte key to {} (mode 0600); keep it safe", file.display());
        }
        Command::Put(args) => return transfer::put_command(&ctx, args),
        Command::Get(args) => return transfer::get_command(&ctx, args),
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
        Command::Ls { vault, path, long, recursive, json } => {
            let v = ctx.open(&vault)?;
            ls(&v, &path, long, recursive, json)?;
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
                    return Err(CliError { code: 4, message: format!("{path} is a directory (use rm -r)") })
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
                outln!("  mode: {:04o} ({})", a.perm, mode_string(&a));
                outln!("   uid: {}  gid: {}", a.uid, a.gid);
                outln!("  size: {}", a.size);
                outln!(" links: {}", a.nlink);
                outln!(" atime: {}", fmt_time(a.atime_ns));
                outln!(" mtime: {}", fmt_time(a.mtime_ns));
                outln!(" ctime: {}", fmt_time(a.ctime_ns));
                if a.kind == FileType::Symlink {
                    outln!("target: {}", v.read_link(&path)?);
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
            v.set_permissions(&path, perm)?;
            v.close()?;
        }
        Command::Touch { vault, path } => {
            let v = ctx.open(&vault)?;
            if v.exists(&path)? {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as i64)
                    .unwrap_or(0);
                v.set_times(&path, Some(now), Some(now))?;
            } else {
                v.open_file(&path, &FileOptions::new().write(true).create(true))?.close()?;
            }
            v.close()?;
        }
        Command::Fsck { vault, json, repair } => return check::fsck_command(&ctx, &vault, json, repair),
        Command::Passwd { vault, new_passphrase_file, new_key_file, kdf } => {
            let old = secret::existing(&ctx.secret)?;
            let new = secret::new_secret(
                new_key_file.as_deref(),
                new_passphrase_file.as_deref(),
                secret::ENV_NEW_PASSPHRASE,
            )?;
            Vault::change_secret(&vault, &old, &new, kdf.params())?;
            eprintln!("passphrase changed");
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
                secret::ENV_NEW_PASSPHRASE,
            )?;
            let i = Vault::add_secret(&vault, &old, &new, kdf.params())?;
            eprintln!("added key slot {i}");
        }
        Command::Key(KeyCommand::Rm { vault, slot }) => {
            let old = secret::existing(&ctx.secret)?;
            Vault::remove_secret(&vault, &old, slot)?;
            eprintln!("removed key slot {slot}");
        }
        Command::Mount { vault, args } => {
            sqlvault_fuse::command::run(&vault, secret::existing(&ctx.secret)?, ctx.config.clone(), &args)?;
        }
        Command::Snapshot(args) => snapshots::snapshot(&ctx, args)?,
        Command::Snapshots { vault, json } => snapshots::list(&ctx, vault, json)?,
        Command::Restore(args) => snapshots::restore(&ctx, args)?,
        Command::Compact { vault } => snapshots::compact(&ctx, vault)?,
        Command::Meta(cmd) => return meta::run(&ctx, cmd),
        Command::Info { vault, json } => {
            let v = ctx.open(&vault)?;
            let i = v.info()?;
            if json {
                print_json(&i)?;
            } else {
                outln!("format version: {} (schema {})", i.format_version, i.schema_version);
                outln!(
                    "cipher:         SQLCipher 4, AES-256, {} pages of {} KiB",
                    i.cipher.hmac.sqlcipher_name(),
                    i.cipher.page_size / 1024
                );
                outln!("chunk size:     {} KiB", i.chunk_size / 1024);
                for s in &i.key_slots {
                    outln!("key slot {}:     {}", s.index, describe_slot(s));
                }
                outln!("files:          {}", i.files);
                outln!("directories:    {}", i.directories);
                outln!("symlinks:       {}", i.symlinks);
                outln!("logical bytes:  {}", i.logical_bytes);
                outln!("stored bytes:   {} in {} chunks", i.stored_bytes, i.chunks);
                outln!("dedup ratio:    {:.2}", i.dedup_ratio);
                outln!("file on disk:   {} bytes ({} free pages)", i.file_bytes, i.free_pages);
                outln!("reclaimable:    {} bytes (sqlvault compact)", i.reclaimable_bytes);
                outln!("snapshots:      {}", i.snapshots);
            }
        }
    }
    Ok(0)
}

fn describe_slot(s: &sqlvault::SlotInfo) -> String {
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

fn ls(v: &Vault, path: &str, long: bool, recursive: bool, json: bool) -> Result<(), CliError> {
    let top = v.metadata(path)?;
    let mut out = Vec::new();
    if top.kind != FileType::Dir {
        let name = path.rsplit('/').next().unwrap_or(path).to_string();
        let target = (top.kind == FileType::Symlink).then(|| v.read_link(path)).transpose()?;
        out.push(LsEntry { path: path.to_string(), name, attr: top, target });
    } else {
        collect(v, top.ino, path, recursive, &mut out)?;
    }
    if json {
        return print_json(&out);
    }
    let stdout = std::io::stdout();
    let mut w = stdout.lock();
    for e in out {
        let shown = if recursive { &e.path } else { &e.name };
        let line = if long {
            let t = e.target.as_ref().map(|t| format!(" -> {t}")).unwrap_or_default();
            format!(
                "{} {:>3} {:>5} {:>5} {:>12} {} {shown}{t}",
                mode_string(&e.attr),
                e.attr.nlink,
                e.attr.uid,
                e.attr.gid,
                e.attr.size,
                fmt_time(e.attr.mtime_ns)
            )
        } else {
            shown.to_string()
        };
        if writeln!(w, "{line}").is_err() {
            break; // closed pipe (e.g. `| head`)
        }
    }
    Ok(())
}

/// Lists by inode, not by path, so names that are not UTF-8 (the mount stores raw
/// bytes) are shown lossily instead of failing the whole listing.
fn collect(
    v: &Vault,
    dir: sqlvault::InodeId,
    shown: &str,
    recursive: bool,
    out: &mut Vec<LsEntry>,
) -> Result<(), CliError> {
    for e in transfer::list_all(v, dir)? {
        let name = String::from_utf8_lossy(&e.name).into_owned();
        let p = sqlvault::join_path(shown, &name);
        let attr = v.attr(e.ino)?;
        let target = (e.kind == FileType::Symlink)
            .then(|| v.read_link_ino(e.ino).map(|t| String::from_utf8_lossy(&t).into_owned()))
            .transpose()?;
        out.push(LsEntry { path: p.clone(), name, attr, target });
        if recursive && e.kind == FileType::Dir {
            collect(v, e.ino, &p, true, out)?;
        }
    }
    Ok(())
}

/// The node kind as the JSON outputs spell it (`file`, `dir`, `symlink`).
fn kind_name(kind: FileType) -> &'static str {
    match kind {
        FileType::File => "file",
        FileType::Dir => "dir",
        FileType::Symlink => "symlink",
    }
}

fn mode_string(a: &Attr) -> String {
    let t = match a.kind {
        FileType::Dir => 'd',
        FileType::Symlink => 'l',
        FileType::File => '-',
    };
    let mut s = String::from(t);
    for shift in [6, 3, 0] {
        let bits = (a.perm >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        s.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    s
}

/// UTC time as `YYYY-MM-DD HH:MM:SS` (no time-zone database needed).
pub(crate) fn fmt_time(ns: i64) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_utc_times() {
        assert_eq!(fmt_time(0), "1970-01-01 00:00:00");
        assert_eq!(fmt_time(1_700_000_000 * 1_000_000_000), "2023-11-14 22:13:20");
    }
}
