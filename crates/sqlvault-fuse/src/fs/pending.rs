//! New files held in memory from `create` to their first `flush`, so that a small file
//! written through the mount (`create`, `write`s, `close`) costs one commit: its name,
//! inode, content and times go in together ([`Inodes::create_whole_file`](sqlvault::inodes::Inodes::create_whole_file)) instead of a
//! commit for the empty file and another for its content.
//!
//! The kernel is told the file's attributes and an inode number reserved in advance
//! (a block of them per commit, [`Inodes::reserve`](sqlvault::inodes::Inodes::reserve)); until the commit the file
//! exists only here. Nothing served by this mount can observe the difference:
//! * `write`, `flush`, `fsync`, `release` of its own handle, `getattr` and `setattr`
//!   of its inode (answered from memory, except a size change), `lookup` of other
//!   names and the `security.capability` query the kernel makes before the first
//!   write keep the file pending;
//! * a `lookup` of its name, a `getattr` of its directory and every other request
//!   (`readdir`, `unlink`, `rename`, `setattr`, `read`, another `open`, ...) first
//!   commits every pending file ("settles" it) and gives it an ordinary handle.
//!
//! A `flush` may also come while the descriptor stays open (a child forked meanwhile
//! closes its copy at `exec`): it commits the file, and the handle is opened ("settled")
//! by the next request on the descriptor that needs it.
//!
//! Other processes using the vault through the library see the file at its first
//! `flush` (every `close`) instead of at `create`. A crash before that loses the file
//! with its unflushed content, as it loses unflushed content already. Memory is bounded:
//! a file that grows past [`PER_FILE`], or writes while [`TOTAL`] bytes are pending,
//! is settled and continues as an ordinary handle.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use fuser::{FileHandle as Fh, OpenFlags};
use sqlvault::inodes::{NewNode, WholeFile};
use sqlvault::{Attr, FileType, InodeId, SetAttr, Vault};

use super::{FsError, Result, VaultFs};

/// Largest file kept pending.
pub(super) const PER_FILE: usize = 1 << 20;
/// Largest total of pending content.
const TOTAL: u64 = 64 << 20;
/// Inode numbers reserved per commit.
const RESERVE: u64 = 1024;

/// A new file not committed yet.
struct NewFile {
    parent: InodeId,
    name: Vec<u8>,
    perm: u32,
    uid: u32,
    gid: u32,
    ino: InodeId,
    atime_ns: i64,
    mtime_ns: i64,
    ctime_ns: i64,
    /// Open flags of its handle, for the ordinary handle it becomes.
    flags: i32,
    content: Vec<u8>,
    /// Lost commit-window batches at `create` (see `lost_or`).
    losses: u64,
}

impl NewFile {
    fn attr(&self) -> Attr {
        Attr {
            ino: self.ino,
            kind: FileType::File,
            perm: self.perm,
            uid: self.uid,
            gid: self.gid,
            size: self.content.len() as u64,
            nlink: 1,
            atime_ns: self.atime_ns,
            mtime_ns: self.mtime_ns,
            ctime_ns: self.ctime_ns,
            rdev: 0,
        }
    }
}

enum State {
    /// In memory only.
    New(NewFile),
    /// Committed; its ordinary handle is opened when something needs it.
    Committed { ino: InodeId, flags: i32, losses: u64 },
    /// Its ordinary handle is in `VaultFs::files`: every request goes there.
    Settled,
    /// Released by the kernel: nothing may open a handle for it any more.
    Closed,
    /// The commit failed: the handle answers this errno.
    Failed(i32),
}

type Slot = Arc<Mutex<State>>;

/// The pending files of a mount, by handle.
pub(super) struct Pending {
    slots: Mutex<HashMap<u64, Slot>>,
    /// Handles in `slots` (read without the lock on every request).
    len: AtomicUsize,
    bytes: AtomicU64,
    inos: Mutex<Range<u64>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Pending {
    pub(super) fn new() -> Self {
        Pending {
            slots: Mutex::new(HashMap::new()),
            len: AtomicUsize::new(0),
            bytes: AtomicU64::new(0),
            inos: Mutex::new(0..0),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len.load(Ordering::SeqCst) == 0
    }

    fn get(&self, fh: Fh) -> Option<Slot> {
        if self.is_empty() {
            return None;
        }
        lock(&self.slots).get(&fh.0).cloned()
    }

    fn remove(&self, fh: Fh) -> Option<Slot> {
        let mut m = lock(&self.slots);
        let s = m.remove(&fh.0);
        self.len.store(m.len(), Ordering::SeqCst);
        s
    }

    /// Handles whose file matches `which` (all with `None`).
    fn matching(&self, which: impl Fn(&NewFile) -> bool) -> Vec<(Fh, Slot)> {
        if self.is_empty() {
            return Vec::new();
        }
        let all: Vec<(u64, Slot)> = lock(&self.slots).iter().map(|(k, v)| (*k, v.clone())).collect();
        all.into_iter()
            .filter(|(_, s)| matches!(&*lock(s), State::New(f) if which(f)))
            .map(|(k, s)| (Fh(k), s))
            .collect()
    }

    /// Attributes of the pending file `ino`, if there is one.
    fn attr(&self, ino: u64) -> Option<Attr> {
        if self.is_empty() {
            return None;
        }
        let all: Vec<Slot> = lock(&self.slots).values().cloned().collect();
        all.iter().find_map(|s| match &*lock(s) {
            State::New(f) if f.ino.0 == ino => Some(f.attr()),
            _ => None,
        })
    }

    fn next_ino(&self, vault: &Vault) -> Result<InodeId> {
        let mut r = lock(&self.inos);
        if r.is_empty() {
            *r = vault.inodes().reserve(RESERVE)?;
        }
        let ino = r.start;
        r.start += 1;
        Ok(InodeId(ino))
    }
}

impl VaultFs {
    /// Creates the new file `name` in memory; `None` if it must go the ordinary way
    /// (the name exists, or memory is short).
    pub(super) fn create_pending(
        &self,
        node: NewNode<'_>,
        parent: InodeId,
        name: &[u8],
        flags: i32,
    ) -> Result<Option<(Attr, Fh)>> {
        if self.pending.bytes.load(Ordering::SeqCst) >= TOTAL {
            return Ok(None);
        }
        let vault = self.vault()?;
        sqlvault::inodes::check_name(name)?;
        match vault.inodes().lookup(parent, name) {
            Err(e) if e.errno() == libc::ENOENT => {}
            Ok(_) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        let now = now_ns();
        let file = NewFile {
            parent,
            name: name.to_vec(),
            perm: node.perm,
            uid: node.uid,
            gid: node.gid,
            ino: self.pending.next_ino(vault)?,
            atime_ns: now,
            mtime_ns: now,
            ctime_ns: now,
            flags,
            content: Vec::new(),
            losses: vault.inodes().deferred_losses(),
        };
        let attr = file.attr();
        let fh = self.files.reserve();
        let mut m = lock(&self.pending.slots);
        m.insert(fh.0, Arc::new(Mutex::new(State::New(file))));
        self.pending.len.store(m.len(), Ordering::SeqCst);
        Ok(Some((attr, fh)))
    }

    /// Buffers a write to a pending file; `None` if `fh` is not pending (any more):
    /// the caller writes through the ordinary handle.
    pub(super) fn write_pending(&self, fh: Fh, offset: u64, data: &[u8]) -> Result<Option<u32>> {
        let Some(slot) = self.pending.get(fh) else { return Ok(None) };
        let mut st = lock(&slot);
        let State::New(f) = &mut *st else {
            drop(st);
            self.settle_handle(fh, &slot)?;
            return Ok(None);
        };
        let end = offset.saturating_add(data.len() as u64);
        let grow = end.saturating_sub(f.content.len() as u64);
        if end > PER_FILE as u64 || self.pending.bytes.load(Ordering::SeqCst) + grow > TOTAL {
            drop(st);
            self.settle_handle(fh, &slot)?;
            return Ok(None);
        }
        let (start, end) = (offset as usize, end as usize);
        if f.content.len() < end {
            f.content.resize(end, 0);
            self.pending.bytes.fetch_add(grow, Ordering::SeqCst);
        }
        f.content[start..end].copy_from_slice(data);
        f.mtime_ns = now_ns();
        f.ctime_ns = f.mtime_ns;
        self.counters.add_bytes("write", data.len() as u64);
        u32::try_from(data.len()).map(Some).map_err(|_| FsError::Errno(libc::EINVAL))
    }

    /// Commits a pending file (its first `flush`); `None` if `fh` is not pending (any
    /// more): the caller flushes its ordinary handle.
    pub(super) fn flush_pending(&self, fh: Fh) -> Result<Option<()>> {
        let Some(slot) = self.pending.get(fh) else { return Ok(None) };
        let mut st = lock(&slot);
        if matches!(*st, State::Settled) {
            return Ok(None);
        }
        self.commit_state(&mut st).map(Some)
    }

    /// Commits a pending file and forgets it; `None` if `fh` is not pending. A handle
    /// settled meanwhile is left in `files` for the caller to close.
    pub(super) fn release_pending(&self, fh: Fh) -> Result<Option<()>> {
        let Some(slot) = self.pending.get(fh) else { return Ok(None) };
        let mut st = lock(&slot);
        let r = self.commit_state(&mut st);
        if matches!(*st, State::Committed { .. }) {
            // A settle that collected this slot before now must not open it.
            *st = State::Closed;
        }
        drop(st);
        self.pending.remove(fh);
        r.map(Some)
    }

    /// Gives `fh` its ordinary handle if it is (still) a pending file's, committing the
    /// file first if it is in memory: for requests on the descriptor itself (`fsync`).
    pub(super) fn settle_fh(&self, fh: Fh) -> Result<()> {
        match self.pending.get(fh) {
            Some(slot) => self.settle_handle(fh, &slot),
            None => Ok(()),
        }
    }

    /// Changes the attributes of `ino` in memory if it is a pending file (what `tar`
    /// does with `futimens`, `fchown`, `fchmod` before closing each file). A size
    /// change is left to the ordinary path (`None`).
    pub(super) fn setattr_pending(&self, ino: u64, set: &SetAttr, size: Option<u64>) -> Option<Attr> {
        if size.is_some() || self.pending.is_empty() {
            return None;
        }
        let all: Vec<Slot> = lock(&self.pending.slots).values().cloned().collect();
        all.iter().find_map(|s| match &mut *lock(s) {
            State::New(f) if f.ino.0 == ino => {
                f.perm = set.perm.unwrap_or(f.perm);
                f.uid = set.uid.unwrap_or(f.uid);
                f.gid = set.gid.unwrap_or(f.gid);
                f.atime_ns = set.atime_ns.unwrap_or(f.atime_ns);
                f.mtime_ns = set.mtime_ns.unwrap_or(f.mtime_ns);
                f.ctime_ns = now_ns();
                Some(f.attr())
            }
            _ => None,
        })
    }

    /// The attributes of `ino` if it is a pending file.
    pub(super) fn pending_attr(&self, ino: u64) -> Option<Attr> {
        self.pending.attr(ino)
    }

    /// Settles the pending files a request about node `node` (and `name` in it, for a
    /// lookup) could observe: the file `node`, `name` in directory `node`, or with no
    /// name every file in directory `node`.
    pub(super) fn settle_related(&self, node: u64, name: Option<&[u8]>) -> Result<()> {
        for (fh, slot) in self.pending.matching(|f| match name {
            Some(n) => f.parent.0 == node && f.name == n,
            None => f.parent.0 == node || f.ino.0 == node,
        }) {
            self.settle_handle(fh, &slot)?;
        }
        Ok(())
    }

    /// Settles every pending file (before a request that could observe any of them).
    pub(super) fn settle_all(&self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let all: Vec<(u64, Slot)> = lock(&self.pending.slots).iter().map(|(k, v)| (*k, v.clone())).collect();
        let mut result = Ok(());
        for (fh, slot) in all {
            result = result.and(self.settle_handle(Fh(fh), &slot));
        }
        result
    }

    /// Commits the file if it is still in memory, then gives the handle an ordinary
    /// [`sqlvault::FileHandle`] and forgets the slot. The slot stays locked throughout,
    /// so a request racing this one on the same descriptor waits for the handle
    /// instead of finding neither a pending file nor a handle.
    fn settle_handle(&self, fh: Fh, slot: &Slot) -> Result<()> {
        let mut st = lock(slot);
        if matches!(*st, State::Closed) {
            return Ok(());
        }
        self.commit_state(&mut st)?;
        if let State::Committed { ino, flags, losses } = &*st {
            let handle = self.vault()?.inodes().open(*ino, &Self::open_options(OpenFlags(*flags & !libc::O_TRUNC)));
            match handle {
                Ok(h) => {
                    self.files.insert_at(fh, h);
                    *st = State::Settled;
                }
                Err(e) => {
                    // Gone: its commit-window batch may have been lost meanwhile.
                    let e = self.lost_or(*losses, e);
                    *st = State::Failed(e.errno());
                    return Err(e.into());
                }
            }
        }
        drop(st);
        self.pending.remove(fh);
        Ok(())
    }

    /// `e`, or if it says a node is gone and a commit-window batch was lost after
    /// `mark`, that loss's error (the reason it is gone: ENOSPC, EIO, not ESTALE).
    fn lost_or(&self, mark: u64, e: sqlvault::Error) -> sqlvault::Error {
        if !matches!(e, sqlvault::Error::StaleHandle | sqlvault::Error::NotFound { .. }) {
            return e;
        }
        match self.vault().ok().and_then(|v| v.inodes().deferred_loss_since(mark)) {
            Some((_, lost)) => lost,
            None => e,
        }
    }

    /// Commits the file of a locked slot if it is still in memory.
    fn commit_state(&self, st: &mut State) -> Result<()> {
        let f = match &*st {
            State::New(f) => f,
            State::Committed { .. } | State::Settled | State::Closed => return Ok(()),
            State::Failed(errno) => return Err(FsError::Errno(*errno)),
        };
        let node = NewNode { kind: FileType::File, perm: f.perm, uid: f.uid, gid: f.gid, target: None };
        let whole = WholeFile {
            parent: f.parent,
            name: &f.name,
            node,
            ino: f.ino,
            atime_ns: f.atime_ns,
            mtime_ns: f.mtime_ns,
            ctime_ns: f.ctime_ns,
            content: &f.content,
        };
        // Its directory may have been created in a commit-window batch lost since.
        let r = self
            .vault()
            .and_then(|v| v.inodes().create_whole_file(&whole).map_err(|e| self.lost_or(f.losses, e).into()));
        self.pending.bytes.fetch_sub(f.content.len() as u64, Ordering::SeqCst);
        if let Err(FsError::Vault(e)) = &r {
            eprintln!("sqlvault-fuse: cannot store the new file {}: {e}", String::from_utf8_lossy(&f.name));
        }
        let (ino, flags, losses) = (f.ino, f.flags, f.losses);
        *st = match &r {
            Ok(_) => State::Committed { ino, flags, losses },
            Err(e) => State::Failed(e.code()),
        };
        r.map(|_| ())
    }
}

fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}
