//! `put`'s file copies on worker threads, so that reading, cutting, hashing and
//! compressing one file overlaps storing another.
//!
//! The walk (`transfer.rs`) decides what to do with each entry on its own thread, in
//! order, and hands each regular file to copy to a [`Copier`]: a few threads that each
//! call [`Vault::replace_file`] (atomic per file) for one file at a time. The library
//! prepares a file's chunks before it takes the writer, so the workers compress in
//! parallel and share commits through the group commit; the writer stores their
//! files one at a time. What a worker finished comes back as a [`Done`], in the order
//! the files finished, for the walk to count and tag.
//!
//! Ordering: a file's parent directory exists before its job is handed over (the walk
//! creates it first), and the walk waits for every file handed over ([`Copier::drain`])
//! before it finishes a directory (`--delete`, the directory's mode and times) and at
//! the end. Memory: at most as many files queued as there are workers (an open
//! descriptor each, nothing read), and what each worker's `replace_file` holds.

use std::fs;
use std::path::PathBuf;
use std::sync::mpsc::{channel, sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use indicatif::ProgressBar;
use sqlvault::{Interrupt, SetAttr, Vault};

/// Most worker threads `put` starts (one per CPU, at most this many).
pub const MAX_JOBS: usize = 4;

/// One file to copy: host `src` (opened as `input`, `meta` its metadata) to vault path `dest`.
pub struct Job {
    pub dest: String,
    pub src: PathBuf,
    pub meta: fs::Metadata,
    pub input: fs::File,
    pub stamp: SetAttr,
}

/// A copy a worker finished: the job's names and what `replace_file` returned.
pub struct Done {
    pub dest: String,
    pub src: PathBuf,
    pub meta: fs::Metadata,
    pub result: Result<u64, sqlvault::Error>,
}

/// Worker threads copying files into one vault (see the module doc).
pub struct Copier {
    jobs: Option<SyncSender<Job>>,
    done: Receiver<Done>,
    workers: Vec<JoinHandle<()>>,
    /// Destinations handed over and not reported back yet, oldest first.
    in_flight: Vec<String>,
}

impl Copier {
    /// Starts `n` workers (at least one) copying into `vault`; each adds the bytes it
    /// stores to `pb` and stops between two buffers once `stop` is set.
    pub fn new(vault: &Vault, pb: &ProgressBar, stop: &Interrupt, n: usize) -> Copier {
        let (jobs, queue) = sync_channel::<Job>(n.max(1));
        let queue = Arc::new(Mutex::new(queue));
        let (report, done) = channel::<Done>();
        let workers = (0..n.max(1))
            .filter_map(|i| {
                let (vault, pb, stop, queue, report) =
                    (vault.clone(), pb.clone(), stop.clone(), queue.clone(), report.clone());
                std::thread::Builder::new()
                    .name(format!("sqlvault-put-{i}"))
                    .spawn(move || work(&vault, &pb, &stop, &queue, &report))
                    .ok()
            })
            .collect();
        Copier { jobs: Some(jobs), done, workers, in_flight: Vec::new() }
    }

    /// Hands `job` to a worker, waiting while every worker is busy and the queue is
    /// full; returns the copies finished meanwhile. A job no worker can take (none
    /// could start) is copied on this thread.
    pub fn submit(&mut self, job: Job, vault: &Vault, pb: &ProgressBar, stop: &Interrupt) -> Vec<Done> {
        let dest = job.dest.clone();
        let sent = match self.jobs.as_ref() {
            Some(tx) if !self.workers.is_empty() => tx.send(job).map_err(|e| e.0),
            _ => Err(job),
        };
        match sent {
            Ok(()) => {
                self.in_flight.push(dest);
                self.finished()
            }
            Err(job) => {
                let mut out = self.finished();
                out.push(copy(vault, pb, stop, job));
                out
            }
        }
    }

    /// The copies finished since the last call, without waiting.
    pub fn finished(&mut self) -> Vec<Done> {
        let out: Vec<Done> = self.done.try_iter().collect();
        self.forget(&out);
        out
    }

    /// Waits for every file handed over; returns their outcomes.
    pub fn drain(&mut self) -> Vec<Done> {
        let mut out = Vec::new();
        while !self.in_flight.is_empty() {
            match self.done.recv() {
                Ok(d) => {
                    self.forget(std::slice::from_ref(&d));
                    out.push(d);
                }
                // Every worker is gone (a panic): what they held is not coming back.
                Err(_) => self.in_flight.clear(),
            }
        }
        out
    }

    /// The oldest file handed over and not finished, for a message on interrupt.
    pub fn in_progress(&self) -> Option<&str> {
        self.in_flight.first().map(String::as_str)
    }

    fn forget(&mut self, done: &[Done]) {
        for d in done {
            if let Some(i) = self.in_flight.iter().position(|f| *f == d.dest) {
                self.in_flight.remove(i);
            }
        }
    }
}

impl Drop for Copier {
    fn drop(&mut self) {
        // Closing the queue ends each worker after its current file.
        self.jobs = None;
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

fn work(
    vault: &Vault,
    pb: &ProgressBar,
    stop: &Interrupt,
    queue: &Mutex<Receiver<Job>>,
    report: &std::sync::mpsc::Sender<Done>,
) {
    loop {
        // One worker waits on the queue at a time; the others wait for the lock.
        let job = match queue.lock() {
            Ok(q) => q.recv(),
            Err(_) => return,
        };
        let Ok(job) = job else { return };
        let (dest, src, meta) = (job.dest.clone(), job.src.clone(), job.meta.clone());
        // A panic is reported as this file's failure, so `drain` never waits for it.
        let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| copy(vault, pb, stop, job)))
            .unwrap_or_else(|_| Done {
                dest,
                src,
                meta,
                result: Err(sqlvault::Error::Io {
                    context: "copying a file (its thread panicked)".into(),
                    source: std::io::Error::other("panic"),
                }),
            });
        if report.send(done).is_err() {
            return;
        }
    }
}

/// Copies one file, adding the bytes stored to `pb` as they are stored.
fn copy(vault: &Vault, pb: &ProgressBar, stop: &Interrupt, job: Job) -> Done {
    // The library reports bytes stored so far in this file; the bar counts all files.
    let shown = std::sync::atomic::AtomicU64::new(0);
    let progress = |p: &sqlvault::Progress| {
        let before = shown.swap(p.done, std::sync::atomic::Ordering::Relaxed);
        pb.inc(p.done.saturating_sub(before));
    };
    let result = vault.replace_file(
        &job.dest,
        job.meta.len(),
        job.input,
        &job.stamp,
        &sqlvault::Ops::default().progress(&progress).interrupt(stop),
    );
    Done { dest: job.dest, src: job.src, meta: job.meta, result }
}
