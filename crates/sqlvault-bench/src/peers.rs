//! `peers`: sequential write and read of one large file (256 MiB) and of a tree of
//! 10,000 small files (4-64 KiB) through (a) a plain directory on the same disk, (b) a
//! gocryptfs mount, (c) a cryfs mount, (d) a sqlvault FUSE mount and (e) the sqlvault
//! library API. The same driver (this program's `case` subcommand, one process per
//! phase) does the I/O for all; the page cache is dropped between write and read.
//!
//! Then, on the mounts and the plain directory, the tools people run on trees: untar
//! of `/usr/include` (`tar x`), `ls -lR` of it with a cold cache, `rm -rf` of it, and
//! `cp -r` of a directory of many small files from the host disk, each a child process
//! of the driver whose CPU time counts with the driver's.
//!
//! The suite creates and mounts the encrypted file systems itself, with the passphrase
//! in a mode-0600 file (`gocryptfs -passfile`; cryfs reads it from its stdin with
//! `CRYFS_FRONTEND=noninteractive`), and serves the sqlvault mount from a child
//! process of its own (`serve-mount`, hidden), keyed by a key file. The CPU time of
//! each mount's server process during a phase is added to the driver's.

use std::io::{Read, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sqlvault::{CreateOptions, EngineConfig, FileOptions, Secret, Vault};

use crate::data::{Checksum, Stream};
use crate::error::{Context, Result};
use crate::fixtures::{serve_mount_child, wait_mounted, Mount};
use crate::harness::{self, CaseOutput, ChartSpec, Collector, Meter, Run, Sample, Unit};
use crate::report;
use crate::scenario::{Common, Def, Target};
use crate::sys;

const HEADING: &str = "## peers";
const MIB: usize = 1 << 20;
const FILES_PER_DIR: u64 = 100;

/// Arguments of `sqlvault-bench peers`.
#[derive(Debug, Clone, clap::Args)]
pub struct PeersArgs {
    /// Size of the large file, MiB.
    #[arg(long, default_value_t = 256)]
    pub large_mib: u64,
    /// Number of small files (4-64 KiB each).
    #[arg(long, default_value_t = 10_000)]
    pub files: u64,
    /// Repetitions (the median is reported).
    #[arg(long, default_value_t = 2)]
    pub reps: u32,
    /// Number of small files (1-8 KiB each) for `cp -r`.
    #[arg(long, default_value_t = 50_000)]
    pub copy_files: u64,
    /// Directory to archive for the untar, `ls -lR` and `rm -rf` workloads.
    #[arg(long, default_value = "/usr/include")]
    pub tree_source: PathBuf,
    /// Skip the untar, `ls -lR`, `rm -rf` and `cp -r` workloads.
    #[arg(long)]
    pub no_tools: bool,
    /// The sqlvault mount's commit window in milliseconds (`sqlvault mount
    /// --commit-window-ms`; 0 commits every operation before answering it).
    #[arg(long, value_name = "MS", default_value_t = sqlvault_fuse::DEFAULT_COMMIT_WINDOW.as_millis() as u64)]
    pub commit_window_ms: u64,
    /// Run only these systems (comma-separated: plain, gocryptfs, cryfs, fuse,
    /// fuse-exclusive, library, library-exclusive); all by default. gocryptfs, the baseline, always runs.
    #[arg(long, value_delimiter = ',')]
    pub systems: Vec<String>,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum System {
    Plain,
    Gocryptfs,
    Cryfs,
    VaultFuse,
    /// The mount with `--exclusive` (a rollback journal, no WAL).
    VaultFuseExclusive,
    VaultLib,
    /// The library with `EngineConfig::exclusive` (a rollback journal, no WAL).
    VaultLibExclusive,
}

impl System {
    fn label(self) -> &'static str {
        match self {
            System::Plain => "plain directory",
            System::Gocryptfs => "gocryptfs",
            System::Cryfs => "cryfs",
            System::VaultFuse => "sqlvault FUSE",
            System::VaultFuseExclusive => "sqlvault FUSE, exclusive (rollback journal)",
            System::VaultLib => "sqlvault library",
            System::VaultLibExclusive => "sqlvault library, exclusive (rollback journal)",
        }
    }

    /// The name `--systems` takes.
    fn arg(self) -> &'static str {
        match self {
            System::Plain => "plain",
            System::Gocryptfs => "gocryptfs",
            System::Cryfs => "cryfs",
            System::VaultFuse => "fuse",
            System::VaultFuseExclusive => "fuse-exclusive",
            System::VaultLib => "library",
            System::VaultLibExclusive => "library-exclusive",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Workload {
    Large,
    Tree,
    /// `tar xf` of the archive of `--tree-source`, then `sync`.
    Untar,
    /// `ls -lR` of the untarred tree (cold cache).
    ListTree,
    /// `rm -rf` of the untarred tree, then `sync`.
    RemoveTree,
    /// `cp -r` of a host directory of small files, then `sync`.
    CopyTree,
}

impl Workload {
    /// Shell tools run on a directory (not through the library).
    fn is_tool(self) -> bool {
        matches!(self, Workload::Untar | Workload::ListTree | Workload::RemoveTree | Workload::CopyTree)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
enum Where {
    /// A directory (plain, or a mount point).
    Dir(PathBuf),
    /// A vault through the library, keyed by a key file; `exclusive` opens it with
    /// `EngineConfig::exclusive`.
    Vault {
        path: PathBuf,
        key_file: PathBuf,
        #[serde(default)]
        exclusive: bool,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Spec {
    target: Where,
    workload: Workload,
    write: bool,
    /// Sub-directory (per repetition) the workload writes into.
    sub: String,
    large_mib: u64,
    files: u64,
    seed: u64,
    /// The archive (untar) or the directory to copy (`cp -r`), for the tool workloads.
    #[serde(default)]
    source: Option<PathBuf>,
}

/// Size of small file `i`: 4..=64 KiB, a multiple of 8 bytes.
fn small_size(seed: u64, i: u64) -> usize {
    let mut s = Stream::new(seed ^ i.wrapping_mul(0x9E37_79B9));
    let mut b = [0u8; 8];
    s.fill(&mut b);
    let r = u64::from_le_bytes(b) % ((60 << 10) / 8 + 1);
    (4 << 10) + r as usize * 8
}

fn small_path(sub: &str, i: u64) -> (String, String) {
    let d = format!("{sub}/d{:03}", i / FILES_PER_DIR);
    (d.clone(), format!("{d}/f{i:05}.bin"))
}

/// The driver: one phase of one workload on one target, in a child process.
pub fn case(spec: &str) -> Result<CaseOutput> {
    let spec: Spec = harness::parse_spec(spec)?;
    let mut out = CaseOutput::default();
    let mut sum = Checksum::new();
    let mut buf = vec![0u8; MIB];
    let vault = match &spec.target {
        Where::Vault { path, key_file, exclusive } => {
            let config = EngineConfig { exclusive: *exclusive, ..EngineConfig::default() };
            Some(Vault::open(path, &Secret::from_key_file(key_file)?, config)?)
        }
        Where::Dir(_) => None,
    };
    let dir = match &spec.target {
        Where::Dir(d) => d.clone(),
        Where::Vault { .. } => PathBuf::from("/"),
    };
    if spec.workload.is_tool() {
        return tool_case(&spec, &dir, out);
    }
    let mut m = Meter::start()?;
    match (spec.workload, spec.write) {
        (Workload::Large, true) => {
            let mut gen = Stream::new(spec.seed);
            let mut w = Writer::create(&vault, &dir, &spec.sub, &format!("{}/large.bin", spec.sub))?;
            for _ in 0..spec.large_mib {
                let t = Instant::now();
                gen.fill(&mut buf);
                sum.update(&buf);
                m.exclude(t.elapsed());
                w.write_all(&buf)?;
            }
            w.finish()?;
        }
        (Workload::Large, false) => {
            let mut r = Reader::open(&vault, &dir, &format!("{}/large.bin", spec.sub))?;
            loop {
                let n = read_full(&mut r, &mut buf)?;
                let t = Instant::now();
                sum.update(&buf[..n]);
                m.exclude(t.elapsed());
                if n < buf.len() {
                    break;
                }
            }
        }
        (Workload::Tree, true) => {
            let mut gen = Stream::new(spec.seed);
            for i in 0..spec.files {
                let (d, f) = small_path(&spec.sub, i);
                let n = small_size(spec.seed, i);
                let t = Instant::now();
                gen.fill(&mut buf[..n]);
                sum.update(&buf[..n]);
                m.exclude(t.elapsed());
                let mut w = Writer::create(&vault, &dir, &d, &f)?;
                w.write_all(&buf[..n])?;
                w.close()?;
            }
            sync_target(&vault)?;
        }
        (Workload::Untar | Workload::ListTree | Workload::RemoveTree | Workload::CopyTree, _) => {
            crate::bail!("tool workloads run in tool_case")
        }
        (Workload::Tree, false) => {
            for i in 0..spec.files {
                let (_, f) = small_path(&spec.sub, i);
                let mut r = Reader::open(&vault, &dir, &f)?;
                let n = read_full(&mut r, &mut buf)?;
                let t = Instant::now();
                sum.update(&buf[..n]);
                m.exclude(t.elapsed());
            }
        }
    }
    let units = sum.bytes() as f64;
    out.add("phase", m.stop(units)?);
    out.notes.insert("checksum".into(), sum.hex());
    if let Some(v) = vault {
        v.close()?;
    }
    Ok(out)
}

/// One tool workload: the command, then `sync(2)` for the ones that write; the
/// tool's CPU time counts as the driver's.
fn tool_case(spec: &Spec, dir: &Path, mut out: CaseOutput) -> Result<CaseOutput> {
    let sub = dir.join(&spec.sub);
    let source = spec.source.clone().unwrap_or_default();
    let mut cmd = match spec.workload {
        Workload::Untar => {
            std::fs::create_dir_all(&sub).with_context(|| format!("cannot create {}", sub.display()))?;
            let mut c = Command::new("tar");
            c.arg("xf").arg(&source).arg("-C").arg(&sub);
            c
        }
        Workload::ListTree => {
            let mut c = Command::new("ls");
            c.arg("-lR").arg(&sub);
            c
        }
        Workload::RemoveTree => {
            let mut c = Command::new("rm");
            c.arg("-rf").arg(&sub);
            c
        }
        Workload::CopyTree => {
            let mut c = Command::new("cp");
            c.arg("-r").arg(&source).arg(&sub);
            c
        }
        w => crate::bail!("{w:?} is not a tool workload"),
    };
    let c0 = sys::children_cpu_s();
    let m = Meter::start()?;
    let st = cmd.stdout(Stdio::null()).status().with_context(|| format!("cannot run {cmd:?}"))?;
    if !st.success() {
        crate::bail!("{cmd:?} failed ({st})");
    }
    if spec.workload != Workload::ListTree {
        // SAFETY: sync() takes no arguments and cannot fail.
        unsafe { libc::sync() };
    }
    let mut sample = m.stop(1.0)?;
    sample.cpu_s += sys::children_cpu_s() - c0;
    out.add("phase", sample);
    Ok(out)
}

/// Makes everything written durable: `sync(2)` for file systems (it also flushes
/// FUSE mounts' dirty pages and the stores behind them), plus `Vault::sync`.
fn sync_target(vault: &Option<Vault>) -> Result<()> {
    if let Some(v) = vault {
        v.sync()?;
    }
    // SAFETY: sync() takes no arguments and cannot fail.
    unsafe { libc::sync() };
    Ok(())
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e).context("read failed"),
        }
    }
    Ok(got)
}

/// A file being written, through the file system or the library.
enum Writer {
    Fs(std::fs::File),
    Vault(sqlvault::FileHandle),
}

impl Writer {
    fn create(vault: &Option<Vault>, dir: &Path, parent: &str, path: &str) -> Result<Writer> {
        match vault {
            Some(v) => {
                let p = format!("/{parent}");
                if !v.exists(&p)? {
                    v.create_dir_all(&p)?;
                }
                Ok(Writer::Vault(v.create_file(&format!("/{path}"))?))
            }
            None => {
                let d = dir.join(parent);
                std::fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
                let p = dir.join(path);
                Ok(Writer::Fs(std::fs::File::create(&p).with_context(|| format!("cannot create {}", p.display()))?))
            }
        }
    }
    fn write_all(&mut self, b: &[u8]) -> Result<()> {
        match self {
            Writer::Fs(f) => f.write_all(b).context("write failed"),
            Writer::Vault(f) => f.write_all(b).context("write failed"),
        }
    }
    /// Closes (for the library: commits) without forcing the data to disk.
    fn close(self) -> Result<()> {
        match self {
            Writer::Fs(f) => drop(f),
            Writer::Vault(f) => f.close()?,
        }
        Ok(())
    }
    /// Makes the file durable (`fsync`, or commit and `Vault::sync`) and closes it.
    fn finish(self) -> Result<()> {
        match self {
            Writer::Fs(f) => f.sync_all().context("fsync failed")?,
            Writer::Vault(f) => {
                f.sync_all()?;
                f.close()?;
            }
        }
        Ok(())
    }
}

enum Reader {
    Fs(std::fs::File),
    Vault(sqlvault::FileHandle),
}

impl Reader {
    fn open(vault: &Option<Vault>, dir: &Path, path: &str) -> Result<Reader> {
        match vault {
            Some(v) => Ok(Reader::Vault(v.open_file(&format!("/{path}"), &FileOptions::new().read(true))?)),
            None => {
                let p = dir.join(path);
                Ok(Reader::Fs(std::fs::File::open(&p).with_context(|| format!("cannot open {}", p.display()))?))
            }
        }
    }
}

impl Read for Reader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Reader::Fs(f) => f.read(buf),
            Reader::Vault(f) => f.read(buf),
        }
    }
}

fn mount(system: System, root: &Path, pass_file: &Path, key_file: &Path, exe: &Path, window_ms: u64) -> Result<Mount> {
    let mnt = root.join(format!("{system:?}.mnt"));
    std::fs::create_dir_all(&mnt).with_context(|| format!("cannot create {}", mnt.display()))?;
    let store = root.join(format!("{system:?}.store"));
    let mut child = match system {
        System::Gocryptfs => {
            std::fs::create_dir_all(&store)?;
            let st = Command::new("gocryptfs")
                .args(["-init", "-q", "-passfile"])
                .arg(pass_file)
                .arg(&store)
                .stdout(Stdio::null())
                .status()
                .context("cannot run gocryptfs (Debian package gocryptfs)")?;
            if !st.success() {
                crate::bail!("gocryptfs -init failed ({st})");
            }
            Command::new("gocryptfs")
                .args(["-f", "-q", "-passfile"])
                .arg(pass_file)
                .arg(&store)
                .arg(&mnt)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .context("cannot run gocryptfs")?
        }
        System::Cryfs => {
            std::fs::create_dir_all(&store)?;
            let mut c = Command::new("cryfs")
                .arg("-f")
                .arg(&store)
                .arg(&mnt)
                .env("CRYFS_FRONTEND", "noninteractive")
                .env("CRYFS_NO_UPDATE_CHECK", "true")
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .context("cannot run cryfs (Debian package cryfs)")?;
            let pass = std::fs::read(pass_file).context("cannot read the passphrase file")?;
            if let Some(mut i) = c.stdin.take() {
                i.write_all(&pass).context("cannot give cryfs its passphrase")?;
                i.write_all(b"\n").context("cannot give cryfs its passphrase")?;
            }
            c
        }
        System::VaultFuse | System::VaultFuseExclusive => {
            let vault = store.with_extension("vault");
            let opts = CreateOptions::default();
            Vault::create(&vault, &Secret::from_key_file(key_file)?, &opts)?.close()?;
            serve_mount_child(exe, &vault, key_file, &mnt, window_ms, system == System::VaultFuseExclusive)?
        }
        _ => crate::bail!("{system:?} is not a mount"),
    };
    wait_mounted(&mnt, &mut child, system.label(), Duration::from_secs(180))?;
    Ok(Mount {
        label: system.label(),
        mountpoint: mnt,
        child,
        sqlvault: matches!(system, System::VaultFuse | System::VaultFuseExclusive),
    })
}

fn group(w: Workload, write: bool, large_mib: u64, files: u64) -> String {
    let what = match w {
        Workload::Large => format!("{large_mib} MiB file"),
        Workload::Tree => format!("{files} small files"),
        tool => return tool_group(tool, files),
    };
    format!("{what}: {}", if write { "write" } else { "read" })
}

fn tool_group(w: Workload, copy_files: u64) -> String {
    match w {
        Workload::Untar => "untar".into(),
        Workload::ListTree => "ls -lR (cold)".into(),
        Workload::RemoveTree => "rm -rf".into(),
        Workload::CopyTree => format!("cp -r {copy_files} small files"),
        other => format!("{other:?}"),
    }
}

/// The untar archive of `source` and a host directory of `n` small files to copy,
/// made once per run in `root`; the number of entries in the archive.
fn tool_inputs(root: &Path, source: &Path, n: u64) -> Result<(PathBuf, PathBuf, u64)> {
    let tarball = root.join("tree.tar");
    let (parent, name) = match (source.parent(), source.file_name()) {
        (Some(p), Some(n)) => (p, n),
        _ => crate::bail!("cannot archive {}: give a directory below /", source.display()),
    };
    let st = Command::new("tar")
        .arg("cf")
        .arg(&tarball)
        .arg("-C")
        .arg(parent)
        .arg(name)
        .status()
        .context("cannot run tar")?;
    if !st.success() {
        crate::bail!("tar cf of {} failed ({st})", source.display());
    }
    let listed = Command::new("tar").arg("tf").arg(&tarball).output().context("cannot run tar")?;
    let entries = listed.stdout.iter().filter(|b| **b == b'\n').count() as u64;
    let copy = root.join("copy-source");
    let mut gen = Stream::new(0x5EED);
    let mut buf = vec![0u8; 8 << 10];
    for i in 0..n {
        let d = copy.join(format!("d{:03}", i / FILES_PER_DIR));
        if i % FILES_PER_DIR == 0 {
            std::fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
        }
        let len = 1024 + (small_size(7, i) % (7 << 10));
        gen.fill(&mut buf[..len]);
        std::fs::write(d.join(format!("f{i:05}")), &buf[..len]).context("cannot write the copy source")?;
    }
    Ok((tarball, copy, entries))
}

/// Entry point of `sqlvault-bench peers`.
pub fn peers(a: &PeersArgs) -> Result<harness::ScenarioReport> {
    let run = Run::new("peers", &a.common)?;
    let (large, files, reps) = if a.common.quick { (32, 500, 1) } else { (a.large_mib, a.files, a.reps.max(1)) };
    let exe = std::env::current_exe().context("cannot find this program's path")?;
    let root = run.dir.clone();
    let pass_file = root.join("passphrase");
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&pass_file)?;
        let mut secret = [0u8; 24];
        Stream::new(std::process::id() as u64 ^ 0xC0FFEE).fill(&mut secret);
        let text = hex::encode(secret);
        f.write_all(text.as_bytes())?;
    }
    let key_file = root.join("vault.key");
    sqlvault::secrets::generate_key_file(&key_file)?;
    let mut notes = vec![format!(
        "sqlvault FUSE mounted with a commit window of {} ms (`--commit-window-ms`; 0 commits every operation before answering it).",
        a.commit_window_ms
    )];
    let can_drop = sys::drop_caches().is_ok();
    if !can_drop {
        notes.push("The page cache could not be dropped (not root): reads may come from memory.".into());
    }

    let mut systems = vec![System::Plain, System::Gocryptfs];
    if !a.common.quick {
        systems.push(System::Cryfs);
    }
    systems.extend([System::VaultFuse, System::VaultFuseExclusive, System::VaultLib, System::VaultLibExclusive]);
    if !a.systems.is_empty() {
        for name in &a.systems {
            if !systems.iter().any(|s| s.arg() == name) {
                crate::bail!("--systems: unknown system {name:?}");
            }
        }
        systems.retain(|s| *s == System::Gocryptfs || a.systems.iter().any(|n| n == s.arg()));
    }
    let mut mounts: Vec<Mount> = Vec::new();
    let mut targets_of = Vec::new();
    let pb = harness::progress("peers", (systems.len() * 4) as u64 * reps as u64 + systems.len() as u64);
    for &s in &systems {
        pb.set_message(format!("setting up {}", s.label()));
        let t = match s {
            System::Plain => {
                let d = root.join("plain");
                std::fs::create_dir_all(&d)?;
                Ok(Where::Dir(d))
            }
            System::VaultLib | System::VaultLibExclusive => {
                let exclusive = s == System::VaultLibExclusive;
                let path = root.join(if exclusive { "lib-exclusive.vault" } else { "lib.vault" });
                Vault::create(&path, &Secret::from_key_file(&key_file)?, &CreateOptions::default())?.close()?;
                Ok(Where::Vault { path, key_file: key_file.clone(), exclusive })
            }
            m => mount(m, &root, &pass_file, &key_file, &exe, a.commit_window_ms).map(|mnt| {
                let d = mnt.mountpoint.clone();
                mounts.push(mnt);
                Where::Dir(d)
            }),
        };
        match t {
            Ok(t) => targets_of.push((s, t)),
            Err(e) => {
                eprintln!("sqlvault-bench: peers: {} skipped: {e}", s.label());
                notes.push(format!("{} was not measured: {e}", s.label()));
            }
        }
        pb.inc(1);
    }

    let mut col = Collector::default();
    let mut seed = 100u64;
    for rep in 0..reps {
        for (s, t) in &targets_of {
            let server = mounts.iter().find(|m| m.label == s.label()).map(|m| m.pid());
            for w in [Workload::Large, Workload::Tree] {
                seed += 1;
                let mut checks = Vec::new();
                for write in [true, false] {
                    pb.set_message(format!("{} {}", s.label(), group(w, write, large, files)));
                    if !write && can_drop {
                        sys::drop_caches()?;
                    }
                    let spec = Spec {
                        target: t.clone(),
                        workload: w,
                        write,
                        sub: format!("r{rep}-{w:?}"),
                        large_mib: large,
                        files,
                        seed,
                        source: None,
                    };
                    let c0 = server.map(sys::proc_cpu_s).unwrap_or(0.0);
                    let out = harness::spawn_case("peers", &spec)?;
                    let c1 = server.map(sys::proc_cpu_s).unwrap_or(0.0);
                    let mut sample: Sample =
                        out.phases.get("phase").cloned().context("the driver reported no phase")?;
                    sample.cpu_s += c1 - c0;
                    let rss = out.peak_rss_kib + server.map(sys::proc_hwm_kib).unwrap_or(0);
                    col.push(&group(w, write, large, files), s.label(), Unit::MBps, &sample, rss);
                    checks.push(out.notes.get("checksum").cloned().unwrap_or_default());
                    pb.inc(1);
                }
                if checks[0] != checks[1] {
                    crate::bail!("{}: read back {} but wrote {}", s.label(), checks[1], checks[0]);
                }
            }
        }
    }
    let copy_files = if a.common.quick { 2000 } else { a.copy_files };
    let mut tool_note = None;
    if !a.no_tools {
        pb.set_message("preparing the tree-tool inputs");
        // Quick mode (CI, a debug build): a part of the tree is enough to run the code.
        let quick_part = a.tree_source.join("linux");
        let source = if a.common.quick && quick_part.is_dir() { &quick_part } else { &a.tree_source };
        let (tarball, copy_source, entries) = tool_inputs(&root, source, copy_files)?;
        tool_note = Some(format!(
            "Tree tools: `tar xf` of an archive of {} ({entries} entries), `ls -lR` of the result after \
             dropping the page cache, `rm -rf` of it, and `cp -r` of a host directory of {copy_files} files \
             of 1–8 KiB ({per} per directory); each followed by `sync(2)` except `ls`, and timed until the \
             file system's server has been idle for a second (the work it defers counts, in time and CPU). \
             Not run on cryfs (too \
             slow for one run) nor through the library (no such tools). Lower is better; ×baseline is the \
             ratio of times to gocryptfs's.",
            source.display(),
            per = FILES_PER_DIR,
        ));
        for rep in 0..reps {
            for (s, t) in &targets_of {
                if matches!(s, System::VaultLib | System::VaultLibExclusive | System::Cryfs) {
                    continue;
                }
                let server = mounts.iter().find(|m| m.label == s.label()).map(|m| m.pid());
                for w in [Workload::Untar, Workload::ListTree, Workload::RemoveTree, Workload::CopyTree] {
                    pb.set_message(format!("{} {}", s.label(), tool_group(w, copy_files)));
                    if w == Workload::ListTree && can_drop {
                        sys::drop_caches()?;
                    }
                    let (sub, source) = match w {
                        Workload::CopyTree => (format!("r{rep}-copy"), copy_source.clone()),
                        _ => (format!("r{rep}-untar"), tarball.clone()),
                    };
                    let spec = Spec {
                        target: t.clone(),
                        workload: w,
                        write: true,
                        sub,
                        large_mib: large,
                        files,
                        seed,
                        source: Some(source),
                    };
                    let c0 = server.map(sys::proc_cpu_s).unwrap_or(0.0);
                    let out = harness::spawn_case("peers", &spec)?;
                    let ended = std::time::Instant::now();
                    let mut sample: Sample =
                        out.phases.get("phase").cloned().context("the driver reported no phase")?;
                    // Every file system's server until it is idle: the whole of the work
                    // the tool caused, including what a server defers (sqlvault's last
                    // commit window, and the purge and wipe after an `rm`), as `tree` counts it.
                    let c1 = match server {
                        Some(pid) => {
                            let (idle_at, cpu) = crate::tree::until_idle(pid)?;
                            sample.seconds += idle_at.saturating_duration_since(ended).as_secs_f64();
                            cpu
                        }
                        None => 0.0,
                    };
                    sample.cpu_s += c1 - c0;
                    let rss = out.peak_rss_kib + server.map(sys::proc_hwm_kib).unwrap_or(0);
                    col.push(&tool_group(w, copy_files), s.label(), Unit::Ms, &sample, rss);
                }
            }
        }
    }
    pb.finish_and_clear();
    drop(mounts);

    let goc = System::Gocryptfs.label().to_string();
    let rows = col.rows(|_, sys| (sys != goc).then(|| goc.clone()));
    let mut targets = Vec::new();
    for (sys, want) in [
        (System::VaultFuse, 1.0),
        (System::VaultFuseExclusive, 1.0),
        (System::VaultLib, 1.5),
        (System::VaultLibExclusive, 1.5),
    ] {
        let mut parts = Vec::new();
        let mut worst = f64::INFINITY;
        for w in [Workload::Large, Workload::Tree] {
            for write in [true, false] {
                let g = group(w, write, large, files);
                let r = harness::value(&rows, &g, sys.label()) / harness::value(&rows, &g, &goc);
                worst = worst.min(r);
                parts.push(format!("{g} {}", report::ratio(r)));
            }
        }
        targets.push(Target::new(
            "peers",
            &format!("{} >= {want:.1}x gocryptfs on large-file write and read and on the small-file tree", sys.label()),
            parts.join(", "),
            (!a.common.quick && worst.is_finite()).then_some(worst >= want),
        ));
    }
    if !a.no_tools {
        let fuse = System::VaultFuse.label();
        let cpu_of = |g: &str, sys: &str| rows.iter().find(|r| r.group == g && r.system == sys).map(|r| r.cpu);
        let mut parts = Vec::new();
        let mut worst = 0.0f64;
        for w in [Workload::Untar, Workload::ListTree, Workload::RemoveTree, Workload::CopyTree] {
            let g = tool_group(w, copy_files);
            let time = harness::value(&rows, &g, fuse) / harness::value(&rows, &g, &goc);
            let cpu = match (cpu_of(&g, fuse), cpu_of(&g, &goc)) {
                (Some(a), Some(b)) if b > 0.0 => a / b,
                _ => f64::NAN,
            };
            if matches!(w, Workload::Untar | Workload::RemoveTree) {
                worst = worst.max(time);
            }
            parts.push(format!("{g} {} the time ({} the CPU)", report::ratio(time), report::ratio(cpu)));
        }
        targets.push(Target::new(
            "peers",
            "sqlvault FUSE <= 1.0x gocryptfs's time on untar and rm -rf",
            parts.join(", "),
            (!a.common.quick && worst.is_finite() && worst > 0.0).then_some(worst <= 1.0),
        ));
    }
    let charts = vec![ChartSpec {
        name: "peers".into(),
        title: "sequential write and read, cold reads".into(),
        groups: [Workload::Large, Workload::Tree]
            .iter()
            .flat_map(|&w| [true, false].map(|write| group(w, write, large, files)))
            .collect(),
        log_scale: false,
    }];
    let method = format!(
        "Method: the same driver for every system (a child process per phase): the large file is written \
         in 1 MiB writes of non-repeating data and `fsync`ed (library: `sync_all`); the tree is {files} files \
         of 4–64 KiB (uniform, {per} per directory), each created, written in one write and closed, then \
         `sync(2)` once (library: each file's `close` commits, then `Vault::sync`). The page cache is dropped \
         before each read phase; reads use 1 MiB reads and verify a checksum of everything written. gocryptfs \
         and cryfs run with their defaults, created by the suite (`gocryptfs -init`, cryfs non-interactive), \
         served in the foreground by a child process; the sqlvault mount is `sqlvault_fuse::mount` with its \
         defaults in a child process, the vault created with the library defaults and a key file; \
         \"exclusive\" opens it with `EngineConfig::exclusive` (a rollback journal instead of the WAL). CPU is \
         the driver's plus the mount server's (user+sys, `/proc/PID/stat`) per MB; kernel FUSE and writeback \
         threads are not counted. Peak RSS is the driver's plus the server's peak so far. {reps} \
         repetition(s); ×baseline is the ratio of medians to gocryptfs.{}",
        tool_note.map(|n| format!(" {n}")).unwrap_or_default(),
        per = FILES_PER_DIR,
    );
    Ok(run.report(HEADING, method, rows, targets, charts, notes))
}

/// `sqlvault-bench peers`.
pub const SCENARIO: Def<PeersArgs> = Def {
    name: "peers",
    about: "256 MiB file and 10,000 small files through a plain directory, gocryptfs, cryfs, a sqlvault FUSE mount and the sqlvault library; untar, ls -lR, rm -rf and cp -r through the mounts.",
    run: |a| harness::publish(&a.common, &peers(a)?),
    case,
    render: harness::render,
    args: PhantomData,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_files_are_4_to_64_kib() {
        let sizes: Vec<usize> = (0..2000).map(|i| small_size(7, i)).collect();
        assert!(sizes.iter().all(|s| (4096..=65536).contains(s) && s % 8 == 0));
        assert!(sizes.iter().any(|s| *s < 8192) && sizes.iter().any(|s| *s > 60000));
    }
}
