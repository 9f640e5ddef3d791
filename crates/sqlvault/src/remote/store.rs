//! The bucket as a blocking key -> bytes store with the two writes replication needs:
//! create-only (`If-None-Match: *`) and update-if-unchanged (`If-Match: ETag`).
//! `object_store` talks S3 (signing, retries); a small tokio runtime owned here
//! drives it, so no async reaches the rest of the library. Bulk transfers are bounded
//! pipelines between the calling thread and the runtime (see [`Store`]).

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload, UpdateVersion};

use crate::error::{Error, Result};

/// Where a remote lives: `s3://bucket/prefix` and an optional endpoint (any
/// S3-compatible server). Credentials are not part of it: they come from the
/// environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
/// `AWS_REGION`) when the remote is used, never from the vault.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RemoteUrl {
    /// The bucket's name.
    pub bucket: String,
    /// The key prefix inside it, without leading or trailing `/` (may be empty).
    pub prefix: String,
    /// `http(s)://host:port` of an S3-compatible server; `None` for AWS.
    pub endpoint: Option<String>,
}

impl RemoteUrl {
    /// Parses `s3://bucket[/prefix]`.
    pub fn parse(url: &str, endpoint: Option<&str>) -> Result<RemoteUrl> {
        let bad =
            |why: &str| Error::InvalidArgument { what: format!("remote URL {url:?}: {why} (s3://bucket/prefix)") };
        let rest = url.strip_prefix("s3://").ok_or_else(|| bad("not an s3:// URL"))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() || !bucket.chars().all(|c| c.is_ascii_alphanumeric() || "-._".contains(c)) {
            return Err(bad("invalid bucket name"));
        }
        let prefix = prefix.trim_matches('/');
        if prefix.split('/').any(|p| p.is_empty() || p == "." || p == "..") && !prefix.is_empty() {
            return Err(bad("invalid prefix"));
        }
        if let Some(e) = endpoint {
            if !(e.starts_with("http://") || e.starts_with("https://")) {
                return Err(Error::InvalidArgument { what: format!("endpoint {e:?}: not an http:// or https:// URL") });
            }
        }
        Ok(RemoteUrl { bucket: bucket.into(), prefix: prefix.into(), endpoint: endpoint.map(str::to_string) })
    }

    /// The URL as given to `remote add` (without the endpoint).
    pub fn url(&self) -> String {
        if self.prefix.is_empty() {
            format!("s3://{}", self.bucket)
        } else {
            format!("s3://{}/{}", self.bucket, self.prefix)
        }
    }
}

/// Outcome of a conditional write.
#[derive(Debug, PartialEq, Eq)]
pub enum Written {
    /// Written; the new ETag.
    Done(Option<String>),
    /// Not written: the object exists (create) or changed since it was read (update).
    Conflict,
}

/// A blocking handle on one remote's prefix.
///
/// Bulk transfers ([`Store::create_all`], [`Store::run_all`]) are pipelines: the
/// calling thread produces (reads and seals) or consumes (opens and stores) objects
/// while the runtime's worker threads keep up to [`PARALLEL`] requests in flight. The
/// two sides meet in a channel of at most [`QUEUED`] objects, so whatever the size of
/// the transfer, at most `QUEUED + PARALLEL + 1` objects are held in memory at once
/// (the queue, the requests in flight, and the one the calling thread is working on).
pub struct Store {
    bucket: Arc<Bucket>,
    rt: tokio::runtime::Runtime,
    /// What this handle learnt of the remote (layout, pack index), kept between operations.
    pub(crate) memo: std::sync::Mutex<Memo>,
}

/// What a [`Store`] remembers of its remote between operations, so that a replicator's
/// rounds do not read again what cannot change: the config's layout, and (layout 3)
/// where each chunk is, from the index objects already read (immutable once written).
#[derive(Default)]
pub(crate) struct Memo {
    /// The remote's layout, once its config was read or written.
    pub layout: Option<u32>,
    /// Index objects read into `chunks`.
    pub indexes: std::collections::HashSet<String>,
    /// Chunk id (keyed hash) -> where it is.
    pub chunks: super::placed::Placed,
    /// The packs that existed at the last listing, and when it was made.
    pub live: Option<(std::collections::HashSet<String>, std::time::Instant)>,
}

/// What the runtime's tasks share: the store and how to name its objects.
pub(crate) struct Bucket {
    inner: Arc<dyn ObjectStore>,
    prefix: String,
    label: String,
}

/// How many requests of one bulk transfer are in flight at once.
pub const PARALLEL: usize = 16;
/// How many objects wait between the calling thread and the requests in flight.
pub const QUEUED: usize = 16;
/// Requests in flight and objects queued of a transfer of packs (a few MiB each), so
/// that a pack transfer holds at most `PACK_QUEUED + PACK_PARALLEL + 1` packs.
pub const PACK_PARALLEL: usize = 6;
/// See [`PACK_PARALLEL`].
pub const PACK_QUEUED: usize = 2;
/// Worker threads of the runtime that drives the requests.
const WORKERS: usize = 2;

impl Bucket {
    fn path(&self, name: &str) -> ObjPath {
        ObjPath::from(format!("{}{name}", self.prefix))
    }

    fn err(&self, what: &str, name: &str, e: object_store::Error) -> Error {
        Error::Io { context: format!("remote {}: cannot {what} {name}", self.label), source: std::io::Error::other(e) }
    }

    fn missing(&self, name: &str) -> Error {
        Error::damaged(format!("remote {}: object {name} is missing", self.label))
    }

    /// The byte `ranges` of object `name` (coalesced by `object_store` into few
    /// requests when close together). A missing object is damage; so is a range the
    /// object does not hold whole (it was truncated).
    pub(crate) async fn get_ranges(
        &self,
        name: &str,
        ranges: &[std::ops::Range<u64>],
    ) -> Result<Vec<impl AsRef<[u8]> + Send + 'static>> {
        match self.inner.get_ranges(&self.path(name), ranges).await {
            Ok(parts) => {
                if parts.iter().zip(ranges).any(|(p, r)| p.len() as u64 != r.end - r.start) {
                    return Err(Error::damaged(format!(
                        "remote {}: object {name} is shorter than its index says",
                        self.label
                    )));
                }
                Ok(parts)
            }
            Err(object_store::Error::NotFound { .. }) => Err(self.missing(name)),
            Err(e) => Err(self.err("read", name, e)),
        }
    }

    /// The whole object `name`, which must exist.
    pub(crate) async fn get_required(&self, name: &str) -> Result<Vec<u8>> {
        self.get(name).await?.map(|(b, _)| b).ok_or_else(|| self.missing(name))
    }

    async fn get(&self, name: &str) -> Result<Option<(Vec<u8>, Option<String>)>> {
        match self.inner.get(&self.path(name)).await {
            Ok(r) => {
                let etag = r.meta.e_tag.clone();
                let bytes = r.bytes().await.map_err(|e| self.err("read", name, e))?;
                Ok(Some((bytes.to_vec(), etag)))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.err("read", name, e)),
        }
    }

    async fn put(&self, name: &str, bytes: Vec<u8>, mode: PutMode) -> Result<Written> {
        let create = matches!(mode, PutMode::Create);
        let payload = PutPayload::from(bytes);
        let opts = PutOptions { mode, ..Default::default() };
        match self.inner.put_opts(&self.path(name), payload.clone(), opts).await {
            Ok(r) => Ok(Written::Done(r.e_tag)),
            Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {
                Ok(Written::Conflict)
            }
            // A create whose answer never came: the object may exist, and its bytes tell
            // whose it is. VersityGW answers a create of an existing object with 412 and
            // closes the connection while the body is still being sent, which the client
            // reports as a failed send (a push again of a large vault re-creates
            // unchanged index pieces), and a connection can drop after the write. The
            // same bytes are this create's, or for a content-addressed object anyone's
            // equal ones: written. Other bytes: another writer's create won. None: the
            // error stands.
            Err(e) if create => match self.get(name).await {
                Ok(Some((have, etag))) if same_bytes(&payload, &have) => Ok(Written::Done(etag)),
                Ok(Some(_)) => Ok(Written::Conflict),
                // Nothing there, or no answer to the read either (a refused credential,
                // a server gone): the write's own error is the one to report.
                Ok(None) | Err(_) => Err(self.err("write", name, e)),
            },
            Err(e) => Err(self.err("write", name, e)),
        }
    }
}

/// Whether `payload` holds exactly `have`'s bytes.
fn same_bytes(payload: &PutPayload, have: &[u8]) -> bool {
    let mut rest = have;
    payload.content_length() == have.len()
        && payload.iter().all(|part| match rest.split_at_checked(part.len()) {
            Some((head, tail)) if head == &part[..] => {
                rest = tail;
                true
            }
            _ => false,
        })
}

impl Store {
    /// Connects to `url` with credentials from the environment.
    pub fn connect(url: &RemoteUrl) -> Result<Store> {
        let mut b = object_store::aws::AmazonS3Builder::from_env()
            .with_bucket_name(&url.bucket)
            .with_conditional_put(object_store::aws::S3ConditionalPut::ETagMatch)
            .with_retry(object_store::RetryConfig {
                max_retries: 4,
                retry_timeout: std::time::Duration::from_secs(60),
                ..Default::default()
            });
        if std::env::var_os("AWS_REGION").is_none() && std::env::var_os("AWS_DEFAULT_REGION").is_none() {
            b = b.with_region("us-east-1");
        }
        if let Some(e) = &url.endpoint {
            b = b.with_endpoint(e).with_allow_http(e.starts_with("http://")).with_virtual_hosted_style_request(false);
        }
        let s3 = b.build().map_err(|e| Error::InvalidArgument { what: format!("remote {}: {e}", url.url()) })?;
        Store::new(Arc::new(s3), &url.prefix, url.url())
    }

    /// A store over any `ObjectStore` (the unit tests use `InMemory`).
    pub fn new(inner: Arc<dyn ObjectStore>, prefix: &str, label: String) -> Result<Store> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKERS)
            .thread_name("sqlvault-remote")
            .enable_all()
            .build()
            .map_err(|e| Error::io("cannot start the network runtime", e))?;
        let prefix = if prefix.is_empty() { String::new() } else { format!("{prefix}/") };
        Ok(Store { bucket: Arc::new(Bucket { inner, prefix, label }), rt, memo: Default::default() })
    }

    /// The object's bytes and ETag, or `None` if there is no such object.
    pub fn get(&self, name: &str) -> Result<Option<(Vec<u8>, Option<String>)>> {
        self.rt.block_on(self.bucket.get(name))
    }

    /// Like [`Store::get`], for an object that must exist.
    pub fn get_required(&self, name: &str) -> Result<Vec<u8>> {
        self.get(name)?.map(|(b, _)| b).ok_or_else(|| self.bucket.missing(name))
    }

    /// Writes `name` only if it does not exist.
    pub fn create(&self, name: &str, bytes: Vec<u8>) -> Result<Written> {
        self.rt.block_on(self.bucket.put(name, bytes, PutMode::Create))
    }

    /// Replaces `name` only if its ETag is still `etag`.
    pub fn update(&self, name: &str, bytes: Vec<u8>, etag: String) -> Result<Written> {
        let v = UpdateVersion { e_tag: Some(etag), version: None };
        self.rt.block_on(self.bucket.put(name, bytes, PutMode::Update(v)))
    }

    /// Creates every `(name, bytes, weight)` produced by `items` that does not exist yet:
    /// `items` runs on the calling thread (reading and sealing) while up to [`PARALLEL`]
    /// uploads are in flight on the runtime; `done` is called on the calling thread once
    /// per object written, with its weight, in completion order. An object that exists
    /// already is content-addressed, hence equal: a conflict counts as written.
    ///
    /// The first error (of `items` or of an upload) stops the transfer: no new upload
    /// starts, those in flight are dropped, and the error is returned once the uploading
    /// task has ended, so nothing of this call is still writing when it returns.
    pub fn create_all(
        &self,
        items: impl Iterator<Item = Result<(String, Vec<u8>, u64)>>,
        done: impl FnMut(u64),
    ) -> Result<()> {
        self.create_all_bounded(items, (PARALLEL, QUEUED), done)
    }

    /// [`Store::create_all`] with `(requests in flight, objects queued)` of its own
    /// (smaller for packs: the bound on memory is in objects).
    pub fn create_all_bounded(
        &self,
        items: impl Iterator<Item = Result<(String, Vec<u8>, u64)>>,
        bounds: (usize, usize),
        done: impl FnMut(u64),
    ) -> Result<()> {
        let bucket = self.bucket.clone();
        upload_pipeline(&self.rt, items, bounds, done, move |name, bytes| {
            let bucket = bucket.clone();
            async move { bucket.put(&name, bytes, PutMode::Create).await }
        })
    }

    /// Runs `job(bucket, jobs[i])` on the runtime for every job, `bounds.0` at a time,
    /// and calls `each(i, output)` on the calling thread as outputs arrive (in any
    /// order), at most `bounds.1` of them waiting. The first error (of a job or of
    /// `each`) stops the transfer, as in [`Store::create_all`].
    pub(crate) fn run_all<J, T, G, F>(
        &self,
        jobs: Vec<J>,
        bounds: (usize, usize),
        each: impl FnMut(usize, T) -> Result<()>,
        job: G,
    ) -> Result<()>
    where
        J: Send + 'static,
        T: Send + 'static,
        G: Fn(Arc<Bucket>, J) -> F + Send + Sync + 'static,
        F: std::future::Future<Output = Result<T>> + Send + 'static,
    {
        let bucket = self.bucket.clone();
        download_pipeline(&self.rt, jobs, bounds, each, move |j| job(bucket.clone(), j))
    }

    /// Names (without the remote's prefix) of the objects under `under`.
    pub fn list(&self, under: &str) -> Result<Vec<String>> {
        let b = &self.bucket;
        let p = b.path(under.trim_end_matches('/'));
        let metas: Vec<_> =
            self.rt.block_on(b.inner.list(Some(&p)).try_collect::<Vec<_>>()).map_err(|e| b.err("list", under, e))?;
        Ok(metas.into_iter().filter_map(|m| m.location.as_ref().strip_prefix(&b.prefix).map(str::to_string)).collect())
    }
}

/// An object as a listing shows it (for `remote prune`).
#[derive(Debug, Clone)]
pub struct Listed {
    /// Name without the remote's prefix.
    pub name: String,
    /// Stored size in bytes.
    pub size: u64,
    /// When the store last wrote it (its clock), nanoseconds since the epoch.
    pub modified_ns: i64,
}

impl Store {
    /// Like [`Store::list`], with each object's size and time of last write.
    pub fn list_meta(&self, under: &str) -> Result<Vec<Listed>> {
        let b = &self.bucket;
        let p = b.path(under.trim_end_matches('/'));
        let metas: Vec<_> =
            self.rt.block_on(b.inner.list(Some(&p)).try_collect::<Vec<_>>()).map_err(|e| b.err("list", under, e))?;
        Ok(metas
            .into_iter()
            .filter_map(|m| {
                let name = m.location.as_ref().strip_prefix(&b.prefix)?.to_string();
                let modified_ns = m.last_modified.timestamp_nanos_opt().unwrap_or(i64::MAX);
                Some(Listed { name, size: m.size, modified_ns })
            })
            .collect())
    }

    /// Deletes `name` (no error if it is gone already).
    pub fn delete(&self, name: &str) -> Result<()> {
        self.rt.block_on(self.bucket.delete(name))
    }

    /// Deletes every name of `names`, up to [`PARALLEL`] at a time; `done` is called once
    /// per deleted object with its index, in completion order. Stops at the first error.
    pub fn delete_all(&self, names: &[String], mut done: impl FnMut(usize) -> Result<()>) -> Result<()> {
        let b = &self.bucket;
        self.rt.block_on(async {
            let mut deletes = futures::stream::iter(names.iter().enumerate())
                .map(|(i, name)| async move { b.delete(name).await.map(|_| i) })
                .buffer_unordered(PARALLEL);
            while let Some(r) = deletes.next().await {
                done(r?)?;
            }
            Ok(())
        })
    }
}

impl Bucket {
    async fn delete(&self, name: &str) -> Result<()> {
        match self.inner.delete(&self.path(name)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.err("delete", name, e)),
        }
    }
}

/// The upload side of [`Store::create_all`], over any `put` (the unit tests count
/// requests in flight with their own). `items` and `done` run on the calling thread;
/// `put` runs on `rt`, [`PARALLEL`] at a time, fed by a channel of [`QUEUED`] objects.
fn upload_pipeline<P, F>(
    rt: &tokio::runtime::Runtime,
    items: impl Iterator<Item = Result<(String, Vec<u8>, u64)>>,
    (parallel, queued): (usize, usize),
    mut done: impl FnMut(u64),
    put: P,
) -> Result<()>
where
    P: Fn(String, Vec<u8>) -> F + Send + Sync + 'static,
    F: std::future::Future<Output = Result<Written>> + Send + 'static,
{
    let (queue, rx) = tokio::sync::mpsc::channel::<(String, Vec<u8>, u64)>(queued);
    // One result per object: a few bytes each, and the task stops at the first error.
    let (results, mut finished) = tokio::sync::mpsc::unbounded_channel::<Result<u64>>();
    let task = rt.spawn(async move {
        let mut uploads = tokio_stream(rx)
            .map(|(name, bytes, weight)| {
                let f = put(name, bytes);
                async move { f.await.map(|_| weight) }
            })
            .buffer_unordered(parallel);
        while let Some(r) = uploads.next().await {
            let failed = r.is_err();
            if results.send(r).is_err() || failed {
                break;
            }
        }
    });
    let mut outcome = Ok(());
    let mut report = |r: Result<u64>, outcome: &mut Result<()>| match r {
        Ok(w) if outcome.is_ok() => done(w),
        Ok(_) => {}
        Err(e) => {
            if outcome.is_ok() {
                *outcome = Err(e);
            }
        }
    };
    for item in items {
        while let Ok(r) = finished.try_recv() {
            report(r, &mut outcome);
        }
        if outcome.is_err() {
            break;
        }
        match item {
            // Waits while the queue is full: the bound on memory.
            Ok(item) => {
                if queue.blocking_send(item).is_err() {
                    break; // the task stopped: its error is in `finished`
                }
            }
            Err(e) => {
                outcome = Err(e);
                break;
            }
        }
    }
    drop(queue);
    if outcome.is_err() {
        task.abort();
    }
    while let Some(r) = finished.blocking_recv() {
        report(r, &mut outcome);
    }
    // The task has dropped its sender: it is over (or aborted); wait for it to be gone.
    let _ = rt.block_on(task);
    outcome
}

/// The download side of [`Store::run_all`], over any `get`.
fn download_pipeline<J, T, G, F>(
    rt: &tokio::runtime::Runtime,
    names: Vec<J>,
    (parallel, queued): (usize, usize),
    mut each: impl FnMut(usize, T) -> Result<()>,
    get: G,
) -> Result<()>
where
    J: Send + 'static,
    T: Send + 'static,
    G: Fn(J) -> F + Send + Sync + 'static,
    F: std::future::Future<Output = Result<T>> + Send + 'static,
{
    let (arrived, mut rx) = tokio::sync::mpsc::channel::<Result<(usize, T)>>(queued);
    let task = rt.spawn(async move {
        let mut downloads = futures::stream::iter(names.into_iter().enumerate())
            .map(|(i, name)| {
                let f = get(name);
                async move { f.await.map(|b| (i, b)) }
            })
            .buffer_unordered(parallel);
        while let Some(r) = downloads.next().await {
            let failed = r.is_err();
            // Waits while the queue is full: the bound on memory.
            if arrived.send(r).await.is_err() || failed {
                break;
            }
        }
    });
    let mut outcome = Ok(());
    while let Some(r) = rx.blocking_recv() {
        if let Err(e) = r.and_then(|(i, b)| each(i, b)) {
            outcome = Err(e);
            break;
        }
    }
    if outcome.is_err() {
        task.abort();
    }
    drop(rx);
    let _ = rt.block_on(task);
    outcome
}

/// A receiver as a stream (what `tokio-stream`'s wrapper does, without the crate).
fn tokio_stream<T>(mut rx: tokio::sync::mpsc::Receiver<T>) -> impl futures::Stream<Item = T> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::sync::atomic::Ordering::SeqCst;

    use super::*;

    #[test]
    fn urls_parse_and_bad_ones_are_refused() {
        let u = RemoteUrl::parse("s3://b/some/prefix/", Some("http://127.0.0.1:9000")).unwrap();
        assert_eq!((u.bucket.as_str(), u.prefix.as_str()), ("b", "some/prefix"));
        assert_eq!(u.url(), "s3://b/some/prefix");
        assert_eq!(RemoteUrl::parse("s3://b", None).unwrap().prefix, "");
        for bad in ["http://b/x", "s3://", "s3:///x", "s3://b/a//c", "s3://b/../x", "s3://b c/x"] {
            assert!(RemoteUrl::parse(bad, None).is_err(), "{bad}");
        }
        assert!(RemoteUrl::parse("s3://b", Some("ftp://x")).is_err());
    }

    #[test]
    fn conditional_writes_let_exactly_one_writer_win() {
        let s = Store::new(Arc::new(object_store::memory::InMemory::new()), "p", "mem".into()).unwrap();
        assert_eq!(s.get("ref").unwrap(), None);
        assert!(matches!(s.create("ref", b"a".to_vec()).unwrap(), Written::Done(_)));
        assert_eq!(s.create("ref", b"b".to_vec()).unwrap(), Written::Conflict);
        let (b, etag) = s.get("ref").unwrap().unwrap();
        assert_eq!(b, b"a");
        let etag = etag.unwrap();
        assert!(matches!(s.update("ref", b"c".to_vec(), etag.clone()).unwrap(), Written::Done(_)));
        assert_eq!(s.update("ref", b"d".to_vec(), etag).unwrap(), Written::Conflict);
        assert_eq!(s.get("ref").unwrap().unwrap().0, b"c");
        s.create("data/x", vec![1]).unwrap();
        assert_eq!(s.list("data/").unwrap(), vec!["data/x".to_string()]);
    }

    /// An `InMemory` store whose creates fail as VersityGW's do when the object exists
    /// (412, connection closed mid-body: a failed send); with `mode` [`LOSE`], a create
    /// writes and then loses its answer; with [`FAIL`], it fails and writes nothing.
    #[derive(Debug, Default)]
    struct DroppedAnswers {
        inner: object_store::memory::InMemory,
        mode: AtomicUsize,
    }

    const LOSE: usize = 1;
    const FAIL: usize = 2;

    impl std::fmt::Display for DroppedAnswers {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "DroppedAnswers")
        }
    }

    fn send_failed() -> object_store::Error {
        object_store::Error::Generic { store: "S3", source: "error sending request: connection closed".into() }
    }

    #[async_trait::async_trait]
    impl ObjectStore for DroppedAnswers {
        async fn put_opts(
            &self,
            location: &ObjPath,
            payload: PutPayload,
            opts: PutOptions,
        ) -> object_store::Result<object_store::PutResult> {
            if matches!(opts.mode, PutMode::Create) {
                if self.inner.head(location).await.is_ok() {
                    return Err(send_failed());
                }
                match self.mode.load(SeqCst) {
                    LOSE => {
                        self.inner.put_opts(location, payload, opts).await?;
                        return Err(send_failed());
                    }
                    FAIL => return Err(send_failed()),
                    _ => {}
                }
            }
            self.inner.put_opts(location, payload, opts).await
        }
        async fn put_multipart_opts(
            &self,
            location: &ObjPath,
            opts: object_store::PutMultipartOptions,
        ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
            self.inner.put_multipart_opts(location, opts).await
        }
        async fn get_opts(
            &self,
            location: &ObjPath,
            options: object_store::GetOptions,
        ) -> object_store::Result<object_store::GetResult> {
            self.inner.get_opts(location, options).await
        }
        async fn delete(&self, location: &ObjPath) -> object_store::Result<()> {
            self.inner.delete(location).await
        }
        fn list(
            &self,
            prefix: Option<&ObjPath>,
        ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>> {
            self.inner.list(prefix)
        }
        async fn list_with_delimiter(
            &self,
            prefix: Option<&ObjPath>,
        ) -> object_store::Result<object_store::ListResult> {
            self.inner.list_with_delimiter(prefix).await
        }
        async fn copy(&self, from: &ObjPath, to: &ObjPath) -> object_store::Result<()> {
            self.inner.copy(from, to).await
        }
        async fn copy_if_not_exists(&self, from: &ObjPath, to: &ObjPath) -> object_store::Result<()> {
            self.inner.copy_if_not_exists(from, to).await
        }
    }

    /// A create whose answer is lost is judged by what the bucket then holds: its own
    /// bytes are written (a re-created content-addressed object, or a write whose answer
    /// dropped), other bytes are a conflict (a lock another writer holds), nothing is
    /// the error. create_all counts an existing object as written and goes on.
    #[test]
    fn a_create_without_an_answer_is_judged_by_what_the_bucket_holds() {
        let mem = Arc::new(DroppedAnswers::default());
        let s = Store::new(mem.clone(), "p", "flaky".into()).unwrap();
        assert!(matches!(s.create("meta/a", b"piece".to_vec()).unwrap(), Written::Done(_)));
        assert!(matches!(s.create("meta/a", b"piece".to_vec()).unwrap(), Written::Done(_)), "the same bytes");
        assert_eq!(s.create("meta/a", b"other".to_vec()).unwrap(), Written::Conflict, "another writer's");
        mem.mode.store(LOSE, SeqCst);
        assert!(matches!(s.create("lock", b"mine".to_vec()).unwrap(), Written::Done(_)), "written, answer lost");
        assert_eq!(s.get("lock").unwrap().unwrap().0, b"mine");
        mem.mode.store(FAIL, SeqCst);
        assert!(s.create("nothing", b"x".to_vec()).is_err(), "failed and left nothing: the error stands");
        assert_eq!(s.get("nothing").unwrap(), None);
        mem.mode.store(0, SeqCst);
        let items = ["meta/a", "meta/b"].into_iter().map(|n| Ok((n.to_string(), b"piece".to_vec(), 1)));
        let mut written = 0;
        s.create_all(items, |w| written += w).unwrap();
        assert_eq!(written, 2);
        assert_eq!(s.list("meta/").unwrap().len(), 2);
    }

    /// Counts requests: in flight now, most in flight at once, started, finished.
    #[derive(Default)]
    struct Requests {
        now: AtomicUsize,
        most: AtomicUsize,
        started: AtomicUsize,
        finished: AtomicUsize,
    }

    impl Requests {
        /// One request: fails if it is the `fail_at`-th started, else takes a few ms.
        async fn run(&self, fail_at: usize) -> Result<()> {
            /// Leaves `now` when the request ends or is dropped (a transfer that stops).
            struct InFlight<'a>(&'a AtomicUsize);
            impl Drop for InFlight<'_> {
                fn drop(&mut self) {
                    self.0.fetch_sub(1, SeqCst);
                }
            }
            let n = self.started.fetch_add(1, SeqCst) + 1;
            let now = self.now.fetch_add(1, SeqCst) + 1;
            let _in_flight = InFlight(&self.now);
            self.most.fetch_max(now, SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(3)).await;
            self.finished.fetch_add(1, SeqCst);
            if n == fail_at {
                return Err(Error::io("request", std::io::Error::other("injected failure")));
            }
            Ok(())
        }
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread().worker_threads(WORKERS).enable_all().build().unwrap()
    }

    /// Uploads run PARALLEL at a time, and the producer never gets further ahead of the
    /// finished uploads than the queue, the requests in flight and its own item: the
    /// memory bound of a push, whatever the vault's size.
    /// (Chunk objects, and packs with their own smaller bounds.)
    #[test]
    fn uploads_run_in_parallel_with_a_bounded_queue() {
        for (parallel, queued) in [(PARALLEL, QUEUED), (PACK_PARALLEL, PACK_QUEUED)] {
            let rt = runtime();
            let req = Arc::new(Requests::default());
            let produced = AtomicUsize::new(0);
            let mut reported = 0u64;
            let items = (0..200u64).map(|i| {
                let ahead = produced.fetch_add(1, SeqCst) + 1 - req.finished.load(SeqCst);
                assert!(ahead <= queued + parallel + 1, "{ahead} objects held at once");
                Ok((format!("data/{i}"), vec![0u8; 16], i))
            });
            let r = req.clone();
            upload_pipeline(
                &rt,
                items,
                (parallel, queued),
                |w| reported += w,
                move |_, _| {
                    let r = r.clone();
                    async move { r.run(0).await.map(|_| Written::Done(None)) }
                },
            )
            .unwrap();
            assert_eq!(reported, (0..200).sum::<u64>(), "every object reported once");
            assert_eq!(req.started.load(SeqCst), 200);
            let most = req.most.load(SeqCst);
            assert!(most > 1 && most <= parallel, "{most} requests in flight at most");
        }
    }

    /// An upload that fails in the middle stops the transfer: the error is returned,
    /// no new upload starts (at most the ones already queued or in flight), nothing is
    /// still running when the call returns, and later objects are never reported.
    #[test]
    fn a_failed_upload_stops_the_transfer() {
        let rt = runtime();
        let req = Arc::new(Requests::default());
        let r = req.clone();
        let mut reported = 0;
        let items = (0..1000u64).map(|i| Ok((format!("data/{i}"), vec![0u8; 16], 1)));
        let err = upload_pipeline(
            &rt,
            items,
            (PARALLEL, QUEUED),
            |_| reported += 1,
            move |_, _| {
                let r = r.clone();
                async move { r.run(50).await.map(|_| Written::Done(None)) }
            },
        )
        .unwrap_err();
        assert!(err.to_string().contains("injected failure"), "{err}");
        let started = req.started.load(SeqCst);
        assert!(started < 50 + QUEUED + PARALLEL + 2, "{started} uploads started");
        assert_eq!(req.now.load(SeqCst), 0, "an upload still runs after the call returned");
        assert!(reported < 50, "{reported} reported");

        // An error of the producer (reading or sealing) stops it too.
        let req = Arc::new(Requests::default());
        let r = req.clone();
        let items = (0..1000u64).map(|i| {
            if i == 40 {
                return Err(Error::damaged("unreadable chunk"));
            }
            Ok((format!("data/{i}"), vec![0u8; 16], 1))
        });
        let err = upload_pipeline(
            &rt,
            items,
            (PARALLEL, QUEUED),
            |_| {},
            move |_, _| {
                let r = r.clone();
                async move { r.run(0).await.map(|_| Written::Done(None)) }
            },
        )
        .unwrap_err();
        assert!(matches!(err, Error::Damaged { .. }), "{err}");
        assert!(req.started.load(SeqCst) <= 40);
        assert_eq!(req.now.load(SeqCst), 0);
    }

    /// Downloads run PARALLEL at a time and arrive in any order, each index once; a
    /// failed download or a failure of the consumer stops the transfer.
    #[test]
    fn downloads_run_in_parallel_and_stop_at_the_first_error() {
        let rt = runtime();
        let names: Vec<String> = (0..200).map(|i| format!("data/{i}")).collect();
        for fail_at in [0, 60] {
            let req = Arc::new(Requests::default());
            let r = req.clone();
            let mut seen = vec![false; names.len()];
            let out = download_pipeline(
                &rt,
                names.clone(),
                (PARALLEL, QUEUED),
                |i, b| {
                    assert!(!std::mem::replace(&mut seen[i], true), "index {i} twice");
                    assert_eq!(b, names[i].as_bytes());
                    Ok(())
                },
                move |name| {
                    let r = r.clone();
                    async move { r.run(fail_at).await.map(|_| name.into_bytes()) }
                },
            );
            let most = req.most.load(SeqCst);
            assert!(most > 1 && most <= PARALLEL, "{most} requests in flight at most");
            assert_eq!(req.now.load(SeqCst), 0);
            if fail_at == 0 {
                out.unwrap();
                assert!(seen.iter().all(|s| *s));
            } else {
                assert!(out.is_err());
                assert!(req.started.load(SeqCst) < fail_at + QUEUED + PARALLEL + 2);
            }
        }
        // The consumer's error (a chunk that fails authentication) stops it too.
        let req = Arc::new(Requests::default());
        let r = req.clone();
        let mut n = 0;
        let out = download_pipeline(
            &rt,
            names,
            (PARALLEL, QUEUED),
            |_, _| {
                n += 1;
                if n == 30 {
                    return Err(Error::damaged("tampered"));
                }
                Ok(())
            },
            move |name| {
                let r = r.clone();
                async move { r.run(0).await.map(|_| name.into_bytes()) }
            },
        );
        assert!(matches!(out, Err(Error::Damaged { .. })));
        assert!(req.started.load(SeqCst) < 30 + QUEUED + PARALLEL + 2);
        assert_eq!(req.now.load(SeqCst), 0);
    }
}
