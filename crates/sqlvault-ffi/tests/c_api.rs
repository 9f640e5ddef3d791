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
    let out = Command::new(exe)
        .arg(scratch.path())
        .env("LD_LIBRARY_PATH", lib_dir())
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
