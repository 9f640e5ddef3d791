//! `put` and `get`: streaming a host file or tree into a vault and back out, with a
//! progress bar. Memory stays bounded (one copy buffer) whatever the file sizes.
//! Entries that cannot be copied (FIFOs, devices, sockets, unreadable files) are
//! skipped with a warning and counted; the command then exits non-zero.
//! With `--extract-tags`, `put` also tags each file (see `extract`), a thousand files
//! per commit through the library's batch API.

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use indicatif::{ProgressBar, ProgressStyle};
use sqlvault::{FileOptions, FileType, SetAttr, Vault};

use crate::CliError;

const COPY_BUF: usize = 1 << 20;
/// Files whose extracted tags are committed together.
const TAG_BATCH: usize = 1000;

/// Tags extracted and not yet committed: `(vault path, tags)`.
type TagBatch = Vec<(String, Vec<(String, sqlvault::TagValue)>)>;

/// What `put_entry` carries from file to file: pending tags.
struct PutState {
    tags: Option<TagBatch>,
}

/// A host file read for `put`: advances the progress bar, and keeps a read error so
/// it is reported as the host's, not the vault's.
struct Progress<'a> {
    inner: &'a mut fs::File,
    pb: &'a ProgressBar,
    failed: Option<io::Error>,
}

impl Read for Progress<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.inner.read(buf) {
                Ok(n) => {
                    self.pb.inc(n as u64);
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let kind = e.kind();
                    self.failed = Some(e);
                    return Err(io::Error::new(kind, "reading the source file failed"));
                }
            }
        }
    }
}

/// Counts of what a transfer did and skipped.
#[derive(Default)]
pub struct Summary {
    pub files: u64,
    pub dirs: u64,
    pub links: u64,
    pub bytes: u64,
    pub skipped: Vec<String>,
}

fn bar(total: u64) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(Some(total), indicatif::ProgressDrawTarget::stderr());
    pb.set_style(
        ProgressStyle::with_template("{spinner} {bytes}/{total_bytes} {bytes_per_sec} [{wide_bar}] {eta} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    if !crate::secret::is_terminal() {
        pb.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    pb
}

fn host_total(path: &Path) -> u64 {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => {
            fs::read_dir(path).map(|rd| rd.filter_map(|e| e.ok()).map(|e| host_total(&e.path())).sum()).unwrap_or(0)
        }
        Ok(m) if m.is_file() => m.len(),
        _ => 0,
    }
}

fn name_of(p: &Path) -> Result<String, CliError> {
    p.file_name()
        .and_then(|n| n.to_str())
        .map(str::to_string)
        .ok_or_else(|| CliError::usage(format!("{} has no usable file name (names must be UTF-8)", p.display())))
}

/// Copies the host file or tree `src` to vault path `dest` (cp -r semantics: into
/// `dest/<name>` if `dest` is an existing directory); with `extract_tags`, tags every
/// file with its basic metadata.
pub fn put(vault: &Vault, src: &Path, dest: &str, extract_tags: bool) -> Result<Summary, CliError> {
    let meta = fs::symlink_metadata(src).map_err(|e| CliError::host(src, e))?;
    let target = match vault.metadata(dest) {
        Ok(a) if a.kind == FileType::Dir => sqlvault::join_path(dest, &name_of(src)?),
        _ => dest.to_string(),
    };
    let pb = bar(host_total(src));
    let mut s = Summary::default();
    let mut st = PutState { tags: extract_tags.then(TagBatch::new) };
    put_entry(vault, src, &meta, &target, &pb, &mut s, &mut st)?;
    if let Some(batch) = st.tags.filter(|b| !b.is_empty()) {
        vault.set_tags_batch(&batch)?;
    }
    pb.finish_and_clear();
    Ok(s)
}

fn put_entry(
    vault: &Vault,
    src: &Path,
    meta: &fs::Metadata,
    dest: &str,
    pb: &ProgressBar,
    s: &mut Summary,
    st: &mut PutState,
) -> Result<(), CliError> {
    let ft = meta.file_type();
    let mtime = meta.mtime() * 1_000_000_000 + meta.mtime_nsec();
    let atime = meta.atime() * 1_000_000_000 + meta.atime_nsec();
    if ft.is_dir() {
        match vault.metadata(dest) {
            Ok(a) if a.kind == FileType::Dir => {}
            _ => {
                vault.create_dir(dest, meta.mode() & 0o7777)?;
            }
        }
        s.dirs += 1;
        let mut entries: Vec<_> = match fs::read_dir(src) {
            Ok(rd) => rd.filter_map(|e| e.ok()).collect(),
            Err(e) => {
                skip(pb, s, format!("{}: {e}", src.display()));
                return Ok(());
            }
        };
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let path = e.path();
            let Some(name) = e.file_name().to_str().map(str::to_string) else {
                skip(pb, s, format!("{}: name is not UTF-8", path.display()));
                continue;
            };
            match fs::symlink_metadata(&path) {
                Ok(m) => put_entry(vault, &path, &m, &sqlvault::join_path(dest, &name), pb, s, st)?,
                Err(e) => skip(pb, s, format!("{}: {e}", path.display())),
            }
        }
        vault.set_times(dest, Some(atime), Some(mtime))?;
    } else if ft.is_file() {
        let mut input = match fs::File::open(src) {
            Ok(f) => f,
            Err(e) => {
                skip(pb, s, format!("{}: {e}", src.display()));
                return Ok(());
            }
        };
        // Content, mode and times in one commit for a file that fits the dirty limit.
        let attrs = SetAttr {
            perm: Some(meta.mode() & 0o7777),
            atime_ns: Some(atime),
            mtime_ns: Some(mtime),
            ..Default::default()
        };
        let mut reader = Progress { inner: &mut input, pb, failed: None };
        let n = vault.import_file(dest, &mut reader, &attrs).map_err(|e| match reader.failed.take() {
            Some(host) => CliError::host(src, host),
            None => e.into(),
        })?;
        s.bytes += n;
        s.files += 1;
        if let Some(batch) = st.tags.as_mut() {
            batch.push((dest.to_string(), crate::extract::tags_of(src, meta)));
            if batch.len() >= TAG_BATCH {
                vault.set_tags_batch(batch)?;
                batch.clear();
            }
        }
    } else if ft.is_symlink() {
        let target = fs::read_link(src).map_err(|e| CliError::host(src, e))?;
        match target.to_str() {
            Some(t) => {
                vault.symlink(t, dest)?;
                s.links += 1;
            }
            None => skip(pb, s, format!("{}: link target is not UTF-8", src.display())),
        }
    } else {
        skip(pb, s, format!("{}: not a regular file, directory or symlink", src.display()));
    }
    Ok(())
}

fn skip(pb: &ProgressBar, s: &mut Summary, why: String) {
    pb.suspend(|| eprintln!("sqlvault: skipped {why}"));
    s.skipped.push(why);
}

/// Every entry of directory `dir` with its raw name bytes, in name order.
pub fn list_all(vault: &Vault, dir: sqlvault::InodeId) -> Result<Vec<sqlvault::Entry>, CliError> {
    const PAGE: usize = 512;
    let mut out: Vec<sqlvault::Entry> = Vec::new();
    loop {
        let page = vault.list(dir, out.last().map(|e| e.name.as_slice()), PAGE)?;
        let done = page.len() < PAGE;
        out.extend(page);
        if done {
            return Ok(out);
        }
    }
}

fn vault_total(vault: &Vault, path: &str) -> u64 {
    match vault.symlink_metadata(path) {
        Ok(a) if a.kind == FileType::Dir => vault
            .read_dir(path)
            .map(|es| es.iter().map(|e| vault_total(vault, &sqlvault::join_path(path, &e.name))).sum())
            .unwrap_or(0),
        Ok(a) if a.kind == FileType::File => a.size,
        _ => 0,
    }
}

/// Copies vault path `src` (file or tree) to host path `dest` (into `dest/<name>`
/// if `dest` is an existing directory).
pub fn get(vault: &Vault, src: &str, dest: &Path) -> Result<Summary, CliError> {
    let attr = vault.symlink_metadata(src)?;
    let target: PathBuf = if dest.is_dir() {
        let name = src.trim_end_matches('/').rsplit('/').next().filter(|n| !n.is_empty()).unwrap_or("root");
        dest.join(name)
    } else {
        dest.to_path_buf()
    };
    let pb = bar(vault_total(vault, src));
    let mut s = Summary::default();
    let mut buf = vec![0u8; COPY_BUF];
    get_entry(vault, src, attr.kind, &target, &pb, &mut s, &mut buf)?;
    pb.finish_and_clear();
    Ok(s)
}

fn system_time(ns: i64) -> std::time::SystemTime {
    if ns >= 0 {
        UNIX_EPOCH + Duration::from_nanos(ns as u64)
    } else {
        UNIX_EPOCH - Duration::from_nanos(ns.unsigned_abs())
    }
}

fn get_entry(
    vault: &Vault,
    src: &str,
    kind: FileType,
    dest: &Path,
    pb: &ProgressBar,
    s: &mut Summary,
    buf: &mut [u8],
) -> Result<(), CliError> {
    let attr = vault.symlink_metadata(src)?;
    match kind {
        FileType::Dir => {
            match fs::create_dir(dest) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dest.is_dir() => {}
                Err(e) => return Err(CliError::host(dest, e)),
            }
            s.dirs += 1;
            for e in list_all(vault, attr.ino)? {
                // The mount stores raw byte names; paths here are UTF-8.
                let Ok(name) = std::str::from_utf8(&e.name) else {
                    skip(
                        pb,
                        s,
                        format!("{}: name is not UTF-8", sqlvault::join_path(src, &String::from_utf8_lossy(&e.name))),
                    );
                    continue;
                };
                get_entry(vault, &sqlvault::join_path(src, name), e.kind, &dest.join(name), pb, s, buf)?;
            }
            fs::set_permissions(dest, fs::Permissions::from_mode(attr.perm)).map_err(|e| CliError::host(dest, e))?;
            let f = fs::File::open(dest).map_err(|e| CliError::host(dest, e))?;
            let _ = f.set_times(
                fs::FileTimes::new().set_modified(system_time(attr.mtime_ns)).set_accessed(system_time(attr.atime_ns)),
            );
        }
        FileType::File => {
            let mut input = vault.open_file(src, &FileOptions::new().read(true))?;
            let mut out = fs::File::create(dest).map_err(|e| CliError::host(dest, e))?;
            loop {
                let n = input.read(buf).map_err(|e| CliError::vault_io(src, e))?;
                if n == 0 {
                    break;
                }
                out.write_all(&buf[..n]).map_err(|e| CliError::host(dest, e))?;
                s.bytes += n as u64;
                pb.inc(n as u64);
            }
            input.close()?;
            out.set_permissions(fs::Permissions::from_mode(attr.perm)).map_err(|e| CliError::host(dest, e))?;
            out.set_times(
                fs::FileTimes::new().set_modified(system_time(attr.mtime_ns)).set_accessed(system_time(attr.atime_ns)),
            )
            .map_err(|e| CliError::host(dest, e))?;
            out.sync_all().map_err(|e| CliError::host(dest, e))?;
            s.files += 1;
        }
        FileType::Symlink => {
            let target = vault.read_link(src)?;
            std::os::unix::fs::symlink(&target, dest).map_err(|e| CliError::host(dest, e))?;
            s.links += 1;
        }
    }
    Ok(())
}
