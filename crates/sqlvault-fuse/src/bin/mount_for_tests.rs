//! Test-only stand-in for `sqlvault mount VAULT MOUNTPOINT [options]`: runs the same
//! `sqlvault_fuse::command` the CLI runs, so the integration tests run the real mount
//! command as a separate process (the crash test SIGKILLs it) without depending on
//! the rest of the CLI. The passphrase comes from `SQLVAULT_PASSPHRASE`; exit codes: 0 ok, 1 error.

use sqlvault_fuse::command as mount;

use clap::Parser;

#[derive(Parser, Debug)]
struct Cli {
    vault: std::path::PathBuf,
    #[command(flatten)]
    args: mount::MountArgs,
}

fn main() {
    let cli = Cli::parse();
    let Ok(pass) = std::env::var("SQLVAULT_PASSPHRASE") else {
        eprintln!("sqlvault-mount-for-tests: set SQLVAULT_PASSPHRASE");
        std::process::exit(2);
    };
    let secret = sqlvault::Secret::passphrase(pass);
    if let Err(e) = mount::run(&cli.vault, secret, sqlvault::EngineConfig::default(), &cli.args) {
        eprintln!("sqlvault: {e}");
        std::process::exit(1);
    }
}
