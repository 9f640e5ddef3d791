//! Application SQL from C: `sqlvault_execute` (rows changed and the last insert rowid),
//! `sqlvault_query` (a `sqlvault_result` with the statement's column names and declared
//! types, known even for zero rows), `sqlvault_execute_batch`; the same inside a
//! transaction live in `tx.rs` and share [`bind`] and [`query_into`].
//!
//! Parameters come positional, named, or both: a named value (`":id"`, `"@id"`,
//! `"$id"`, or `"id"` for any prefix) binds the parameter of that name, unnamed values
//! bind the remaining parameters (bare `?`, numbered `?3`, or names without a value) in
//! order. Names are resolved with the library's `describe`, which compiles the statement
//! once into the connection's cache; purely positional calls skip it.
//!
//! Every `unsafe` block here reads the caller's arguments under the contract of the
//! module docs of `capi`.

use std::ffi::c_char;

use super::error::{call, CResult, Failure};
use super::result::sqlvault_result;
use super::values::{give, need, put_opt, sqlvault_value, text, values, Named};
use super::vault::{sqlvault_vault, vault};

/// The values for a statement with these parameters (from `describe`), in binding
/// order. Named values a statement does not name are ignored, as ADO.NET providers do.
pub(crate) fn bind(parameters: &[Option<String>], given: Vec<Named>) -> CResult<Vec<sqlvault::SqlValue>> {
    let (named, positional): (Vec<Named>, Vec<Named>) = given.into_iter().partition(|n| n.name.is_some());
    let mut positional = positional.into_iter().map(|n| n.value);
    let mut out = Vec::with_capacity(parameters.len());
    for p in parameters {
        let by_name = p
            .as_deref()
            .filter(|p| !p.starts_with('?'))
            .and_then(|p| named.iter().find(|n| n.name.as_deref().is_some_and(|name| name == p || name == &p[1..])));
        let value = match by_name {
            Some(n) => n.value.clone(),
            None => positional.next().ok_or_else(|| match p {
                Some(p) if !p.starts_with('?') => Failure::sql(format!("no value for parameter {p}")),
                _ => Failure::sql(format!("the statement takes {} parameters, fewer given", parameters.len())),
            })?,
        };
        out.push(value);
    }
    if positional.next().is_some() {
        return Err(Failure::sql(format!("the statement takes {} parameters, more given", parameters.len())));
    }
    Ok(out)
}

/// Whether any value is named (then the statement's parameter names are needed).
pub(crate) fn any_named(given: &[Named]) -> bool {
    given.iter().any(|n| n.name.is_some())
}

pub(crate) fn positional(given: Vec<Named>) -> Vec<sqlvault::SqlValue> {
    given.into_iter().map(|n| n.value).collect()
}

/// A result with the columns of `info`, to which the rows are appended.
pub(crate) fn empty_result(info: &sqlvault::sql::StatementInfo) -> sqlvault_result {
    sqlvault_result::new(info.columns.iter().map(|c| (c.name.as_str(), c.decl_type.as_deref())))
}

/// Runs `run` (a query through a vault or a transaction) with each row appended to a
/// result with the statement's columns.
pub(crate) fn query_into(
    info: &sqlvault::sql::StatementInfo,
    run: impl FnOnce(&mut dyn FnMut(&sqlvault::sql::Row<'_>) -> sqlvault::Result<()>) -> sqlvault::Result<Vec<()>>,
) -> CResult<sqlvault_result> {
    let mut r = empty_result(info);
    run(&mut |row| r.row(row))?;
    Ok(r)
}

/// Runs one application statement with the `n` values `params` as one write (no
/// transaction needed). Unless NULL, `*out_changes` gets the rows it inserted, updated
/// or deleted, `*out_rowid` the rowid of the last row an INSERT added on the vault's
/// writer (meaningful after an INSERT). Failed SQL: `SQLVAULT_ERR_SQL`; refused SQL
/// (sqlvault's own tables, `ATTACH`, transaction statements): `SQLVAULT_ERR_SQL_REFUSED`.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_execute(
    v: *mut sqlvault_vault,
    sql: *const c_char,
    sql_len: usize,
    params: *const sqlvault_value,
    n: usize,
    out_changes: *mut i64,
    out_rowid: *mut i64,
) -> i32 {
    call(|| unsafe {
        let v = vault(v)?;
        let sql = text(sql, sql_len, "sql")?;
        let given = values(params, n, "params")?;
        let lib = v.shared().writer()?;
        let (changes, rowid) = lib.transaction(|tx| -> CResult<(usize, i64)> {
            let params = match any_named(&given) {
                true => bind(&tx.describe(sql)?.parameters, given)?,
                false => positional(given),
            };
            let changes = tx.execute(sql, &params)?;
            Ok((changes, tx.last_insert_rowid()))
        })?;
        put_opt(out_changes, changes as i64);
        put_opt(out_rowid, rowid);
        Ok(0)
    })
}

/// Runs one application statement with the `n` values `params` and returns its rows
/// in `*out`: a result with the statement's columns (names and declared types, even
/// when no row matched) and one row per result row. A read sees the last committed
/// state; a statement that writes (`INSERT ... RETURNING`) runs as one write (refused
/// from a thread whose transaction is open: run it through the transaction).
#[no_mangle]
pub unsafe extern "C" fn sqlvault_query(
    v: *mut sqlvault_vault,
    sql: *const c_char,
    sql_len: usize,
    params: *const sqlvault_value,
    n: usize,
    out: *mut *mut sqlvault_result,
) -> i32 {
    call(|| unsafe {
        need(out, "out")?;
        let v = vault(v)?;
        let sql = text(sql, sql_len, "sql")?;
        let given = values(params, n, "params")?;
        let shared = v.shared();
        let lib = shared.get()?;
        let info = lib.describe(sql)?;
        if !info.readonly {
            // A write from a thread holding a transaction would wait for it for ever.
            shared.writer()?;
        }
        let params = bind(&info.parameters, given)?;
        let r = query_into(&info, |f| lib.query(sql, &params, f))?;
        give(out, r, "out")?;
        Ok(0)
    })
}

/// Runs a script of application statements (no parameters) as one write: all of it
/// commits, or none of it.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_execute_batch(v: *mut sqlvault_vault, sql: *const c_char, sql_len: usize) -> i32 {
    call(|| unsafe {
        let v = vault(v)?;
        v.shared().writer()?.execute_batch(text(sql, sql_len, "sql")?)?;
        Ok(0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlvault::SqlValue::{Integer, Text};

    fn named(name: Option<&str>, v: sqlvault::SqlValue) -> Named {
        Named { name: name.map(str::to_owned), value: v }
    }

    #[test]
    fn named_values_bind_by_name_and_the_rest_by_position() {
        let params = [Some(":a".to_string()), None, Some("@b".to_string()), Some("?4".to_string())];
        let given = vec![
            named(None, Integer(2)),
            named(Some("b"), Text("b".into())),
            named(Some(":a"), Integer(1)),
            named(None, Integer(4)),
            named(Some("unused"), Integer(9)),
        ];
        assert_eq!(bind(&params, given).unwrap(), [Integer(1), Integer(2), Text("b".into()), Integer(4)]);
        // A name without a value takes the next positional one; missing values and
        // extra positional ones are errors that say which.
        assert_eq!(bind(&params[..1], vec![named(None, Integer(5))]).unwrap(), [Integer(5)]);
        let e = bind(&params[..1], vec![named(Some("@z"), Integer(5))]).unwrap_err();
        assert!(e.message.contains("no value for parameter :a"), "{}", e.message);
        let e = bind(&params[1..2], vec![named(None, Integer(1)), named(None, Integer(2))]).unwrap_err();
        assert!(e.message.contains("more given"), "{}", e.message);
    }
}
