//! Model-based property test: random sequences of file-tree and file-content
//! operations run against a real vault (a SQLCipher file in a temp dir, cheap KDF,
//! 4 KiB chunks so chunk boundaries are hit often) and against a small in-memory model
//! of POSIX semantics, and every result must agree.
//!
//! The model is a table of inodes (`Mid -> Node`): directories hold a name -> inode
//! map, files hold their bytes and a link count, so hard links are simply several
//! names for one model inode. Open handles are counted per model inode, which is how
//! unlink-while-open is modelled: a file whose last name is gone lives on (as an
//! orphan) until its last handle closes.
//!
//! Operations (paths are drawn from existing nodes, fresh names in existing
//! directories, or random paths over the names `a`..`d`):
//!
//! * special nodes (FIFOs, sockets, character and block devices with their device
//!   numbers) made by `make_node`: renamed, linked, unlinked, replaced, tagged and
//!   snapshotted like any non-directory, their content refused (`InvalidArgument`);
//! * create / open (with create, truncate) / write_file / remove_file / create_dir /
//!   remove_dir (incl. `DirectoryNotEmpty`) / remove_dir_all / hard_link / truncate
//!   (up and down) / metadata / read_dir / rename in all three modes (files and
//!   directories, replacing files and empty directories, into a directory's own
//!   subtree, over another name of the same inode, ...);
//! * up to four file handles kept open across operations: writes at random offsets
//!   and lengths (past the end making holes, straddling chunk boundaries, runs of
//!   zeros that become unstored chunks, repeated fills that deduplicate), reads at
//!   random offsets and lengths, `set_len`, `metadata`, second handles on the same
//!   inode (writes through one must be visible through the other), and handles on
//!   files that have since been unlinked or replaced by a rename;
//! * "close and reopen the vault": every handle is closed, then `Vault::open` again;
//! * tags: `set_tags` / `remove_tags` with typed values (integers, reals, text, bytes)
//!   on files, directories and the root, and `find` under a directory with one or two
//!   conditions (every operator, comparisons across value kinds) and a name glob,
//!   against a model that compares the way the documentation says;
//! * records: put / delete / prefix scans in two collections;
//! * an application SQL table `kv(k INTEGER PRIMARY KEY, v)` (created by `migrate`, which
//!   each reopen runs again): insert (a duplicate key is a SQL error), upsert, ranged
//!   delete (rows counted), ordered scans;
//! * `Vault::transaction` mixing `write_file`, `set_tags`, record puts and deletes, app
//!   table inserts,
//!   sometimes failing on purpose at the end (or failing by itself on a bad path or an
//!   open file): the model applies all of it or none.
//!
//! After each operation the outcome class must match: success, or the same
//! `sqlvault::Error` variant (`NotFound`, `AlreadyExists`, `NotADirectory`,
//! `IsADirectory`, `DirectoryNotEmpty`, `MoveIntoSelf`, `InvalidArgument`); any other
//! error fails the test. Every byte read is compared. Every 25 operations, and at each
//! reopen and at the end of a case, the whole tree is compared: recursive `read_dir`
//! (names and kinds), kind / size / nlink of every node, the content of every file,
//! that equal model inodes are equal vault inodes and different ones different, what
//! each open handle sees, and `fsck()` must report no problems. With no handle open,
//! `info()` counts (files, directories, logical bytes) must match too, so a leaked
//! orphan inode is caught. The full comparison also compares every node's tags and
//! every record collection (names, counts, all records) and every app table row. Each case ends by closing every handle, checking, reopening
//! and checking again.
//!
//! Volume: `DEFAULT_CASES` (50) cases x `OPS_PER_CASE` (250) operations = 12,500
//! operations per CI run (checked at compile time to be >= 10,000, and at run time that
//! every generated operation was executed; the total is printed to stderr). Set
//! `SQLVAULT_MODEL_CASES` for a soak run, e.g. `SQLVAULT_MODEL_CASES=2000 cargo test
//! -p sqlvault --test model` (about 3 minutes). `SQLVAULT_MODEL_STATS=1` prints how
//! often each operation succeeded or failed with each error, to check that the
//! generators reach the interesting cases. The usual `PROPTEST_*` variables (seed,
//! shrinking limits) apply as well.
//!
//! The bugs this test found are pinned down by the small tests at the end of the file.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

use common::*;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestRunner};
use sqlvault::inodes::RenameMode;
use sqlvault::{
    params, Condition, EngineConfig, Error, FileHandle, FileOptions, FileType, InodeId, Query, TagValue, Vault,
};

const CHUNK: u32 = 4096;
const DEFAULT_CASES: u32 = 50;
const OPS_PER_CASE: usize = 250;
const _: () = assert!(DEFAULT_CASES as usize * OPS_PER_CASE >= 10_000);
/// Full comparison every this many operations.
const CHECK_EVERY: usize = 25;
const SLOTS: usize = 4;
const NAMES: [&str; 4] = ["a", "b", "c", "d"];
/// A record: key and value.
type Record = (Vec<u8>, Vec<u8>);
const TAGS: [&str; 3] = ["camera", "iso", "x"];
const COLLS: [&str; 2] = ["c0", "c1"];
/// Record keys, chosen so that prefixes `k1` and `k` cover different sets.
const KEYS: [&str; 5] = ["k0", "k1", "k10", "k2", "x"];
const PREFIXES: [&str; 4] = ["", "k", "k1", "x"];
const TAG_OPS: [sqlvault::Op; 7] = [
    sqlvault::Op::Exists,
    sqlvault::Op::Eq,
    sqlvault::Op::Ne,
    sqlvault::Op::Lt,
    sqlvault::Op::Le,
    sqlvault::Op::Gt,
    sqlvault::Op::Ge,
];

// ----------------------------------------------------------------------------------
// Operations and their strategies
// ----------------------------------------------------------------------------------

/// A path, chosen against the model's state when the operation runs.
#[derive(Debug, Clone)]
enum Sel {
    /// Any existing node but the root.
    Any(u16),
    /// An existing regular file.
    File(u16),
    /// An existing directory but the root.
    Dir(u16),
    /// A name (maybe taken) in an existing directory.
    Fresh(u16, u8),
    /// Any path over the names, existing or not (`/` when empty).
    Random(Vec<u8>),
}

/// Where a rename goes: an ordinary path or a path below the source itself.
#[derive(Debug, Clone)]
enum To {
    Path(Sel),
    Below(Vec<u8>),
}

#[derive(Debug, Clone)]
enum Data {
    Fill(u8),
    Noise(u64),
}

#[derive(Debug, Clone)]
enum Op {
    // Harmless, so that shrinking (which moves towards earlier variants) turns
    // irrelevant operations into this one.
    Stat { path: Sel },
    ReadDir { path: Sel },
    Create { path: Sel, excl: bool },
    WriteFile { path: Sel, len: u32, data: Data },
    PathWrite { path: Sel, off: u32, len: u32, data: Data },
    PathRead { path: Sel, off: u32, len: u32 },
    ReadFile { path: Sel },
    Truncate { path: Sel, size: u32 },
    Open { slot: u8, path: Sel, create: bool, truncate: bool },
    Dup { from: u8, slot: u8 },
    Close { slot: u8 },
    HWrite { slot: u8, off: u32, len: u32, data: Data },
    HRead { slot: u8, off: u32, len: u32 },
    HSetLen { slot: u8, size: u32 },
    HStat { slot: u8 },
    Rename { from: Sel, to: To, mode: RenameMode },
    Unlink { path: Sel },
    Mkdir { path: Sel },
    MkNod { path: Sel, kind: u8 },
    Rmdir { path: Sel },
    RemoveAll { path: Sel },
    Link { from: Sel, to: Sel },
    SetTags { path: Sel, tags: Vec<(u8, TagValue)> },
    RemoveTags { path: Sel, names: Vec<u8> },
    Find { dir: Sel, conds: Vec<(u8, u8, TagValue)>, glob: bool },
    RecPut { coll: u8, key: u8, val: u8 },
    RecDel { coll: u8, key: u8 },
    RecScan { coll: u8, prefix: u8 },
    Tx { ops: Vec<TxOp>, fail: bool },
    AppInsert { k: u8, v: u8 },
    AppUpsert { k: u8, v: u8 },
    AppDelete { from: u8 },
    AppScan,
    Check,
    Reopen,
}

/// One step of an `Op::Tx` transaction.
#[derive(Debug, Clone)]
enum TxOp {
    Write { path: Sel, len: u32, data: Data },
    Tag { path: Sel, name: u8, value: TagValue },
    Put { coll: u8, key: u8, val: u8 },
    Del { coll: u8, key: u8 },
    AppInsert { k: u8, v: u8 },
}

fn names() -> impl Strategy<Value = Vec<u8>> {
    vec(0u8..4, 0..=3)
}

/// Paths for operations on things that should mostly exist.
fn sel_existing() -> impl Strategy<Value = Sel> {
    prop_oneof![
        3 => any::<u16>().prop_map(Sel::File),
        2 => any::<u16>().prop_map(Sel::Any),
        1 => any::<u16>().prop_map(Sel::Dir),
        1 => (any::<u16>(), 0u8..4).prop_map(|(d, n)| Sel::Fresh(d, n)),
        1 => names().prop_map(Sel::Random),
    ]
}

/// Paths for operations that create something.
fn sel_new() -> impl Strategy<Value = Sel> {
    prop_oneof![
        6 => (any::<u16>(), 0u8..4).prop_map(|(d, n)| Sel::Fresh(d, n)),
        1 => any::<u16>().prop_map(Sel::Any),
        1 => any::<u16>().prop_map(Sel::File),
        1 => names().prop_map(Sel::Random),
    ]
}

fn sel_dir() -> impl Strategy<Value = Sel> {
    prop_oneof![
        4 => any::<u16>().prop_map(Sel::Dir),
        1 => any::<u16>().prop_map(Sel::Any),
        1 => names().prop_map(Sel::Random),
    ]
}

fn data() -> impl Strategy<Value = Data> {
    prop_oneof![
        1 => Just(Data::Fill(0)),
        2 => prop_oneof![Just(0x55u8), Just(0xAA), any::<u8>()].prop_map(Data::Fill),
        3 => any::<u64>().prop_map(Data::Noise),
    ]
}

/// Offsets up to ~56 KiB, often within a few bytes of a chunk boundary.
fn off() -> impl Strategy<Value = u32> {
    prop_oneof![
        3 => 0u32..56_000,
        3 => (0u32..14, 0u32..48).prop_map(|(k, d)| (k * CHUNK + d).saturating_sub(24)),
        1 => Just(0u32),
    ]
}

/// Lengths up to ~9 KiB (so a write covers up to three chunks), many small ones.
fn len() -> impl Strategy<Value = u32> {
    prop_oneof![
        3 => 0u32..512,
        3 => 0u32..9_000,
        1 => (1u32..3, 0u32..32).prop_map(|(k, d)| (k * CHUNK + d).saturating_sub(16)),
    ]
}

/// Sizes for truncate / set_len, up to ~64 KiB, often near a chunk boundary.
fn size() -> impl Strategy<Value = u32> {
    prop_oneof![
        2 => 0u32..66_000,
        2 => (0u32..16, 0u32..16).prop_map(|(k, d)| (k * CHUNK + d).saturating_sub(8)),
        1 => Just(0u32),
    ]
}

fn mode() -> impl Strategy<Value = RenameMode> {
    prop_oneof![6 => Just(RenameMode::Replace), 1 => Just(RenameMode::NoReplace), 1 => Just(RenameMode::Exchange)]
}

/// Few values of every kind, so that equal values and cross-kind comparisons are common.
fn tag_value() -> impl Strategy<Value = TagValue> {
    prop_oneof![
        3 => (0i64..4).prop_map(TagValue::Int),
        2 => prop_oneof![Just(0.5f64), Just(1.0), Just(2.5)].prop_map(TagValue::Real),
        2 => prop_oneof![Just("a"), Just("b"), Just("1")].prop_map(TagValue::from),
        1 => prop_oneof![Just(vec![0u8]), Just(vec![1u8])].prop_map(TagValue::Bytes),
    ]
}

fn tx_op() -> impl Strategy<Value = TxOp> {
    prop_oneof![
        2 => (sel_new(), 0u32..9_000, data()).prop_map(|(path, len, data)| TxOp::Write { path, len, data }),
        2 => (sel_existing(), 0u8..3, tag_value()).prop_map(|(path, name, value)| TxOp::Tag { path, name, value }),
        2 => (0u8..2, 0u8..5, any::<u8>()).prop_map(|(coll, key, val)| TxOp::Put { coll, key, val }),
        1 => (0u8..2, 0u8..5).prop_map(|(coll, key)| TxOp::Del { coll, key }),
        2 => (0u8..6, any::<u8>()).prop_map(|(k, v)| TxOp::AppInsert { k, v }),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let slot = || any::<u8>();
    prop_oneof![
        3 => sel_existing().prop_map(|path| Op::Stat { path }),
        2 => sel_dir().prop_map(|path| Op::ReadDir { path }),
        5 => (sel_new(), any::<bool>()).prop_map(|(path, excl)| Op::Create { path, excl }),
        4 => (sel_new(), prop_oneof![len(), 0u32..20_000], data())
            .prop_map(|(path, len, data)| Op::WriteFile { path, len, data }),
        4 => (sel_existing(), off(), len(), data())
            .prop_map(|(path, off, len, data)| Op::PathWrite { path, off, len, data }),
        4 => (sel_existing(), off(), len()).prop_map(|(path, off, len)| Op::PathRead { path, off, len }),
        2 => sel_existing().prop_map(|path| Op::ReadFile { path }),
        4 => (sel_existing(), size()).prop_map(|(path, size)| Op::Truncate { path, size }),
        8 => (
            slot(),
            prop_oneof![3 => any::<u16>().prop_map(Sel::File), 2 => sel_existing(), 1 => sel_new()],
            any::<bool>(),
            prop::bool::weighted(0.2)
        )
            .prop_map(|(slot, path, create, truncate)| Op::Open { slot, path, create, truncate }),
        3 => (slot(), slot()).prop_map(|(from, slot)| Op::Dup { from, slot }),
        5 => slot().prop_map(|slot| Op::Close { slot }),
        14 => (slot(), off(), len(), data()).prop_map(|(slot, off, len, data)| Op::HWrite { slot, off, len, data }),
        10 => (slot(), off(), len()).prop_map(|(slot, off, len)| Op::HRead { slot, off, len }),
        5 => (slot(), size()).prop_map(|(slot, size)| Op::HSetLen { slot, size }),
        3 => slot().prop_map(|slot| Op::HStat { slot }),
        9 => (
            prop_oneof![2 => sel_existing(), 1 => sel_dir()],
            prop_oneof![
                5 => sel_new().prop_map(To::Path),
                2 => sel_existing().prop_map(To::Path),
                1 => sel_dir().prop_map(To::Path),
                1 => vec(0u8..4, 1..=2).prop_map(To::Below),
            ],
            mode()
        )
            .prop_map(|(from, to, mode)| Op::Rename { from, to, mode }),
        4 => sel_existing().prop_map(|path| Op::Unlink { path }),
        6 => sel_new().prop_map(|path| Op::Mkdir { path }),
        2 => (sel_new(), 0u8..4).prop_map(|(path, kind)| Op::MkNod { path, kind }),
        3 => sel_dir().prop_map(|path| Op::Rmdir { path }),
        1 => sel_dir().prop_map(|path| Op::RemoveAll { path }),
        4 => (sel_existing(), sel_new()).prop_map(|(from, to)| Op::Link { from, to }),
        4 => (prop_oneof![3 => sel_existing(), 1 => sel_dir()], vec((0u8..3, tag_value()), 1..=3))
            .prop_map(|(path, tags)| Op::SetTags { path, tags }),
        1 => (sel_existing(), vec(0u8..3, 1..=2)).prop_map(|(path, names)| Op::RemoveTags { path, names }),
        3 => (sel_dir(), vec((0u8..3, 0u8..7, tag_value()), 1..=2), prop::bool::weighted(0.3))
            .prop_map(|(dir, conds, glob)| Op::Find { dir, conds, glob }),
        2 => (0u8..2, 0u8..5, any::<u8>()).prop_map(|(coll, key, val)| Op::RecPut { coll, key, val }),
        1 => (0u8..2, 0u8..5).prop_map(|(coll, key)| Op::RecDel { coll, key }),
        1 => (0u8..2, 0u8..4).prop_map(|(coll, prefix)| Op::RecScan { coll, prefix }),
        2 => (vec(tx_op(), 1..=4), prop::bool::weighted(0.3)).prop_map(|(ops, fail)| Op::Tx { ops, fail }),
        2 => (0u8..6, any::<u8>()).prop_map(|(k, v)| Op::AppInsert { k, v }),
        2 => (0u8..6, any::<u8>()).prop_map(|(k, v)| Op::AppUpsert { k, v }),
        1 => (0u8..7).prop_map(|from| Op::AppDelete { from }),
        1 => Just(Op::AppScan),
        1 => Just(Op::Check),
        1 => Just(Op::Reopen),
    ]
}

// ----------------------------------------------------------------------------------
// The model
// ----------------------------------------------------------------------------------

/// Outcome classes compared between vault and model.
#[derive(Debug, Clone, PartialEq, Eq)]
enum E {
    NotFound,
    AlreadyExists,
    NotADirectory,
    IsADirectory,
    DirectoryNotEmpty,
    MoveIntoSelf,
    InvalidArgument,
    /// An application SQL statement failed (here: a duplicate key).
    Sql,
    /// Anything else: never expected by the model, so always a mismatch.
    Other(String),
}

fn class(e: &Error) -> E {
    match e {
        Error::NotFound { .. } => E::NotFound,
        Error::AlreadyExists { .. } => E::AlreadyExists,
        Error::NotADirectory { .. } => E::NotADirectory,
        Error::IsADirectory { .. } => E::IsADirectory,
        Error::DirectoryNotEmpty { .. } => E::DirectoryNotEmpty,
        Error::MoveIntoSelf { .. } => E::MoveIntoSelf,
        Error::InvalidArgument { .. } => E::InvalidArgument,
        Error::Sql { .. } => E::Sql,
        other => E::Other(format!("{other:?}")),
    }
}

type Mid = u32;
const ROOT: Mid = 0;

#[derive(Debug, Clone)]
enum Node {
    /// A regular file, or with `special` a FIFO, socket or device node (kind and
    /// device number), which has no content: every content operation on it is
    /// `InvalidArgument`, everything else treats it as any non-directory.
    File {
        data: Vec<u8>,
        nlink: u32,
        special: Option<(FileType, u64)>,
    },
    Dir {
        parent: Mid,
        children: BTreeMap<String, Mid>,
    },
}

#[derive(Clone)]
struct Model {
    nodes: HashMap<Mid, Node>,
    next: Mid,
    /// Open handles per inode.
    open: HashMap<Mid, usize>,
    /// Tags per inode (entries of removed inodes are never looked at again: model
    /// inode numbers are not reused).
    tags: HashMap<Mid, BTreeMap<String, TagValue>>,
    /// Record collections (a collection exists from its first put on).
    records: BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>,
    /// The application table `kv`.
    app: BTreeMap<i64, i64>,
}

/// How the documentation says tag values compare: numbers numerically, text and bytes
/// byte-wise, different kinds not at all.
fn tag_cmp(a: &TagValue, b: &TagValue) -> Option<std::cmp::Ordering> {
    use TagValue::*;
    match (a, b) {
        (Int(x), Int(y)) => Some(x.cmp(y)),
        (Int(x), Real(y)) => (*x as f64).partial_cmp(y),
        (Real(x), Int(y)) => x.partial_cmp(&(*y as f64)),
        (Real(x), Real(y)) => x.partial_cmp(y),
        (Text(x), Text(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        (Bytes(x), Bytes(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

/// Whether a stored value satisfies `op q`; `!=` holds across kinds (the tag is set
/// and is not equal).
fn tag_matches(stored: &TagValue, op: sqlvault::Op, q: &TagValue) -> bool {
    use sqlvault::Op as O;
    use std::cmp::Ordering::*;
    let c = tag_cmp(stored, q);
    match op {
        O::Exists => true,
        O::Eq => c == Some(Equal),
        O::Ne => c != Some(Equal),
        O::Lt => c == Some(Less),
        O::Le => matches!(c, Some(Less | Equal)),
        O::Gt => c == Some(Greater),
        O::Ge => matches!(c, Some(Greater | Equal)),
    }
}

fn comps(path: &str) -> Vec<&str> {
    path.split('/').filter(|c| !c.is_empty()).collect()
}

fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

impl Model {
    fn new() -> Model {
        let mut nodes = HashMap::new();
        nodes.insert(ROOT, Node::Dir { parent: ROOT, children: BTreeMap::new() });
        Model {
            nodes,
            next: 1,
            open: HashMap::new(),
            tags: HashMap::new(),
            records: BTreeMap::new(),
            app: BTreeMap::new(),
        }
    }

    fn node(&self, id: Mid) -> &Node {
        &self.nodes[&id]
    }

    fn is_dir(&self, id: Mid) -> bool {
        matches!(self.node(id), Node::Dir { .. })
    }

    /// The kind and device number of a special node.
    fn special(&self, id: Mid) -> Option<(FileType, u64)> {
        match self.node(id) {
            Node::File { special, .. } => *special,
            Node::Dir { .. } => None,
        }
    }

    /// A node whose content may be read or written: `IsADirectory` for a directory,
    /// `InvalidArgument` for a special node.
    fn content(&self, id: Mid) -> Result<Mid, E> {
        if self.is_dir(id) {
            Err(E::IsADirectory)
        } else if self.special(id).is_some() {
            Err(E::InvalidArgument)
        } else {
            Ok(id)
        }
    }

    fn kind(&self, id: Mid) -> FileType {
        if let Some((k, _)) = self.special(id) {
            k
        } else if self.is_dir(id) {
            FileType::Dir
        } else {
            FileType::File
        }
    }

    fn children(&self, id: Mid) -> &BTreeMap<String, Mid> {
        match self.node(id) {
            Node::Dir { children, .. } => children,
            Node::File { .. } => panic!("model: {id} is not a directory"),
        }
    }

    fn children_mut(&mut self, id: Mid) -> &mut BTreeMap<String, Mid> {
        match self.nodes.get_mut(&id) {
            Some(Node::Dir { children, .. }) => children,
            _ => panic!("model: {id} is not a directory"),
        }
    }

    fn set_parent(&mut self, id: Mid, new_parent: Mid) {
        if let Some(Node::Dir { parent, .. }) = self.nodes.get_mut(&id) {
            *parent = new_parent;
        }
    }

    fn parent_dir(&self, id: Mid) -> Mid {
        match self.node(id) {
            Node::Dir { parent, .. } => *parent,
            Node::File { .. } => panic!("model: {id} is not a directory"),
        }
    }

    fn data(&self, id: Mid) -> &Vec<u8> {
        match self.node(id) {
            Node::File { data, .. } => data,
            Node::Dir { .. } => panic!("model: {id} is not a file"),
        }
    }

    fn data_mut(&mut self, id: Mid) -> &mut Vec<u8> {
        match self.nodes.get_mut(&id) {
            Some(Node::File { data, .. }) => data,
            _ => panic!("model: {id} is not a file"),
        }
    }

    fn size(&self, id: Mid) -> u64 {
        match self.node(id) {
            Node::File { data, .. } => data.len() as u64,
            Node::Dir { .. } => 0,
        }
    }

    fn nlink(&self, id: Mid) -> u32 {
        match self.node(id) {
            Node::File { nlink, .. } => *nlink,
            Node::Dir { children, .. } => 2 + children.values().filter(|c| self.is_dir(**c)).count() as u32,
        }
    }

    fn add(&mut self, node: Node) -> Mid {
        let id = self.next;
        self.next += 1;
        self.nodes.insert(id, node);
        id
    }

    /// Resolves every name; each directory on the way must be one.
    fn walk(&self, names: &[&str]) -> Result<Mid, E> {
        let mut cur = ROOT;
        for name in names {
            match self.node(cur) {
                Node::Dir { children, .. } => cur = *children.get(*name).ok_or(E::NotFound)?,
                Node::File { .. } => return Err(E::NotADirectory),
            }
        }
        Ok(cur)
    }

    fn resolve(&self, path: &str) -> Result<Mid, E> {
        self.walk(&comps(path))
    }

    /// The directory holding the last name of `path`, and that name.
    fn parent<'p>(&self, path: &'p str) -> Result<(Mid, &'p str), E> {
        let c = comps(path);
        let (last, init) = c.split_last().ok_or(E::InvalidArgument)?;
        let dir = self.walk(init)?;
        if !self.is_dir(dir) {
            return Err(E::NotADirectory);
        }
        Ok((dir, last))
    }

    fn lookup(&self, dir: Mid, name: &str) -> Option<Mid> {
        self.children(dir).get(name).copied()
    }

    fn forget_if_unused(&mut self, id: Mid) {
        if let Some(Node::File { nlink: 0, .. }) = self.nodes.get(&id) {
            if !self.open.contains_key(&id) {
                self.nodes.remove(&id);
            }
        }
    }

    fn drop_link(&mut self, id: Mid) {
        if let Some(Node::File { nlink, .. }) = self.nodes.get_mut(&id) {
            *nlink -= 1;
        }
        self.forget_if_unused(id);
    }

    fn opened(&mut self, id: Mid) {
        *self.open.entry(id).or_insert(0) += 1;
    }

    fn closed(&mut self, id: Mid) {
        let n = self.open.get_mut(&id).expect("model: closing an inode that is not open");
        *n -= 1;
        if *n == 0 {
            self.open.remove(&id);
        }
        self.forget_if_unused(id);
    }

    fn within(&self, mut dir: Mid, ancestor: Mid) -> bool {
        loop {
            if dir == ancestor {
                return true;
            }
            if dir == ROOT {
                return false;
            }
            dir = self.parent_dir(dir);
        }
    }

    /// Every named node with its path, depth first in name order, the root first.
    fn paths(&self) -> Vec<(String, Mid)> {
        let mut out = vec![("/".to_string(), ROOT)];
        let mut i = 0;
        while i < out.len() {
            let (p, id) = out[i].clone();
            if self.is_dir(id) {
                let kids: Vec<_> = self.children(id).iter().map(|(n, c)| (join(&p, n), *c)).collect();
                out.splice(i + 1..i + 1, kids);
            }
            i += 1;
        }
        out
    }

    // ----- operations: check first, then change; an Err leaves the model as it was -----

    /// `open_file` with `create`: the file, created if missing.
    fn create(&mut self, path: &str, excl: bool, truncate: bool) -> Result<Mid, E> {
        let (dir, name) = self.parent(path)?;
        match self.lookup(dir, name) {
            Some(_) if excl => Err(E::AlreadyExists),
            Some(id) if self.content(id).is_err() => Err(self.content(id).unwrap_err()),
            Some(id) => {
                if truncate {
                    self.data_mut(id).clear();
                }
                Ok(id)
            }
            None => {
                let id = self.add(Node::File { data: Vec::new(), nlink: 1, special: None });
                self.children_mut(dir).insert(name.to_string(), id);
                Ok(id)
            }
        }
    }

    /// `open_file` without `create`.
    fn open_existing(&mut self, path: &str, truncate: bool) -> Result<Mid, E> {
        let id = self.content(self.resolve(path)?)?;
        if truncate {
            self.data_mut(id).clear();
        }
        Ok(id)
    }

    fn write(&mut self, id: Mid, off: u64, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let d = self.data_mut(id);
        let (off, end) = (off as usize, off as usize + bytes.len());
        if d.len() < end {
            d.resize(end, 0);
        }
        d[off..end].copy_from_slice(bytes);
    }

    fn read(&self, id: Mid, off: u64, len: usize) -> &[u8] {
        let d = self.data(id);
        let off = (off as usize).min(d.len());
        &d[off..(off + len).min(d.len())]
    }

    fn truncate(&mut self, path: &str, size: u64) -> Result<(), E> {
        let id = self.content(self.resolve(path)?)?;
        self.data_mut(id).resize(size as usize, 0);
        Ok(())
    }

    fn unlink(&mut self, path: &str) -> Result<(), E> {
        let (dir, name) = self.parent(path)?;
        let id = self.lookup(dir, name).ok_or(E::NotFound)?;
        if self.is_dir(id) {
            return Err(E::IsADirectory);
        }
        self.children_mut(dir).remove(name);
        self.drop_link(id);
        Ok(())
    }

    fn mknod(&mut self, path: &str, kind: FileType, rdev: u64) -> Result<(), E> {
        let (dir, name) = self.parent(path)?;
        if self.lookup(dir, name).is_some() {
            return Err(E::AlreadyExists);
        }
        let id = self.add(Node::File { data: Vec::new(), nlink: 1, special: Some((kind, rdev)) });
        self.children_mut(dir).insert(name.to_string(), id);
        Ok(())
    }

    fn mkdir(&mut self, path: &str) -> Result<(), E> {
        let (dir, name) = self.parent(path)?;
        if self.lookup(dir, name).is_some() {
            return Err(E::AlreadyExists);
        }
        let id = self.add(Node::Dir { parent: dir, children: BTreeMap::new() });
        self.children_mut(dir).insert(name.to_string(), id);
        Ok(())
    }

    fn rmdir(&mut self, path: &str) -> Result<(), E> {
        let (dir, name) = self.parent(path)?;
        let id = self.lookup(dir, name).ok_or(E::NotFound)?;
        if !self.is_dir(id) {
            return Err(E::NotADirectory);
        }
        if !self.children(id).is_empty() {
            return Err(E::DirectoryNotEmpty);
        }
        self.children_mut(dir).remove(name);
        self.nodes.remove(&id);
        Ok(())
    }

    fn remove_all(&mut self, path: &str) -> Result<(), E> {
        let (dir, name) = self.parent(path)?;
        let id = self.lookup(dir, name).ok_or(E::NotFound)?;
        if !self.is_dir(id) {
            return Err(E::NotADirectory);
        }
        self.children_mut(dir).remove(name);
        self.remove_tree(id);
        Ok(())
    }

    fn remove_tree(&mut self, id: Mid) {
        if self.is_dir(id) {
            let kids: Vec<Mid> = self.children(id).values().copied().collect();
            for k in kids {
                self.remove_tree(k);
            }
            self.nodes.remove(&id);
        } else {
            self.drop_link(id);
        }
    }

    fn link(&mut self, from: &str, to: &str) -> Result<(), E> {
        let id = self.resolve(from)?;
        let (dir, name) = self.parent(to)?;
        if self.is_dir(id) {
            return Err(E::IsADirectory);
        }
        if self.lookup(dir, name).is_some() {
            return Err(E::AlreadyExists);
        }
        self.children_mut(dir).insert(name.to_string(), id);
        if let Some(Node::File { nlink, .. }) = self.nodes.get_mut(&id) {
            *nlink += 1;
        }
        Ok(())
    }

    fn rename(&mut self, from: &str, to: &str, mode: RenameMode) -> Result<(), E> {
        let (sp, sn) = self.parent(from)?;
        let (dp, dn) = self.parent(to)?;
        let src = self.lookup(sp, sn).ok_or(E::NotFound)?;
        if self.is_dir(src) && self.within(dp, src) {
            return Err(E::MoveIntoSelf);
        }
        let dst = self.lookup(dp, dn);
        match (mode, dst) {
            (RenameMode::Exchange, None) => return Err(E::NotFound),
            (RenameMode::NoReplace, Some(_)) => return Err(E::AlreadyExists),
            (RenameMode::Exchange, Some(dst)) => {
                if self.is_dir(dst) && self.within(sp, dst) {
                    return Err(E::MoveIntoSelf);
                }
                self.children_mut(sp).insert(sn.to_string(), dst);
                self.children_mut(dp).insert(dn.to_string(), src);
                self.set_parent(dst, sp);
                self.set_parent(src, dp);
                return Ok(());
            }
            (_, Some(dst)) if dst == src => return Ok(()),
            (_, Some(dst)) => match (self.is_dir(src), self.is_dir(dst)) {
                (true, false) => return Err(E::NotADirectory),
                (false, true) => return Err(E::IsADirectory),
                (true, true) => {
                    if !self.children(dst).is_empty() {
                        return Err(E::DirectoryNotEmpty);
                    }
                    self.children_mut(dp).remove(dn);
                    self.nodes.remove(&dst);
                }
                (false, false) => {
                    self.children_mut(dp).remove(dn);
                    self.drop_link(dst);
                }
            },
            (_, None) => {}
        }
        self.children_mut(sp).remove(sn);
        self.children_mut(dp).insert(dn.to_string(), src);
        self.set_parent(src, dp);
        Ok(())
    }
}

impl Model {
    fn set_tags(&mut self, path: &str, tags: &[(String, TagValue)]) -> Result<(), E> {
        let id = self.resolve(path)?;
        let t = self.tags.entry(id).or_default();
        for (n, v) in tags {
            t.insert(n.clone(), v.clone());
        }
        Ok(())
    }

    fn remove_tags(&mut self, path: &str, names: &[&str]) -> Result<usize, E> {
        let id = self.resolve(path)?;
        let t = self.tags.entry(id).or_default();
        Ok(names.iter().filter(|n| t.remove(**n).is_some()).count())
    }

    fn tags_of(&self, id: Mid) -> Vec<(String, TagValue)> {
        self.tags.get(&id).map(|t| t.iter().map(|(n, v)| (n.clone(), v.clone())).collect()).unwrap_or_default()
    }

    /// Paths below `dir` (not `dir` itself) matching every condition and the glob `[ab]`.
    fn find(&self, dir: &str, conds: &[Condition], glob: bool) -> Result<Vec<String>, E> {
        let id = self.resolve(dir)?;
        if !self.is_dir(id) {
            return Err(E::NotADirectory);
        }
        let prefix = if dir == "/" { "/".to_string() } else { format!("{dir}/") };
        let mut out: Vec<String> = self
            .paths()
            .into_iter()
            .filter(|(p, _)| p.starts_with(&prefix) && p.len() > prefix.len())
            .filter(|(p, _)| !glob || p.ends_with("/a") || p.ends_with("/b"))
            .filter(|(_, id)| {
                conds.iter().all(|c| {
                    self.tags.get(id).and_then(|t| t.get(&c.name)).is_some_and(|v| tag_matches(v, c.op, &c.value))
                })
            })
            .map(|(p, _)| p)
            .collect();
        out.sort();
        Ok(out)
    }

    /// A plain INSERT into `kv`: a duplicate key is a SQL error.
    fn app_insert(&mut self, k: i64, v: i64) -> Result<(), E> {
        if self.app.contains_key(&k) {
            return Err(E::Sql);
        }
        self.app.insert(k, v);
        Ok(())
    }

    fn rec_put(&mut self, coll: &str, key: &str, val: &[u8]) {
        self.records.entry(coll.to_string()).or_default().insert(key.as_bytes().to_vec(), val.to_vec());
    }

    fn rec_del(&mut self, coll: &str, key: &str) -> bool {
        self.records.get_mut(coll).is_some_and(|c| c.remove(key.as_bytes()).is_some())
    }

    /// `Tx::write_file`: create or replace the whole content; refused for a file with
    /// open handles.
    fn tx_write(&mut self, path: &str, bytes: &[u8]) -> Result<(), E> {
        let (dir, name) = self.parent(path)?;
        match self.lookup(dir, name) {
            Some(id) if self.content(id).is_err() => Err(self.content(id).unwrap_err()),
            Some(id) if self.open.contains_key(&id) => Err(E::InvalidArgument),
            Some(id) => {
                *self.data_mut(id) = bytes.to_vec();
                Ok(())
            }
            None => {
                let id = self.add(Node::File { data: bytes.to_vec(), nlink: 1, special: None });
                self.children_mut(dir).insert(name.to_string(), id);
                Ok(())
            }
        }
    }
}

/// The special node kinds `Op::MkNod` makes, with a device number for devices.
fn special_kind(k: u8) -> (FileType, u64) {
    match k % 4 {
        0 => (FileType::Fifo, 0),
        1 => (FileType::Socket, 0),
        2 => (FileType::CharDevice, 0x0103),
        _ => (FileType::BlockDevice, 0x10_3801),
    }
}

fn key_of(k: u8) -> &'static str {
    KEYS[k as usize % KEYS.len()]
}

fn rec_val(v: u8) -> Vec<u8> {
    format!("v{v}").into_bytes()
}

// ----------------------------------------------------------------------------------
// The harness: one vault, one model, the open handles
// ----------------------------------------------------------------------------------

static OPS_RUN: AtomicU64 = AtomicU64::new(0);
/// Outcomes per operation kind, printed when `SQLVAULT_MODEL_STATS` is set (to see
/// that the generators reach the interesting cases).
static STATS: std::sync::Mutex<BTreeMap<String, u64>> = std::sync::Mutex::new(BTreeMap::new());

fn tally<T>(op: &str, got: &Result<T, Error>) {
    let outcome = match got {
        Ok(_) => "ok".to_string(),
        Err(e) => format!("{:?}", class(e)),
    };
    let name = op.split([' ', '{']).next().unwrap_or(op);
    *STATS.lock().unwrap().entry(format!("{name:<10} {outcome}")).or_insert(0) += 1;
}

fn bytes(d: &Data, off: u32, len: u32) -> Vec<u8> {
    match d {
        Data::Fill(b) => vec![*b; len as usize],
        Data::Noise(seed) => {
            let mut x = (seed ^ ((off as u64) << 32)) | 1;
            (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x >> 24) as u8
                })
                .collect()
        }
    }
}

fn rw() -> FileOptions {
    FileOptions::new().read(true).write(true)
}

struct Harness {
    t: TestVault,
    v: Option<Vault>,
    m: Model,
    handles: Vec<Option<(FileHandle, Mid)>>,
    step: usize,
    what: String,
    op_name: String,
}

/// A 32 KiB page cache: the dirty limit is then its floor, 4 chunks (16 KiB), so
/// handles' writes often go past it and commit behind the writer (write-behind) while
/// the model keeps writing, reading, truncating and closing.
fn small_cache() -> EngineConfig {
    EngineConfig { cache_kib: 32, ..EngineConfig::default() }
}

impl Harness {
    fn new() -> Harness {
        let (t, v) = TestVault::new(CHUNK);
        v.close().unwrap();
        let v = t.reopen_with(small_cache());
        assert_eq!(v.migrate("model", APP_MIGRATIONS).unwrap(), 1);
        Harness {
            t,
            v: Some(v),
            m: Model::new(),
            handles: (0..SLOTS).map(|_| None).collect(),
            step: 0,
            what: String::new(),
            op_name: String::new(),
        }
    }

    fn v(&self) -> &Vault {
        self.v.as_ref().expect("vault is open")
    }

    /// Panics with the step and operation, so a failure says where it happened.
    #[track_caller]
    fn fail(&self, msg: String) -> ! {
        panic!("step {} ({}): {msg}", self.step, self.what)
    }

    /// Compares the outcome class of a vault call with the model's.
    #[track_caller]
    fn same<T, U>(&self, got: &Result<T, Error>, want: &Result<U, E>) -> bool {
        tally(&self.op_name, got);
        match (got, want) {
            (Ok(_), Ok(_)) => true,
            (Err(g), Err(w)) if class(g) == *w => false,
            (Ok(_), Err(w)) => self.fail(format!("vault succeeded, model says {w:?}")),
            (Err(g), Ok(_)) => self.fail(format!("vault failed with {g:?} ({g}), model says it succeeds")),
            (Err(g), Err(w)) => self.fail(format!("vault failed with {g:?} ({g}), model says {w:?}")),
        }
    }

    /// The path `s` stands for now. `Any`, `File` and `Dir` never give the root (a
    /// name in the root when nothing fits); an empty `Random` does.
    fn path(&self, s: &Sel) -> String {
        let all = self.m.paths();
        let of = |kind: Option<FileType>| -> Vec<String> {
            all.iter()
                .skip(1)
                .filter(|(_, id)| kind.is_none_or(|k| self.m.kind(*id) == k))
                .map(|(p, _)| p.clone())
                .collect()
        };
        let name = |n: u8| NAMES[n as usize % NAMES.len()];
        let pick = |list: Vec<String>, i: u16| {
            if list.is_empty() {
                format!("/{}", name(i as u8))
            } else {
                list[i as usize % list.len()].clone()
            }
        };
        match s {
            Sel::Any(i) => pick(of(None), *i),
            Sel::File(i) => pick(of(Some(FileType::File)), *i),
            Sel::Dir(i) => pick(of(Some(FileType::Dir)), *i),
            Sel::Fresh(d, n) => {
                let dirs = all.iter().filter(|(_, id)| self.m.is_dir(*id)).map(|(p, _)| p.clone()).collect();
                join(&pick(dirs, *d), name(*n))
            }
            Sel::Random(v) => format!("/{}", v.iter().map(|n| name(*n)).collect::<Vec<_>>().join("/")),
        }
    }

    /// The `i`-th occupied handle slot (None if no handle is open).
    fn occupied(&self, i: u8) -> Option<usize> {
        let used: Vec<usize> = (0..SLOTS).filter(|s| self.handles[*s].is_some()).collect();
        (!used.is_empty()).then(|| used[i as usize % used.len()])
    }

    fn close_slot(&mut self, slot: usize) {
        if let Some((h, id)) = self.handles[slot].take() {
            if let Err(e) = h.close() {
                self.fail(format!("closing handle in slot {slot}: {e:?}"));
            }
            self.m.closed(id);
        }
    }

    fn close_all(&mut self) {
        for s in 0..SLOTS {
            self.close_slot(s);
        }
    }

    fn reopen(&mut self) {
        self.close_all();
        self.check(true);
        if let Err(e) = self.v.take().expect("vault is open").close() {
            self.fail(format!("closing the vault: {e:?}"));
        }
        self.v = Some(self.t.reopen_with(small_cache()));
        if self.v().migrate("model", APP_MIGRATIONS).ok() != Some(0) {
            self.fail("migrate after reopen did not find its migration applied".into());
        }
        self.check(true);
    }

    /// Reads `len` bytes at `off` through `read` and compares them with the model.
    fn compare_read(&self, id: Mid, off: u32, len: u32, read: impl FnOnce(&mut [u8]) -> Result<usize, Error>) {
        let mut buf = vec![0xEEu8; len as usize];
        let n = match read(&mut buf) {
            Ok(n) => n,
            Err(e) => self.fail(format!("read failed: {e:?}")),
        };
        let want = self.m.read(id, off as u64, len as usize);
        if n != want.len() {
            self.fail(format!(
                "read {len} at {off} returned {n} bytes, model has {} (size {})",
                want.len(),
                self.m.size(id)
            ));
        }
        if let Some(i) = (0..n).find(|i| buf[*i] != want[*i]) {
            self.fail(format!(
                "read {len} at {off}: byte {} is {:#x}, model has {:#x}",
                off as usize + i,
                buf[i],
                want[i]
            ));
        }
    }

    fn run(&mut self, op: &Op) {
        self.step += 1;
        // An operation on a handle when none is open opens one instead, so that every
        // generated operation does something.
        let fallback;
        let op = match op {
            Op::Dup { from: i, .. }
            | Op::Close { slot: i }
            | Op::HWrite { slot: i, .. }
            | Op::HRead { slot: i, .. }
            | Op::HSetLen { slot: i, .. }
            | Op::HStat { slot: i }
                if self.occupied(0).is_none() =>
            {
                fallback = Op::Open { slot: *i, path: Sel::File(*i as u16), create: false, truncate: false };
                &fallback
            }
            op => op,
        };
        self.what = format!("{op:?}");
        self.op_name = self.what.clone();
        OPS_RUN.fetch_add(1, Ordering::Relaxed);
        match op {
            Op::Stat { path } => {
                let p = self.path(path);
                self.what = format!("stat {p}");
                let got = self.v().symlink_metadata(&p);
                let want = self.m.resolve(&p);
                if let (Ok(a), Ok(id)) = (&got, &want) {
                    self.compare_attr(&p, a, *id);
                }
                self.same(&got, &want);
            }
            Op::ReadDir { path } => {
                let p = self.path(path);
                self.what = format!("read_dir {p}");
                let got = self.v().read_dir(&p);
                let want =
                    self.m.resolve(&p).and_then(|id| if self.m.is_dir(id) { Ok(id) } else { Err(E::NotADirectory) });
                if self.same(&got, &want) {
                    let (got, id) = (got.unwrap(), want.unwrap());
                    self.compare_listing(&p, &got, id);
                }
            }
            Op::Create { path, excl } => {
                let p = self.path(path);
                self.what = format!("create {p} excl={excl}");
                let got = self
                    .v()
                    .open_file(&p, &FileOptions::new().write(true).create(true).create_new(*excl))
                    .and_then(|f| f.close());
                let want = self.m.create(&p, *excl, false);
                self.same(&got, &want);
            }
            Op::WriteFile { path, len, data } => {
                let p = self.path(path);
                self.what = format!("write_file {p} len={len} {data:?}");
                let b = bytes(data, 0, *len);
                let got = self.v().write_file(&p, &b);
                let want = self.m.create(&p, false, true);
                if let Ok(id) = want {
                    self.m.write(id, 0, &b);
                }
                self.same(&got, &want);
            }
            Op::PathWrite { path, off, len, data } => {
                let p = self.path(path);
                self.what = format!("write {p} at {off} len={len} {data:?}");
                let b = bytes(data, *off, *len);
                let got = self.v().open_file(&p, &FileOptions::new().write(true)).and_then(|f| {
                    let n = f.write_at(*off as u64, &b)?;
                    f.close()?;
                    Ok(n)
                });
                let want = self.m.open_existing(&p, false);
                if let Ok(id) = want {
                    self.m.write(id, *off as u64, &b);
                }
                if self.same(&got, &want) && got.as_ref().ok() != Some(&b.len()) {
                    self.fail(format!("write_at returned {got:?}, expected {}", b.len()));
                }
            }
            Op::PathRead { path, off, len } => {
                let p = self.path(path);
                self.what = format!("read {p} at {off} len={len}");
                let got = self.v().open_file(&p, &FileOptions::new().read(true));
                let want = self.m.resolve(&p).and_then(|id| self.m.content(id));
                if self.same(&got, &want) {
                    let (f, id) = (got.unwrap(), want.unwrap());
                    self.compare_read(id, *off, *len, |buf| f.read_at(*off as u64, buf));
                    if let Err(e) = f.close() {
                        self.fail(format!("close: {e:?}"));
                    }
                }
            }
            Op::ReadFile { path } => {
                let p = self.path(path);
                self.what = format!("read_file {p}");
                let got = self.v().read_file(&p);
                let want = self.m.resolve(&p).and_then(|id| self.m.content(id));
                if self.same(&got, &want) && got.as_ref().unwrap() != self.m.data(want.unwrap()) {
                    self.fail("content differs from the model".into());
                }
            }
            Op::Truncate { path, size } => {
                let p = self.path(path);
                self.what = format!("truncate {p} to {size}");
                let got = self.v().truncate(&p, *size as u64);
                let want = self.m.truncate(&p, *size as u64);
                self.same(&got, &want);
            }
            Op::Open { slot, path, create, truncate } => {
                let slot = *slot as usize % SLOTS;
                let p = self.path(path);
                self.what = format!("open {p} into slot {slot} create={create} truncate={truncate}");
                self.close_slot(slot);
                let got = self.v().open_file(&p, &rw().create(*create).truncate(*truncate));
                let want =
                    if *create { self.m.create(&p, false, *truncate) } else { self.m.open_existing(&p, *truncate) };
                if self.same(&got, &want) {
                    let id = want.unwrap();
                    self.m.opened(id);
                    self.handles[slot] = Some((got.unwrap(), id));
                }
            }
            Op::Dup { from, slot } => {
                let Some(from) = self.occupied(*from) else { unreachable!("a handle is open") };
                let slot = *slot as usize % SLOTS;
                self.what = format!("open_ino of slot {from} into slot {slot}");
                let (ino, id) = self.handles[from].as_ref().map(|(h, id)| (h.ino(), *id)).unwrap();
                let h = match self.v().inodes().open(ino, &rw()) {
                    Ok(h) => h,
                    Err(e) => self.fail(format!("open_ino failed: {e:?}")),
                };
                self.m.opened(id);
                self.close_slot(slot);
                self.handles[slot] = Some((h, id));
            }
            Op::Close { slot } => {
                let Some(slot) = self.occupied(*slot) else { unreachable!("a handle is open") };
                self.what = format!("close slot {slot}");
                self.close_slot(slot);
            }
            Op::HWrite { slot, off, len, data } => {
                let Some(slot) = self.occupied(*slot) else { unreachable!("a handle is open") };
                self.what = format!("slot {slot}: write at {off} len={len} {data:?}");
                let b = bytes(data, *off, *len);
                let (h, id) = self.handles[slot].as_ref().unwrap();
                let id = *id;
                match h.write_at(*off as u64, &b) {
                    Ok(n) if n == b.len() => {}
                    r => self.fail(format!("write_at returned {r:?}")),
                }
                self.m.write(id, *off as u64, &b);
            }
            Op::HRead { slot, off, len } => {
                let Some(slot) = self.occupied(*slot) else { unreachable!("a handle is open") };
                self.what = format!("slot {slot}: read at {off} len={len}");
                let (h, id) = self.handles[slot].as_ref().unwrap();
                self.compare_read(*id, *off, *len, |buf| h.read_at(*off as u64, buf));
            }
            Op::HSetLen { slot, size } => {
                let Some(slot) = self.occupied(*slot) else { unreachable!("a handle is open") };
                self.what = format!("slot {slot}: set_len {size}");
                let (h, id) = self.handles[slot].as_ref().unwrap();
                let id = *id;
                if let Err(e) = h.set_len(*size as u64) {
                    self.fail(format!("set_len failed: {e:?}"));
                }
                self.m.data_mut(id).resize(*size as usize, 0);
            }
            Op::HStat { slot } => {
                let Some(slot) = self.occupied(*slot) else { unreachable!("a handle is open") };
                self.what = format!("slot {slot}: metadata");
                self.compare_handle(slot);
            }
            Op::Rename { from, to, mode } => {
                let f = self.path(from);
                let t = match to {
                    To::Path(s) => self.path(s),
                    To::Below(v) => v.iter().fold(f.clone(), |p, n| join(&p, NAMES[*n as usize % NAMES.len()])),
                };
                self.what = format!("rename {f} -> {t} {mode:?}");
                let got = match *mode {
                    RenameMode::Replace => self.v().rename(&f, &t),
                    RenameMode::NoReplace => self.v().rename_noreplace(&f, &t),
                    RenameMode::Exchange => self.v().rename_exchange(&f, &t),
                };
                let want = self.m.rename(&f, &t, *mode);
                self.same(&got, &want);
            }
            Op::Unlink { path } => {
                let p = self.path(path);
                self.what = format!("remove_file {p}");
                let got = self.v().remove_file(&p);
                let want = self.m.unlink(&p);
                self.same(&got, &want);
            }
            Op::MkNod { path, kind } => {
                let p = self.path(path);
                let (kind, rdev) = special_kind(*kind);
                self.what = format!("make_node {p} {kind:?} {rdev}");
                let got = self.v().make_node(&p, kind, 0o640, rdev);
                let want = self.m.mknod(&p, kind, rdev);
                self.same(&got, &want);
            }
            Op::Mkdir { path } => {
                let p = self.path(path);
                self.what = format!("create_dir {p}");
                let got = self.v().create_dir(&p, 0o755);
                let want = self.m.mkdir(&p);
                self.same(&got, &want);
            }
            Op::Rmdir { path } => {
                let p = self.path(path);
                self.what = format!("remove_dir {p}");
                let got = self.v().remove_dir(&p);
                let want = self.m.rmdir(&p);
                self.same(&got, &want);
            }
            Op::RemoveAll { path } => {
                let p = self.path(path);
                self.what = format!("remove_dir_all {p}");
                let got = self.v().remove_dir_all(&p, &sqlvault::Ops::default());
                let want = self.m.remove_all(&p);
                self.same(&got, &want);
            }
            Op::Link { from, to } => {
                let (f, t) = (self.path(from), self.path(to));
                self.what = format!("hard_link {f} -> {t}");
                let got = self.v().hard_link(&f, &t);
                let want = self.m.link(&f, &t);
                self.same(&got, &want);
            }
            Op::SetTags { path, tags } => {
                let p = self.path(path);
                let tags: Vec<(String, TagValue)> =
                    tags.iter().map(|(n, v)| (TAGS[*n as usize % 3].to_string(), v.clone())).collect();
                self.what = format!("set_tags {p} {tags:?}");
                let got = self.v().set_tags(&p, &tags);
                let want = self.m.set_tags(&p, &tags);
                self.same(&got, &want);
            }
            Op::RemoveTags { path, names } => {
                let p = self.path(path);
                let names: Vec<&str> = names.iter().map(|n| TAGS[*n as usize % 3]).collect();
                self.what = format!("remove_tags {p} {names:?}");
                let got = self.v().remove_tags(&p, &names);
                let want = self.m.remove_tags(&p, &names);
                if self.same(&got, &want) && got.as_ref().ok() != want.as_ref().ok() {
                    self.fail(format!("removed {got:?} tags, model {want:?}"));
                }
            }
            Op::Find { dir, conds, glob } => {
                let d = self.path(dir);
                let conds: Vec<Condition> = conds
                    .iter()
                    .map(|(n, o, v)| Condition::new(TAGS[*n as usize % 3], TAG_OPS[*o as usize % 7], v.clone()))
                    .collect();
                self.what = format!("find {d} {conds:?} glob={glob}");
                let mut q = conds.iter().cloned().fold(Query::new(), |q, c| q.tag(c));
                if *glob {
                    q = q.name("[ab]");
                }
                let got = self.v().find(&d, &q).map(|hits| {
                    let mut p: Vec<String> = hits.into_iter().map(|f| f.path).collect();
                    p.sort();
                    p
                });
                let want = self.m.find(&d, &conds, *glob);
                if self.same(&got, &want) && got.as_ref().ok() != want.as_ref().ok() {
                    self.fail(format!("find gave {:?}, model {:?}", got.unwrap(), want.unwrap()));
                }
            }
            Op::RecPut { coll, key, val } => {
                let (c, k) = (COLLS[*coll as usize % 2], key_of(*key));
                self.what = format!("records({c}).put({k}, {val})");
                let got = self.v().records(c).put(k, rec_val(*val));
                self.m.rec_put(c, k, &rec_val(*val));
                self.same(&got, &Ok(()));
            }
            Op::RecDel { coll, key } => {
                let (c, k) = (COLLS[*coll as usize % 2], key_of(*key));
                self.what = format!("records({c}).delete({k})");
                let got = self.v().records(c).delete(k);
                let want = self.m.rec_del(c, k);
                if self.same(&got, &Ok(())) && *got.as_ref().unwrap() != want {
                    self.fail(format!("delete said {got:?}, model {want}"));
                }
            }
            Op::RecScan { coll, prefix } => {
                let (c, pre) = (COLLS[*coll as usize % 2], PREFIXES[*prefix as usize % PREFIXES.len()]);
                self.what = format!("records({c}).scan_prefix({pre:?})");
                let got: Result<Vec<Record>, Error> = self.v().records(c).scan_prefix(pre).collect();
                let want: Vec<Record> = self
                    .m
                    .records
                    .get(c)
                    .map(|r| {
                        r.iter()
                            .filter(|(k, _)| k.starts_with(pre.as_bytes()))
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect()
                    })
                    .unwrap_or_default();
                if self.same(&got, &Ok(())) && got.as_ref().unwrap() != &want {
                    self.fail(format!("scan gave {:?}, model {want:?}", got.unwrap()));
                }
            }
            Op::Tx { ops, fail } => self.transaction(ops, *fail),
            Op::AppInsert { k, v } => {
                self.what = format!("INSERT INTO kv VALUES ({k}, {v})");
                let got = self.v().execute("INSERT INTO kv(k, v) VALUES (?1, ?2)", params![*k, *v]);
                let want = self.m.app_insert(*k as i64, *v as i64);
                if self.same(&got, &want) && got.as_ref().unwrap() != &1 {
                    self.fail(format!("insert changed {got:?} rows"));
                }
            }
            Op::AppUpsert { k, v } => {
                self.what = format!("upsert kv ({k}, {v})");
                let got = self.v().execute(
                    "INSERT INTO kv(k, v) VALUES (?1, ?2) ON CONFLICT(k) DO UPDATE SET v = excluded.v",
                    params![*k, *v],
                );
                self.m.app.insert(*k as i64, *v as i64);
                if self.same(&got, &Ok(())) && got.as_ref().unwrap() != &1 {
                    self.fail(format!("upsert changed {got:?} rows"));
                }
            }
            Op::AppDelete { from } => {
                self.what = format!("DELETE FROM kv WHERE k >= {from}");
                let got = self.v().execute("DELETE FROM kv WHERE k >= ?1", params![*from]);
                let gone = self.m.app.split_off(&(*from as i64)).len();
                if self.same(&got, &Ok(())) && got.as_ref().unwrap() != &gone {
                    self.fail(format!("delete changed {got:?} rows, model {gone}"));
                }
            }
            Op::AppScan => {
                self.what = "SELECT k, v FROM kv ORDER BY k".into();
                self.compare_app();
            }
            Op::Check => self.check(false),
            Op::Reopen => self.reopen(),
        }
    }

    /// Runs `ops` in one `Vault::transaction` (failing at the end if `fail`); the model
    /// applies them all, or keeps its state if any fails.
    fn transaction(&mut self, ops: &[TxOp], fail: bool) {
        let steps: Vec<(TxOp, String)> = ops
            .iter()
            .map(|o| {
                let p = match o {
                    TxOp::Write { path, .. } | TxOp::Tag { path, .. } => self.path(path),
                    TxOp::Put { .. } | TxOp::Del { .. } | TxOp::AppInsert { .. } => String::new(),
                };
                (o.clone(), p)
            })
            .collect();
        self.what = format!("transaction {steps:?} fail={fail}");
        let saved = self.m.clone();
        let mut want: Result<(), E> = Ok(());
        for (o, p) in &steps {
            want = match o {
                TxOp::Write { len, data, .. } => self.m.tx_write(p, &bytes(data, 0, *len)),
                TxOp::Tag { name, value, .. } => {
                    self.m.set_tags(p, &[(TAGS[*name as usize % 3].to_string(), value.clone())])
                }
                TxOp::Put { coll, key, val } => {
                    self.m.rec_put(COLLS[*coll as usize % 2], key_of(*key), &rec_val(*val));
                    Ok(())
                }
                TxOp::Del { coll, key } => {
                    self.m.rec_del(COLLS[*coll as usize % 2], key_of(*key));
                    Ok(())
                }
                TxOp::AppInsert { k, v } => self.m.app_insert(*k as i64, *v as i64),
            };
            if want.is_err() {
                break;
            }
        }
        if fail && want.is_ok() {
            want = Err(E::InvalidArgument);
        }
        if want.is_err() {
            self.m = saved;
        }
        let got = self.v().transaction(|tx| {
            for (o, p) in &steps {
                match o {
                    TxOp::Write { len, data, .. } => tx.write_file(p, &bytes(data, 0, *len))?,
                    TxOp::Tag { name, value, .. } => tx.set_tags(p, &[(TAGS[*name as usize % 3], value.clone())])?,
                    TxOp::Put { coll, key, val } => {
                        tx.records(COLLS[*coll as usize % 2]).put(key_of(*key), rec_val(*val))?
                    }
                    TxOp::Del { coll, key } => {
                        tx.records(COLLS[*coll as usize % 2]).delete(key_of(*key))?;
                    }
                    TxOp::AppInsert { k, v } => {
                        tx.execute("INSERT INTO kv(k, v) VALUES (?1, ?2)", params![*k, *v])?;
                    }
                }
            }
            if fail {
                return Err(Error::InvalidArgument { what: "failure injected by the model test".into() });
            }
            Ok(())
        });
        self.same(&got, &want);
    }

    /// Every row of the application table, in key order, against the model.
    fn compare_app(&self) {
        let got = self.v().query("SELECT k, v FROM kv ORDER BY k", &[], |r| Ok((r.get::<i64>(0)?, r.get::<i64>(1)?)));
        let want: Vec<(i64, i64)> = self.m.app.iter().map(|(k, v)| (*k, *v)).collect();
        match got {
            Ok(rows) if rows == want => {}
            other => self.fail(format!("app table kv: vault has {other:?}, model has {want:?}")),
        }
    }

    fn compare_attr(&self, path: &str, a: &sqlvault::Attr, id: Mid) {
        let (kind, size, nlink) = (self.m.kind(id), self.m.size(id), self.m.nlink(id));
        let rdev = self.m.special(id).map_or(0, |(_, r)| r);
        if a.rdev != rdev {
            self.fail(format!("{path}: vault has device number {}, model has {rdev}", a.rdev));
        }
        if a.kind != kind || a.size != size || a.nlink != nlink {
            self.fail(format!(
                "{path}: vault has {:?} size {} nlink {}, model has {kind:?} size {size} nlink {nlink}",
                a.kind, a.size, a.nlink
            ));
        }
    }

    fn compare_listing(&self, path: &str, got: &[sqlvault::DirEntry], id: Mid) {
        let got: Vec<(String, FileType)> = got.iter().map(|e| (e.name.clone(), e.attr.kind)).collect();
        let want: Vec<(String, FileType)> =
            self.m.children(id).iter().map(|(n, c)| (n.clone(), self.m.kind(*c))).collect();
        if got != want {
            self.fail(format!("listing of {path}: vault has {got:?}, model has {want:?}"));
        }
    }

    /// What a handle sees: attributes and the whole content.
    fn compare_handle(&self, slot: usize) {
        let (h, id) = self.handles[slot].as_ref().unwrap();
        match h.metadata() {
            Ok(a) => self.compare_attr(&format!("handle {slot}"), &a, *id),
            Err(e) => self.fail(format!("handle {slot}: metadata failed: {e:?}")),
        }
        let size = self.m.size(*id) as u32;
        self.compare_read(*id, 0, size + 10, |buf| h.read_at(0, buf));
    }

    /// Compares everything: tree, attributes, contents, inode identity, handles, fsck,
    /// and with `quiet` (no handle open) the vault-wide counts of `info()`.
    fn check(&mut self, quiet: bool) {
        let saved = std::mem::replace(&mut self.what, "full comparison".into());
        let mut to_vault: HashMap<Mid, InodeId> = HashMap::new();
        let mut to_model: HashMap<InodeId, Mid> = HashMap::new();
        let mut same_inode = |h: &Harness, what: &str, id: Mid, ino: InodeId| {
            let a = *to_vault.entry(id).or_insert(ino);
            let b = *to_model.entry(ino).or_insert(id);
            if a != ino || b != id {
                h.fail(format!("{what}: model inode {id} is vault inode {}, but also {a:?} / {b}", ino.0));
            }
        };
        for (p, id) in self.m.paths() {
            let a = match self.v().symlink_metadata(&p) {
                Ok(a) => a,
                Err(e) => self.fail(format!("stat {p}: {e:?}")),
            };
            self.compare_attr(&p, &a, id);
            same_inode(self, &p, id, a.ino);
            if self.m.is_dir(id) {
                match self.v().read_dir(&p) {
                    Ok(list) => {
                        self.compare_listing(&p, &list, id);
                        for e in &list {
                            same_inode(self, &join(&p, &e.name), self.m.children(id)[&e.name], e.attr.ino);
                        }
                    }
                    Err(e) => self.fail(format!("read_dir {p}: {e:?}")),
                }
            } else if self.m.special(id).is_some() {
                if !matches!(self.v().read_file(&p), Err(Error::InvalidArgument { .. })) {
                    self.fail(format!("{p}: a special node's content was readable"));
                }
            } else {
                match self.v().read_file(&p) {
                    Ok(d) if d == *self.m.data(id) => {}
                    Ok(d) => self.fail(format!(
                        "{p}: content differs ({} bytes, model has {})",
                        d.len(),
                        self.m.data(id).len()
                    )),
                    Err(e) => self.fail(format!("read_file {p}: {e:?}")),
                }
            }
        }
        for (p, id) in self.m.paths() {
            match self.v().tags(&p) {
                Ok(t) if t == self.m.tags_of(id) => {}
                Ok(t) => self.fail(format!("tags of {p}: vault has {t:?}, model has {:?}", self.m.tags_of(id))),
                Err(e) => self.fail(format!("tags {p}: {e:?}")),
            }
        }
        let cols: Vec<(String, u64)> = self.m.records.iter().map(|(n, r)| (n.clone(), r.len() as u64)).collect();
        match self.v().collections() {
            Ok(c) if c == cols => {}
            other => self.fail(format!("collections: vault has {other:?}, model has {cols:?}")),
        }
        for (name, recs) in &self.m.records {
            let all = (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded);
            let got: Result<Vec<Record>, Error> = self.v().records(name).scan(all).collect();
            let want: Vec<Record> = recs.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            if got.as_ref().ok() != Some(&want) {
                self.fail(format!("records {name}: vault has {got:?}, model has {want:?}"));
            }
        }
        self.compare_app();
        for s in 0..SLOTS {
            if let Some((h, id)) = &self.handles[s] {
                same_inode(self, &format!("handle {s}"), *id, h.ino());
                self.compare_handle(s);
            }
        }
        match self.v().fsck(&sqlvault::Ops::default()) {
            Ok(r) if r.problems.is_empty() => {}
            Ok(r) => self.fail(format!("fsck found problems: {:#?}", r.problems)),
            Err(e) => self.fail(format!("fsck failed: {e:?}")),
        }
        if quiet {
            let info = self.v().info().unwrap_or_else(|e| self.fail(format!("info: {e:?}")));
            let files = self.m.nodes.values().filter(|n| matches!(n, Node::File { special: None, .. })).count() as u64;
            let dirs = self.m.nodes.values().filter(|n| matches!(n, Node::Dir { .. })).count() as u64;
            let bytes: u64 = self.m.nodes.keys().map(|id| self.m.size(*id)).sum();
            if (info.files, info.directories, info.logical_bytes) != (files, dirs, bytes) {
                self.fail(format!(
                    "info: {} files, {} directories, {} bytes; model: {files}, {dirs}, {bytes}",
                    info.files, info.directories, info.logical_bytes
                ));
            }
        }
        self.what = saved;
    }
}

/// The application schema of the model's app table.
const APP_MIGRATIONS: &[&str] = &["CREATE TABLE kv(k INTEGER PRIMARY KEY, v INTEGER NOT NULL)"];

fn run_case(ops: Vec<Op>) {
    let mut h = Harness::new();
    for (i, op) in ops.iter().enumerate() {
        h.run(op);
        if (i + 1) % CHECK_EVERY == 0 {
            h.check(false);
        }
    }
    h.what = "end of case".into();
    h.check(false);
    h.reopen();
}

#[test]
fn vault_agrees_with_model() {
    let cases = std::env::var("SQLVAULT_MODEL_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(DEFAULT_CASES);
    let config = Config {
        cases,
        source_file: Some(file!()),
        test_name: Some(concat!(module_path!(), "::vault_agrees_with_model")),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        // Each shrinking step replays a whole case on a new vault: bound the time spent.
        // (Cases have a fixed length, so shrinking only simplifies operations; the
        // failure message names the step, and the operations up to it reproduce it.)
        max_shrink_time: 60_000,
        ..Config::default()
    };
    let started = std::time::Instant::now();
    let mut runner = TestRunner::new(config);
    let result = runner.run(&vec(op(), OPS_PER_CASE), |ops| {
        run_case(ops);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let total = OPS_RUN.load(Ordering::Relaxed);
    // Straight to stderr, past the test harness's capture of `eprintln!`.
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "model test: {total} operations in {cases} cases, {:.1?}", started.elapsed());
    if std::env::var_os("SQLVAULT_MODEL_STATS").is_some() {
        for (k, n) in STATS.lock().unwrap().iter() {
            let _ = writeln!(std::io::stderr(), "{k:<40} {n}");
        }
    }
    assert_eq!(total, cases as u64 * OPS_PER_CASE as u64, "every generated operation runs");
}

// ----------------------------------------------------------------------------------
// Bugs the model found, pinned down as plain tests
// ----------------------------------------------------------------------------------

/// A chunk is stored only up to the file size at the time it was written; when the
/// file later grows (by `set_len` or a write in a later chunk) a read inside that chunk
/// beyond its stored bytes must give zeros. It used to panic slicing the chunk.
#[test]
fn read_beyond_a_short_stored_chunk_gives_zeros() {
    let (_t, v) = TestVault::new(CHUNK);
    v.write_file("/f", &[7u8; 100]).unwrap();
    v.truncate("/f", 10_000).unwrap();
    let f = v.open_file("/f", &FileOptions::new().read(true)).unwrap();
    let mut buf = [1u8; 50];
    assert_eq!(f.read_at(4000, &mut buf).unwrap(), 50);
    assert_eq!(buf, [0u8; 50]);
    assert_eq!(v.read_file("/f").unwrap()[..101], [[7u8; 100].as_slice(), &[0]].concat());
}

/// `truncate` of a directory is `EISDIR`; it used to set the directory's size.
#[test]
fn truncating_a_directory_is_refused() {
    let (_t, v) = TestVault::new(CHUNK);
    v.create_dir("/d", 0o755).unwrap();
    assert!(matches!(v.truncate("/d", 100), Err(Error::IsADirectory { .. })));
    assert_eq!(v.metadata("/d").unwrap().size, 0);
}

/// A path whose parent is a file is `ENOTDIR` for every operation; unlink, rmdir and
/// rename of such a path used to say `ENOENT`.
#[test]
fn a_file_as_parent_is_not_a_directory() {
    let (_t, v) = TestVault::new(CHUNK);
    v.write_file("/f", b"x").unwrap();
    assert!(matches!(v.remove_file("/f/x"), Err(Error::NotADirectory { .. })));
    assert!(matches!(v.remove_dir("/f/x"), Err(Error::NotADirectory { .. })));
    assert!(matches!(v.rename("/f/x", "/y"), Err(Error::NotADirectory { .. })));
    assert!(matches!(v.rename("/f", "/f/x"), Err(Error::NotADirectory { .. })));
    assert!(matches!(v.create_dir("/f/x", 0o755), Err(Error::NotADirectory { .. })));
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().problems.is_empty());
}
