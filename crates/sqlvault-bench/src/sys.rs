//! What the benchmarks learn from the operating system: CPU time and peak memory of
//! this process, its children and other processes (`getrusage`, `/proc/PID/stat`,
//! `/proc/PID/status`), dropping the page cache, the
//! filesystem under a directory, and a description of the machine for the reports.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Context, Result};

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

/// Starts `VmHWM` afresh at the current resident set (`/proc/self/clear_refs`, value 5),
/// so the next [`vm_hwm_kib`] is the peak of what ran since.
pub fn reset_peak_rss() -> Result<()> {
    std::fs::write("/proc/self/clear_refs", "5").context("cannot write /proc/self/clear_refs")
}

/// Starts process `pid`'s `VmHWM` afresh, as [`reset_peak_rss`] does for this one
/// (needs the right to write its `/proc/PID/clear_refs`: the same user, or root).
pub fn reset_peak_rss_of(pid: u32) -> Result<()> {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5")
        .with_context(|| format!("cannot write /proc/{pid}/clear_refs"))
}

/// Peak resident set (`VmHWM`) of process `pid` in KiB; 0 if it cannot be read.
pub fn proc_hwm_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// CPU seconds (user + system) process `pid` has used so far, from `/proc/PID/stat`;
/// 0 if it cannot be read.
pub fn proc_cpu_s(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0.0 };
    let Some(after) = stat.rfind(')').map(|i| &stat[i + 2..]) else { return 0.0 };
    let f: Vec<&str> = after.split(' ').collect();
    // Fields 14 and 15 of the line (utime, stime) are 11 and 12 after the state field.
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf with a valid name.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (ticks(11) + ticks(12)) / hz
}

/// CPU seconds (user + system) of this process's waited-for children so far.
pub fn children_cpu_s() -> f64 {
    // SAFETY: getrusage fills the zeroed struct we own; RUSAGE_CHILDREN is always valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return 0.0;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(ru.ru_utime) + secs(ru.ru_stime)
}

/// Writes dirty pages back and drops the page cache, dentries and inodes, so the next
/// read comes from the disk. Needs root; the error says why it could not.
pub fn drop_caches() -> Result<()> {
    // SAFETY: sync() takes no arguments and cannot fail.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3").context("cannot write /proc/sys/vm/drop_caches")
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

/// `/proc/loadavg`, or "unknown".
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg").map(|s| s.trim().to_string()).unwrap_or_else(|_| "unknown".into())
}

fn git_describe() -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=12"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string()).filter(|s| !s.is_empty())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_is_plausible() {
        let d = utc_now();
        assert!(d.starts_with("20") && d.ends_with(" UTC"), "{d}");
    }
}
