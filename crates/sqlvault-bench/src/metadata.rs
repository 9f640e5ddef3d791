//! placeholder
use crate::error::Result;
use crate::harness::{CaseOutput, Target};
#[derive(Debug, Clone, clap::Args)]
pub struct MetadataArgs {
    #[arg(long)]
    pub quick: bool,
    #[command(flatten)]
    pub out: crate::report::OutputArgs,
}
pub fn case(_spec: &str) -> Result<CaseOutput> {
    crate::bail!("not yet")
}
pub fn run(_a: &MetadataArgs) -> Result<Vec<Target>> {
    crate::bail!("not yet")
}
