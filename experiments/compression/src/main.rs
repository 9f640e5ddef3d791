//! Measures what docs/design/compression.md decides on (issue 27).
//!
//! `compression-bench chunks NAME=PATH[:ext,ext]... | NAME=random:MIB` cuts each data
//! set into 64 KiB chunks (per file, as the vault does) and prints, per set: zstd levels
//! 1/3/6 (stored bytes under the skip rule, CPU per MiB), decompression CPU, BLAKE3 as a
//! yardstick, and a cheap probe (level 1 on the first 8 KiB) against compressing whole.
//!
//! `compression-bench cdc NAME=FILE_A[,FILE_B]` compares fixed 64 KiB chunks with
//! FastCDC (min 16, avg 64, max 256 KiB): new bytes a second version stores. One file:
//! the second version is the first with 57 bytes inserted at offset 4096; two files: a
//! real pair. CPU is this thread's (CLOCK_THREAD_CPUTIME_ID).

use std::collections::HashSet;
use std::path::Path;

const CHUNK: usize = 64 << 10;
/// The skip rule: keep the compressed form only if it saves at least 1/8.
fn keeps(plain: usize, packed: usize) -> bool {
    packed <= plain - plain / 8
}

fn cpu() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

fn walk(dir: &Path, exts: &[String], out: &mut Vec<std::path::PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    let mut v: Vec<_> = rd.filter_map(|e| e.ok()).collect();
    v.sort_by_key(|e| e.file_name());
    for e in v {
        let Ok(ft) = e.file_type() else { continue };
        let p = e.path();
        if ft.is_dir() {
            walk(&p, exts, out);
        } else if ft.is_file() {
            let name = p.to_string_lossy().to_lowercase();
            if exts.is_empty() || exts.iter().any(|x| name.ends_with(x.as_str())) {
                out.push(p);
            }
        }
    }
}

/// Chunks of a data set, at most `max` bytes.
fn load(spec: &str, max: usize) -> Vec<Vec<u8>> {
    let mut chunks = Vec::new();
    if let Some(mib) = spec.strip_prefix("random:") {
        let n: usize = mib.parse().unwrap_or(16) << 20;
        let mut x = blake3::Hasher::new().update(b"random").finalize_xof();
        for _ in 0..n / CHUNK {
            let mut c = vec![0u8; CHUNK];
            x.fill(&mut c);
            chunks.push(c);
        }
        return chunks;
    }
    let (path, exts) = match spec.split_once(':') {
        Some((p, e)) => (p, e.split(',').map(|s| s.to_lowercase()).collect::<Vec<_>>()),
        None => (spec, Vec::new()),
    };
    let mut files = Vec::new();
    for p in path.split('+') {
        let p = Path::new(p);
        if p.is_file() { files.push(p.to_path_buf()) } else { walk(p, &exts, &mut files) }
    }
    let mut total = 0;
    for f in files {
        let Ok(data) = std::fs::read(&f) else { continue };
        for c in data.chunks(CHUNK) {
            if c.iter().all(|&b| b == 0) {
                continue; // holes are not stored
            }
            total += c.len();
            chunks.push(c.to_vec());
        }
        if total >= max {
            break;
        }
    }
    chunks
}

fn chunks_cmd(args: &[String]) {
    let max = std::env::var("MAX_MIB").ok().and_then(|s| s.parse().ok()).unwrap_or(64usize) << 20;
    println!("| set | MiB | chunks | level | stored/plain (skip rule) | chunks kept compressed | compress CPU ms/MiB | decompress CPU ms/MiB |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut probes = Vec::new();
    for a in args {
        let (name, spec) = a.split_once('=').expect("NAME=SPEC");
        let chunks = load(spec, max);
        let plain: usize = chunks.iter().map(|c| c.len()).sum();
        let mib = plain as f64 / (1 << 20) as f64;
        for level in [1, 3, 6] {
            let mut comp = zstd::bulk::Compressor::new(level).unwrap();
            let mut stored = 0usize;
            let mut kept = 0usize;
            let mut packed_all = Vec::with_capacity(chunks.len());
            let t = cpu();
            for c in &chunks {
                let z = comp.compress(c).unwrap();
                if keeps(c.len(), z.len()) {
                    stored += z.len();
                    kept += 1;
                    packed_all.push(Some(z));
                } else {
                    stored += c.len();
                    packed_all.push(None);
                }
            }
            let ct = cpu() - t;
            let mut de = zstd::bulk::Decompressor::new().unwrap();
            let mut buf = vec![0u8; CHUNK];
            let t = cpu();
            for (c, z) in chunks.iter().zip(&packed_all) {
                if let Some(z) = z {
                    let n = de.decompress_to_buffer(z, &mut buf[..c.len()]).unwrap();
                    assert_eq!(n, c.len());
                }
            }
            let dt = cpu() - t;
            println!(
                "| {name} | {mib:.1} | {} | {level} | {:.3} | {:.0}% | {:.2} | {:.2} |",
                chunks.len(),
                stored as f64 / plain as f64,
                100.0 * kept as f64 / chunks.len() as f64,
                ct * 1e3 / mib,
                dt * 1e3 / mib
            );
        }
        // The yardstick: BLAKE3 of every chunk (what a write already pays).
        let t = cpu();
        for c in &chunks {
            std::hint::black_box(blake3::hash(c));
        }
        let bt = cpu() - t;
        // Probe: level 1 on the first 8 KiB; compress whole (level 3) only if it saved 1/8.
        let mut p1 = zstd::bulk::Compressor::new(1).unwrap();
        let mut c3 = zstd::bulk::Compressor::new(3).unwrap();
        let (mut stored, mut lost) = (0usize, 0usize);
        let t = cpu();
        for c in &chunks {
            let head = &c[..c.len().min(8192)];
            let z = p1.compress(head).unwrap();
            if keeps(head.len(), z.len()) {
                let z = c3.compress(c).unwrap();
                stored += if keeps(c.len(), z.len()) { z.len() } else { c.len() };
            } else {
                stored += c.len();
            }
        }
        let pt = cpu() - t;
        // Bytes the probe gave up (chunks it skipped that level 3 would have shrunk).
        for c in &chunks {
            let head = &c[..c.len().min(8192)];
            if !keeps(head.len(), p1.compress(head).unwrap().len()) {
                let z = c3.compress(c).unwrap();
                if keeps(c.len(), z.len()) {
                    lost += c.len() - z.len();
                }
            }
        }
        probes.push(format!(
            "| {name} | {:.2} | {:.2} | {:.3} | {:.2}% |",
            bt * 1e3 / mib,
            pt * 1e3 / mib,
            stored as f64 / plain as f64,
            100.0 * lost as f64 / plain as f64
        ));
    }
    println!();
    println!("| set | BLAKE3 CPU ms/MiB | probe then level 3, CPU ms/MiB | stored/plain | bytes the probe lost |");
    println!("|---|---:|---:|---:|---:|");
    for p in probes {
        println!("{p}");
    }
}

fn fixed(data: &[u8]) -> Vec<(usize, usize)> {
    (0..data.len()).step_by(CHUNK).map(|o| (o, (data.len() - o).min(CHUNK))).collect()
}

fn cdc(data: &[u8]) -> Vec<(usize, usize)> {
    fastcdc::v2020::FastCDC::new(data, 16 << 10, 64 << 10, 256 << 10).map(|c| (c.offset, c.length)).collect()
}

fn new_bytes(a: &[u8], b: &[u8], cut: fn(&[u8]) -> Vec<(usize, usize)>) -> (usize, usize, usize) {
    let have: HashSet<[u8; 32]> = cut(a).iter().map(|&(o, l)| *blake3::hash(&a[o..o + l]).as_bytes()).collect();
    let cb = cut(b);
    let mut new = 0;
    let mut n = 0;
    let mut seen = HashSet::new();
    for &(o, l) in &cb {
        let h = *blake3::hash(&b[o..o + l]).as_bytes();
        if !have.contains(&h) && seen.insert(h) {
            new += l;
            n += 1;
        }
    }
    (new, n, cb.len())
}

fn cdc_cmd(args: &[String]) {
    println!("| pair | MiB | chunking | chunks (v2) | new chunks | new bytes stored for v2 | cut CPU ms/MiB |");
    println!("|---|---:|---|---:|---:|---:|---:|");
    for a in args {
        let (name, files) = a.split_once('=').expect("NAME=FILE[,FILE]");
        let (v1, v2) = match files.split_once(',') {
            Some((x, y)) => (std::fs::read(x).unwrap(), std::fs::read(y).unwrap()),
            None => {
                let v1 = std::fs::read(files).unwrap();
                let mut v2 = v1[..4096].to_vec();
                v2.extend_from_slice(b"an inserted line, 57 bytes long, near the start of it.\n\n");
                v2.extend_from_slice(&v1[4096..]);
                (v1, v2)
            }
        };
        let mib = v1.len() as f64 / (1 << 20) as f64;
        for (label, cut) in [("fixed 64 KiB", fixed as fn(&[u8]) -> Vec<(usize, usize)>), ("FastCDC 16/64/256 KiB", cdc)] {
            let t = cpu();
            std::hint::black_box(cut(&v1));
            let ct = cpu() - t;
            let (new, n, total) = new_bytes(&v1, &v2, cut);
            println!(
                "| {name} | {mib:.1} | {label} | {total} | {n} | {:.2} MiB ({:.1}%) | {:.2} |",
                new as f64 / (1 << 20) as f64,
                100.0 * new as f64 / v2.len() as f64,
                ct * 1e3 / mib
            );
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("chunks") => chunks_cmd(&args[1..]),
        Some("cdc") => cdc_cmd(&args[1..]),
        _ => eprintln!("usage: compression-bench chunks NAME=SPEC... | cdc NAME=FILE[,FILE]..."),
    }
}
