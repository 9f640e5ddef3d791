//! Remote operations beyond push and pull, against a real server (VersityGW on
//! loopback, `common::s3`): `remote prune` (retention, grace period, lock, a push that
//! races a prune), `restore --at | --commit`, key slots that follow `passwd` and
//! `key rm`, and application tables through push, clone and pull.

mod common;

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::Duration;

use common::s3::S3Server;
use common::{fast_kdf, pass, TestVault};
use sqlvault::remote::{At, PruneOptions, PullOutcome, PushOutcome};
use sqlvault::{EngineConfig, Error, Progress, Secret, SqlValue, Vault};

const CHUNK: u32 = 4096;
const BUCKET_PREFIX: &str = "vaults/one";

fn payload(seed: u64, n: usize) -> Vec<u8> {
    let mut r = common::Rng(seed);
    (0..n).map(|_| r.next() as u8).collect()
}

fn remote(server: &S3Server, bucket: &str) -> String {
    format!("{}/{BUCKET_PREFIX}", server.bucket(bucket))
}

fn clone_with(server: &S3Server, url: &str, dir: &std::path::Path, secret: &Secret) -> Result<Vault, Error> {
    Vault::clone_remote(
        url,
        Some(&server.endpoint),
        dir.join("c.vault"),
        secret,
        EngineConfig::default(),
        &sqlvault::remote::At::Newest,
        &sqlvault::Ops::default(),
    )
}

/// Every file's path and content hash, plus tags.
fn files(v: &Vault) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec!["/".to_string()];
    while let Some(dir) = stack.pop() {
        for e in v.read_dir(&dir).unwrap() {
            let p = sqlvault::join_path(&dir, &e.name);
            match e.attr.kind {
                sqlvault::FileType::Dir => {
                    stack.push(p.clone());
                    out.insert(p, "dir".into());
                }
                sqlvault::FileType::File => {
                    let h = blake3::hash(&v.read_file(&p).unwrap()).to_hex().to_string();
                    out.insert(p.clone(), format!("{h} {:?}", v.tags(&p).unwrap()));
                }
                other => {
                    out.insert(p, format!("{other:?}"));
                }
            }
        }
    }
    out
}

fn grace0(keep_last: usize) -> PruneOptions {
    PruneOptions { keep_last, grace: Duration::ZERO, ..Default::default() }
}

/// Three pushes of distinct content, each commit with chunks of its own.
fn three_commits(server: &S3Server, bucket: &str) -> (TestVault, Vault, String, Vec<BTreeMap<String, String>>) {
    three_commits_in(server, bucket, None)
}

/// [`three_commits`] to a remote of bucket `layout` (default: the newest, packs).
fn three_commits_in(
    server: &S3Server,
    bucket: &str,
    layout: Option<u32>,
) -> (TestVault, Vault, String, Vec<BTreeMap<String, String>>) {
    let url = remote(server, bucket);
    let (tv, a) = TestVault::new(CHUNK);
    a.remote("r").add(&url, Some(&server.endpoint)).unwrap();
    if let Some(l) = layout {
        a.remote("r").init_layout(l).unwrap();
    }
    let mut states = Vec::new();
    // Through a handle: chunk-sized cells, so the chunk counts below do not depend on
    // where this vault's keyed content-defined cut falls.
    let write_cells = |path: &str, data: &[u8]| {
        let f = a.create_file(path).unwrap();
        f.write_at(0, data).unwrap();
        f.close().unwrap();
    };
    for i in 0..3u64 {
        write_cells("/f", &payload(100 + i, 4 * CHUNK as usize));
        write_cells(&format!("/only-{i}"), &payload(200 + i, CHUNK as usize));
        assert!(matches!(a.remote("r").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::Pushed { .. }));
        states.push(files(&a));
        std::thread::sleep(Duration::from_millis(20));
    }
    (tv, a, url, states)
}

#[test]
fn prune_keeps_what_retention_says_and_frees_the_rest() {
    let server = S3Server::start();
    // One object per chunk (layout 1): chunks go one by one (packs: the next test).
    let (_tv, a, url, states) = three_commits_in(&server, "prune", Some(1));
    let log = a.remote("r").log(10).unwrap();
    let data_before = server.count("prune", BUCKET_PREFIX, "data");
    assert_eq!(server.count("prune", BUCKET_PREFIX, "commits"), 3);

    // A dry run decides the same and deletes nothing.
    let dry = a.remote("r").prune(&PruneOptions { dry_run: true, ..grace0(2) }, &sqlvault::Ops::default()).unwrap();
    assert_eq!(dry.kept_commits, vec![log[0].id.clone(), log[1].id.clone()]);
    assert_eq!(dry.deleted_commits, vec![log[2].id.clone()]);
    assert_eq!(server.count("prune", BUCKET_PREFIX, "commits"), 3);
    assert_eq!(server.count("prune", BUCKET_PREFIX, "data"), data_before);

    let s = a.remote("r").prune(&grace0(2), &sqlvault::Ops::default()).unwrap();
    assert_eq!(s.kept_commits, dry.kept_commits);
    assert_eq!(s.objects_deleted, dry.objects_deleted);
    assert_eq!(server.count("prune", BUCKET_PREFIX, "commits"), 2);
    // The oldest commit, its metadata piece and the 4 chunks of its /f, which no later
    // tree names (its /only-0 is still in the later trees), are gone.
    let data_after = server.count("prune", BUCKET_PREFIX, "data");
    assert_eq!(data_before - data_after, 4, "{s:?}");
    assert_eq!(s.objects_deleted, 1 + 1 + 4, "{s:?}");
    assert!(s.bytes_deleted > 4 * CHUNK as u64, "{s:?}");
    assert!(server.objects("prune", BUCKET_PREFIX).iter().all(|p| !p.ends_with("lock")), "the lock stays behind");

    // What is kept still clones, old and new; the pruned commit is gone.
    let d = tempfile::tempdir().unwrap();
    let c = clone_with(&server, &url, d.path(), &pass()).unwrap();
    assert_eq!(files(&c), states[2]);
    assert!(c.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
    let at = |at: &At| {
        let d = tempfile::tempdir().unwrap();
        let r = Vault::clone_remote(
            &url,
            Some(&server.endpoint),
            d.path().join("c.vault"),
            &pass(),
            EngineConfig::default(),
            at,
            &sqlvault::Ops::default(),
        )
        .map(|v| files(&v));
        (d, r)
    };
    assert_eq!(at(&At::Commit(log[1].id.clone())).1.unwrap(), states[1]);
    assert!(at(&At::Commit(log[2].id.clone())).1.is_err());
    // The remote log ends where history was pruned; pushes and pulls go on.
    assert_eq!(a.remote("r").log(10).unwrap().len(), 2);
    a.write_file("/after", b"after prune").unwrap();
    assert!(matches!(a.remote("r").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::Pushed { .. }));
    assert!(matches!(c.remote("origin").pull(&sqlvault::Ops::default()).unwrap(), PullOutcome::Pulled { .. }));
    assert_eq!(files(&c), files(&a));

    // Keep only the head: everything else goes, the head always stays.
    let s = a.remote("r").prune(&grace0(1), &sqlvault::Ops::default()).unwrap();
    assert_eq!(s.kept_commits.len(), 1);
    assert_eq!(server.count("prune", BUCKET_PREFIX, "commits"), 1);
    let d = tempfile::tempdir().unwrap();
    assert_eq!(files(&clone_with(&server, &url, d.path(), &pass()).unwrap()), files(&a));
    // No rule at all is refused (it would keep only the head without saying so).
    let e = a.remote("r").prune(&PruneOptions::default(), &sqlvault::Ops::default()).unwrap_err();
    assert!(e.to_string().contains("retention rule"), "{e}");
}

/// Packs go whole: the one whose chunks no kept commit references is deleted with its
/// index; a pack with some live chunk stays; what is kept still clones.
#[test]
fn prune_deletes_packs_no_kept_commit_references() {
    let server = S3Server::start();
    let url = remote(&server, "packs");
    let (_tv, a) = TestVault::new(CHUNK);
    a.remote("r").add(&url, Some(&server.endpoint)).unwrap();
    a.write_file("/old", &payload(300, 4 * CHUNK as usize)).unwrap();
    assert!(matches!(a.remote("r").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::Pushed { .. }));
    a.write_file("/keep", &payload(301, 2 * CHUNK as usize)).unwrap();
    a.write_file("/old2", &payload(302, 2 * CHUNK as usize)).unwrap();
    assert!(matches!(a.remote("r").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::Pushed { .. }));
    a.remove_file("/old").unwrap();
    a.remove_file("/old2").unwrap();
    a.write_file("/new", &payload(303, CHUNK as usize)).unwrap();
    assert!(matches!(a.remote("r").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::Pushed { .. }));
    assert_eq!((server.count("packs", BUCKET_PREFIX, "packs"), server.count("packs", BUCKET_PREFIX, "index")), (3, 3));

    // A pack no index names, as an interrupted push leaves: never read, pruned.
    let packs = server.objects("packs", &format!("{BUCKET_PREFIX}/packs"));
    std::fs::copy(&packs[0], packs[0].with_file_name("0".repeat(64))).unwrap();
    assert_eq!(server.count("packs", BUCKET_PREFIX, "packs"), 4);

    let s = a.remote("r").prune(&grace0(1), &sqlvault::Ops::default()).unwrap();
    // Two commits, their two metadata pieces, the first pack (only /old) and its index,
    // the stray pack; the second pack holds /keep (live) and /old2 (not): kept whole.
    assert_eq!(s.objects_deleted, 2 + 2 + 1 + 1 + 1, "{s:?}");
    assert_eq!((server.count("packs", BUCKET_PREFIX, "packs"), server.count("packs", BUCKET_PREFIX, "index")), (2, 2));
    let d = tempfile::tempdir().unwrap();
    let c = clone_with(&server, &url, d.path(), &pass()).unwrap();
    assert_eq!(files(&c), files(&a));
    assert!(c.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
    // A push after the prune finds its chunks through the remaining indexes.
    // Through a handle: four fixed chunks.
    let f = a.create_file("/again").unwrap();
    f.write_at(0, &payload(300, 4 * CHUNK as usize)).unwrap();
    f.close().unwrap();
    let r = a.remote("r").push(&sqlvault::Ops::default()).unwrap();
    assert!(matches!(r, PushOutcome::Pushed { chunks_uploaded: 4, .. }), "{r:?}");
    assert!(matches!(
        c.remote("origin").pull(&sqlvault::Ops::default()).unwrap(),
        PullOutcome::Pulled { chunks_downloaded: 4, .. }
    ));
    assert_eq!(files(&c), files(&a));
}

#[test]
fn prune_keeps_young_objects_within_the_grace_period() {
    let server = S3Server::start();
    // Layout 1: two commits, their two metadata pieces, the 8 chunks of their versions
    // of /f. Packs: the packs of those versions also hold the /only-N files, still
    // referenced: kept whole, so only the commits and pieces are candidates.
    for (bucket, layout, candidates) in [("grace", Some(1), 2 + 2 + 8), ("gracepacks", None, 2 + 2)] {
        let (_tv, a, _url, _) = three_commits_in(&server, bucket, layout);
        let all = server.objects(bucket, BUCKET_PREFIX).len();
        // Everything was written moments ago: with a grace of an hour nothing is
        // deleted, though retention drops two commits.
        let s = a
            .remote("r")
            .prune(&PruneOptions { keep_last: 1, ..Default::default() }, &sqlvault::Ops::default())
            .unwrap();
        assert_eq!(s.kept_commits.len(), 1);
        assert_eq!(s.objects_deleted, 0, "{s:?}");
        assert_eq!(s.objects_in_grace, candidates, "{s:?}");
        assert_eq!(server.objects(bucket, BUCKET_PREFIX).len(), all);
        // Once they are older than the grace, they go.
        std::thread::sleep(Duration::from_millis(1100));
        let s = a.remote("r").prune(
            &PruneOptions { keep_last: 1, grace: Duration::from_secs(1), ..Default::default() },
            &sqlvault::Ops::default(),
        );
        let s = s.unwrap();
        assert_eq!((s.objects_deleted, s.objects_in_grace), (candidates, 0), "{s:?}");
        assert_eq!(server.count(bucket, BUCKET_PREFIX, "commits"), 1);
    }
}

#[test]
fn prune_refuses_while_locked_and_pushes_wait_for_it() {
    let server = S3Server::start();
    let (tv, a, url, _) = three_commits(&server, "locked");
    let d = tempfile::tempdir().unwrap();
    let b = clone_with(&server, &url, d.path(), &pass()).unwrap();
    b.write_file("/from-b", b"b").unwrap();
    let (entered_tx, entered_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        let a = &a;
        let pruner = s.spawn(move || {
            let once = std::sync::Once::new();
            let go_rx = std::sync::Mutex::new(go_rx);
            let progress = |p: &Progress| {
                if p.phase == "commits" {
                    once.call_once(|| {
                        entered_tx.send(()).unwrap();
                        go_rx.lock().unwrap().recv().unwrap();
                    });
                }
            };
            a.remote("r").prune(&grace0(1), &sqlvault::Ops::default().progress(&progress))
        });
        // The prune holds the lock now: a second prune and a push are refused, and the
        // remote is unchanged by them.
        entered_rx.recv().unwrap();
        let e = b.remote("origin").prune(&grace0(1), &sqlvault::Ops::default()).unwrap_err();
        assert!(matches!(e, Error::RemoteLocked { .. }), "{e}");
        assert!(e.to_string().contains("remote prune"), "{e}");
        let e = b.remote("origin").push(&sqlvault::Ops::default()).unwrap_err();
        assert!(matches!(e, Error::RemoteLocked { .. }), "{e}");
        go_tx.send(()).unwrap();
        pruner.join().unwrap().unwrap();
    });
    // Released: the push goes through.
    assert!(matches!(b.remote("origin").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::Pushed { .. }));
    drop(tv);
}

#[test]
fn a_push_racing_a_prune_loses_nothing() {
    let server = S3Server::start();
    let (_tv, a, url, _) = three_commits(&server, "race");
    let d = tempfile::tempdir().unwrap();
    let b = clone_with(&server, &url, d.path(), &pass()).unwrap();
    // B's push has listed the bucket and is uploading when A prunes everything but the
    // head with no grace: objects B found present may be deleted under it. B's ref write
    // then fails (the prune touched the ref), B retries and re-uploads what it needs.
    // The first push's /f: its 4 chunks are in the bucket (the push skips them) but no
    // longer in the head, so the prune deletes them.
    b.write_file("/old-f", &payload(100, 4 * CHUNK as usize)).unwrap();
    b.write_file("/new", &payload(999, 3 * CHUNK as usize)).unwrap();
    let pruned = std::sync::Once::new();
    let progress = |p: &Progress| {
        if p.phase == "chunks" {
            pruned.call_once(|| {
                // Another thread: this one is inside the push's network runtime.
                let s = std::thread::scope(|t| {
                    t.spawn(|| a.remote("r").prune(&grace0(1), &sqlvault::Ops::default())).join().unwrap()
                });
                let s = s.unwrap();
                assert!(s.objects_deleted >= 4, "{s:?}");
            });
        }
    };
    let r = b.remote("origin").push(&sqlvault::Ops::default().progress(&progress)).unwrap();
    assert!(pruned.is_completed(), "the push uploaded no chunk");
    assert!(matches!(r, PushOutcome::Pushed { .. }), "{r:?}");
    let d2 = tempfile::tempdir().unwrap();
    let c = clone_with(&server, &url, d2.path(), &pass()).unwrap();
    assert_eq!(files(&c), files(&b));
    assert!(c.fsck(&sqlvault::Ops::default()).unwrap().is_clean(), "{:?}", c.fsck(&sqlvault::Ops::default()).unwrap());
    // And a prune after both keeps the result whole.
    a.remote("r").pull(&sqlvault::Ops::default()).unwrap();
    a.remote("r").prune(&grace0(1), &sqlvault::Ops::default()).unwrap();
    let d3 = tempfile::tempdir().unwrap();
    let c = clone_with(&server, &url, d3.path(), &pass()).unwrap();
    assert_eq!(files(&c), files(&b));
    assert!(c.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

#[test]
fn restore_at_or_commit_of_the_whole_vault_and_of_a_path() {
    let server = S3Server::start();
    let (_tv, a, _url, states) = three_commits(&server, "restore");
    a.set_tags("/f", &[("k", sqlvault::TagValue::Int(7))]).unwrap();
    a.create_dir_all("/dir/sub").unwrap();
    a.write_file("/dir/sub/x", &payload(7, 2 * CHUNK as usize)).unwrap();
    a.remote("r").push(&sqlvault::Ops::default()).unwrap();
    let tagged = files(&a);
    let log = a.remote("r").log(10).unwrap();

    // Local changes after the last push, then the whole tree back to the first commit.
    a.write_file("/f", b"changed").unwrap();
    a.remove_file("/only-1").unwrap();
    let r =
        a.remote("r").restore(&At::Commit(log[3].id[8..20].to_string()), "/", None, &sqlvault::Ops::default()).unwrap();
    assert_eq!(r.commit, log[3].id);
    assert_eq!(files(&a), states[0]);
    assert!(a.fsck(&sqlvault::Ops::default()).unwrap().is_clean(), "{:?}", a.fsck(&sqlvault::Ops::default()).unwrap());
    // A new local change: the next push publishes it as a new commit on top.
    assert!(matches!(a.remote("r").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::Pushed { .. }));
    assert_eq!(a.remote("r").log(10).unwrap().len(), 5);

    // One path, by time, to another place; the rest stays.
    let r =
        a.remote("r").restore(&At::Time(log[0].time_ns), "/dir", Some("/dir-back"), &sqlvault::Ops::default()).unwrap();
    assert_eq!(r.restored.files, 1);
    assert_eq!(a.read_file("/dir-back/sub/x").unwrap(), payload(7, 2 * CHUNK as usize));
    assert_eq!(files(&a).get("/f"), states[0].get("/f"));
    // A file with its tags.
    a.remote("r").restore(&At::Commit(log[0].id.clone()), "/f", None, &sqlvault::Ops::default()).unwrap();
    assert_eq!(files(&a).get("/f"), tagged.get("/f"));
    assert!(a.fsck(&sqlvault::Ops::default()).unwrap().is_clean(), "{:?}", a.fsck(&sqlvault::Ops::default()).unwrap());
    let e = a
        .remote("r")
        .restore(&At::Commit("0123456789abcdef".into()), "/", None, &sqlvault::Ops::default())
        .unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e}");
}

#[test]
fn restore_fetches_only_missing_chunks_into_a_fresh_vault() {
    let server = S3Server::start();
    let (_tv, a, url, states) = three_commits(&server, "fetch");
    // A clone of the newest commit lacks the first /f's chunks: restore fetches them.
    let d = tempfile::tempdir().unwrap();
    let c = clone_with(&server, &url, d.path(), &pass()).unwrap();
    let log = a.remote("r").log(10).unwrap();
    let r = c
        .remote(sqlvault::remote::ORIGIN)
        .restore(&At::Commit(log[2].id.clone()), "/", None, &sqlvault::Ops::default())
        .unwrap();
    assert_eq!(r.chunks_downloaded, 4);
    assert_eq!(files(&c), states[0]);
    assert!(c.fsck(&sqlvault::Ops::default()).unwrap().is_clean(), "{:?}", c.fsck(&sqlvault::Ops::default()).unwrap());
}

#[test]
fn passwd_and_key_rm_travel_with_push_and_pull() {
    let server = S3Server::start();
    let url = remote(&server, "keys");
    let (tv, a) = TestVault::new(CHUNK);
    a.write_file("/f", b"x").unwrap();
    a.remote("r").add(&url, Some(&server.endpoint)).unwrap();
    a.remote("r").push(&sqlvault::Ops::default()).unwrap();
    let d = tempfile::tempdir().unwrap();
    let b = clone_with(&server, &url, d.path(), &pass()).unwrap();
    let b_path = d.path().join("c.vault");

    // passwd on A, then a push with nothing else changed: the new passphrase clones,
    // the old one is refused.
    let new = Secret::passphrase("a new passphrase");
    sqlvault::secrets::change_secret(&tv.path, &pass(), &new, fast_kdf()).unwrap();
    assert!(matches!(a.remote("r").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::UpToDate { .. }));
    let d1 = tempfile::tempdir().unwrap();
    assert!(clone_with(&server, &url, d1.path(), &new).is_ok());
    let d2 = tempfile::tempdir().unwrap();
    assert!(matches!(clone_with(&server, &url, d2.path(), &pass()), Err(Error::WrongSecret { .. })));
    // B adopts it at its pull: its own file now opens with the new passphrase only.
    assert!(matches!(b.remote("origin").pull(&sqlvault::Ops::default()).unwrap(), PullOutcome::UpToDate { .. }));
    drop(b);
    assert!(Vault::open(&b_path, &new, EngineConfig::default()).is_ok());
    assert!(matches!(Vault::open(&b_path, &pass(), EngineConfig::default()), Err(Error::WrongSecret { .. })));

    // key add on B, pushed; then key rm on A of that slot... A adds a second secret
    // and removes the first; B pulls: the removed one opens neither the remote nor B.
    let second = Secret::passphrase("second");
    let slot = sqlvault::secrets::add_secret(&tv.path, &new, &second, fast_kdf()).unwrap();
    a.remote("r").push(&sqlvault::Ops::default()).unwrap();
    let d3 = tempfile::tempdir().unwrap();
    assert!(clone_with(&server, &url, d3.path(), &second).is_ok());
    sqlvault::secrets::remove_secret(&tv.path, &second, 0).unwrap();
    a.write_file("/g", b"y").unwrap();
    a.remote("r").push(&sqlvault::Ops::default()).unwrap();
    let d4 = tempfile::tempdir().unwrap();
    assert!(matches!(clone_with(&server, &url, d4.path(), &new), Err(Error::WrongSecret { .. })));
    assert!(clone_with(&server, &url, d4.path(), &second).is_ok());
    let b = Vault::open(&b_path, &new, EngineConfig::default()).unwrap();
    assert!(matches!(b.remote("origin").pull(&sqlvault::Ops::default()).unwrap(), PullOutcome::Pulled { .. }));
    drop(b);
    assert!(matches!(Vault::open(&b_path, &new, EngineConfig::default()), Err(Error::WrongSecret { .. })));
    assert!(Vault::open(&b_path, &second, EngineConfig::default()).is_ok());
    assert_eq!(slot, 1);
}

#[test]
fn a_keys_object_from_a_bucket_writer_is_refused_and_an_old_one_not_adopted() {
    let server = S3Server::start();
    let url = remote(&server, "forged");
    let (tv, a) = TestVault::new(CHUNK);
    a.write_file("/f", b"x").unwrap();
    a.remote("r").add(&url, Some(&server.endpoint)).unwrap();
    a.remote("r").push(&sqlvault::Ops::default()).unwrap();
    let keys_path = server.root.path().join("forged").join(BUCKET_PREFIX).join("keys");
    let old = std::fs::read(&keys_path).unwrap();
    let d = tempfile::tempdir().unwrap();
    let b = clone_with(&server, &url, d.path(), &pass()).unwrap();

    // A flipped byte in the slots: clone and pull both refuse it.
    let mut bad = old.clone();
    bad[200] ^= 1;
    std::fs::write(&keys_path, &bad).unwrap();
    let d1 = tempfile::tempdir().unwrap();
    assert!(clone_with(&server, &url, d1.path(), &pass()).is_err());
    assert!(matches!(b.remote("origin").pull(&sqlvault::Ops::default()), Err(Error::Damaged { .. })));
    std::fs::write(&keys_path, &old).unwrap();

    // A adds a passphrase and pushes; a bucket writer puts the old copy back: B does
    // not go back to it (its epoch is not newer than what B saw).
    let extra = Secret::passphrase("extra");
    sqlvault::secrets::add_secret(&tv.path, &pass(), &extra, fast_kdf()).unwrap();
    a.remote("r").push(&sqlvault::Ops::default()).unwrap();
    b.remote("origin").pull(&sqlvault::Ops::default()).unwrap();
    let b_path = d.path().join("c.vault");
    drop(b);
    assert!(Vault::open(&b_path, &extra, EngineConfig::default()).is_ok());
    std::fs::write(&keys_path, &old).unwrap();
    let b = Vault::open(&b_path, &pass(), EngineConfig::default()).unwrap();
    b.remote("origin").pull(&sqlvault::Ops::default()).unwrap();
    drop(b);
    assert!(Vault::open(&b_path, &extra, EngineConfig::default()).is_ok());
}

#[test]
fn application_tables_and_migrations_round_trip() {
    let server = S3Server::start();
    let url = remote(&server, "apps");
    let (_tv, a) = TestVault::new(CHUNK);
    a.write_file("/f", b"x").unwrap();
    let migrations = [
        "CREATE TABLE photos(id INTEGER PRIMARY KEY AUTOINCREMENT, path TEXT NOT NULL, iso INTEGER, score REAL, \
         thumb BLOB, anything)",
        "CREATE INDEX photos_by_iso ON photos(iso)",
        "CREATE TABLE notes(k TEXT PRIMARY KEY, v) WITHOUT ROWID",
        "CREATE TABLE plain(v)",
        "CREATE VIEW good AS SELECT path FROM photos WHERE score > 4",
        "CREATE TABLE audit(n INTEGER)",
        "CREATE TRIGGER photos_audit AFTER INSERT ON photos BEGIN INSERT INTO audit(n) VALUES (NEW.id); END",
    ];
    a.migrate("gallery", &migrations).unwrap();
    let ins = "INSERT INTO photos(path, iso, score, thumb, anything) VALUES (?1, ?2, ?3, ?4, ?5)";
    for (i, any) in
        [SqlValue::Integer(5), SqlValue::Text("5".into()), SqlValue::Real(5.5), SqlValue::Null].into_iter().enumerate()
    {
        let p = [
            SqlValue::Text(format!("/p{i}")),
            SqlValue::Integer(100 * i as i64),
            SqlValue::Real(3.5 + i as f64),
            SqlValue::Blob(vec![i as u8; 3]),
            any,
        ];
        a.execute(ins, &p).unwrap();
    }
    a.execute("DELETE FROM photos WHERE id = 2", &[]).unwrap(); // a gap in the ids
    a.execute_batch("INSERT INTO notes VALUES ('a', x'00ff'), ('b', 2); INSERT INTO plain VALUES (1), ('two')")
        .unwrap();
    a.execute("DELETE FROM plain WHERE v = 1", &[]).unwrap(); // rowid 2 stays 2
    let dump = |v: &Vault| -> Vec<String> {
        let mut out = Vec::new();
        for q in [
            "SELECT id, path, iso, score, thumb, anything, typeof(anything) FROM photos ORDER BY id",
            "SELECT k, v, typeof(v) FROM notes ORDER BY k",
            "SELECT rowid, v FROM plain ORDER BY rowid",
            "SELECT * FROM good ORDER BY path",
            "SELECT n FROM audit ORDER BY n",
        ] {
            for r in v.query(q, &[], |r| Ok(format!("{:?}", r.values()?))).unwrap() {
                out.push(format!("{q}: {r}"));
            }
        }
        out
    };
    a.remote("r").add(&url, Some(&server.endpoint)).unwrap();
    assert!(matches!(a.remote("r").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::Pushed { .. }));
    let d = tempfile::tempdir().unwrap();
    let b = clone_with(&server, &url, d.path(), &pass()).unwrap();
    assert_eq!(dump(&b), dump(&a));
    // The schema, indexes, view and trigger came along; the trigger did not fire on
    // the copied rows (audit equal), and fires on the clone's own inserts.
    b.execute(ins, &[SqlValue::Text("/b".into()), SqlValue::Null, SqlValue::Null, SqlValue::Null, SqlValue::Null])
        .unwrap();
    let audit = b.query("SELECT max(n) FROM audit", &[], |r| r.get::<i64>(0)).unwrap();
    assert_eq!(audit, vec![5]); // AUTOINCREMENT went on from the original's counter
    let idx = b.query("PRAGMA index_list(photos)", &[], |r| r.get::<String>(1)).unwrap();
    assert_eq!(idx, vec!["photos_by_iso"]);
    // Migrations travelled: migrate with the same list applies nothing, a new one applies.
    assert_eq!(b.migrate("gallery", &migrations).unwrap(), 0);
    assert!(b.fsck(&sqlvault::Ops::default()).unwrap().is_clean());

    // Changes on the clone come back with a pull.
    let mut more = migrations.to_vec();
    more.push("ALTER TABLE notes ADD COLUMN extra TEXT");
    assert_eq!(b.migrate("gallery", &more).unwrap(), 1);
    b.execute("UPDATE notes SET extra = 'e' WHERE k = 'a'", &[]).unwrap();
    assert!(matches!(b.remote("origin").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::Pushed { .. }));
    assert!(matches!(a.remote("r").pull(&sqlvault::Ops::default()).unwrap(), PullOutcome::Pulled { .. }));
    assert_eq!(dump(&a), dump(&b));
    assert_eq!(a.query("SELECT extra FROM notes WHERE k = 'a'", &[], |r| r.get::<String>(0)).unwrap(), vec!["e"]);
    assert_eq!(a.migrate("gallery", &more).unwrap(), 0);
    // Nothing changed since: the digest covers the application tables too.
    assert!(matches!(a.remote("r").push(&sqlvault::Ops::default()).unwrap(), PushOutcome::UpToDate { .. }));
}
