//! `put` and `get`: copying a host tree into a vault and back out, safe to re-run.
//!
//! Semantics are rclone's `copy`: a directory SRC's *contents* go into DEST (created
//! if missing), so running the same command twice never nests `DEST/SRC`. A single
//! file goes to DEST, or into DEST if DEST is an existing directory or ends in `/`.
//! Files whose size and modification time already match are skipped (`--checksum`
//! compares content instead of the time); `--exclude PATTERN` leaves matching paths
//! out (a pattern without `/` matches a name at any depth, one with `/` a path from
//! SRC); `put --delete` removes from DEST what SRC no longer has (excluded paths are
//! kept); `--dry-run` only prints what would change.
//!
//! Each file is replaced atomically ([`sqlvault::Vault::replace_file`]; on the host,
//! a temporary name renamed over the target): an interrupted copy leaves every file
//! either as it was or complete, and a re-run finishes the job. Ctrl-C stops between
//! two buffers, drops the files in progress and says what was done. `get` syncs once
//! at the end (`--fsync`: every file). `put` of a tree copies its files on worker
//! threads (`-j`, `copier.rs`) while this thread walks. Memory stays bounded: one copy
//! buffer (per worker), one directory listing at a time. FIFOs, sockets and device nodes are stored as nodes
//! (`put`) and recreated where the host permits (`get`: FIFOs and sockets always,
//! devices as root; see `special`). Entries that cannot be copied (unreadable files,
//! names that are not UTF-8, a device `get` may not create) are skipped with a
//! warning and counted; the command then exits 5. With `--extract-tags`, `put` also tags each
//! file it copies (see `extract`), a thousand files per commit.

use std::collections::HashSet;
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, UNIX_EPOCH};

use clap::Args;
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use indicatif::ProgressBar;
use sqlvault::{FileOptions, FileType, Interrupt, SetAttr, Vault};
use walkdir::WalkDir;

use crate::copier::{Copier, Done, Job};
use crate::progress::{self, bytes, took};
use crate::{CliError, Ctx, Exit};

const COPY_BUF: usize = 1 << 20;
/// Files whose extracted tags are committed together.
const TAG_BATCH: usize = 1000;
/// Prefix of the temporary names `get` writes files under before renaming them.
const HOST_PART: &str = ".sqlvault-part-";

/// Tags extracted and not yet committed: `(vault path, tags)`.
type TagBatch = Vec<(String, Vec<(String, sqlvault::TagValue)>)>;

/// `sqlvault put`.
#[derive(Args, Debug)]
pub struct PutArgs {
    /// The vault file.
    pub vault: PathBuf,
    /// Host file or directory. A directory's contents are copied into DEST.
    pub source: PathBuf,
    /// Vault path. For a directory SRC, the directory that receives its contents
    /// (created if missing); for a file, the file (or, if DEST is a directory or ends in
    /// `/`, the directory to put it in).
    pub dest: String,
    /// Tag each file copied with size, mtime, MIME type and (JPEG) EXIF camera, datetime, ISO, dimensions.
    #[arg(long)]
    pub extract_tags: bool,
    /// Compare content, not size and modification time, to find unchanged files.
    #[arg(short = 'c', long)]
    pub checksum: bool,
    /// Show what would be copied or deleted; change nothing.
    #[arg(short = 'n', long)]
    pub dry_run: bool,
    /// Leave out paths matching this glob (repeatable): `*.tmp` matches a name at any
    /// depth, `cache/**` a path from SRC. Excluded paths are never deleted.
    #[arg(long, value_name = "PATTERN")]
    pub exclude: Vec<String>,
    /// Remove files and directories from DEST that SRC does not have.
    #[arg(long)]
    pub delete: bool,
    /// End with one JSON object: counts, bytes copied, and the bytes the vault's
    /// chunks grew by before (`unique_bytes_added`) and after compression
    /// (`stored_bytes_added`).
    #[arg(long)]
    pub json: bool,
    /// Files copied at once (default: one per CPU, at most 4). Each file is still
    /// replaced atomically; 1 copies them one after another.
    #[arg(short = 'j', long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: Option<u16>,
}

/// `sqlvault get`.
#[derive(Args, Debug)]
pub struct GetArgs {
    /// The vault file.
    pub vault: PathBuf,
    /// Vault file or directory. A directory's contents are copied into DEST.
    pub source: String,
    /// Host path: the directory that receives SOURCE's contents (created if missing),
    /// or for a file the file (or the existing directory to put it in). `-` writes a
    /// single file to standard output.
    pub dest: PathBuf,
    /// Sync every file as it is written (default: one sync of the file system at the end).
    #[arg(long)]
    pub fsync: bool,
    /// Compare content, not size and modification time, to find unchanged files.
    #[arg(short = 'c', long)]
    pub checksum: bool,
    /// Show what would be written; change nothing.
    #[arg(short = 'n', long)]
    pub dry_run: bool,
    /// Leave out paths matching this glob (repeatable), as for `put`.
    #[arg(long, value_name = "PATTERN")]
    pub exclude: Vec<String>,
}

/// Counts of what a transfer did and skipped.
#[derive(Default)]
pub struct Summary {
    pub files: u64,
    pub unchanged: u64,
    pub deleted: u64,
    pub dirs: u64,
    pub links: u64,
    /// FIFOs, sockets and device nodes.
    pub specials: u64,
    pub bytes: u64,
    pub skipped: Vec<String>,
}

/// The exclude patterns as one matcher over paths relative to SRC (no leading `/`).
fn matcher(patterns: &[String]) -> Result<GlobSet, CliError> {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        let pat = if p.contains('/') { p.trim_start_matches('/').to_string() } else { format!("**/{p}") };
        let glob = GlobBuilder::new(&pat)
            .literal_separator(true)
            .build()
            .map_err(|e| CliError::usage(format!("--exclude {p:?}: {e}")))?;
        b.add(glob);
    }
    b.build().map_err(|e| CliError::usage(format!("--exclude: {e}")))
}

fn join_rel(rel: &str, name: &str) -> String {
    if rel.is_empty() {
        name.to_string()
    } else {
        format!("{rel}/{name}")
    }
}

fn mtime_ns(m: &fs::Metadata) -> i64 {
    m.mtime() * 1_000_000_000 + m.mtime_nsec()
}

fn atime_ns(m: &fs::Metadata) -> i64 {
    m.atime() * 1_000_000_000 + m.atime_nsec()
}

fn system_time(ns: i64) -> std::time::SystemTime {
    if ns >= 0 {
        UNIX_EPOCH + Duration::from_nanos(ns as u64)
    } else {
        UNIX_EPOCH - Duration::from_nanos(ns.unsigned_abs())
    }
}

fn is_not_found(e: &sqlvault::Error) -> bool {
    matches!(e, sqlvault::Error::NotFound { .. })
}

/// Sets the tags of many files in one transaction and one commit: all or nothing.
fn set_tags_batch(vault: &Vault, batch: &[(String, Vec<(String, sqlvault::TagValue)>)]) -> sqlvault::Result<()> {
    vault.transaction(|tx| batch.iter().try_for_each(|(path, tags)| tx.set_tags(path, tags)))
}

/// Every entry of directory `dir` (a vault path as raw bytes) with its attributes and
/// raw name, in name order.
pub fn list_all(vault: &Vault, dir: &[u8]) -> Result<Vec<sqlvault::DirEntry>, CliError> {
    const PAGE: usize = 512;
    let mut out: Vec<sqlvault::DirEntry> = Vec::new();
    loop {
        let page = vault.read_dir_page(dir, out.last().map(|e| e.raw_name.as_slice()), PAGE)?;
        let done = page.len() < PAGE;
        out.extend(page);
        if done {
            return Ok(out);
        }
    }
}

/// The raw vault path of entry `name` of directory `dir` (both raw bytes).
pub fn child(dir: &[u8], name: &[u8]) -> Vec<u8> {
    [dir.strip_suffix(b"/").unwrap_or(dir), b"/", name].concat()
}

/// True if the vault file `vpath` and the host file `host` hold the same bytes.
fn same_content(vault: &Vault, vpath: &str, host: &Path) -> Result<bool, CliError> {
    let mut a = vault.open_file(vpath, &FileOptions::new().read(true))?;
    let mut b = fs::File::open(host).map_err(|e| CliError::host(host, e))?;
    let (mut x, mut y) = (vec![0u8; 64 << 10], vec![0u8; 64 << 10]);
    loop {
        let n = read_full(&mut a, &mut x).map_err(|e| CliError::vault_io(vpath, e))?;
        let m = read_full(&mut b, &mut y).map_err(|e| CliError::host(host, e))?;
        if n != m || x[..n] != y[..m] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// The summary line both commands end with.
fn summary_line(what: &str, s: &Summary, dry_run: bool, start: Instant) -> String {
    let verb = if dry_run { "would copy" } else { what };
    let mut line = format!("{verb} {} files ({})", s.files, bytes(s.bytes));
    line += &format!(", {} unchanged", s.unchanged);
    if s.deleted > 0 {
        line += &format!(", {} {}", s.deleted, if dry_run { "to delete" } else { "deleted" });
    }
    line += &format!(", {} directories, {} symlinks", s.dirs, s.links);
    if s.specials > 0 {
        line += &format!(", {} special files", s.specials);
    }
    line += &format!(" in {}", took(start));
    line
}

/// The error of a transfer stopped by Ctrl-C: what was done, the file left as it was.
fn interrupted(what: &str, s: &Summary, current: Option<&str>, dry_run: bool, start: Instant) -> CliError {
    let line = summary_line(what, s, dry_run, start);
    let current = current.map(|c| format!("; {c} was left as it was")).unwrap_or_default();
    progress::interrupted(format!(
        "{line}{current}; every file is either as it was or complete; run the same command again to finish"
    ))
}

fn finish(what: &str, s: &Summary, dry_run: bool, start: Instant) -> Exit {
    note!("{}", summary_line(what, s, dry_run, start));
    if s.skipped.is_empty() {
        Exit::Success
    } else {
        // Always shown: it explains the exit code, even under `-q` (which hid the warnings).
        let see = if crate::ui::notes() { "see warnings above" } else { "run without -q to list them" };
        eprintln!("sqlvault: {} entries skipped ({see})", s.skipped.len());
        Exit::Environment
    }
}

/// Host bytes and files below `root` that a put would look at (excludes applied;
/// excluded directories are not entered): `(bytes, files)`.
fn host_total(root: &Path, ex: &GlobSet) -> (u64, u64) {
    let rel = |p: &Path| p.strip_prefix(root).map(|r| r.to_string_lossy().into_owned()).unwrap_or_default();
    let walk = WalkDir::new(root)
        .follow_links(false)
        .follow_root_links(false)
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || !ex.is_match(rel(e.path())));
    walk.flatten()
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| e.metadata().ok())
        .fold((0, 0), |(b, n), m| (b + m.len(), n + 1))
}

// ----- put -----

/// A directory of the host walk whose entries are being copied.
struct DirFrame {
    /// Host path (to match the walk's error for a directory it cannot list).
    src: PathBuf,
    depth: usize,
    dest: String,
    /// Path below SRC, for the excludes.
    rel: String,
    meta: fs::Metadata,
    /// Whether the vault directory was there before (else `--delete` has nothing to do).
    exists: bool,
    /// False if the host directory could not be listed: nothing below it is deleted.
    listed: bool,
    /// Names the host has here.
    names: HashSet<Vec<u8>>,
    /// What the vault directory held when the walk entered it, by name (empty if it
    /// was made now), each taken out as the walk reaches it: one listing per directory
    /// instead of a lookup per entry (in a vault held alone every read waits for the
    /// writer, which the workers keep busy).
    stored: std::collections::HashMap<Vec<u8>, sqlvault::DirEntry>,
}

/// What the vault has at an entry's destination, when the walk knows it from its
/// directory's listing: `Some(None)` nothing, `None` not known (look it up).
type Known = Option<Option<sqlvault::DirEntry>>;

struct Put<'a> {
    vault: &'a Vault,
    args: &'a PutArgs,
    ex: GlobSet,
    pb: ProgressBar,
    stop: Interrupt,
    s: Summary,
    tags: Option<TagBatch>,
    files_total: u64,
    /// The file being copied, for the message on interrupt.
    current: Option<String>,
    /// Worker threads copying the files of a tree (`copier.rs`); `None` copies on this thread.
    copier: Option<Copier>,
    /// Directories left by the walk whose mode and times wait for the files handed to
    /// the workers before: (jobs handed then, vault path, host metadata), in order.
    dir_attrs: std::collections::VecDeque<(u64, String, fs::Metadata)>,
}

/// Runs `sqlvault put`.
pub fn put_command(ctx: &Ctx, args: PutArgs) -> Result<Exit, CliError> {
    let start = Instant::now();
    let stop = progress::interrupt();
    let ex = matcher(&args.exclude)?;
    let meta = fs::symlink_metadata(&args.source).map_err(|e| CliError::host(&args.source, e))?;
    let total = host_total(&args.source, &ex);
    // Files write faster through a rollback journal than through the WAL (each page
    // once), if nothing else has the vault open: `open_bulk` then shares a commit among
    // the files of each commit window, so small files do not pay its syncs one by one
    // (docs/perf/2026-11-28-exclusive-small-files.md).
    let vault = if args.dry_run { ctx.open(&args.vault)? } else { ctx.open_bulk(&args.vault)? };
    let before = if args.json { Some(vault.info()?) } else { None };
    let mut p = Put {
        vault: &vault,
        args: &args,
        ex,
        pb: progress::bytes_bar(total.0, total.1),
        stop,
        s: Summary::default(),
        tags: args.extract_tags.then(TagBatch::new),
        files_total: total.1,
        current: None,
        copier: None,
        dir_attrs: Default::default(),
    };
    let jobs = match args.jobs {
        Some(n) => usize::from(n),
        None => std::thread::available_parallelism().map_or(1, |n| n.get()).min(crate::copier::MAX_JOBS),
    };
    if meta.is_dir() && !args.dry_run && jobs > 1 {
        p.copier = Some(Copier::new(&vault, &p.pb, &p.stop, jobs));
    }
    let r = p.run(&meta);
    // Every file handed to a worker is finished (or dropped, on an interrupt) before
    // anything is reported; the first error stands.
    let r = match r {
        Ok(()) => p.drain(),
        Err(e) => {
            let current = p.current.take();
            let _ = p.drain();
            p.current = current;
            Err(e)
        }
    };
    p.copier = None;
    let r = r.and_then(|()| match p.tags.take().filter(|b| !b.is_empty()) {
        Some(batch) if !args.dry_run => Ok(set_tags_batch(&vault, &batch)?),
        _ => Ok(()),
    });
    p.pb.finish_and_clear();
    if let Err(e) = r {
        let stopped = e.code == Exit::Interrupted || p.stop.is_set();
        return Err(if stopped { interrupted("copied", &p.s, p.current.as_deref(), args.dry_run, start) } else { e });
    }
    let code = finish("copied", &p.s, args.dry_run, start);
    let s = std::mem::take(&mut p.s);
    drop(p);
    if let Some(before) = before {
        vault.sync()?;
        let after = vault.info()?;
        let grew = |a: u64, b: u64| a as i64 - b as i64;
        crate::print_json(&serde_json::json!({
            "files": s.files,
            "unchanged": s.unchanged,
            "deleted": s.deleted,
            "directories": s.dirs,
            "symlinks": s.links,
            "special_files": s.specials,
            "bytes": s.bytes,
            "skipped": s.skipped.len(),
            "unique_bytes_added": grew(after.unique_bytes, before.unique_bytes),
            "stored_bytes_added": grew(after.stored_bytes, before.stored_bytes),
            "seconds": start.elapsed().as_secs_f64(),
        }))?;
    }
    vault.close()?;
    Ok(code)
}

fn from_lib(e: sqlvault::Error) -> CliError {
    if e.is_interrupted() {
        return progress::interrupted("stopped");
    }
    CliError::from(e)
}

impl Put<'_> {
    fn run(&mut self, meta: &fs::Metadata) -> Result<(), CliError> {
        let src = self.args.source.clone();
        let dest = self.args.dest.clone();
        if meta.is_dir() {
            return self.tree(&src, &dest);
        }
        let name = src
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| CliError::usage(format!("{} has no usable file name (names must be UTF-8)", src.display())))?
            .to_string();
        let into_dir = dest.ends_with('/') || matches!(self.vault.metadata(&dest), Ok(a) if a.kind == FileType::Dir);
        let target = if into_dir { sqlvault::join_path(&dest, &name) } else { dest };
        self.entry(&src, meta, &target, None)
    }

    fn skip(&mut self, why: String) {
        self.pb.suspend(|| warning!("skipped {why}"));
        self.s.skipped.push(why);
    }

    fn note(&self, line: String) -> Result<(), CliError> {
        self.pb.suspend(|| crate::output::write_line(format_args!("{line}")))
    }

    /// Removes whatever is at vault path `dest` (for a type change or `--delete`).
    fn remove(&mut self, dest: &str, kind: FileType) -> Result<(), CliError> {
        if self.args.dry_run {
            self.note(format!("would delete {dest}{}", if kind == FileType::Dir { "/" } else { "" }))?;
        } else if kind == FileType::Dir {
            self.vault.remove_dir_all(dest, &sqlvault::Ops::default().interrupt(&self.stop)).map_err(from_lib)?;
        } else {
            self.vault.remove_file(dest)?;
        }
        Ok(())
    }

    /// Copies host `src` to vault `dest` (where the vault has `known`, if known).
    fn entry(&mut self, src: &Path, meta: &fs::Metadata, dest: &str, known: Known) -> Result<(), CliError> {
        self.stop.check().map_err(from_lib)?;
        let ft = meta.file_type();
        if ft.is_dir() {
            self.tree(src, dest)
        } else if ft.is_file() {
            self.file(src, meta, dest, known)
        } else if ft.is_symlink() {
            self.symlink(src, dest, known)
        } else if self.args.dry_run {
            self.note(format!("would copy {dest}"))
        } else {
            // A FIFO is never opened: its node is stored, not its (absent) content.
            crate::special::put(self.vault, meta, dest)?;
            self.s.specials += 1;
            Ok(())
        }
    }

    /// Copies the host tree below directory `src` into vault directory `dest`: one
    /// `walkdir` walk in name order, depth first; a directory is finished (`--delete`,
    /// its mode and times) once the walk leaves it. Excluded directories are not entered.
    fn tree(&mut self, src: &Path, dest: &str) -> Result<(), CliError> {
        let mut open: Vec<DirFrame> = Vec::new();
        let mut walk = WalkDir::new(src).follow_links(false).sort_by_file_name().into_iter();
        while let Some(item) = walk.next() {
            self.stop.check().map_err(from_lib)?;
            let e = match item {
                Ok(e) => e,
                Err(err) => {
                    // A directory that cannot be listed (its own entry came first):
                    // nothing below it is copied, so nothing below it may be deleted.
                    if let Some(f) = open.iter_mut().rev().find(|f| Some(f.src.as_path()) == err.path()) {
                        f.listed = false;
                    }
                    let path = err.path().unwrap_or(src).display().to_string();
                    let why = err.io_error().map_or_else(|| err.to_string(), ToString::to_string);
                    self.skip(format!("{path}: {why}"));
                    continue;
                }
            };
            while open.last().is_some_and(|f| f.depth >= e.depth()) {
                let f = open.pop().expect("a directory in the walk");
                self.close_dir(f)?;
            }
            let is_dir = e.file_type().is_dir();
            let (target, rel, known) = match open.last_mut() {
                None => (dest.to_string(), String::new(), None),
                Some(parent) => {
                    let Some(name) = e.file_name().to_str() else {
                        self.skip(format!("{}: name is not UTF-8", e.path().display()));
                        if is_dir {
                            walk.skip_current_dir();
                        }
                        continue;
                    };
                    let r = join_rel(&parent.rel, name);
                    if self.ex.is_match(&r) {
                        if is_dir {
                            walk.skip_current_dir();
                        }
                        continue;
                    }
                    parent.names.insert(name.as_bytes().to_vec());
                    let known = Some(parent.stored.remove(name.as_bytes()));
                    (sqlvault::join_path(&parent.dest, name), r, known)
                }
            };
            let meta = match e.metadata() {
                Ok(m) => m,
                Err(err) => {
                    self.skip(format!(
                        "{}: {}",
                        e.path().display(),
                        err.io_error().map_or_else(|| err.to_string(), ToString::to_string)
                    ));
                    if is_dir {
                        walk.skip_current_dir();
                    }
                    continue;
                }
            };
            if is_dir {
                let exists = self.open_dir(&meta, &target, &rel, known)?;
                let stored = match exists {
                    true => {
                        list_all(self.vault, target.as_bytes())?.into_iter().map(|e| (e.raw_name.clone(), e)).collect()
                    }
                    false => Default::default(),
                };
                open.push(DirFrame {
                    src: e.path().to_path_buf(),
                    depth: e.depth(),
                    dest: target,
                    rel,
                    meta,
                    exists,
                    listed: true,
                    names: HashSet::new(),
                    stored,
                });
            } else {
                self.entry(e.path(), &meta, &target, known)?;
            }
        }
        while let Some(f) = open.pop() {
            self.close_dir(f)?;
        }
        Ok(())
    }

    /// Makes vault directory `dest` exist (replacing a non-directory); returns whether
    /// it existed already.
    fn open_dir(&mut self, meta: &fs::Metadata, dest: &str, rel: &str, known: Known) -> Result<bool, CliError> {
        let existing = self.stored_at(dest, known)?.map(|e| e.attr);
        let exists = match existing {
            Some(a) if a.kind == FileType::Dir => true,
            Some(a) => {
                self.remove(dest, a.kind)?;
                false
            }
            None => false,
        };
        if !exists {
            if self.args.dry_run {
                self.note(format!("would create {dest}/"))?;
            } else if dest != "/" {
                match self.vault.create_dir(dest, meta.mode() & 0o7777) {
                    Ok(_) => {}
                    Err(sqlvault::Error::NotFound { .. }) if rel.is_empty() => self.vault.create_dir_all(dest)?,
                    Err(e) => return Err(e.into()),
                }
            }
        }
        self.s.dirs += 1;
        Ok(exists)
    }

    /// Finishes a directory once its entries are copied: `--delete` of what the host
    /// no longer has, then its mode and times (after its entries changed them).
    fn close_dir(&mut self, f: DirFrame) -> Result<(), CliError> {
        if !f.listed {
            return Ok(());
        }
        if self.args.delete && f.exists {
            for e in list_all(self.vault, f.dest.as_bytes())? {
                let name = e.name;
                if f.names.contains(&e.raw_name) || self.ex.is_match(join_rel(&f.rel, &name)) {
                    continue;
                }
                self.stop.check().map_err(from_lib)?;
                self.remove(&sqlvault::join_path(&f.dest, &name), e.attr.kind)?;
                self.s.deleted += 1;
            }
        }
        if self.args.dry_run || f.dest == "/" {
            return Ok(());
        }
        match self.copier.as_ref() {
            // After the files handed over so far (creating one changes the time).
            Some(c) => {
                self.dir_attrs.push_back((c.handed(), f.dest, f.meta));
                self.settle_dirs()
            }
            None => self.set_dir_attrs(&f.dest, &f.meta),
        }
    }

    /// Sets vault directory `dest`'s mode and times to the host's.
    fn set_dir_attrs(&mut self, dest: &str, meta: &fs::Metadata) -> Result<(), CliError> {
        let a = self.vault.symlink_metadata(dest)?;
        let perm = meta.mode() & 0o7777;
        if a.perm != perm {
            self.vault.set_attr(dest, &sqlvault::SetAttr { perm: Some(perm), ..Default::default() }, true)?;
        }
        if a.mtime_ns != mtime_ns(meta) {
            self.vault.set_attr(
                dest,
                &sqlvault::SetAttr {
                    atime_ns: Some(atime_ns(meta)),
                    mtime_ns: Some(mtime_ns(meta)),
                    ..Default::default()
                },
                true,
            )?;
        }
        Ok(())
    }

    /// Sets the attributes of the finished directories whose files are all copied.
    fn settle_dirs(&mut self) -> Result<(), CliError> {
        let through = self.copier.as_ref().map_or(u64::MAX, Copier::done_through);
        while self.dir_attrs.front().is_some_and(|d| d.0 <= through) {
            let (_, dest, meta) = self.dir_attrs.pop_front().expect("a directory waiting");
            self.set_dir_attrs(&dest, &meta)?;
        }
        Ok(())
    }

    /// What the vault has at `dest`: `known` from the directory's listing, else looked up.
    fn stored_at(&self, dest: &str, known: Known) -> Result<Option<sqlvault::DirEntry>, CliError> {
        if let Some(k) = known {
            return Ok(k);
        }
        match self.vault.symlink_metadata(dest) {
            Ok(attr) => {
                let target = match attr.kind {
                    FileType::Symlink => Some(self.vault.read_link(dest)?.into_bytes()),
                    _ => None,
                };
                let name = dest.rsplit('/').next().unwrap_or(dest).to_string();
                Ok(Some(sqlvault::DirEntry { raw_name: name.clone().into_bytes(), name, attr, target }))
            }
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn file(&mut self, src: &Path, meta: &fs::Metadata, dest: &str, known: Known) -> Result<(), CliError> {
        let perm = meta.mode() & 0o7777;
        let existing = self.stored_at(dest, known)?.map(|e| e.attr);
        if let Some(a) = &existing {
            if a.kind == FileType::File && a.size == meta.len() {
                let same = if self.args.checksum {
                    same_content(self.vault, dest, src)?
                } else {
                    a.mtime_ns == mtime_ns(meta)
                };
                if same {
                    if a.perm != perm && !self.args.dry_run {
                        self.vault.set_attr(
                            dest,
                            &sqlvault::SetAttr { perm: Some(perm), ..Default::default() },
                            true,
                        )?;
                    }
                    self.s.unchanged += 1;
                    self.pb.inc(meta.len());
                    return Ok(());
                }
            }
            if a.kind != FileType::File {
                self.remove(dest, a.kind)?;
            }
        }
        if self.args.dry_run {
            self.note(format!("would copy {dest} ({})", bytes(meta.len())))?;
            self.count_file(meta.len());
            return Ok(());
        }
        let input = match fs::File::open(src) {
            Ok(f) => f,
            Err(e) => {
                self.skip(format!("{}: {e}", src.display()));
                return Ok(());
            }
        };
        let stamp = SetAttr {
            perm: Some(perm),
            atime_ns: Some(atime_ns(meta)),
            mtime_ns: Some(mtime_ns(meta)),
            ..Default::default()
        };
        if let Some(c) = self.copier.as_mut() {
            let job = Job { dest: dest.to_string(), src: src.to_path_buf(), meta: meta.clone(), input, stamp };
            let done = c.submit(job, self.vault, &self.pb, &self.stop);
            self.current = c.in_progress().map(str::to_string);
            return self.absorb(done);
        }
        self.current = Some(dest.to_string());
        let pb = self.pb.clone();
        // The library reports bytes stored so far in this file; the bar counts all files.
        let shown = std::sync::atomic::AtomicU64::new(0);
        let progress = |p: &sqlvault::Progress| {
            let before = shown.swap(p.done, std::sync::atomic::Ordering::Relaxed);
            pb.inc(p.done.saturating_sub(before));
        };
        let n = self
            .vault
            .replace_file(
                dest,
                meta.len(),
                input,
                &stamp,
                &sqlvault::Ops::default().progress(&progress).interrupt(&self.stop),
            )
            .map_err(from_lib)?;
        self.current = None;
        self.copied(src, meta, dest, n)
    }

    /// Counts (and with `--extract-tags`, tags) a file copied.
    fn copied(&mut self, src: &Path, meta: &fs::Metadata, dest: &str, n: u64) -> Result<(), CliError> {
        self.count_file(n);
        if let Some(batch) = self.tags.as_mut() {
            batch.push((dest.to_string(), crate::extract::tags_of(src, meta)));
            if batch.len() >= TAG_BATCH {
                set_tags_batch(self.vault, batch)?;
                batch.clear();
            }
        }
        Ok(())
    }

    /// Takes in what the workers finished, then finishes the directories that waited
    /// for them; the first failure is the result.
    fn absorb(&mut self, done: Vec<Done>) -> Result<(), CliError> {
        let mut first = Ok(());
        for d in done {
            let r = d.result.map_err(from_lib).and_then(|n| self.copied(&d.src, &d.meta, &d.dest, n));
            if first.is_ok() {
                first = r;
            }
        }
        first.and_then(|()| self.settle_dirs())
    }

    /// Waits for every file handed to the workers (at the end), and finishes the
    /// directories that waited for them.
    fn drain(&mut self) -> Result<(), CliError> {
        match self.copier.as_mut() {
            Some(c) => {
                let done = c.drain(self.vault, &self.pb, &self.stop);
                self.current = None;
                self.absorb(done)
            }
            None => Ok(()),
        }
    }

    fn count_file(&mut self, n: u64) {
        self.s.files += 1;
        self.s.bytes += n;
        self.pb.set_message(format!("{}/{} files", self.s.files + self.s.unchanged, self.files_total));
    }

    fn symlink(&mut self, src: &Path, dest: &str, known: Known) -> Result<(), CliError> {
        let target = fs::read_link(src).map_err(|e| CliError::host(src, e))?;
        let Some(t) = target.to_str() else {
            self.skip(format!("{}: link target is not UTF-8", src.display()));
            return Ok(());
        };
        match self.stored_at(dest, known)? {
            Some(e) if e.attr.kind == FileType::Symlink && e.target.as_deref() == Some(t.as_bytes()) => {
                self.s.unchanged += 1;
                return Ok(());
            }
            Some(e) => self.remove(dest, e.attr.kind)?,
            None => {}
        }
        if self.args.dry_run {
            self.note(format!("would link {dest} -> {t}"))?;
        } else {
            self.vault.symlink(t, dest)?;
        }
        self.s.links += 1;
        Ok(())
    }
}

// ----- get -----

struct Get<'a> {
    vault: &'a Vault,
    args: &'a GetArgs,
    ex: GlobSet,
    pb: ProgressBar,
    stop: Interrupt,
    s: Summary,
    buf: Vec<u8>,
    files_total: u64,
    current: Option<String>,
}

/// Vault bytes and files below directory `dir` (a vault path as raw bytes) that a get
/// would look at (excludes applied).
fn vault_total(vault: &Vault, dir: &[u8], rel: &str, ex: &GlobSet, acc: &mut (u64, u64)) {
    let Ok(entries) = list_all(vault, dir) else { return };
    for e in entries {
        let r = join_rel(rel, &e.name);
        if ex.is_match(&r) {
            continue;
        }
        match e.attr.kind {
            FileType::Dir => vault_total(vault, &child(dir, &e.raw_name), &r, ex, acc),
            FileType::File => {
                acc.0 += e.attr.size;
                acc.1 += 1;
            }
            _ => {}
        }
    }
}

/// Runs `sqlvault get`.
pub fn get_command(ctx: &Ctx, args: GetArgs) -> Result<Exit, CliError> {
    let start = Instant::now();
    let stop = progress::interrupt();
    let ex = matcher(&args.exclude)?;
    let vault = ctx.open(&args.vault)?;
    let attr = vault.metadata(&args.source)?;
    if args.dest.as_os_str() == "-" {
        if attr.kind != FileType::File {
            return Err(CliError::usage(format!("{}: only a file can be written to standard output", args.source)));
        }
        let mut f = vault.open_file(&args.source, &FileOptions::new().read(true))?;
        let mut out = io::stdout().lock();
        return match io::copy(&mut f, &mut out).and_then(|_| out.flush()) {
            Ok(_) => Ok(Exit::Success),
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(Exit::Success),
            Err(e) => Err(CliError::vault_io(&args.source, e)),
        };
    }
    let mut total = (attr.size, 1);
    if attr.kind == FileType::Dir {
        total = (0, 0);
        vault_total(&vault, args.source.as_bytes(), "", &ex, &mut total);
    }
    let mut g = Get {
        vault: &vault,
        args: &args,
        ex,
        pb: progress::bytes_bar(total.0, total.1),
        stop,
        s: Summary::default(),
        buf: vec![0u8; COPY_BUF],
        files_total: total.1,
        current: None,
    };
    let r = g.run(attr.kind);
    g.pb.finish_and_clear();
    if let Err(e) = r {
        let stopped = e.code == Exit::Interrupted || g.stop.is_set();
        return Err(if stopped { interrupted("wrote", &g.s, g.current.as_deref(), args.dry_run, start) } else { e });
    }
    if !args.dry_run && !args.fsync {
        sync_fs(&args.dest)?;
    }
    Ok(finish("wrote", &g.s, args.dry_run, start))
}

/// One `syncfs` of the file system holding `path`: everything written is durable.
fn sync_fs(path: &Path) -> Result<(), CliError> {
    use std::os::fd::AsRawFd;
    let dir = if path.is_dir() { path.to_path_buf() } else { path.parent().unwrap_or(Path::new(".")).to_path_buf() };
    let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
    let f = fs::File::open(&dir).map_err(|e| CliError::host(&dir, e))?;
    // SAFETY: syncfs on a valid descriptor.
    if unsafe { libc::syncfs(f.as_raw_fd()) } != 0 {
        return Err(CliError::host(&dir, io::Error::last_os_error()));
    }
    Ok(())
}

impl Get<'_> {
    fn run(&mut self, kind: FileType) -> Result<(), CliError> {
        let src = self.args.source.clone();
        let dest = self.args.dest.clone();
        if kind == FileType::Dir {
            return self.dir(&src, &dest, "");
        }
        let name = src.trim_end_matches('/').rsplit('/').next().filter(|n| !n.is_empty()).unwrap_or("root").to_string();
        let target = if dest.is_dir() { dest.join(name) } else { dest };
        self.entry(&src, kind, &target, "")
    }

    fn skip(&mut self, why: String) {
        self.pb.suspend(|| warning!("skipped {why}"));
        self.s.skipped.push(why);
    }

    fn note(&self, line: String) -> Result<(), CliError> {
        self.pb.suspend(|| crate::output::write_line(format_args!("{line}")))
    }

    fn entry(&mut self, src: &str, kind: FileType, dest: &Path, rel: &str) -> Result<(), CliError> {
        self.stop.check().map_err(from_lib)?;
        match kind {
            FileType::Dir => self.dir(src, dest, rel),
            FileType::File => self.file(src, dest),
            FileType::Symlink => self.symlink(src, dest),
            _ if self.args.dry_run => self.note(format!("would write {}", dest.display())),
            _ => {
                let attr = self.vault.symlink_metadata(src)?;
                if fs::symlink_metadata(dest).is_ok() {
                    fs::remove_file(dest).map_err(|e| CliError::host(dest, e))?;
                }
                match crate::special::get(&attr, dest)? {
                    Ok(()) => self.s.specials += 1,
                    Err(why) => self.skip(format!("{src}: {why}")),
                }
                Ok(())
            }
        }
    }

    fn dir(&mut self, src: &str, dest: &Path, rel: &str) -> Result<(), CliError> {
        let attr = self.vault.symlink_metadata(src)?;
        match fs::symlink_metadata(dest) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(CliError {
                    code: Exit::Tree,
                    message: format!("{}: exists and is not a directory", dest.display()),
                })
            }
            Err(_) if self.args.dry_run => self.note(format!("would create {}/", dest.display()))?,
            Err(_) => fs::create_dir_all(dest).map_err(|e| CliError::host(dest, e))?,
        }
        self.s.dirs += 1;
        for e in list_all(self.vault, src.as_bytes())? {
            // The mount stores raw byte names; paths here are UTF-8.
            let Ok(name) = std::str::from_utf8(&e.raw_name) else {
                let shown = sqlvault::join_path(src, &e.name);
                self.skip(format!("{shown}: name is not UTF-8"));
                continue;
            };
            let r = join_rel(rel, name);
            if self.ex.is_match(&r) {
                continue;
            }
            self.entry(&sqlvault::join_path(src, name), e.attr.kind, &dest.join(name), &r)?;
        }
        if !self.args.dry_run {
            fs::set_permissions(dest, fs::Permissions::from_mode(attr.perm)).map_err(|e| CliError::host(dest, e))?;
            let f = fs::File::open(dest).map_err(|e| CliError::host(dest, e))?;
            let _ = f.set_times(
                fs::FileTimes::new().set_modified(system_time(attr.mtime_ns)).set_accessed(system_time(attr.atime_ns)),
            );
        }
        Ok(())
    }

    fn file(&mut self, src: &str, dest: &Path) -> Result<(), CliError> {
        let attr = self.vault.symlink_metadata(src)?;
        if let Ok(m) = fs::symlink_metadata(dest) {
            if m.is_file() && m.len() == attr.size {
                let same = if self.args.checksum {
                    same_content(self.vault, src, dest)?
                } else {
                    mtime_ns(&m) == attr.mtime_ns
                };
                if same {
                    if m.mode() & 0o7777 != attr.perm && !self.args.dry_run {
                        fs::set_permissions(dest, fs::Permissions::from_mode(attr.perm))
                            .map_err(|e| CliError::host(dest, e))?;
                    }
                    self.s.unchanged += 1;
                    self.pb.inc(attr.size);
                    return Ok(());
                }
            }
            if m.is_dir() {
                return Err(CliError { code: Exit::Tree, message: format!("{}: is a directory", dest.display()) });
            }
        }
        if self.args.dry_run {
            self.note(format!("would write {} ({})", dest.display(), bytes(attr.size)))?;
            self.count_file(attr.size);
            return Ok(());
        }
        let dir = dest.parent().unwrap_or(Path::new("."));
        let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let part = dir.join(format!("{HOST_PART}{name}"));
        self.current = Some(dest.display().to_string());
        let r = self.copy_out(src, &attr, &part, dest);
        if r.is_err() {
            let _ = fs::remove_file(&part);
        }
        r?;
        self.current = None;
        self.count_file(attr.size);
        Ok(())
    }

    fn copy_out(&mut self, src: &str, attr: &sqlvault::Attr, part: &Path, dest: &Path) -> Result<(), CliError> {
        let mut input = self.vault.open_file(src, &FileOptions::new().read(true))?;
        let mut out = fs::File::create(part).map_err(|e| CliError::host(part, e))?;
        loop {
            self.stop.check().map_err(from_lib)?;
            let n = input.read(&mut self.buf).map_err(|e| CliError::vault_io(src, e))?;
            if n == 0 {
                break;
            }
            out.write_all(&self.buf[..n]).map_err(|e| CliError::host(dest, e))?;
            self.pb.inc(n as u64);
        }
        input.close()?;
        out.set_permissions(fs::Permissions::from_mode(attr.perm)).map_err(|e| CliError::host(dest, e))?;
        out.set_times(
            fs::FileTimes::new().set_modified(system_time(attr.mtime_ns)).set_accessed(system_time(attr.atime_ns)),
        )
        .map_err(|e| CliError::host(dest, e))?;
        if self.args.fsync {
            out.sync_all().map_err(|e| CliError::host(dest, e))?;
        }
        drop(out);
        fs::rename(part, dest).map_err(|e| CliError::host(dest, e))
    }

    fn count_file(&mut self, n: u64) {
        self.s.files += 1;
        self.s.bytes += n;
        self.pb.set_message(format!("{}/{} files", self.s.files + self.s.unchanged, self.files_total));
    }

    fn symlink(&mut self, src: &str, dest: &Path) -> Result<(), CliError> {
        let target = self.vault.read_link(src)?;
        if let Ok(m) = fs::symlink_metadata(dest) {
            if m.file_type().is_symlink() && fs::read_link(dest).ok().as_deref() == Some(Path::new(&target)) {
                self.s.unchanged += 1;
                return Ok(());
            }
            if m.is_dir() {
                return Err(CliError { code: Exit::Tree, message: format!("{}: is a directory", dest.display()) });
            }
            if self.args.dry_run {
                self.note(format!("would replace {}", dest.display()))?;
            } else {
                fs::remove_file(dest).map_err(|e| CliError::host(dest, e))?;
            }
        }
        if self.args.dry_run {
            self.note(format!("would link {} -> {target}", dest.display()))?;
        } else {
            std::os::unix::fs::symlink(&target, dest).map_err(|e| CliError::host(dest, e))?;
        }
        self.s.links += 1;
        Ok(())
    }
}
