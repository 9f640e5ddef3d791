//! Sweeps that chose sqlvault's defaults, kept out of `sqlvault-bench` (they are not part
//! of its `all`): `chunk-sweep` (chunk and page size against a plain file), `kdf` (the
//! cost of one Argon2id derivation per parameter set) and `run-one` (one phase of one
//! chunk-sweep configuration, also what `bench-ab.sh` and `perf record` run).
//!
//! Build and run: see README.md.

// The bench crate's data generator and error type, used as they are (the sweep measures
// the same data shapes the suite does), not copied.
#[path = "../../../crates/sqlvault-bench/src/data.rs"]
mod data;
#[path = "../../../crates/sqlvault-bench/src/error.rs"]
mod error;
mod kdf;
mod sweep;
mod util;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "sweep", about = "The sweeps behind sqlvault's default chunk size, page size and KDF")]
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
    /// One phase of one chunk-sweep configuration (run by chunk-sweep in a child process).
    RunOne(sweep::RunOneArgs),
}

fn main() -> ExitCode {
    let result = match &Cli::parse().command {
        Cmd::ChunkSweep(a) => sweep::chunk_sweep(a),
        Cmd::Kdf(a) => kdf::kdf(a),
        Cmd::RunOne(a) => sweep::run_one(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sweep: error: {e}");
            ExitCode::FAILURE
        }
    }
}
