//! The C API from C: compiles `tests/c/capi_test.c` with the system C compiler against
//! `include/sqlvault.h`, links it to the shared library cargo built for this test run
//! (`target/<profile>/deps/libsqlvault_ffi.so`, beside this test: the copy in
//! `target/<profile>/` is only refreshed by `cargo build`), and runs it on a scratch
//! directory. Then
//! again under AddressSanitizer when the compiler has it, which checks the library's
//! reads and writes of the caller's buffers (memcpy is intercepted) and frees.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `target/<profile>/deps`, where this test binary and the library it was built with live.
fn lib_dir() -> PathBuf {
    std::env::current_exe().unwrap().parent().unwrap().to_path_buf()
}

fn compile(out: &Path, extra: &[&str]) -> std::process::Output {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = lib_dir();
    Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-g"])
        .args(extra)
        .arg("-I")
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join("tests/c/capi_test.c"))
        .arg("-o")
        .arg(out)
        .arg("-L")
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lsqlvault_ffi", "-lpthread"])
        .output()
        .expect("a C compiler (cc) on PATH")
}

fn run(exe: &Path, env: &[(&str, &str)]) -> String {
    let scratch = tempfile::tempdir().unwrap();
    // Cargo's LD_LIBRARY_PATH also names `target/<profile>`, whose copy may be stale.
    // The format-1 vaults `test_upgrade` converts (copies of them).
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sqlvault/tests/fixtures");
    let out = Command::new(exe)
        .arg(scratch.path())
        .env("LD_LIBRARY_PATH", lib_dir())
        .env("SQLVAULT_FORMAT1_FIXTURES", fixtures)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{} failed ({}):\n{stdout}\n{stderr}", exe.display(), out.status);
    assert!(stdout.contains(", 0 failed"), "{stdout}\n{stderr}");
    stdout
}

#[test]
fn the_c_program_calls_every_function_of_the_header() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let header = std::fs::read_to_string(crate_dir.join("include/sqlvault.h")).unwrap();
    let program = std::fs::read_to_string(crate_dir.join("tests/c/capi_test.c")).unwrap();
    let declared: Vec<&str> = header
        .lines()
        .filter(|l| !l.starts_with([' ', '/', '#', '}']))
        .filter_map(|l| l.split('(').next().filter(|_| l.contains('(')))
        .filter_map(|d| d.rsplit([' ', '*']).next())
        .filter(|name| name.starts_with("sqlvault_"))
        .collect();
    assert!(declared.len() > 80, "{declared:?}");
    let missing: Vec<_> = declared.iter().filter(|f| !program.contains(&format!("{f}("))).collect();
    assert!(missing.is_empty(), "tests/c/capi_test.c never calls {missing:?}");
}

#[test]
fn the_c_program_passes() {
    assert!(
        lib_dir().join("libsqlvault_ffi.so").exists(),
        "no libsqlvault_ffi.so beside the test binary in {}",
        lib_dir().display()
    );
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("capi_test");
    let out = compile(&exe, &[]);
    assert!(out.status.success(), "cc failed:\n{}", String::from_utf8_lossy(&out.stderr));
    println!("{}", run(&exe, &[]));

    let asan = dir.path().join("capi_test_asan");
    let out = compile(&asan, &["-fsanitize=address,undefined", "-fno-omit-frame-pointer"]);
    if !out.status.success() {
        eprintln!("no AddressSanitizer here, skipped:\n{}", String::from_utf8_lossy(&out.stderr));
        return;
    }
    // Leaks are not checked: Rust keeps some allocations for the process's life.
    println!("{}", run(&asan, &[("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=1")]));
}

/// CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid rusage to fill.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

/// A measurement, not a check (ignored): streams `SQLVAULT_BENCH_MIB` MiB (default 256)
/// in 256 KiB buffers through the C API (`tests/c/capi_bench.c`) and through the Rust
/// library's `FileHandle`, writing then reading, and prints seconds and CPU seconds of
/// each. `cargo test -p sqlvault-ffi --test c_api -- --ignored --nocapture`.
#[test]
#[ignore]
fn c_streams_as_fast_as_rust() {
    let mib: usize = std::env::var("SQLVAULT_BENCH_MIB").ok().and_then(|s| s.parse().ok()).unwrap_or(256);
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("capi_bench");
    let lib = lib_dir();
    let out = Command::new("cc")
        .args(["-std=c11", "-O2", "-D_POSIX_C_SOURCE=200809L", "-I"])
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join("tests/c/capi_bench.c"))
        .arg("-o")
        .arg(&exe)
        .arg("-L")
        .arg(&lib)
        .args(["-lsqlvault_ffi"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let c_dir = tempfile::tempdir().unwrap();
    let out = Command::new(&exe).arg(c_dir.path()).arg(mib.to_string()).env("LD_LIBRARY_PATH", &lib).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    print!("{}", String::from_utf8_lossy(&out.stdout));

    let rust_dir = tempfile::tempdir().unwrap();
    let mut opts = sqlvault::CreateOptions::default();
    opts.kdf.memory_kib = 1024;
    opts.kdf.iterations = 1;
    let v = sqlvault::Vault::create(rust_dir.path().join("bench.vault"), &sqlvault::Secret::passphrase("pw"), &opts)
        .unwrap();
    let mut buf: Vec<u8> = (0..256 * 1024).map(|i: usize| (i * 31 + 7) as u8).collect();
    let pieces = mib * 4;
    let (t0, c0) = (std::time::Instant::now(), cpu_seconds());
    let w = sqlvault::FileOptions::new().write(true).create(true);
    let h = v.open_file("/big", &w).unwrap();
    for i in 0..pieces {
        // Distinct content in every 4 KiB, as the C program writes.
        for k in (0..buf.len()).step_by(4096) {
            buf[k..k + 8].copy_from_slice(&(i as i64).to_ne_bytes());
        }
        let mut n = 0;
        while n < buf.len() {
            n += h.write_at((i * buf.len() + n) as u64, &buf[n..]).unwrap();
        }
    }
    h.close().unwrap();
    println!("rust write {mib} {:.3} {:.3}", t0.elapsed().as_secs_f64(), cpu_seconds() - c0);
    let (t0, c0) = (std::time::Instant::now(), cpu_seconds());
    let h = v.open_file("/big", &sqlvault::FileOptions::new().read(true)).unwrap();
    for i in 0..pieces {
        let mut n = 0;
        while n < buf.len() {
            let (at, rest) = ((i * buf.len() + n) as u64, &mut buf[n..]);
            n += h.read_at(at, rest).unwrap();
        }
    }
    h.close().unwrap();
    println!("rust read {mib} {:.3} {:.3}", t0.elapsed().as_secs_f64(), cpu_seconds() - c0);
}
