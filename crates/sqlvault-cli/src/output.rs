//! Standard output for listings, one line at a time. A closed pipe (`sqlvault ls -R |
//! head`) is not an error: [`line()`] reports it as `Ok(false)` so a listing stops early,
//! and [`write_line`] (behind `outln!`) drops the rest of the output; any other write
//! error (a full disk behind `>`) is exit code 5.

use std::io::Write;

use serde_json::Value;

use crate::CliError;

/// Writes a line; `Ok(false)` if standard output was closed (`| head`).
pub(crate) fn line(w: &mut impl Write, s: &str) -> Result<bool, CliError> {
    match writeln!(w, "{s}") {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(CliError::stdout(e)),
    }
}

/// Writes one line to the locked standard output (see `outln!`); a closed pipe drops it.
pub fn write_line(args: std::fmt::Arguments<'_>) -> Result<(), CliError> {
    line(&mut std::io::stdout().lock(), &args.to_string()).map(drop)
}

/// A JSON array streamed one element a line (`[`, `  {..},`, `  {..}`, `]`): each
/// element is written when the next one (or the end) shows whether it takes a comma.
/// Every method returns `Ok(false)` once standard output is closed.
#[derive(Default)]
pub(crate) struct JsonArray {
    pending: Option<String>,
}

impl JsonArray {
    pub(crate) fn start(w: &mut impl Write) -> Result<bool, CliError> {
        line(w, "[")
    }
    pub(crate) fn push(&mut self, w: &mut impl Write, v: &Value) -> Result<bool, CliError> {
        match self.pending.replace(format!("  {v}")) {
            Some(prev) => line(w, &format!("{prev},")),
            None => Ok(true),
        }
    }
    pub(crate) fn finish(self, w: &mut impl Write) -> Result<bool, CliError> {
        if let Some(last) = self.pending {
            if !line(w, &last)? {
                return Ok(false);
            }
        }
        line(w, "]")
    }
}
