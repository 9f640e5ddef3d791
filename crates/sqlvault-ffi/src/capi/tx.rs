//! `sqlvault_tx`: a transaction over files, tags, records and application SQL, begun
//! on a vault and ended by commit or rollback ([`crate::Transaction`] runs it on a
//! worker thread of its own). The calls mirror the vault's, with `sqlvault_tx_` in
//! front, and see the transaction's own uncommitted changes.
//!
//! Every `unsafe` block here reads the caller's arguments under the contract of the
//! module docs of `capi`.

use std::ffi::c_char;
use std::sync::Arc;

use super::error::{call, CResult, Failure};
use super::result::sqlvault_result;
use super::sql::{any_named, bind, positional, query_into};
use super::values::{
    buffer, bytes, give, need, put, put_opt, sqlvault_bytes, sqlvault_str, sqlvault_value, text, texts, to_tags, values,
};
use super::vault::{items_result, put_record, sqlvault_vault, tag_result, too_small, vault};
use crate::Transaction;

/// An open transaction. Begin one with `sqlvault_tx_begin`, end it with
/// `sqlvault_tx_commit` or `sqlvault_tx_rollback`, free it with `sqlvault_tx_free`
/// (which rolls back one still open). While it is open, the vault's other writers wait
/// for it, and writes through the vault or a file from the thread that began it fail
/// with `SQLVAULT_ERR_INVALID_ARGUMENT` (they would wait for it for ever): write
/// through the transaction. Its calls may come from any thread, one at a time.
pub struct sqlvault_tx {
    inner: Arc<Transaction>,
}

unsafe fn tx<'a>(t: *const sqlvault_tx) -> CResult<&'a Transaction> {
    unsafe { t.as_ref() }.map(|h| &*h.inner).ok_or_else(|| Failure::null("the transaction handle"))
}

/// Begins a transaction on the vault: `*out` holds its writer until commit or rollback.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_tx_begin(v: *mut sqlvault_vault, out: *mut *mut sqlvault_tx) -> i32 {
    call(|| unsafe {
        need(out, "out")?;
        let t = vault(v)?.begin_transaction()?;
        give(out, sqlvault_tx { inner: t }, "out")?;
        Ok(0)
    })
}

/// Commits every change made through the transaction, together. Later calls on it
/// fail with `SQLVAULT_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_tx_commit(t: *mut sqlvault_tx) -> i32 {
    call(|| unsafe {
        tx(t)?.commit()?;
        Ok(0)
    })
}

/// Discards every change made through the transaction. Later calls on it fail with
/// `SQLVAULT_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_tx_rollback(t: *mut sqlvault_tx) -> i32 {
    call(|| unsafe {
        tx(t)?.rollback()?;
        Ok(0)
    })
}

/// Frees the handle (NULL is fine), rolling back the transaction if it is still open.
/// Call it exactly once per handle.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_tx_free(t: *mut sqlvault_tx) {
    call(|| {
        if !t.is_null() {
            // SAFETY: `t` came from `give` and is freed once.
            drop(unsafe { Box::from_raw(t) });
        }
        Ok(0)
    });
}

/// `sqlvault_write_file` inside the transaction.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_tx_write_file(
    t: *mut sqlvault_tx,
    path: *const c_char,
    path_len: usize,
    data: *const u8,
    len: usize,
) -> i32 {
    call(|| unsafe {
        let t = tx(t)?;
        t.write_file(text(path, path_len, "path")?.to_owned(), bytes(data, len, "data")?.to_vec())?;
        Ok(0)
    })
}

/// `sqlvault_read_file` inside the transaction (into the caller's buffer; `-ERANGE`
/// with the size needed in `*out_len` if it does not fit).
#[no_mangle]
pub unsafe extern "C" fn sqlvault_tx_read_file(
    t: *mut sqlvault_tx,
    path: *const c_char,
    path_len: usize,
    buf: *mut u8,
    cap: usize,
    out_len: *mut usize,
) -> i32 {
    call(|| unsafe {
        need(out_len, "out_len")?;
        let buf = buffer(buf, cap, "buf")?;
        let data = tx(t)?.read_file(text(path, path_len, "path")?.to_owned())?;
        put(out_len, data.len(), "out_len")?;
        if data.len() > cap {
            return Err(too_small(data.len(), cap));
        }
        buf[..data.len()].copy_from_slice(&data);
        Ok(0)
    })
}

/// `sqlvault_read_file_bytes` inside the transaction.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_tx_read_file_bytes(
    t: *mut sqlvault_tx,
    path: *const c_char,
    path_len: usize,
    out: *mut sqlvault_bytes,
) -> i32 {
    call(|| unsafe {
        need(out, "out")?;
        let data = tx(t)?.read_file(text(path, path_len, "path")?.to_owned())?;
        put(out, sqlvault_bytes::from_vec(data), "out")?;
        Ok(0)
    })
}

/// `sqlvault_mkdirs` inside the transaction.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_tx_mkdirs(t: *mut sqlvault_tx, path: *const c_char, path_len: usize) -> i32 {
    call(|| unsafe {
        tx(t)?.mkdirs(text(path, path_len, "path")?.to_owned())?;
        Ok(0)
    })
}

/// `sqlvault_remove_file` inside the transaction.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_tx_remove_file(t: *mut sqlvault_tx, path: *const c_char, path_len: usize) -> i32 {
    call(|| unsafe {
        tx(t)?.remove_file(text(path, path_len, "path")?.to_owned())?;
        Ok(0)
    })
}

/// `sqlvault_tags_set` inside the transaction.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_tx_tags_set(
    t: *mut sqlvault_tx,
    path: *const c_char,
    path_len: usize,
    tags: *const sqlvault_value,
    n: usize,
) -> i32 {
    call(|| unsafe {
        let t = tx(t)?;
        t.set_tags(text(path, path_len, "path")?.to_owned(), to_tags(values(tags, n, "tags")?)?)?;
        Ok(0)
    })
}

/// `sqlvault_tags` inside the transaction.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_tx_tags(
    t: *mut sqlvault_tx,
    path: *const c_char,
    path_len: usize,
    out: *mut *mut sqlvault_result,
) -> i32 {
    call(|| unsafe {
        need(out, "out")?;
        let list = tx(t)?.tags(text(path, path_len, "path")?.to_owned())?;
        give(out, tag_result(list), "out")?;
        Ok(0)
    })
}

/// `sqlvault_tags_remove` inside the transaction.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_tx_tags_remove(
    t: *mut sqlvault_tx,
    path: *const c_char,
    path_len: usize,
    names: *const sqlvault_str,
    n: usize,
    out_removed: *mut i64,
) -> i32 {
    call(|| unsafe {
        let t = tx(t)?;
        let removed = t.remove_tags(text(path, path_len, "path")?.to_owned(), texts(names, n, "names")?)?;
        put_opt(out_removed, removed);
        Ok(0)
    })
}

/// `sqlvault_record_put` inside the transaction.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_tx_record_put(
    t: *mut sqlvault_tx,
    collection: *const c_char,
    collection_len: usize,
    key: *const c_char,
    key_len: usize,
    value: *const u8,
    value_len: usize,
) -> i32 {
    call(|| unsafe {
        let t = tx(t)?;
        let c = text(collection, collection_len, "collection")?.to_owned();
        t.record_put(c, text(key, key_len, "key")?.to_owned(), bytes(value, value_len, "value")?.to_vec())?;
        Ok(0)
    })
}

/// `sqlvault_record_get` inside the transaction (1 found, 0 not).
#[no_mangle]
pub unsafe extern "C" fn sqlvault_tx_record_get(
    t: *mut sqlvault_tx,
    collection: *const c_char,
    collection_len: usize,
    key: *const c_char,
    key_len: usize,
    out: *mut sqlvault_bytes,
) -> i32 {
    call(|| unsafe {
        need(out, "out")?;
        let t = tx(t)?;
        let c = text(collection, collection_len, "collection")?.to_owned();
        put_record(out, t.record_get(c, text(key, key_len, "key")?.to_owned())?)
    })
}

/// `sqlvault_record_delete` inside the transaction (1 existed, 0 not).
#[no_mangle]
pub unsafe extern "C" fn sqlvault_tx_record_delete(
    t: *mut sqlvault_tx,
    collection: *const c_char,
    collection_len: usize,
    key: *const c_char,
    key_len: usize,
) -> i32 {
    call(|| unsafe {
        let t = tx(t)?;
        let c = text(collection, collection_len, "collection")?.to_owned();
        Ok(i32::from(t.record_delete(c, text(key, key_len, "key")?.to_owned())?))
    })
}

/// `sqlvault_record_count` inside the transaction.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_tx_record_count(
    t: *mut sqlvault_tx,
    collection: *const c_char,
    collection_len: usize,
    out: *mut i64,
) -> i32 {
    call(|| unsafe {
        need(out, "out")?;
        put(out, tx(t)?.record_len(text(collection, collection_len, "collection")?.to_owned())?, "out")?;
        Ok(0)
    })
}

/// `sqlvault_record_keys` inside the transaction.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_tx_record_keys(
    t: *mut sqlvault_tx,
    collection: *const c_char,
    collection_len: usize,
    prefix: *const c_char,
    prefix_len: usize,
    out: *mut *mut sqlvault_result,
) -> i32 {
    call(|| unsafe {
        need(out, "out")?;
        let t = tx(t)?;
        let c = text(collection, collection_len, "collection")?.to_owned();
        let keys = t.record_keys(c, text(prefix, prefix_len, "prefix")?.to_owned())?;
        give(out, sqlvault_result::of_texts("key", keys), "out")?;
        Ok(0)
    })
}

/// `sqlvault_record_items` inside the transaction.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_tx_record_items(
    t: *mut sqlvault_tx,
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
        let t = tx(t)?;
        let c = text(collection, collection_len, "collection")?.to_owned();
        let p = text(prefix, prefix_len, "prefix")?.to_owned();
        let a = super::values::opt_text(after, after_len, "after")?.map(str::to_owned);
        give(out, items_result(t.record_items(c, p, a, limit)?), "out")?;
        Ok(0)
    })
}

/// `sqlvault_execute` inside the transaction: the statement's changes commit or roll
/// back with the rest; `*out_rowid` is this transaction's last inserted rowid.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_tx_execute(
    t: *mut sqlvault_tx,
    sql: *const c_char,
    sql_len: usize,
    params: *const sqlvault_value,
    n: usize,
    out_changes: *mut i64,
    out_rowid: *mut i64,
) -> i32 {
    call(|| unsafe {
        let t = tx(t)?;
        let sql = text(sql, sql_len, "sql")?.to_owned();
        let given = values(params, n, "params")?;
        // The library's errors come back inside `Ok`, so that failed and refused SQL
        // keep their own kinds (the uniffi surface folds them into InvalidArgument).
        let (changes, rowid) = t.run(move |tx| {
            Ok((|| -> CResult<(usize, i64)> {
                let params = match any_named(&given) {
                    true => bind(&tx.describe(&sql)?.parameters, given)?,
                    false => positional(given),
                };
                let changes = tx.execute(&sql, &params)?;
                Ok((changes, tx.last_insert_rowid()))
            })())
        })??;
        put_opt(out_changes, changes as i64);
        put_opt(out_rowid, rowid);
        Ok(0)
    })
}

/// `sqlvault_query` inside the transaction: sees its uncommitted changes.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_tx_query(
    t: *mut sqlvault_tx,
    sql: *const c_char,
    sql_len: usize,
    params: *const sqlvault_value,
    n: usize,
    out: *mut *mut sqlvault_result,
) -> i32 {
    call(|| unsafe {
        need(out, "out")?;
        let t = tx(t)?;
        let sql = text(sql, sql_len, "sql")?.to_owned();
        let given = values(params, n, "params")?;
        let r = t.run(move |tx| {
            Ok((|| -> CResult<sqlvault_result> {
                let info = tx.describe(&sql)?;
                let params = bind(&info.parameters, given)?;
                query_into(&info, |f| tx.query(&sql, &params, f))
            })())
        })??;
        give(out, r, "out")?;
        Ok(0)
    })
}

/// `sqlvault_execute_batch` inside the transaction: on an error none of the script's
/// statements stays (the rest of the transaction does).
#[no_mangle]
pub unsafe extern "C" fn sqlvault_tx_execute_batch(t: *mut sqlvault_tx, sql: *const c_char, sql_len: usize) -> i32 {
    call(|| unsafe {
        let t = tx(t)?;
        let sql = text(sql, sql_len, "sql")?.to_owned();
        t.run(move |tx| Ok(tx.execute_batch(&sql).map_err(Failure::from)))??;
        Ok(0)
    })
}
