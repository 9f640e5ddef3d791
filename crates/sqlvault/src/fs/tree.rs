//! The file tree: inodes and directory entries, with POSIX semantics.
//!
//! Rows are keyed by inode number, never by path: renaming or listing a directory
//! costs the same whatever the size of the subtree below it. Every function runs
//! inside the caller's transaction, so each operation (rename with replace, unlink of
//! the last link, ...) is applied fully or not at all.
//!
//! Names are raw bytes (the FUSE frontend passes whatever the kernel gives); path
//! parsing and symlink resolution live in [`crate::fs::path`] and the facade.

use rusqlite::{params, Connection, OptionalExtension, Row};

use crate::error::{Error, Result};
use crate::fs::chunks;
use crate::fs::path::check_name;
use crate::storage::schema::ROOT_INO;

/// Inode number. The root directory is [`InodeId::ROOT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct InodeId(pub u64);

impl InodeId {
    /// The root directory.
    pub const ROOT: InodeId = InodeId(ROOT_INO as u64);
    fn sql(self) -> i64 {
        self.0 as i64
    }
}

/// The kinds of node the tree holds. FIFOs, sockets and device nodes are inodes with
/// no content (a device's number is [`Attr::rdev`]); see `fs::nodes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FileType {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// A named pipe (`mkfifo`).
    Fifo,
    /// A UNIX domain socket's name (`bind`).
    Socket,
    /// A character device node.
    #[serde(rename = "char")]
    CharDevice,
    /// A block device node.
    #[serde(rename = "block")]
    BlockDevice,
}

impl FileType {
    /// The type in an `st_mode`, if it is one a vault stores.
    pub fn from_mode(mode: u32) -> Option<FileType> {
        match mode & libc::S_IFMT {
            libc::S_IFREG => Some(FileType::File),
            libc::S_IFDIR => Some(FileType::Dir),
            libc::S_IFLNK => Some(FileType::Symlink),
            libc::S_IFIFO => Some(FileType::Fifo),
            libc::S_IFSOCK => Some(FileType::Socket),
            libc::S_IFCHR => Some(FileType::CharDevice),
            libc::S_IFBLK => Some(FileType::BlockDevice),
            _ => None,
        }
    }
    /// The `S_IF*` bits of this type.
    pub fn mode_bits(self) -> u32 {
        match self {
            FileType::File => libc::S_IFREG,
            FileType::Dir => libc::S_IFDIR,
            FileType::Symlink => libc::S_IFLNK,
            FileType::Fifo => libc::S_IFIFO,
            FileType::Socket => libc::S_IFSOCK,
            FileType::CharDevice => libc::S_IFCHR,
            FileType::BlockDevice => libc::S_IFBLK,
        }
    }
    /// True for FIFOs, sockets and device nodes: nodes without content of their own.
    pub fn is_special(self) -> bool {
        matches!(self, FileType::Fifo | FileType::Socket | FileType::CharDevice | FileType::BlockDevice)
    }
    /// True for character and block devices, the kinds that carry a device number.
    pub fn is_device(self) -> bool {
        matches!(self, FileType::CharDevice | FileType::BlockDevice)
    }
}

/// Attributes of one inode (what `stat` shows).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Attr {
    /// Inode number.
    pub ino: InodeId,
    /// Node type.
    pub kind: FileType,
    /// Permission bits (`0o7777` mask).
    pub perm: u32,
    /// Owner user id.
    pub uid: u32,
    /// Owner group id.
    pub gid: u32,
    /// Size in bytes (a symlink: its target's length).
    pub size: u64,
    /// Number of names (directories: 2 + subdirectories).
    pub nlink: u32,
    /// Last access, ns since the epoch.
    pub atime_ns: i64,
    /// Last content change, ns since the epoch.
    pub mtime_ns: i64,
    /// Last change of content or attributes, ns since the epoch.
    pub ctime_ns: i64,
    /// Device number of a character or block device (`st_rdev`), 0 for other kinds.
    pub rdev: u64,
}

/// One directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The entry's name (raw bytes).
    pub name: Vec<u8>,
    /// The inode it names.
    pub ino: InodeId,
    /// The inode's type.
    pub kind: FileType,
}

/// Which attributes to change; `None` leaves one as it is.
#[derive(Debug, Clone, Default)]
pub struct SetAttr {
    /// New permission bits.
    pub perm: Option<u32>,
    /// New owner.
    pub uid: Option<u32>,
    /// New group.
    pub gid: Option<u32>,
    /// New access time (ns).
    pub atime_ns: Option<i64>,
    /// New modification time (ns).
    pub mtime_ns: Option<i64>,
}

/// How `rename` treats an existing destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RenameMode {
    /// Atomically replace the destination (POSIX `rename`).
    #[default]
    Replace,
    /// Fail with `AlreadyExists` if the destination exists (`RENAME_NOREPLACE`).
    NoReplace,
    /// Swap source and destination, both must exist (`RENAME_EXCHANGE`).
    Exchange,
}

const MAX_LINKS: u32 = 65_000;

/// Counts of each kind of node and the sum of file sizes, for `info`.
pub struct Totals {
    pub files: u64,
    pub directories: u64,
    pub symlinks: u64,
    pub file_bytes: u64,
}

/// Counts the live tree's nodes by kind and sums file sizes (released files, whose
/// purge waits, not included).
pub fn totals(conn: &Connection) -> Result<Totals> {
    let mut t = Totals { files: 0, directories: 0, symlinks: 0, file_bytes: 0 };
    let mut st = conn.prepare_cached(
        "SELECT mode & ?1, count(*), coalesce(sum(size), 0) FROM inodes i
         WHERE NOT EXISTS (SELECT 1 FROM orphans o WHERE o.ino = i.ino AND o.owner_pid = ?2) GROUP BY 1",
    )?;
    let mut rows = st.query(params![libc::S_IFMT, RELEASED])?;
    while let Some(r) = rows.next()? {
        let (kind, n, bytes): (u32, i64, i64) = (r.get(0)?, r.get(1)?, r.get(2)?);
        match kind {
            libc::S_IFREG => (t.files, t.file_bytes) = (n as u64, bytes as u64),
            libc::S_IFDIR => t.directories = n as u64,
            libc::S_IFLNK => t.symlinks = n as u64,
            _ => {}
        }
    }
    Ok(t)
}

pub fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

fn shown(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

/// The columns `attr_from_row` reads, shared by `inodes` and `snap_inodes`.
pub(crate) const ATTR_COLUMNS: &str = "ino, mode, uid, gid, size, nlink, atime_ns, mtime_ns, ctime_ns, rdev";

/// An [`Attr`] from a row selected as `ATTR_COLUMNS`.
pub(crate) fn attr_from_row(r: &Row<'_>) -> rusqlite::Result<Attr> {
    let mode: u32 = r.get(1)?;
    Ok(Attr {
        ino: InodeId(r.get::<_, i64>(0)? as u64),
        kind: FileType::from_mode(mode).unwrap_or(FileType::File),
        perm: mode & 0o7777,
        uid: r.get(2)?,
        gid: r.get(3)?,
        size: r.get::<_, i64>(4)? as u64,
        nlink: r.get(5)?,
        atime_ns: r.get(6)?,
        mtime_ns: r.get(7)?,
        ctime_ns: r.get(8)?,
        rdev: r.get::<_, i64>(9)? as u64,
    })
}

/// Attributes of `ino`, or `None` if it does not exist.
pub fn get(conn: &Connection, ino: InodeId) -> Result<Option<Attr>> {
    Ok(conn
        .prepare_cached(&format!("SELECT {ATTR_COLUMNS} FROM inodes WHERE ino = ?1"))?
        .query_row([ino.sql()], attr_from_row)
        .optional()?)
}

/// Attributes of `ino`; `StaleHandle` if it is gone.
pub fn attr(conn: &Connection, ino: InodeId) -> Result<Attr> {
    get(conn, ino)?.ok_or(Error::StaleHandle)
}

/// The inode named `name` in directory `parent`. A name longer than any stored one
/// is `NameTooLong`, not "not found", as every Linux file system answers.
pub fn lookup(conn: &Connection, parent: InodeId, name: &[u8]) -> Result<Option<InodeId>> {
    if name.len() > 255 {
        return Err(Error::NameTooLong { path: shown(name) });
    }
    Ok(conn
        .prepare_cached("SELECT ino FROM dirents WHERE parent = ?1 AND name = ?2")?
        .query_row(params![parent.sql(), name], |r| r.get::<_, i64>(0))
        .optional()?
        .map(|i| InodeId(i as u64)))
}

/// Parent of a directory (the root is its own parent).
pub fn parent_of(conn: &Connection, dir: InodeId) -> Result<InodeId> {
    if dir == InodeId::ROOT {
        return Ok(dir);
    }
    Ok(conn
        .prepare_cached("SELECT parent FROM dirents WHERE ino = ?1 LIMIT 1")?
        .query_row([dir.sql()], |r| r.get::<_, i64>(0))
        .optional()?
        .map(|i| InodeId(i as u64))
        .unwrap_or(InodeId::ROOT))
}

/// The entry naming a directory: `(parent, name)`, `None` for the root (or an
/// inode without a name). For a file with several links, one of them.
pub fn dir_entry_of(conn: &Connection, dir: InodeId) -> Result<Option<(InodeId, Vec<u8>)>> {
    Ok(conn
        .prepare_cached("SELECT parent, name FROM dirents WHERE ino = ?1 LIMIT 1")?
        .query_row([dir.sql()], |r| Ok((InodeId(r.get::<_, i64>(0)? as u64), r.get::<_, Vec<u8>>(1)?)))
        .optional()?)
}

/// Target of a symlink.
pub fn read_link(conn: &Connection, ino: InodeId) -> Result<Vec<u8>> {
    let t: Option<Vec<u8>> = conn
        .prepare_cached("SELECT target FROM inodes WHERE ino = ?1")?
        .query_row([ino.sql()], |r| r.get(0))
        .optional()?
        .ok_or(Error::StaleHandle)?;
    t.ok_or_else(|| Error::InvalidArgument { what: "not a symbolic link".into() })
}

/// An [`Entry`] from a row of `name, ino, mode` (directory listings, live or frozen).
pub(crate) fn entry_from_row(r: &Row<'_>) -> rusqlite::Result<Entry> {
    Ok(Entry {
        name: r.get(0)?,
        ino: InodeId(r.get::<_, i64>(1)? as u64),
        kind: FileType::from_mode(r.get(2)?).unwrap_or(FileType::File),
    })
}

/// Up to `limit` entries of `dir` whose names sort after `after`, in name order.
pub fn list(conn: &Connection, dir: InodeId, after: Option<&[u8]>, limit: usize) -> Result<Vec<Entry>> {
    let mut stmt = conn.prepare_cached(
        "SELECT d.name, d.ino, i.mode FROM dirents d JOIN inodes i ON i.ino = d.ino
         WHERE d.parent = ?1 AND d.name > ?2 ORDER BY d.name LIMIT ?3",
    )?;
    let rows = stmt.query_map(params![dir.sql(), after.unwrap_or(b""), limit as i64], entry_from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

fn has_entries(conn: &Connection, dir: InodeId) -> Result<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM dirents WHERE parent = ?1 LIMIT 1")?
        .query_row([dir.sql()], |_| Ok(()))
        .optional()?
        .is_some())
}

fn dir_attr(conn: &Connection, dir: InodeId) -> Result<Attr> {
    let a = attr(conn, dir)?;
    if a.kind != FileType::Dir {
        return Err(Error::NotADirectory { path: format!("inode {}", dir.0) });
    }
    Ok(a)
}

fn touch_dir(conn: &Connection, dir: InodeId, nlink_delta: i64, now: i64) -> Result<()> {
    conn.prepare_cached("UPDATE inodes SET nlink = nlink + ?2, mtime_ns = ?3, ctime_ns = ?3 WHERE ino = ?1")?
        .execute(params![dir.sql(), nlink_delta, now])?;
    Ok(())
}

/// What to create with [`Inodes::create`](crate::inodes::Inodes::create).
#[derive(Debug, Clone, Copy)]
pub struct NewNode<'a> {
    /// Node type.
    pub kind: FileType,
    /// Permission bits.
    pub perm: u32,
    /// Owner user id.
    pub uid: u32,
    /// Owner group id.
    pub gid: u32,
    /// Symlink target (symlinks only).
    pub target: Option<&'a [u8]>,
}

/// Creates a node named `name` in `parent`.
pub fn create(conn: &Connection, parent: InodeId, name: &[u8], node: NewNode<'_>) -> Result<Attr> {
    create_as(conn, parent, name, node, None)
}

/// [`create`] with a fixed inode number (one reserved earlier, never used) and
/// creation time; `None` numbers the inode and takes the time now.
pub fn create_as(
    conn: &Connection,
    parent: InodeId,
    name: &[u8],
    node: NewNode<'_>,
    fixed: Option<(InodeId, i64)>,
) -> Result<Attr> {
    check_name(name)?;
    dir_attr(conn, parent)?;
    if lookup(conn, parent, name)?.is_some() {
        return Err(Error::AlreadyExists { path: shown(name) });
    }
    let now = fixed.map_or_else(now_ns, |f| f.1);
    let nlink = if node.kind == FileType::Dir { 2 } else { 1 };
    let size = node.target.map(|t| t.len()).unwrap_or(0) as i64;
    conn.prepare_cached(
        "INSERT INTO inodes(ino, mode, uid, gid, size, nlink, atime_ns, mtime_ns, ctime_ns, target)
         VALUES (?8, ?1, ?2, ?3, ?4, ?5, ?6, ?6, ?6, ?7)",
    )?
    .execute(params![
        node.kind.mode_bits() | (node.perm & 0o7777),
        node.uid,
        node.gid,
        size,
        nlink,
        now,
        node.target,
        fixed.map(|f| f.0.sql())
    ])?;
    let ino = InodeId(conn.last_insert_rowid() as u64);
    conn.prepare_cached("INSERT INTO dirents(parent, name, ino) VALUES (?1, ?2, ?3)")?.execute(params![
        parent.sql(),
        name,
        ino.sql()
    ])?;
    touch_dir(conn, parent, if node.kind == FileType::Dir { 1 } else { 0 }, now)?;
    attr(conn, ino)
}

/// A node brought back from a snapshot: its attributes as they were frozen.
pub struct RestoredNode<'a> {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub atime_ns: i64,
    pub mtime_ns: i64,
    pub target: Option<&'a [u8]>,
    /// Device number (character and block devices), 0 otherwise.
    pub rdev: u64,
}

/// Creates `name` in `parent` with the attributes of `node` (ctime is now: the node
/// changed now; its content and modification time are the snapshot's). The caller
/// adds the content; a regular file's `size` is set here.
pub fn create_restored(conn: &Connection, parent: InodeId, name: &[u8], node: &RestoredNode<'_>) -> Result<InodeId> {
    check_name(name)?;
    dir_attr(conn, parent)?;
    if lookup(conn, parent, name)?.is_some() {
        return Err(Error::AlreadyExists { path: shown(name) });
    }
    let kind = FileType::from_mode(node.mode)
        .ok_or_else(|| Error::damaged(format!("snapshot node of unknown type {:o}", node.mode)))?;
    let now = now_ns();
    let nlink = if kind == FileType::Dir { 2 } else { 1 };
    conn.prepare_cached(
        "INSERT INTO inodes(mode, uid, gid, size, nlink, atime_ns, mtime_ns, ctime_ns, target, rdev)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?
    .execute(params![
        node.mode,
        node.uid,
        node.gid,
        node.size as i64,
        nlink,
        node.atime_ns,
        node.mtime_ns,
        now,
        node.target,
        node.rdev as i64
    ])?;
    let ino = InodeId(conn.last_insert_rowid() as u64);
    conn.prepare_cached("INSERT INTO dirents(parent, name, ino) VALUES (?1, ?2, ?3)")?.execute(params![
        parent.sql(),
        name,
        ino.sql()
    ])?;
    touch_dir(conn, parent, if kind == FileType::Dir { 1 } else { 0 }, now)?;
    Ok(ino)
}

/// Sets every attribute of an existing node of the same type to `node`'s (a restore
/// onto a directory that exists keeps its inode number).
pub fn reset_attrs(conn: &Connection, ino: InodeId, node: &RestoredNode<'_>) -> Result<()> {
    let a = attr(conn, ino)?;
    if FileType::from_mode(node.mode) != Some(a.kind) {
        return Err(Error::InvalidArgument { what: format!("inode {} changes type", ino.0) });
    }
    conn.prepare_cached(
        "UPDATE inodes SET mode = ?2, uid = ?3, gid = ?4, atime_ns = ?5, mtime_ns = ?6, ctime_ns = ?7 WHERE ino = ?1",
    )?
    .execute(params![ino.sql(), node.mode, node.uid, node.gid, node.atime_ns, node.mtime_ns, now_ns()])?;
    Ok(())
}

/// Adds another name for the non-directory `ino`.
pub fn link(conn: &Connection, ino: InodeId, parent: InodeId, name: &[u8]) -> Result<Attr> {
    check_name(name)?;
    let a = attr(conn, ino)?;
    if a.kind == FileType::Dir {
        return Err(Error::IsADirectory { path: shown(name) });
    }
    if a.nlink >= MAX_LINKS {
        return Err(Error::TooManyLinks { path: shown(name) });
    }
    dir_attr(conn, parent)?;
    if lookup(conn, parent, name)?.is_some() {
        return Err(Error::AlreadyExists { path: shown(name) });
    }
    let now = now_ns();
    conn.prepare_cached("INSERT INTO dirents(parent, name, ino) VALUES (?1, ?2, ?3)")?.execute(params![
        parent.sql(),
        name,
        ino.sql()
    ])?;
    conn.prepare_cached("UPDATE inodes SET nlink = nlink + 1, ctime_ns = ?2 WHERE ino = ?1")?
        .execute(params![ino.sql(), now])?;
    touch_dir(conn, parent, 0, now)?;
    attr(conn, ino)
}

/// What becomes of a file's content when its last name goes and no handle here uses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// Purged in the same transaction (the path API: the space is free on return).
    Now,
    /// Kept as a released orphan ([`RELEASED`]), purged later in batches of many
    /// files (`bulk::purge_released`, the reclaimer): what the mount does, so an
    /// `rm -rf` of a large tree updates each chunk row and index page once per batch
    /// instead of once per file.
    Later,
}

/// `orphans.owner_pid` of a released orphan: no handle uses it, any writer may purge it.
pub const RELEASED: i64 = 0;

/// What an operation that may remove a file's last name does with the file then:
/// kept as an orphan while `is_open` says a handle of this process uses it, else as
/// `release` says.
#[derive(Clone, Copy)]
pub struct LastLink<'a> {
    pub is_open: &'a dyn Fn(InodeId) -> bool,
    pub release: Release,
}

impl<'a> LastLink<'a> {
    /// Purged at once unless open.
    pub fn now(is_open: &'a dyn Fn(InodeId) -> bool) -> LastLink<'a> {
        LastLink { is_open, release: Release::Now }
    }

    /// Released (purged later, in a batch) unless open.
    pub fn later(is_open: &'a dyn Fn(InodeId) -> bool) -> LastLink<'a> {
        LastLink { is_open, release: Release::Later }
    }
}

/// Drops one link of a non-directory; when none is left, the inode is kept as an
/// orphan, purged or released as `last` says.
fn drop_link(conn: &Connection, ino: InodeId, now: i64, last: LastLink<'_>) -> Result<()> {
    // Two statements, no RETURNING (which needs a statement journal; see vault::bulk).
    conn.prepare_cached("UPDATE inodes SET nlink = nlink - 1, ctime_ns = ?2 WHERE ino = ?1")?
        .execute(params![ino.sql(), now])?;
    let nlink: i64 =
        conn.prepare_cached("SELECT nlink FROM inodes WHERE ino = ?1")?.query_row([ino.sql()], |r| r.get(0))?;
    if nlink <= 0 {
        let owner = if (last.is_open)(ino) {
            i64::from(std::process::id())
        } else if last.release == Release::Later {
            RELEASED
        } else {
            return purge(conn, ino);
        };
        conn.prepare_cached("INSERT OR REPLACE INTO orphans(ino, owner_pid) VALUES (?1, ?2)")?
            .execute(params![ino.sql(), owner])?;
    }
    Ok(())
}

/// Deletes an inode and its content (its last link is gone and no handle uses it).
pub fn purge(conn: &Connection, ino: InodeId) -> Result<()> {
    chunks::truncate(conn, ino.sql(), 0)?;
    conn.prepare_cached("DELETE FROM inodes WHERE ino = ?1")?.execute([ino.sql()])?;
    conn.prepare_cached("DELETE FROM orphans WHERE ino = ?1")?.execute([ino.sql()])?;
    Ok(())
}

/// Removes the non-directory `name` from `parent`.
pub fn unlink(conn: &Connection, parent: InodeId, name: &[u8], last: LastLink<'_>) -> Result<()> {
    let ino = lookup(conn, parent, name)?.ok_or_else(|| Error::not_found(shown(name)))?;
    if attr(conn, ino)?.kind == FileType::Dir {
        return Err(Error::IsADirectory { path: shown(name) });
    }
    let now = now_ns();
    conn.prepare_cached("DELETE FROM dirents WHERE parent = ?1 AND name = ?2")?.execute(params![parent.sql(), name])?;
    touch_dir(conn, parent, 0, now)?;
    drop_link(conn, ino, now, last)
}

/// Removes the empty directory `name` from `parent`.
pub fn rmdir(conn: &Connection, parent: InodeId, name: &[u8]) -> Result<()> {
    let ino = lookup(conn, parent, name)?.ok_or_else(|| Error::not_found(shown(name)))?;
    if attr(conn, ino)?.kind != FileType::Dir {
        return Err(Error::NotADirectory { path: shown(name) });
    }
    if has_entries(conn, ino)? {
        return Err(Error::DirectoryNotEmpty { path: shown(name) });
    }
    conn.prepare_cached("DELETE FROM dirents WHERE parent = ?1 AND name = ?2")?.execute(params![parent.sql(), name])?;
    conn.prepare_cached("DELETE FROM inodes WHERE ino = ?1")?.execute([ino.sql()])?;
    touch_dir(conn, parent, -1, now_ns())
}

/// True if `dir` is `ancestor` or lies below it.
fn is_within(conn: &Connection, mut dir: InodeId, ancestor: InodeId) -> Result<bool> {
    loop {
        if dir == ancestor {
            return Ok(true);
        }
        if dir == InodeId::ROOT {
            return Ok(false);
        }
        dir = parent_of(conn, dir)?;
    }
}

/// Renames `parent/name` to `new_parent/new_name` with POSIX semantics.
pub fn rename(
    conn: &Connection,
    parent: InodeId,
    name: &[u8],
    new_parent: InodeId,
    new_name: &[u8],
    mode: RenameMode,
    last: LastLink<'_>,
) -> Result<()> {
    check_name(new_name)?;
    let src = lookup(conn, parent, name)?.ok_or_else(|| Error::not_found(shown(name)))?;
    dir_attr(conn, new_parent)?;
    let src_attr = attr(conn, src)?;
    let dst = lookup(conn, new_parent, new_name)?;
    let now = now_ns();
    if src_attr.kind == FileType::Dir && is_within(conn, new_parent, src)? {
        return Err(Error::MoveIntoSelf { path: shown(new_name) });
    }
    match (mode, dst) {
        (RenameMode::Exchange, None) => return Err(Error::not_found(shown(new_name))),
        (RenameMode::NoReplace, Some(_)) => return Err(Error::AlreadyExists { path: shown(new_name) }),
        (RenameMode::Exchange, Some(dst)) => {
            let dst_attr = attr(conn, dst)?;
            if dst_attr.kind == FileType::Dir && is_within(conn, parent, dst)? {
                return Err(Error::MoveIntoSelf { path: shown(name) });
            }
            let set = conn.prepare_cached("UPDATE dirents SET ino = ?3 WHERE parent = ?1 AND name = ?2");
            set?.execute(params![parent.sql(), name, dst.sql()])?;
            conn.prepare_cached("UPDATE dirents SET ino = ?3 WHERE parent = ?1 AND name = ?2")?.execute(params![
                new_parent.sql(),
                new_name,
                src.sql()
            ])?;
            let dirs = |k: FileType| if k == FileType::Dir { 1 } else { 0 };
            let delta = dirs(dst_attr.kind) - dirs(src_attr.kind);
            touch_dir(conn, parent, delta, now)?;
            touch_dir(conn, new_parent, -delta, now)?;
            for ino in [src, dst] {
                conn.prepare_cached("UPDATE inodes SET ctime_ns = ?2 WHERE ino = ?1")?
                    .execute(params![ino.sql(), now])?;
            }
            return Ok(());
        }
        (_, Some(dst)) if dst == src => return Ok(()),
        (_, Some(dst)) => {
            let dst_attr = attr(conn, dst)?;
            match (src_attr.kind == FileType::Dir, dst_attr.kind == FileType::Dir) {
                (true, false) => return Err(Error::NotADirectory { path: shown(new_name) }),
                (false, true) => return Err(Error::IsADirectory { path: shown(new_name) }),
                (true, true) => {
                    if has_entries(conn, dst)? {
                        return Err(Error::DirectoryNotEmpty { path: shown(new_name) });
                    }
                    conn.prepare_cached("DELETE FROM dirents WHERE parent = ?1 AND name = ?2")?
                        .execute(params![new_parent.sql(), new_name])?;
                    conn.prepare_cached("DELETE FROM inodes WHERE ino = ?1")?.execute([dst.sql()])?;
                    touch_dir(conn, new_parent, -1, now)?;
                }
                (false, false) => {
                    conn.prepare_cached("DELETE FROM dirents WHERE parent = ?1 AND name = ?2")?
                        .execute(params![new_parent.sql(), new_name])?;
                    drop_link(conn, dst, now, last)?;
                }
            }
        }
        (_, None) => {}
    }
    conn.prepare_cached("UPDATE dirents SET parent = ?3, name = ?4 WHERE parent = ?1 AND name = ?2")?
        .execute(params![parent.sql(), name, new_parent.sql(), new_name])?;
    let moved_dir = if src_attr.kind == FileType::Dir && parent != new_parent { 1 } else { 0 };
    touch_dir(conn, parent, -moved_dir, now)?;
    touch_dir(conn, new_parent, moved_dir, now)?;
    conn.prepare_cached("UPDATE inodes SET ctime_ns = ?2 WHERE ino = ?1")?.execute(params![src.sql(), now])?;
    Ok(())
}

/// Changes permission bits, owner or times; always updates ctime.
pub fn set_attr(conn: &Connection, ino: InodeId, set: &SetAttr) -> Result<Attr> {
    let a = attr(conn, ino)?;
    let mode = a.kind.mode_bits() | (set.perm.unwrap_or(a.perm) & 0o7777);
    conn.prepare_cached(
        "UPDATE inodes SET mode = ?2, uid = ?3, gid = ?4, atime_ns = ?5, mtime_ns = ?6, ctime_ns = ?7 WHERE ino = ?1",
    )?
    .execute(params![
        ino.sql(),
        mode,
        set.uid.unwrap_or(a.uid),
        set.gid.unwrap_or(a.gid),
        set.atime_ns.unwrap_or(a.atime_ns),
        set.mtime_ns.unwrap_or(a.mtime_ns),
        now_ns()
    ])?;
    attr(conn, ino)
}

/// Records a file's new size and modification time after its content changed.
pub fn set_size(conn: &Connection, ino: InodeId, size: u64, mtime_ns: i64) -> Result<()> {
    let n = conn
        .prepare_cached("UPDATE inodes SET size = ?2, mtime_ns = ?3, ctime_ns = ?3 WHERE ino = ?1")?
        .execute(params![ino.sql(), size as i64, mtime_ns])?;
    if n == 0 {
        return Err(Error::StaleHandle);
    }
    Ok(())
}

/// Sets a new file's size and all three times at once (a file created whole).
pub fn set_size_and_times(conn: &Connection, ino: InodeId, size: u64, times_ns: [i64; 3]) -> Result<()> {
    let [atime, mtime, ctime] = times_ns;
    let n = conn
        .prepare_cached("UPDATE inodes SET size = ?2, atime_ns = ?3, mtime_ns = ?4, ctime_ns = ?5 WHERE ino = ?1")?
        .execute(params![ino.sql(), size as i64, atime, mtime, ctime])?;
    if n == 0 {
        return Err(Error::StaleHandle);
    }
    Ok(())
}

/// Purges orphans whose owning process has exited (it crashed or was killed while
/// holding an unlinked file open). Returns how many were purged. Released orphans
/// ([`RELEASED`]) are not looked at: `fs::bulk` purges them in batches.
pub fn collect_orphans(conn: &Connection) -> Result<usize> {
    let orphans: Vec<(i64, i64)> = conn
        .prepare("SELECT ino, owner_pid FROM orphans WHERE owner_pid != ?1")?
        .query_map([RELEASED], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut n = 0;
    for (ino, pid) in orphans {
        if !process_alive(pid) {
            purge(conn, InodeId(ino as u64))?;
            n += 1;
        }
    }
    Ok(n)
}

fn process_alive(pid: i64) -> bool {
    if pid == std::process::id() as i64 {
        // Another `Vault` of this process may still hold the handle; its last close
        // purges the inode.
        return true;
    }
    // SAFETY: kill with signal 0 only checks for existence.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Reserves `n` inode numbers by moving the `inodes` AUTOINCREMENT counter
/// (`sqlite_sequence`) past them, in the caller's transaction: numbers for a create
/// that must know its inode before it commits. A reserved number never used is simply
/// skipped (inode numbers are never reused anyway).
pub(crate) fn reserve_inodes(tx: &Connection, n: u64) -> Result<std::ops::Range<u64>> {
    let seq: Option<i64> =
        tx.query_row("SELECT seq FROM sqlite_sequence WHERE name = 'inodes'", [], |r| r.get(0)).optional()?;
    let last = match seq {
        Some(s) => s,
        None => {
            let max: i64 = tx.query_row("SELECT coalesce(max(ino), 0) FROM inodes", [], |r| r.get(0))?;
            tx.execute("INSERT INTO sqlite_sequence(name, seq) VALUES ('inodes', ?1)", [max])?;
            max
        }
    };
    let end = last + n as i64;
    tx.execute("UPDATE sqlite_sequence SET seq = ?1 WHERE name = 'inodes'", [end])?;
    Ok((last as u64 + 1)..(end as u64 + 1))
}
