//! Helpers shared by the integration tests: real vault files in temp dirs, with a
//! cheap KDF so hundreds of opens stay fast (the KDF's cost is measured elsewhere).
#![allow(dead_code)]

pub mod s3;

use sqlvault::secrets::KdfParams;
use sqlvault::{CreateOptions, EngineConfig, Secret, Vault};

pub fn fast_kdf() -> KdfParams {
    KdfParams { memory_kib: 256, iterations: 1, parallelism: 1 }
}

pub fn opts(chunk: u32) -> CreateOptions {
    CreateOptions { chunk_size: chunk, page_size: 4096.max(chunk.min(65536)), kdf: fast_kdf(), ..Default::default() }
}

/// The default settings without the background reclaimer: deleted content waits for
/// `wipe_deleted`, `compact` or `close`, so what is pending is deterministic.
pub fn manual_wipe() -> EngineConfig {
    EngineConfig { background_wipe: false, ..EngineConfig::default() }
}

pub fn pass() -> Secret {
    Secret::passphrase("test passphrase")
}

pub struct TestVault {
    pub dir: tempfile::TempDir,
    pub path: std::path::PathBuf,
}

impl TestVault {
    pub fn new(chunk: u32) -> (TestVault, Vault) {
        TestVault::new_with(chunk, EngineConfig::default())
    }

    /// [`TestVault::new`] with the vault created (and so opened) with `config`.
    pub fn new_with(chunk: u32, config: EngineConfig) -> (TestVault, Vault) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.vault");
        let v = Vault::create(&path, &pass(), &CreateOptions { engine: config, ..opts(chunk) }).unwrap();
        (TestVault { dir, path }, v)
    }

    pub fn reopen(&self) -> Vault {
        self.reopen_with(EngineConfig::default())
    }

    pub fn reopen_with(&self, config: EngineConfig) -> Vault {
        Vault::open(&self.path, &pass(), config).unwrap()
    }
}

/// splitmix64: tiny, deterministic, good enough to pick operations, offsets and bytes
/// in the fault tests (which add their own helpers with `impl Rng` blocks).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A clone of the newest commit at `url` on `server`, into `dir/name`, opened with the
/// tests' passphrase.
pub fn clone(server: &s3::S3Server, url: &str, dir: &std::path::Path, name: &str) -> sqlvault::Vault {
    sqlvault::Vault::clone_remote(
        url,
        Some(&server.endpoint),
        dir.join(name),
        &pass(),
        sqlvault::EngineConfig::default(),
        &sqlvault::remote::At::Newest,
        &sqlvault::Ops::default(),
    )
    .unwrap()
}
