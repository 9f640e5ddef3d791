//! The file-system layer: POSIX semantics over the storage layer.
//!
//! `path` parses and validates vault paths; `chunks` is the content-addressed,
//! reference-counted chunk store and each file's chunk map; `cut` where a file written
//! whole is cut into chunks (by content); `tree` holds inodes and directory entries; `handle`
//! holds open files (the per-process registry, whole-chunk write buffers); `nodes` the
//! special nodes (FIFOs, sockets, devices); `ranges` holes, seeks and clones by chunk;
//! `bulk` set-based removal of a whole subtree; `reclaim` the background thread that
//! wipes deleted chunks' bytes.

pub(crate) mod bulk;
pub(crate) mod chunks;
pub(crate) mod cut;
pub(crate) mod handle;
pub(crate) mod nodes;
pub(crate) mod path;
pub(crate) mod ranges;
pub(crate) mod reclaim;
pub(crate) mod tree;
