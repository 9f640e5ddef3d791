//! `remote`: push and clone of a vault to an S3-compatible server on loopback
//! (VersityGW, posix backend, started by the scenario), against raw uploads and
//! downloads of the same bytes to the same server in the same run: one object per
//! file, 8 transfers in flight, through the same S3 client library (`object_store`),
//! as `aws s3 cp --recursive` does.
//!
//! Two data sets: large files (`--mib` MiB in 8 MiB files) and many small files
//! (`--files` files of `--file-bytes`). Every case runs in its own child process, so its
//! time, CPU and peak RSS are its own.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStore;
use serde::{Deserialize, Serialize};
use sqlvault::{CreateOptions, EngineConfig, KdfParams, Secret, Vault};

use crate::data::Stream;
use crate::error::{Context, Result};
use crate::harness::{self, CaseOutput, Collector, Meter, Run, Target, Unit};
use crate::report::{self, OutputArgs};

const HEADING: &str = "## remote (replication to S3-compatible storage)";
const PASSPHRASE: &str = "sqlvault-bench remote scenario";
const ACCESS_KEY: &str = "sqlvault-bench-access";
const SECRET_KEY: &str = "sqlvault-bench-secret";
const LARGE_FILE: usize = 8 << 20;
const PARALLEL: usize = 8;

/// Arguments of `sqlvault-bench remote`.
#[derive(Debug, Clone, clap::Args)]
pub struct RemoteArgs {
    /// Size of the large-file data set, in MiB (8 MiB files).
    #[arg(long, default_value_t = 1024)]
    pub mib: u64,
    /// Files in the small-file data set.
    #[arg(long, default_value_t = 50_000)]
    pub files: u64,
    /// Bytes per small file.
    #[arg(long, default_value_t = 4096)]
    pub file_bytes: usize,
    /// Repetitions of every case (each a fresh process and bucket; medians are reported).
    #[arg(long, default_value_t = 1)]
    pub reps: u32,
    /// 16 MiB and 500 files, one repetition: indicative only (what `all --quick` runs).
    #[arg(long)]
    pub quick: bool,
    /// Scratch directory, on the disk to measure [default: <results-dir>/tmp].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Kind {
    RawPut,
    RawGet,
    Push,
    Clone,
}

#[derive(Debug, Serialize, Deserialize)]
struct Spec {
    kind: Kind,
    endpoint: String,
    bucket: String,
    /// The host directory of the data set (raw put) or the vault (push).
    source: PathBuf,
    /// Where a clone goes.
    dest: PathBuf,
    bytes: u64,
    /// What throughput counts: bytes (MB/s) or files (files/s).
    units: f64,
}

/// The server, killed on drop.
struct Server {
    child: Child,
    root: tempfile::TempDir,
    endpoint: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn server_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("SQLVAULT_VERSITYGW") {
        return p.into();
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
    let p = home.join("go/bin/versitygw");
    if p.exists() {
        p
    } else {
        PathBuf::from("versitygw")
    }
}

fn start_server(dir: &Path) -> Result<Server> {
    let root =
        tempfile::Builder::new().prefix("s3-").tempdir_in(dir).context("cannot create the server's directory")?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let bin = server_binary();
    let child = Command::new(&bin)
        .arg("--port")
        .arg(format!("127.0.0.1:{port}"))
        .arg("posix")
        .arg(root.path())
        .env("ROOT_ACCESS_KEY", ACCESS_KEY)
        .env("ROOT_SECRET_KEY", SECRET_KEY)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| {
            format!(
                "cannot start the S3 server {} (install it: go install github.com/versity/versitygw/cmd/versitygw@v1.8.0)",
                bin.display()
            )
        })?;
    let mut s = Server { child, root, endpoint: format!("http://127.0.0.1:{port}") };
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(st)) = s.child.try_wait() {
            crate::bail!("the S3 server exited at start: {st}");
        }
        if Instant::now() > deadline {
            crate::bail!("the S3 server did not listen within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::env::set_var("AWS_ACCESS_KEY_ID", ACCESS_KEY);
    std::env::set_var("AWS_SECRET_ACCESS_KEY", SECRET_KEY);
    std::env::set_var("AWS_REGION", "us-east-1");
    Ok(s)
}

fn raw_store(spec: &Spec) -> Result<Arc<dyn ObjectStore>> {
    let s = object_store::aws::AmazonS3Builder::from_env()
        .with_bucket_name(&spec.bucket)
        .with_endpoint(&spec.endpoint)
        .with_allow_http(true)
        .with_virtual_hosted_style_request(false)
        .build()?;
    Ok(Arc::new(s))
}

fn host_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for sub in std::fs::read_dir(dir)? {
        let sub = sub?.path();
        for f in std::fs::read_dir(&sub)? {
            out.push(f?.path());
        }
    }
    out.sort();
    Ok(out)
}

/// One case in a child process.
pub fn case(spec: &str) -> Result<CaseOutput> {
    let spec: Spec = harness::parse_spec(spec)?;
    let mut out = CaseOutput::default();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    match spec.kind {
        Kind::RawPut => {
            let store = raw_store(&spec)?;
            let files = host_files(&spec.source)?;
            let m = Meter::start()?;
            rt.block_on(async {
                let mut puts = futures::stream::iter(files.iter())
                    .map(|f| {
                        let store = store.clone();
                        let source = &spec.source;
                        async move {
                            let data = std::fs::read(f)?;
                            let name = f.strip_prefix(source).unwrap_or(f).display().to_string();
                            store.put(&object_store::path::Path::from(name), data.into()).await?;
                            Ok::<_, crate::error::Error>(())
                        }
                    })
                    .buffer_unordered(PARALLEL);
                while let Some(r) = puts.next().await {
                    r?;
                }
                Ok::<_, crate::error::Error>(())
            })?;
            out.add("transfer", m.stop(spec.units)?);
        }
        Kind::RawGet => {
            let store = raw_store(&spec)?;
            let m = Meter::start()?;
            let got = rt.block_on(async {
                let metas: Vec<_> = store.list(None).try_collect().await?;
                let mut gets =
                    futures::stream::iter(metas)
                        .map(|meta| {
                            let store = store.clone();
                            async move {
                                Ok::<_, crate::error::Error>(store.get(&meta.location).await?.bytes().await?.len())
                            }
                        })
                        .buffer_unordered(PARALLEL);
                let mut n = 0u64;
                while let Some(r) = gets.next().await {
                    n += r? as u64;
                }
                Ok::<_, crate::error::Error>(n)
            })?;
            if got != spec.bytes {
                crate::bail!("raw get read {got} bytes, expected {}", spec.bytes);
            }
            out.add("transfer", m.stop(spec.units)?);
        }
        Kind::Push => {
            let m = Meter::start()?;
            let v = Vault::open(&spec.source, &Secret::passphrase(PASSPHRASE), EngineConfig::default())?;
            let name = spec.bucket.clone();
            v.remote_add(&name, &format!("s3://{}/v", spec.bucket), Some(&spec.endpoint))?;
            let r = v.push(&name)?;
            v.close()?;
            out.add("transfer", m.stop(spec.units)?);
            out.notes.insert("outcome".into(), format!("{r:?}"));
        }
        Kind::Clone => {
            let m = Meter::start()?;
            let url = format!("s3://{}/v", spec.bucket);
            let v = Vault::clone_remote(
                &url,
                Some(&spec.endpoint),
                &spec.dest,
                &Secret::passphrase(PASSPHRASE),
                EngineConfig::default(),
                &|_| {},
            )?;
            v.close()?;
            out.add("transfer", m.stop(spec.units)?);
            harness::remove_db(&spec.dest);
        }
    }
    Ok(out)
}

struct DataSet {
    label: String,
    host: PathBuf,
    vault: PathBuf,
    bytes: u64,
    files: u64,
}

/// Writes `files` files of `size` bytes both as host files and into a new vault.
fn make_data_set(dir: &Path, label: &str, files: u64, size: usize, seed: u64) -> Result<DataSet> {
    let host = dir.join(format!("{label}-files"));
    let vault = dir.join(format!("{label}.vault"));
    let opts =
        CreateOptions { kdf: KdfParams { memory_kib: 8 * 1024, iterations: 1, parallelism: 1 }, ..Default::default() };
    let v = Vault::create(&vault, &Secret::passphrase(PASSPHRASE), &opts)?;
    let mut stream = Stream::new(seed);
    let mut buf = vec![0u8; size];
    for i in 0..files {
        let d = format!("d{}", i / 1000);
        if i % 1000 == 0 {
            std::fs::create_dir_all(host.join(&d))?;
            v.create_dir(&format!("/{d}"), 0o755)?;
        }
        stream.fill(&mut buf);
        std::fs::write(host.join(&d).join(format!("f{i}")), &buf)?;
        v.write_file(&format!("/{d}/f{i}"), &buf)?;
    }
    v.close()?;
    Ok(DataSet { label: label.into(), host, vault, bytes: files * size as u64, files })
}

/// Entry point of `sqlvault-bench remote`.
pub fn remote(a: &RemoteArgs) -> Result<harness::ScenarioReport> {
    let run = Run::new("remote", a.quick, a.dir.as_deref(), &a.out)?;
    let (mib, files, reps) = if a.quick { (16, 500, 1) } else { (a.mib.max(8), a.files.max(1), a.reps.max(1)) };
    let server = start_server(&run.dir)?;
    let large_files = mib * (1 << 20) / LARGE_FILE as u64;
    let sets = vec![
        make_data_set(&run.dir, "large", large_files, LARGE_FILE, 1)?,
        make_data_set(&run.dir, "small", files, a.file_bytes, 2)?,
    ];
    let group = |s: &DataSet, what: &str| {
        if s.label == "large" {
            format!("{what}: {} MiB in 8 MiB files", s.bytes >> 20)
        } else {
            format!("{what}: {} files of {} bytes", s.files, a.file_bytes)
        }
    };
    let mut col = Collector::default();
    let pb = harness::progress("remote", sets.len() as u64 * reps as u64 * 4);
    let mut objects = Vec::new();
    for rep in 0..reps {
        for s in &sets {
            let bucket = |k: &str| format!("{k}-{}-{rep}", s.label);
            for k in ["raw", "vault"] {
                std::fs::create_dir(server.root.path().join(bucket(k)))?;
            }
            let unit = if s.label == "large" { Unit::MBps } else { Unit::Ops };
            let units = if unit == Unit::MBps { s.bytes as f64 } else { s.files as f64 };
            let cases = [
                (Kind::RawPut, "upload", "raw PUT, one object per file", "raw"),
                (Kind::Push, "upload", "sqlvault push", "vault"),
                (Kind::RawGet, "download", "raw GET, one object per file", "raw"),
                (Kind::Clone, "download", "sqlvault clone", "vault"),
            ];
            for (kind, what, system, b) in cases {
                pb.set_message(format!("{system} ({})", s.label));
                let spec = Spec {
                    kind,
                    endpoint: server.endpoint.clone(),
                    bucket: bucket(b),
                    source: if kind == Kind::RawPut { s.host.clone() } else { s.vault.clone() },
                    dest: run.dir.join(format!("clone-{}-{rep}.vault", s.label)),
                    bytes: s.bytes,
                    units,
                };
                let out = harness::spawn_case("remote", &spec)?;
                let sample = out.phases.get("transfer").context("the case measured nothing")?;
                col.push(&group(s, what), system, unit, sample, out.peak_rss_kib);
                pb.inc(1);
            }
            if rep == 0 {
                let count = |b: &str| walk_count(&server.root.path().join(bucket(b)));
                objects.push(format!(
                    "{}: {} raw objects, {} objects in the vault's bucket (chunks, metadata pieces, commit, ref, keys, config)",
                    s.label,
                    count("raw"),
                    count("vault")
                ));
            }
        }
    }
    pb.finish_and_clear();
    drop(server);
    let rows = col.rows(|_, sys| {
        if sys.starts_with("sqlvault push") {
            Some("raw PUT, one object per file".into())
        } else if sys.starts_with("sqlvault clone") {
            Some("raw GET, one object per file".into())
        } else {
            None
        }
    });
    let ratio = |g: &str, sys: &str, base: &str| harness::value(&rows, g, sys) / harness::value(&rows, g, base);
    let up = ratio(&group(&sets[0], "upload"), "sqlvault push", "raw PUT, one object per file");
    let down = ratio(&group(&sets[0], "download"), "sqlvault clone", "raw GET, one object per file");
    let up_small = ratio(&group(&sets[1], "upload"), "sqlvault push", "raw PUT, one object per file");
    let targets = vec![
        Target::new(
            "remote",
            "push of large files at least 0.5x raw uploads of the same bytes (same server, same run)",
            report::ratio(up),
            (!a.quick).then_some(up >= 0.5),
        ),
        Target::new(
            "remote",
            "clone of large files at least 0.5x raw downloads of the same bytes",
            report::ratio(down),
            (!a.quick).then_some(down >= 0.5),
        ),
        Target::new(
            "remote",
            "push of many small files at least 0.5x raw per-file uploads (files/s)",
            report::ratio(up_small),
            (!a.quick).then_some(up_small >= 0.5),
        ),
    ];
    let method = format!(
        "Method: a VersityGW {} server (posix backend on the scratch directory, loopback) started by the \
         scenario. Data sets written once, untimed, both as host files and into a vault (default 64 KiB \
         chunks): {} MiB in 8 MiB files, and {} files of {} bytes. Each case is a fresh process: *raw PUT* \
         uploads every host file as one object, *raw GET* downloads every object of that bucket, both with \
         `object_store` and {PARALLEL} transfers in flight; *sqlvault push* opens the vault, adds a remote \
         and pushes it into an empty bucket (chunks, metadata, commit, ref; {PARALLEL} chunk uploads in \
         flight); *sqlvault clone* creates a new vault from that bucket. Throughput counts the data set's \
         bytes (MB/s) or files (files/s), peak RSS is the case process's. {reps} repetition(s), medians.",
        "v1.8.0", mib, files, a.file_bytes
    );
    Ok(run.report(HEADING, method, rows, targets, Vec::new(), objects))
}

fn walk_count(dir: &Path) -> usize {
    let mut n = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with(".sgw") {
                continue;
            }
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(t) if t.is_file() => n += 1,
                _ => {}
            }
        }
    }
    n
}

pub fn run(a: &RemoteArgs) -> Result<Vec<Target>> {
    let r = remote(a)?;
    harness::publish(&a.out, &r)?;
    Ok(r.targets)
}
