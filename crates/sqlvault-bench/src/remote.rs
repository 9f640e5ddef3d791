//! `remote`: push and clone of a vault to an S3-compatible server on loopback
//! (VersityGW, posix backend, started by the scenario), against raw uploads and
//! downloads to the same server in the same run, through the same S3 client library
//! (`object_store`) with the same number of requests in flight as the push:
//!
//! * *one object per file*, as `aws s3 cp --recursive` does;
//! * *the push's objects*: as many objects of the same sizes as the push wrote
//!   (packs of sealed chunks, index, metadata pieces), generated in memory: what the push would cost if
//!   reading, sealing and bookkeeping were free;
//! * *4 MiB objects*: the same bytes as the push's chunks, in objects of 4 MiB: what
//!   the push's packs (layout 3) cost a client that does nothing else.
//!
//! Two data sets: large files (`--mib` MiB in 8 MiB files) and many small files
//! (`--files` files of `--file-bytes`). Every case runs in its own child process, so its
//! time, CPU and peak RSS are its own.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStore;
use serde::{Deserialize, Serialize};
use sqlvault::secrets::KdfParams;
use sqlvault::{CreateOptions, EngineConfig, Secret, Vault};

use crate::data::Stream;
use crate::error::{Context, Result};
use crate::harness::{self, CaseOutput, Collector, Meter, Run, Unit};
use crate::report;
use crate::scenario::{Common, Def, Target};

const HEADING: &str = "## remote (replication to S3-compatible storage)";
const PASSPHRASE: &str = "sqlvault-bench remote scenario";
const LARGE_FILE: usize = 8 << 20;
/// Requests in flight, for the raw cases as for the push.
const PARALLEL: usize = sqlvault::remote::PARALLEL;
/// Object size of the "packs" baseline.
const PACK: u64 = 4 << 20;

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
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Kind {
    /// Every host file as one object.
    RawPutFiles,
    /// `objects` generated in memory.
    RawPutObjects,
    /// Every object of the bucket.
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
    /// RawPutObjects: (size, count) of the objects to write.
    objects: Vec<(u64, u64)>,
}

/// Runs `jobs` with [`PARALLEL`] requests in flight (the push's own bound), stopping at
/// the first error; the sum of what they return (bytes read, or 0).
async fn in_flight<F: std::future::Future<Output = Result<u64>>>(jobs: impl Iterator<Item = F>) -> Result<u64> {
    let mut running = futures::stream::iter(jobs).buffer_unordered(PARALLEL);
    let mut total = 0;
    while let Some(r) = running.next().await {
        total += r?;
    }
    Ok(total)
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
        Kind::RawPutFiles => {
            let store = raw_store(&spec)?;
            let files = host_files(&spec.source)?;
            let m = Meter::start()?;
            rt.block_on(in_flight(files.iter().map(|f| {
                let store = store.clone();
                let source = &spec.source;
                async move {
                    let data = std::fs::read(f)?;
                    let name = f.strip_prefix(source).unwrap_or(f).display().to_string();
                    store.put(&object_store::path::Path::from(name), data.into()).await?;
                    Ok(0)
                }
            })))?;
            out.add("transfer", m.stop(spec.bytes as f64)?);
        }
        Kind::RawPutObjects => {
            let store = raw_store(&spec)?;
            // One payload per distinct size, shared (reference-counted) by its objects.
            let payloads: std::collections::HashMap<u64, object_store::PutPayload> = spec
                .objects
                .iter()
                .map(|&(size, _)| {
                    let mut buf = vec![0u8; (size as usize).next_multiple_of(8)];
                    Stream::new(size).fill(&mut buf);
                    buf.truncate(size as usize);
                    (size, object_store::PutPayload::from(buf))
                })
                .collect();
            let sizes = spec.objects.iter().flat_map(|&(size, n)| (0..n).map(move |_| size));
            let m = Meter::start()?;
            rt.block_on(in_flight(sizes.enumerate().map(|(i, size)| {
                let (store, data) = (store.clone(), payloads[&size].clone());
                async move {
                    let name = object_store::path::Path::from(format!("v/data/{i:064x}"));
                    store.put(&name, data).await?;
                    Ok(0)
                }
            })))?;
            out.add("transfer", m.stop(spec.bytes as f64)?);
        }
        Kind::RawGet => {
            let store = raw_store(&spec)?;
            let m = Meter::start()?;
            let got = rt.block_on(async {
                let metas: Vec<_> = store.list(None).try_collect().await?;
                in_flight(metas.into_iter().map(|meta| {
                    let store = store.clone();
                    async move { Ok(store.get(&meta.location).await?.bytes().await?.len() as u64) }
                }))
                .await
            })?;
            if got != spec.bytes {
                crate::bail!("raw get read {got} bytes, expected {}", spec.bytes);
            }
            out.add("transfer", m.stop(spec.bytes as f64)?);
        }
        Kind::Push => {
            let m = Meter::start()?;
            let v = Vault::open(&spec.source, &Secret::passphrase(PASSPHRASE), EngineConfig::default())?;
            let name = spec.bucket.clone();
            v.remote(&name).add(&format!("s3://{}/v", spec.bucket), Some(&spec.endpoint))?;
            let r = v.remote(&name).push(&sqlvault::Ops::default())?;
            v.close()?;
            out.add("transfer", m.stop(spec.bytes as f64)?);
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
                &sqlvault::remote::At::Newest,
                &sqlvault::Ops::default(),
            )?;
            v.close()?;
            out.add("transfer", m.stop(spec.bytes as f64)?);
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
    // A directory of up to 1000 files per transaction (small files) or one file each.
    let per_dir = 1000;
    for first in (0..files).step_by(per_dir) {
        let d = format!("d{}", first / per_dir as u64);
        std::fs::create_dir_all(host.join(&d))?;
        v.create_dir(&format!("/{d}"), 0o755)?;
        let batch = if size >= 1 << 20 { 1 } else { per_dir as u64 };
        let mut i = first;
        while i < (first + per_dir as u64).min(files) {
            let end = (i + batch).min(first + per_dir as u64).min(files);
            v.transaction(|tx| {
                for j in i..end {
                    stream.fill(&mut buf);
                    std::fs::write(host.join(&d).join(format!("f{j}")), &buf)?;
                    tx.write_file(&format!("/{d}/f{j}"), &buf)?;
                }
                Ok::<_, crate::error::Error>(())
            })?;
            i = end;
        }
    }
    v.close()?;
    Ok(DataSet { label: label.into(), host, vault, bytes: files * size as u64, files })
}

/// Sizes of the object files under `dir` (the server's own entries excluded): size -> count.
fn object_sizes(dir: &Path) -> BTreeMap<u64, u64> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with(".sgw") {
                continue;
            }
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(t) if t.is_file() => *out.entry(e.metadata().map(|m| m.len()).unwrap_or(0)).or_insert(0) += 1,
                _ => {}
            }
        }
    }
    out
}

const FILES: &str = "raw, one object per file";
const OBJECTS: &str = "raw, the push's objects";
const PACKS: &str = "raw, same bytes in 4 MiB objects";
const PUSH: &str = "sqlvault push";
const CLONE: &str = "sqlvault clone";

/// Entry point of `sqlvault-bench remote`.
pub fn remote(a: &RemoteArgs) -> Result<harness::ScenarioReport> {
    let run = Run::new("remote", &a.common)?;
    let (mib, files, reps) = if a.common.quick { (16, 500, 1) } else { (a.mib.max(8), a.files.max(1), a.reps.max(1)) };
    let server = crate::fixtures::start_server(&run.dir)?;
    let large_files = mib * (1 << 20) / LARGE_FILE as u64;
    let sets = vec![
        make_data_set(&run.dir, "large", large_files, LARGE_FILE, 1)?,
        make_data_set(&run.dir, "small", files, a.file_bytes, 2)?,
    ];
    let desc = |s: &DataSet| {
        if s.label == "large" {
            format!("{} MiB in 8 MiB files", s.bytes >> 20)
        } else {
            format!("{} files of {} bytes", s.files, a.file_bytes)
        }
    };
    let mut col = Collector::default();
    let pb = harness::progress("remote", sets.len() as u64 * reps as u64 * 8);
    let mut notes = Vec::new();
    for rep in 0..reps {
        for s in &sets {
            let bucket = |k: &str| format!("{k}-{}-{rep}", s.label);
            for k in ["files", "vault", "objects", "packs"] {
                std::fs::create_dir(server.root.path().join(bucket(k)))?;
            }
            // One case in its own process.
            let case = |kind: Kind, b: &str, system: &str, bytes: u64, objects: &[(u64, u64)]| {
                pb.set_message(format!("{system} ({})", s.label));
                let spec = Spec {
                    kind,
                    endpoint: server.endpoint.clone(),
                    bucket: bucket(b),
                    source: if kind == Kind::RawPutFiles { s.host.clone() } else { s.vault.clone() },
                    dest: run.dir.join(format!("clone-{}-{rep}.vault", s.label)),
                    bytes,
                    objects: objects.to_vec(),
                };
                let out = harness::spawn_case("remote", &spec)?;
                pb.inc(1);
                Ok::<_, crate::error::Error>(out)
            };
            // Its time counts the data set's bytes (MB/s) and the `objects` it moved (objects/s).
            let mut record = |out: &CaseOutput, system: &str, up: bool, objects: &[(u64, u64)]| {
                let sample = out.phases.get("transfer").context("the case measured nothing")?;
                let dir = if up { "upload" } else { "download" };
                let count: u64 = objects.iter().map(|o| o.1).sum();
                let as_bytes = harness::Sample { units: s.bytes as f64, ..sample.clone() };
                let as_objects = harness::Sample { units: count as f64, ..sample.clone() };
                col.push(&format!("{dir} {}", desc(s)), system, Unit::MBps, &as_bytes, out.peak_rss_kib);
                col.push(&format!("{dir} {}: objects", desc(s)), system, Unit::Ops, &as_objects, out.peak_rss_kib);
                Ok::<_, crate::error::Error>(())
            };
            let per_file = [(s.bytes / s.files, s.files)];
            record(&case(Kind::RawPutFiles, "files", FILES, s.bytes, &per_file)?, FILES, true, &per_file)?;
            // The push's objects, counted after the push; the raw cases write as many.
            let vault_dir = server.root.path().join(bucket("vault"));
            let pushed_out = case(Kind::Push, "vault", PUSH, s.bytes, &[])?;
            if let Some(o) = pushed_out.notes.get("outcome").filter(|o| !o.starts_with("Pushed")) {
                crate::bail!("the push did not push: {o}");
            }
            let pushed: Vec<(u64, u64)> = object_sizes(&vault_dir).into_iter().collect();
            record(&pushed_out, PUSH, true, &pushed)?;
            // Chunk bytes: one object per chunk (layouts 1 and 2) or packs (layout 3).
            let chunk_objects = || {
                let mut m = object_sizes(&vault_dir.join("v/data"));
                for (size, n) in object_sizes(&vault_dir.join("v/packs")) {
                    *m.entry(size).or_insert(0) += n;
                }
                m
            };
            let data: u64 = chunk_objects().iter().map(|(size, n)| size * n).sum();
            let packs: Vec<(u64, u64)> =
                [(PACK, data / PACK), (data % PACK, 1)].into_iter().filter(|p| p.0 > 0 && p.1 > 0).collect();
            let total = |o: &[(u64, u64)]| o.iter().map(|(size, n)| size * n).sum::<u64>();
            for (kind, b, system, objects, up) in [
                (Kind::RawPutObjects, "objects", OBJECTS, &pushed, true),
                (Kind::RawPutObjects, "packs", PACKS, &packs, true),
                (Kind::RawGet, "files", FILES, &per_file.to_vec(), false),
                (Kind::RawGet, "objects", OBJECTS, &pushed, false),
                (Kind::RawGet, "packs", PACKS, &packs, false),
                (Kind::Clone, "vault", CLONE, &pushed, false),
            ] {
                let bytes = if kind == Kind::Clone { s.bytes } else { total(objects) };
                record(&case(kind, b, system, bytes, objects)?, system, up, objects)?;
            }
            if rep == 0 {
                let n = |o: &[(u64, u64)]| o.iter().map(|x| x.1).sum::<u64>();
                notes.push(format!(
                    "{}: {} raw objects (one per file); the push wrote {} objects, {:.1} MB ({} chunk objects \
                     or packs, {:.1} MB; index, metadata pieces, commit, ref, keys, config); {} objects of 4 MiB \
                     hold the same chunk bytes.",
                    desc(s),
                    s.files,
                    n(&pushed),
                    total(&pushed) as f64 / 1e6,
                    chunk_objects().values().sum::<u64>(),
                    data as f64 / 1e6,
                    n(&packs)
                ));
            }
            for k in ["files", "vault", "objects", "packs"] {
                let _ = std::fs::remove_dir_all(server.root.path().join(bucket(k)));
            }
        }
    }
    pb.finish_and_clear();
    drop(server);
    let rows = col.rows(|_, sys| match sys {
        PUSH | CLONE | PACKS => Some(OBJECTS.into()),
        _ => None,
    });
    let group = |s: &DataSet, up: bool| format!("{} {}", if up { "upload" } else { "download" }, desc(s));
    let ratio = |g: &str, sys: &str, base: &str| harness::value(&rows, g, sys) / harness::value(&rows, g, base);
    let up = ratio(&group(&sets[0], true), PUSH, FILES);
    let down = ratio(&group(&sets[0], false), CLONE, FILES);
    let up_small = ratio(&group(&sets[1], true), PUSH, FILES);
    let targets = vec![
        Target::new(
            "remote",
            "push of large files at least 0.5x raw uploads of the same bytes, one object per file (same server, same run)",
            report::ratio(up),
            (!a.common.quick).then_some(up >= 0.5),
        ),
        Target::new(
            "remote",
            "clone of large files at least 0.5x raw downloads of the same bytes, one object per file",
            report::ratio(down),
            (!a.common.quick).then_some(down >= 0.5),
        ),
        Target::new(
            "remote",
            "push of many small files at least 0.5x raw per-file uploads",
            report::ratio(up_small),
            (!a.common.quick).then_some(up_small >= 0.5),
        ),
    ];
    for s in &sets {
        let (g, o) = (group(s, true), group(s, false));
        notes.push(format!(
            "{}: against the same objects written raw, push {} and clone {}; the same bytes in 4 MiB objects \
             upload {} and download {} as fast as one object per chunk.",
            desc(s),
            report::ratio(ratio(&g, PUSH, OBJECTS)),
            report::ratio(ratio(&o, CLONE, OBJECTS)),
            report::ratio(ratio(&g, PACKS, OBJECTS)),
            report::ratio(ratio(&o, PACKS, OBJECTS)),
        ));
    }
    let method = format!(
        "Method: a VersityGW {} server (posix backend on the scratch directory, loopback) started by the \
         scenario. Data sets written once, untimed, both as host files and into a vault (default 64 KiB \
         chunks): {} MiB in 8 MiB files, and {} files of {} bytes. Each case is a fresh process and a fresh \
         bucket, with `object_store` and {PARALLEL} requests in flight: *{FILES}* uploads every host file \
         as one object (`aws s3 cp --recursive`), *{OBJECTS}* writes as many objects of the same sizes as \
         the push wrote (generated in memory: no reading, no sealing), *{PACKS}* writes the push's chunk \
         bytes as 4 MiB objects (what packs of chunks cost a client that does nothing else), the downloads read every object of \
         those buckets; *{PUSH}* opens the vault, adds a remote and pushes it into an empty bucket \
         (packs of chunks and their index, metadata, commit, ref), *{CLONE}* creates a new vault from that bucket. MB/s counts the \
         data set's bytes in every row (so rows of one group compare times), objects/s the objects each \
         case moved; CPU is the case process's (not the server's), peak RSS the case process's. \
         {reps} repetition(s), medians.",
        "v1.8.0", mib, files, a.file_bytes
    );
    Ok(run.report(HEADING, method, rows, targets, Vec::new(), notes))
}

/// `sqlvault-bench remote`.
pub const SCENARIO: Def<RemoteArgs> = Def {
    name: "remote",
    about: "Push and clone through an S3-compatible server on loopback, against raw uploads and downloads.",
    run: |a| harness::publish(&a.common, &remote(a)?),
    case,
    render: harness::render,
    args: PhantomData,
};
