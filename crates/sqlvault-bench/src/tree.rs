//! `tree`: whole-tree operations at two tree sizes, to show their cost is linear in
//! the files: import (`put`'s per-file path), the same import again (every file
//! unchanged), export (`get`'s per-file path, one sync at the end),
//! `fsck`, a restore that replaces the live tree, `rm -r` and `snapshot rm`.
//!
//! Each size runs in its own process (peak RSS per size). The baseline is the small
//! size measured in the same run: the target is a per-file cost at the large size
//! within 1.5x of the per-file cost at the small one, for every operation.
//!
//! Import and export go through the library calls `sqlvault put` and `get` make for
//! each file ([`Vault::replace_file`], a read of the file, a rename on the host), not
//! through the CLI binary, so the numbers are the vault's, without process start-up.

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sqlvault::secrets::KdfParams;
use sqlvault::{CreateOptions, EngineConfig, FileOptions, FileType, Interrupt, Secret, SetAttr, Vault};

use crate::data::Stream;
use crate::error::{Context, Result};
use crate::harness::{self, CaseOutput, Meter, Target};
use crate::report;
use crate::sys::{self, Machine};

const SECTION: &str = "## Whole-tree operations";
const PER_DIR: u64 = 100;
/// The operations measured, in the order they run.
const OPS: &[(&str, &str)] = &[
    ("put", "put (import, one file per write)"),
    ("put_again", "put again (every file unchanged)"),
    ("get", "get (export, one sync at the end)"),
    ("fsck", "fsck"),
    ("restore_replace", "restore replacing the live tree"),
    ("rm_r", "rm -r"),
    ("snapshot_rm", "snapshot rm"),
];

/// Arguments of `sqlvault-bench tree`.
#[derive(Debug, clap::Args)]
pub struct TreeArgs {
    /// Tree sizes in files; the first is the baseline.
    #[arg(long, value_delimiter = ',', default_values_t = vec![5_000u64, 50_000])]
    pub files: Vec<u64>,
    /// Bytes per file (the issue's tree: 50,000 files, 218 MB).
    #[arg(long, default_value_t = 4096)]
    pub file_bytes: usize,
    /// Directory for the vaults and host trees (a disk, not tmpfs) [default: RESULTS_DIR/tmp].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// 500 and 5,000 files: indicative only (what `all --quick` runs).
    #[arg(long)]
    pub quick: bool,
    #[command(flatten)]
    pub out: report::OutputArgs,
}

#[derive(Debug, Serialize, Deserialize)]
struct Spec {
    files: u64,
    file_bytes: usize,
    dir: PathBuf,
}

#[derive(Debug, Serialize)]
struct SizeResult {
    files: u64,
    peak_rss_kib: u64,
    /// Operation -> (seconds, microseconds per file, peak RSS during it in KiB, peak of
    /// SQLite's heap during it in bytes).
    ops: Vec<(String, f64, f64, u64, u64)>,
}

#[derive(Debug, Serialize)]
struct TreeReport {
    benchmark: &'static str,
    command: String,
    machine: Machine,
    file_bytes: usize,
    sizes: Vec<SizeResult>,
    /// Operation -> per-file cost at the largest size / at the smallest.
    ratios: Vec<(String, f64)>,
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
    let f = fs::File::open(dest).context("open")?;
    // SAFETY: syncfs on a valid descriptor.
    unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&f)) };
    Ok(n)
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
    out.add(op, m.stop(files)?);
    let rss = sys::vm_hwm_kib()?;
    out.peak_rss_kib = out.peak_rss_kib.max(rss);
    out.notes.insert(format!("rss_kib.{op}"), rss.to_string());
    out.notes.insert(format!("sqlite_heap.{op}"), sqlite_heap_peak(false).to_string());
    Ok(())
}

/// One size, in this (child) process.
pub fn case(spec: &str) -> Result<CaseOutput> {
    let spec: Spec = harness::parse_spec(spec)?;
    let mut out = CaseOutput::default();
    let work = tempfile::Builder::new().prefix("tree-").tempdir_in(&spec.dir).context("temporary directory")?;
    let src = work.path().join("src");
    host_tree(&src, spec.files, spec.file_bytes)?;
    let path = work.path().join("tree.vault");
    let secret = Secret::passphrase("bench");
    let opts =
        CreateOptions { kdf: KdfParams { memory_kib: 8 * 1024, iterations: 1, parallelism: 1 }, ..Default::default() };
    Vault::create(&path, &secret, &opts).context("cannot create the vault")?.close()?;
    let v = Vault::open(&path, &secret, EngineConfig::default()).context("cannot open the vault")?;
    let n = spec.files as f64;
    let check = |what: &str, got: u64, want: u64| -> Result<()> {
        if got != want {
            crate::bail!("{what}: {got} files, expected {want}");
        }
        Ok(())
    };

    out.peak_rss_kib = sys::vm_hwm_kib()?;
    let m = start()?;
    check("put", put(&v, &src, "/t")?, spec.files)?;
    finish(&mut out, "put", m, n)?;
    let m = start()?;
    check("put again", put(&v, &src, "/t")?, 0)?;
    finish(&mut out, "put_again", m, n)?;
    let back = work.path().join("back");
    let m = start()?;
    check("get", get(&v, "/t", &back)?, spec.files)?;
    finish(&mut out, "get", m, n)?;
    fs::remove_dir_all(&back).context("cannot remove the exported tree")?;

    let m = start()?;
    let f = v.fsck(&sqlvault::Ops::default())?;
    finish(&mut out, "fsck", m, n)?;
    if !f.is_clean() {
        crate::bail!("fsck found problems: {:?}", f.problems);
    }

    v.snapshot("s")?;
    // Change the live tree a little, then bring the snapshot back over it.
    v.write_file("/t/d0/new", b"new")?;
    let m = start()?;
    let r = v.restore("s", "/t", None, &sqlvault::Ops::default())?;
    finish(&mut out, "restore_replace", m, n)?;
    check("restore", r.files, spec.files)?;
    let m = start()?;
    let r = v.remove_dir_all("/t", &sqlvault::Ops::default())?;
    finish(&mut out, "rm_r", m, n)?;
    check("rm -r", r.files, spec.files)?;
    let m = start()?;
    v.remove_snapshot("s", &sqlvault::Ops::default())?;
    finish(&mut out, "snapshot_rm", m, n)?;
    let f = v.fsck(&sqlvault::Ops::default())?;
    if !f.is_clean() {
        crate::bail!("fsck found problems after the removals: {:?}", f.problems);
    }
    v.close()?;
    Ok(out)
}

/// Entry point of `sqlvault-bench tree`.
pub fn tree(args: &TreeArgs) -> Result<()> {
    run(args).map(drop)
}

/// Runs the scenario and returns its targets (for `all`).
pub fn run(args: &TreeArgs) -> Result<Vec<Target>> {
    let files = if args.quick { vec![500, 5_000] } else { args.files.clone() };
    if files.len() < 2 || files.contains(&0) {
        crate::bail!("--files needs two sizes or more, each at least 1");
    }
    let base = args.dir.clone().unwrap_or_else(|| args.out.results_dir.join("tmp"));
    fs::create_dir_all(&base).with_context(|| format!("cannot create {}", base.display()))?;
    let mut sizes = Vec::new();
    for &f in &files {
        eprintln!("tree: {f} files of {} bytes", args.file_bytes);
        let o = harness::spawn_case("tree", &Spec { files: f, file_bytes: args.file_bytes, dir: base.clone() })?;
        let note = |key: String| o.notes.get(&key).and_then(|v| v.parse().ok()).unwrap_or(0u64);
        let ops: Vec<(String, f64, f64, u64, u64)> = OPS
            .iter()
            .filter_map(|(k, _)| {
                o.phases.get(*k).map(|s| {
                    let (rss, heap) = (note(format!("rss_kib.{k}")), note(format!("sqlite_heap.{k}")));
                    (k.to_string(), s.seconds, s.seconds / s.units * 1e6, rss, heap)
                })
            })
            .collect();
        for (k, s, us, rss, heap) in &ops {
            eprintln!(
                "  {k}: {s:.2} s, {us:.1} µs per file, peak RSS {} MiB, SQLite heap {} MiB",
                rss / 1024,
                heap >> 20
            );
        }
        eprintln!("  peak RSS {} MiB", o.peak_rss_kib / 1024);
        sizes.push(SizeResult { files: f, peak_rss_kib: o.peak_rss_kib, ops });
    }
    let (first, last) = (&sizes[0], &sizes[sizes.len() - 1]);
    let ratios: Vec<(String, f64)> =
        first.ops.iter().zip(&last.ops).map(|((k, _, a, ..), (_, _, b, ..))| (k.clone(), b / a)).collect();
    let (small, large) = (first.files, last.files);
    let report = TreeReport {
        benchmark: "tree",
        command: sys::command_line(),
        machine: Machine::describe(),
        file_bytes: args.file_bytes,
        sizes,
        ratios,
    };
    let md = markdown(&report);
    let judged = |ok: bool| (!args.quick).then_some(ok);
    let targets = report
        .ratios
        .iter()
        .map(|(k, r)| {
            let label = OPS.iter().find(|(o, _)| o == k).map(|(_, l)| *l).unwrap_or(k);
            Target::new(
                "tree",
                &format!("{label}: per-file cost at {large} files within 1.5× of that at {small}"),
                report::ratio(*r),
                judged(*r <= 1.5),
            )
        })
        .collect();
    report::publish_run(&args.out, "tree", args.quick, &report, SECTION, &md)?;
    Ok(targets)
}

fn markdown(r: &TreeReport) -> String {
    let mut s = report::preamble(&r.command, &r.machine);
    s.push_str(&format!(
        "\n\nTrees of {} files of {} bytes (100 per directory); each size in its own process. Per-file cost \
         (µs), the peak RSS of the process during each operation, and the ratio of the largest size's per-file \
         cost to the smallest's (target: at most 1.5×).\n\n",
        r.sizes.iter().map(|s| s.files.to_string()).collect::<Vec<_>>().join(" and "),
        r.file_bytes
    ));
    s.push_str("| operation |");
    for z in &r.sizes {
        s.push_str(&format!(" {} files |", z.files));
    }
    s.push_str(" ratio |\n|---|");
    for _ in &r.sizes {
        s.push_str("--:|");
    }
    s.push_str("--:|\n");
    for (i, (k, label)) in OPS.iter().enumerate() {
        s.push_str(&format!("| {label} |"));
        for z in &r.sizes {
            match z.ops.get(i) {
                Some((_, secs, us, rss, _)) => {
                    s.push_str(&format!(" {secs:.2} s ({us:.0} µs/file, {} MiB) |", rss / 1024))
                }
                None => s.push_str(" - |"),
            }
        }
        let ratio = r.ratios.iter().find(|(o, _)| o == k).map(|(_, x)| report::ratio(*x)).unwrap_or_default();
        s.push_str(&format!(" {ratio} |\n"));
    }
    s.push_str("| peak RSS of the whole run |");
    for z in &r.sizes {
        s.push_str(&format!(" {} MiB |", z.peak_rss_kib / 1024));
    }
    s.push_str(" |\n");
    s
}
