//! sqlvault-exerciser: random operations on one file, checked byte for byte.
//!
//! Writes at random offsets and lengths (past the end too, leaving holes), reads,
//! truncates up and down, fsyncs, closes and reopens (sometimes with `O_TRUNC`),
//! renames the open file, checks the size with `fstat` and `stat`, preallocates
//! (`fallocate` mode 0 and `KEEP_SIZE`), punches holes and zeroes ranges
//! (`PUNCH_HOLE`, `ZERO_RANGE`), and copies ranges of the file onto itself with
//! `copy_file_range` — all against an in-memory model of what the file must contain.
//! A file system that answers `EOPNOTSUPP` to an `fallocate` mode or to
//! `copy_file_range` has that operation switched off for the rest of the run. Every byte read is compared;
//! on the first difference (or any I/O error) it prints the last operations and
//! exits with status 1. The same seed replays the same operations.
//!
//! Written for sqlvault's FUSE mount, but it only uses the standard file API and
//! works on any directory. Several instances with different seeds can share one
//! directory (article 001 ran three on one mount for 24 hours):
//!
//! ```text
//! sqlvault-exerciser --dir /mnt/private --seed 1 --ops 20000          # CI size
//! sqlvault-exerciser --dir /mnt/private --seed 2 --soak               # until Ctrl-C
//! sqlvault-exerciser --dir /mnt/private --seed 3 --soak --duration 86400
//! ```

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{self, ErrorKind};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;

/// Random file operations checked against an in-memory model.
#[derive(Parser, Debug)]
#[command(name = "sqlvault-exerciser", version)]
struct Args {
    /// Directory to work in (the file is created there).
    #[arg(long)]
    dir: PathBuf,
    /// Seed of the operation sequence; the same seed replays the same run.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Number of operations.
    #[arg(long, default_value_t = 10_000)]
    ops: u64,
    /// Soak mode: run until --duration has passed or the process is interrupted
    /// (--ops is ignored); prints progress every --progress operations (default
    /// 100,000 in this mode).
    #[arg(long)]
    soak: bool,
    /// With --soak: stop after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    duration: Option<u64>,
    /// Base name of the file (default: exerciser-SEED).
    #[arg(long)]
    name: Option<String>,
    /// Largest size the file grows to, in bytes.
    #[arg(long, default_value_t = 512 * 1024)]
    max_size: u64,
    /// Largest single read or write, in bytes.
    #[arg(long, default_value_t = 128 * 1024)]
    max_io: u64,
    /// Operations kept in the log printed on failure.
    #[arg(long, default_value_t = 64)]
    log: usize,
    /// Print a progress line every this many operations (0: never).
    #[arg(long, default_value_t = 0)]
    progress: u64,
    /// Keep the file at the end instead of removing it.
    #[arg(long)]
    keep: bool,
    /// Self-test: after this many operations, flip one byte of the file behind the
    /// model's back (through a second descriptor) and verify; the run must fail.
    #[arg(long, hide = true)]
    corrupt_at: Option<u64>,
}

/// SplitMix64: small, fast, and the same everywhere, so a seed names a run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 if `n` is 0).
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Write,
    Read,
    Truncate,
    Fsync,
    Reopen,
    Rename,
    Stat,
    VerifyAll,
    Fallocate,
    PunchHole,
    CopyRange,
}

/// Weights out of 100.
const OPS: [(Op, u64); 11] = [
    (Op::Write, 29),
    (Op::Read, 28),
    (Op::Truncate, 7),
    (Op::Fsync, 4),
    (Op::Reopen, 7),
    (Op::Rename, 6),
    (Op::Stat, 10),
    (Op::VerifyAll, 2),
    (Op::Fallocate, 2),
    (Op::PunchHole, 3),
    (Op::CopyRange, 2),
];

/// Why a run failed.
enum Failure {
    Mismatch(String),
    Io(String, io::Error),
}

struct Exerciser {
    args: Args,
    rng: Rng,
    model: Vec<u8>,
    file: Option<File>,
    names: [PathBuf; 2],
    current: usize,
    log: VecDeque<String>,
    counts: [u64; OPS.len()],
    done: u64,
    /// Operations the file system answered with `EOPNOTSUPP`, switched off.
    unsupported: Vec<Op>,
}

fn io_fail(what: impl Into<String>) -> impl FnOnce(io::Error) -> Failure {
    let what = what.into();
    move |e| Failure::Io(what, e)
}

impl Exerciser {
    fn new(args: Args) -> Exerciser {
        let base = args.name.clone().unwrap_or_else(|| format!("exerciser-{}", args.seed));
        let names = [args.dir.join(&base), args.dir.join(format!("{base}.renamed"))];
        Exerciser {
            rng: Rng(args.seed ^ 0x5EED_F5A1_7A17_0F00),
            args,
            model: Vec::new(),
            file: None,
            names,
            current: 0,
            log: VecDeque::new(),
            counts: [0; OPS.len()],
            done: 0,
            unsupported: Vec::new(),
        }
    }

    fn path(&self) -> &Path {
        &self.names[self.current]
    }

    fn record(&mut self, entry: String) {
        if self.log.len() == self.args.log.max(1) {
            self.log.pop_front();
        }
        self.log.push_back(format!("#{} {entry}", self.done));
    }

    fn file(&self) -> Result<&File, Failure> {
        self.file.as_ref().ok_or_else(|| Failure::Mismatch("internal: no open file".into()))
    }

    fn open(&mut self, truncate: bool) -> Result<(), Failure> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(truncate)
            .open(self.path())
            .map_err(io_fail(format!("open {}", self.path().display())))?;
        self.file = Some(f);
        if truncate {
            self.model.clear();
        }
        Ok(())
    }

    fn pick_op(&mut self) -> Op {
        let mut r = self.rng.below(100);
        for (op, w) in OPS {
            if r < w {
                return if self.unsupported.contains(&op) { Op::Read } else { op };
            }
            r -= w;
        }
        Op::Read
    }

    /// `fallocate(2)` on the open file; `Ok(false)` if the file system does not do
    /// this mode (the operation is then switched off).
    fn fallocate(&mut self, op: Op, mode: i32, off: u64, len: u64) -> Result<bool, Failure> {
        use std::os::unix::io::AsRawFd;
        let fd = self.file()?.as_raw_fd();
        // SAFETY: `fd` is the open file's descriptor.
        if unsafe { libc::fallocate(fd, mode, off as libc::off_t, len as libc::off_t) } == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
            self.record(format!("  fallocate mode {mode:#x} unsupported: switched off"));
            self.unsupported.push(op);
            return Ok(false);
        }
        Err(Failure::Io(format!("fallocate mode {mode:#x} at {off} len {len}"), e))
    }

    /// An offset: anywhere, around the end of file, or at the start.
    fn pick_offset(&mut self) -> u64 {
        let size = self.model.len() as u64;
        match self.rng.below(4) {
            0 | 1 => self.rng.below(self.args.max_size),
            2 => {
                (size + self.rng.below(2 * self.args.max_io.min(65536) + 1)).saturating_sub(self.args.max_io.min(65536))
            }
            _ => self.rng.below(8192.min(self.args.max_size)),
        }
    }

    /// A length: mostly small, sometimes up to `max_io` (log-uniform).
    fn pick_len(&mut self) -> u64 {
        let bits = 64 - self.args.max_io.max(1).leading_zeros() as u64;
        let cap = 1u64 << self.rng.below(bits + 1);
        1 + self.rng.below(cap.min(self.args.max_io.max(1)))
    }

    fn step(&mut self) -> Result<(), Failure> {
        let op = self.pick_op();
        if let Some(i) = OPS.iter().position(|(o, _)| *o == op) {
            self.counts[i] += 1;
        }
        match op {
            Op::Write => {
                let off = self.pick_offset().min(self.args.max_size.saturating_sub(1));
                let len = self.pick_len().min(self.args.max_size - off);
                let mut data = vec![0u8; len as usize];
                let zeros = self.rng.below(20) == 0;
                if !zeros {
                    self.rng.fill(&mut data);
                }
                let before = self.model.len();
                self.record(format!(
                    "write off={off} len={len}{} size {before}->{}",
                    if zeros { " (zeros)" } else { "" },
                    before.max((off + len) as usize)
                ));
                self.file()?.write_all_at(&data, off).map_err(io_fail(format!("write {len} bytes at {off}")))?;
                let end = (off + len) as usize;
                if self.model.len() < end {
                    self.model.resize(end, 0);
                }
                self.model[off as usize..end].copy_from_slice(&data);
            }
            Op::Read => {
                let size = self.model.len() as u64;
                let off = self.rng.below(size + self.args.max_io.min(4096) + 1);
                let len = self.pick_len();
                self.record(format!("read off={off} len={len} size={size}"));
                self.check_range(off, len)?;
            }
            Op::Truncate => {
                let size = self.model.len() as u64;
                let new = if self.rng.below(2) == 0 {
                    self.rng.below(size + 1)
                } else {
                    size + self.rng.below(self.args.max_size.saturating_sub(size) + 1)
                };
                self.record(format!("truncate {size}->{new}"));
                self.file()?.set_len(new).map_err(io_fail(format!("truncate to {new}")))?;
                self.model.resize(new as usize, 0);
            }
            Op::Fsync => {
                let data_only = self.rng.below(2) == 0;
                self.record(if data_only { "fdatasync" } else { "fsync" }.to_string());
                let f = self.file()?;
                let r = if data_only { f.sync_data() } else { f.sync_all() };
                r.map_err(io_fail("fsync"))?;
            }
            Op::Reopen => {
                let truncate = self.rng.below(10) == 0;
                self.record(format!("close and reopen{}", if truncate { " with O_TRUNC" } else { "" }));
                self.file = None;
                self.open(truncate)?;
                self.check_size("size after reopen")?;
            }
            Op::Rename => {
                let to = 1 - self.current;
                let (from_path, to_path) = (self.names[self.current].clone(), self.names[to].clone());
                self.record(format!(
                    "rename {} -> {}",
                    from_path.file_name().unwrap_or_default().to_string_lossy(),
                    to_path.file_name().unwrap_or_default().to_string_lossy()
                ));
                fs::rename(&from_path, &to_path).map_err(io_fail("rename"))?;
                self.current = to;
                match fs::symlink_metadata(&from_path) {
                    Err(e) if e.kind() == ErrorKind::NotFound => {}
                    Ok(_) => {
                        return Err(Failure::Mismatch(format!("{} still exists after rename", from_path.display())))
                    }
                    Err(e) => return Err(Failure::Io("stat of the old name".into(), e)),
                }
            }
            Op::Stat => {
                self.record(format!("stat (expect size {})", self.model.len()));
                self.check_size("fstat size")?;
                let by_path = fs::metadata(self.path()).map_err(io_fail("stat"))?.len();
                if by_path != self.model.len() as u64 {
                    return Err(Failure::Mismatch(format!("stat size {by_path}, expected {}", self.model.len())));
                }
            }
            Op::VerifyAll => {
                self.record(format!("verify whole file ({} bytes)", self.model.len()));
                self.verify_all()?;
            }
            Op::Fallocate => {
                let off = self.pick_offset().min(self.args.max_size.saturating_sub(1));
                let len = self.pick_len().min(self.args.max_size - off);
                let keep = self.rng.below(2) == 0;
                let size = self.model.len() as u64;
                self.record(format!(
                    "fallocate{} off={off} len={len} size={size}",
                    if keep { " keep_size" } else { "" }
                ));
                let mode = if keep { libc::FALLOC_FL_KEEP_SIZE } else { 0 };
                if self.fallocate(op, mode, off, len)? && !keep && off + len > size {
                    self.model.resize((off + len) as usize, 0);
                }
                self.check_size("size after fallocate")?;
            }
            Op::PunchHole => {
                let off = self.pick_offset().min(self.args.max_size.saturating_sub(1));
                let len = self.pick_len().max(self.rng.below(4) * 65536).min(self.args.max_size - off);
                let size = self.model.len() as u64;
                let (mode, name, grow) = match self.rng.below(3) {
                    0 => (libc::FALLOC_FL_ZERO_RANGE, "zero_range", true),
                    1 => (libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE, "zero_range keep_size", false),
                    _ => (libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, "punch_hole", false),
                };
                self.record(format!("{name} off={off} len={len} size={size}"));
                if self.fallocate(op, mode, off, len)? {
                    let end = (off + len).min(size) as usize;
                    if (off as usize) < end {
                        self.model[off as usize..end].fill(0);
                    }
                    if grow && off + len > size {
                        self.model.resize((off + len) as usize, 0);
                    }
                }
                self.check_size("size after hole")?;
            }
            Op::CopyRange => {
                let size = self.model.len() as u64;
                if size == 0 {
                    return Ok(());
                }
                let src = self.rng.below(size);
                let len = self.pick_len().min(size - src);
                let mut dst = self.pick_offset().min(self.args.max_size.saturating_sub(len));
                if dst < src + len && src < dst + len {
                    // Overlapping ranges of one file are EINVAL: copy just past the source.
                    dst = src + len;
                    if dst + len > self.args.max_size {
                        return Ok(());
                    }
                }
                self.record(format!("copy_file_range {src}..{} -> {dst} size={size}", src + len));
                use std::os::unix::io::AsRawFd;
                let fd = self.file()?.as_raw_fd();
                let (mut s_off, mut d_off, mut left) = (src as i64, dst as i64, len as usize);
                while left > 0 {
                    // SAFETY: one valid descriptor, offsets owned here.
                    let n = unsafe { libc::copy_file_range(fd, &mut s_off, fd, &mut d_off, left, 0) };
                    if n < 0 {
                        let e = io::Error::last_os_error();
                        if e.raw_os_error() == Some(libc::EOPNOTSUPP) && left == len as usize {
                            self.unsupported.push(op);
                            return Ok(());
                        }
                        return Err(Failure::Io(format!("copy_file_range {src} -> {dst} len {len}"), e));
                    }
                    if n == 0 {
                        return Err(Failure::Mismatch(format!("copy_file_range stopped {left} bytes short")));
                    }
                    left -= n as usize;
                }
                let piece = self.model[src as usize..(src + len) as usize].to_vec();
                let end = (dst + len) as usize;
                if self.model.len() < end {
                    self.model.resize(end, 0);
                }
                self.model[dst as usize..end].copy_from_slice(&piece);
                self.check_range(dst, len)?;
            }
        }
        Ok(())
    }

    fn check_size(&self, what: &str) -> Result<(), Failure> {
        let got = self.file()?.metadata().map_err(io_fail("fstat"))?.len();
        if got != self.model.len() as u64 {
            return Err(Failure::Mismatch(format!("{what}: {got}, expected {}", self.model.len())));
        }
        Ok(())
    }

    fn verify_all(&self) -> Result<(), Failure> {
        self.check_size("size")?;
        self.check_range(0, self.model.len() as u64 + 1)
    }

    /// Reads `len` bytes at `off` (fewer at end of file) and compares every byte.
    fn check_range(&self, off: u64, len: u64) -> Result<(), Failure> {
        let f = self.file()?;
        let mut buf = vec![0u8; len as usize];
        let mut got = 0usize;
        while got < buf.len() {
            match f.read_at(&mut buf[got..], off + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(Failure::Io(format!("read {len} bytes at {off}"), e)),
            }
        }
        let size = self.model.len() as u64;
        let want_len = size.saturating_sub(off).min(len) as usize;
        let want = if want_len == 0 { &[][..] } else { &self.model[off as usize..off as usize + want_len] };
        if got != want_len {
            return Err(Failure::Mismatch(format!("read at {off} of {len} bytes returned {got}, expected {want_len}")));
        }
        if let Some(i) = buf[..got].iter().zip(want).position(|(a, b)| a != b) {
            let at = off + i as u64;
            let show = |s: &[u8]| s.iter().take(16).map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ");
            let bad = buf[i..got].iter().zip(&want[i..]).filter(|(a, b)| a != b).count();
            return Err(Failure::Mismatch(format!(
                "byte {at} differs ({bad} bad bytes in the read of {len} at {off})\n  expected: {}\n  got:      {}",
                show(&want[i..]),
                show(&buf[i..got])
            )));
        }
        Ok(())
    }

    fn run(&mut self) -> Result<(), Failure> {
        // Start from an empty file, whatever an earlier run left.
        for p in &self.names {
            let _ = fs::remove_file(p);
        }
        self.open(true)?;
        let start = Instant::now();
        let deadline = self.args.duration.map(|s| start + Duration::from_secs(s));
        if self.args.soak && self.args.progress == 0 {
            self.args.progress = 100_000;
        }
        let mut next_progress = self.args.progress;
        loop {
            if self.args.soak {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
            } else if self.done >= self.args.ops {
                break;
            }
            if self.args.corrupt_at == Some(self.done) {
                self.corrupt()?;
            }
            self.step()?;
            self.done += 1;
            if self.args.progress > 0 && self.done == next_progress {
                next_progress += self.args.progress;
                println!(
                    "seed {}: {} operations, {:.0} s, file {} bytes",
                    self.args.seed,
                    self.done,
                    start.elapsed().as_secs_f64(),
                    self.model.len()
                );
            }
        }
        self.record("final verification".into());
        self.verify_all()?;
        self.file = None;
        if !self.args.keep {
            fs::remove_file(self.path()).map_err(io_fail("remove the file"))?;
        }
        let counts: Vec<String> = OPS
            .iter()
            .zip(self.counts)
            .map(|((op, _), n)| format!("{}={n}", format!("{op:?}").to_lowercase()))
            .collect();
        let off =
            if self.unsupported.is_empty() { String::new() } else { format!("; unsupported: {:?}", self.unsupported) };
        println!(
            "ok: seed {} ran {} operations in {:.1} s ({}{off})",
            self.args.seed,
            self.done,
            start.elapsed().as_secs_f64(),
            counts.join(" ")
        );
        Ok(())
    }

    /// Flips one byte through a second descriptor, then verifies (which must fail).
    fn corrupt(&mut self) -> Result<(), Failure> {
        if self.model.is_empty() {
            self.file()?.write_all_at(b"x", 0).map_err(io_fail("grow for the self-test"))?;
            self.model.push(b'x');
        }
        let at = self.rng.below(self.model.len() as u64);
        self.record(format!("SELF-TEST: flip the byte at {at} behind the model's back"));
        let other = OpenOptions::new().write(true).open(self.path()).map_err(io_fail("open for the self-test"))?;
        other.write_all_at(&[!self.model[at as usize]], at).map_err(io_fail("self-test write"))?;
        drop(other);
        self.verify_all()
    }

    fn report(&self, failure: &Failure) {
        eprintln!(
            "sqlvault-exerciser: FAILED at operation #{} (seed {}) on {}",
            self.done,
            self.args.seed,
            self.path().display()
        );
        match failure {
            Failure::Mismatch(m) => eprintln!("  mismatch: {m}"),
            Failure::Io(what, e) => eprintln!("  I/O error: {what}: {e}"),
        }
        eprintln!("  last {} operations:", self.log.len());
        for entry in &self.log {
            eprintln!("    {entry}");
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.max_size == 0 || args.max_io == 0 {
        eprintln!("sqlvault-exerciser: --max-size and --max-io must be positive");
        return ExitCode::from(2);
    }
    let mut ex = Exerciser::new(args);
    match ex.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            ex.report(&f);
            ExitCode::FAILURE
        }
    }
}
