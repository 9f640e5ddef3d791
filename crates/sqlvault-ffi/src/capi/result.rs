//! [`sqlvault_result`]: every list the C API returns (directory entries, found paths,
//! tags, record keys and items, snapshots, query rows) as one table of typed cells with
//! named columns, held in one allocation of bytes plus one of cells, read with the
//! `sqlvault_result_*` accessors and freed with one `sqlvault_result_free`.
//!
//! Accessors never fail and never record an error: a cell out of range reads as type 0,
//! integer 0, real 0.0, bytes NULL.

use std::ffi::c_char;

use super::error::quiet;
use super::values::{SQLVAULT_BLOB, SQLVAULT_INTEGER, SQLVAULT_NULL, SQLVAULT_REAL, SQLVAULT_TEXT};

/// Where bytes sit in the arena.
#[derive(Clone, Copy)]
struct Span {
    at: usize,
    len: usize,
}

#[derive(Clone, Copy)]
enum Cell {
    Null,
    Integer(i64),
    Real(f64),
    Text(Span),
    Blob(Span),
}

struct Column {
    name: Span,
    decl_type: Option<Span>,
}

/// A table of results: `sqlvault_result_rows` rows of `sqlvault_result_columns`
/// columns, each cell typed (`SQLVAULT_INTEGER`, `_REAL`, `_TEXT`, `_BLOB`, `_NULL`).
/// Owned by the caller, who frees it with `sqlvault_result_free`; pointers read from it
/// stay valid until then. It may be read from any thread.
pub struct sqlvault_result {
    columns: Vec<Column>,
    cells: Vec<Cell>,
    /// Every name and text/blob value, each followed by a NUL.
    arena: Vec<u8>,
}

impl sqlvault_result {
    /// An empty table with these columns (name, declared type).
    pub(crate) fn new<'a>(columns: impl IntoIterator<Item = (&'a str, Option<&'a str>)>) -> Self {
        let mut r = sqlvault_result { columns: Vec::new(), cells: Vec::new(), arena: Vec::new() };
        for (name, decl) in columns {
            let name = r.push_bytes(name.as_bytes());
            let decl_type = decl.map(|d| r.push_bytes(d.as_bytes()));
            r.columns.push(Column { name, decl_type });
        }
        r
    }

    /// A table of one text column.
    pub(crate) fn of_texts(column: &str, items: impl IntoIterator<Item = impl AsRef<str>>) -> Self {
        let mut r = Self::new([(column, Some("TEXT"))]);
        for s in items {
            r.text(s.as_ref().as_bytes());
        }
        r
    }

    fn push_bytes(&mut self, b: &[u8]) -> Span {
        let at = self.arena.len();
        self.arena.extend_from_slice(b);
        self.arena.push(0);
        Span { at, len: b.len() }
    }

    pub(crate) fn null(&mut self) {
        self.cells.push(Cell::Null);
    }

    pub(crate) fn integer(&mut self, v: i64) {
        self.cells.push(Cell::Integer(v));
    }

    pub(crate) fn real(&mut self, v: f64) {
        self.cells.push(Cell::Real(v));
    }

    pub(crate) fn text(&mut self, v: &[u8]) {
        let s = self.push_bytes(v);
        self.cells.push(Cell::Text(s));
    }

    pub(crate) fn blob(&mut self, v: &[u8]) {
        let s = self.push_bytes(v);
        self.cells.push(Cell::Blob(s));
    }

    /// Appends one value (a query's cell, a tag's value).
    pub(crate) fn value(&mut self, v: sqlvault::sql::SqlValueRef<'_>) {
        use sqlvault::sql::SqlValueRef as V;
        match v {
            V::Null => self.null(),
            V::Integer(i) => self.integer(i),
            V::Real(f) => self.real(f),
            V::Text(t) => self.text(t),
            V::Blob(b) => self.blob(b),
        }
    }

    /// Appends a query's row, which must have this table's columns.
    pub(crate) fn row(&mut self, row: &sqlvault::sql::Row<'_>) -> sqlvault::Result<()> {
        if row.len() != self.columns.len() {
            return Err(sqlvault::Error::Sql {
                message: format!(
                    "the statement's columns changed while it ran ({} expected, {} found)",
                    self.columns.len(),
                    row.len()
                ),
            });
        }
        for i in 0..row.len() {
            self.value(row.get_ref(i)?);
        }
        Ok(())
    }

    fn rows(&self) -> usize {
        match self.columns.len() {
            0 => 0,
            n => self.cells.len() / n,
        }
    }

    fn cell(&self, row: i64, col: i32) -> Option<Cell> {
        let (row, col) = (usize::try_from(row).ok()?, usize::try_from(col).ok()?);
        if col >= self.columns.len() || row >= self.rows() {
            return None;
        }
        self.cells.get(row * self.columns.len() + col).copied()
    }

    fn span(&self, s: Span, out_len: *mut usize) -> *const u8 {
        if !out_len.is_null() {
            // SAFETY: the accessor's caller passes a valid `size_t*` or NULL.
            unsafe { *out_len = s.len };
        }
        self.arena[s.at..].as_ptr()
    }
}

/// The result behind `r`, if any.
fn get<'a>(r: *const sqlvault_result) -> Option<&'a sqlvault_result> {
    // SAFETY: the caller passes NULL or a live result.
    unsafe { r.as_ref() }
}

fn set_len(out_len: *mut usize, n: usize) {
    if !out_len.is_null() {
        // SAFETY: the caller passes a valid `size_t*` or NULL.
        unsafe { *out_len = n };
    }
}

/// The number of rows (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn sqlvault_result_rows(r: *const sqlvault_result) -> i64 {
    quiet(0, || get(r).map_or(0, |r| r.rows() as i64))
}

/// The number of columns (0 for NULL). A query's columns are known even when it
/// returns no rows.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_result_columns(r: *const sqlvault_result) -> i32 {
    quiet(0, || get(r).map_or(0, |r| r.columns.len() as i32))
}

/// The name of column `col` (from 0; NUL-terminated UTF-8, its length in bytes to
/// `*out_len` unless NULL), or NULL if out of range.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_result_column_name(
    r: *const sqlvault_result,
    col: i32,
    out_len: *mut usize,
) -> *const c_char {
    quiet(std::ptr::null(), || {
        let Some(r) = get(r) else { return std::ptr::null() };
        match usize::try_from(col).ok().and_then(|c| r.columns.get(c)) {
            Some(c) => r.span(c.name, out_len).cast(),
            None => std::ptr::null(),
        }
    })
}

/// The declared type of column `col` (`"INTEGER"`, `"TEXT"`, ... as the table's
/// `CREATE TABLE` wrote it; NUL-terminated, length to `*out_len` unless NULL), or NULL
/// when the column is an expression or out of range. For the lists the library makes
/// (directory entries, tags, ...) it is the type each column always has.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_result_column_decltype(
    r: *const sqlvault_result,
    col: i32,
    out_len: *mut usize,
) -> *const c_char {
    quiet(std::ptr::null(), || {
        let Some(r) = get(r) else { return std::ptr::null() };
        match usize::try_from(col).ok().and_then(|c| r.columns.get(c)).and_then(|c| c.decl_type) {
            Some(s) => r.span(s, out_len).cast(),
            None => {
                set_len(out_len, 0);
                std::ptr::null()
            }
        }
    })
}

/// The type of the cell at `row`, `col` (from 0): `SQLVAULT_INTEGER`, `_REAL`,
/// `_TEXT`, `_BLOB` or `_NULL`; 0 if out of range.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_result_type(r: *const sqlvault_result, row: i64, col: i32) -> i32 {
    quiet(0, || match get(r).and_then(|r| r.cell(row, col)) {
        Some(Cell::Null) => SQLVAULT_NULL,
        Some(Cell::Integer(_)) => SQLVAULT_INTEGER,
        Some(Cell::Real(_)) => SQLVAULT_REAL,
        Some(Cell::Text(_)) => SQLVAULT_TEXT,
        Some(Cell::Blob(_)) => SQLVAULT_BLOB,
        None => 0,
    })
}

/// The integer in a cell (a real is truncated toward zero; 0 for any other type).
#[no_mangle]
pub unsafe extern "C" fn sqlvault_result_int(r: *const sqlvault_result, row: i64, col: i32) -> i64 {
    quiet(0, || match get(r).and_then(|r| r.cell(row, col)) {
        Some(Cell::Integer(i)) => i,
        Some(Cell::Real(f)) => f as i64,
        _ => 0,
    })
}

/// The real in a cell (an integer converted; 0.0 for any other type).
#[no_mangle]
pub unsafe extern "C" fn sqlvault_result_real(r: *const sqlvault_result, row: i64, col: i32) -> f64 {
    quiet(0.0, || match get(r).and_then(|r| r.cell(row, col)) {
        Some(Cell::Real(f)) => f,
        Some(Cell::Integer(i)) => i as f64,
        _ => 0.0,
    })
}

/// The bytes of a TEXT or BLOB cell (followed by a NUL, so text may be used as a C
/// string; its length in bytes to `*out_len` unless NULL), valid until the result is
/// freed; NULL (length 0) for other types or out of range.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_result_bytes(
    r: *const sqlvault_result,
    row: i64,
    col: i32,
    out_len: *mut usize,
) -> *const u8 {
    quiet(std::ptr::null(), || {
        let Some(res) = get(r) else {
            set_len(out_len, 0);
            return std::ptr::null();
        };
        match res.cell(row, col) {
            Some(Cell::Text(s) | Cell::Blob(s)) => res.span(s, out_len),
            _ => {
                set_len(out_len, 0);
                std::ptr::null()
            }
        }
    })
}

/// `sqlvault_result_bytes` of a TEXT cell as a NUL-terminated C string; NULL for other
/// types.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_result_text(
    r: *const sqlvault_result,
    row: i64,
    col: i32,
    out_len: *mut usize,
) -> *const c_char {
    quiet(std::ptr::null(), || {
        let Some(res) = get(r) else {
            set_len(out_len, 0);
            return std::ptr::null();
        };
        match res.cell(row, col) {
            Some(Cell::Text(s)) => res.span(s, out_len).cast(),
            _ => {
                set_len(out_len, 0);
                std::ptr::null()
            }
        }
    })
}

/// Frees a result (NULL is fine). Pointers read from it become invalid.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_result_free(r: *mut sqlvault_result) {
    quiet((), || {
        if !r.is_null() {
            // SAFETY: `r` came from `Box::into_raw` in `values::give` and is freed once.
            drop(unsafe { Box::from_raw(r) });
        }
    })
}
