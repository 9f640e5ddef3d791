//! Vault paths: parsing and validation of the paths the library API and CLI accept.
//!
//! A vault path is absolute (`/photos/a.jpg`); repeated slashes and `.` components are
//! ignored; `..` is refused rather than resolved (a lexical `..` would disagree with
//! symlinks, and refusing it makes escapes impossible by construction). Each name is
//! checked by [`check_name`].

use crate::error::{Error, Result};

/// Checks a single name: 1..=255 bytes, no `/` or NUL, not `.` or `..`.
pub fn check_name(name: &[u8]) -> Result<()> {
    if name.is_empty() || name == b"." || name == b".." {
        return Err(Error::InvalidPath {
            path: String::from_utf8_lossy(name).into_owned(),
            reason: "empty, '.' or '..' is not a file name",
        });
    }
    if name.len() > 255 {
        return Err(Error::NameTooLong { path: String::from_utf8_lossy(name).into_owned() });
    }
    if name.contains(&b'/') || name.contains(&0) {
        return Err(Error::InvalidPath {
            path: String::from_utf8_lossy(name).into_owned(),
            reason: "a name may not contain '/' or NUL",
        });
    }
    Ok(())
}

/// A parsed, validated vault path: its names from the root down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VaultPath<'a> {
    /// The components, without empty ones.
    pub names: Vec<&'a [u8]>,
}

impl<'a> VaultPath<'a> {
    /// Parses an absolute vault path (`/a/b`); `..` and names over 255 bytes are refused.
    pub fn parse(path: &'a str) -> Result<VaultPath<'a>> {
        if path.contains('\0') {
            return Err(Error::InvalidPath { path: path.escape_default().to_string(), reason: "contains NUL" });
        }
        if !path.starts_with('/') {
            return Err(Error::InvalidPath {
                path: path.into(),
                reason: "vault paths are absolute, they start with '/'",
            });
        }
        if path.len() > 4096 {
            return Err(Error::InvalidPath { path: format!("{}...", &path[..32]), reason: "longer than 4096 bytes" });
        }
        let mut names = Vec::new();
        for c in path.split('/') {
            match c {
                "" | "." => {}
                ".." => {
                    return Err(Error::InvalidPath { path: path.into(), reason: "'..' is not allowed in vault paths" })
                }
                name => {
                    check_name(name.as_bytes()).map_err(|e| match e {
                        Error::NameTooLong { .. } => Error::NameTooLong { path: path.into() },
                        _ => Error::InvalidPath { path: path.into(), reason: "invalid name" },
                    })?;
                    names.push(name.as_bytes());
                }
            }
        }
        Ok(VaultPath { names })
    }

    /// The parent's names and the last name; `None` for the root.
    pub fn split_last(&self) -> Option<(&[&'a [u8]], &'a [u8])> {
        self.names.split_last().map(|(last, parent)| (parent, *last))
    }
}

/// Joins a parent vault path and a child name for display and recursion.
pub fn join(parent: &str, name: &str) -> String {
    if parent.ends_with('/') {
        format!("{parent}{name}")
    } else {
        format!("{parent}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_slashes_and_dots() {
        let p = VaultPath::parse("//a/./b//").unwrap();
        assert_eq!(p.names, vec![b"a".as_slice(), b"b".as_slice()]);
        assert!(VaultPath::parse("/").unwrap().names.is_empty());
    }

    #[test]
    fn rejects_escapes_relative_nul_and_long_names() {
        assert!(matches!(VaultPath::parse("/a/../../etc"), Err(Error::InvalidPath { .. })));
        assert!(matches!(VaultPath::parse("a/b"), Err(Error::InvalidPath { .. })));
        assert!(matches!(VaultPath::parse("/a\0b"), Err(Error::InvalidPath { .. })));
        let long = format!("/{}", "x".repeat(256));
        assert!(matches!(VaultPath::parse(&long), Err(Error::NameTooLong { .. })));
        let ok = format!("/{}", "x".repeat(255));
        assert!(VaultPath::parse(&ok).is_ok());
    }
}
