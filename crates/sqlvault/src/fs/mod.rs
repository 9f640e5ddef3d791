//! The file-system layer: POSIX semantics over the storage layer.
//!
//! `path` parses and validates vault paths; `chunks` is the content-addressed,
//! reference-counted chunk store; `tree` holds inodes and directory entries; `handle`
//! holds open files (the per-process registry, whole-chunk write buffers).

pub(crate) mod chunks;
pub(crate) mod handle;
pub(crate) mod path;
pub(crate) mod tree;
