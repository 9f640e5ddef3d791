//! The storage layer: one encrypted SQLite database inside the vault file.
//!
//! `vfs` keeps the header and the database in one file; `engine` opens keyed
//! connections and hands writes to `commit` (group commit on the one writer) while
//! `checkpoint` moves WAL frames off the writer's path; `schema` creates and migrates
//! every table; `compact` gives free pages back. Nothing here knows files, tags or
//! snapshots: the layers above own their rows and reach SQLite only through an
//! [`engine::Engine`] read or write closure.

pub(crate) mod authorizer;
pub(crate) mod checkpoint;
pub(crate) mod commit;
pub(crate) mod compact;
pub(crate) mod engine;
#[cfg(test)]
mod journal_speed;
pub(crate) mod schema;
#[cfg(feature = "upgrade-v1")]
pub(crate) mod v1;
pub(crate) mod vfs;
