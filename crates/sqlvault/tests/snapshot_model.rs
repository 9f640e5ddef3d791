//! Model-based property test for snapshots: random file operations (write, truncate,
//! mkdir, remove, rename, hard and symbolic links, extended attributes, reopening the
//! vault) interleaved with snapshot / restore / snapshot rm, against an in-memory
//! model. A real vault file (4 KiB chunks, content drawn from a few blocks so chunks
//! are shared between files and snapshots).
//!
//! The model is a path -> node map; files are ids into a table of contents, so hard
//! links are two paths with one id. A snapshot is a clone of the model taken when the
//! snapshot is taken. Checked:
//!
//! * every snapshot equals its clone, whatever happened since (names, kinds, contents,
//!   symlink targets, extended attributes, and which names are hard links of each
//!   other), after every snapshot-related operation, every 10 operations and at the end;
//! * the live tree equals the model the same way; a restore makes the destination equal
//!   to the snapshot's source (replacing what was there, links within it kept);
//! * `snapshot rm` frees exactly the `unique_bytes` the listing reported just before;
//! * `fsck` (refcounts counting live and snapshot references) is clean after every
//!   restore and snapshot rm and at the end of every case.
//!
//! CI: `DEFAULT_CASES` (24) cases x `OPS` (60) operations, a few seconds. Soak:
//! `SQLVAULT_SNAPSHOT_MODEL_CASES=2000 cargo test -p sqlvault --test snapshot_model`.

mod common;

use std::collections::{BTreeMap, HashMap};

use common::*;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use sqlvault::inodes::{SnapshotId, XattrMode};
use sqlvault::{Error, FileType, InodeId, Vault};

const CHUNK: u32 = 4096;
const DEFAULT_CASES: u32 = 24;
const OPS: usize = 60;
const NAMES: [&str; 3] = ["a", "b", "c"];
const SNAPS: u8 = 3;
const XATTR: &[u8] = b"user.t";

// ----- the model -----

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum N {
    Dir,
    File(u64),
    Link(String),
}

#[derive(Debug, Clone, Default)]
struct Tree {
    /// Every node but the root, by absolute path.
    paths: BTreeMap<String, N>,
    /// File id -> (content, value of `user.t`).
    files: HashMap<u64, (Vec<u8>, Option<Vec<u8>>)>,
}

fn parent(p: &str) -> &str {
    match p.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &p[..i],
    }
}

fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

fn below(p: &str, top: &str) -> bool {
    top == "/" || p == top || p.starts_with(&format!("{top}/"))
}

impl Tree {
    fn is_dir(&self, p: &str) -> bool {
        p == "/" || self.paths.get(p) == Some(&N::Dir)
    }

    fn dirs(&self) -> Vec<String> {
        std::iter::once("/".to_string())
            .chain(self.paths.iter().filter(|(_, n)| **n == N::Dir).map(|(p, _)| p.clone()))
            .collect()
    }

    fn of_kind(&self, f: impl Fn(&N) -> bool) -> Vec<String> {
        self.paths.iter().filter(|(_, n)| f(n)).map(|(p, _)| p.clone()).collect()
    }

    fn remove(&mut self, top: &str) {
        self.paths.retain(|p, _| !below(p, top));
    }

    /// Copies the subtree `src` of `snap` to `dest`, with fresh file ids (names that
    /// share a file inside the subtree still share one).
    fn restore(&mut self, snap: &Tree, src: &str, dest: &str, next_id: &mut u64) {
        self.remove(dest);
        let mut ids: HashMap<u64, u64> = HashMap::new();
        let mut copy = |n: &N, files: &mut HashMap<u64, (Vec<u8>, Option<Vec<u8>>)>| match n {
            N::File(id) => N::File(*ids.entry(*id).or_insert_with(|| {
                *next_id += 1;
                files.insert(*next_id, snap.files[id].clone());
                *next_id
            })),
            other => other.clone(),
        };
        if src != "/" {
            let n = copy(&snap.paths[src], &mut self.files);
            self.paths.insert(dest.to_string(), n);
        } else if dest != "/" {
            self.paths.insert(dest.to_string(), N::Dir);
        }
        for (p, n) in snap.paths.iter().filter(|(p, _)| below(p, src) && p.as_str() != src) {
            let rel = if src == "/" { &p[1..] } else { &p[src.len() + 1..] };
            let n = copy(n, &mut self.files);
            self.paths.insert(join(dest, rel), n);
        }
    }
}

// ----- operations -----

#[derive(Debug, Clone)]
enum Op {
    /// Write a whole file (an existing file's path, or a new name in a directory).
    Write {
        existing: bool,
        pick: u16,
        name: u8,
        blocks: Vec<u8>,
        tail: u16,
    },
    Truncate {
        pick: u16,
        size: u16,
    },
    Mkdir {
        pick: u16,
        name: u8,
    },
    Remove {
        pick: u16,
    },
    Rename {
        pick: u16,
        dir: u16,
        name: u8,
    },
    HardLink {
        pick: u16,
        dir: u16,
        name: u8,
    },
    Symlink {
        dir: u16,
        name: u8,
    },
    Xattr {
        pick: u16,
        value: u8,
    },
    Snapshot {
        k: u8,
    },
    RemoveSnapshot {
        k: u8,
    },
    /// Restore `pick` of the snapshot (0: everything) to the same path, or into a
    /// directory under a new name.
    Restore {
        k: u8,
        pick: u16,
        elsewhere: Option<(u16, u8)>,
    },
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    let p = any::<u16>();
    let name = 0..NAMES.len() as u8;
    prop_oneof![
        5 => (any::<bool>(), p, name.clone(), vec(0u8..5, 0..4), 0u16..300)
            .prop_map(|(existing, pick, name, blocks, tail)| Op::Write { existing, pick, name, blocks, tail }),
        2 => (p, 0u16..12_000).prop_map(|(pick, size)| Op::Truncate { pick, size }),
        3 => (p, name.clone()).prop_map(|(pick, name)| Op::Mkdir { pick, name }),
        2 => p.prop_map(|pick| Op::Remove { pick }),
        2 => (p, p, name.clone()).prop_map(|(pick, dir, name)| Op::Rename { pick, dir, name }),
        1 => (p, p, name.clone()).prop_map(|(pick, dir, name)| Op::HardLink { pick, dir, name }),
        1 => (p, name.clone()).prop_map(|(dir, name)| Op::Symlink { dir, name }),
        1 => (p, any::<u8>()).prop_map(|(pick, value)| Op::Xattr { pick, value }),
        3 => (0..SNAPS).prop_map(|k| Op::Snapshot { k }),
        1 => (0..SNAPS).prop_map(|k| Op::RemoveSnapshot { k }),
        3 => (0..SNAPS, p, proptest::option::of((p, name))).prop_map(|(k, pick, elsewhere)| Op::Restore { k, pick, elsewhere }),
        1 => Just(Op::Reopen),
    ]
}

/// Content made of 4 KiB blocks from a small set (shared chunks) plus a short tail.
fn content(blocks: &[u8], tail: u16) -> Vec<u8> {
    let mut out = Vec::new();
    for &b in blocks {
        // Block 0 is all zeros: a hole.
        out.extend((0..CHUNK).map(|i| if b == 0 { 0 } else { (i as u8).wrapping_mul(b).wrapping_add(b) | 1 }));
    }
    out.extend((0..tail).map(|i| (i % 251) as u8 ^ 0x5a));
    out
}

fn pick(list: &[String], i: u16) -> Option<String> {
    (!list.is_empty()).then(|| list[i as usize % list.len()].clone())
}

// ----- the harness -----

struct Harness {
    t: TestVault,
    v: Option<Vault>,
    live: Tree,
    snaps: BTreeMap<String, Tree>,
    next_id: u64,
    step: usize,
}

/// What one walk of a vault tree (live or snapshot) found.
#[derive(Debug, Default)]
struct Seen {
    nodes: BTreeMap<String, (FileType, u64)>,
}

impl Harness {
    fn v(&self) -> &Vault {
        self.v.as_ref().expect("open")
    }

    fn new_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn run(&mut self, op: &Op) {
        let live = &self.live;
        match op.clone() {
            Op::Write { existing, pick: i, name, blocks, tail } => {
                let path = if existing {
                    pick(&live.of_kind(|n| matches!(n, N::File(_))), i)
                } else {
                    pick(&live.dirs(), i).map(|d| join(&d, NAMES[name as usize]))
                };
                let Some(path) = path else { return };
                let data = content(&blocks, tail);
                match self.live.paths.get(&path).cloned() {
                    Some(N::File(id)) => {
                        self.v().write_file(&path, &data).unwrap();
                        self.live.files.get_mut(&id).unwrap().0 = data;
                    }
                    Some(_) => {}
                    None => {
                        self.v().write_file(&path, &data).unwrap();
                        let id = self.new_id();
                        self.live.files.insert(id, (data, None));
                        self.live.paths.insert(path, N::File(id));
                    }
                }
            }
            Op::Truncate { pick: i, size } => {
                let Some(path) = pick(&live.of_kind(|n| matches!(n, N::File(_))), i) else { return };
                self.v().truncate(&path, size as u64).unwrap();
                let N::File(id) = self.live.paths[&path] else { unreachable!() };
                self.live.files.get_mut(&id).unwrap().0.resize(size as usize, 0);
            }
            Op::Mkdir { pick: i, name } => {
                let Some(d) = pick(&live.dirs(), i) else { return };
                let path = join(&d, NAMES[name as usize]);
                if self.live.paths.contains_key(&path) {
                    assert!(matches!(self.v().create_dir(&path, 0o755), Err(Error::AlreadyExists { .. })));
                    return;
                }
                self.v().create_dir(&path, 0o755).unwrap();
                self.live.paths.insert(path, N::Dir);
            }
            Op::Remove { pick: i } => {
                let Some(path) = pick(&live.paths.keys().cloned().collect::<Vec<_>>(), i) else { return };
                if self.live.is_dir(&path) {
                    self.v().remove_dir_all(&path, &sqlvault::Ops::default()).unwrap();
                } else {
                    self.v().remove_file(&path).unwrap();
                }
                self.live.remove(&path);
            }
            Op::Rename { pick: i, dir, name } => {
                let Some(from) = pick(&live.paths.keys().cloned().collect::<Vec<_>>(), i) else { return };
                let Some(d) = pick(&live.dirs(), dir) else { return };
                let to = join(&d, NAMES[name as usize]);
                if below(&to, &from) || self.live.paths.contains_key(&to) {
                    return; // replacing and moving into itself are the main model test's job
                }
                self.v().rename(&from, &to).unwrap();
                let moved: Vec<(String, N)> = self
                    .live
                    .paths
                    .iter()
                    .filter(|(p, _)| below(p, &from))
                    .map(|(p, n)| (p.clone(), n.clone()))
                    .collect();
                self.live.remove(&from);
                for (p, n) in moved {
                    self.live.paths.insert(format!("{to}{}", &p[from.len()..]), n);
                }
            }
            Op::HardLink { pick: i, dir, name } => {
                let Some(from) = pick(&live.of_kind(|n| matches!(n, N::File(_))), i) else { return };
                let Some(d) = pick(&live.dirs(), dir) else { return };
                let to = join(&d, NAMES[name as usize]);
                if self.live.paths.contains_key(&to) {
                    return;
                }
                self.v().hard_link(&from, &to).unwrap();
                let n = self.live.paths[&from].clone();
                self.live.paths.insert(to, n);
            }
            Op::Symlink { dir, name } => {
                let Some(d) = pick(&live.dirs(), dir) else { return };
                let path = join(&d, NAMES[name as usize]);
                if self.live.paths.contains_key(&path) {
                    return;
                }
                let target = format!("/zz/{}", self.step);
                self.v().symlink(&target, &path).unwrap();
                self.live.paths.insert(path, N::Link(target));
            }
            Op::Xattr { pick: i, value } => {
                let Some(path) = pick(&live.of_kind(|n| matches!(n, N::File(_))), i) else { return };
                let ino = self.v().metadata(&path).unwrap().ino;
                self.v().inodes().set_xattr(ino, XATTR, &[value], XattrMode::Upsert).unwrap();
                let N::File(id) = self.live.paths[&path] else { unreachable!() };
                self.live.files.get_mut(&id).unwrap().1 = Some(vec![value]);
            }
            Op::Snapshot { k } => {
                let name = format!("s{k}");
                let r = self.v().snapshot(&name);
                if self.snaps.contains_key(&name) {
                    assert!(matches!(r, Err(Error::AlreadyExists { .. })), "{r:?}");
                } else {
                    let info = r.unwrap();
                    let files = self.live.of_kind(|n| matches!(n, N::File(_)));
                    let ids: std::collections::HashSet<_> = files.iter().map(|p| self.live.paths[p].clone()).collect();
                    assert_eq!(info.files as usize, ids.len());
                    self.snaps.insert(name.clone(), self.live.clone());
                }
                self.check_snapshots();
            }
            Op::RemoveSnapshot { k } => {
                let name = format!("s{k}");
                if self.snaps.remove(&name).is_none() {
                    assert!(matches!(
                        self.v().remove_snapshot(&name, &sqlvault::Ops::default()),
                        Err(Error::NotFound { .. })
                    ));
                    return;
                }
                let unique = self.v().snapshots().unwrap().into_iter().find(|s| s.name == name).unwrap().unique_bytes;
                assert_eq!(
                    self.v().remove_snapshot(&name, &sqlvault::Ops::default()).unwrap(),
                    unique,
                    "rm frees what the listing said"
                );
                self.fsck();
                self.check_snapshots();
            }
            Op::Restore { k, pick: i, elsewhere } => {
                let name = format!("s{k}");
                let Some(snap) = self.snaps.get(&name).cloned() else {
                    assert!(matches!(
                        self.v().restore(&name, "/", None, &sqlvault::Ops::default()),
                        Err(Error::NotFound { .. })
                    ));
                    return;
                };
                let src = if i % 4 == 0 {
                    "/".to_string()
                } else {
                    match pick(&snap.paths.keys().cloned().collect::<Vec<_>>(), i) {
                        Some(p) => p,
                        None => "/".to_string(),
                    }
                };
                let dest = match elsewhere {
                    None => src.clone(),
                    Some((dir, n)) => {
                        let Some(d) = pick(&self.live.dirs(), dir) else { return };
                        join(&d, NAMES[n as usize])
                    }
                };
                if dest != "/" && !self.live.is_dir(parent(&dest)) {
                    return; // the parent must exist (tested in tests/snapshots.rs)
                }
                if dest == "/" && !snap.is_dir(&src) {
                    assert!(matches!(
                        self.v().restore(&name, &src, Some("/"), &sqlvault::Ops::default()),
                        Err(Error::InvalidArgument { .. })
                    ));
                    return;
                }
                self.v().restore(&name, &src, Some(&dest), &sqlvault::Ops::default()).unwrap();
                let mut next = self.next_id;
                self.live.restore(&snap, &src, &dest, &mut next);
                self.next_id = next;
                self.fsck();
                self.check_live();
                self.check_snapshots();
            }
            Op::Reopen => {
                self.v.take().unwrap().close().unwrap();
                self.v = Some(self.t.reopen());
            }
        }
    }

    fn fsck(&self) {
        let r = self.v().fsck(&sqlvault::Ops::default()).unwrap();
        assert!(r.is_clean(), "step {}: fsck: {:#?}", self.step, r.problems);
    }

    /// Walks a tree through `list` and `attr`, collecting kind and inode per path.
    fn walk(
        &self,
        list: &dyn Fn(InodeId) -> Vec<(String, InodeId, FileType)>,
        dir: InodeId,
        path: &str,
        seen: &mut Seen,
    ) {
        for (name, ino, kind) in list(dir) {
            let p = join(path, &name);
            seen.nodes.insert(p.clone(), (kind, ino.0));
            if kind == FileType::Dir {
                self.walk(list, ino, &p, seen);
            }
        }
    }

    /// Compares a walked tree with `model`; `read`, `link`, `xattr` read by inode.
    fn compare(
        &self,
        what: &str,
        model: &Tree,
        seen: &Seen,
        read: &dyn Fn(InodeId) -> Vec<u8>,
        link: &dyn Fn(InodeId) -> Vec<u8>,
        xattr: &dyn Fn(InodeId) -> Option<Vec<u8>>,
    ) {
        let got: Vec<&String> = seen.nodes.keys().collect();
        let want: Vec<&String> = model.paths.keys().collect();
        assert_eq!(got, want, "step {} {what}: names differ", self.step);
        let mut ino_of_id: HashMap<u64, u64> = HashMap::new();
        let mut id_of_ino: HashMap<u64, u64> = HashMap::new();
        for (p, n) in &model.paths {
            let (kind, ino) = seen.nodes[p];
            match n {
                N::Dir => assert_eq!(kind, FileType::Dir, "step {} {what} {p}", self.step),
                N::Link(t) => {
                    assert_eq!(kind, FileType::Symlink, "step {} {what} {p}", self.step);
                    assert_eq!(link(InodeId(ino)), t.as_bytes(), "step {} {what} {p}", self.step);
                }
                N::File(id) => {
                    assert_eq!(kind, FileType::File, "step {} {what} {p}", self.step);
                    let (data, x) = &model.files[id];
                    assert!(read(InodeId(ino)) == *data, "step {} {what} {p}: content differs", self.step);
                    assert_eq!(xattr(InodeId(ino)), *x, "step {} {what} {p}: xattr", self.step);
                    // Names share an inode exactly when the model's names share a file.
                    assert_eq!(*ino_of_id.entry(*id).or_insert(ino), ino, "step {} {what} {p}: link broken", self.step);
                    assert_eq!(
                        *id_of_ino.entry(ino).or_insert(*id),
                        *id,
                        "step {} {what} {p}: files merged",
                        self.step
                    );
                }
            }
        }
    }

    fn check_live(&self) {
        let v = self.v();
        let mut seen = Seen::default();
        let list = |d: InodeId| {
            v.inodes()
                .list(d, None, 10_000)
                .unwrap()
                .into_iter()
                .map(|e| (String::from_utf8(e.name).unwrap(), e.ino, e.kind))
                .collect()
        };
        self.walk(&list, InodeId::ROOT, "/", &mut seen);
        let read = |ino: InodeId| {
            let f = v.inodes().open(ino, &sqlvault::FileOptions::new().read(true)).unwrap();
            let mut buf = vec![0u8; f.metadata().unwrap().size as usize];
            let n = f.read_at(0, &mut buf).unwrap();
            assert_eq!(n, buf.len());
            f.close().unwrap();
            buf
        };
        let link = |ino: InodeId| v.inodes().read_link(ino).unwrap();
        let xattr = |ino: InodeId| v.inodes().get_xattr(ino, XATTR).ok();
        self.compare("live", &self.live, &seen, &read, &link, &xattr);
    }

    fn check_snapshots(&self) {
        let v = self.v();
        let mut names: Vec<String> = v.snapshots().unwrap().into_iter().map(|s| s.name).collect();
        names.sort(); // listed oldest first
        assert_eq!(names.iter().collect::<Vec<_>>(), self.snaps.keys().collect::<Vec<_>>(), "step {}", self.step);
        for (name, model) in &self.snaps {
            let id: SnapshotId = v.inodes().snapshot_id(name).unwrap();
            let mut seen = Seen::default();
            let list = |d: InodeId| {
                v.inodes()
                    .snapshot(id)
                    .list(d, None, 10_000)
                    .unwrap()
                    .into_iter()
                    .map(|e| (String::from_utf8(e.name).unwrap(), e.ino, e.kind))
                    .collect()
            };
            self.walk(&list, InodeId::ROOT, "/", &mut seen);
            let read = |ino: InodeId| {
                let size = v.inodes().snapshot(id).attr(ino).unwrap().size as usize;
                let mut buf = vec![0u8; size];
                let mut done = 0;
                while done < size {
                    // Odd-sized reads cross chunk boundaries.
                    let end = (done + 3001).min(size);
                    let n = v.inodes().snapshot(id).read(ino, done as u64, &mut buf[done..end]).unwrap();
                    assert!(n > 0);
                    done += n;
                }
                buf
            };
            let link = |ino: InodeId| v.inodes().snapshot(id).read_link(ino).unwrap();
            let xattr = |ino: InodeId| v.inodes().snapshot(id).get_xattr(ino, XATTR).ok();
            self.compare(&format!("snapshot {name}"), model, &seen, &read, &link, &xattr);
        }
    }
}

fn run_case(ops: Vec<Op>) {
    let (t, v) = TestVault::new(CHUNK);
    let mut h = Harness { t, v: Some(v), live: Tree::default(), snaps: BTreeMap::new(), next_id: 0, step: 0 };
    for (i, op) in ops.iter().enumerate() {
        h.step = i;
        h.run(op);
        if i % 10 == 9 {
            h.check_live();
            h.check_snapshots();
        }
    }
    h.check_live();
    h.check_snapshots();
    h.fsck();
    // And after reopening: snapshots and references are durable.
    h.v.take().unwrap().close().unwrap();
    h.v = Some(h.t.reopen());
    h.check_live();
    h.check_snapshots();
    h.fsck();
}

#[test]
fn snapshots_equal_the_model_when_taken_whatever_happens_after() {
    let cases =
        std::env::var("SQLVAULT_SNAPSHOT_MODEL_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(DEFAULT_CASES);
    let config = Config { cases, failure_persistence: None, max_shrink_iters: 200, ..Config::default() };
    let mut runner = TestRunner::new(config);
    let result = runner.run(&vec(op(), OPS), |ops| {
        run_case(ops);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    eprintln!("snapshot model: {cases} cases x {OPS} operations");
}

#[test]
fn restoring_everything_twice_is_stable() {
    run_case(vec![
        Op::Mkdir { pick: 0, name: 0 },
        Op::Write { existing: false, pick: 1, name: 1, blocks: vec![1, 0, 2], tail: 10 },
        Op::HardLink { pick: 0, dir: 0, name: 2 },
        Op::Snapshot { k: 0 },
        Op::Remove { pick: 0 },
        Op::Restore { k: 0, pick: 0, elsewhere: None },
        Op::Restore { k: 0, pick: 0, elsewhere: None },
        Op::RemoveSnapshot { k: 0 },
    ]);
}
