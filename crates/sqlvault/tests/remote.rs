//! Replication to S3-compatible object storage, against a real server (VersityGW on
//! loopback, started per test by `common::s3`): push, clone on another "device" (a
//! fresh directory), pull, incremental push, racing pushers, SIGKILL of a push,
//! wrong secret, tampered objects, and no plaintext in the bucket.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::ops::Bound;
use std::process::{Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::clone;
use common::s3::S3Server;
use common::{opts, pass, Rng, TestVault};

/// Writes `data` as `path`'s whole content through a handle: fixed chunks, the layout
/// the chunk and object counts below are worked out for (`write_file` cuts by content).
fn write_fixed(v: &Vault, path: &str, data: &[u8]) -> sqlvault::Result<()> {
    let f = v.open_file(path, &sqlvault::FileOptions::new().write(true).create(true).truncate(true))?;
    f.write_at(0, data)?;
    f.close()
}
use sqlvault::remote::{At, PullOutcome, PushOutcome};
use sqlvault::{EngineConfig, Error, FileType, Secret, TagValue, Vault};

const CHUNK: u32 = 4096;

/// Bytes unlike any others in the test (no accidental dedup), `n` long.
fn payload(seed: u64, n: usize) -> Vec<u8> {
    let mut r = Rng(seed);
    (0..n).map(|_| r.next() as u8).collect()
}

/// Everything a user can observe of a vault through the API, keyed by path.
fn observe(v: &Vault) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec!["/".to_string()];
    while let Some(dir) = stack.pop() {
        for e in v.read_dir(&dir).unwrap() {
            let p = sqlvault::join_path(&dir, &e.name);
            let a = v.symlink_metadata(&p).unwrap();
            let what = match e.attr.kind {
                FileType::Dir => {
                    stack.push(p.clone());
                    String::from("dir")
                }
                FileType::Symlink => format!("link {}", v.read_link(&p).unwrap()),
                FileType::File => {
                    format!("file {}", blake3::hash(&v.read_file(&p).unwrap()).to_hex())
                }
                other => format!("{other:?}"),
            };
            let tags = if e.attr.kind == FileType::Symlink { Vec::new() } else { v.tags(&p).unwrap() };
            let xattrs: Vec<_> = v
                .inodes()
                .list_xattrs(a.ino)
                .unwrap()
                .into_iter()
                .map(|n| (String::from_utf8_lossy(&n).to_string(), v.inodes().get_xattr(a.ino, &n).unwrap()))
                .collect();
            out.insert(
                p,
                format!(
                    "{what} perm={:o} size={} nlink={} mtime={} tags={tags:?} xattrs={xattrs:?}",
                    a.perm, a.size, a.nlink, a.mtime_ns
                ),
            );
        }
    }
    for (coll, n) in v.collections().unwrap() {
        let recs = v.records(&coll).page(&(Bound::Unbounded, Bound::Unbounded), 1_000_000).unwrap();
        out.insert(format!("records {coll}"), format!("{n} {recs:?}"));
    }
    for s in v.snapshots().unwrap() {
        let id = v.inodes().snapshot_id(&s.name).unwrap();
        let root = v.inodes().snapshot(id).resolve("/").unwrap();
        let listing = v.inodes().snapshot(id).list(root, None, 10_000).unwrap();
        out.insert(
            format!("snapshot {}", s.name),
            format!("{} {} {} {:?}", s.files, s.logical_bytes, s.created_ns, listing),
        );
    }
    out
}

/// A vault with a bit of everything: nested files over several chunks, a hole, a hard
/// link, a symlink, tags of every type, an xattr, records, a snapshot.
fn populate(v: &Vault, marker: &str) {
    v.create_dir_all(&format!("/docs/{marker}-dir")).unwrap();
    write_fixed(v, &format!("/docs/{marker}-dir/{marker}.txt"), format!("content {marker} here").as_bytes()).unwrap();
    write_fixed(v, "/docs/big.bin", &payload(1, 5 * CHUNK as usize + 123)).unwrap();
    write_fixed(v, "/docs/dup.bin", &payload(1, 5 * CHUNK as usize + 123)).unwrap();
    v.hard_link("/docs/big.bin", "/big-link").unwrap();
    v.symlink(&format!("/docs/{marker}-dir"), &format!("/{marker}-link")).unwrap();
    let f = v.create_file("/sparse").unwrap();
    f.write_at(10 * CHUNK as u64, b"end").unwrap();
    drop(f);
    v.set_tags(
        "/docs/big.bin",
        &[
            ("camera", TagValue::from(marker)),
            ("iso", TagValue::Int(400)),
            ("rating", TagValue::Real(4.5)),
            (marker, TagValue::Bytes(marker.as_bytes().to_vec())),
        ],
    )
    .unwrap();
    let ino = v.metadata("/docs/big.bin").unwrap().ino;
    v.inodes()
        .set_xattr(ino, format!("trusted.{marker}").as_bytes(), marker.as_bytes(), sqlvault::inodes::XattrMode::Upsert)
        .unwrap();
    v.set_attr("/docs/dup.bin", &sqlvault::SetAttr { perm: Some(0o600), ..Default::default() }, true).unwrap();
    v.records(&format!("coll-{marker}")).put(format!("key-{marker}"), format!("value-{marker}")).unwrap();
    v.records("settings").put("theme", "dark").unwrap();
    v.snapshot(&format!("snap-{marker}")).unwrap();
    write_fixed(v, "/docs/after-snapshot", b"later").unwrap();
}

fn remote(server: &S3Server, bucket: &str) -> String {
    format!("{}/vaults/one", server.bucket(bucket))
}

#[test]
fn push_clone_pull_round_trip() {
    let server = S3Server::start();
    let url = remote(&server, "round");
    let (tv, a) = TestVault::new(CHUNK);
    populate(&a, "alpha");
    a.remote("backup").add(&url, Some(&server.endpoint)).unwrap();
    let pushed = a.remote("backup").push(&sqlvault::Ops::default()).unwrap();
    let PushOutcome::Pushed { commit, chunks_uploaded, .. } = &pushed else { panic!("{pushed:?}") };
    assert!(*chunks_uploaded >= 7, "{pushed:?}");
    assert_eq!(
        a.remote("backup").push(&sqlvault::Ops::default()).unwrap(),
        PushOutcome::UpToDate { commit: commit.clone() }
    );

    // Another device: a fresh directory, the same passphrase.
    let other = tempfile::tempdir().unwrap();
    let b = clone(&server, &url, other.path(), "b.vault");
    assert_eq!(observe(&a), observe(&b));
    assert!(b.fsck(&sqlvault::Ops::default()).unwrap().is_clean(), "{:?}", b.fsck(&sqlvault::Ops::default()).unwrap());
    assert_eq!(b.read_file("/sparse").unwrap().len(), 10 * CHUNK as usize + 3);
    assert_eq!(b.remotes().unwrap()[0].head.as_deref(), Some(commit.as_str()));
    // The clone opens with the same secret, from its own file.
    drop(b);
    let b = Vault::open(other.path().join("b.vault"), &pass(), EngineConfig::default()).unwrap();

    // Later changes on the first device reach the second with a pull.
    write_fixed(&a, "/docs/new.bin", &payload(2, 3 * CHUNK as usize)).unwrap();
    a.remove_file("/docs/dup.bin").unwrap();
    a.set_tags("/docs/big.bin", &[("iso", TagValue::Int(800))]).unwrap();
    a.records("settings").put("theme", "light").unwrap();
    a.remove_snapshot("snap-alpha", &sqlvault::Ops::default()).unwrap();
    a.snapshot("second").unwrap();
    assert!(matches!(a.remote("backup").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::Pushed { .. }));
    let pulled = b.remote("origin").pull(&sqlvault::Ops::default()).unwrap();
    assert!(matches!(pulled, PullOutcome::Pulled { chunks_downloaded: 3, .. }), "{pulled:?}");
    assert_eq!(observe(&a), observe(&b));
    assert!(b.fsck(&sqlvault::Ops::default()).unwrap().is_clean(), "{:?}", b.fsck(&sqlvault::Ops::default()).unwrap());
    assert!(matches!(b.remote("origin").pull(&sqlvault::Ops::default()).unwrap(), PullOutcome::UpToDate { .. }));

    // And back: the second device pushes, the first pulls.
    write_fixed(&b, "/from-b", b"hello from b").unwrap();
    assert!(matches!(b.remote("origin").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::Pushed { .. }));
    assert!(matches!(a.remote("backup").pull(&sqlvault::Ops::default()).unwrap(), PullOutcome::Pulled { .. }));
    assert_eq!(a.read_file("/from-b").unwrap(), b"hello from b");
    assert_eq!(observe(&a), observe(&b));
    assert_eq!(a.remote("backup").log(100).unwrap().len(), 3);
    drop(tv);
}

/// A remote pushed by a build of schema 11 (chunk map by index) is cloned, pulled,
/// merged and restored from by this build, which translates the old commits as it reads
/// them; then this build's commits (schema 12) go back to the same remote.
#[test]
fn a_schema_11_remote_clones_pulls_merges_and_restores() {
    let as_11 = |on| sqlvault::remote::testing_push_as_schema_11(on);
    let server = S3Server::start();
    let url = remote(&server, "schema11");
    let (tv, a) = TestVault::new(CHUNK);
    populate(&a, "alpha");
    a.remote("r").add(&url, Some(&server.endpoint)).unwrap();
    as_11(true);
    let first = a.remote("r").push(&sqlvault::Ops::default()).unwrap();
    as_11(false);
    let PushOutcome::Pushed { commit: first, .. } = first else { panic!("{first:?}") };

    // Clone: every file, hole, link, tag, record and snapshot as on the old side.
    let dir = tempfile::tempdir().unwrap();
    let b = clone(&server, &url, dir.path(), "b.vault");
    assert_eq!(observe(&a), observe(&b));
    assert!(b.fsck(&sqlvault::Ops::default()).unwrap().is_clean(), "{:?}", b.fsck(&sqlvault::Ops::default()).unwrap());
    assert_eq!(b.read_file("/sparse").unwrap().len(), 10 * CHUNK as usize + 3);

    // Pull (fast-forward) and merge (both sides changed) of schema-11 commits.
    write_fixed(&a, "/docs/more.bin", &payload(30, 3 * CHUNK as usize + 1)).unwrap();
    as_11(true);
    assert!(matches!(a.remote("r").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::Pushed { .. }));
    as_11(false);
    assert!(matches!(b.remote("origin").pull(&sqlvault::Ops::default()).unwrap(), PullOutcome::Pulled { .. }));
    assert_eq!(observe(&a), observe(&b));
    write_fixed(&a, "/from-a", &payload(31, CHUNK as usize + 5)).unwrap();
    as_11(true);
    assert!(matches!(a.remote("r").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::Pushed { .. }));
    as_11(false);
    b.write_file("/from-b", &payload(32, 200_000)).unwrap();
    let merged = b.remote("origin").pull(&sqlvault::Ops::default()).unwrap();
    assert!(matches!(merged, PullOutcome::Merged { .. }), "{merged:?}");
    assert_eq!(b.read_file("/from-a").unwrap(), payload(31, CHUNK as usize + 5));
    assert_eq!(b.read_file("/docs/more.bin").unwrap(), payload(30, 3 * CHUNK as usize + 1));
    assert_eq!(b.read_file("/from-b").unwrap(), payload(32, 200_000));
    assert!(b.fsck(&sqlvault::Ops::default()).unwrap().is_clean(), "{:?}", b.fsck(&sqlvault::Ops::default()).unwrap());

    // Restore from the first (schema-11) commit.
    b.remove_file("/docs/big.bin").unwrap();
    b.remote("origin")
        .restore(&At::Commit(first), "/docs/big.bin", Some("/big-again"), &sqlvault::Ops::default())
        .unwrap();
    assert_eq!(b.read_file("/big-again").unwrap(), payload(1, 5 * CHUNK as usize + 123));

    // This build's commits (schema 12, content-cut files) go back to the same remote.
    // The old side recorded its dump's digest in the old form, so its first pull after
    // the upgrade cannot tell "unchanged" and merges three-way: nothing conflicts.
    assert!(matches!(b.remote("origin").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::Pushed { .. }));
    let pulled = a.remote("r").pull(&sqlvault::Ops::default()).unwrap();
    assert!(matches!(&pulled, PullOutcome::Merged { conflicts_total: 0, .. }), "{pulled:?}");
    assert_eq!(observe(&a), observe(&b));
    assert!(a.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
    assert!(matches!(a.remote("r").pull(&sqlvault::Ops::default()).unwrap(), PullOutcome::UpToDate { .. }));
    drop(tv);
}

#[test]
fn incremental_push_uploads_only_new_chunks() {
    let server = S3Server::start();
    let url = remote(&server, "inc");
    let (_tv, a) = TestVault::new(CHUNK);
    // 300 small files and one of 8 chunks: a handful of objects, not one per chunk.
    a.create_dir("/small", 0o755).unwrap();
    for i in 0..300 {
        write_fixed(&a, &format!("/small/{i}"), &payload(1000 + i, 1000)).unwrap();
    }
    write_fixed(&a, "/one", &payload(10, 8 * CHUNK as usize)).unwrap();
    a.remote("r").add(&url, Some(&server.endpoint)).unwrap();
    let r = a.remote("r").push(&sqlvault::Ops::default()).unwrap();
    let PushOutcome::Pushed { chunks_uploaded: 308, objects_uploaded, .. } = r else { panic!("{r:?}") };
    assert_eq!(server.count("inc", "vaults/one", "data"), 0);
    let packs = server.count("inc", "vaults/one", "packs");
    assert_eq!(packs, 1, "308 small chunks fit one pack");
    assert_eq!(server.count("inc", "vaults/one", "index"), 1);
    // One pack, its index, one metadata piece, the commit.
    assert_eq!(objects_uploaded, 4);
    let all = server.objects("inc", "vaults/one").len();
    assert_eq!(all, 4 + 3, "plus keys, config and ref");

    // Three new chunks, one of them a duplicate of an existing one: two uploaded.
    let mut new = payload(11, 2 * CHUNK as usize);
    new.extend_from_slice(&payload(10, CHUNK as usize));
    write_fixed(&a, "/two", &new).unwrap();
    let r = a.remote("r").push(&sqlvault::Ops::default()).unwrap();
    let PushOutcome::Pushed { chunks_uploaded, objects_uploaded, bytes_uploaded, .. } = r else { panic!("{r:?}") };
    assert_eq!((chunks_uploaded, bytes_uploaded), (2, 2 * CHUNK as u64));
    // A pack of the two chunks, its index, one metadata piece, one commit; the ref was
    // replaced in place.
    assert_eq!(objects_uploaded, 4);
    assert_eq!(server.count("inc", "vaults/one", "packs"), packs + 1);
    assert_eq!(server.objects("inc", "vaults/one").len(), all + 4);
    let d = tempfile::tempdir().unwrap();
    assert_eq!(observe(&clone(&server, &url, d.path(), "c.vault")), observe(&a));

    // Nothing changed: nothing uploaded.
    let before = server.objects("inc", "vaults/one").len();
    assert!(matches!(a.remote("r").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::UpToDate { .. }));
    assert_eq!(server.objects("inc", "vaults/one").len(), before);
}

/// A remote created by a build without packs (layout 1: one `data/` object per chunk)
/// keeps its layout: pushes add `data/` objects, clones and pulls read them.
#[test]
fn a_layout_1_remote_still_pushes_and_pulls() {
    let server = S3Server::start();
    let url = remote(&server, "old");
    let (_tv, a) = TestVault::new(CHUNK);
    populate(&a, "old");
    a.remote("r").add(&url, Some(&server.endpoint)).unwrap();
    a.remote("r").init_layout(1).unwrap();
    assert!(matches!(a.remote("r").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::Pushed { .. }));
    let data = server.count("old", "vaults/one", "data");
    assert!(data >= 7, "{data}");
    assert_eq!(server.count("old", "vaults/one", "packs") + server.count("old", "vaults/one", "index"), 0);
    let d = tempfile::tempdir().unwrap();
    let b = clone(&server, &url, d.path(), "b.vault");
    assert_eq!(observe(&a), observe(&b));

    write_fixed(&a, "/later", &payload(12, 3 * CHUNK as usize)).unwrap();
    let r = a.remote("r").push(&sqlvault::Ops::default()).unwrap();
    let PushOutcome::Pushed { chunks_uploaded: 3, objects_uploaded: 5, .. } = r else { panic!("{r:?}") };
    assert_eq!(server.count("old", "vaults/one", "data"), data + 3);
    assert!(matches!(
        b.remote("origin").pull(&sqlvault::Ops::default()).unwrap(),
        PullOutcome::Pulled { chunks_downloaded: 3, .. }
    ));
    assert_eq!(observe(&a), observe(&b));
    // And the clone pushes in the same layout.
    write_fixed(&b, "/from-b", &payload(13, CHUNK as usize)).unwrap();
    assert!(matches!(b.remote("origin").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::Pushed { .. }));
    assert_eq!(server.count("old", "vaults/one", "data"), data + 4);
    assert_eq!(server.count("old", "vaults/one", "packs"), 0);
    assert!(matches!(a.remote("r").pull(&sqlvault::Ops::default()).unwrap(), PullOutcome::Pulled { .. }));
    assert_eq!(observe(&a), observe(&b));
}

/// A new remote (layout 4) seals its chunks with AEGIS-256 (32-byte nonce and 16-byte
/// tag around each padded chunk); a remote created as layout 3 keeps XChaCha20-Poly1305
/// (24-byte nonce) for every push after, and both clone, push and pull alike.
#[test]
fn new_remotes_seal_chunks_with_aegis_and_layout_3_remotes_keep_xchacha() {
    let server = S3Server::start();
    for (bucket, layout, overhead) in [("aegis", None, 32 + 16), ("xchacha", Some(3), 24 + 16)] {
        let url = remote(&server, bucket);
        let (_tv, a) = TestVault::new(CHUNK);
        // Three full chunks of incompressible bytes, each padded to the chunk size + 4.
        write_fixed(&a, "/three", &payload(21, 3 * CHUNK as usize)).unwrap();
        a.remote("r").add(&url, Some(&server.endpoint)).unwrap();
        if let Some(l) = layout {
            a.remote("r").init_layout(l).unwrap();
        }
        assert!(matches!(a.remote("r").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::Pushed { .. }));
        let packs = server.objects(bucket, "vaults/one/packs");
        assert_eq!(packs.len(), 1, "{bucket}");
        let size = std::fs::metadata(&packs[0]).unwrap().len();
        assert_eq!(size, 3 * (CHUNK as u64 + 4 + overhead), "{bucket}: pack of {size} bytes");

        let d = tempfile::tempdir().unwrap();
        let b = clone(&server, &url, d.path(), "b.vault");
        assert_eq!(observe(&a), observe(&b), "{bucket}");
        write_fixed(&b, "/from-b", &payload(22, CHUNK as usize)).unwrap();
        assert!(matches!(b.remote("origin").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::Pushed { .. }));
        // The clone's push sealed its chunk the remote's way.
        let sizes: Vec<u64> =
            server.objects(bucket, "vaults/one/packs").iter().map(|p| std::fs::metadata(p).unwrap().len()).collect();
        assert!(sizes.contains(&(CHUNK as u64 + 4 + overhead)), "{bucket}: {sizes:?}");
        assert!(matches!(a.remote("r").pull(&sqlvault::Ops::default()).unwrap(), PullOutcome::Pulled { .. }));
        assert_eq!(observe(&a), observe(&b), "{bucket}");
        assert!(a.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
    }
}

#[test]
fn racing_pushers_exactly_one_wins_each_round() {
    let server = S3Server::start();
    let url = remote(&server, "race");
    let (_tv, a) = TestVault::new(CHUNK);
    write_fixed(&a, "/base", b"base").unwrap();
    a.remote("r").add(&url, Some(&server.endpoint)).unwrap();
    a.remote("r").push(&sqlvault::Ops::default()).unwrap();
    const REPLICAS: usize = 4;
    const ROUNDS: usize = 3;
    let mut expected = Vec::new();
    for round in 0..ROUNDS {
        // Every replica starts from the remote's head (a fresh clone), changes its own file.
        let dirs: Vec<_> = (0..REPLICAS).map(|_| tempfile::tempdir().unwrap()).collect();
        let vaults: Vec<Vault> = dirs
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let v = clone(&server, &url, d.path(), "v.vault");
                write_fixed(&v, &format!("/r{round}-replica{i}"), &payload((round * 10 + i) as u64, 3000)).unwrap();
                v
            })
            .collect();
        let barrier = Arc::new(Barrier::new(REPLICAS));
        let outcomes: Vec<PushOutcome> = std::thread::scope(|s| {
            let handles: Vec<_> = vaults
                .iter()
                .map(|v| {
                    let barrier = barrier.clone();
                    s.spawn(move || {
                        barrier.wait();
                        v.remote(sqlvault::remote::ORIGIN).push(&sqlvault::Ops::default()).unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let won: Vec<usize> = (0..REPLICAS).filter(|i| matches!(outcomes[*i], PushOutcome::Pushed { .. })).collect();
        assert_eq!(won.len(), 1, "round {round}: {outcomes:?}");
        let PushOutcome::Pushed { commit, .. } = &outcomes[won[0]] else { unreachable!() };
        for (i, o) in outcomes.iter().enumerate() {
            if i != won[0] {
                assert_eq!(o, &PushOutcome::Behind { remote: commit.clone() }, "round {round}");
                assert!(vaults[i].exists(&format!("/r{round}-replica{i}")).unwrap());
            }
        }
        // The losers pull (merge) and push again, all at once: each sub-round one of them
        // wins, the others merge again, until every change is in the remote.
        let retried: Vec<sqlvault::remote::PushMerged> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..REPLICAS)
                .filter(|i| *i != won[0])
                .map(|i| {
                    let v = &vaults[i];
                    s.spawn(move || {
                        v.remote(sqlvault::remote::ORIGIN)
                            .push_or_merge(2 * REPLICAS, &sqlvault::Ops::default())
                            .unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for r in &retried {
            assert!(matches!(r.outcome, PushOutcome::Pushed { .. }), "round {round}: {r:?}");
            assert!(!r.pulls.is_empty(), "round {round}: a loser pushed without pulling: {r:?}");
            for p in &r.pulls {
                let PullOutcome::Merged { conflicts, .. } = p else { panic!("round {round}: {p:?}") };
                assert!(conflicts.is_empty(), "round {round}: {conflicts:?}");
            }
        }
        for i in 0..REPLICAS {
            expected.push(format!("/r{round}-replica{i}"));
        }
        for v in &vaults {
            let _ = v.remote(sqlvault::remote::ORIGIN).pull(&sqlvault::Ops::default()).unwrap();
            for e in &expected {
                assert!(v.exists(e).unwrap(), "round {round}: {e} is missing in a replica");
            }
            assert!(
                v.fsck(&sqlvault::Ops::default()).unwrap().is_clean(),
                "{:?}",
                v.fsck(&sqlvault::Ops::default()).unwrap()
            );
        }
        let seen: Vec<_> = vaults.iter().map(observe).collect();
        assert!(seen.windows(2).all(|w| w[0] == w[1]), "round {round}: the replicas differ");
    }
    // The remote holds a linear history with one commit per successful push and every change.
    let final_dir = tempfile::tempdir().unwrap();
    let f = clone(&server, &url, final_dir.path(), "f.vault");
    for e in &expected {
        assert!(f.exists(e).unwrap(), "{e}");
    }
    assert_eq!(f.read_dir("/").unwrap().len(), 1 + ROUNDS * REPLICAS);
    assert_eq!(f.remote(sqlvault::remote::ORIGIN).log(1000).unwrap().len(), 1 + ROUNDS * REPLICAS);
    assert!(f.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

/// The child side of `sigkill_during_push_leaves_the_remote_consistent`.
#[test]
fn push_child_entry() {
    let Ok(vault) = std::env::var("SQLVAULT_PUSH_CHILD") else { return };
    common::s3::set_client_env();
    let v = Vault::open(&vault, &pass(), EngineConfig::default()).unwrap();
    println!("START");
    let r = v.remote("r").push(&sqlvault::Ops::default()).unwrap();
    println!("DONE {r:?}");
}

#[test]
fn sigkill_during_push_leaves_the_remote_consistent() {
    let server = S3Server::start();
    let url = remote(&server, "kill");
    let (tv, a) = TestVault::new(CHUNK);
    a.remote("r").add(&url, Some(&server.endpoint)).unwrap();
    let mut rng = Rng(0x5161);
    let mut pushed_states: Vec<BTreeMap<String, String>> = Vec::new();
    let (mut completed, mut interrupted) = (0, 0);
    for cycle in 0..6u64 {
        // A new batch of files, so each push has chunks to upload.
        for i in 0..40 {
            write_fixed(&a, &format!("/c{cycle}-f{i}"), &payload(cycle * 1000 + i, 2 * CHUNK as usize)).unwrap();
        }
        let expected = observe(&a);
        a.sync().unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["push_child_entry", "--exact", "--nocapture", "--quiet", "--test-threads", "1"])
            .env("SQLVAULT_PUSH_CHILD", &tv.path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Once the child has opened the vault, kill it at a random moment of its push.
        let started = BufReader::new(child.stdout.as_mut().unwrap()).lines().any(|l| l.unwrap() == "START");
        assert!(started, "the push child did not start");
        std::thread::sleep(Duration::from_millis(rng.below(1200)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let chunks_after_kill = server.count("kill", "vaults/one", "packs");

        // Whatever the ref names is complete: a clone opens, checks clean, and equals a
        // state that was pushed (this cycle's or an earlier one).
        let d = tempfile::tempdir().unwrap();
        match Vault::clone_remote(
            &url,
            Some(&server.endpoint),
            d.path().join("c.vault"),
            &pass(),
            EngineConfig::default(),
            &sqlvault::remote::At::Newest,
            &sqlvault::Ops::default(),
        ) {
            Ok(c) => {
                assert!(c.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
                let seen = observe(&c);
                let known = seen == expected || pushed_states.contains(&seen);
                assert!(known, "cycle {cycle}: the remote holds a state that was never pushed");
                if seen == expected {
                    completed += 1;
                } else {
                    interrupted += 1;
                }
                eprintln!(
                    "cycle {cycle}: {chunks_after_kill} packs after the kill, remote at the {} state",
                    if seen == expected { "new" } else { "previous" }
                );
            }
            Err(Error::NotFound { .. }) => {
                assert!(pushed_states.is_empty(), "cycle {cycle}: the ref vanished");
                interrupted += 1;
            }
            Err(e) => panic!("cycle {cycle}: {e}"),
        }
        // The next push completes (the child may have finished, or left objects behind).
        let r = a.remote("r").push(&sqlvault::Ops::default()).unwrap();
        assert!(matches!(r, PushOutcome::Pushed { .. } | PushOutcome::UpToDate { .. }), "{r:?}");
        let d = tempfile::tempdir().unwrap();
        assert_eq!(observe(&clone(&server, &url, d.path(), "c.vault")), expected);
        pushed_states.push(expected);
    }
    eprintln!("sigkill: {completed} pushes completed before the kill, {interrupted} interrupted");
    assert!(interrupted > 0, "no push was interrupted: the kill delays are too long");
}

/// The server dies in the middle of a push's concurrent chunk uploads: the push fails
/// with an I/O error (no hang, no panic), the ref still names the previous commit and no
/// commit object was added; with the server back, the next push completes on top of the
/// previous commit and a clone equals the vault.
#[test]
fn a_failed_upload_aborts_the_push_and_leaves_the_ref_unchanged() {
    let server = std::sync::Mutex::new(S3Server::start());
    let (url, endpoint) = {
        let s = server.lock().unwrap();
        (remote(&s, "abort"), s.endpoint.clone())
    };
    let (_tv, a) = TestVault::new(CHUNK);
    populate(&a, "first");
    a.remote("r").add(&url, Some(&endpoint)).unwrap();
    // One object per chunk, so that the failure lands among many uploads (the pipeline
    // is the same for packs, see store.rs; this much data is one pack).
    a.remote("r").init_layout(1).unwrap();
    let PushOutcome::Pushed { commit: first, .. } = a.remote("r").push(&sqlvault::Ops::default()).unwrap() else {
        panic!("first push")
    };
    let chunks_before = server.lock().unwrap().count("abort", "vaults/one", "data");
    a.create_dir("/more", 0o755).unwrap();
    for i in 0..50 {
        write_fixed(&a, &format!("/more/f{i}"), &payload(100 + i, 8 * CHUNK as usize)).unwrap();
    }
    let killed = std::sync::atomic::AtomicBool::new(false);
    let err = a
        .remote("r")
        .push(&sqlvault::Ops::default().progress(&|p| {
            if p.phase == "chunks" && p.done > p.total / 4 && !killed.swap(true, std::sync::atomic::Ordering::SeqCst) {
                server.lock().unwrap().stop();
            }
        }))
        .unwrap_err();
    assert!(killed.into_inner(), "the push ended before the server was stopped");
    assert!(matches!(err, Error::Io { .. }), "{err}");

    let mut s = server.lock().unwrap();
    s.restart();
    assert_eq!(s.count("abort", "vaults/one", "commits"), 1, "a commit was written");
    let left_behind = s.count("abort", "vaults/one", "data") - chunks_before;
    assert!(left_behind < 400, "every chunk was uploaded before the failure");
    let log = a.remote("r").log(10).unwrap();
    assert_eq!(log.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), [first.as_str()], "the ref moved");

    let r = a.remote("r").push(&sqlvault::Ops::default()).unwrap();
    let PushOutcome::Pushed { chunks_uploaded, .. } = r else { panic!("{r:?}") };
    // What the failed push wrote is reused (content-named, create-only).
    assert_eq!(chunks_uploaded as usize, 400 - left_behind);
    assert_eq!(a.remote("r").log(10).unwrap()[1].id, first);
    let d = tempfile::tempdir().unwrap();
    assert_eq!(observe(&clone(&s, &url, d.path(), "c.vault")), observe(&a));
}

#[test]
fn wrong_secret_is_refused_and_leaves_no_file() {
    let server = S3Server::start();
    let url = remote(&server, "secret");
    let (_tv, a) = TestVault::new(CHUNK);
    write_fixed(&a, "/f", b"x").unwrap();
    a.remote("r").add(&url, Some(&server.endpoint)).unwrap();
    a.remote("r").push(&sqlvault::Ops::default()).unwrap();
    let d = tempfile::tempdir().unwrap();
    let dest = d.path().join("c.vault");
    let Err(e) = Vault::clone_remote(
        &url,
        Some(&server.endpoint),
        &dest,
        &Secret::passphrase("not it"),
        EngineConfig::default(),
        &sqlvault::remote::At::Newest,
        &sqlvault::Ops::default(),
    ) else {
        panic!("a wrong passphrase opened the remote")
    };
    assert!(matches!(e, Error::WrongSecret { .. }), "{e}");
    assert!(!dest.exists());

    // Another vault cannot push into this remote.
    let (_tv2, other) = TestVault::new(CHUNK);
    other.remote("r").add(&url, Some(&server.endpoint)).unwrap();
    let e = other.remote("r").push(&sqlvault::Ops::default()).unwrap_err();
    assert!(e.to_string().contains("another vault"), "{e}");
}

#[test]
fn tampered_objects_are_detected_never_returned() {
    let server = S3Server::start();
    let url = remote(&server, "tamper");
    let (_tv, a) = TestVault::new(CHUNK);
    write_fixed(&a, "/f", &payload(5, 3 * CHUNK as usize)).unwrap();
    a.set_tags("/f", &[("k", TagValue::Int(1))]).unwrap();
    a.remote("r").add(&url, Some(&server.endpoint)).unwrap();
    a.remote("r").push(&sqlvault::Ops::default()).unwrap();
    let root = server.root.path().join("tamper/vaults/one");
    let try_clone = || {
        let d = tempfile::tempdir().unwrap();
        let dest = d.path().join("c.vault");
        let r = Vault::clone_remote(
            &url,
            Some(&server.endpoint),
            &dest,
            &pass(),
            EngineConfig::default(),
            &sqlvault::remote::At::Newest,
            &sqlvault::Ops::default(),
        );
        if r.is_err() {
            assert!(!dest.exists(), "a failed clone left {}", dest.display());
        }
        r.map(|v| v.read_file("/f").unwrap())
    };
    assert_eq!(try_clone().unwrap(), payload(5, 3 * CHUNK as usize));

    let mut files: Vec<_> = server.objects("tamper", "vaults/one");
    files.retain(|p| !p.ends_with("keys"));
    for victim in files {
        let original = std::fs::read(&victim).unwrap();
        for at in [0, original.len() / 2, original.len() - 1] {
            let mut bad = original.clone();
            bad[at] ^= 0x20;
            std::fs::write(&victim, &bad).unwrap();
            match try_clone() {
                Err(Error::Damaged { .. }) => {}
                other => panic!("{} flipped at {at}: {:?}", victim.display(), other.map(|d| d.len())),
            }
        }
        std::fs::write(&victim, &original[..original.len() - 1]).unwrap();
        assert!(matches!(try_clone(), Err(Error::Damaged { .. })), "{} truncated", victim.display());
        std::fs::write(&victim, &original).unwrap();
    }
    // Swapping two sealed chunks inside the pack (each valid under its own name) is
    // caught too: a chunk cut and pasted to another offset does not open there.
    let packs = server.objects("tamper", "vaults/one/packs");
    assert_eq!(packs.len(), 1);
    let original = std::fs::read(&packs[0]).unwrap();
    let sealed = CHUNK as usize + 4 + 48; // a full chunk: length, data, AEGIS-256 nonce (32), tag (16)
    assert_eq!(original.len(), 3 * sealed);
    let mut swapped = original[sealed..2 * sealed].to_vec();
    swapped.extend_from_slice(&original[..sealed]);
    swapped.extend_from_slice(&original[2 * sealed..]);
    std::fs::write(&packs[0], &swapped).unwrap();
    assert!(matches!(try_clone(), Err(Error::Damaged { .. })));
    std::fs::write(&packs[0], &original).unwrap();
    assert_eq!(try_clone().unwrap(), payload(5, 3 * CHUNK as usize));
    let _ = root;
}

#[test]
fn the_bucket_holds_no_plaintext() {
    let server = S3Server::start();
    let url = remote(&server, "plain");
    let (_tv, a) = TestVault::new(CHUNK);
    let marker = "Zq7MarkerXv";
    populate(&a, marker);
    a.remote("r").add(&url, Some(&server.endpoint)).unwrap();
    a.remote("r").push(&sqlvault::Ops::default()).unwrap();
    let objects = server.objects("plain", "vaults/one");
    // keys, config, ref, a commit, a metadata piece, a pack, its index.
    assert!(objects.len() >= 7, "{objects:?}");
    for p in &objects {
        let rel = p.strip_prefix(server.root.path()).unwrap().to_string_lossy().to_string();
        assert!(!rel.contains(marker), "object name {rel}");
        let bytes = std::fs::read(p).unwrap();
        for needle in [marker.as_bytes(), b"docs".as_slice(), b"theme".as_slice(), b"camera".as_slice()] {
            assert!(
                !bytes.windows(needle.len()).any(|w| w == needle),
                "{rel} holds {:?}",
                String::from_utf8_lossy(needle)
            );
        }
    }
    // Only the keys object has a recognisable header; every other object is sealed and
    // no chunk object reveals a file's exact size.
    let _ = opts(CHUNK);
}

#[test]
fn point_in_time_clone_by_commit_or_time() {
    let server = S3Server::start();
    let url = remote(&server, "pitr");
    let (_tv, a) = TestVault::new(CHUNK);
    a.remote("r").add(&url, Some(&server.endpoint)).unwrap();
    let mut states = Vec::new();
    for i in 0..3u64 {
        write_fixed(&a, "/f", &payload(100 + i, 2 * CHUNK as usize)).unwrap();
        write_fixed(&a, &format!("/only-{i}"), b"x").unwrap();
        a.remote("r").push(&sqlvault::Ops::default()).unwrap();
        states.push(observe(&a));
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = a.remote("r").log(10).unwrap(); // newest first
    assert_eq!(log.len(), 3);
    let at = |at: &At| {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("c.vault");
        let r = Vault::clone_remote(
            &url,
            Some(&server.endpoint),
            &p,
            &pass(),
            EngineConfig::default(),
            at,
            &sqlvault::Ops::default(),
        );
        (d, r)
    };
    // By id (a prefix is enough), and by time: the newest commit at or before it.
    let id = log[2].id.trim_start_matches("commits/")[..12].to_string();
    let (_d, first) = at(&At::Commit(id));
    assert_eq!(observe(&first.unwrap()), states[0]);
    let (_d, second) = at(&At::Time(log[1].time_ns + 1));
    let second = second.unwrap();
    assert_eq!(observe(&second), states[1]);
    assert!(matches!(at(&At::Time(log[2].time_ns - 1)).1, Err(Error::NotFound { .. })));
    assert!(matches!(at(&At::Commit("zz".into())).1, Err(Error::InvalidArgument { .. })));
    assert!(matches!(at(&At::Commit("0123456789ab".into())).1, Err(Error::NotFound { .. })));
    // The restored vault is behind its origin: a pull brings it to the newest commit.
    assert!(matches!(
        second.remote(sqlvault::remote::ORIGIN).pull(&sqlvault::Ops::default()).unwrap(),
        PullOutcome::Pulled { .. }
    ));
    assert_eq!(observe(&second), states[2]);
}

/// Checks a conflict copy's name: `NAME.conflict-<8 hex>-<YYYYMMDDTHHMMSSZ>`.
fn is_conflict_copy(kept: &str, of: &str) -> bool {
    let Some(rest) = kept.strip_prefix(&format!("{of}.conflict-")) else { return false };
    let (dev, time) = rest.split_at(8.min(rest.len()));
    dev.bytes().all(|b| b.is_ascii_hexdigit())
        && time.len() == 17
        && time.starts_with('-')
        && time.ends_with('Z')
        && time[1..9].bytes().all(|b| b.is_ascii_digit())
        && &time[9..10] == "T"
}

/// Two devices that agreed on a commit, both changed since, the remote moved first.
fn diverged(server: &S3Server, bucket: &str) -> (TestVault, Vault, tempfile::TempDir, Vault, String) {
    let url = remote(server, bucket);
    let (tv, a) = TestVault::new(CHUNK);
    populate(&a, "alpha");
    a.create_dir_all("/tree/sub").unwrap();
    write_fixed(&a, "/tree/sub/x", b"x").unwrap();
    write_fixed(&a, "/tree/y", b"y").unwrap();
    write_fixed(&a, "/kind", b"a file").unwrap();
    write_fixed(&a, "/both", b"base").unwrap();
    a.records("settings").put("font", "serif").unwrap();
    a.remote("r").add(&url, Some(&server.endpoint)).unwrap();
    assert!(matches!(a.remote("r").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::Pushed { .. }));
    let dir = tempfile::tempdir().unwrap();
    let b = clone(server, &url, dir.path(), "b.vault");
    (tv, a, dir, b, url)
}

#[test]
fn pull_merges_diverged_histories_path_by_path() {
    let server = S3Server::start();
    let (_tv, a, _dir, b, url) = diverged(&server, "merge");
    // The remote side (a): changes pushed first.
    write_fixed(&a, "/a-only", b"from a").unwrap();
    write_fixed(&a, "/docs/big.bin", &payload(20, 2 * CHUNK as usize)).unwrap(); // both change it
    a.remove_file("/docs/dup.bin").unwrap(); // b modifies it
    write_fixed(&a, "/sparse", b"a modified the sparse file").unwrap(); // b removes it
    write_fixed(&a, "/same", b"equal on both sides").unwrap();
    a.remove_file("/tree/sub/x").unwrap();
    a.remove_dir("/tree/sub").unwrap(); // b adds a file inside
    a.remove_file("/kind").unwrap();
    a.create_dir("/kind", 0o755).unwrap(); // a file became a directory; b modifies the file
    a.records("settings").put("theme", "light").unwrap(); // b sets another value
    a.records("settings").put("from-a", "1").unwrap();
    a.records("settings").delete("font").unwrap(); // b modifies it
    a.snapshot("a-snap").unwrap();
    assert!(matches!(a.remote("r").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::Pushed { .. }));

    // The local side (b).
    let b_only = payload(21, 3 * CHUNK as usize + 7); // chunks only b has
    write_fixed(&b, "/b-only", &b_only).unwrap();
    write_fixed(&b, "/docs/big.bin", &payload(22, CHUNK as usize)).unwrap();
    write_fixed(&b, "/docs/dup.bin", b"b modified dup").unwrap();
    b.remove_file("/sparse").unwrap();
    write_fixed(&b, "/same", b"equal on both sides").unwrap();
    write_fixed(&b, "/tree/sub/new", b"added by b").unwrap();
    write_fixed(&b, "/kind", b"b changed the file").unwrap();
    b.set_tags("/b-only", &[("owner", TagValue::from("b"))]).unwrap();
    b.records("settings").put("theme", "blue").unwrap();
    b.records("settings").put("from-b", "2").unwrap();
    b.records("settings").put("font", "mono").unwrap();
    b.snapshot("b-snap").unwrap();
    let before_b = observe(&b);

    let pulled = b.remote("origin").pull(&sqlvault::Ops::default()).unwrap();
    let PullOutcome::Merged { conflicts, conflicts_total, two_way, .. } = &pulled else { panic!("{pulled:?}") };
    assert!(!two_way);
    assert!(b.fsck(&sqlvault::Ops::default()).unwrap().is_clean(), "{:?}", b.fsck(&sqlvault::Ops::default()).unwrap());
    let by_what = |w: &str| conflicts.iter().find(|c| c.what == w).unwrap_or_else(|| panic!("{w}: {conflicts:?}"));

    // Changed on one side only: that side's version.
    assert_eq!(b.read_file("/a-only").unwrap(), b"from a");
    assert_eq!(b.read_file("/b-only").unwrap(), b_only, "a local-only chunk lost its data");
    assert_eq!(b.tags("/b-only").unwrap(), vec![("owner".to_string(), TagValue::from("b"))]);
    // Changed on both sides: the remote's at the path, the local one beside it.
    assert_eq!(b.read_file("/docs/big.bin").unwrap(), payload(20, 2 * CHUNK as usize));
    let c = by_what("/docs/big.bin");
    let kept = c.kept_as.as_deref().unwrap();
    let kept_big = kept;
    assert!(is_conflict_copy(kept, "/docs/big.bin"), "{kept}");
    assert_eq!(b.read_file(kept).unwrap(), payload(22, CHUNK as usize));
    // Tags and xattrs travelled with the local version (it had big.bin's tags).
    assert_eq!(b.tags(kept).unwrap(), a.tags("/docs/big.bin").unwrap());
    // Deleted on one side, modified on the other: the modification.
    assert_eq!(b.read_file("/docs/dup.bin").unwrap(), b"b modified dup");
    assert_eq!(b.read_file("/sparse").unwrap(), b"a modified the sparse file");
    // Equal changes: no conflict.
    assert_eq!(b.read_file("/same").unwrap(), b"equal on both sides");
    assert!(conflicts.iter().all(|c| c.what != "/same"));
    // A directory removed remotely comes back for the file added in it locally; its
    // unchanged entry stays removed.
    assert_eq!(b.read_file("/tree/sub/new").unwrap(), b"added by b");
    assert!(!b.exists("/tree/sub/x").unwrap());
    // File -> directory remotely, file modified locally: the directory, the file beside it.
    assert_eq!(b.metadata("/kind").unwrap().kind, FileType::Dir);
    let kept = by_what("/kind").kept_as.clone().unwrap();
    assert_eq!(b.read_file(&kept).unwrap(), b"b changed the file");
    // Records: one side's changes kept, a clash keeps the remote's value and the local one.
    let settings = b.records("settings");
    assert_eq!(settings.get("theme").unwrap().as_deref(), Some(&b"light"[..]));
    assert_eq!(settings.get("from-a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(settings.get("from-b").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(settings.get("font").unwrap().as_deref(), Some(&b"mono"[..]), "delete/modify keeps the modification");
    let rc = by_what("settings/theme");
    let key = rc.kept_as.as_deref().unwrap().strip_prefix("settings/").unwrap();
    assert!(is_conflict_copy(key, "theme"), "{key}");
    assert_eq!(settings.get(key).unwrap().as_deref(), Some(&b"blue"[..]));
    // Snapshots made on either side are kept; the local one still reads.
    let snaps: Vec<String> = b.snapshots().unwrap().into_iter().map(|s| s.name).collect();
    assert!(snaps.contains(&"a-snap".into()) && snaps.contains(&"b-snap".into()), "{snaps:?}");
    assert!(snaps.contains(&"snap-alpha".into()), "{snaps:?}");
    assert_eq!(before_b.get("snapshot b-snap"), observe(&b).get("snapshot b-snap"));
    assert_eq!(*conflicts_total, conflicts.len() as u64);
    // /big-link is a hard link of /docs/big.bin on both sides: a conflict too, and the
    // two local copies are still one inode, as the two remote names are.
    let link = by_what("/big-link").kept_as.clone().unwrap();
    assert_eq!(b.metadata(&link).unwrap().ino, b.metadata(kept_big).unwrap().ino);
    assert_eq!(b.metadata(&link).unwrap().nlink, 2);
    assert_eq!(b.metadata("/big-link").unwrap().ino, b.metadata("/docs/big.bin").unwrap().ino);
    assert_eq!(conflicts.len(), 4, "{conflicts:?}");

    // The merge is ahead: the next push publishes it on top of the remote's head, and
    // the other device fast-forwards to the same state.
    let PushOutcome::Pushed { .. } = b.remote("origin").push(&sqlvault::Ops::default()).unwrap() else {
        panic!("push after merge")
    };
    assert!(matches!(a.remote("r").pull(&sqlvault::Ops::default()).unwrap(), PullOutcome::Pulled { .. }));
    assert_eq!(observe(&a), observe(&b));
    assert!(a.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
    assert!(matches!(b.remote("origin").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::UpToDate { .. }));
    let d = tempfile::tempdir().unwrap();
    assert_eq!(observe(&clone(&server, &url, d.path(), "c.vault")), observe(&a));
}

#[test]
fn merge_without_a_base_is_two_way_and_loses_nothing() {
    let server = S3Server::start();
    let (_tv, a, _dir, b, _url) = diverged(&server, "twoway");
    let base = b.remotes().unwrap()[0].head.clone().unwrap();
    write_fixed(&a, "/both", b"a's version").unwrap();
    write_fixed(&a, "/a-new", b"a").unwrap();
    assert!(matches!(a.remote("r").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::Pushed { .. }));
    write_fixed(&b, "/both", b"b's version").unwrap();
    write_fixed(&b, "/b-new", b"b").unwrap();
    // The base commit is pruned from the bucket.
    let hex = base.strip_prefix("commits/").unwrap();
    std::fs::remove_file(server.root.path().join("twoway/vaults/one/commits").join(hex)).unwrap();
    let pulled = b.remote("origin").pull(&sqlvault::Ops::default()).unwrap();
    let PullOutcome::Merged { conflicts, two_way: true, .. } = &pulled else { panic!("{pulled:?}") };
    assert!(b.fsck(&sqlvault::Ops::default()).unwrap().is_clean(), "{:?}", b.fsck(&sqlvault::Ops::default()).unwrap());
    assert_eq!(b.read_file("/both").unwrap(), b"a's version");
    let kept = conflicts.iter().find(|c| c.what == "/both").and_then(|c| c.kept_as.clone()).unwrap();
    assert_eq!(b.read_file(&kept).unwrap(), b"b's version");
    assert_eq!(b.read_file("/a-new").unwrap(), b"a");
    assert_eq!(b.read_file("/b-new").unwrap(), b"b");
    // Paths equal on both sides are no conflict even without a base.
    assert!(conflicts.iter().all(|c| c.what != "/docs/big.bin"), "{conflicts:?}");
    assert!(matches!(b.remote("origin").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::Pushed { .. }));
}

#[test]
fn a_failed_merge_leaves_the_vault_as_it_was() {
    let server = S3Server::start();
    let (_tv, a, _dir, b, _url) = diverged(&server, "failed");
    write_fixed(&a, "/a-new", &payload(30, 4 * CHUNK as usize)).unwrap();
    assert!(matches!(a.remote("r").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::Pushed { .. }));
    write_fixed(&b, "/b-new", b"b").unwrap();
    b.remove_file("/docs/dup.bin").unwrap();
    let before = observe(&b);
    let head_before = b.remotes().unwrap()[0].head.clone();
    // Tamper with every chunk object the merge must fetch (those b does not have): the
    // merge reaches them last, after all of its table work.
    let mut tampered = 0;
    for p in server.objects("failed", "vaults/one/packs") {
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[40] ^= 1;
        std::fs::write(&p, bytes).unwrap();
        tampered += 1;
    }
    assert!(tampered > 0);
    let e = b.remote("origin").pull(&sqlvault::Ops::default()).unwrap_err();
    assert!(matches!(e, Error::Damaged { .. }), "{e}");
    assert_eq!(observe(&b), before);
    assert_eq!(b.remotes().unwrap()[0].head, head_before);
    assert!(b.fsck(&sqlvault::Ops::default()).unwrap().is_clean(), "{:?}", b.fsck(&sqlvault::Ops::default()).unwrap());
}

#[test]
fn replicate_rounds_hold_the_lease_and_idle_rounds_cost_one_get_of_ref() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let server = S3Server::start_logged(&log);
    let url = remote(&server, "idle");
    let (_tv, a) = TestVault::new(CHUNK);
    write_fixed(&a, "/f", b"one").unwrap();
    a.remote("r").add(&url, Some(&server.endpoint)).unwrap();
    let other = tempfile::tempdir().unwrap();
    let sqlvault::ReplicatorStart::Holding(mut rep) = a.remote("r").replicator(Duration::from_secs(1)).unwrap() else {
        panic!("the lease was not free")
    };
    let first = rep.round(&sqlvault::Ops::default()).unwrap();
    assert!(matches!(first.push, PushOutcome::Pushed { .. }), "{first:?}");
    // A second replicator of the same remote (another device) is told who holds it.
    let b = clone(&server, &url, other.path(), "b.vault");
    let sqlvault::ReplicatorStart::Busy(holder) = b.remote("origin").replicator(Duration::from_secs(1)).unwrap() else {
        panic!("two replicators hold the lease")
    };
    assert!(holder.expires_ns > first.lease_expires_ns - 1);

    // Idle rounds: one request each, a GET of `ref` (the lease lasts a minute, renewed
    // after twenty seconds: not during these rounds).
    let lines = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default().lines().count();
    std::thread::sleep(Duration::from_millis(300));
    let before = lines(&log);
    for _ in 0..5 {
        let r = rep.round(&sqlvault::Ops::default()).unwrap();
        assert!(matches!(r.push, PushOutcome::UpToDate { .. }) && r.pulls.is_empty() && !r.lease_renewed, "{r:?}");
    }
    std::thread::sleep(Duration::from_millis(300));
    let text = std::fs::read_to_string(&log).unwrap();
    let idle: Vec<&str> = text.lines().skip(before).collect();
    assert_eq!(idle.len(), 5, "{idle:#?}");
    assert!(idle.iter().all(|l| l.contains(" s3_GetObject vaults/one/ref ")), "{idle:#?}");

    // A change made while replicating: the next round pushes it; if the remote moved
    // meanwhile (b pushed), the round merges and pushes again.
    write_fixed(&b, "/from-b", b"b").unwrap();
    assert!(matches!(b.remote("origin").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::Pushed { .. }));
    write_fixed(&a, "/from-a", b"a").unwrap();
    let r = rep.round(&sqlvault::Ops::default()).unwrap();
    assert!(matches!(r.push, PushOutcome::Pushed { .. }) && r.pulls.len() == 1, "{r:?}");
    assert!(matches!(b.remote("origin").pull(&sqlvault::Ops::default()).unwrap(), PullOutcome::Pulled { .. }));
    assert_eq!(b.read_file("/from-a").unwrap(), b"a");
    assert_eq!(observe(&a), observe(&b));

    // Released: the other device may replicate now.
    assert!(rep.release().unwrap());
    assert_eq!(a.remote("r").lease_holder().unwrap(), None);
    assert!(matches!(
        b.remote("origin").replicator(Duration::from_secs(1)).unwrap(),
        sqlvault::ReplicatorStart::Holding(_)
    ));
}

/// The child side of `sigkill_during_a_merge_leaves_the_vault_as_it_was`.
#[test]
fn pull_child_entry() {
    let Ok(vault) = std::env::var("SQLVAULT_PULL_CHILD") else { return };
    common::s3::set_client_env();
    let v = Vault::open(&vault, &pass(), EngineConfig::default()).unwrap();
    println!("START");
    let r = v.remote(sqlvault::remote::ORIGIN).pull(&sqlvault::Ops::default()).unwrap();
    println!("DONE {r:?}");
}

#[test]
fn sigkill_during_a_merge_leaves_the_vault_as_it_was() {
    let server = S3Server::start();
    let (_tv, a, dir, b, _url) = diverged(&server, "killmerge");
    // Work for the merge on both sides (no conflicts: the merged state is deterministic).
    for i in 0..60 {
        write_fixed(&a, &format!("/a{i}"), &payload(100 + i, 2 * CHUNK as usize)).unwrap();
        write_fixed(&b, &format!("/b{i}"), &payload(300 + i, CHUNK as usize)).unwrap();
    }
    assert!(matches!(a.remote("r").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::Pushed { .. }));
    let before = observe(&b);
    let path = dir.path().join("b.vault");
    drop(b);
    let backup = dir.path().join("backup.vault");
    std::fs::copy(&path, &backup).unwrap();
    let restore = || {
        for suffix in ["-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
        std::fs::copy(&backup, &path).unwrap();
    };
    // The merge's own duration here: the kills fall within it however fast the
    // machine and the code are (fixed delays up to 500 ms stopped catching it once
    // the merge got faster).
    let (merged, merge_ms) = {
        let v = Vault::open(&path, &pass(), EngineConfig::default()).unwrap();
        let t = std::time::Instant::now();
        assert!(matches!(
            v.remote(sqlvault::remote::ORIGIN).pull(&sqlvault::Ops::default()).unwrap(),
            PullOutcome::Merged { .. }
        ));
        (observe(&v), (t.elapsed().as_millis() as u64).max(1))
    };
    let mut rng = Rng(0x3e26);
    let (mut as_before, mut as_merged) = (0, 0);
    for cycle in 0..6 {
        restore();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["pull_child_entry", "--exact", "--nocapture", "--quiet", "--test-threads", "1"])
            .env("SQLVAULT_PULL_CHILD", &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = BufReader::new(child.stdout.as_mut().unwrap()).lines().any(|l| l.unwrap() == "START");
        assert!(started, "the pull child did not start");
        std::thread::sleep(Duration::from_millis(rng.below(merge_ms)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let v = Vault::open(&path, &pass(), EngineConfig::default()).unwrap();
        assert!(
            v.fsck(&sqlvault::Ops::default()).unwrap().is_clean(),
            "cycle {cycle}: {:?}",
            v.fsck(&sqlvault::Ops::default()).unwrap()
        );
        let seen = observe(&v);
        if seen == before {
            as_before += 1;
            // Nothing of the killed merge stayed: the next pull merges from scratch.
            assert!(matches!(
                v.remote(sqlvault::remote::ORIGIN).pull(&sqlvault::Ops::default()).unwrap(),
                PullOutcome::Merged { .. }
            ));
            assert_eq!(observe(&v), merged);
        } else {
            assert_eq!(seen, merged, "cycle {cycle}: neither the state before nor the merge");
            as_merged += 1;
        }
    }
    eprintln!("sigkill of pull: {as_before} killed mid-merge, {as_merged} finished first");
    assert!(as_before > 0, "no merge was interrupted: the kill delays are too long");
}

/// Files removed through `Inodes` (the mount) are released and purged later; a push
/// purges them first, so no nameless inode reaches the remote, and a pull or merge
/// over a vault holding some works.
#[test]
fn released_files_are_purged_before_a_push_and_a_pull() {
    let root = sqlvault::InodeId::ROOT;
    let server = S3Server::start();
    let url = remote(&server, "released");
    let (_ta, a) = TestVault::new_with(CHUNK, common::manual_wipe());
    populate(&a, "alpha");
    write_fixed(&a, "/gone", &payload(7, 2 * CHUNK as usize)).unwrap();
    a.inodes().unlink(root, b"gone").unwrap();
    assert_eq!(a.info().unwrap().pending_release_files, 1);
    a.remote("backup").add(&url, Some(&server.endpoint)).unwrap();
    assert!(matches!(a.remote("backup").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::Pushed { .. }));
    assert_eq!(a.info().unwrap().pending_release_files, 0, "the push purged it");

    let other = tempfile::tempdir().unwrap();
    let b = clone(&server, &url, other.path(), "b.vault");
    assert_eq!(observe(&a), observe(&b));
    assert_eq!(b.info().unwrap().files, a.info().unwrap().files);
    assert!(b.fsck(&sqlvault::Ops::default()).unwrap().is_clean(), "{:?}", b.fsck(&sqlvault::Ops::default()).unwrap());

    // `a` releases another file and pulls a change of `b`'s.
    write_fixed(&b, "/from-b", b"hello from b").unwrap();
    assert!(matches!(b.remote("origin").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::Pushed { .. }));
    write_fixed(&a, "/gone2", &payload(8, CHUNK as usize)).unwrap();
    a.inodes().unlink(root, b"gone2").unwrap();
    assert_eq!(a.info().unwrap().pending_release_files, 1);
    // `a` changed since its last push: the pull merges.
    a.remote("backup").pull(&sqlvault::Ops::default()).unwrap();
    assert_eq!(a.info().unwrap().pending_release_files, 0, "the pull purged it");
    assert_eq!(a.read_file("/from-b").unwrap(), b"hello from b");
    assert!(a.read_file("/gone2").is_err());
    assert!(a.fsck(&sqlvault::Ops::default()).unwrap().is_clean(), "{:?}", a.fsck(&sqlvault::Ops::default()).unwrap());
}
