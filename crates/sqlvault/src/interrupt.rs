//! Stopping a long operation on request: an [`Interrupt`] is a shared flag the
//! operation checks between two of its steps, and the error it stops with is one
//! [`Error::is_interrupted`] recognises. One-transaction operations then roll back; the
//! others stop between two complete steps, so the vault is always consistent.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};

/// A flag a long operation checks from time to time; once set, the operation stops at
/// the next check with an `Interrupted` I/O error ([`Error::is_interrupted`]).
/// One-transaction operations roll back; the others stop between two complete steps.
/// Cheap to clone: clones share the flag (set it from a signal handler's thread).
#[derive(Debug, Clone, Default)]
pub struct Interrupt(Arc<AtomicBool>);

impl Interrupt {
    /// A flag not set yet.
    pub fn new() -> Interrupt {
        Interrupt::default()
    }

    /// An interrupt sharing `flag` (e.g. one registered with `signal_hook::flag`).
    pub fn from_flag(flag: Arc<AtomicBool>) -> Interrupt {
        Interrupt(flag)
    }

    /// Asks the operations watching this flag to stop.
    pub fn trigger(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether the flag was set.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// `Err` (an interruption) once the flag is set.
    pub fn check(&self) -> Result<()> {
        if self.is_set() {
            return Err(interrupted());
        }
        Ok(())
    }
}

fn interrupted() -> Error {
    Error::Io {
        context: "interrupted".into(),
        source: std::io::Error::new(std::io::ErrorKind::Interrupted, "stopped on request"),
    }
}
