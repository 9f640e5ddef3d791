//! Extended attributes: `(inode, name) -> value` rows in the `xattrs` table, except
//! the `user.*` namespace, which *is* the inode's tags: `user.NAME` reads and writes tag
//! `NAME` in [`crate::meta::tags`], typed by [`crate::meta::tags::TagValue::from_xattr`] (so
//! `setfattr -n user.iso -v 400` sets the integer 400, and `getfattr` returns exactly
//! the bytes that were set).
//!
//! Names and values are raw bytes. Which namespaces (`user.`, `trusted.`, ...) a
//! frontend accepts is its own policy; this module only bounds sizes (the Linux limits:
//! 255-byte names, 64 KiB values) and implements `XATTR_CREATE` / `XATTR_REPLACE`.
//! Every function runs inside the caller's transaction. Changing an attribute updates
//! the inode's ctime, as on a local file system. The rows of an inode go away with
//! the inode (a trigger on `inodes`, see `storage/schema.rs`).

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::{Error, Result};
use crate::fs::tree::{self, InodeId, SetAttr};
use crate::meta::tags::{self, TagValue};

/// Longest attribute name, in bytes (Linux `XATTR_NAME_MAX`).
pub const MAX_NAME: usize = 255;
/// Largest attribute value, in bytes (Linux `XATTR_SIZE_MAX`).
pub const MAX_VALUE: usize = 64 * 1024;

/// How [`Inodes::set_xattr`](crate::inodes::Inodes::set_xattr) treats an attribute that already exists or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XattrMode {
    /// Create or replace (`setxattr` flags 0).
    #[default]
    Upsert,
    /// Fail with `AlreadyExists` if it exists (`XATTR_CREATE`).
    Create,
    /// Fail with `NoSuchAttribute` if it does not exist (`XATTR_REPLACE`).
    Replace,
}

fn shown(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

fn check_name(name: &[u8]) -> Result<()> {
    if name.is_empty() || name.contains(&0) {
        return Err(Error::InvalidArgument { what: "an extended attribute name must be non-empty without NUL".into() });
    }
    if name.len() > MAX_NAME {
        return Err(Error::NameTooLong { path: shown(name) });
    }
    Ok(())
}

/// The tag an attribute name stands for: `user.NAME` -> `NAME`.
fn tag_name(name: &[u8]) -> Option<&[u8]> {
    name.strip_prefix(b"user.").filter(|n| !n.is_empty())
}

fn lookup(conn: &Connection, ino: InodeId, name: &[u8]) -> Result<Option<Vec<u8>>> {
    Ok(conn
        .prepare_cached("SELECT value FROM xattrs WHERE ino = ?1 AND name = ?2")?
        .query_row(params![ino.0 as i64, name], |r| r.get(0))
        .optional()?)
}

/// The value of `name` on `ino`; `NoSuchAttribute` if it has none, `StaleHandle` if
/// the inode is gone.
pub fn get(conn: &Connection, ino: InodeId, name: &[u8]) -> Result<Vec<u8>> {
    check_name(name)?;
    if let Some(tag) = tag_name(name) {
        return tags::get(conn, ino, tag)?
            .map(|v| v.to_xattr())
            .ok_or_else(|| Error::NoSuchAttribute { name: shown(name) });
    }
    match lookup(conn, ino, name)? {
        Some(v) => Ok(v),
        None => {
            tree::attr(conn, ino)?;
            Err(Error::NoSuchAttribute { name: shown(name) })
        }
    }
}

/// Sets `name` on `ino` as `mode` says.
pub fn set(conn: &Connection, ino: InodeId, name: &[u8], value: &[u8], mode: XattrMode) -> Result<()> {
    check_name(name)?;
    if value.len() > MAX_VALUE {
        return Err(Error::InvalidArgument {
            what: format!("extended attribute value of {} bytes (at most 64 KiB)", value.len()),
        });
    }
    tree::attr(conn, ino)?;
    let tag = tag_name(name);
    let exists = match tag {
        Some(tag) => tags::exists(conn, ino, tag)?,
        None => conn
            .prepare_cached("SELECT 1 FROM xattrs WHERE ino = ?1 AND name = ?2")?
            .query_row(params![ino.0 as i64, name], |_| Ok(()))
            .optional()?
            .is_some(),
    };
    match (mode, exists) {
        (XattrMode::Create, true) => return Err(Error::AlreadyExists { path: shown(name) }),
        (XattrMode::Replace, false) => return Err(Error::NoSuchAttribute { name: shown(name) }),
        _ => {}
    }
    if let Some(tag) = tag {
        return tags::set(conn, ino, &[(tag, &TagValue::from_xattr(value))]);
    }
    conn.prepare_cached("INSERT OR REPLACE INTO xattrs(ino, name, value) VALUES (?1, ?2, ?3)")?.execute(params![
        ino.0 as i64,
        name,
        value
    ])?;
    tree::set_attr(conn, ino, &SetAttr::default())?;
    Ok(())
}

/// Names of every attribute of `ino` (tags as `user.NAME`), in byte order.
pub fn list(conn: &Connection, ino: InodeId) -> Result<Vec<Vec<u8>>> {
    tree::attr(conn, ino)?;
    let mut stmt = conn.prepare_cached("SELECT name FROM xattrs WHERE ino = ?1 ORDER BY name")?;
    let rows = stmt.query_map([ino.0 as i64], |r| r.get(0))?;
    let mut names: Vec<Vec<u8>> = rows.collect::<rusqlite::Result<_>>()?;
    names.extend(tags::names(conn, ino)?.into_iter().map(|t| [&b"user."[..], &t].concat()));
    names.sort();
    Ok(names)
}

/// Removes `name` from `ino`; `NoSuchAttribute` if it has none.
pub fn remove(conn: &Connection, ino: InodeId, name: &[u8]) -> Result<()> {
    check_name(name)?;
    tree::attr(conn, ino)?;
    if let Some(tag) = tag_name(name) {
        return match tags::remove(conn, ino, &[tag])? {
            0 => Err(Error::NoSuchAttribute { name: shown(name) }),
            _ => Ok(()),
        };
    }
    let n =
        conn.prepare_cached("DELETE FROM xattrs WHERE ino = ?1 AND name = ?2")?.execute(params![ino.0 as i64, name])?;
    if n == 0 {
        return Err(Error::NoSuchAttribute { name: shown(name) });
    }
    tree::set_attr(conn, ino, &SetAttr::default())?;
    Ok(())
}

/// Deletes every attribute of `ino` (the inode itself is being deleted).
pub fn remove_all(conn: &Connection, ino: InodeId) -> Result<()> {
    conn.prepare_cached("DELETE FROM xattrs WHERE ino = ?1")?.execute([ino.0 as i64])?;
    Ok(())
}
