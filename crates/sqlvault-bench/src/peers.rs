//! placeholder
use crate::error::Result;
use crate::harness::{CaseOutput, Target};
#[derive(Debug, Clone, clap::Args)]
pub struct PeersArgs {
    #[arg(long)]
    pub quick: bool,
    #[command(flatten)]
    pub out: crate::report::OutputArgs,
}
pub fn case(_spec: &str) -> Result<CaseOutput> {
    crate::bail!("not yet")
}
pub fn run(_a: &PeersArgs) -> Result<Vec<Target>> {
    crate::bail!("not yet")
}
#[derive(Debug, Clone, clap::Args)]
pub struct ServeMountArgs {
    pub vault: std::path::PathBuf,
}
pub fn serve_mount(_a: &ServeMountArgs) -> Result<()> {
    crate::bail!("not yet")
}
