//! `tag`, `tags`, `find` and `rec`: tags and record collections from the command line.
//!
//! Values typed on the command line are numbers when they read as numbers (`iso=400`,
//! `ratio=2.5`) unless quoted (`iso='400'`) or `--text` is given; see
//! `sqlvault::TagValue::parse_guess`. Listings stream: `find` and `rec ls` print as
//! they read, a page at a time, whatever the number of hits.

use std::io::{Read, Write};
use std::ops::Bound;
use std::path::PathBuf;

use clap::Subcommand;
use serde_json::{json, Value};
use sqlvault::{Query, TagValue};

use crate::find;
use crate::output::{line, JsonArray};
use crate::{CliError, Ctx, Exit};

#[derive(Subcommand, Debug)]
pub enum MetaCommand {
    /// Set tags on files or directories: PATH... NAME=VALUE... (numbers unless quoted or --text).
    ///
    /// The first argument after VAULT is a path; the following ones that start with `/`
    /// are more paths, the rest are tags. With --from, every argument is a tag. All paths
    /// are tagged in one transaction: all of them or, on an error, none.
    Tag {
        /// The vault file.
        vault: PathBuf,
        /// PATH... then NAME=VALUE pairs (with --remove: NAMEs).
        #[arg(required = true, value_name = "PATH... NAME=VALUE")]
        items: Vec<String>,
        /// Tag the paths listed in FILE, one a line (`-`: standard input).
        #[arg(long, value_name = "FILE")]
        from: Option<PathBuf>,
        /// Store every value as text, even `400`.
        #[arg(long)]
        text: bool,
        /// Remove the named tags instead.
        #[arg(long, conflicts_with = "text")]
        remove: bool,
    },
    /// Show the tags of a file or directory (NAME=VALUE; text that reads as a number in quotes).
    Tags {
        /// The vault file.
        vault: PathBuf,
        /// File or directory.
        path: String,
        /// Print the tags as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Find entries below DIR by tags (indexed), name or modification time.
    ///
    /// With --tag, the tag index drives the search; without, the tree below DIR is
    /// walked. Every condition given must hold.
    Find {
        /// The vault file.
        vault: PathBuf,
        /// Directory to search below.
        #[arg(default_value = "/")]
        dir: String,
        /// NAME, NAME=V, NAME!=V, NAME<V, NAME<=V, NAME>V or NAME>=V; repeat for AND.
        #[arg(long = "tag", value_name = "COND", required_unless_present_any = ["name", "newer", "older"])]
        tags: Vec<String>,
        /// Only entries whose name matches this glob (`*.jpg`; case-sensitive).
        #[arg(long, value_name = "GLOB")]
        name: Option<String>,
        /// Only entries modified after WHEN: an age (30m, 2h, 7d, 2w) or a local date (2026-11-01, or 2026-11-01 08:00).
        #[arg(long, value_name = "WHEN")]
        newer: Option<String>,
        /// Only entries modified before WHEN (same forms as --newer).
        #[arg(long, value_name = "WHEN")]
        older: Option<String>,
        /// One JSON object per hit and line, in a JSON array (streamed).
        #[arg(long)]
        json: bool,
    },
    /// Record collections: put, get, del, ls.
    #[command(subcommand)]
    Rec(RecCommand),
}

#[derive(Subcommand, Debug)]
pub enum RecCommand {
    /// Store VALUE (or standard input if VALUE is `-` or missing) under KEY.
    Put {
        /// The vault file.
        vault: PathBuf,
        /// Collection name.
        collection: String,
        /// Record key.
        key: String,
        /// The value (`-` or missing: standard input).
        value: Option<String>,
    },
    /// Write the value of KEY to standard output.
    Get {
        /// The vault file.
        vault: PathBuf,
        /// Collection name.
        collection: String,
        /// Record key.
        key: String,
    },
    /// Delete KEY.
    Del {
        /// The vault file.
        vault: PathBuf,
        /// Collection name.
        collection: String,
        /// Record key.
        key: String,
    },
    /// List collections with their counts, or the keys of COLLECTION.
    Ls {
        /// The vault file.
        vault: PathBuf,
        /// Collection to list (default: list the collections).
        collection: Option<String>,
        /// Only keys starting with this prefix.
        #[arg(long)]
        prefix: Option<String>,
        /// Print the number of (matching) records only.
        #[arg(long)]
        count: bool,
        /// Show values too (as text, or hex if not UTF-8).
        #[arg(short, long)]
        long: bool,
        /// One JSON object per record and line, in a JSON array (streamed).
        #[arg(long)]
        json: bool,
    },
}

/// A tag value as JSON: numbers and text as themselves, bytes as `{"hex": ".."}`.
pub fn value_json(v: &TagValue) -> Value {
    match v {
        TagValue::Int(i) => json!(i),
        TagValue::Real(f) => json!(f),
        TagValue::Text(s) => json!(s),
        TagValue::Bytes(b) => json!({ "hex": hex::encode(b) }),
    }
}

/// A value as `tags` prints it, in the syntax `tag` reads: text that `tag` would take
/// for a number (`'400'`, `'0400'`), that is itself quoted, or that looks like the
/// `0x..` form of bytes is shown in single quotes, so `iso=400` (a number) and
/// `iso='400'` (text), or `b=0x00ff` (bytes) and `b='0x00ff'` (text), are told apart.
pub fn value_text(v: &TagValue) -> String {
    match v {
        TagValue::Text(s) if sqlvault::TagValue::parse(s) != *v || s.starts_with("0x") => format!("'{s}'"),
        other => other.to_string(),
    }
}

/// Bytes as JSON: a string if UTF-8, else `{"hex": ".."}`.
fn bytes_json(b: &[u8]) -> Value {
    match std::str::from_utf8(b) {
        Ok(s) => json!(s),
        Err(_) => json!({ "hex": hex::encode(b) }),
    }
}

fn bytes_text(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) => s.to_string(),
        Err(_) => format!("0x{}", hex::encode(b)),
    }
}

/// Parses `NAME=VALUE` for `tag`.
pub fn parse_assignment(s: &str, text: bool) -> Result<(String, TagValue), CliError> {
    let (name, value) = s.split_once('=').ok_or_else(|| CliError::usage(format!("{s:?} is not NAME=VALUE")))?;
    if name.is_empty() {
        return Err(CliError::usage(format!("{s:?}: empty tag name")));
    }
    if let Some(c) = name.chars().find(|c| matches!(c, '!' | '<' | '>')) {
        // `find --tag` splits NAME from the operator at the first of these.
        return Err(CliError::usage(format!("{s:?}: a tag name with {c:?} could not be searched with find")));
    }
    let value = if text { TagValue::Text(value.to_string()) } else { sqlvault::TagValue::parse(value) };
    Ok((name.to_string(), value))
}

pub fn run(ctx: &Ctx, cmd: MetaCommand) -> Result<Exit, CliError> {
    match cmd {
        MetaCommand::Tag { vault, items, from, text, remove } => {
            let (paths, tags) = split_tag_items(items, from.as_deref())?;
            if tags.is_empty() {
                return Err(CliError::usage(format!("tag: no {} given", if remove { "NAME" } else { "NAME=VALUE" })));
            }
            let v = ctx.open(&vault)?;
            if remove {
                let n = v.transaction(|tx| paths.iter().try_fold(0, |n, p| tx.remove_tags(p, &tags).map(|k| n + k)))?;
                note!("removed {n} tags from {} paths", paths.len());
            } else {
                let parsed = tags.iter().map(|t| parse_assignment(t, text)).collect::<Result<Vec<_>, _>>()?;
                v.transaction(|tx| paths.iter().try_for_each(|p| tx.set_tags(p, &parsed)))?;
                if paths.len() > 1 {
                    note!("tagged {} paths", paths.len());
                }
            }
            v.close()?;
        }
        MetaCommand::Tags { vault, path, json } => {
            let v = ctx.open(&vault)?;
            let tags = v.tags(&path)?;
            if json {
                let obj: serde_json::Map<String, Value> =
                    tags.iter().map(|(n, t)| (n.clone(), value_json(t))).collect();
                crate::print_json(&obj)?;
            } else {
                let stdout = std::io::stdout();
                let mut w = stdout.lock();
                for (n, t) in &tags {
                    if !line(&mut w, &format!("{n}={}", value_text(t)))? {
                        break;
                    }
                }
            }
        }
        MetaCommand::Find { vault, dir, tags, name, newer, older, json } => {
            let mut q = Query::new();
            for t in &tags {
                q = q.parse_tag(t).map_err(|e| CliError::usage(e.to_string()))?;
            }
            let when = |w: Option<String>| w.map(|w| crate::ui::parse_when(&w).map_err(CliError::usage)).transpose();
            let times = find::Times { newer: when(newer)?, older: when(older)? };
            let glob = name.as_deref().map(find::glob).transpose()?;
            if let Some(g) = name {
                q = q.name(g);
            }
            let v = ctx.open(&vault)?;
            if q.conditions.is_empty() {
                find::walk(&v, &dir, glob.as_ref(), times, json)?;
            } else {
                find::by_tags(&v, &dir, &q, times, json)?;
            }
        }
        MetaCommand::Rec(cmd) => return rec(ctx, cmd),
    }
    Ok(Exit::Success)
}

/// `tag`'s arguments as paths and tags: the first argument is a path (unless `--from`
/// gives them), the following ones starting with `/` too, the rest are tags.
fn split_tag_items(items: Vec<String>, from: Option<&std::path::Path>) -> Result<(Vec<String>, Vec<String>), CliError> {
    let mut items = items.into_iter().peekable();
    let mut paths = Vec::new();
    match from {
        Some(file) => paths = read_path_list(file)?,
        None => {
            paths.extend(items.next());
            while let Some(p) = items.next_if(|i| i.starts_with('/')) {
                paths.push(p);
            }
        }
    }
    Ok((paths, items.collect()))
}

/// Paths one a line from `file` (`-`: standard input); blank lines are skipped.
fn read_path_list(file: &std::path::Path) -> Result<Vec<String>, CliError> {
    let text = if file.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| CliError { code: Exit::Environment, message: format!("standard input: {e}") })?;
        s
    } else {
        std::fs::read_to_string(file).map_err(|e| CliError::host(file, e))?
    };
    let paths: Vec<String> =
        text.lines().map(|l| l.trim_end_matches('\r')).filter(|l| !l.is_empty()).map(str::to_string).collect();
    if paths.is_empty() {
        return Err(CliError::usage(format!("--from {}: no paths", file.display())));
    }
    Ok(paths)
}

fn not_found(coll: &str, key: &str) -> CliError {
    CliError { code: Exit::Tree, message: format!("no record {key:?} in collection {coll:?}") }
}

fn rec(ctx: &Ctx, cmd: RecCommand) -> Result<Exit, CliError> {
    match cmd {
        RecCommand::Put { vault, collection, key, value } => {
            let data = match value.as_deref() {
                None | Some("-") => {
                    if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
                        // A forgotten VALUE would otherwise look like a hang.
                        eprintln!("reading the value of {key:?} from standard input; end it with Ctrl-D");
                    }
                    let mut buf = Vec::new();
                    let limit = sqlvault::Records::MAX_VALUE as u64 + 1;
                    std::io::stdin()
                        .lock()
                        .take(limit)
                        .read_to_end(&mut buf)
                        .map_err(|e| CliError { code: Exit::Environment, message: format!("standard input: {e}") })?;
                    if buf.len() as u64 >= limit {
                        return Err(CliError {
                            code: Exit::Tree,
                            message: format!(
                                "record value too large (at most {} MiB)",
                                sqlvault::Records::MAX_VALUE >> 20
                            ),
                        });
                    }
                    buf
                }
                Some(s) => s.as_bytes().to_vec(),
            };
            let v = ctx.open(&vault)?;
            v.records(&collection).put(&key, &data)?;
            v.close()?;
        }
        RecCommand::Get { vault, collection, key } => {
            let v = ctx.open(&vault)?;
            let data = v.records(&collection).get(&key)?.ok_or_else(|| not_found(&collection, &key))?;
            let stdout = std::io::stdout();
            let mut w = stdout.lock();
            match w.write_all(&data).and_then(|_| w.flush()) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                Err(e) => return Err(CliError::stdout(e)),
            }
        }
        RecCommand::Del { vault, collection, key } => {
            let v = ctx.open(&vault)?;
            if !v.records(&collection).delete(&key)? {
                return Err(not_found(&collection, &key));
            }
            v.close()?;
        }
        RecCommand::Ls { vault, collection: None, prefix, count, long: _, json } => {
            if prefix.is_some() {
                return Err(CliError::usage("--prefix needs a COLLECTION"));
            }
            let v = ctx.open(&vault)?;
            let cols = v.collections()?;
            if count {
                outln!("{}", cols.len());
            } else if json {
                let list: Vec<Value> = cols.iter().map(|(n, c)| json!({ "collection": n, "records": c })).collect();
                crate::print_json(&list)?;
            } else {
                let stdout = std::io::stdout();
                let mut w = stdout.lock();
                for (n, c) in &cols {
                    if !line(&mut w, &format!("{n}\t{c}"))? {
                        break;
                    }
                }
            }
        }
        RecCommand::Ls { vault, collection: Some(coll), prefix, count, long, json } => {
            let v = ctx.open(&vault)?;
            let r = v.records(&coll);
            let range = match &prefix {
                Some(p) => sqlvault::records::prefix_range(p.as_bytes()),
                None => (Bound::Unbounded, Bound::Unbounded),
            };
            if count {
                let n = r.count_range(&range)?;
                if json {
                    crate::print_json(&json!({ "collection": coll, "records": n }))?;
                } else {
                    outln!("{n}");
                }
                return Ok(Exit::Success);
            }
            let scan = if long || json { r.scan(range) } else { r.scan_keys(range) };
            let stdout = std::io::stdout();
            let mut w = stdout.lock();
            let mut arr = JsonArray::default();
            if json && !JsonArray::start(&mut w)? {
                return Ok(Exit::Success);
            }
            for item in scan {
                let (k, val) = item?;
                let open = if json {
                    arr.push(&mut w, &json!({ "key": bytes_json(&k), "value": bytes_json(&val) }))?
                } else if long {
                    line(&mut w, &format!("{}\t{}", bytes_text(&k), bytes_text(&val)))?
                } else {
                    line(&mut w, &bytes_text(&k))?
                };
                if !open {
                    return Ok(Exit::Success);
                }
            }
            if json {
                arr.finish(&mut w)?;
            }
        }
    }
    Ok(Exit::Success)
}
