//! placeholder
use crate::error::Result;
#[derive(Debug, Clone, clap::Args)]
pub struct AllArgs {
    #[arg(long)]
    pub quick: bool,
}
pub fn all(_a: &AllArgs) -> Result<()> {
    crate::bail!("not yet")
}
