//! The metadata layer: what a vault knows about its files besides their bytes.
//!
//! `tags` are typed values on inodes with an indexed `find`; `xattr` stores extended
//! attributes and routes `user.*` to tags; `records` are named key -> value collections;
//! `appsql` runs an application's own SQL tables under the guard of the storage layer.

pub(crate) mod appsql;
pub mod records;
pub mod tags;
pub(crate) mod xattr;
