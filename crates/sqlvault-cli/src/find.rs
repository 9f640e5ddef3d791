//! `sqlvault find`'s two ways: with a tag, [`by_tags`] asks the tag index and filters
//! its hits by modification time ([`Times`]); without one, [`walk`] walks the tree below
//! a directory and filters by name (glob) and modification time.

use serde_json::json;
use sqlvault::{FileType, InodeId, Query, Vault};

use crate::output::{line, JsonArray};
use crate::transfer;
use crate::{CliError, Exit};

/// Entries read per page while walking a directory.
const PAGE: usize = 512;

/// `--newer` / `--older` bounds on the modification time, in nanoseconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Times {
    pub newer: Option<i64>,
    pub older: Option<i64>,
}

impl Times {
    pub fn is_empty(&self) -> bool {
        self.newer.is_none() && self.older.is_none()
    }
    pub fn matches(&self, mtime_ns: i64) -> bool {
        self.newer.is_none_or(|t| mtime_ns > t) && self.older.is_none_or(|t| mtime_ns < t)
    }
}

/// Compiles `--name GLOB` (`*`, `?`, `[a-z]`, `[!a-z]`; case-sensitive), as `find
/// --tag` matches it in SQL. `globset`, as `--exclude` of `put`/`get`.
pub fn glob(pattern: &str) -> Result<globset::GlobMatcher, CliError> {
    globset::Glob::new(pattern)
        .map(|g| g.compile_matcher())
        .map_err(|e| CliError::usage(format!("--name {pattern:?}: {e}")))
}

/// Prints every entry below `dir` whose name matches `name` and whose modification time
/// is within `times`, depth first in name order. Memory: one page of entries per
/// directory level.
pub fn walk(
    v: &Vault,
    dir: &str,
    name: Option<&globset::GlobMatcher>,
    times: Times,
    json: bool,
) -> Result<(), CliError> {
    let top = v.metadata(dir)?;
    if top.kind != FileType::Dir {
        return Err(CliError { code: Exit::Tree, message: format!("{dir}: not a directory") });
    }
    let stdout = std::io::stdout();
    let mut w = stdout.lock();
    let mut arr = JsonArray::default();
    if json && !JsonArray::start(&mut w)? {
        return Ok(());
    }
    let base = dir.trim_end_matches('/').to_string();
    let mut out = |path: &str, ino: InodeId, kind: FileType| -> Result<bool, CliError> {
        if json {
            arr.push(&mut w, &json!({ "path": path, "ino": ino.0, "kind": kind }))
        } else {
            line(&mut w, path)
        }
    };
    let open = walk_dir(v, dir.as_bytes(), &base, name, times, &mut out)?;
    if json && open {
        arr.finish(&mut w)?;
    }
    Ok(())
}

/// Walks directory `dir` (its vault path as raw bytes: names made through a mount need
/// not be UTF-8, and are shown lossily), printed as `shown`.
fn walk_dir(
    v: &Vault,
    dir: &[u8],
    shown: &str,
    name: Option<&globset::GlobMatcher>,
    times: Times,
    out: &mut dyn FnMut(&str, InodeId, FileType) -> Result<bool, CliError>,
) -> Result<bool, CliError> {
    let mut after: Option<Vec<u8>> = None;
    loop {
        let page = v.read_dir_page(dir, after.as_deref(), PAGE)?;
        let Some(last) = page.last() else { return Ok(true) };
        after = Some(last.raw_name.clone());
        for e in &page {
            let path = format!("{shown}/{}", e.name);
            let name_ok = name.is_none_or(|g| g.is_match(&e.name));
            if name_ok && (times.is_empty() || times.matches(e.attr.mtime_ns)) && !out(&path, e.attr.ino, e.attr.kind)?
            {
                return Ok(false);
            }
            if e.attr.kind == FileType::Dir
                && !walk_dir(v, &transfer::child(dir, &e.raw_name), &path, name, times, out)?
            {
                return Ok(false);
            }
        }
        if page.len() < PAGE {
            return Ok(true);
        }
    }
}

/// Prints the hits of the tag query `q` below `dir` whose modification time is within
/// `times`, in the index's order, streamed.
pub fn by_tags(v: &Vault, dir: &str, q: &Query, times: Times, json: bool) -> Result<(), CliError> {
    let stdout = std::io::stdout();
    let mut w = stdout.lock();
    let mut arr = JsonArray::default();
    if json && !JsonArray::start(&mut w)? {
        return Ok(());
    }
    let mut failed = None;
    let mut open = true;
    v.find_each(dir, q, |f| {
        if !times.is_empty() && !times.matches(v.inodes().attr(f.ino)?.mtime_ns) {
            return Ok(true);
        }
        let written = if json {
            arr.push(&mut w, &json!({ "path": f.path, "ino": f.ino.0, "kind": f.kind }))
        } else {
            line(&mut w, &f.path)
        };
        // A closed pipe just stops the listing; another write error is reported.
        open = written.unwrap_or_else(|e| {
            failed = Some(e);
            false
        });
        Ok(open)
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    if json && open {
        arr.finish(&mut w)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_bounds_are_exclusive() {
        let t = Times { newer: Some(10), older: Some(20) };
        assert!(t.matches(15));
        assert!(!t.matches(10));
        assert!(!t.matches(20));
        assert!(Times::default().matches(0));
    }
}
