//! What the sweeps share: statistics, formatting, result files, and what they learn
//! from the operating system (copied from `crates/sqlvault-bench`, which no longer
//! carries these experiments).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Context, Result};

/// Median of the values (mean of the middle two for an even count); NaN if empty.
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Geometric mean of positive values; NaN if empty.
pub fn geomean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    (values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp()
}

pub fn min(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}

pub fn max(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

/// `4 KiB`, `64 KiB`, `1 MiB`.
pub fn size_label(bytes: u32) -> String {
    if bytes >= 1 << 20 && bytes & ((1 << 20) - 1) == 0 {
        format!("{} MiB", bytes >> 20)
    } else if bytes & 1023 == 0 {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} B")
    }
}

/// A throughput: no decimals from 100 up, one below.
pub fn rate(v: f64) -> String {
    if v.is_nan() {
        "–".into()
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// A ratio such as `0.42×`.
pub fn ratio(v: f64) -> String {
    if v.is_nan() {
        "–".into()
    } else {
        format!("{v:.2}×")
    }
}

/// Serializes `value` as pretty JSON to `path`, creating its directory.
pub fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(value).context("cannot serialize results")?;
    std::fs::write(path, text + "\n").with_context(|| format!("cannot write {}", path.display()))
}

/// CPU time and peak resident set of this process so far.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Usage {
    pub user_s: f64,
    pub sys_s: f64,
    /// `ru_maxrss`, in KiB.
    pub maxrss_kib: u64,
}

impl Usage {
    pub fn now() -> Result<Usage> {
        // SAFETY: getrusage fills the zeroed struct we own; RUSAGE_SELF is always valid.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
            return Err(std::io::Error::last_os_error()).context("getrusage(RUSAGE_SELF) failed");
        }
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        Ok(Usage { user_s: secs(ru.ru_utime), sys_s: secs(ru.ru_stime), maxrss_kib: ru.ru_maxrss.max(0) as u64 })
    }

    /// User and system CPU seconds spent since `earlier`.
    pub fn cpu_since(&self, earlier: &Usage) -> (f64, f64) {
        (self.user_s - earlier.user_s, self.sys_s - earlier.sys_s)
    }
}

/// The mount holding a directory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FsInfo {
    pub mount_point: String,
    pub fs_type: String,
    pub device: String,
}

impl FsInfo {
    /// True for filesystems that live in memory, where I/O figures mean nothing.
    pub fn in_memory(&self) -> bool {
        matches!(self.fs_type.as_str(), "tmpfs" | "ramfs" | "devtmpfs")
    }
}

/// The machine a benchmark ran on, as the reports name it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    pub cpu_model: String,
    pub logical_cpus: usize,
    /// The CPU reports the `hypervisor` flag (a virtual machine).
    pub virtual_machine: bool,
    pub mem_total_mib: u64,
    pub kernel: String,
    pub date_utc: String,
    /// `/proc/loadavg` when the benchmark started (the machine is shared).
    pub loadavg_at_start: String,
    /// `git describe` of the working tree, if there is one.
    pub git: Option<String>,
}

impl Machine {
    pub fn describe() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let field = |name: &str| {
            cpuinfo
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        };
        let logical_cpus = cpuinfo.lines().filter(|l| l.starts_with("processor")).count();
        let logical_cpus = if logical_cpus > 0 {
            logical_cpus
        } else {
            std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)
        };
        let virtual_machine = field("flags").is_some_and(|f| f.split(' ').any(|x| x == "hypervisor"));
        let mem_total_mib = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
            .map(|kib| kib / 1024)
            .unwrap_or(0);
        let read =
            |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_string()).unwrap_or_else(|_| "unknown".into());
        Machine {
            cpu_model: field("model name").unwrap_or_else(|| "unknown".into()),
            logical_cpus,
            virtual_machine,
            mem_total_mib,
            kernel: format!("{} {}", read("/proc/sys/kernel/ostype"), read("/proc/sys/kernel/osrelease")),
            date_utc: utc_now(),
            loadavg_at_start: loadavg(),
            git: git_describe(),
        }
    }

    /// One Markdown paragraph naming the machine.
    pub fn markdown(&self) -> String {
        format!(
            "Machine: {cpu}, {n} logical CPUs{vm}, {mem} MiB RAM; kernel {kernel}; run {date}; \
             load average at start {load}; source {git}.",
            cpu = self.cpu_model,
            n = self.logical_cpus,
            vm = if self.virtual_machine { " (virtual machine)" } else { "" },
            mem = self.mem_total_mib,
            kernel = self.kernel,
            date = self.date_utc,
            load = self.loadavg_at_start.split(' ').take(3).collect::<Vec<_>>().join(" "),
            git = self.git.as_deref().map(|g| format!("`{g}`")).unwrap_or_else(|| "unknown".into()),
        )
    }
}

/// Peak resident set of this process's address space (`VmHWM`), in KiB. Unlike
/// `ru_maxrss` it starts afresh at `exec`, so a child process reports only its own peak.
pub fn vm_hwm_kib() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status").context("cannot read /proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmHWM line in /proc/self/status")
}

/// Writes dirty pages back and drops the page cache, dentries and inodes, so the next
/// read comes from the disk. Needs root; the error says why it could not.
pub fn drop_caches() -> Result<()> {
    // SAFETY: sync() takes no arguments and cannot fail.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3").context("cannot write /proc/sys/vm/drop_caches")
}

/// Finds the mount holding `dir` in `/proc/self/mountinfo` (longest matching mount
/// point; the last of equal ones, since later mounts hide earlier).
pub fn fs_info(dir: &Path) -> Result<FsInfo> {
    let dir = dir.canonicalize().with_context(|| format!("cannot resolve {}", dir.display()))?;
    let info = std::fs::read_to_string("/proc/self/mountinfo").context("cannot read /proc/self/mountinfo")?;
    let mut best: Option<FsInfo> = None;
    for line in info.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(dash) = fields.iter().position(|f| *f == "-") else { continue };
        let (Some(mp), Some(fs_type), Some(device)) = (fields.get(4), fields.get(dash + 1), fields.get(dash + 2))
        else {
            continue;
        };
        let mp = mp.replace("\\040", " ");
        if !dir.starts_with(&mp) {
            continue;
        }
        if best.as_ref().is_none_or(|b| mp.len() >= b.mount_point.len()) {
            best = Some(FsInfo { mount_point: mp, fs_type: fs_type.to_string(), device: device.to_string() });
        }
    }
    best.with_context(|| format!("no mount found for {}", dir.display()))
}

/// `/proc/loadavg`, or "unknown".
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg").map(|s| s.trim().to_string()).unwrap_or_else(|_| "unknown".into())
}

/// The current time as `YYYY-MM-DD HH:MM UTC`.
pub fn utc_now() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M UTC").to_string()
}

/// This process's command line, quoted for a POSIX shell, with the program shown by
/// its file name.
pub fn command_line() -> String {
    std::env::args()
        .enumerate()
        .map(|(i, a)| {
            let a = if i == 0 {
                Path::new(&a).file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or(a)
            } else {
                a
            };
            if !a.is_empty() && a.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+".contains(&b)) {
                a
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn git_describe() -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=12"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string()).filter(|s| !s.is_empty())
}

/// Where results go.
#[derive(clap::Args, Debug, Clone)]
pub struct OutputArgs {
    /// Where JSON results go.
    #[arg(long, default_value = "bench-results")]
    pub results_dir: PathBuf,
}

/// Writes `report` to `json_path` and prints the Markdown section on stdout.
pub fn publish(json_path: &Path, report: &impl Serialize, heading: &str, md: &str) -> Result<()> {
    write_json(json_path, report)?;
    println!("{heading}\n\n{md}");
    eprintln!("wrote {}", json_path.display());
    Ok(())
}

/// The first lines of a section: the command that produced it and the machine.
pub fn preamble(command: &str, machine: &Machine) -> String {
    format!("Command: `{command}` (release build, `experiments/sweep`).\n\n{}", machine.markdown())
}
