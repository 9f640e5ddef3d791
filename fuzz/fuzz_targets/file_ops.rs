//! Fuzzes sequences of file operations against an in-memory model of the tree: every
//! operation must succeed exactly when the model says it is valid, and every read and
//! listing must match the model byte for byte. Each input runs in a fresh directory of
//! one long-lived vault (small chunks, so content spans several chunks and holes).
#![no_main]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use sqlvault::{CreateOptions, FileOptions, Secret, Vault};
use sqlvault::secrets::{KdfParams};

fn vault() -> &'static Vault {
    static V: OnceLock<(tempfile::TempDir, Vault)> = OnceLock::new();
    &V.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let opts = CreateOptions {
            chunk_size: 4096,
            page_size: 4096,
            kdf: KdfParams { memory_kib: 64, iterations: 1, parallelism: 1 },
            ..Default::default()
        };
        let v = Vault::create(dir.path().join("fuzz.vault"), &Secret::passphrase("fuzz"), &opts).expect("create");
        (dir, v)
    })
    .1
}

/// A path of one or two names from a small set, so operations collide often.
#[derive(Arbitrary, Debug, Clone, Copy)]
struct P(u8, Option<u8>);

impl P {
    fn names(self) -> Vec<String> {
        let n = |b: u8| ["a", "b", "c", "d"][(b % 4) as usize].to_string();
        let mut v = vec![n(self.0)];
        if let Some(b) = self.1 {
            v.push(n(b));
        }
        v
    }
}

#[derive(Arbitrary, Debug)]
enum Op {
    Mkdir(P),
    Write(P, u16, u8),
    Patch(P, u16, u16, u8),
    Truncate(P, u16),
    Rename(P, P),
    Remove(P),
    Rmdir(P),
    Read(P),
    List(P),
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Dir,
    File(Vec<u8>),
}

type Model = BTreeMap<Vec<String>, Node>;

fn parent_is_dir(m: &Model, p: &[String]) -> bool {
    p.len() == 1 || m.get(&p[..p.len() - 1]) == Some(&Node::Dir)
}

fn children<'a>(m: &'a Model, p: &'a [String]) -> impl Iterator<Item = &'a Vec<String>> + 'a {
    m.keys().filter(move |k| k.len() == p.len() + 1 && k.starts_with(p))
}

fn bytes(len: u16, seed: u8) -> Vec<u8> {
    (0..len as usize).map(|i| if seed % 5 == 0 { 0 } else { (i as u8).wrapping_mul(seed) ^ seed }).collect()
}

/// Applies `op` to the model; returns whether it is valid.
fn model_apply(m: &mut Model, op: &Op) -> bool {
    match op {
        Op::Mkdir(p) => {
            let p = p.names();
            if !parent_is_dir(m, &p) || m.contains_key(&p) {
                return false;
            }
            m.insert(p, Node::Dir);
            true
        }
        Op::Write(p, len, seed) => {
            let p = p.names();
            if !parent_is_dir(m, &p) || m.get(&p) == Some(&Node::Dir) {
                return false;
            }
            m.insert(p, Node::File(bytes(*len, *seed)));
            true
        }
        Op::Patch(p, off, len, seed) => match m.get_mut(&p.names()) {
            Some(Node::File(d)) => {
                let (off, data) = (*off as usize, bytes(*len, *seed));
                // A write of nothing does not extend the file (POSIX write(2)).
                if data.is_empty() {
                    return true;
                }
                if d.len() < off + data.len() {
                    d.resize(off + data.len(), 0);
                }
                d[off..off + data.len()].copy_from_slice(&data);
                true
            }
            _ => false,
        },
        Op::Truncate(p, len) => match m.get_mut(&p.names()) {
            Some(Node::File(d)) => {
                d.resize(*len as usize, 0);
                true
            }
            _ => false,
        },
        Op::Rename(a, b) => {
            let (a, b) = (a.names(), b.names());
            let Some(src) = m.get(&a).cloned() else { return false };
            if !parent_is_dir(m, &b) {
                return false;
            }
            if a == b {
                return true;
            }
            if src == Node::Dir && b.starts_with(&a) {
                return false;
            }
            match (m.get(&b), &src) {
                (Some(Node::Dir), Node::File(_)) | (Some(Node::File(_)), Node::Dir) => return false,
                (Some(Node::Dir), Node::Dir) if children(m, &b).next().is_some() => return false,
                _ => {}
            }
            m.remove(&b);
            let moved: Vec<(Vec<String>, Node)> =
                m.iter().filter(|(k, _)| k.starts_with(&a)).map(|(k, v)| (k.clone(), v.clone())).collect();
            for (k, v) in moved {
                m.remove(&k);
                let mut nk = b.clone();
                nk.extend_from_slice(&k[a.len()..]);
                m.insert(nk, v);
            }
            true
        }
        Op::Remove(p) => {
            let p = p.names();
            if !matches!(m.get(&p), Some(Node::File(_))) {
                return false;
            }
            m.remove(&p);
            true
        }
        Op::Rmdir(p) => {
            let p = p.names();
            if m.get(&p) != Some(&Node::Dir) || children(m, &p).next().is_some() {
                return false;
            }
            m.remove(&p);
            true
        }
        Op::Read(p) => matches!(m.get(&p.names()), Some(Node::File(_))),
        Op::List(p) => m.get(&p.names()) == Some(&Node::Dir),
    }
}

fn path(root: &str, p: P) -> String {
    format!("{root}/{}", p.names().join("/"))
}

fuzz_target!(|ops: Vec<Op>| {
    static RUN: AtomicU64 = AtomicU64::new(0);
    let v = vault();
    let root = format!("/run{}", RUN.fetch_add(1, Ordering::Relaxed));
    v.create_dir(&root, 0o755).expect("fresh root");
    let mut model = Model::new();
    for op in ops.iter().take(64) {
        let valid = model_apply(&mut model, op);
        let result: sqlvault::Result<()> = match op {
            Op::Mkdir(p) => v.create_dir(&path(&root, *p), 0o755).map(|_| ()),
            Op::Write(p, len, seed) => v.write_file(&path(&root, *p), &bytes(*len, *seed)),
            Op::Patch(p, off, len, seed) => {
                v.open_file(&path(&root, *p), &FileOptions::new().write(true)).and_then(|f| {
                    f.write_at(*off as u64, &bytes(*len, *seed))?;
                    f.close()
                })
            }
            Op::Truncate(p, len) => v.open_file(&path(&root, *p), &FileOptions::new().write(true)).and_then(|f| {
                f.set_len(*len as u64)?;
                f.close()
            }),
            Op::Rename(a, b) => v.rename(&path(&root, *a), &path(&root, *b)),
            Op::Remove(p) => v.remove_file(&path(&root, *p)),
            Op::Rmdir(p) => v.remove_dir(&path(&root, *p)),
            Op::Read(p) => v.read_file(&path(&root, *p)).map(|got| {
                if let Some(Node::File(want)) = model.get(&p.names()) {
                    assert_eq!(&got, want, "read {:?}", p.names());
                }
            }),
            Op::List(p) => v.read_dir(&path(&root, *p)).map(|got| {
                let want: Vec<String> = children(&model, &p.names()).map(|k| k.last().unwrap().clone()).collect();
                let got: Vec<String> = got.into_iter().map(|e| e.name).collect();
                assert_eq!(got, want, "list {:?}", p.names());
            }),
        };
        assert_eq!(result.is_ok(), valid, "{op:?} in {model:?}: vault said {result:?}");
    }
    // The whole subtree matches the model.
    for (k, node) in &model {
        let p = format!("{root}/{}", k.join("/"));
        match node {
            Node::Dir => assert!(v.metadata(&p).expect("dir").kind == sqlvault::FileType::Dir),
            Node::File(d) => assert_eq!(&v.read_file(&p).expect("file"), d, "{p}"),
        }
    }
    let _ = v.remove_dir_all(&root, &sqlvault::Ops::default());
});
