//! What several scenarios stand up around the thing measured: an S3-compatible server
//! on loopback (VersityGW, for `remote` and `tree`) and FUSE mounts served by child
//! processes (sqlvault's own through the hidden `serve-mount` subcommand, for `peers` and
//! `tree`; gocryptfs and cryfs in `peers`).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sqlvault::{EngineConfig, Secret, Vault};

use crate::error::{Context, Result};

const ACCESS_KEY: &str = "sqlvault-bench-access";
const SECRET_KEY: &str = "sqlvault-bench-secret";

/// The server, killed on drop: its buckets are the directories under `root`.
pub struct Server {
    child: Child,
    pub root: tempfile::TempDir,
    pub endpoint: String,
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

/// Starts VersityGW on a free loopback port, its buckets in a new directory under
/// `dir`, and sets the credentials and region in this process's environment (which
/// the cases' processes inherit).
pub fn start_server(dir: &Path) -> Result<Server> {
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

/// Arguments of the hidden `serve-mount` subcommand.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeMountArgs {
    #[arg(long)]
    pub vault: PathBuf,
    #[arg(long)]
    pub key_file: PathBuf,
    #[arg(long)]
    pub mountpoint: PathBuf,
    /// The mount's commit window, milliseconds.
    #[arg(long, default_value_t = sqlvault_fuse::DEFAULT_COMMIT_WINDOW.as_millis() as u64)]
    pub commit_window_ms: u64,
    /// Hold the vault alone while mounted (`sqlvault mount --exclusive`).
    #[arg(long)]
    pub exclusive: bool,
}

/// Serves a sqlvault FUSE mount: prints `ready` once mounted, unmounts (committing
/// every open file and checkpointing) when its standard input closes.
pub fn serve_mount(a: &ServeMountArgs) -> Result<()> {
    let config = EngineConfig { exclusive: a.exclusive, ..EngineConfig::default() };
    let vault = Vault::open(&a.vault, &Secret::from_key_file(&a.key_file)?, config)?;
    let opts = sqlvault_fuse::MountOptions {
        commit_window: Duration::from_millis(a.commit_window_ms),
        ..sqlvault_fuse::MountOptions::default()
    };
    let mounted = sqlvault_fuse::mount(vault, &a.mountpoint, &opts)?;
    println!("ready");
    std::io::stdout().flush().context("cannot write to stdout")?;
    let mut rest = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut rest);
    mounted.unmount()?;
    // The last line: the peak RSS of this process, its unmount (the vault's close) included.
    eprintln!("peak_rss_kib {}", crate::sys::vm_hwm_kib()?);
    Ok(())
}

/// A mounted file system served by a child process; unmounted on drop.
pub struct Mount {
    /// The file system's name, as the reports name it.
    pub label: &'static str,
    pub mountpoint: PathBuf,
    pub child: Child,
    /// Served by `serve-mount`, which unmounts when its standard input closes (the others
    /// are unmounted with `fusermount3 -u`).
    pub sqlvault: bool,
}

impl Mount {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Unmounts and returns the peak RSS a `serve-mount` child reported as it ended
    /// (its whole life, the unmount included), if it did.
    pub fn unmount_reporting_rss(mut self) -> Option<u64> {
        let err = self.child.stderr.take();
        self.unmount();
        let mut text = String::new();
        err?.read_to_string(&mut text).ok()?;
        text.lines().rev().find_map(|l| l.strip_prefix("peak_rss_kib ")?.trim().parse().ok())
    }

    fn unmount(&mut self) {
        if self.sqlvault {
            drop(self.child.stdin.take());
        } else {
            let _ = Command::new("fusermount3").arg("-u").arg(&self.mountpoint).stderr(Stdio::null()).status();
            if is_mounted(&self.mountpoint) {
                let _ = Command::new("umount").arg(&self.mountpoint).stderr(Stdio::null()).status();
            }
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if is_mounted(&self.mountpoint) {
            let _ = Command::new("umount").arg("-l").arg(&self.mountpoint).status();
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        self.unmount();
    }
}

pub fn is_mounted(p: &Path) -> bool {
    let Ok(p) = p.canonicalize() else { return false };
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else { return false };
    let want = p.to_string_lossy().replace(' ', "\\040");
    info.lines().any(|l| l.split(' ').nth(4) == Some(want.as_str()))
}

pub fn wait_mounted(mnt: &Path, child: &mut Child, what: &str, limit: Duration) -> Result<()> {
    let t = Instant::now();
    while t.elapsed() < limit {
        if is_mounted(mnt) {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            if let Some(e) = child.stderr.as_mut() {
                let _ = e.read_to_string(&mut err);
            }
            crate::bail!("{what} exited ({status}) before mounting: {}", err.trim());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    crate::bail!("{what} did not mount {} within {:?}", mnt.display(), limit)
}

/// Starts `serve-mount` (this program, `exe`) of the existing vault `vault`, opened
/// with `key_file` (alone if `exclusive`), on `mnt`, and waits until it says it is ready.
pub fn serve_mount_child(
    exe: &Path,
    vault: &Path,
    key_file: &Path,
    mnt: &Path,
    window_ms: u64,
    exclusive: bool,
) -> Result<Child> {
    let mut cmd = Command::new(exe);
    cmd.arg("serve-mount");
    if exclusive {
        cmd.arg("--exclusive");
    }
    let mut c = cmd
        .arg("--vault")
        .arg(vault)
        .arg("--key-file")
        .arg(key_file)
        .arg("--mountpoint")
        .arg(mnt)
        .arg("--commit-window-ms")
        .arg(window_ms.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start the sqlvault mount")?;
    let mut line = String::new();
    if let Some(o) = c.stdout.take() {
        let _ = BufReader::new(o).read_line(&mut line);
    }
    if line.trim() != "ready" {
        let mut err = String::new();
        if let Some(e) = c.stderr.as_mut() {
            let _ = e.read_to_string(&mut err);
        }
        let _ = c.kill();
        crate::bail!("the sqlvault mount did not start: {}", err.trim());
    }
    Ok(c)
}

/// Mounts the existing vault `vault` (opened with `key_file`) on `mnt` in a
/// `serve-mount` child process with the default commit window.
pub fn mount_vault(exe: &Path, vault: &Path, key_file: &Path, mnt: &Path) -> Result<Mount> {
    std::fs::create_dir_all(mnt).with_context(|| format!("cannot create {}", mnt.display()))?;
    let window = sqlvault_fuse::DEFAULT_COMMIT_WINDOW.as_millis() as u64;
    let mut child = serve_mount_child(exe, vault, key_file, mnt, window, false)?;
    wait_mounted(mnt, &mut child, "sqlvault FUSE", Duration::from_secs(180))?;
    Ok(Mount { label: "sqlvault FUSE", mountpoint: mnt.to_path_buf(), child, sqlvault: true })
}
