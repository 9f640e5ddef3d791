//! The bucket as a blocking key -> bytes store with the two writes replication needs:
//! create-only (`If-None-Match: *`) and update-if-unchanged (`If-Match: ETag`).
//! `object_store` talks S3 (signing, retries); a small current-thread tokio
//! runtime owned here drives it, so no async reaches the rest of the library.

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
pub struct Store {
    inner: Arc<dyn ObjectStore>,
    prefix: String,
    rt: tokio::runtime::Runtime,
    label: String,
}

/// How many transfers run at once.
pub const PARALLEL: usize = 8;

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
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::io("cannot start the network runtime", e))?;
        let prefix = if prefix.is_empty() { String::new() } else { format!("{prefix}/") };
        Ok(Store { inner, prefix, rt, label })
    }

    fn path(&self, name: &str) -> ObjPath {
        ObjPath::from(format!("{}{name}", self.prefix))
    }

    fn err(&self, what: &str, name: &str, e: object_store::Error) -> Error {
        Error::Io { context: format!("remote {}: cannot {what} {name}", self.label), source: std::io::Error::other(e) }
    }

    /// The object's bytes and ETag, or `None` if there is no such object.
    pub fn get(&self, name: &str) -> Result<Option<(Vec<u8>, Option<String>)>> {
        self.rt.block_on(self.get_async(name))
    }

    async fn get_async(&self, name: &str) -> Result<Option<(Vec<u8>, Option<String>)>> {
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

    /// Like [`Store::get`], for an object that must exist.
    pub fn get_required(&self, name: &str) -> Result<Vec<u8>> {
        self.get(name)?
            .map(|(b, _)| b)
            .ok_or_else(|| Error::damaged(format!("remote {}: object {name} is missing", self.label)))
    }

    /// Writes `name` only if it does not exist.
    pub fn create(&self, name: &str, bytes: Vec<u8>) -> Result<Written> {
        self.rt.block_on(self.put_async(name, bytes, PutMode::Create))
    }

    /// Replaces `name` only if its ETag is still `etag`.
    pub fn update(&self, name: &str, bytes: Vec<u8>, etag: String) -> Result<Written> {
        let v = UpdateVersion { e_tag: Some(etag), version: None };
        self.rt.block_on(self.put_async(name, bytes, PutMode::Update(v)))
    }

    async fn put_async(&self, name: &str, bytes: Vec<u8>, mode: PutMode) -> Result<Written> {
        let opts = PutOptions { mode, ..Default::default() };
        match self.inner.put_opts(&self.path(name), PutPayload::from(bytes), opts).await {
            Ok(r) => Ok(Written::Done(r.e_tag)),
            Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {
                Ok(Written::Conflict)
            }
            Err(e) => Err(self.err("write", name, e)),
        }
    }

    /// Creates every `(name, bytes, weight)` produced by `items` that does not exist yet,
    /// up to [`PARALLEL`] at a time; `done` is called once per object with its weight, in
    /// completion order. An object that exists already is content-addressed, hence equal.
    pub fn create_all(
        &self,
        items: impl Iterator<Item = Result<(String, Vec<u8>, u64)>>,
        mut done: impl FnMut(u64),
    ) -> Result<()> {
        self.rt.block_on(async {
            let mut uploads = futures::stream::iter(items)
                .map(|item| async move {
                    let (name, bytes, weight) = item?;
                    self.put_async(&name, bytes, PutMode::Create).await.map(|_| weight)
                })
                .buffer_unordered(PARALLEL);
            while let Some(n) = uploads.next().await {
                done(n?);
            }
            Ok(())
        })
    }

    /// Fetches every name of `names`, up to [`PARALLEL`] at a time, calling `each` with
    /// the name's index and bytes as they arrive (in any order). A missing object is damage.
    pub fn get_all(&self, names: &[String], mut each: impl FnMut(usize, Vec<u8>) -> Result<()>) -> Result<()> {
        self.rt.block_on(async {
            let mut downloads = futures::stream::iter(names.iter().enumerate())
                .map(|(i, name)| async move {
                    match self.get_async(name).await? {
                        Some((b, _)) => Ok((i, b)),
                        None => Err(Error::damaged(format!("remote {}: object {name} is missing", self.label))),
                    }
                })
                .buffer_unordered(PARALLEL);
            while let Some(r) = downloads.next().await {
                let (i, b) = r?;
                each(i, b)?;
            }
            Ok(())
        })
    }

    /// Names (without the remote's prefix) of the objects under `under`.
    pub fn list(&self, under: &str) -> Result<Vec<String>> {
        let p = self.path(under.trim_end_matches('/'));
        let metas: Vec<_> = self
            .rt
            .block_on(self.inner.list(Some(&p)).try_collect::<Vec<_>>())
            .map_err(|e| self.err("list", under, e))?;
        Ok(metas
            .into_iter()
            .filter_map(|m| m.location.as_ref().strip_prefix(&self.prefix).map(str::to_string))
            .collect())
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
        let p = self.path(under.trim_end_matches('/'));
        let metas: Vec<_> = self
            .rt
            .block_on(self.inner.list(Some(&p)).try_collect::<Vec<_>>())
            .map_err(|e| self.err("list", under, e))?;
        Ok(metas
            .into_iter()
            .filter_map(|m| {
                let name = m.location.as_ref().strip_prefix(&self.prefix)?.to_string();
                let modified_ns = m.last_modified.timestamp_nanos_opt().unwrap_or(i64::MAX);
                Some(Listed { name, size: m.size, modified_ns })
            })
            .collect())
    }

    /// Deletes `name` (no error if it is gone already).
    pub fn delete(&self, name: &str) -> Result<()> {
        self.rt.block_on(self.delete_async(name))
    }

    async fn delete_async(&self, name: &str) -> Result<()> {
        match self.inner.delete(&self.path(name)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.err("delete", name, e)),
        }
    }

    /// Deletes every name of `names`, up to [`PARALLEL`] at a time; `done` is called once
    /// per deleted object with its index, in completion order. Stops at the first error.
    pub fn delete_all(&self, names: &[String], mut done: impl FnMut(usize) -> Result<()>) -> Result<()> {
        self.rt.block_on(async {
            let mut deletes = futures::stream::iter(names.iter().enumerate())
                .map(|(i, name)| async move { self.delete_async(name).await.map(|_| i) })
                .buffer_unordered(PARALLEL);
            while let Some(r) = deletes.next().await {
                done(r?)?;
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
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
}
