//! Options every long operation takes: [`Ops`] carries an optional progress callback and
//! an optional [`Interrupt`]; [`Progress`] is the one shape progress is reported in.
//! `&Ops::default()` asks for neither.

use crate::error::Result;
use crate::interrupt::Interrupt;

/// Where a long operation is: the step it runs (`phase`), units of that step done and in
/// all, and content bytes processed so far. What a unit is depends on the operation and
/// phase; each operation's documentation says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// The step running: a short lowercase word (`remove`, `restore`, `structure`,
    /// `chunks`, `invariants`, `metadata`, `compact`, ...).
    pub phase: &'static str,
    /// Units of the step done so far.
    pub done: u64,
    /// Units of the step in all (0: not known).
    pub total: u64,
    /// Content bytes processed so far (hashed, transferred, restored); 0 if the step
    /// has none.
    pub bytes: u64,
}

/// Options of a long operation: where to report progress and what to watch for a
/// request to stop. Cheap to build on the spot:
///
/// ```
/// use sqlvault::{Interrupt, Ops, Progress};
/// let stop = Interrupt::new();
/// let show = |p: &Progress| eprintln!("{} {}/{}", p.phase, p.done, p.total);
/// let ops = Ops::default().progress(&show).interrupt(&stop);
/// # let _ = ops;
/// ```
#[derive(Clone, Copy, Default)]
pub struct Ops<'a> {
    /// Called from time to time with where the operation is (possibly from another
    /// thread, hence `Sync`).
    pub progress: Option<&'a (dyn Fn(&Progress) + Sync)>,
    /// Checked between two steps; once set, the operation stops with an error
    /// [`Error::is_interrupted`](crate::Error::is_interrupted) recognises.
    pub interrupt: Option<&'a Interrupt>,
}

impl std::fmt::Debug for Ops<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ops").field("progress", &self.progress.is_some()).field("interrupt", &self.interrupt).finish()
    }
}

impl<'a> Ops<'a> {
    /// These options with progress reported to `f`.
    pub fn progress(mut self, f: &'a (dyn Fn(&Progress) + Sync)) -> Ops<'a> {
        self.progress = Some(f);
        self
    }

    /// These options with `interrupt` watched.
    pub fn interrupt(mut self, interrupt: &'a Interrupt) -> Ops<'a> {
        self.interrupt = Some(interrupt);
        self
    }

    /// Reports `p` to the progress callback, if any.
    pub(crate) fn report(&self, p: Progress) {
        if let Some(f) = self.progress {
            f(&p);
        }
    }

    /// `Err` (an interruption) once the interrupt, if any, is set.
    pub(crate) fn check(&self) -> Result<()> {
        self.interrupt.map_or(Ok(()), Interrupt::check)
    }
}
