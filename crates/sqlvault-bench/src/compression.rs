//! `compression` (issue 27): sqlvault with zstd and without compression, restic and borg
//! on the same data sets in the same run: a source tree (`/usr/include`), text (JSON,
//! logs, documents, Python), incompressible data (pseudo-random bytes) and two versions
//! of a large tar with a 56-byte line inserted at offset 4,096 of the second.
//!
//! Each tool imports each set into a fresh repository as a child process of its own
//! (`sqlvault put` of the release CLI beside this program, `restic backup`, `borg
//! create --compression zstd,3`): wall time, CPU (user + system, `wait4`) and peak RSS
//! (`VmHWM`, polled). Stored bytes are the repository on disk afterwards (the vault and its
//! WAL). For the large tar, the first version stays (a sqlvault snapshot, the other
//! tools' first archive) and the second is imported on top: what it adds is sqlvault's
//! stored chunk bytes (`info --json`) and the repository's growth for the others.
//!
//! restic and borg are Debian packages (`scripts/ensure-packages.sh` installs them); a
//! quick run without them measures sqlvault alone and says why.

use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::data::Stream;
use crate::error::{Context, Result};
use crate::report::{self, median, ratio};
use crate::scenario::{self, Common, Def, Section, Target};
use crate::sys::{self, Machine};

const SECTION: &str = "## compression (against restic and borg)";
const MIB: u64 = 1 << 20;
const PASSWORD: &str = "sqlvault-bench compression";
/// Where the second version of the large file differs: this line (56 bytes), inserted at 4 KiB.
const INSERTED: &[u8] = b"an inserted line, 57 bytes long, near the start of it.\n\n";
const INSERT_AT: usize = 4096;
const TOOLS: [&str; 4] = ["sqlvault zstd", "sqlvault none", "restic", "borg zstd,3"];

/// Arguments of `sqlvault-bench compression`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompressionArgs {
    /// The source tree to import.
    #[arg(long, default_value = "/usr/include")]
    pub source_tree: PathBuf,
    /// MiB of text files (JSON, logs, documents, Python) gathered from /usr/share,
    /// /var/log and /usr/lib/python3*.
    #[arg(long, default_value_t = 64)]
    pub text_mib: u64,
    /// MiB of incompressible (pseudo-random) data, in 4 files.
    #[arg(long, default_value_t = 64)]
    pub random_mib: u64,
    /// The directory whose tar (sorted, fixed owners and times) is the large file.
    #[arg(long, default_value = "/usr/share/doc")]
    pub large_source: PathBuf,
    /// The `sqlvault` program [default: `sqlvault` beside this program].
    #[arg(long)]
    pub sqlvault: Option<PathBuf>,
    /// Imports of each set by each tool, in rounds (the median time and CPU are
    /// reported; stored bytes do not vary).
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    #[command(flatten)]
    pub common: Common,
}

/// `sqlvault-bench compression`.
pub const SCENARIO: Def<CompressionArgs> = Def {
    name: "compression",
    about: "Stored bytes, import time, CPU and peak RSS of sqlvault (zstd and none), restic and borg on a \
            source tree, text, random data and two versions of a large tar with an insertion near the start.",
    run,
    case: scenario::no_cases,
    render,
    args: PhantomData,
};

/// One import of one data set by one tool.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Import {
    set: String,
    tool: String,
    data_bytes: u64,
    stored_bytes: u64,
    /// sqlvault only: its chunks' bytes as stored (`info --json`), without the pages
    /// and metadata around them.
    #[serde(default)]
    chunk_bytes: Option<u64>,
    wall_s: f64,
    cpu_s: f64,
    peak_rss_kib: u64,
    /// Large set only: what the second version added.
    second_added_bytes: Option<u64>,
}

impl Import {
    fn mib(&self) -> f64 {
        self.data_bytes as f64 / MIB as f64
    }
    fn cpu_ms_per_mib(&self) -> f64 {
        self.cpu_s * 1e3 / self.mib()
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct CompressionReport {
    benchmark: String,
    quick: bool,
    command: String,
    machine: Machine,
    /// (set, what it is).
    sets: Vec<(String, String)>,
    /// Imports per set and tool (medians reported).
    #[serde(default)]
    reps: u32,
    imports: Vec<Import>,
    skipped: Vec<String>,
}

/// Runs `cmd` to its end; returns (wall s, CPU s, peak RSS KiB). CPU comes from
/// `wait4`; the peak is the largest `VmHWM` of the child polled every 5 ms (`wait4`'s
/// `ru_maxrss` would count this process's resident set at the fork, which `exec`
/// carries into the child's). Its standard error goes to a file (a pipe nobody reads
/// could fill and stall it).
fn measured(cmd: &mut Command) -> Result<(f64, f64, u64)> {
    let mut err = tempfile::tempfile().context("cannot create a file for standard error")?;
    let t0 = Instant::now();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err.try_clone().context("cannot share the standard error file")?)
        .spawn()
        .with_context(|| format!("cannot start {cmd:?}"))?;
    let mut status = 0;
    // SAFETY: wait4 on our own child's pid fills the zeroed rusage we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let mut peak = 0;
    let pid = loop {
        peak = peak.max(sys::proc_hwm_kib(child.id()));
        let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, libc::WNOHANG, &mut ru) };
        if pid != 0 {
            break pid;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let wall = t0.elapsed().as_secs_f64();
    if pid < 0 {
        return Err(std::io::Error::last_os_error()).context("wait4 failed");
    }
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        use std::io::{Read, Seek};
        let mut text = String::new();
        let _ = err.seek(std::io::SeekFrom::Start(0)).map(|_| err.read_to_string(&mut text));
        crate::bail!("{cmd:?} failed (wait status {status}): {}", text.trim());
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok((wall, secs(ru.ru_utime) + secs(ru.ru_stime), peak))
}

/// Runs `cmd` unmeasured; its standard output.
fn quiet(cmd: &mut Command) -> Result<Vec<u8>> {
    let o = cmd.stdin(Stdio::null()).output().with_context(|| format!("cannot run {cmd:?}"))?;
    if !o.status.success() {
        crate::bail!("{cmd:?} failed ({}): {}", o.status, String::from_utf8_lossy(&o.stderr).trim());
    }
    Ok(o.stdout)
}

/// Bytes of the regular files under `p` (a file or a tree).
fn bytes(p: &Path) -> u64 {
    let Ok(m) = std::fs::symlink_metadata(p) else { return 0 };
    if m.is_file() {
        return m.len();
    }
    if !m.is_dir() {
        return 0;
    }
    std::fs::read_dir(p).map(|rd| rd.flatten().map(|e| bytes(&e.path())).sum()).unwrap_or(0)
}

/// Reads every file under `p` once (into the page cache).
fn warm(p: &Path) -> Result<()> {
    let m = std::fs::symlink_metadata(p).with_context(|| format!("cannot stat {}", p.display()))?;
    if m.is_file() {
        std::io::copy(&mut std::fs::File::open(p)?, &mut std::io::sink())?;
    } else if m.is_dir() {
        for e in std::fs::read_dir(p).with_context(|| format!("cannot list {}", p.display()))?.flatten() {
            warm(&e.path())?;
        }
    }
    Ok(())
}

/// Copies text files (by extension) from the system's shared directories into `dest`,
/// up to `cap` bytes, in a stable order.
fn gather_text(dest: &Path, cap: u64) -> Result<u64> {
    const EXT: [&str; 8] = ["json", "log", "txt", "md", "html", "py", "xml", "csv"];
    let mut found = Vec::new();
    let mut stack: Vec<PathBuf> = ["/usr/share", "/var/log"].iter().map(PathBuf::from).collect();
    if let Ok(rd) = std::fs::read_dir("/usr/lib") {
        stack.extend(rd.flatten().filter(|e| e.file_name().to_string_lossy().starts_with("python3")).map(|e| e.path()));
    }
    stack.sort_by(|a, b| b.cmp(a));
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        let mut entries: Vec<_> = rd.flatten().collect();
        entries.sort_by_key(|e| std::cmp::Reverse(e.file_name()));
        for e in entries {
            let Ok(t) = e.file_type() else { continue };
            let p = e.path();
            if t.is_dir() {
                stack.push(p);
            } else if t.is_file() && p.extension().and_then(|x| x.to_str()).is_some_and(|x| EXT.contains(&x)) {
                found.push(p);
            }
        }
    }
    let mut total = 0;
    for (i, f) in found.iter().enumerate() {
        let Ok(data) = std::fs::read(f) else { continue };
        if data.len() < 1024 {
            continue;
        }
        if total + data.len() as u64 > cap {
            break;
        }
        let name = f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let d = dest.join(format!("d{:03}", i / 100));
        std::fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
        std::fs::write(d.join(format!("{i:05}-{name}")), &data).context("cannot write a text file")?;
        total += data.len() as u64;
    }
    if total == 0 {
        crate::bail!("no text files found under /usr/share, /var/log, /usr/lib/python3*");
    }
    Ok(total)
}

/// The data sets, built once in `work`: (name, what it is, directory to import).
fn data_sets(a: &CompressionArgs, work: &Path) -> Result<Vec<(String, String, PathBuf)>> {
    let quick = a.common.quick;
    let mut sets = Vec::new();
    let tree =
        if quick && a.source_tree.join("linux").is_dir() { a.source_tree.join("linux") } else { a.source_tree.clone() };
    sets.push(("source".to_string(), format!("the source tree {}", tree.display()), tree));
    let text = work.join("text");
    let got = gather_text(&text, if quick { 2 * MIB } else { a.text_mib * MIB })?;
    sets.push((
        "text".into(),
        format!("{:.1} MiB of JSON, logs, documents and Python from the system", got as f64 / MIB as f64),
        text,
    ));
    let random = work.join("random");
    std::fs::create_dir_all(&random).context("cannot create the random set")?;
    let each = if quick { MIB / 2 } else { a.random_mib * MIB / 4 };
    for i in 0..4u64 {
        let mut buf = vec![0u8; each as usize];
        Stream::new(0xC0DE + i).fill(&mut buf);
        std::fs::write(random.join(format!("r{i}.bin")), &buf).context("cannot write the random set")?;
    }
    sets.push(("random".into(), format!("4 files of {} MiB of pseudo-random bytes", each as f64 / MIB as f64), random));
    // The large file: a tar of a documentation tree (a smaller one in quick mode).
    let large_src = if quick { a.source_tree.join("linux") } else { a.large_source.clone() };
    let (parent, name) = match (large_src.parent(), large_src.file_name()) {
        (Some(p), Some(n)) => (p, n),
        _ => crate::bail!("cannot archive {}", large_src.display()),
    };
    let v1 = work.join("v1");
    let v2 = work.join("v2");
    std::fs::create_dir_all(&v1).context("cannot create v1")?;
    std::fs::create_dir_all(&v2).context("cannot create v2")?;
    let tar = v1.join("big.tar");
    quiet(
        Command::new("tar")
            .args(["--sort=name", "--mtime=@0", "--owner=0", "--group=0", "-cf"])
            .arg(&tar)
            .arg("-C")
            .arg(parent)
            .arg(name),
    )?;
    let mut data = std::fs::read(&tar).context("cannot read the tar")?;
    if data.len() <= INSERT_AT {
        crate::bail!("the tar of {} is too small", large_src.display());
    }
    data.splice(INSERT_AT..INSERT_AT, INSERTED.iter().copied());
    std::fs::write(v2.join("big.tar"), &data).context("cannot write the second version")?;
    sets.push((
        "large".into(),
        format!(
            "a tar of {} ({:.1} MiB), then a second version with {} bytes inserted at offset {INSERT_AT}",
            large_src.display(),
            bytes(&tar) as f64 / MIB as f64,
            INSERTED.len()
        ),
        v1,
    ));
    Ok(sets)
}

/// Whether `program ARG` runs (`restic version`, `borg --version`).
fn present(program: &str, arg: &str) -> bool {
    Command::new(program).arg(arg).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// One tool importing one set into a fresh repository under `work`.
fn import(tool: &str, sv: &Path, key: &Path, work: &Path, set: &str, src: &Path) -> Result<Import> {
    let repo = work.join("repo");
    let vault = work.join("repo.vault");
    // Nothing is deleted while imports are measured: on a file system mounted with
    // `discard`, the syncs after a deletion wait for the device to trim the freed
    // blocks (an import right after one took 1.5x as long). The earlier import's
    // repository moves aside and goes with the scratch directory at the end.
    let trash = work.join("trash");
    std::fs::create_dir_all(&trash).with_context(|| format!("cannot create {}", trash.display()))?;
    let aside = trash.join(std::fs::read_dir(&trash).map(|d| d.count()).unwrap_or(0).to_string());
    std::fs::create_dir_all(&aside).with_context(|| format!("cannot create {}", aside.display()))?;
    let vault_files = ["", "-wal", "-shm"].map(|suffix| PathBuf::from(format!("{}{suffix}", vault.display())));
    for p in std::iter::once(&repo).chain(&vault_files) {
        if p.exists() {
            let to = aside.join(p.file_name().context("a repository path has a name")?);
            std::fs::rename(p, &to).with_context(|| format!("cannot move {} aside", p.display()))?;
        }
    }
    // What earlier imports left dirty (a borg repository) is written out first:
    // otherwise this import's syncs would write it back, in its time and system CPU.
    // SAFETY: sync() takes no arguments and cannot fail.
    unsafe { libc::sync() };
    let second = work.join("v2");
    let large = set == "large";
    let borg = |c: &mut Command| {
        c.env("BORG_PASSPHRASE", PASSWORD)
            .env("BORG_BASE_DIR", work.join("borg-home"))
            .env("BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK", "yes")
            .env("BORG_RELOCATED_REPO_ACCESS_IS_OK", "yes");
    };
    let mut chunk_bytes = None;
    let (m, stored, added) = match tool {
        "sqlvault zstd" | "sqlvault none" => {
            let codec = if tool.ends_with("zstd") { "zstd" } else { "none" };
            let cli = |args: &[&str]| {
                let mut c = Command::new(sv);
                c.arg("--key-file").arg(key).args(args);
                c
            };
            let v = vault.to_str().context("scratch path is not UTF-8")?;
            quiet(&mut cli(&["init", v, "--compression", codec]))?;
            let s = src.to_str().context("source path is not UTF-8")?;
            let m = measured(&mut cli(&["put", v, s, "/d"]))?;
            let stored = bytes(&vault) + bytes(Path::new(&format!("{v}-wal")));
            let stored_bytes = || -> Result<u64> {
                let out = quiet(&mut cli(&["info", "--json", v]))?;
                let j: serde_json::Value = serde_json::from_slice(&out).context("unreadable info --json")?;
                j["stored_bytes"].as_u64().context("info --json has no stored_bytes")
            };
            let chunks = stored_bytes()?;
            chunk_bytes = Some(chunks);
            let mut added = None;
            if large {
                quiet(&mut cli(&["snapshot", v, "v1"]))?;
                quiet(&mut cli(&["put", v, second.to_str().context("not UTF-8")?, "/d"]))?;
                added = Some(stored_bytes()?.saturating_sub(chunks));
            }
            (m, stored, added)
        }
        "restic" => {
            let r = |c: &mut Command| {
                c.env("RESTIC_PASSWORD", PASSWORD).arg("-r").arg(&repo);
            };
            let mut c = Command::new("restic");
            r(&mut c);
            quiet(c.arg("init"))?;
            let mut c = Command::new("restic");
            r(&mut c);
            let m = measured(c.args(["backup", "--no-cache"]).arg(src))?;
            let stored = bytes(&repo);
            let mut added = None;
            if large {
                let mut c = Command::new("restic");
                r(&mut c);
                quiet(c.args(["backup", "--no-cache"]).arg(&second))?;
                added = Some(bytes(&repo).saturating_sub(stored));
            }
            (m, stored, added)
        }
        "borg zstd,3" => {
            let mut c = Command::new("borg");
            borg(&mut c);
            quiet(c.args(["init", "-e", "repokey"]).arg(&repo))?;
            let mut c = Command::new("borg");
            borg(&mut c);
            let m =
                measured(c.args(["create", "--compression", "zstd,3"]).arg(format!("{}::a", repo.display())).arg(src))?;
            let stored = bytes(&repo);
            let mut added = None;
            if large {
                let mut c = Command::new("borg");
                borg(&mut c);
                quiet(
                    c.args(["create", "--compression", "zstd,3"]).arg(format!("{}::b", repo.display())).arg(&second),
                )?;
                added = Some(bytes(&repo).saturating_sub(stored));
            }
            (m, stored, added)
        }
        other => crate::bail!("unknown tool {other}"),
    };
    let i = Import {
        set: set.into(),
        tool: tool.into(),
        data_bytes: bytes(src),
        stored_bytes: stored,
        chunk_bytes,
        wall_s: m.0,
        cpu_s: m.1,
        peak_rss_kib: m.2,
        second_added_bytes: added,
    };
    eprintln!(
        "compression: {set} {tool}: {:.1} MiB stored of {:.1} ({:.3}), {:.2} s, {:.1} CPU ms/MiB, {} MiB RSS{}",
        i.stored_bytes as f64 / MIB as f64,
        i.mib(),
        i.stored_bytes as f64 / i.data_bytes.max(1) as f64,
        i.wall_s,
        i.cpu_ms_per_mib(),
        i.peak_rss_kib / 1024,
        added.map(|b| format!(", second version added {:.2} MiB", b as f64 / MIB as f64)).unwrap_or_default()
    );
    Ok(i)
}

fn run(a: &CompressionArgs) -> Result<Vec<Target>> {
    let sv = match &a.sqlvault {
        Some(p) => p.clone(),
        None => std::env::current_exe().context("cannot find this program's path")?.with_file_name("sqlvault"),
    };
    if !sv.is_file() {
        crate::bail!(
            "{} not found: build it (`cargo build --release -p sqlvault-cli`) or give --sqlvault",
            sv.display()
        );
    }
    let base = a.common.scratch()?;
    let work = tempfile::Builder::new().prefix("compression-").tempdir_in(&base).context("temporary directory")?;
    let mut tools: Vec<&str> = TOOLS.to_vec();
    let mut skipped = Vec::new();
    for (program, arg, tool, package) in
        [("restic", "version", "restic", "restic"), ("borg", "--version", "borg zstd,3", "borgbackup")]
    {
        if !present(program, arg) {
            if !a.common.quick {
                crate::bail!("{program} is not installed (Debian package {package}; scripts/ensure-packages.sh)");
            }
            let why = format!("{tool}: `{program}` is not installed (Debian package {package})");
            eprintln!("compression: skipped {why}");
            skipped.push(why);
            tools.retain(|t| *t != tool);
        }
    }
    let key = work.path().join("key");
    quiet(Command::new(&sv).arg("keygen").arg(&key))?;
    let sets = data_sets(a, work.path())?;
    let mut imports = Vec::new();
    let reps = if a.common.quick { 1 } else { a.reps.max(1) };
    for (set, _, src) in &sets {
        // Every tool reads the set from the page cache, not only those after the first.
        warm(src)?;
        let mut runs: Vec<Vec<Import>> = vec![Vec::new(); tools.len()];
        for _ in 0..reps {
            for (i, tool) in tools.iter().enumerate() {
                runs[i].push(import(tool, &sv, &key, work.path(), set, src)?);
            }
        }
        for r in runs {
            let med = |f: fn(&Import) -> f64| median(&r.iter().map(f).collect::<Vec<_>>());
            let peak = r.iter().map(|i| i.peak_rss_kib).max().unwrap_or(0);
            imports.push(Import {
                wall_s: med(|i| i.wall_s),
                cpu_s: med(|i| i.cpu_s),
                peak_rss_kib: peak,
                ..r[0].clone()
            });
        }
    }
    let report = CompressionReport {
        benchmark: "compression".into(),
        quick: a.common.quick,
        command: sys::command_line(),
        machine: Machine::describe(),
        sets: sets.into_iter().map(|(n, d, _)| (n, d)).collect(),
        reps,
        imports,
        skipped,
    };
    let section = section(report);
    a.common.publish("compression", &section.1, &section.0)?;
    Ok(section.0.targets)
}

fn find<'a>(r: &'a CompressionReport, set: &str, tool: &str) -> Option<&'a Import> {
    r.imports.iter().find(|i| i.set == set && i.tool == tool)
}

/// Issue 27's targets, from one run.
fn targets(r: &CompressionReport) -> Vec<Target> {
    let judged = |ok: bool| (!r.quick).then_some(ok);
    let t = |target: &str, measured: String, met: Option<bool>| Target::new("compression", target, measured, met);
    let mut out = Vec::new();
    for set in ["source", "text", "large"] {
        let Some(sv) = find(r, set, "sqlvault zstd") else { continue };
        let mut parts = Vec::new();
        let mut worst = 0.0f64;
        for peer in ["restic", "borg zstd,3"] {
            if let Some(p) = find(r, set, peer) {
                let x = sv.stored_bytes as f64 / p.stored_bytes.max(1) as f64;
                worst = worst.max(x);
                parts.push(format!("{} of {peer}'s", ratio(x)));
            }
        }
        if !parts.is_empty() {
            out.push(t(
                &format!("{set}: stored size <= 1.05x restic's and borg's"),
                format!("{:.1} MiB: {}", sv.stored_bytes as f64 / MIB as f64, parts.join(", ")),
                judged(worst <= 1.05),
            ));
        }
    }
    if let (Some(z), Some(n)) = (find(r, "random", "sqlvault zstd"), find(r, "random", "sqlvault none")) {
        let chunks = z.chunk_bytes.unwrap_or(z.stored_bytes) as f64 / z.data_bytes.max(1) as f64;
        let file = z.stored_bytes as f64 / z.data_bytes.max(1) as f64;
        let none = z.stored_bytes as f64 / n.stored_bytes.max(1) as f64;
        out.push(t(
            "incompressible data: stored within 2% of its size",
            format!(
                "chunks {chunks:.3} of the data; vault file {file:.3} of the data (pages and metadata), {} of the \
                 vault without compression",
                ratio(none)
            ),
            judged(chunks <= 1.02),
        ));
        let cpu = z.cpu_s / n.cpu_s;
        out.push(t(
            "incompressible data: import CPU within 5% of no compression",
            format!("{:.1} vs {:.1} CPU ms/MiB: {}", z.cpu_ms_per_mib(), n.cpu_ms_per_mib(), ratio(cpu)),
            judged(cpu <= 1.05),
        ));
    }
    if let (Some(z), Some(n)) = (find(r, "large", "sqlvault zstd"), find(r, "large", "sqlvault none")) {
        out.push(t(
            "a large compressible import is faster with compression than without",
            format!("{:.2} s vs {:.2} s: {} the time", z.wall_s, n.wall_s, ratio(z.wall_s / n.wall_s)),
            judged(z.wall_s < n.wall_s),
        ));
        if let Some(added) = z.second_added_bytes {
            let limit = 2 * u64::from(sqlvault::DEFAULT_CHUNK_SIZE);
            let peers: Vec<String> = ["restic", "borg zstd,3"]
                .iter()
                .filter_map(|p| {
                    find(r, "large", p)?.second_added_bytes.map(|b| format!("{p} {:.2} MiB", b as f64 / MIB as f64))
                })
                .collect();
            out.push(t(
                "the second version (an insertion near the start) stores at most 2 new chunks' worth of bytes",
                format!(
                    "{:.2} MiB (limit {} KiB){}",
                    added as f64 / MIB as f64,
                    limit / 1024,
                    if peers.is_empty() { String::new() } else { format!("; {}", peers.join(", ")) }
                ),
                judged(added <= limit),
            ));
        }
    }
    out
}

fn markdown(r: &CompressionReport) -> String {
    let mut s = report::preamble(&r.command, &r.machine);
    s.push_str(&format!(
        "\n\nEach tool imports each data set into a fresh repository, as a child process: wall and user + system \
         CPU (`wait4`), peak RSS (`VmHWM` polled every 5 ms). `sqlvault put` into a vault made with `init \
         --compression zstd` or `none` and a key file; `restic backup --no-cache` (its default compression, auto); `borg create \
         --compression zstd,3` (repokey). Stored: the repository's bytes on disk after the import (the vault \
         and its WAL). The large tar's second version is imported after the first (kept as a sqlvault snapshot, \
         as the others' first archive): added is sqlvault's stored chunk bytes (`info --json`), the \
         repository's growth for the others. restic and borg derive a key from the password at each run; \
         sqlvault's key file needs none. Each set is read once before its imports, so every tool reads it from the page cache, and `sync(2)` \
         runs before each import, so none writes back what the one before left dirty; no repository is deleted \
         until all imports are done (deleted blocks are trimmed by the next syncs). Time and CPU are \
         medians of {} imports per set and tool, in rounds; peak RSS the largest.\n\nData sets:\n\n",
        r.reps.max(1)
    ));
    for (n, d) in &r.sets {
        s.push_str(&format!("- {n}: {d}\n"));
    }
    s.push_str(
        "\n| set | MiB | tool | stored MiB | stored / data | vs sqlvault zstd | chunks stored / data | import s | CPU ms/MiB | peak RSS MiB | second version added MiB |\n\
         |---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|\n",
    );
    for i in &r.imports {
        let base = find(r, &i.set, "sqlvault zstd").map(|z| i.stored_bytes as f64 / z.stored_bytes.max(1) as f64);
        s.push_str(&format!(
            "| {} | {:.1} | {} | {:.1} | {:.3} | {} | {} | {:.2} | {:.1} | {:.0} | {} |\n",
            i.set,
            i.mib(),
            i.tool,
            i.stored_bytes as f64 / MIB as f64,
            i.stored_bytes as f64 / i.data_bytes.max(1) as f64,
            base.map(ratio).unwrap_or_else(|| "–".into()),
            i.chunk_bytes
                .map(|c| format!("{:.3}", c as f64 / i.data_bytes.max(1) as f64))
                .unwrap_or_else(|| "–".into()),
            i.wall_s,
            i.cpu_ms_per_mib(),
            i.peak_rss_kib as f64 / 1024.0,
            i.second_added_bytes.map(|b| format!("{:.2}", b as f64 / MIB as f64)).unwrap_or_else(|| "–".into()),
        ));
    }
    for why in &r.skipped {
        s.push_str(&format!("\n- skipped: {why}\n"));
    }
    s
}

/// The section of a run (and the run, for its JSON).
fn section(r: CompressionReport) -> (Section, CompressionReport) {
    let s = Section {
        heading: SECTION.into(),
        body: markdown(&r),
        targets: targets(&r),
        machine: r.machine.clone(),
        charts: Vec::new(),
    };
    (s, r)
}

fn render(json: &str) -> Result<Section> {
    Ok(section(scenario::parse(json)?).0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn imp(set: &str, tool: &str, data: u64, stored: u64, wall: f64, cpu: f64, added: Option<u64>) -> Import {
        Import {
            set: set.into(),
            tool: tool.into(),
            data_bytes: data,
            stored_bytes: stored,
            chunk_bytes: None,
            wall_s: wall,
            cpu_s: cpu,
            peak_rss_kib: 1024,
            second_added_bytes: added,
        }
    }

    #[test]
    fn targets_compare_sqlvault_with_the_peers_and_with_itself() {
        let r = CompressionReport {
            benchmark: "compression".into(),
            quick: false,
            command: String::new(),
            machine: Machine::describe(),
            sets: vec![],
            reps: 1,
            imports: vec![
                imp("source", "sqlvault zstd", 100, 20, 1.0, 1.0, None),
                imp("source", "restic", 100, 19, 1.0, 1.0, None),
                imp("source", "borg zstd,3", 100, 18, 1.0, 1.0, None),
                imp("random", "sqlvault zstd", 100, 101, 1.0, 1.04, None),
                imp("random", "sqlvault none", 100, 101, 1.0, 1.0, None),
                imp("large", "sqlvault zstd", 100, 50, 1.0, 1.0, Some(1 << 20)),
                imp("large", "sqlvault none", 100, 100, 2.0, 1.0, Some(1 << 20)),
            ],
            skipped: vec![],
        };
        let t = targets(&r);
        let met = |prefix: &str| t.iter().find(|x| x.target.starts_with(prefix)).and_then(|x| x.met);
        assert_eq!(met("source: stored size"), Some(false), "20 > 1.05 x 18");
        assert_eq!(met("incompressible data: stored"), Some(true));
        assert_eq!(met("incompressible data: import CPU"), Some(true));
        assert_eq!(met("a large compressible import"), Some(true));
        assert_eq!(met("the second version"), Some(false), "1 MiB > 128 KiB");
        assert!(markdown(&r).contains("| source | 0.0 | borg zstd,3 | 0.0 | 0.180 | 0.90× | – |"));
    }
}
