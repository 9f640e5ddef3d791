//! `sqlvault-bench`: benchmarks that measure the choices baked into sqlvault's
//! defaults on the machine at hand, and write the results to `bench-results/` (JSON)
//! and `docs/benchmarks.md` (Markdown).
//!
//! * `chunk-sweep`: write and read throughput, CPU and memory per chunk size and page
//!   size, against a plain file on the same disk ([`sweep`]).
//! * `kdf`: the cost of one Argon2id passphrase derivation per parameter set ([`kdf`]).
//! * `parallel`: 1..8 threads reading, and doing small durable writes through the
//!   group commit, against plain files ([`parallel`]).
//! * `open`, `stream`, `blocks`, `metadata`, `appsql`, `peers`: the scenarios of the four
//!   articles and of the peer file systems, each against baselines measured in the same
//!   run ([`open`], [`stream`], [`blocks`], [`metadata`], [`appsql`], [`peers`]), on the shared
//!   machinery of [`harness`] and [`chart`].
//! * `all [--quick]`: every scenario in turn, and the table of targets ([`all`]).
//! * `snapshot`: time and vault growth of a snapshot of many small files ([`snapshot`]).
//! * `remote`: push and clone through an S3-compatible server vs raw uploads ([`remote`]).
//! * `tree`: whole-tree operations (put, get, restore, rm -r, snapshot rm, fsck) at two
//!   tree sizes, per-file cost compared ([`tree`]).
//! * `batch`: many tag operations as one `sqlvault` call each, as `batch`, as
//!   `tag --from` ([`batch`]).
//!
//! Build with `cargo build --release -p sqlvault-bench`; debug builds measure nothing
//! useful.

mod all;
mod appsql;
mod batch;
mod bindings;
mod blocks;
mod chart;
mod data;
mod error;
mod harness;
mod jvm;
mod kdf;
mod metadata;
mod open;
mod parallel;
mod peers;
mod remote;
mod report;
mod snapshot;
mod stream;
mod sweep;
mod sys;
mod tree;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "sqlvault-bench", version, about = "Benchmarks for sqlvault's defaults")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Write and read one large file per chunk size (4 KiB..1 MiB) and page size,
    /// against a plain-file baseline on the same disk.
    ChunkSweep(sweep::SweepArgs),
    /// Time one Argon2id key derivation for a grid of parameters.
    Kdf(kdf::KdfArgs),
    /// 1, 2, 4, 8 threads reading, and doing small durable writes (group commit),
    /// against plain files on the same disk (article 002).
    Parallel(parallel::ParallelArgs),
    /// Open + first write, subsequent write, second connection: SQLite, SQLite with
    /// SQLCipher 4's PBKDF2 per connection, sqlvault (article 000).
    Open(open::OpenArgs),
    /// 2 MiB and 256 MiB files in 256 B..1 MiB application writes, against the article's
    /// ladder on a bare, unencrypted SQLite table (article 001).
    Stream(stream::StreamArgs),
    /// The Block/Blockset/BlocksetEntry workload at 1e5..1e7 rows and batch sizes
    /// 1..1e5: SQLite defaults, tuned SQLite, SQLite with sqlvault's settings, sqlvault (article 002).
    Blocks(blocks::BlocksArgs),
    /// 10,000 objects x 20 tags: one commit per tag, per object, sqlvault (article 003).
    Metadata(metadata::MetadataArgs),
    /// 2,000 objects x 20 rows in an application table: one commit per row, per object,
    /// for all; sqlvault's SQL API against plain SQLite with its settings (article 003).
    Appsql(appsql::AppSqlArgs),
    /// 256 MiB file and 10,000 small files through a plain directory, gocryptfs, cryfs,
    /// a sqlvault FUSE mount and the sqlvault library.
    Peers(peers::PeersArgs),
    /// Every scenario in turn, with the table of targets vs measured.
    All(all::AllArgs),
    /// Time and vault growth of one snapshot of a 10,000-file tree, against writing it.
    Snapshot(snapshot::SnapshotArgs),
    /// Push and clone through an S3-compatible server on loopback, against raw uploads.
    Remote(remote::RemoteArgs),
    /// A 256 MiB file through the Python binding's file objects vs the Rust API.
    Bindings(bindings::BindingsArgs),
    /// A 256 MiB file through the JVM binding's streams vs the Rust API.
    Jvm(jvm::JvmArgs),
    /// Whole-tree operations (put, get, fsck, push and pull, snapshots, restore, rm -r,
    /// ls -lR and rm -rf through a mount) at 5,000 and 50,000 files with 0, 1 and 10
    /// snapshots: per-file cost at the large size within 1.5x of the small.
    Tree(tree::TreeArgs),
    /// 10,000 tag operations as one `sqlvault tag` call each, as `sqlvault batch`, and as
    /// `tag --from`: CPU and peak RSS against the per-call way.
    Batch(batch::BatchArgs),
    /// Redraw charts and rewrite Markdown sections from scenario JSON files (measures nothing).
    Render(harness::RenderArgs),
    /// One phase of one chunk-sweep configuration (run by chunk-sweep in a child process).
    #[command(hide = true)]
    RunOne(sweep::RunOneArgs),
    /// One case of one scenario (run by the scenarios in a child process).
    #[command(hide = true)]
    Case(harness::CaseArgs),
    /// Serves a sqlvault FUSE mount until stdin closes (run by `peers` and `tree`).
    #[command(hide = true)]
    ServeMount(peers::ServeMountArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Cmd::ChunkSweep(a) => sweep::chunk_sweep(a),
        Cmd::Kdf(a) => kdf::kdf(a),
        Cmd::Parallel(a) => parallel::parallel(a),
        Cmd::Snapshot(a) => snapshot::snapshot(a),
        Cmd::Remote(a) => remote::run(a).map(drop),
        Cmd::Bindings(a) => bindings::run(a).map(drop),
        Cmd::Jvm(a) => jvm::run(a).map(drop),
        Cmd::Tree(a) => tree::tree(a),
        Cmd::Batch(a) => batch::batch(a),
        Cmd::RunOne(a) => sweep::run_one(a),
        Cmd::Open(a) => open::run(a).map(drop),
        Cmd::Stream(a) => stream::run(a).map(drop),
        Cmd::Blocks(a) => blocks::run(a).map(drop),
        Cmd::Metadata(a) => metadata::run(a).map(drop),
        Cmd::Appsql(a) => appsql::run(a).map(drop),
        Cmd::Peers(a) => peers::run(a).map(drop),
        Cmd::All(a) => all::all(a),
        Cmd::Render(a) => harness::render(a),
        Cmd::Case(a) => harness::run_case(a),
        Cmd::ServeMount(a) => peers::serve_mount(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sqlvault-bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}
