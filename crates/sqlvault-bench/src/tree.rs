//! `tree`: whole-tree operations at several tree sizes and amounts of history, to
//! show their cost is linear in the files and stays so with snapshots present: import
//! (`put`'s per-file path), the same import again (every file unchanged), export
//! (`get`'s per-file path, one sync at the end), `fsck` (in a process of its own, as
//! `sqlvault fsck` runs), push to an S3 server, clone of it into a new vault (the
//! replica), push and pull of 1% of the files changed, `snapshot`, `snapshot diff`, a
//! restore that replaces the live tree and one of a single directory, `snapshot rm`,
//! `snapshot forget`, `rm -r`, and through a FUSE mount of the replica, `ls -lR` with a
//! cold page cache and `rm -rf`.
//!
//! Each (size, snapshots) pair runs in its own process (peak RSS per case); at the
//! smallest size five times, three before the larger sizes and two after them, its
//! figures the medians (see [`BASELINE_RUNS`]). History is built as a nightly backup
//! builds it: after the import, one snapshot, then 1% of the files rewritten before
//! each further one. The targets: a per-file cost at the largest size within 1.5x of
//! the per-file cost at the smallest, for every operation at every amount of history;
//! and fsck with 1 snapshot within 1.5x (10: 3x) of fsck without one (issue 26).
//!
//! Import and export go through the library calls `sqlvault put` and `get` make for
//! each file ([`Vault::replace_file`], a read of the file, a rename on the host), not
//! through the CLI binary, so the numbers are the vault's, without process start-up.
//!
//! Push and pull go to a VersityGW server the scenario starts on loopback (as the
//! `remote` scenario does; one bucket per case), from a child process of the case (its
//! own peak RSS); their CPU is the vault process's, not the server's. The mount is a
//! `serve-mount` child of the case (as in `peers`), with the default commit window;
//! `ls -lR` and `rm -rf` (then `sync(2)`) are the system's tools, and their CPU counts
//! the tool's and the mount process's, their peak RSS the mount process's. These need
//! root (the mount, dropping the page cache) and VersityGW; `--library-only` leaves
//! them out. `--quick` (CI's `all --quick`, a debug build) runs them at its smallest
//! size only, 200 files, where they add about 3 seconds; at 2,000 files they would add
//! about 13.

use std::fs;
use std::io::{Read, Write};
use std::marker::PhantomData;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sqlvault::history::ForgetPolicy;
use sqlvault::secrets::KdfParams;
use sqlvault::{CreateOptions, EngineConfig, FileOptions, FileType, Interrupt, Secret, SetAttr, Vault};

use crate::data::Stream;
use crate::error::{Context, Result};
use crate::harness::{self, CaseOutput, Meter, Sample};
use crate::report;
use crate::scenario::{self, Common, Def, Section, Target};
use crate::sys::{self, Machine};

const SECTION: &str = "## Whole-tree operations";
const PER_DIR: u64 = 100;
/// The operations measured, in the order they run.
const OPS: &[(&str, &str)] = &[
    ("put", "put (import, one file per write)"),
    ("put_again", "put again (unchanged but for the files the history rewrote)"),
    ("get", "get (export, one sync at the end)"),
    ("fsck", "fsck"),
    ("push", "push to S3 (into an empty bucket)"),
    ("clone", "clone from S3 (a new vault: the replica)"),
    ("push_again", "push again (1% changed)"),
    ("pull", "pull into the replica (1% changed)"),
    ("snapshot", "snapshot"),
    ("diff", "snapshot diff (1% changed)"),
    ("restore_replace", "restore replacing the live tree"),
    ("restore_dir", "restore one directory (100 files)"),
    ("snapshot_rm", "snapshot rm"),
    ("forget", "snapshot forget (keep the last)"),
    ("rm_r", "rm -r"),
    ("ls_lr", "ls -lR through the mount of the replica (cold cache)"),
    ("rm_rf", "rm -rf through the mount of the replica (with the purge and wipe it leaves the mount)"),
    ("rm_rf_unmount", "rm -rf through the mount, then the unmount"),
];
/// The remote's name in the vault that pushes.
const REMOTE: &str = "bench";

/// Arguments of `sqlvault-bench tree`.
#[derive(Debug, clap::Args)]
pub struct TreeArgs {
    /// Tree sizes in files; the first is the baseline.
    #[arg(long, value_delimiter = ',', default_values_t = vec![5_000u64, 50_000])]
    pub files: Vec<u64>,
    /// Snapshots taken before the operations (1% of the files changed between two);
    /// the first is the baseline of the history ratios.
    #[arg(long, value_delimiter = ',', default_values_t = vec![0u64, 1, 10])]
    pub snapshots: Vec<u64>,
    /// Bytes per file (the issue's tree: 50,000 files, 218 MB).
    #[arg(long, default_value_t = 4096)]
    pub file_bytes: usize,
    /// Adds 500,000 files to the sizes (not part of `all`).
    #[arg(long)]
    pub full: bool,
    /// Drops `snap_dirents_by_ino` before the operations: fsck as it was before schema
    /// migration 10 (quadratic with snapshots), to measure the fix.
    #[arg(long)]
    pub without_snapshot_index: bool,
    /// Only the library's operations: no S3 server (push, clone, pull) and no FUSE
    /// mount (`ls -lR`, `rm -rf`), which need VersityGW, root and /dev/fuse.
    #[arg(long)]
    pub library_only: bool,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Spec {
    files: u64,
    snapshots: u64,
    file_bytes: usize,
    /// The host tree to import (written once per size by the parent).
    src: PathBuf,
    dir: PathBuf,
    without_snapshot_index: bool,
    /// The S3 server's endpoint and this case's bucket (an empty one), if push, clone,
    /// pull and the operations through the mount run.
    s3: Option<(String, String)>,
    /// Set for the child process a case runs push, clone and pull in (so that their
    /// peak RSS is theirs, not what the case's earlier operations left allocated).
    replicate: Option<Replicate>,
    /// Set for the child process fsck runs in (see [`fsck_child`]).
    fsck: Option<FsckChild>,
}

/// What the fsck child checks.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct FsckChild {
    vault: PathBuf,
    key_file: PathBuf,
}

/// What the push, clone and pull child works on.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Replicate {
    vault: PathBuf,
    key_file: PathBuf,
    /// Where the clone goes.
    replica: PathBuf,
}

/// One operation of one case.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct OpResult {
    op: String,
    seconds: f64,
    us_per_file: f64,
    cpu_us_per_file: f64,
    /// Peak RSS of the process during the operation (through the mount: of the mount
    /// process).
    rss_kib: u64,
    /// Peak of SQLite's heap during the operation (0 through the mount: not measured).
    sqlite_heap: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct CaseResult {
    files: u64,
    snapshots: u64,
    peak_rss_kib: u64,
    ops: Vec<OpResult>,
}

#[derive(Debug, Serialize, Deserialize)]
struct TreeReport {
    benchmark: String,
    /// A quick run: targets not judged.
    #[serde(default)]
    quick: bool,
    command: String,
    machine: Machine,
    file_bytes: usize,
    without_snapshot_index: bool,
    /// Whether push, clone, pull, `ls -lR` and `rm -rf` ran.
    #[serde(default)]
    s3_and_mount: bool,
    /// Runs of each case at the smallest size, whose figures are the medians of them
    /// (1 in runs made before there were more).
    #[serde(default = "one")]
    baseline_runs: usize,
    /// How many of those ran after the larger sizes (0 in runs made before).
    #[serde(default)]
    baseline_after: usize,
    /// Whether each operation through the mount counted until the mount went idle (false
    /// in runs made before: it ended with the tool, so the purge an `rm -rf` left the
    /// mount counted at the largest size and not at the smallest).
    #[serde(default)]
    mount_until_idle: bool,
    /// Whether fsck ran on the vault opened afresh, as `sqlvault fsck` does (false in
    /// runs made before: it ran on the handle `get` had used, whose caches held the
    /// whole vault at the smallest size).
    #[serde(default)]
    fsck_fresh_open: bool,
    /// Whether fsck ran in a process of its own, as `sqlvault fsck` does (false in runs
    /// made before: it ran in the case's process, on memory earlier operations had
    /// touched).
    #[serde(default)]
    fsck_own_process: bool,
    cases: Vec<CaseResult>,
    /// (snapshots, operation, per-file cost at the largest size / at the smallest).
    size_ratios: Vec<(u64, String, f64)>,
    /// (files, operation, per-file cost with the most snapshots / with the fewest).
    history_ratios: Vec<(u64, String, f64)>,
    /// (files, snapshots, fsck's per-file cost / without snapshots).
    fsck_ratios: Vec<(u64, u64, f64)>,
}

fn one() -> usize {
    1
}

/// Runs of each case at the smallest size (not in quick mode). Its short operations
/// (a tenth of a second at 5,000 files) spread between runs of one machine by more than
/// the 1.5x the size ratios judge, and they are the ratios' denominators: each
/// operation's time and CPU there are the medians of these runs.
const BASELINE_RUNS: usize = 3;
/// Runs of each case at the smallest size after the larger sizes have run (not in quick
/// mode): with [`BASELINE_RUNS`] before them, the medians span the whole run.
const BASELINE_AFTER: usize = 2;

/// One case from several runs of it: each operation's time and CPU the medians of the
/// runs', its peak RSS and SQLite heap the largest (as are the case's).
fn median_case(mut runs: Vec<harness::CaseOutput>) -> Result<harness::CaseOutput> {
    let Some(mut out) = runs.pop() else { crate::bail!("a case ran no time") };
    if runs.is_empty() {
        return Ok(out);
    }
    runs.push(out.clone());
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for (phase, sample) in out.phases.iter_mut() {
        let all: Vec<&harness::Sample> = runs.iter().filter_map(|r| r.phases.get(phase)).collect();
        sample.seconds = median(all.iter().map(|s| s.seconds).collect());
        sample.cpu_s = median(all.iter().map(|s| s.cpu_s).collect());
    }
    out.peak_rss_kib = runs.iter().map(|r| r.peak_rss_kib).max().unwrap_or(0);
    for (key, value) in out.notes.iter_mut() {
        if key.starts_with("rss_kib.") || key.starts_with("sqlite_heap.") {
            let largest = runs.iter().filter_map(|r| r.notes.get(key)?.parse::<i64>().ok()).max();
            if let Some(x) = largest {
                *value = x.to_string();
            }
        }
    }
    Ok(out)
}

fn mtime_ns(m: &fs::Metadata) -> i64 {
    m.mtime() * 1_000_000_000 + m.mtime_nsec()
}

/// Writes the host tree: `files` files of `bytes` pseudo-random bytes, 100 per directory.
fn host_tree(root: &Path, files: u64, bytes: usize) -> Result<()> {
    let mut data = vec![0u8; bytes];
    let mut s = Stream::new(files);
    for i in 0..files {
        let d = root.join(format!("d{}", i / PER_DIR));
        if i % PER_DIR == 0 {
            fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
        }
        s.fill(&mut data);
        fs::write(d.join(format!("f{}", i % PER_DIR)), &data).context("cannot write the host tree")?;
    }
    Ok(())
}

/// `put`'s per-file path: skip unchanged (size and mtime), else replace atomically.
/// Returns the files copied.
fn put(v: &Vault, src: &Path, dest: &str) -> Result<u64> {
    let stop = Interrupt::new();
    let mut copied = 0;
    let mut dirs: Vec<_> = fs::read_dir(src).context("read_dir")?.filter_map(|e| e.ok()).collect();
    dirs.sort_by_key(|e| e.file_name());
    if !v.exists(dest)? {
        v.create_dir(dest, 0o755)?;
    }
    for d in dirs {
        let dname = d.file_name().to_string_lossy().into_owned();
        let vdir = sqlvault::join_path(dest, &dname);
        if !v.exists(&vdir)? {
            v.create_dir(&vdir, 0o755)?;
        }
        let mut files: Vec<_> = fs::read_dir(d.path()).context("read_dir")?.filter_map(|e| e.ok()).collect();
        files.sort_by_key(|e| e.file_name());
        for f in files {
            let m = f.metadata().context("stat")?;
            let vpath = sqlvault::join_path(&vdir, &f.file_name().to_string_lossy());
            match v.symlink_metadata(&vpath) {
                Ok(a) if a.kind == FileType::File && a.size == m.len() && a.mtime_ns == mtime_ns(&m) => continue,
                _ => {}
            }
            let stamp = SetAttr {
                perm: Some(m.mode() & 0o7777),
                atime_ns: Some(mtime_ns(&m)),
                mtime_ns: Some(mtime_ns(&m)),
                ..Default::default()
            };
            let input = fs::File::open(f.path()).context("open")?;
            v.replace_file(&vpath, m.len(), input, &stamp, &sqlvault::Ops::default().interrupt(&stop))?;
            copied += 1;
        }
    }
    Ok(copied)
}

/// `get`'s per-file path: read, write under a temporary name, rename; one syncfs.
fn get(v: &Vault, src: &str, dest: &Path) -> Result<u64> {
    let mut n = 0;
    let mut buf = vec![0u8; 1 << 20];
    for d in v.read_dir(src)? {
        let vdir = sqlvault::join_path(src, &d.name);
        let hdir = dest.join(&d.name);
        fs::create_dir_all(&hdir).context("mkdir")?;
        for f in v.read_dir(&vdir)? {
            let vpath = sqlvault::join_path(&vdir, &f.name);
            let part = hdir.join(format!(".part-{}", f.name));
            let mut input = v.open_file(&vpath, &FileOptions::new().read(true))?;
            let mut out = fs::File::create(&part).context("create")?;
            loop {
                let k = input.read(&mut buf).context("read")?;
                if k == 0 {
                    break;
                }
                out.write_all(&buf[..k]).context("write")?;
            }
            input.close()?;
            drop(out);
            fs::rename(&part, hdir.join(&f.name)).context("rename")?;
            n += 1;
        }
    }
    sync_fs(dest)?;
    Ok(n)
}

/// Writes back the dirty pages of the file system holding `dir` (`syncfs`).
fn sync_fs(dir: &Path) -> Result<()> {
    let f = fs::File::open(dir).context("open")?;
    // SAFETY: syncfs on a valid descriptor.
    unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&f)) };
    Ok(())
}

/// Starts one operation's measurement: its clock and CPU meter, and the peaks of the
/// process's resident set and of SQLite's heap taken afresh.
fn start() -> Result<Meter> {
    sys::reset_peak_rss()?;
    sqlite_heap_peak(true);
    Meter::start()
}

/// SQLite's heap high-water mark in bytes (`sqlite3_status64(MEMORY_USED)`), reset if
/// `reset`.
fn sqlite_heap_peak(reset: bool) -> i64 {
    let (mut cur, mut hi) = (0i64, 0i64);
    // SAFETY: sqlite3_status64 writes two integers we own; MEMORY_USED is a valid op.
    unsafe {
        rusqlite::ffi::sqlite3_status64(rusqlite::ffi::SQLITE_STATUS_MEMORY_USED, &mut cur, &mut hi, reset as i32)
    };
    hi
}

/// Ends one operation's measurement: its sample, with the peak RSS and SQLite heap
/// peak of the operation in the notes (`rss_kib.OP`, `sqlite_heap.OP`).
fn finish(out: &mut CaseOutput, op: &str, m: Meter, files: f64) -> Result<()> {
    record(out, op, m.stop(files)?, sys::vm_hwm_kib()?);
    out.notes.insert(format!("sqlite_heap.{op}"), sqlite_heap_peak(false).to_string());
    Ok(())
}

/// Records one operation's sample and the peak RSS during it (`rss_kib.OP`), which
/// counts in the case's peak.
fn record(out: &mut CaseOutput, op: &str, sample: Sample, rss_kib: u64) {
    out.add(op, sample);
    out.peak_rss_kib = out.peak_rss_kib.max(rss_kib);
    out.notes.insert(format!("rss_kib.{op}"), rss_kib.to_string());
}

/// The fsck child: fsck of the vault in a process of its own, as `sqlvault fsck` runs
/// it (the open is not measured). In the case's process, after `get`, the check ran
/// on memory the earlier operations had touched and freed: at the smallest size that
/// spared it the first touch of its page cache's memory (about a third of its CPU at
/// 5,000 files, nothing at the largest), which a `sqlvault fsck` pays.
fn fsck_child(spec: &Spec, f: &FsckChild) -> Result<CaseOutput> {
    let mut out = CaseOutput { peak_rss_kib: sys::vm_hwm_kib()?, ..Default::default() };
    let secret = Secret::from_key_file(&f.key_file)?;
    let v = Vault::open(&f.vault, &secret, EngineConfig::default()).context("cannot open the vault")?;
    let m = start()?;
    let r = v.fsck(&sqlvault::Ops::default())?;
    finish(&mut out, "fsck", m, spec.files as f64)?;
    if !r.is_clean() {
        crate::bail!("fsck found problems: {:?}", r.problems);
    }
    v.close()?;
    Ok(out)
}

/// The push, clone and pull child: push of the vault into the case's empty bucket, a
/// clone of it (the replica), 1% of the files changed, push again and pull into the
/// replica.
fn replicate(spec: &Spec, r: &Replicate) -> Result<CaseOutput> {
    let Some((endpoint, bucket)) = &spec.s3 else { crate::bail!("push and pull without a bucket") };
    let mut out = CaseOutput { peak_rss_kib: sys::vm_hwm_kib()?, ..Default::default() };
    let secret = Secret::from_key_file(&r.key_file)?;
    let v = Vault::open(&r.vault, &secret, EngineConfig::default()).context("cannot open the vault")?;
    let n = spec.files as f64;
    let url = format!("s3://{bucket}/v");
    let ops = sqlvault::Ops::default();
    v.remote(REMOTE).add(&url, Some(endpoint.as_str()))?;
    let pushed = |what: &str, o: sqlvault::remote::PushOutcome| match o {
        sqlvault::remote::PushOutcome::Pushed { .. } => Ok(()),
        other => Err(crate::error::Error::msg(format!("{what} did not push: {other:?}"))),
    };
    let m = start()?;
    let o = v.remote(REMOTE).push(&ops)?;
    finish(&mut out, "push", m, n)?;
    pushed("push", o)?;
    let m = start()?;
    let replica = Vault::clone_remote(
        &url,
        Some(endpoint.as_str()),
        &r.replica,
        &secret,
        EngineConfig::default(),
        &sqlvault::remote::At::Newest,
        &ops,
    )?;
    finish(&mut out, "clone", m, n)?;
    let dirs = replica.read_dir("/t")?.len() as u64;
    if dirs != spec.files.div_ceil(PER_DIR) {
        crate::bail!("clone: {dirs} directories, expected {}", spec.files.div_ceil(PER_DIR));
    }
    change(&v, spec.files, spec.file_bytes, 98)?;
    let m = start()?;
    let o = v.remote(REMOTE).push(&ops)?;
    finish(&mut out, "push_again", m, n)?;
    pushed("push again", o)?;
    let m = start()?;
    let o = replica.remote(sqlvault::remote::ORIGIN).pull(&ops)?;
    finish(&mut out, "pull", m, n)?;
    match o {
        sqlvault::remote::PullOutcome::Pulled { chunks_downloaded, .. } if chunks_downloaded >= spec.files / 100 => {}
        other => crate::bail!("pull: {other:?}, expected the {} changed files", spec.files / 100),
    }
    replica.close()?;
    v.close()?;
    Ok(out)
}

/// How long the mount process must spend no CPU for the work an operation caused in it
/// to count as done: well past the reclaimer's quiet delay (50 ms) and its longest
/// wait between batches under writes (250 ms), and the default commit window.
const MOUNT_IDLE: Duration = Duration::from_secs(1);
/// The longest the mount may keep working after a tool ends before the case fails.
const MOUNT_IDLE_LIMIT: Duration = Duration::from_secs(1800);

/// Waits until process `pid` has spent no CPU for [`MOUNT_IDLE`]: when it last spent
/// some (to the clock tick), and its CPU seconds then.
pub(crate) fn until_idle(pid: u32) -> Result<(Instant, f64)> {
    let start = Instant::now();
    let mut last = (start, sys::proc_cpu_s(pid));
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let cpu = sys::proc_cpu_s(pid);
        if cpu != last.1 {
            last = (Instant::now(), cpu);
        } else if last.0.elapsed() >= MOUNT_IDLE {
            return Ok(last);
        }
        if start.elapsed() > MOUNT_IDLE_LIMIT {
            crate::bail!("the mount (pid {pid}) kept working for {} s after the tool ended", start.elapsed().as_secs());
        }
    }
}

/// Runs `cmd` (a tool, on the mount served by process `server`), then `sync(2)` if
/// `sync`, then waits until the mount is idle: its sample and the mount process's peak
/// RSS during it, and what the tool wrote on its standard output.
///
/// The sample counts the tool's CPU and the mount process's until it went idle, and
/// the time until then: the whole of the work the operation caused. The mount defers
/// some of it (the commit window's last commit; the purge of the files an `rm`
/// released and the wipe of their bytes, which run while it is quiet or once 10,000
/// files wait), so a sample ending with the tool would count it at the largest size,
/// where it runs during the tool, and not at the smallest, where it runs after.
fn through_mount(cmd: &mut Command, server: u32, sync: bool, files: f64) -> Result<(Sample, u64, Vec<u8>)> {
    sys::reset_peak_rss_of(server)?;
    let (tool0, server0) = (sys::children_cpu_s(), sys::proc_cpu_s(server));
    let m = Meter::start()?;
    let o =
        cmd.stdin(Stdio::null()).stderr(Stdio::inherit()).output().with_context(|| format!("cannot run {cmd:?}"))?;
    if !o.status.success() {
        crate::bail!("{cmd:?} failed ({})", o.status);
    }
    if sync {
        // SAFETY: sync() takes no arguments and cannot fail.
        unsafe { libc::sync() };
    }
    let ended = Instant::now();
    let mut sample = m.stop(files)?;
    let tool_cpu = sys::children_cpu_s() - tool0;
    let (idle_at, server1) = until_idle(server)?;
    sample.seconds += idle_at.saturating_duration_since(ended).as_secs_f64();
    sample.cpu_s += tool_cpu + server1 - server0;
    Ok((sample, sys::proc_hwm_kib(server), o.stdout))
}

/// Mounts the replica and runs `ls -lR` (cold page cache) and `rm -rf` of its tree
/// through the mount; after the unmount, checks the tree is gone from the replica.
fn through_the_mount(spec: &Spec, replica: &Path, key_file: &Path, work: &Path, out: &mut CaseOutput) -> Result<()> {
    let n = spec.files as f64;
    let exe = std::env::current_exe().context("cannot find this program's path")?;
    let mnt = work.join("mnt");
    let mount = crate::fixtures::mount_vault(&exe, replica, key_file, &mnt)?;
    let root = mnt.join("t");
    sys::drop_caches()?;
    let (sample, rss, listing) = through_mount(Command::new("ls").arg("-lR").arg(&root), mount.pid(), false, n)?;
    record(out, "ls_lr", sample, rss);
    let listed = listing.split(|b| *b == b'\n').filter(|l| l.first() == Some(&b'-')).count() as u64;
    if listed != spec.files {
        crate::bail!("ls -lR through the mount listed {listed} files, expected {}", spec.files);
    }
    let (sample, rss, _) = through_mount(Command::new("rm").arg("-rf").arg(&root), mount.pid(), true, n)?;
    record(out, "rm_rf", sample.clone(), rss);
    // The removal and the unmount (the vault's close, which would finish a purge or a
    // wipe left undone). The child's CPU reaches RUSAGE_CHILDREN when the unmount reaps
    // it. Peak RSS: the mount process's over its life, which it reports as it ends.
    let (children0, mount0) = (sys::children_cpu_s(), sys::proc_cpu_s(mount.pid()));
    let m = Meter::start()?;
    let whole_rss = mount.unmount_reporting_rss().context("the mount did not report its peak RSS")?;
    let tail = m.stop(n)?;
    let tail_cpu = tail.cpu_s + sys::children_cpu_s() - children0 - mount0;
    let whole = Sample { seconds: sample.seconds + tail.seconds, units: n, cpu_s: sample.cpu_s + tail_cpu };
    record(out, "rm_rf_unmount", whole, whole_rss.max(rss));
    let r = Vault::open(replica, &Secret::from_key_file(key_file)?, EngineConfig::default())?;
    if r.exists("/t")? {
        crate::bail!("rm -rf through the mount left /t in the replica");
    }
    r.close()?;
    Ok(())
}

/// Rewrites 1% of the files under `/t` (those whose number is `round` modulo 100) in
/// one transaction: a night's changes.
fn change(v: &Vault, files: u64, bytes: usize, round: u64) -> Result<()> {
    let mut data = vec![0u8; bytes];
    let mut s = Stream::new(files * 1000 + round);
    v.transaction(|tx| {
        for i in (round % PER_DIR..files).step_by(PER_DIR as usize) {
            s.fill(&mut data);
            tx.write_file(&format!("/t/d{}/f{}", i / PER_DIR, i % PER_DIR), &data)?;
        }
        Ok::<_, sqlvault::Error>(())
    })?;
    Ok(())
}

/// One (size, snapshots) case, in this (child) process.
pub fn case(spec: &str) -> Result<CaseOutput> {
    let spec: Spec = harness::parse_spec(spec)?;
    if let Some(r) = &spec.replicate {
        return replicate(&spec, r);
    }
    if let Some(f) = &spec.fsck {
        return fsck_child(&spec, f);
    }
    let mut out = CaseOutput::default();
    let work = tempfile::Builder::new().prefix("tree-").tempdir_in(&spec.dir).context("temporary directory")?;
    let path = work.path().join("tree.vault");
    // A key file: the mount's process opens the replica with it.
    let key_file = work.path().join("tree.key");
    sqlvault::secrets::generate_key_file(&key_file)?;
    let secret = Secret::from_key_file(&key_file)?;
    let opts =
        CreateOptions { kdf: KdfParams { memory_kib: 8 * 1024, iterations: 1, parallelism: 1 }, ..Default::default() };
    Vault::create(&path, &secret, &opts).context("cannot create the vault")?.close()?;
    let mut v = Vault::open(&path, &secret, EngineConfig::default()).context("cannot open the vault")?;
    if spec.without_snapshot_index {
        v.bench_with_writer(|c| c.execute_batch("DROP INDEX IF EXISTS snap_dirents_by_ino"))?;
    }
    let n = spec.files as f64;
    let check = |what: &str, got: u64, want: u64| -> Result<()> {
        if got != want {
            crate::bail!("{what}: {got} files, expected {want}");
        }
        Ok(())
    };

    out.peak_rss_kib = sys::vm_hwm_kib()?;
    let m = start()?;
    check("put", put(&v, &spec.src, "/t")?, spec.files)?;
    finish(&mut out, "put", m, n)?;
    // The history: a snapshot after the import, 1% of the files changed before each next.
    for k in 0..spec.snapshots {
        if k > 0 {
            change(&v, spec.files, spec.file_bytes, k)?;
        }
        v.snapshot(&format!("night-{k:03}"))?;
    }
    let m = start()?;
    check("put again", put(&v, &spec.src, "/t")?, (spec.files / 100) * spec.snapshots.saturating_sub(1).min(99))?;
    finish(&mut out, "put_again", m, n)?;
    let back = work.path().join("back");
    // get ends with a syncfs of the export's file system, which writes back every dirty
    // page on it: the history's own writes (the vault's, the changed host files) are
    // synced first, so that get is not billed for them.
    sync_fs(work.path())?;
    let m = start()?;
    check("get", get(&v, "/t", &back)?, spec.files)?;
    finish(&mut out, "get", m, n)?;
    fs::remove_dir_all(&back).context("cannot remove the exported tree")?;

    // fsck as `sqlvault fsck` runs (see [`fsck_child`]), then push, clone and pull (see
    // [`replicate`]): each in a child process of its own, on the vault closed here.
    v.close()?;
    let in_child = |out: &mut CaseOutput, child: Spec| -> Result<()> {
        let o = harness::spawn_case("tree", &child)?;
        out.phases.extend(o.phases);
        out.notes.extend(o.notes);
        out.peak_rss_kib = out.peak_rss_kib.max(o.peak_rss_kib);
        Ok(())
    };
    let f = FsckChild { vault: path.clone(), key_file: key_file.clone() };
    in_child(&mut out, Spec { fsck: Some(f), ..spec.clone() })?;
    let replica = work.path().join("replica.vault");
    if spec.s3.is_some() {
        let r = Replicate { vault: path.clone(), key_file: key_file.clone(), replica: replica.clone() };
        in_child(&mut out, Spec { replicate: Some(r), ..spec.clone() })?;
    }
    v = Vault::open(&path, &secret, EngineConfig::default()).context("cannot open the vault")?;

    let m = start()?;
    v.snapshot("s")?;
    finish(&mut out, "snapshot", m, n)?;
    // Change the live tree a little, compare, then bring the snapshot back over it.
    change(&v, spec.files, spec.file_bytes, 99)?;
    let mut changed = 0u64;
    let m = start()?;
    v.diff("s", None, |_| {
        changed += 1;
        Ok(true)
    })?;
    finish(&mut out, "diff", m, n)?;
    // The changed files and their directories (times).
    if changed < spec.files / 100 {
        crate::bail!("diff: {changed} changes, expected at least {}", spec.files / 100);
    }
    let m = start()?;
    let r = v.restore("s", "/t", None, &sqlvault::Ops::default())?;
    finish(&mut out, "restore_replace", m, n)?;
    check("restore", r.files, spec.files)?;
    let m = start()?;
    let r = v.restore("s", "/t/d1", Some("/one"), &sqlvault::Ops::default())?;
    finish(&mut out, "restore_dir", m, n)?;
    check("restore of one directory", r.files, PER_DIR.min(spec.files.saturating_sub(PER_DIR)))?;
    let m = start()?;
    v.remove_snapshot("s", &sqlvault::Ops::default())?;
    finish(&mut out, "snapshot_rm", m, n)?;
    let m = start()?;
    let (plan, _) = v.forget(&ForgetPolicy { last: 1, ..Default::default() }, &jiff::tz::TimeZone::UTC)?;
    finish(&mut out, "forget", m, n)?;
    check("forget", plan.iter().filter(|d| !d.keep).count() as u64, spec.snapshots.saturating_sub(1))?;
    let m = start()?;
    let r = v.remove_dir_all("/t", &sqlvault::Ops::default())?;
    finish(&mut out, "rm_r", m, n)?;
    check("rm -r", r.files, spec.files)?;
    let f = v.fsck(&sqlvault::Ops::default())?;
    if !f.is_clean() {
        crate::bail!("fsck found problems after the removals: {:?}", f.problems);
    }
    v.close()?;
    if spec.s3.is_some() {
        through_the_mount(&spec, &replica, &key_file, work.path(), &mut out)?;
    }
    Ok(out)
}

/// `sqlvault-bench tree`.
pub const SCENARIO: Def<TreeArgs> = Def {
    name: "tree",
    about: "Whole-tree operations (put, get, fsck, push and pull, snapshots, restore, rm -r, ls -lR and rm -rf \
            through a mount) at 5,000 and 50,000 files with 0, 1 and 10 snapshots: per-file cost at the large \
            size within 1.5x of the small.",
    run,
    case,
    render,
    args: PhantomData,
};

fn run(args: &TreeArgs) -> Result<Vec<Target>> {
    let quick = args.common.quick;
    let mut files = if quick { vec![200, 2_000] } else { args.files.clone() };
    if args.full {
        files.push(500_000);
    }
    let snapshots = if quick { vec![0, 10] } else { args.snapshots.clone() };
    if files.len() < 2 || files.contains(&0) || snapshots.is_empty() {
        crate::bail!("--files needs two sizes or more, each at least 1; --snapshots at least one count");
    }
    let baseline_runs = if quick { 1 } else { BASELINE_RUNS };
    let baseline_after = if quick { 0 } else { BASELINE_AFTER };
    let base = args.common.scratch()?;
    let server = if args.library_only { None } else { Some(crate::fixtures::start_server(&base)?) };
    // Each case's runs, in the order of `files` and `snapshots`.
    let mut runs: Vec<(u64, u64, Vec<harness::CaseOutput>)> = Vec::new();
    let mut small_host = None;
    let run_case = |spec: &Spec| -> Result<harness::CaseOutput> {
        // Each run pushes into an empty bucket.
        let bucket = spec.s3.as_ref().zip(server.as_ref()).map(|((_, b), s)| s.root.path().join(b));
        if let Some(b) = &bucket {
            fs::create_dir(b).context("cannot create the bucket")?;
        }
        let o = harness::spawn_case("tree", spec)?;
        if let Some(b) = &bucket {
            fs::remove_dir_all(b).context("cannot remove the bucket")?;
        }
        Ok(o)
    };
    let spec_for = |f: u64, k: u64, src: &Path| Spec {
        files: f,
        snapshots: k,
        file_bytes: args.file_bytes,
        src: src.to_path_buf(),
        dir: base.clone(),
        without_snapshot_index: args.without_snapshot_index,
        // Quick mode: push, pull and the mount at the smallest size only.
        s3: server.as_ref().filter(|_| !quick || f == files[0]).map(|s| (s.endpoint.clone(), format!("tree-{f}-{k}"))),
        replicate: None,
        fsck: None,
    };
    for &f in &files {
        let host = tempfile::Builder::new().prefix("tree-src-").tempdir_in(&base).context("temporary directory")?;
        host_tree(host.path(), f, args.file_bytes)?;
        for &k in &snapshots {
            eprintln!("tree: {f} files of {} bytes, {k} snapshots", args.file_bytes);
            let spec = spec_for(f, k, host.path());
            let mut case_runs = Vec::new();
            for _ in 0..if f == files[0] { baseline_runs } else { 1 } {
                case_runs.push(run_case(&spec)?);
            }
            runs.push((f, k, case_runs));
        }
        if f == files[0] {
            small_host = Some(host);
        }
    }
    // The smallest size again after the others, so that a machine whose speed drifts
    // over the hours of a run moves the denominators with the numerators.
    if let Some(host) = small_host.as_ref().filter(|_| baseline_after > 0) {
        for &k in &snapshots {
            eprintln!("tree: {} files of {} bytes, {k} snapshots, again", files[0], args.file_bytes);
            let spec = spec_for(files[0], k, host.path());
            for _ in 0..baseline_after {
                let o = run_case(&spec)?;
                if let Some((.., r)) = runs.iter_mut().find(|(f, kk, _)| *f == files[0] && *kk == k) {
                    r.push(o);
                }
            }
        }
    }
    drop(small_host);
    let mut cases = Vec::new();
    for (f, k, case_runs) in runs {
        let o = median_case(case_runs)?;
        let note = |key: String| o.notes.get(&key).and_then(|v| v.parse().ok()).unwrap_or(0u64);
        let ops: Vec<OpResult> = OPS
            .iter()
            .filter_map(|(k, _)| {
                o.phases.get(*k).map(|s| OpResult {
                    op: k.to_string(),
                    seconds: s.seconds,
                    us_per_file: s.seconds / s.units * 1e6,
                    cpu_us_per_file: s.cpu_s / s.units * 1e6,
                    rss_kib: note(format!("rss_kib.{k}")),
                    sqlite_heap: note(format!("sqlite_heap.{k}")),
                })
            })
            .collect();
        eprintln!("tree: {f} files, {k} snapshots");
        for r in &ops {
            eprintln!(
                "  {}: {:.2} s, {:.1} µs per file ({:.1} CPU), peak RSS {} MiB, SQLite heap {} MiB",
                r.op,
                r.seconds,
                r.us_per_file,
                r.cpu_us_per_file,
                r.rss_kib / 1024,
                r.sqlite_heap >> 20
            );
        }
        eprintln!("  peak RSS {} MiB", o.peak_rss_kib / 1024);
        cases.push(CaseResult { files: f, snapshots: k, peak_rss_kib: o.peak_rss_kib, ops });
    }
    let cost = |f: u64, k: u64, op: &str| -> Option<f64> {
        cases.iter().find(|c| c.files == f && c.snapshots == k)?.ops.iter().find(|o| o.op == op).map(|o| o.us_per_file)
    };
    let (small, large) = (files[0], files[files.len() - 1]);
    let (fewest, most) = (snapshots[0], snapshots[snapshots.len() - 1]);
    let mut size_ratios = Vec::new();
    let mut history_ratios = Vec::new();
    for (op, _) in OPS {
        for &k in &snapshots {
            if let (Some(a), Some(b)) = (cost(small, k, op), cost(large, k, op)) {
                size_ratios.push((k, op.to_string(), b / a));
            }
        }
        for &f in &files {
            if let (Some(a), Some(b)) = (cost(f, fewest, op), cost(f, most, op)) {
                if most != fewest {
                    history_ratios.push((f, op.to_string(), b / a));
                }
            }
        }
    }
    let mut fsck_ratios = Vec::new();
    for &f in &files {
        for &k in snapshots.iter().filter(|&&k| k > 0) {
            if let (Some(a), Some(b)) = (cost(f, 0, "fsck"), cost(f, k, "fsck")) {
                fsck_ratios.push((f, k, b / a));
            }
        }
    }
    let report = TreeReport {
        benchmark: "tree".into(),
        quick,
        command: sys::command_line(),
        machine: Machine::describe(),
        file_bytes: args.file_bytes,
        without_snapshot_index: args.without_snapshot_index,
        s3_and_mount: server.is_some(),
        baseline_runs: baseline_runs + baseline_after,
        baseline_after,
        mount_until_idle: true,
        fsck_fresh_open: true,
        fsck_own_process: true,
        cases,
        size_ratios,
        history_ratios,
        fsck_ratios,
    };
    let name = if args.without_snapshot_index { "tree-without-snapshot-index" } else { "tree" };
    let section = section(report);
    args.common.publish(name, &section.1, &section.0)?;
    Ok(section.0.targets)
}

/// CPU µs per file of `op` in the case (`files`, `snapshots`), if it ran.
fn cpu_cost(r: &TreeReport, files: u64, snapshots: u64, op: &str) -> Option<f64> {
    let c = r.cases.iter().find(|c| c.files == files && c.snapshots == snapshots)?;
    c.ops.iter().find(|o| o.op == op).map(|o| o.cpu_us_per_file).filter(|x| *x > 0.0)
}

/// A ratio of CPU costs, if both ran.
fn cpu_ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(b? / a?)
}

/// The targets a run judges: per-file cost at the largest size within 1.5x of the
/// smallest, for every operation at every amount of history; fsck with snapshots within
/// 1.5x (one) or 3x (more) of none.
///
/// Judged on CPU per file (the work sqlvault does, which varies less with a shared
/// machine's load), with the wall-time ratio beside it: at the largest size the vault
/// and the host tree outgrow what the kernel keeps dirty in memory, so wall time there
/// includes waiting for the disk to take gigabytes that at the smallest size never leave
/// the page cache. Old results without CPU figures are judged on wall time.
fn targets(r: &TreeReport, files: &[u64]) -> Vec<Target> {
    let judged = |ok: bool| (!r.quick).then_some(ok);
    let (small, large) = (files[0], files[files.len() - 1]);
    let label = |k: &str| OPS.iter().find(|(o, _)| *o == k).map(|(_, l)| *l).unwrap_or(k).to_string();
    let measured = |cpu: Option<f64>, wall: f64| match cpu {
        Some(c) => (format!("CPU {} (wall {})", report::ratio(c), report::ratio(wall)), c),
        None => (format!("wall {}", report::ratio(wall)), wall),
    };
    let mut targets: Vec<Target> = r
        .size_ratios
        .iter()
        .map(|(k, op, x)| {
            let (text, judged_on) = measured(cpu_ratio(cpu_cost(r, small, *k, op), cpu_cost(r, large, *k, op)), *x);
            Target::new(
                "tree",
                &format!("{}, {k} snapshots: per-file cost at {large} files within 1.5× of that at {small}", label(op)),
                text,
                judged(judged_on <= 1.5),
            )
        })
        .collect();
    for (f, k, x) in r.fsck_ratios.iter().filter(|(f, ..)| *f == large) {
        let limit = if *k <= 1 { 1.5 } else { 3.0 };
        let (text, judged_on) = measured(cpu_ratio(cpu_cost(r, *f, 0, "fsck"), cpu_cost(r, *f, *k, "fsck")), *x);
        targets.push(Target::new(
            "tree",
            &format!("fsck of {f} files with {k} snapshots: per-file cost within {limit}× of none"),
            text,
            judged(judged_on <= limit),
        ));
    }
    targets
}

/// The section of a run (and the run, for its JSON).
fn section(r: TreeReport) -> (Section, TreeReport) {
    let mut files: Vec<u64> = Vec::new();
    let mut snapshots: Vec<u64> = Vec::new();
    for c in &r.cases {
        if !files.contains(&c.files) {
            files.push(c.files);
        }
        if !snapshots.contains(&c.snapshots) {
            snapshots.push(c.snapshots);
        }
    }
    let heading =
        if r.without_snapshot_index { format!("{SECTION}, without the snapshot index") } else { SECTION.into() };
    let s = Section {
        heading,
        body: markdown(&r, &files, &snapshots),
        targets: if files.len() > 1 && !snapshots.is_empty() { targets(&r, &files) } else { Vec::new() },
        machine: r.machine.clone(),
        charts: Vec::new(),
    };
    (s, r)
}

fn render(json: &str) -> Result<Section> {
    Ok(section(scenario::parse(json)?).0)
}

fn markdown(r: &TreeReport, files: &[u64], snapshots: &[u64]) -> String {
    let mut s = report::preamble(&r.command, &r.machine);
    s.push_str(&format!(
        "\n\nTrees of {} files of {} bytes (100 per directory), with {} snapshots taken before the operations \
         (one after the import, 1% of the files rewritten before each next); each case in its own process. Per \
         operation: wall time, µs per file (CPU µs per file), the peak RSS of the process during it. Ratio: \
         per-file cost at the largest size / at the smallest, wall (CPU) (target: at most 1.5×, judged on CPU).\n",
        files.iter().map(|f| f.to_string()).collect::<Vec<_>>().join(", "),
        r.file_bytes,
        snapshots.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(", "),
    ));
    if r.fsck_own_process {
        s.push_str(
            "\nfsck runs as `sqlvault fsck` does: in a process of its own, on the vault opened afresh (the open \
             is not measured). Its CPU includes the first touch of its page cache's memory.\n",
        );
    } else if r.fsck_fresh_open {
        s.push_str(
            "\nfsck runs on the vault opened afresh, as `sqlvault fsck` does: nothing of the operations before it \
             in SQLite's caches (the open is not measured).\n",
        );
    }
    if r.baseline_runs > 1 {
        let after = match r.baseline_after {
            0 => String::new(),
            n => format!(", {n} of them after the larger sizes"),
        };
        s.push_str(&format!(
            "\nAt the smallest size each case ran {} times (in a process each{after}): its operations' time and CPU \
             are the medians of those runs, their peak RSS the largest.\n",
            r.baseline_runs
        ));
    }
    if r.s3_and_mount {
        s.push_str(
            "\nPush, clone and pull: to a VersityGW server on loopback (posix backend, same disk), one bucket per \
             case; the push into the empty bucket, the clone of it into a new vault (the replica), then 1% of the \
             files rewritten, pushed and pulled into the replica; CPU and peak RSS are the vault process's (not \
             the server's). Through the mount: the replica, with its tree and history, mounted by a `serve-mount` \
             process (default commit window); `ls -lR` of the tree after dropping the page cache, then `rm -rf` of \
             it and `sync(2)`; CPU is the tool's plus the mount process's, peak RSS the mount process's.\n",
        );
        if r.mount_until_idle {
            s.push_str(
                "\nEach operation through the mount counts until the mount process has spent no CPU for a second: \
                 time and CPU include what the mount does after the tool ends (the commit window's last commit; \
                 the purge of the files `rm -rf` released and the wipe of their bytes, which it runs while quiet \
                 or once 10,000 files wait, so during the tool at the largest size and after it at the \
                 smallest).\n",
            );
        }
    }
    let find = |f: u64, k: u64| r.cases.iter().find(|c| c.files == f && c.snapshots == k);
    for &k in snapshots {
        s.push_str(&format!("\n**{k} snapshots**\n\n| operation |"));
        for f in files {
            s.push_str(&format!(" {f} files |"));
        }
        s.push_str(" ratio |\n|---|");
        for _ in files {
            s.push_str("--:|");
        }
        s.push_str("--:|\n");
        for (op, label) in OPS {
            s.push_str(&format!("| {label} |"));
            for &f in files {
                match find(f, k).and_then(|c| c.ops.iter().find(|o| o.op == *op)) {
                    Some(o) => s.push_str(&format!(
                        " {:.2} s, {:.0} µs/file ({:.0} CPU), {} MiB |",
                        o.seconds,
                        o.us_per_file,
                        o.cpu_us_per_file,
                        o.rss_kib / 1024
                    )),
                    None => s.push_str(" - |"),
                }
            }
            let (small, large) = (files[0], files[files.len() - 1]);
            let ratio = r
                .size_ratios
                .iter()
                .find(|(kk, o, _)| *kk == k && o == op)
                .map(|(.., x)| match cpu_ratio(cpu_cost(r, small, k, op), cpu_cost(r, large, k, op)) {
                    Some(c) => format!("{} ({} CPU)", report::ratio(*x), report::ratio(c)),
                    None => report::ratio(*x),
                })
                .unwrap_or_default();
            s.push_str(&format!(" {ratio} |\n"));
        }
        s.push_str("| peak RSS of the case |");
        for &f in files {
            s.push_str(&format!(" {} MiB |", find(f, k).map(|c| c.peak_rss_kib / 1024).unwrap_or(0)));
        }
        s.push_str(" |\n");
    }
    if !r.history_ratios.is_empty() {
        let (fewest, most) = (snapshots[0], snapshots[snapshots.len() - 1]);
        s.push_str(&format!(
            "\nPer-file cost with {most} snapshots / with {fewest} (forget and snapshot rm remove nothing \
             or more with more history; put again rewrites the files the history changed):\n\n| operation |"
        ));
        for f in files {
            s.push_str(&format!(" {f} files |"));
        }
        s.push_str("\n|---|");
        for _ in files {
            s.push_str("--:|");
        }
        s.push('\n');
        for (op, label) in OPS {
            s.push_str(&format!("| {label} |"));
            for &f in files {
                let x = r.history_ratios.iter().find(|(ff, o, _)| *ff == f && o == op).map(|(.., x)| report::ratio(*x));
                s.push_str(&format!(" {} |", x.unwrap_or_else(|| "-".into())));
            }
            s.push('\n');
        }
    }
    if !r.fsck_ratios.is_empty() {
        s.push_str("\nfsck, per-file cost with snapshots / without, wall (CPU) (targets: 1 snapshot 1.5×, 10 snapshots 3×, judged on CPU):\n\n");
        for (f, k, x) in &r.fsck_ratios {
            let cpu = cpu_ratio(cpu_cost(r, *f, 0, "fsck"), cpu_cost(r, *f, *k, "fsck"));
            let cpu = cpu.map(|c| format!(" ({} CPU)", report::ratio(c))).unwrap_or_default();
            s.push_str(&format!("- {f} files, {k} snapshots: {}{cpu}\n", report::ratio(*x)));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness::{CaseOutput, Sample};

    fn run(seconds: f64, cpu_s: f64, rss: u64) -> CaseOutput {
        let mut o = CaseOutput { peak_rss_kib: rss, ..Default::default() };
        o.add("fsck", Sample { seconds, units: 10.0, cpu_s });
        o.notes.insert("rss_kib.fsck".into(), rss.to_string());
        o
    }

    /// Time and CPU are each the median of the runs (an outlier either way is left
    /// out); peak RSS is the largest.
    #[test]
    fn a_case_run_several_times_gives_the_medians() {
        let o = median_case(vec![run(1.0, 0.9, 300), run(9.0, 0.2, 100), run(2.0, 0.5, 200)]).unwrap();
        let s = &o.phases["fsck"];
        assert_eq!((s.seconds, s.cpu_s, s.units), (2.0, 0.5, 10.0));
        assert_eq!((o.peak_rss_kib, o.notes["rss_kib.fsck"].as_str()), (300, "300"));
        let one = median_case(vec![run(4.0, 3.0, 7)]).unwrap();
        assert_eq!(one.phases["fsck"].seconds, 4.0);
        assert!(median_case(Vec::new()).is_err());
    }
}
