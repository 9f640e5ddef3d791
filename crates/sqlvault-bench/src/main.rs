//! `sqlvault-bench`: benchmarks that measure the choices baked into sqlvault's
//! defaults on the machine at hand, and write the results to `bench-results/` (JSON)
//! and `docs/benchmarks.md` (Markdown).
//!
//! * `chunk-sweep`: write and read throughput, CPU and memory per chunk size and page
//!   size, against a plain file on the same disk ([`sweep`]).
//! * `kdf`: the cost of one Argon2id passphrase derivation per parameter set ([`kdf`]).
//! * `parallel`: 1..8 threads reading, and doing small durable writes through the
//!   group commit, against plain files ([`parallel`]).
//!
//! Build with `cargo build --release -p sqlvault-bench`; debug builds measure nothing
//! useful.

mod data;
mod error;
mod kdf;
mod parallel;
mod report;
mod sweep;
mod sys;

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
    /// One phase of one chunk-sweep configuration (run by chunk-sweep in a child process).
    #[command(hide = true)]
    RunOne(sweep::RunOneArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Cmd::ChunkSweep(a) => sweep::chunk_sweep(a),
        Cmd::Kdf(a) => kdf::kdf(a),
        Cmd::Parallel(a) => parallel::parallel(a),
        Cmd::RunOne(a) => sweep::run_one(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sqlvault-bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}
