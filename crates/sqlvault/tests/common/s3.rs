//! A real S3-compatible server (VersityGW, posix backend) on loopback for the
//! replication tests: one per test, on a free port, over a temporary directory, with
//! test credentials; killed and removed on drop. `scripts/test.sh` installs the server
//! (`go install github.com/versity/versitygw/cmd/versitygw@v1.8.0`); without it the
//! tests fail with a message saying so, they do not skip.
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Credentials of the test server's root account (test-only values).
pub const ACCESS_KEY: &str = "sqlvault-test-access";
pub const SECRET_KEY: &str = "sqlvault-test-secret-key";

pub struct S3Server {
    child: Child,
    /// `http://127.0.0.1:PORT`
    pub endpoint: String,
    /// The posix backend's root: one directory per bucket, one file per object.
    pub root: tempfile::TempDir,
}

/// The server binary: `$SQLVAULT_VERSITYGW`, else `$GOPATH/bin` or `~/go/bin`, else `PATH`.
pub fn binary() -> PathBuf {
    if let Some(p) = std::env::var_os("SQLVAULT_VERSITYGW") {
        return p.into();
    }
    let gopath = std::env::var_os("GOPATH")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join("go")));
    if let Some(p) = gopath.map(|g| g.join("bin/versitygw")).filter(|p| p.exists()) {
        return p;
    }
    PathBuf::from("versitygw")
}

/// Sets the client credentials every remote in this process uses.
pub fn set_client_env() {
    std::env::set_var("AWS_ACCESS_KEY_ID", ACCESS_KEY);
    std::env::set_var("AWS_SECRET_ACCESS_KEY", SECRET_KEY);
    std::env::set_var("AWS_REGION", "us-east-1");
}

impl S3Server {
    pub fn start() -> S3Server {
        S3Server::start_with(&[])
    }

    /// A server that logs every request it serves to `log` (its access log).
    pub fn start_logged(log: &Path) -> S3Server {
        S3Server::start_with(&["--access-log".as_ref(), log.as_os_str()])
    }

    fn start_with(extra: &[&std::ffi::OsStr]) -> S3Server {
        set_client_env();
        let root = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = spawn(root.path(), port, extra);
        S3Server { child, endpoint: format!("http://127.0.0.1:{port}"), root }
    }

    /// Kills the server (SIGKILL), as a network failure would look to a client.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the server again on the same port and directory: every object is still there.
    pub fn restart(&mut self) {
        self.stop();
        let port: u16 = self.endpoint.rsplit(':').next().unwrap().parse().unwrap();
        self.child = spawn(self.root.path(), port, &[]);
    }

    /// Creates bucket `name` (a directory of the posix backend); returns `s3://name`.
    pub fn bucket(&self, name: &str) -> String {
        std::fs::create_dir(self.root.path().join(name)).unwrap();
        format!("s3://{name}")
    }

    /// Every object file under `bucket/prefix` (the backend's own temporary and
    /// metadata entries excluded), sorted.
    pub fn objects(&self, bucket: &str, prefix: &str) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut stack = vec![self.root.path().join(bucket).join(prefix)];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for e in entries {
                let e = e.unwrap();
                if e.file_name().to_string_lossy().starts_with(".sgw") {
                    continue;
                }
                let t = e.file_type().unwrap();
                if t.is_dir() {
                    stack.push(e.path());
                } else if t.is_file() {
                    out.push(e.path());
                }
            }
        }
        out.sort();
        out
    }

    /// Objects under `bucket/prefix/under` (e.g. `data`).
    pub fn count(&self, bucket: &str, prefix: &str, under: &str) -> usize {
        self.objects(bucket, &format!("{prefix}/{under}")).len()
    }
}

/// Starts the server over `root` on `port` and waits until it listens.
fn spawn(root: &Path, port: u16, extra: &[&std::ffi::OsStr]) -> Child {
    let bin = binary();
    let mut child = Command::new(&bin)
        .arg("--port")
        .arg(format!("127.0.0.1:{port}"))
        .args(extra)
        .arg("posix")
        .arg(root)
        .env("ROOT_ACCESS_KEY", ACCESS_KEY)
        .env("ROOT_SECRET_KEY", SECRET_KEY)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot start the S3 test server {} ({e}): run scripts/test.sh, which installs it, or \
                 `go install github.com/versity/versitygw/cmd/versitygw@v1.8.0`",
                bin.display()
            )
        });
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the S3 test server {} exited at start: {status}", bin.display());
        }
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        assert!(Instant::now() < deadline, "the S3 test server did not listen on port {port} within 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
