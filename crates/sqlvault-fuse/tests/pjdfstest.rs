//! The POSIX conformance suite pjdfstest (its Rust rewrite, crates.io `pjdfstest`
//! 0.2.2, installed by `scripts/ensure-pjdfstest.sh` into `target/tools/bin`) run
//! against a real mount: every test must pass (the read-only remount tests and
//! `link_count_max` skip themselves, as they do on ext4 and tmpfs). The suite switches
//! to two unprivileged users, so it runs as root on a mount with `allow_other`; the
//! secondary file system for its `EXDEV` tests is a host directory.
//!
//! Set `SQLVAULT_PJDFSTEST` to another pjdfstest binary; without one (or not as root)
//! the test says so and skips: `scripts/test.sh` always installs it and runs as root.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;

use common::TestMount;
use sqlvault_fuse::MountOptions;

fn binary() -> Option<PathBuf> {
    let p = std::env::var_os("SQLVAULT_PJDFSTEST")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/tools/bin/pjdfstest"));
    p.exists().then_some(p)
}

fn exists(db: &str, name: &str) -> bool {
    Command::new("getent").args([db, name]).output().map(|o| o.status.success()).unwrap_or(false)
}

#[test]
fn pjdfstest_passes_on_the_mount() {
    require_fuse!();
    let Some(pjdfstest) = binary() else {
        eprintln!("SKIPPED: pjdfstest is not installed (scripts/ensure-pjdfstest.sh installs it)");
        return;
    };
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: pjdfstest switches users, which needs root");
        return;
    }
    let group = if exists("group", "nogroup") { "nogroup" } else { "nobody" };
    assert!(exists("passwd", "nobody") && exists("passwd", "daemon"), "users nobody and daemon are needed");
    let mut m = TestMount::with_options(MountOptions { allow_other: true, ..Default::default() });
    // The unprivileged users must reach the mount point and the secondary directory.
    std::fs::set_permissions(m.tv.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let work = m.path("pjd");
    std::fs::create_dir(&work).unwrap();
    std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o777)).unwrap();
    let secondary = m.tv.scratch("secondary");
    std::fs::set_permissions(&secondary, std::fs::Permissions::from_mode(0o777)).unwrap();
    let config = m.tv.scratch("config").join("pjdfstest.toml");
    std::fs::write(
        &config,
        format!(
            "[features]\nposix_fallocate = {{}}\nutime_now = {{}}\nutimensat = {{}}\nrename_ctime = {{}}\n\n\
             [settings]\nnaptime = 0.01\nallow_remount = false\n\n\
             [dummy_auth]\nentries = [[\"nobody\", \"{group}\"], [\"daemon\", \"daemon\"]]\n"
        ),
    )
    .unwrap();
    let out = Command::new(&pjdfstest)
        .arg("-c")
        .arg(&config)
        .arg("-p")
        .arg(&work)
        .arg("-s")
        .arg(&secondary)
        .current_dir(&work)
        .output()
        .expect("run pjdfstest");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let failed: Vec<&str> = stdout.lines().filter(|l| l.trim_end().ends_with("FAILED")).collect();
    let summary = stdout.lines().find(|l| l.starts_with("Summary:")).unwrap_or("no summary");
    eprintln!("pjdfstest on the mount: {summary}");
    assert!(
        out.status.success() && failed.is_empty() && summary.contains(" 0 failed"),
        "pjdfstest: {summary}\nfailed:\n{}\nstderr:\n{}",
        failed.join("\n"),
        String::from_utf8_lossy(&out.stderr)
    );
    // Every test passed, or skipped itself for a documented reason; none was left out.
    let passed: u32 = summary.split(", ").find_map(|p| p.strip_suffix(" passed")?.parse().ok()).unwrap_or(0);
    assert!(passed >= 380, "only {passed} tests passed: {summary}");
    std::fs::remove_dir_all(&work).ok();
    m.unmount_and_check();
}
