//! `put`'s file copies on worker threads, so that reading, cutting, hashing and
//! compressing one file overlaps storing another.
//!
//! The walk (`transfer.rs`) decides what to do with each entry on its own thread, in
//! order, and hands each regular file to copy to a [`Copier`]: a few threads that each
//! take a group of files and store its small ones together ([`Vault::replace_files`]:
//! one write for the group, each file whole or not at all) and its large ones one by
//! one ([`Vault::replace_file`]). The library prepares the chunks before it takes the
//! writer, so the workers compress in parallel and take the writer once a group. What a worker finished comes back as a [`Done`], in the order
//! the files finished, for the walk to count and tag.
//!
//! Ordering: a file's parent directory exists before its job is handed over (the walk
//! creates it first). A directory's mode and times are set once every job handed over
//! before the walk left it is finished ([`Copier::handed`], [`Copier::done_through`]),
//! since creating a file in it changes its time; the walk does not wait for that. At
//! the end it waits for every file ([`Copier::drain`]). Small files travel in groups
//! ([`GROUP_BYTES`]). Memory: at most one group per worker queued and one gathered (an
//! open descriptor per file, nothing read), and per worker the small files of its group
//! read whole (under [`GROUP_BYTES`] plus one file of at most [`TOGETHER_MAX`]) or what
//! a large file's `replace_file` holds.

use std::fs;
use std::path::PathBuf;
use std::sync::mpsc::{channel, sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use indicatif::ProgressBar;
use sqlvault::{Interrupt, SetAttr, Vault};

/// Most worker threads `put` starts (one per CPU, at most this many).
pub const MAX_JOBS: usize = 4;

/// Small files travel to a worker in groups of up to this many bytes or
/// [`GROUP_FILES`] files: a hand-over wakes a thread, which costs about what
/// compressing a small file does.
const GROUP_BYTES: u64 = 256 << 10;
const GROUP_FILES: usize = 16;

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
    jobs: Option<SyncSender<Vec<Job>>>,
    /// Small files not handed over yet (see [`GROUP_BYTES`]).
    group: Vec<Job>,
    done: Receiver<Done>,
    workers: Vec<JoinHandle<()>>,
    /// Jobs handed over so far; a job's number is the count before it.
    handed: u64,
    /// Numbers and destinations of the jobs handed over and not reported back yet,
    /// oldest first.
    in_flight: Vec<(u64, String)>,
}

impl Copier {
    /// Starts `n` workers (at least one) copying into `vault`; each adds the bytes it
    /// stores to `pb` and stops between two buffers once `stop` is set.
    pub fn new(vault: &Vault, pb: &ProgressBar, stop: &Interrupt, n: usize) -> Copier {
        let (jobs, queue) = sync_channel::<Vec<Job>>(n.max(1));
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
        Copier { jobs: Some(jobs), group: Vec::new(), done, workers, handed: 0, in_flight: Vec::new() }
    }

    /// Hands `job` to a worker (a small file with the next ones, in a group), waiting
    /// while every worker is busy and the queue is full; returns the copies finished
    /// meanwhile. Jobs no worker can take (none could start) are copied on this thread.
    pub fn submit(&mut self, job: Job, vault: &Vault, pb: &ProgressBar, stop: &Interrupt) -> Vec<Done> {
        self.in_flight.push((self.handed, job.dest.clone()));
        self.handed += 1;
        self.group.push(job);
        let bytes: u64 = self.group.iter().map(|j| j.meta.len()).sum();
        let mut out = Vec::new();
        if bytes >= GROUP_BYTES || self.group.len() >= GROUP_FILES {
            out = self.send(vault, pb, stop);
        }
        out.extend(self.finished());
        out
    }

    /// Hands the group waiting to a worker (or copies it here, if none can take it);
    /// returns the copies made here.
    fn send(&mut self, vault: &Vault, pb: &ProgressBar, stop: &Interrupt) -> Vec<Done> {
        let group = std::mem::take(&mut self.group);
        if group.is_empty() {
            return Vec::new();
        }
        let sent = match self.jobs.as_ref() {
            Some(tx) if !self.workers.is_empty() => tx.send(group).map_err(|e| e.0),
            _ => Err(group),
        };
        match sent {
            Ok(()) => Vec::new(),
            Err(group) => {
                let out: Vec<Done> = group.into_iter().map(|job| copy(vault, pb, stop, job)).collect();
                self.forget(&out);
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
    pub fn drain(&mut self, vault: &Vault, pb: &ProgressBar, stop: &Interrupt) -> Vec<Done> {
        let mut out = self.send(vault, pb, stop);
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
        self.in_flight.first().map(|f| f.1.as_str())
    }

    /// How many jobs were handed over so far (what [`Copier::done_through`] must reach
    /// for all of them to be finished).
    pub fn handed(&self) -> u64 {
        self.handed
    }

    /// Every job numbered below this is finished (reported back by `submit`,
    /// `finished` or `drain`).
    pub fn done_through(&self) -> u64 {
        self.in_flight.iter().map(|f| f.0).min().unwrap_or(self.handed)
    }

    fn forget(&mut self, done: &[Done]) {
        for d in done {
            if let Some(i) = self.in_flight.iter().position(|f| f.1 == d.dest) {
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
    queue: &Mutex<Receiver<Vec<Job>>>,
    report: &std::sync::mpsc::Sender<Done>,
) {
    loop {
        // One worker waits on the queue at a time; the others wait for the lock.
        let group = match queue.lock() {
            Ok(q) => q.recv(),
            Err(_) => return,
        };
        let Ok(group) = group else { return };
        let names: Vec<(String, PathBuf, fs::Metadata)> =
            group.iter().map(|j| (j.dest.clone(), j.src.clone(), j.meta.clone())).collect();
        // A panic is reported as the failure of the files not reported yet, so `drain`
        // never waits for them.
        let mut sent: Vec<String> = Vec::new();
        let mut send = |d: Done| {
            sent.push(d.dest.clone());
            report.send(d).is_ok()
        };
        let r =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| copy_group(vault, pb, stop, group, &mut send)));
        if r.is_err() {
            for (dest, src, meta) in names.into_iter().filter(|n| !sent.contains(&n.0)) {
                let result = Err(sqlvault::Error::Io {
                    context: "copying a file (its thread panicked)".into(),
                    source: std::io::Error::other("panic"),
                });
                if report.send(Done { dest, src, meta, result }).is_err() {
                    return;
                }
            }
        }
    }
}

/// Files of a group at most this large are read whole and stored together
/// ([`Vault::replace_files`]); larger ones are copied on their own.
const TOGETHER_MAX: u64 = 1 << 20;

/// Copies a group: its small files together in one write, the others one by one;
/// reports each file through `send` (false: nobody listens any more).
fn copy_group(vault: &Vault, pb: &ProgressBar, stop: &Interrupt, group: Vec<Job>, send: &mut dyn FnMut(Done) -> bool) {
    let (small, large): (Vec<Job>, Vec<Job>) = group.into_iter().partition(|j| j.meta.len() <= TOGETHER_MAX);
    if small.len() > 1 {
        let mut read = Vec::with_capacity(small.len());
        for mut job in small {
            let mut data = Vec::with_capacity(job.meta.len() as usize);
            match std::io::Read::read_to_end(&mut job.input, &mut data) {
                Ok(_) => read.push((job, data)),
                Err(source) => {
                    let context = format!("reading the content of {}", job.src.display());
                    let result = Err(sqlvault::Error::Io { context, source });
                    if !send(Done { dest: job.dest, src: job.src, meta: job.meta, result }) {
                        return;
                    }
                }
            }
        }
        let files: Vec<(&str, &[u8], &SetAttr)> =
            read.iter().map(|(j, d)| (j.dest.as_str(), d.as_slice(), &j.stamp)).collect();
        let bytes: u64 = read.iter().map(|(_, d)| d.len() as u64).sum();
        let r = vault.replace_files(&files, &sqlvault::Ops::default().interrupt(stop));
        let mut first = r.map(|()| pb.inc(bytes)).err();
        let failed = first.as_ref().map(|e| e.to_string());
        for (job, data) in read {
            let result = match (first.take(), &failed) {
                (Some(e), _) => Err(e),
                // The group was stored together: the others were not stored either.
                (None, Some(why)) => Err(sqlvault::Error::Io {
                    context: format!("{} was not copied", job.dest),
                    source: std::io::Error::other(format!("a file stored with it failed: {why}")),
                }),
                (None, None) => Ok(data.len() as u64),
            };
            if !send(Done { dest: job.dest, src: job.src, meta: job.meta, result }) {
                return;
            }
        }
    } else if let Some(job) = small.into_iter().next() {
        if !send(copy(vault, pb, stop, job)) {
            return;
        }
    }
    for job in large {
        if !send(copy(vault, pb, stop, job)) {
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
