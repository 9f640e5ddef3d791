//! Tags: typed `name -> value` pairs on any inode (file, directory, symlink), and the
//! indexed `find` over them.
//!
//! * Values are integers, reals, UTF-8 text or bytes ([`TagValue`]). They are stored
//!   with their SQLite storage class, so comparisons follow SQLite's rules: numbers
//!   compare numerically (integer 400 equals real 400.0), text compares byte-wise
//!   (UTF-8, `BINARY` collation), and a comparison never crosses kinds: `iso>=400`
//!   matches numbers only, `camera>=X` text only.
//! * Text that looks numeric: the library stores what it is given (`TagValue::Text("400")`
//!   stays text). Values that arrive as raw bytes, through the mount's `user.*`
//!   extended attributes, are typed by [`TagValue::from_xattr`]: a canonical integer
//!   (`400`, `-3`; not `0400` or `+3`) becomes an integer and a plain decimal that reads
//!   back identically (`2.5`, `400.0`) a real, so `setfattr -v 400` matches `iso>=400`
//!   and `getfattr` still returns exactly the bytes that were set; other UTF-8 is text,
//!   anything else bytes.
//! * `find` runs on the `tags_by_value(name, value)` index: one range scan for one
//!   condition (an equality if there is one), primary-key probes for the others (AND),
//!   then one directory-entry lookup per hit and a walk up the (cached) parent
//!   directories to keep hits below the requested directory. Its cost grows with the
//!   number of entries matching the scanned condition, not with the number of files.
//!
//! Every function runs inside the caller's transaction. Tags go away with their inode
//! (a trigger on `inodes`, see `storage/schema.rs`); `fsck` checks that.

use std::collections::HashMap;

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{params, Connection, OptionalExtension, ToSql};

use crate::error::{Error, Result};
use crate::fs::tree::{self, FileType, InodeId, SetAttr};

/// Longest tag name, in bytes (so that `user.NAME` fits an extended attribute name).
pub const MAX_NAME: usize = 250;
/// Largest tag value, in bytes (the Linux extended attribute limit, so every tag can
/// be read through the mount).
pub const MAX_VALUE: usize = 64 * 1024;

/// A typed tag value.
#[derive(Debug, Clone, PartialEq)]
pub enum TagValue {
    /// A 64-bit integer.
    Int(i64),
    /// A finite float (NaN and infinities are refused).
    Real(f64),
    /// UTF-8 text.
    Text(String),
    /// Raw bytes.
    Bytes(Vec<u8>),
}

impl From<i64> for TagValue {
    fn from(v: i64) -> Self {
        TagValue::Int(v)
    }
}
impl From<i32> for TagValue {
    fn from(v: i32) -> Self {
        TagValue::Int(v as i64)
    }
}
impl From<u32> for TagValue {
    fn from(v: u32) -> Self {
        TagValue::Int(v as i64)
    }
}
impl From<f64> for TagValue {
    fn from(v: f64) -> Self {
        TagValue::Real(v)
    }
}
impl From<&str> for TagValue {
    fn from(v: &str) -> Self {
        TagValue::Text(v.to_string())
    }
}
impl From<String> for TagValue {
    fn from(v: String) -> Self {
        TagValue::Text(v)
    }
}
impl From<Vec<u8>> for TagValue {
    fn from(v: Vec<u8>) -> Self {
        TagValue::Bytes(v)
    }
}
impl From<&[u8]> for TagValue {
    fn from(v: &[u8]) -> Self {
        TagValue::Bytes(v.to_vec())
    }
}

/// The canonical integer `s` spells, if any (`i.to_string() == s`).
fn canonical_int(s: &str) -> Option<i64> {
    s.parse::<i64>().ok().filter(|i| i.to_string() == s)
}

/// The plain decimal `s` spells, if it reads back identically (`2.5`, `-0.75`, `400.0`).
fn canonical_real(s: &str) -> Option<f64> {
    if !s.contains('.') || !s.bytes().all(|b| b.is_ascii_digit() || b == b'.' || b == b'-') {
        return None;
    }
    s.parse::<f64>().ok().filter(|f| f.is_finite() && format!("{f:?}") == s)
}

impl TagValue {
    /// Reads a value as `sqlvault tag NAME=VALUE` does: an integer or real when the
    /// text is one, text otherwise; quotes (`'0400'`, `"400"`) force text.
    pub fn parse(v: &str) -> TagValue {
        parse_quoted(v)
    }

    /// Types raw bytes as the mount does (see the module documentation): canonical
    /// integers and plain decimals become numbers, other UTF-8 text, the rest bytes.
    /// `to_xattr(from_xattr(b)) == b` for every `b`.
    pub fn from_xattr(raw: &[u8]) -> TagValue {
        match std::str::from_utf8(raw) {
            Ok(s) => {
                if let Some(i) = canonical_int(s) {
                    TagValue::Int(i)
                } else if let Some(f) = canonical_real(s) {
                    TagValue::Real(f)
                } else {
                    TagValue::Text(s.to_string())
                }
            }
            Err(_) => TagValue::Bytes(raw.to_vec()),
        }
    }

    /// The bytes the mount shows: numbers in decimal (reals as Rust's `{:?}`, which
    /// always reads back to the same value), text as UTF-8, bytes as they are.
    pub fn to_xattr(&self) -> Vec<u8> {
        match self {
            TagValue::Int(i) => i.to_string().into_bytes(),
            TagValue::Real(f) => format!("{f:?}").into_bytes(),
            TagValue::Text(s) => s.clone().into_bytes(),
            TagValue::Bytes(b) => b.clone(),
        }
    }

    /// Types a string the way a command line does: anything that reads as an integer
    /// or a finite float is a number (`400`, `-3`, `2.5`, `1e3`), the rest is text.
    pub fn parse_guess(s: &str) -> TagValue {
        let t = s.trim();
        if let Ok(i) = t.parse::<i64>() {
            return TagValue::Int(i);
        }
        let numeric_looking =
            t.bytes().any(|b| b.is_ascii_digit()) && t.bytes().all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b));
        match t.parse::<f64>() {
            Ok(f) if numeric_looking && f.is_finite() => TagValue::Real(f),
            _ => TagValue::Text(s.to_string()),
        }
    }

    /// A short name of the value's kind: `int`, `real`, `text` or `bytes`.
    pub fn kind(&self) -> &'static str {
        match self {
            TagValue::Int(_) => "int",
            TagValue::Real(_) => "real",
            TagValue::Text(_) => "text",
            TagValue::Bytes(_) => "bytes",
        }
    }

    fn check(&self) -> Result<()> {
        let len = match self {
            TagValue::Int(_) => 0,
            TagValue::Real(f) if !f.is_finite() => {
                return Err(Error::InvalidArgument { what: format!("tag value {f} (numbers must be finite)") })
            }
            TagValue::Real(_) => 0,
            TagValue::Text(s) => s.len(),
            TagValue::Bytes(b) => b.len(),
        };
        if len > MAX_VALUE {
            return Err(Error::InvalidArgument { what: format!("tag value of {len} bytes (at most 64 KiB)") });
        }
        Ok(())
    }

    pub(crate) fn from_sql(v: ValueRef<'_>) -> Result<TagValue> {
        Ok(match v {
            ValueRef::Integer(i) => TagValue::Int(i),
            ValueRef::Real(f) => TagValue::Real(f),
            // Text from the mount that is not UTF-8 (an old vault's migrated xattrs).
            ValueRef::Text(t) => match std::str::from_utf8(t) {
                Ok(s) => TagValue::Text(s.to_string()),
                Err(_) => TagValue::Bytes(t.to_vec()),
            },
            ValueRef::Blob(b) => TagValue::Bytes(b.to_vec()),
            ValueRef::Null => return Err(Error::damaged("a tag value is NULL")),
        })
    }
}

impl ToSql for TagValue {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            TagValue::Int(i) => ValueRef::Integer(*i),
            TagValue::Real(f) => ValueRef::Real(*f),
            TagValue::Text(s) => ValueRef::Text(s.as_bytes()),
            TagValue::Bytes(b) => ValueRef::Blob(b),
        }))
    }
}

impl std::fmt::Display for TagValue {
    /// Text as is, numbers in decimal, bytes as `0x` followed by hex digits.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TagValue::Int(i) => write!(f, "{i}"),
            TagValue::Real(r) => write!(f, "{r:?}"),
            TagValue::Text(s) => f.write_str(s),
            TagValue::Bytes(b) => {
                f.write_str("0x")?;
                b.iter().try_for_each(|x| write!(f, "{x:02x}"))
            }
        }
    }
}

/// A tag name bound as TEXT even when its bytes are not UTF-8 (names from the mount).
pub(crate) struct NameSql<'a>(pub &'a [u8]);

impl ToSql for NameSql<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(ValueRef::Text(self.0)))
    }
}

/// Checks a tag name: 1..=250 bytes, no NUL.
pub fn check_name(name: &[u8]) -> Result<()> {
    if name.is_empty() || name.contains(&0) {
        return Err(Error::InvalidArgument { what: "a tag name must be non-empty without NUL".into() });
    }
    if name.len() > MAX_NAME {
        return Err(Error::InvalidArgument { what: format!("tag name of {} bytes (at most {MAX_NAME})", name.len()) });
    }
    Ok(())
}

pub(crate) fn name_from_sql(v: ValueRef<'_>) -> Vec<u8> {
    match v {
        ValueRef::Text(t) | ValueRef::Blob(t) => t.to_vec(),
        ValueRef::Integer(i) => i.to_string().into_bytes(),
        ValueRef::Real(f) => f.to_string().into_bytes(),
        ValueRef::Null => Vec::new(),
    }
}

/// Whether `ino` has tag `name` (raw name bytes, as the mount passes them).
pub fn exists(conn: &Connection, ino: InodeId, name: &[u8]) -> Result<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM tags WHERE ino = ?1 AND name = ?2")?
        .query_row(params![ino.0 as i64, NameSql(name)], |_| Ok(()))
        .optional()?
        .is_some())
}

/// The value of tag `name` of `ino`, if set. `StaleHandle` if the inode is gone.
pub fn get(conn: &Connection, ino: InodeId, name: &[u8]) -> Result<Option<TagValue>> {
    let v = conn
        .prepare_cached("SELECT value FROM tags WHERE ino = ?1 AND name = ?2")?
        .query_row(params![ino.0 as i64, NameSql(name)], |r| Ok(TagValue::from_sql(r.get_ref(0)?)))
        .optional()?;
    match v {
        Some(v) => Ok(Some(v?)),
        None => {
            tree::attr(conn, ino)?;
            Ok(None)
        }
    }
}

/// Sets every `(name, value)` on `ino` (replacing existing values) and updates its
/// ctime once.
pub fn set(conn: &Connection, ino: InodeId, tags: &[(&[u8], &TagValue)]) -> Result<()> {
    for (name, value) in tags {
        check_name(name)?;
        value.check()?;
    }
    tree::attr(conn, ino)?;
    let mut stmt = conn.prepare_cached("INSERT OR REPLACE INTO tags(ino, name, value) VALUES (?1, ?2, ?3)")?;
    for (name, value) in tags {
        stmt.execute(params![ino.0 as i64, NameSql(name), value])?;
    }
    if !tags.is_empty() {
        tree::set_attr(conn, ino, &SetAttr::default())?;
    }
    Ok(())
}

/// Every tag of `ino`, in name order (raw name bytes).
pub fn list(conn: &Connection, ino: InodeId) -> Result<Vec<(Vec<u8>, TagValue)>> {
    tree::attr(conn, ino)?;
    let mut stmt = conn.prepare_cached("SELECT name, value FROM tags WHERE ino = ?1 ORDER BY name")?;
    let mut rows = stmt.query([ino.0 as i64])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        out.push((name_from_sql(r.get_ref(0)?), TagValue::from_sql(r.get_ref(1)?)?));
    }
    Ok(out)
}

/// Names of the tags of `ino`, in name order.
pub fn names(conn: &Connection, ino: InodeId) -> Result<Vec<Vec<u8>>> {
    let mut stmt = conn.prepare_cached("SELECT name FROM tags WHERE ino = ?1 ORDER BY name")?;
    let mut rows = stmt.query([ino.0 as i64])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        out.push(name_from_sql(r.get_ref(0)?));
    }
    Ok(out)
}

/// Removes the named tags from `ino`; returns how many existed. Updates ctime if any did.
pub fn remove(conn: &Connection, ino: InodeId, names: &[&[u8]]) -> Result<usize> {
    tree::attr(conn, ino)?;
    let mut stmt = conn.prepare_cached("DELETE FROM tags WHERE ino = ?1 AND name = ?2")?;
    let mut n = 0;
    for name in names {
        n += stmt.execute(params![ino.0 as i64, NameSql(name)])?;
    }
    if n > 0 {
        tree::set_attr(conn, ino, &SetAttr::default())?;
    }
    Ok(n)
}

/// Deletes every tag of `ino` (the inode itself is being deleted).
pub fn remove_all(conn: &Connection, ino: InodeId) -> Result<()> {
    conn.prepare_cached("DELETE FROM tags WHERE ino = ?1")?.execute([ino.0 as i64])?;
    Ok(())
}

/// A comparison operator of a [`Condition`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// The tag is set, whatever its value.
    Exists,
    /// Equal.
    Eq,
    /// Not equal (the tag must be set).
    Ne,
    /// Less than.
    Lt,
    /// Less than or equal.
    Le,
    /// Greater than.
    Gt,
    /// Greater than or equal.
    Ge,
}

impl Op {
    fn sql(self) -> &'static str {
        match self {
            Op::Exists => "",
            Op::Eq => "=",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }
}

/// One condition of a [`Query`]: tag `name` compared with `value`.
///
/// `!=` matches entries that carry the tag with any other value (of any kind); an
/// entry without the tag matches no condition.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// Tag name.
    pub name: String,
    /// Comparison.
    pub op: Op,
    /// Value compared with (ignored by `Exists`).
    pub value: TagValue,
}

impl Condition {
    /// A condition `name op value`.
    pub fn new(name: impl Into<String>, op: Op, value: impl Into<TagValue>) -> Condition {
        Condition { name: name.into(), op, value: value.into() }
    }

    /// Parses `name`, `name=value`, `name!=value`, `name<value`, `name<=value`,
    /// `name>value` or `name>=value`. The value is typed by [`TagValue::parse_guess`]
    /// unless quoted (`name='400'`, `name="400"`: text).
    pub fn parse(s: &str) -> Result<Condition> {
        let pos = s.find(['=', '!', '<', '>']);
        let Some(pos) = pos else {
            check_name(s.as_bytes())?;
            return Ok(Condition { name: s.to_string(), op: Op::Exists, value: TagValue::Int(0) });
        };
        let (name, rest) = s.split_at(pos);
        let (op, value) = [("!=", Op::Ne), ("<=", Op::Le), (">=", Op::Ge), ("=", Op::Eq), ("<", Op::Lt), (">", Op::Gt)]
            .iter()
            .find_map(|(tok, op)| rest.strip_prefix(tok).map(|v| (*op, v)))
            .ok_or_else(|| Error::InvalidArgument { what: format!("tag condition {s:?}: unknown operator") })?;
        check_name(name.as_bytes()).map_err(|_| Error::InvalidArgument {
            what: format!("tag condition {s:?}: missing or invalid tag name"),
        })?;
        // `iso>>4`, `iso=<4`: a second operator is a typo, not text to compare with
        // (which would silently match nothing). Quote it to compare with such text.
        if value.starts_with(['=', '!', '<', '>']) {
            return Err(Error::InvalidArgument { what: format!("tag condition {s:?}: unknown operator") });
        }
        Ok(Condition { name: name.to_string(), op, value: parse_quoted(value) })
    }
}

/// Text inside matching single or double quotes, otherwise [`TagValue::parse_guess`].
pub fn parse_quoted(v: &str) -> TagValue {
    for q in ['\'', '"'] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return TagValue::Text(v[1..v.len() - 1].to_string());
        }
    }
    TagValue::parse_guess(v)
}

/// What [`Vault::find`](crate::Vault::find) looks for: entries below a directory whose tags satisfy every
/// condition (AND), optionally whose name matches a glob.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// Conditions, all of which must hold.
    pub conditions: Vec<Condition>,
    /// SQLite `GLOB` pattern on the entry's own name (`*.jpg`, `IMG_[0-9]*`), case-sensitive.
    pub name_glob: Option<String>,
}

impl Query {
    /// An empty query (add conditions before `find`).
    pub fn new() -> Query {
        Query::default()
    }
    /// Adds a condition (AND).
    pub fn tag(mut self, c: Condition) -> Query {
        self.conditions.push(c);
        self
    }
    /// Adds a condition parsed by [`Condition::parse`].
    pub fn parse_tag(self, s: &str) -> Result<Query> {
        Ok(self.tag(Condition::parse(s)?))
    }
    /// Keeps only names matching the glob (`*.jpg`).
    pub fn name(mut self, glob: impl Into<String>) -> Query {
        self.name_glob = Some(glob.into());
        self
    }
}

/// One hit of [`Vault::find`](crate::Vault::find): a name below the searched directory (a file with several hard
/// links below it is reported once per name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Path of the hit.
    pub path: String,
    /// Its inode.
    pub ino: InodeId,
    /// Its type.
    pub kind: FileType,
}

/// The SQL condition on `alias.value` for one condition, with the kind bounds that keep
/// a range comparison inside the value's kind (numbers < text < blobs in SQLite).
fn value_sql(alias: &str, c: &Condition, p: usize) -> String {
    let v = format!("{alias}.value");
    let (lower, upper) = match c.value {
        TagValue::Int(_) | TagValue::Real(_) => (None, Some("''")),
        TagValue::Text(_) => (Some("''"), Some("x''")),
        TagValue::Bytes(_) => (Some("x''"), None),
    };
    match c.op {
        Op::Exists => String::new(),
        Op::Eq | Op::Ne => format!(" AND {v} {} ?{p}", c.op.sql()),
        Op::Lt | Op::Le => {
            format!(" AND {v} {} ?{p}{}", c.op.sql(), lower.map(|l| format!(" AND {v} >= {l}")).unwrap_or_default())
        }
        Op::Gt | Op::Ge => {
            format!(" AND {v} {} ?{p}{}", c.op.sql(), upper.map(|u| format!(" AND {v} < {u}")).unwrap_or_default())
        }
    }
}

/// Calls `each` for every entry below directory `base` (shown as `base_path`) matching
/// `query`, in index order, until it returns `false`. At least one condition is needed.
pub fn find(
    conn: &Connection,
    base: InodeId,
    base_path: &str,
    query: &Query,
    each: &mut dyn FnMut(Found) -> Result<bool>,
) -> Result<()> {
    if query.conditions.is_empty() {
        return Err(Error::InvalidArgument { what: "find needs at least one tag condition".into() });
    }
    for c in &query.conditions {
        check_name(c.name.as_bytes())?;
        c.value.check()?;
    }
    if tree::attr(conn, base)?.kind != FileType::Dir {
        return Err(Error::NotADirectory { path: base_path.into() });
    }
    let (sql, binds) = find_sql(query);
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query(binds.as_slice())?;
    let mut dirs = DirPaths { base, base_path: base_path.trim_end_matches('/').to_string(), cache: HashMap::new() };
    while let Some(r) = rows.next()? {
        let parent = InodeId(r.get::<_, i64>(0)? as u64);
        let name = name_from_sql(r.get_ref(1)?);
        let ino = InodeId(r.get::<_, i64>(2)? as u64);
        let Some(dir) = dirs.path(conn, parent)? else { continue };
        let kind = tree::attr(conn, ino)?.kind;
        let found = Found { path: format!("{dir}/{}", String::from_utf8_lossy(&name)), ino, kind };
        if !each(found)? {
            break;
        }
    }
    Ok(())
}

/// The statement `find` runs: `(parent, name, ino)` of every directory entry whose inode
/// satisfies every condition, with its parameters.
fn find_sql(query: &Query) -> (String, Vec<&dyn ToSql>) {
    // Drive the scan from an equality if there is one (usually the most selective).
    let mut order: Vec<&Condition> = query.conditions.iter().collect();
    order.sort_by_key(|c| match c.op {
        Op::Eq => 0,
        Op::Lt | Op::Le | Op::Gt | Op::Ge => 1,
        Op::Exists | Op::Ne => 2,
    });
    let mut binds: Vec<&dyn ToSql> = Vec::new();
    let mut sql = String::from("SELECT d.parent, d.name, t0.ino FROM tags t0 JOIN dirents d ON d.ino = t0.ino WHERE ");
    for (i, c) in order.iter().enumerate() {
        let alias = format!("t{i}");
        binds.push(&c.name);
        let mut cond = format!("{alias}.name = ?{}", binds.len());
        if c.op != Op::Exists {
            binds.push(&c.value);
            cond.push_str(&value_sql(&alias, c, binds.len()));
        }
        if i == 0 {
            sql.push_str(&cond);
        } else {
            sql.push_str(&format!(" AND EXISTS (SELECT 1 FROM tags {alias} WHERE {alias}.ino = t0.ino AND {cond})"));
        }
    }
    if let Some(g) = &query.name_glob {
        binds.push(g);
        sql.push_str(&format!(" AND CAST(d.name AS TEXT) GLOB ?{}", binds.len()));
    }
    (sql, binds)
}

/// Paths of directories below `base`, cached: a hit's directory is usually shared by
/// many hits, so the walk up happens once per directory.
struct DirPaths {
    base: InodeId,
    base_path: String,
    /// `None`: not below `base`.
    cache: HashMap<InodeId, Option<String>>,
}

impl DirPaths {
    fn path(&mut self, conn: &Connection, dir: InodeId) -> Result<Option<String>> {
        // Walk up until a known directory, the base or the root; then fill the cache
        // on the way back down.
        let mut chain: Vec<(InodeId, Vec<u8>)> = Vec::new();
        let mut cur = dir;
        let mut top = loop {
            if cur == self.base {
                break Some(self.base_path.clone());
            }
            if let Some(known) = self.cache.get(&cur) {
                break known.clone();
            }
            if cur == InodeId::ROOT {
                break None;
            }
            let Some((parent, name)) = tree::dir_entry_of(conn, cur)? else { break None };
            chain.push((cur, name));
            cur = parent;
            if chain.len() > 100_000 {
                return Err(Error::damaged("directory chain does not reach the root"));
            }
        };
        while let Some((ino, name)) = chain.pop() {
            top = top.map(|p| format!("{p}/{}", String::from_utf8_lossy(&name)));
            self.cache.insert(ino, top.clone());
        }
        Ok(top)
    }
}

/// Sets tags given with `str` names on `ino`.
pub(crate) fn set_tags_ino<N: AsRef<str>>(conn: &Connection, ino: InodeId, tags: &[(N, TagValue)]) -> Result<()> {
    let refs: Vec<(&[u8], &TagValue)> = tags.iter().map(|(n, v)| (n.as_ref().as_bytes(), v)).collect();
    set(conn, ino, &refs)
}

/// Tags with their names as text (lossy for names that are not UTF-8).
pub(crate) fn named(list: Vec<(Vec<u8>, TagValue)>) -> Vec<(String, TagValue)> {
    list.into_iter().map(|(n, v)| (String::from_utf8_lossy(&n).into_owned(), v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xattr_bytes_round_trip_and_canonical_numbers_become_numbers() {
        for (raw, kind) in [
            (&b"400"[..], "int"),
            (b"-3", "int"),
            (b"0", "int"),
            (b"0400", "text"),
            (b"+3", "text"),
            (b"-0", "text"),
            (b"9223372036854775808", "text"),
            (b"2.5", "real"),
            (b"400.0", "real"),
            (b"-0.75", "real"),
            (b"2.50", "text"),
            (b"1e3", "text"),
            (b".5", "text"),
            (b"NaN", "text"),
            (b"X100V", "text"),
            (b"", "text"),
            (b"\xff\xfe", "bytes"),
        ] {
            let v = TagValue::from_xattr(raw);
            assert_eq!(v.kind(), kind, "{:?}", String::from_utf8_lossy(raw));
            assert_eq!(v.to_xattr(), raw);
        }
    }

    #[test]
    fn command_line_values_are_typed_by_guess_and_quotes_force_text() {
        assert_eq!(TagValue::parse_guess("400"), TagValue::Int(400));
        assert_eq!(TagValue::parse_guess("0400"), TagValue::Int(400));
        assert_eq!(TagValue::parse_guess("2.5"), TagValue::Real(2.5));
        assert_eq!(TagValue::parse_guess("1e3"), TagValue::Real(1000.0));
        assert_eq!(TagValue::parse_guess("inf"), TagValue::Text("inf".into()));
        assert_eq!(TagValue::parse_guess("X100V"), TagValue::Text("X100V".into()));
        assert_eq!(parse_quoted("'400'"), TagValue::Text("400".into()));
        assert_eq!(parse_quoted("\"a b\""), TagValue::Text("a b".into()));
    }

    /// Every query shape runs on indexes: the first condition as a range of
    /// `tags_by_value`, the others and the directory entries as key lookups; never a
    /// scan of a whole table.
    #[test]
    fn find_uses_the_value_index_and_never_scans_a_table() {
        let c = Connection::open_in_memory().unwrap();
        crate::storage::schema::create(&c).unwrap();
        for q in [
            Query::new().parse_tag("camera=X100V").unwrap(),
            Query::new().parse_tag("iso>=400").unwrap(),
            Query::new().parse_tag("iso<2.5").unwrap().parse_tag("camera").unwrap().name("*.jpg"),
            Query::new().parse_tag("camera!=X").unwrap().parse_tag("iso>'3'").unwrap(),
            Query::new().tag(Condition::new("thumb", Op::Ge, vec![1u8])),
        ] {
            let (sql, binds) = find_sql(&q);
            let mut stmt = c.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let plan: Vec<String> =
                stmt.query_map(binds.as_slice(), |r| r.get::<_, String>(3)).unwrap().map(|r| r.unwrap()).collect();
            let plan = plan.join("; ");
            assert!(plan.contains("INDEX tags_by_value (name=?"), "{q:?}: {plan}");
            assert!(!plan.contains("SCAN"), "{q:?}: {plan}");
        }
    }

    #[test]
    fn conditions_parse_every_operator() {
        let c = Condition::parse("iso>=400").unwrap();
        assert_eq!((c.name.as_str(), c.op, c.value), ("iso", Op::Ge, TagValue::Int(400)));
        assert_eq!(Condition::parse("a!=x").unwrap().op, Op::Ne);
        assert_eq!(Condition::parse("a<=1").unwrap().op, Op::Le);
        assert_eq!(Condition::parse("a<1").unwrap().op, Op::Lt);
        assert!(Condition::parse("iso>>4").is_err(), "a doubled operator is a typo");
        assert!(Condition::parse("iso=<4").is_err());
        assert_eq!(Condition::parse("a='>4'").unwrap().value, TagValue::Text(">4".into()));
        assert_eq!(Condition::parse("a>1").unwrap().op, Op::Gt);
        assert_eq!(Condition::parse("a=").unwrap().value, TagValue::Text(String::new()));
        assert_eq!(Condition::parse("camera").unwrap().op, Op::Exists);
        assert!(Condition::parse("=3").is_err());
        assert!(Condition::parse("a!3").is_err());
    }
}
