//! `sqlvault_vault`: create and open a vault (passphrase, key file, raw key; with
//! `sqlvault_vault_open_with`, exclusive or with a busy timeout), close and
//! free it, and the calls on its tree by path: stat, exists, mkdir, list, remove,
//! rename, whole-file read and write, truncate, tags and find, records, snapshots.
//!
//! Every `unsafe` block here reads the caller's arguments under the contract of the
//! module docs of `capi`.

use std::ffi::c_char;
use std::sync::Arc;

use super::error::{call, CResult, Failure, SQLVAULT_ERR_BUFFER_TOO_SMALL};
use super::result::sqlvault_result;
use super::values::{
    buffer, bytes, give, need, node_kind, opt_text, put, put_opt, secret, sqlvault_attr, sqlvault_bytes,
    sqlvault_restore_summary, sqlvault_str, sqlvault_value, text, texts, to_tags, values,
};
use crate::types::{SnapshotInfo, Tag, TagValue};
use crate::{OpenOptions, Vault, VaultError, VaultOptions, VaultSecret};

/// Secret kind for `sqlvault_vault_open_with`: a passphrase (UTF-8 bytes).
pub const SQLVAULT_SECRET_PASSPHRASE: i32 = 1;
/// Secret kind for `sqlvault_vault_open_with`: the path of a 32-byte key file (UTF-8).
pub const SQLVAULT_SECRET_KEY_FILE: i32 = 2;
/// Secret kind for `sqlvault_vault_open_with`: a raw 32-byte key.
pub const SQLVAULT_SECRET_KEY: i32 = 3;

/// Vault open flag (`sqlvault_vault_open_with`): hold the vault alone while it is open,
/// for a bulk import. Writes go through a rollback journal, each page written once (no
/// WAL, no checkpoint), and every commit is synced. The open fails with
/// `SQLVAULT_ERR_OTHER` / `-EBUSY` if the vault is open anywhere else; while it is open,
/// every other open (another process, another handle) waits for its busy timeout and
/// then fails with `-EBUSY`. For large writes: many small commits run slower than in
/// the default mode.
pub const SQLVAULT_VAULT_EXCLUSIVE: u32 = 1;

/// An open vault. Create or open one with `sqlvault_vault_create*` /
/// `sqlvault_vault_open*`; close it with `sqlvault_vault_close` and free the handle
/// with `sqlvault_vault_free`. Use it from any number of threads at once.
pub struct sqlvault_vault {
    pub(crate) inner: Arc<Vault>,
}

/// The vault behind a handle.
///
/// # Safety
/// `v` is NULL or a live handle.
pub(crate) unsafe fn vault<'a>(v: *const sqlvault_vault) -> CResult<&'a Vault> {
    unsafe { v.as_ref() }.map(|h| &*h.inner).ok_or_else(|| Failure::null("the vault handle"))
}

/// Runs `open` (a create or open) and hands the vault out through `out`.
unsafe fn open_into(
    out: *mut *mut sqlvault_vault,
    open: impl FnOnce() -> CResult<Result<Arc<Vault>, VaultError>>,
) -> i32 {
    call(|| {
        need(out, "out")?;
        let v = open()??;
        unsafe { give(out, sqlvault_vault { inner: v }, "out")? };
        Ok(0)
    })
}

/// Creates a new vault file at `path`, unlocked by `passphrase` (UTF-8 bytes; the
/// library's copy is zeroized), with the default key derivation cost (about half a
/// second). On success `*out` is the open vault.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_vault_create(
    path: *const c_char,
    path_len: usize,
    passphrase: *const u8,
    passphrase_len: usize,
    out: *mut *mut sqlvault_vault,
) -> i32 {
    unsafe {
        open_into(out, || {
            let path = text(path, path_len, "path")?.to_owned();
            let mut p = secret(passphrase, passphrase_len, "passphrase")?;
            Ok(Vault::create(path, std::mem::take(&mut *p)))
        })
    }
}

/// `sqlvault_vault_create` with the passphrase's Argon2id cost: `kdf_memory_kib`
/// KiB and `kdf_iterations` passes (0 keeps the default). Tests use a cheap one.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_vault_create_with_kdf(
    path: *const c_char,
    path_len: usize,
    passphrase: *const u8,
    passphrase_len: usize,
    kdf_memory_kib: i32,
    kdf_iterations: i32,
    out: *mut *mut sqlvault_vault,
) -> i32 {
    unsafe {
        open_into(out, || {
            let path = text(path, path_len, "path")?.to_owned();
            let mut p = secret(passphrase, passphrase_len, "passphrase")?;
            Ok(Vault::create_with_kdf(path, std::mem::take(&mut *p), kdf_memory_kib, kdf_iterations))
        })
    }
}

/// Creates a new vault file at `path` unlocked by the 32-byte key file at `key_file`.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_vault_create_with_key_file(
    path: *const c_char,
    path_len: usize,
    key_file: *const c_char,
    key_file_len: usize,
    out: *mut *mut sqlvault_vault,
) -> i32 {
    unsafe {
        open_into(out, || {
            let path = text(path, path_len, "path")?.to_owned();
            let key_file = text(key_file, key_file_len, "key_file")?.to_owned();
            Ok(Vault::create_with_key_file(path, key_file))
        })
    }
}

/// Creates a new vault file at `path` unlocked by the raw key `key` (exactly 32
/// bytes; the library's copy is zeroized). A key file holding the same bytes opens it.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_vault_create_with_key(
    path: *const c_char,
    path_len: usize,
    key: *const u8,
    key_len: usize,
    out: *mut *mut sqlvault_vault,
) -> i32 {
    unsafe {
        open_into(out, || {
            let path = text(path, path_len, "path")?.to_owned();
            let mut k = secret(key, key_len, "key")?;
            Ok(Vault::create_with_key(path, std::mem::take(&mut *k)))
        })
    }
}

/// Opens the vault at `path` with `passphrase` (UTF-8 bytes). A wrong one fails with
/// `SQLVAULT_ERR_WRONG_SECRET` (`-EACCES`); a damaged vault with `SQLVAULT_ERR_DAMAGED`.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_vault_open(
    path: *const c_char,
    path_len: usize,
    passphrase: *const u8,
    passphrase_len: usize,
    out: *mut *mut sqlvault_vault,
) -> i32 {
    unsafe {
        open_into(out, || {
            let path = text(path, path_len, "path")?.to_owned();
            let mut p = secret(passphrase, passphrase_len, "passphrase")?;
            Ok(Vault::open(path, std::mem::take(&mut *p)))
        })
    }
}

/// Opens the vault at `path` with the key file at `key_file`.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_vault_open_with_key_file(
    path: *const c_char,
    path_len: usize,
    key_file: *const c_char,
    key_file_len: usize,
    out: *mut *mut sqlvault_vault,
) -> i32 {
    unsafe {
        open_into(out, || {
            let path = text(path, path_len, "path")?.to_owned();
            let key_file = text(key_file, key_file_len, "key_file")?.to_owned();
            Ok(Vault::open_with_key_file(path, key_file))
        })
    }
}

/// Opens the vault at `path` with a raw 32-byte key.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_vault_open_with_key(
    path: *const c_char,
    path_len: usize,
    key: *const u8,
    key_len: usize,
    out: *mut *mut sqlvault_vault,
) -> i32 {
    unsafe {
        open_into(out, || {
            let path = text(path, path_len, "path")?.to_owned();
            let mut k = secret(key, key_len, "key")?;
            Ok(Vault::open_with_key(path, std::mem::take(&mut *k)))
        })
    }
}

/// Opens the vault at `path` with a secret of kind `secret_kind` (`SQLVAULT_SECRET_*`:
/// passphrase bytes, key file path or raw key in `secret`/`secret_len`), the
/// `SQLVAULT_VAULT_*` flags `flags` (0 or `SQLVAULT_VAULT_EXCLUSIVE`) and a busy timeout:
/// how long the open and later writes wait for a lock another connection holds before
/// failing with `-EBUSY`, in milliseconds (negative: the default, 60 s). Unknown kinds
/// or flags fail with `-EINVAL`.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_vault_open_with(
    path: *const c_char,
    path_len: usize,
    secret_kind: i32,
    secret: *const u8,
    secret_len: usize,
    flags: u32,
    busy_timeout_ms: i64,
    out: *mut *mut sqlvault_vault,
) -> i32 {
    unsafe {
        open_into(out, || {
            let path = text(path, path_len, "path")?.to_owned();
            if flags & !SQLVAULT_VAULT_EXCLUSIVE != 0 {
                return Err(Failure::invalid(format!("unknown vault open flags {flags:#x}")));
            }
            let secret = match secret_kind {
                SQLVAULT_SECRET_PASSPHRASE => {
                    let mut p = self::secret(secret, secret_len, "passphrase")?;
                    VaultSecret::Passphrase { passphrase: std::mem::take(&mut *p) }
                }
                SQLVAULT_SECRET_KEY_FILE => {
                    VaultSecret::KeyFile { path: text(secret.cast(), secret_len, "key file")?.to_owned() }
                }
                SQLVAULT_SECRET_KEY => {
                    let mut k = self::secret(secret, secret_len, "key")?;
                    VaultSecret::Key { key: std::mem::take(&mut *k) }
                }
                other => return Err(Failure::invalid(format!("unknown secret kind {other}"))),
            };
            let options = VaultOptions {
                exclusive: flags & SQLVAULT_VAULT_EXCLUSIVE != 0,
                busy_timeout_ms: (busy_timeout_ms >= 0).then_some(busy_timeout_ms),
            };
            Ok(Vault::open_with(path, secret, options))
        })
    }
}

/// Converts the format-1 (SQLCipher) vault at `path` to format 2 in place, unlocked by
/// `passphrase` (as `sqlvault upgrade`: blocking; safe to kill, a rerun finishes the
/// job). Returns 1 when it converted, 0 when the vault was already format 2, or a
/// negative error code (`SQLVAULT_ERR_BUSY` while the vault is open anywhere).
#[no_mangle]
pub unsafe extern "C" fn sqlvault_upgrade(
    path: *const c_char,
    path_len: usize,
    passphrase: *const u8,
    passphrase_len: usize,
) -> i32 {
    call(|| {
        let path = unsafe { text(path, path_len, "path")? };
        let p = unsafe { secret(passphrase, passphrase_len, "passphrase")? };
        let p = std::str::from_utf8(&p).map_err(|_| Failure::invalid("the passphrase is not valid UTF-8"))?;
        upgrade(path, &sqlvault::Secret::passphrase(p))
    })
}

/// [`sqlvault_upgrade`] with the key file at `key_file`.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_upgrade_with_key_file(
    path: *const c_char,
    path_len: usize,
    key_file: *const c_char,
    key_file_len: usize,
) -> i32 {
    call(|| {
        let path = unsafe { text(path, path_len, "path")? };
        let key_file = unsafe { text(key_file, key_file_len, "key_file")? };
        let secret = sqlvault::Secret::from_key_file(std::path::Path::new(key_file))?;
        upgrade(path, &secret)
    })
}

fn upgrade(path: &str, secret: &sqlvault::Secret) -> CResult<i32> {
    let r = sqlvault::secrets::upgrade(path, secret, &sqlvault::Ops::default())?;
    Ok(i32::from(r.converted))
}

/// Closes the vault, reporting any failure (checkpointing its log into the file when
/// nothing else uses it). Files still open keep working until closed; other calls on
/// the handle fail with `SQLVAULT_ERR_CLOSED` (`-EBADF`). A second close does nothing.
/// The handle stays allocated until `sqlvault_vault_free`.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_vault_close(v: *mut sqlvault_vault) -> i32 {
    call(|| {
        unsafe { vault(v)? }.close()?;
        Ok(0)
    })
}

/// Frees the handle (NULL is fine), closing the vault first if it is open (errors are
/// lost then: call `sqlvault_vault_close` to see them). Call it exactly once per handle.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_vault_free(v: *mut sqlvault_vault) {
    call(|| {
        if !v.is_null() {
            // SAFETY: `v` came from `give` and is freed once.
            let h = unsafe { Box::from_raw(v) };
            let _ = h.inner.close();
        }
        Ok(0)
    });
}

/// Makes everything committed so far durable on disk.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_vault_sync(v: *mut sqlvault_vault) -> i32 {
    call(|| {
        unsafe { vault(v)? }.sync()?;
        Ok(0)
    })
}

/// Attributes of `path` (following a final symlink) into `*out`.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_stat(
    v: *mut sqlvault_vault,
    path: *const c_char,
    path_len: usize,
    out: *mut sqlvault_attr,
) -> i32 {
    call(|| unsafe {
        need(out, "out")?;
        let s = vault(v)?.stat(text(path, path_len, "path")?.to_owned())?;
        put(out, s.into(), "out")?;
        Ok(0)
    })
}

/// Attributes of `path` itself, even if it is a symlink, into `*out`.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_lstat(
    v: *mut sqlvault_vault,
    path: *const c_char,
    path_len: usize,
    out: *mut sqlvault_attr,
) -> i32 {
    call(|| unsafe {
        need(out, "out")?;
        let s = vault(v)?.lstat(text(path, path_len, "path")?.to_owned())?;
        put(out, s.into(), "out")?;
        Ok(0)
    })
}

/// 1 if `path` exists, 0 if not, or a negative errno.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_exists(v: *mut sqlvault_vault, path: *const c_char, path_len: usize) -> i32 {
    call(|| unsafe { Ok(i32::from(vault(v)?.exists(text(path, path_len, "path")?.to_owned())?)) })
}

/// Creates the directory `path`; its parent must exist (`-ENOENT`), `path` must not
/// (`-EEXIST`).
#[no_mangle]
pub unsafe extern "C" fn sqlvault_mkdir(v: *mut sqlvault_vault, path: *const c_char, path_len: usize) -> i32 {
    call(|| unsafe {
        vault(v)?.mkdir(text(path, path_len, "path")?.to_owned())?;
        Ok(0)
    })
}

/// Creates `path` and any missing parents; fine if it already is a directory
/// (`-EEXIST` if it is something else, as `mkdir -p` says; `-ENOTDIR` if a parent is a
/// file).
#[no_mangle]
pub unsafe extern "C" fn sqlvault_mkdirs(v: *mut sqlvault_vault, path: *const c_char, path_len: usize) -> i32 {
    call(|| unsafe {
        vault(v)?.mkdirs(text(path, path_len, "path")?.to_owned())?;
        Ok(0)
    })
}

/// The entries of directory `path` in name order, as a result with columns
/// `name` (TEXT) and `kind` (INTEGER, a `SQLVAULT_NODE_*`), into `*out`.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_list(
    v: *mut sqlvault_vault,
    path: *const c_char,
    path_len: usize,
    out: *mut *mut sqlvault_result,
) -> i32 {
    call(|| unsafe {
        need(out, "out")?;
        let entries = vault(v)?.list(text(path, path_len, "path")?.to_owned())?;
        let mut r = sqlvault_result::new([("name", Some("TEXT")), ("kind", Some("INTEGER"))]);
        for e in entries {
            r.text(e.name.as_bytes());
            r.integer(node_kind(e.kind).into());
        }
        give(out, r, "out")?;
        Ok(0)
    })
}

/// Removes the file or symlink `path` (`-EISDIR` for a directory).
#[no_mangle]
pub unsafe extern "C" fn sqlvault_remove_file(v: *mut sqlvault_vault, path: *const c_char, path_len: usize) -> i32 {
    call(|| unsafe {
        vault(v)?.remove_file(text(path, path_len, "path")?.to_owned())?;
        Ok(0)
    })
}

/// Removes the empty directory `path` (`-ENOTEMPTY` if it is not).
#[no_mangle]
pub unsafe extern "C" fn sqlvault_remove_dir(v: *mut sqlvault_vault, path: *const c_char, path_len: usize) -> i32 {
    call(|| unsafe {
        vault(v)?.remove_dir(text(path, path_len, "path")?.to_owned())?;
        Ok(0)
    })
}

/// Removes the directory `path` and everything under it.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_remove_all(v: *mut sqlvault_vault, path: *const c_char, path_len: usize) -> i32 {
    call(|| unsafe {
        vault(v)?.remove_dir_all(text(path, path_len, "path")?.to_owned())?;
        Ok(0)
    })
}

/// Renames `from` to `to`, replacing `to` as POSIX `rename` does.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_rename(
    v: *mut sqlvault_vault,
    from: *const c_char,
    from_len: usize,
    to: *const c_char,
    to_len: usize,
) -> i32 {
    call(|| unsafe {
        vault(v)?.rename(text(from, from_len, "from")?.to_owned(), text(to, to_len, "to")?.to_owned())?;
        Ok(0)
    })
}

/// Reads the whole file at `path` into the caller's `buf` (`cap` bytes) without
/// allocating; its length goes to `*out_len`. If the file is longer than `cap`, fails
/// with `SQLVAULT_ERR_BUFFER_TOO_SMALL` (`-ERANGE`), `*out_len` set to the size needed
/// and `buf` unspecified: `sqlvault_stat` first, or use `sqlvault_read_file_bytes`.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_read_file(
    v: *mut sqlvault_vault,
    path: *const c_char,
    path_len: usize,
    buf: *mut u8,
    cap: usize,
    out_len: *mut usize,
) -> i32 {
    call(|| unsafe {
        need(out_len, "out_len")?;
        let buf = buffer(buf, cap, "buf")?;
        let f = vault(v)?.open_file(text(path, path_len, "path")?.to_owned(), read_only())?;
        let r = read_whole(&f, buf);
        let closed = f.close();
        let n = r?;
        closed?;
        match n {
            Whole::Read(n) => {
                put(out_len, n, "out_len")?;
                Ok(0)
            }
            Whole::TooLong(size) => {
                put(out_len, size, "out_len")?;
                Err(too_small(size, cap))
            }
        }
    })
}

pub(crate) enum Whole {
    Read(usize),
    TooLong(usize),
}

pub(crate) fn too_small(size: usize, cap: usize) -> Failure {
    Failure {
        kind: SQLVAULT_ERR_BUFFER_TOO_SMALL,
        errno: libc::ERANGE,
        message: format!("the file has {size} bytes, the buffer {cap}"),
    }
}

pub(crate) fn read_only() -> OpenOptions {
    OpenOptions { read: true, ..Default::default() }
}

/// Reads all of `f` into `buf`, or says how long it is if it does not fit.
fn read_whole(f: &crate::FileHandle, buf: &mut [u8]) -> CResult<Whole> {
    let size = usize::try_from(f.size()?).unwrap_or(usize::MAX);
    if size > buf.len() {
        return Ok(Whole::TooLong(size));
    }
    let n = f.read_into(0, buf)?;
    if n == buf.len() && f.read_into(n as u64, &mut [0u8; 1])? != 0 {
        // Grew since `size` was read.
        return Ok(Whole::TooLong(usize::try_from(f.size()?).unwrap_or(usize::MAX)));
    }
    Ok(Whole::Read(n))
}

/// Reads the whole file at `path` into a buffer the library allocates, handed to the
/// caller in `*out` (free it with `sqlvault_bytes_free`).
#[no_mangle]
pub unsafe extern "C" fn sqlvault_read_file_bytes(
    v: *mut sqlvault_vault,
    path: *const c_char,
    path_len: usize,
    out: *mut sqlvault_bytes,
) -> i32 {
    call(|| unsafe {
        need(out, "out")?;
        let data = vault(v)?.read_file(text(path, path_len, "path")?.to_owned())?;
        put(out, sqlvault_bytes::from_vec(data), "out")?;
        Ok(0)
    })
}

/// Writes `data[0..len]` as the whole content of `path` (created if needed, replaced
/// otherwise) in one commit.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_write_file(
    v: *mut sqlvault_vault,
    path: *const c_char,
    path_len: usize,
    data: *const u8,
    len: usize,
) -> i32 {
    call(|| unsafe {
        let v = vault(v)?;
        let path = text(path, path_len, "path")?;
        let data = bytes(data, len, "data")?;
        v.shared().writer()?.write_file(path, data)?;
        Ok(0)
    })
}

/// Truncates or extends the file at `path` to `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_truncate(
    v: *mut sqlvault_vault,
    path: *const c_char,
    path_len: usize,
    size: i64,
) -> i32 {
    call(|| unsafe {
        vault(v)?.truncate(text(path, path_len, "path")?.to_owned(), size)?;
        Ok(0)
    })
}

/// A result of tags: columns `name` (TEXT) and `value` (of the tag's type).
pub(crate) fn tag_result(tags: Vec<Tag>) -> sqlvault_result {
    let mut r = sqlvault_result::new([("name", Some("TEXT")), ("value", None)]);
    for t in tags {
        r.text(t.name.as_bytes());
        match t.value {
            TagValue::Int { value } => r.integer(value),
            TagValue::Real { value } => r.real(value),
            TagValue::Text { value } => r.text(value.as_bytes()),
            TagValue::Bytes { value } => r.blob(&value),
        }
    }
    r
}

/// Sets the `n` tags `tags` on `path`: each value's `name` is the tag's name, its type
/// INTEGER, REAL, TEXT or BLOB (not NULL). Tags of other names stay.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_tags_set(
    v: *mut sqlvault_vault,
    path: *const c_char,
    path_len: usize,
    tags: *const sqlvault_value,
    n: usize,
) -> i32 {
    call(|| unsafe {
        let v = vault(v)?;
        let path = text(path, path_len, "path")?.to_owned();
        v.set_tags(path, to_tags(values(tags, n, "tags")?)?)?;
        Ok(0)
    })
}

/// Every tag of `path` in name order, as a result with columns `name` and `value`.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_tags(
    v: *mut sqlvault_vault,
    path: *const c_char,
    path_len: usize,
    out: *mut *mut sqlvault_result,
) -> i32 {
    call(|| unsafe {
        need(out, "out")?;
        let t = vault(v)?.tags(text(path, path_len, "path")?.to_owned())?;
        give(out, tag_result(t), "out")?;
        Ok(0)
    })
}

/// Removes the `n` tags named in `names` from `path`; how many existed goes to
/// `*out_removed` unless it is NULL.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_tags_remove(
    v: *mut sqlvault_vault,
    path: *const c_char,
    path_len: usize,
    names: *const sqlvault_str,
    n: usize,
    out_removed: *mut i64,
) -> i32 {
    call(|| unsafe {
        let v = vault(v)?;
        let path = text(path, path_len, "path")?.to_owned();
        let removed = v.remove_tags(path, texts(names, n, "names")?)?;
        put_opt(out_removed, removed);
        Ok(0)
    })
}

/// Paths under `dir` whose tags meet all `n` `conditions` (as the CLI's `find --tag`
/// writes them: `"iso>=400"`, `"camera=X100V"`, `"rating"`) and whose name matches the
/// glob `name_glob` (NULL: any), in path order: a result with one column `path`.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_find(
    v: *mut sqlvault_vault,
    dir: *const c_char,
    dir_len: usize,
    conditions: *const sqlvault_str,
    n: usize,
    name_glob: *const c_char,
    name_glob_len: usize,
    out: *mut *mut sqlvault_result,
) -> i32 {
    call(|| unsafe {
        need(out, "out")?;
        let v = vault(v)?;
        let dir = text(dir, dir_len, "dir")?.to_owned();
        let glob = opt_text(name_glob, name_glob_len, "name_glob")?.map(str::to_owned);
        let paths = v.find(dir, texts(conditions, n, "conditions")?, glob)?;
        give(out, sqlvault_result::of_texts("path", paths), "out")?;
        Ok(0)
    })
}

/// Stores `value[0..value_len]` under `key` in record collection `collection`.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_record_put(
    v: *mut sqlvault_vault,
    collection: *const c_char,
    collection_len: usize,
    key: *const c_char,
    key_len: usize,
    value: *const u8,
    value_len: usize,
) -> i32 {
    call(|| unsafe {
        let v = vault(v)?;
        let c = text(collection, collection_len, "collection")?;
        let k = text(key, key_len, "key")?;
        v.shared().writer()?.records(c).put(k, bytes(value, value_len, "value")?)?;
        Ok(0)
    })
}

/// The value under `key` into `*out` (free it with `sqlvault_bytes_free`): returns 1,
/// or 0 if there is none (`*out` then empty, data NULL).
#[no_mangle]
pub unsafe extern "C" fn sqlvault_record_get(
    v: *mut sqlvault_vault,
    collection: *const c_char,
    collection_len: usize,
    key: *const c_char,
    key_len: usize,
    out: *mut sqlvault_bytes,
) -> i32 {
    call(|| unsafe {
        need(out, "out")?;
        let v = vault(v)?;
        let c = text(collection, collection_len, "collection")?.to_owned();
        let got = v.record_get(c, text(key, key_len, "key")?.to_owned())?;
        put_record(out, got)
    })
}

pub(crate) unsafe fn put_record(out: *mut sqlvault_bytes, got: Option<Vec<u8>>) -> CResult<i32> {
    let found = i32::from(got.is_some());
    unsafe { put(out, sqlvault_bytes::from_vec(got.unwrap_or_default()), "out")? };
    Ok(found)
}

/// Deletes `key` from `collection`: returns 1 if it existed, else 0.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_record_delete(
    v: *mut sqlvault_vault,
    collection: *const c_char,
    collection_len: usize,
    key: *const c_char,
    key_len: usize,
) -> i32 {
    call(|| unsafe {
        let v = vault(v)?;
        let c = text(collection, collection_len, "collection")?.to_owned();
        Ok(i32::from(v.record_delete(c, text(key, key_len, "key")?.to_owned())?))
    })
}

/// The number of records in `collection` into `*out`.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_record_count(
    v: *mut sqlvault_vault,
    collection: *const c_char,
    collection_len: usize,
    out: *mut i64,
) -> i32 {
    call(|| unsafe {
        need(out, "out")?;
        let n = vault(v)?.record_len(text(collection, collection_len, "collection")?.to_owned())?;
        put(out, n, "out")?;
        Ok(0)
    })
}

/// Keys of `collection` starting with `prefix` (empty: all), in key order: a result
/// with one column `key`.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_record_keys(
    v: *mut sqlvault_vault,
    collection: *const c_char,
    collection_len: usize,
    prefix: *const c_char,
    prefix_len: usize,
    out: *mut *mut sqlvault_result,
) -> i32 {
    call(|| unsafe {
        need(out, "out")?;
        let v = vault(v)?;
        let c = text(collection, collection_len, "collection")?.to_owned();
        let keys = v.record_keys(c, text(prefix, prefix_len, "prefix")?.to_owned())?;
        give(out, sqlvault_result::of_texts("key", keys), "out")?;
        Ok(0)
    })
}

/// A result of records: columns `key` (TEXT) and `value` (BLOB).
pub(crate) fn items_result(items: Vec<crate::RecordItem>) -> sqlvault_result {
    let mut r = sqlvault_result::new([("key", Some("TEXT")), ("value", Some("BLOB"))]);
    for i in items {
        r.text(i.key.as_bytes());
        r.blob(&i.value);
    }
    r
}

/// One page of records: up to `limit` records of `collection` whose key starts with
/// `prefix` and comes after `after` (NULL: from the first), in key order; pass the last
/// key as `after` for the next page. A result with columns `key` and `value` (BLOB).
#[no_mangle]
pub unsafe extern "C" fn sqlvault_record_items(
    v: *mut sqlvault_vault,
    collection: *const c_char,
    collection_len: usize,
    prefix: *const c_char,
    prefix_len: usize,
    after: *const c_char,
    after_len: usize,
    limit: i32,
    out: *mut *mut sqlvault_result,
) -> i32 {
    call(|| unsafe {
        need(out, "out")?;
        let v = vault(v)?;
        let c = text(collection, collection_len, "collection")?.to_owned();
        let p = text(prefix, prefix_len, "prefix")?.to_owned();
        let a = opt_text(after, after_len, "after")?.map(str::to_owned);
        give(out, items_result(v.record_items(c, p, a, limit)?), "out")?;
        Ok(0)
    })
}

fn snapshot_result(list: Vec<SnapshotInfo>) -> sqlvault_result {
    let int = Some("INTEGER");
    let mut r = sqlvault_result::new([
        ("name", Some("TEXT")),
        ("created_ns", int),
        ("files", int),
        ("directories", int),
        ("symlinks", int),
        ("logical_bytes", int),
    ]);
    for s in list {
        r.text(s.name.as_bytes());
        for n in [s.created_ns, s.files, s.directories, s.symlinks, s.logical_bytes] {
            r.integer(n);
        }
    }
    r
}

/// Freezes the tree as snapshot `name` (NULL: the current UTC time in ISO 8601, as the
/// CLI names them). Unless `out` is NULL, `*out` gets a one-row result with the columns
/// of `sqlvault_snapshots`.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_snapshot_create(
    v: *mut sqlvault_vault,
    name: *const c_char,
    name_len: usize,
    out: *mut *mut sqlvault_result,
) -> i32 {
    call(|| unsafe {
        let v = vault(v)?;
        let info = v.snapshot(opt_text(name, name_len, "name")?.map(str::to_owned))?;
        if !out.is_null() {
            give(out, snapshot_result(vec![info]), "out")?;
        }
        Ok(0)
    })
}

/// Every snapshot, oldest first: a result with columns `name` (TEXT), `created_ns`,
/// `files`, `directories`, `symlinks`, `logical_bytes` (INTEGER).
#[no_mangle]
pub unsafe extern "C" fn sqlvault_snapshots(v: *mut sqlvault_vault, out: *mut *mut sqlvault_result) -> i32 {
    call(|| unsafe {
        need(out, "out")?;
        give(out, snapshot_result(vault(v)?.snapshots()?), "out")?;
        Ok(0)
    })
}

/// Brings `path` (NULL: `/`, everything) of snapshot `name` back to `dest` (NULL: the
/// same path), replacing what is there; what it restored goes to `*out` unless NULL.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_snapshot_restore(
    v: *mut sqlvault_vault,
    name: *const c_char,
    name_len: usize,
    path: *const c_char,
    path_len: usize,
    dest: *const c_char,
    dest_len: usize,
    out: *mut sqlvault_restore_summary,
) -> i32 {
    call(|| unsafe {
        let v = vault(v)?;
        let name = text(name, name_len, "name")?.to_owned();
        let path = opt_text(path, path_len, "path")?.map(str::to_owned);
        let dest = opt_text(dest, dest_len, "dest")?.map(str::to_owned);
        let s = v.restore(name, path, dest)?;
        put_opt(out, s.into());
        Ok(0)
    })
}

/// Removes snapshot `name`; the bytes it freed go to `*out_freed` unless NULL.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_snapshot_remove(
    v: *mut sqlvault_vault,
    name: *const c_char,
    name_len: usize,
    out_freed: *mut i64,
) -> i32 {
    call(|| unsafe {
        let freed = vault(v)?.remove_snapshot(text(name, name_len, "name")?.to_owned())?;
        put_opt(out_freed, freed);
        Ok(0)
    })
}
