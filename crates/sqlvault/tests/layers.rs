//! The library's modules depend one way: each module may use modules of its own layer
//! or of a layer below it, and the module graph has no cycle. The graph is read from
//! the source (`crate::` and `super::` paths outside unit-test modules), so a new
//! upward import fails here, not in review.
//!
//! And each table is written by the module that owns it (`OWNERS`), or by a module
//! that `ALLOWED` names with its reason (`DYNAMIC`: modules that write tables named at
//! run time). The writes are read from the source too: every `INSERT`, `REPLACE`,
//! `UPDATE` and `DELETE` statement outside unit-test modules, the triggers of
//! `storage/schema.rs` counting as that module's.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Layers from the bottom up, by module path prefix.
const LAYERS: &[(&str, usize)] = &[
    ("error", 0),
    ("interrupt", 0),
    ("ops", 0),
    ("keys", 1),
    ("storage", 2),
    ("fs", 3),
    ("meta", 4),
    ("snapshot", 5),
    ("fsck", 5),
    ("remote", 5),
    ("vault", 6),
    ("crate", 7),
];

fn layer(module: &str) -> usize {
    let top = module.split("::").next().unwrap_or(module);
    LAYERS.iter().find(|(p, _)| *p == top).map(|(_, l)| *l).unwrap_or_else(|| panic!("module {module} has no layer"))
}

/// Module path of a source file: `fs/tree.rs` -> `fs::tree`, `vault/mod.rs` -> `vault`.
fn module_of(rel: &Path) -> String {
    let s = rel.with_extension("").to_string_lossy().replace('/', "::");
    match s.as_str() {
        "lib" => "crate".into(),
        _ => s.strip_suffix("::mod").unwrap_or(&s).to_string(),
    }
}

fn sources(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, root, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let text = std::fs::read_to_string(&p).unwrap();
            out.push((module_of(p.strip_prefix(root).unwrap()), text));
        }
    }
}

/// The code a build without `cfg(test)` sees: unit-test modules and comments dropped.
fn non_test_code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(l) = lines.next() {
        if l.trim() == "#[cfg(test)]" && lines.peek().is_some_and(|n| n.trim_start().starts_with("mod tests")) {
            break;
        }
        let code = l.split("//").next().unwrap_or("");
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// The longest known module that `path` (segments after `crate::`) names.
fn resolve(path: &[&str], modules: &BTreeSet<String>) -> String {
    for n in (1..=path.len()).rev() {
        let cand = path[..n].join("::");
        if modules.contains(&cand) {
            return cand;
        }
    }
    "crate".into()
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let files = library_sources();
    let modules: BTreeSet<String> = files.iter().map(|(m, _)| m.clone()).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, text) in &files {
        let code = non_test_code(text);
        let deps = edges.entry(module.clone()).or_default();
        let mut rest = code.as_str();
        while let Some(i) = rest.find("crate::").into_iter().chain(rest.find("super::")).min() {
            let is_super = rest[i..].starts_with("super::");
            let after = &rest[i + 7..];
            let segs: Vec<&str> = after
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .next()
                .unwrap_or("")
                .split("::")
                .filter(|s| !s.is_empty() && s.chars().next().is_some_and(|c| c.is_lowercase()))
                .collect();
            let mut full: Vec<&str> = Vec::new();
            if is_super {
                let parent: Vec<&str> = module.split("::").collect();
                full.extend(&parent[..parent.len().saturating_sub(1)]);
            }
            full.extend(segs);
            let dep = resolve(&full, &modules);
            if &dep != module && !module.starts_with(&format!("{dep}::")) {
                deps.insert(dep);
            }
            rest = after;
        }
    }
    edges
}

#[test]
fn every_import_points_down_or_sideways() {
    let mut bad = Vec::new();
    for (m, deps) in graph() {
        for d in deps {
            if layer(&d) > layer(&m) {
                bad.push(format!("{m} (layer {}) uses {d} (layer {})", layer(&m), layer(&d)));
            }
        }
    }
    assert!(bad.is_empty(), "upward imports:\n{}", bad.join("\n"));
}

#[test]
fn the_module_graph_has_no_cycle() {
    let g = graph();
    // Depth-first search with colours; a grey node reached again closes a cycle.
    fn visit<'a>(
        n: &'a str,
        g: &'a BTreeMap<String, BTreeSet<String>>,
        colour: &mut BTreeMap<&'a str, u8>,
        stack: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        match colour.get(n) {
            Some(2) => return None,
            Some(1) => {
                let at = stack.iter().position(|s| *s == n).unwrap_or(0);
                let mut cycle: Vec<String> = stack[at..].iter().map(|s| s.to_string()).collect();
                cycle.push(n.to_string());
                return Some(cycle);
            }
            _ => {}
        }
        colour.insert(n, 1);
        stack.push(n);
        for d in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(d, g, colour, stack) {
                return Some(c);
            }
        }
        stack.pop();
        colour.insert(n, 2);
        None
    }
    let mut colour = BTreeMap::new();
    for n in g.keys() {
        if let Some(cycle) = visit(n, &g, &mut colour, &mut Vec::new()) {
            panic!("import cycle: {}", cycle.join(" -> "));
        }
    }
    assert!(g.len() > 20, "the graph should hold every module, found {}", g.len());
}

// ---- Which module may write which table.

/// The module that owns each table of the vault: the one that may write it (it and
/// its submodules). Every table `storage/schema.rs` creates must be here.
const OWNERS: &[(&str, &str)] = &[
    ("meta", "storage::schema"),
    // Migration 12's new chunk maps, renamed to file_chunks and snap_chunks once filled.
    ("file_chunks_12", "storage::schema"),
    ("snap_chunks_12", "storage::schema"),
    ("sqlite_sequence", "storage::commit"),
    ("inodes", "fs::tree"),
    ("dirents", "fs::tree"),
    ("orphans", "fs::tree"),
    ("chunks", "fs::chunks"),
    ("chunk_data", "fs::chunks"),
    ("chunk_trash", "fs::chunks"),
    ("chunk_log", "fs::chunks"),
    ("chunk_holes", "fs::chunks"),
    ("file_chunks", "fs::chunks"),
    ("chunk_shares", "fs::chunks"),
    ("chunk_holds", "fs::chunks"),
    ("tags", "meta::tags"),
    ("xattrs", "meta::xattr"),
    ("record_collections", "meta::records"),
    ("records", "meta::records"),
    ("sqlvault_app_migrations", "meta::appsql"),
    ("snapshots", "snapshot"),
    ("snap_inodes", "snapshot"),
    ("snap_dirents", "snapshot"),
    ("snap_chunks", "snapshot"),
    ("snap_holds", "snapshot"),
    ("snap_tags", "snapshot"),
    ("snap_xattrs", "snapshot"),
    ("sqlvault_remotes", "remote"),
    ("sqlvault_remote_keys", "remote::keyslots"),
];

/// Writes by a module that does not own the table, each with its reason: (modules,
/// alternatives separated by `|`; tables; why). Every entry must still be used.
const ALLOWED: &[(&str, &[&str], &str)] = &[
    ("storage::schema", &["inodes"], "the root directory of a new vault"),
    (
        "storage::schema",
        &["tags", "xattrs", "records", "chunk_data", "chunk_trash", "chunk_holes", "snap_holds"],
        "migrations that move rows between tables, and the triggers that delete a removed inode's tags and \
         extended attributes and queue a removed chunk's bytes for the wipe",
    ),
    ("fs::nodes", &["inodes"], "a device node's number is its inode's `rdev`"),
    (
        "fs::ranges",
        &["file_chunks", "chunk_shares"],
        "range operations (hole punching, copying ranges) rewrite a file's chunk map in place",
    ),
    (
        "vault::bulk|fs::bulk",
        &["inodes", "dirents", "orphans", "file_chunks", "chunks"],
        "set-based removal of a whole subtree, the per-row path of fs::tree and fs::chunks in bulk",
    ),
    ("fs::tree", &["sqlite_sequence"], "reserving inode numbers for whole-file imports (`reserve_inodes`)"),
    (
        "meta::appsql",
        &["sqlite_sequence"],
        "the AUTOINCREMENT sequence of an application table, set by a dump's line or an import \
         (never a name of sqlvault's)",
    ),
    (
        "remote::pull",
        &["chunks", "sqlite_sequence"],
        "a pull replaces every replicated table by the commit's (the rows through remote::dump)",
    ),
    (
        "remote::merge",
        &["tags", "xattrs", "chunks", "chunk_holds", "chunk_shares", "sqlite_sequence"],
        "a merge replaces every replicated table by its result",
    ),
    (
        "remote::restore",
        &["snapshots", "snap_inodes", "snap_chunks", "chunks"],
        "a commit's tree loaded as a temporary snapshot, its fetched chunks held for it",
    ),
];

/// Modules that write tables named at run time (`format!`), each with its reason.
const DYNAMIC: &[(&str, &str)] = &[
    ("remote::dump", "`insert_row`: a dump row into the table its caller (pull, merge) names"),
    ("remote::pull", "empties every replicated table before the commit's rows go in"),
    ("remote::merge", "scratch tables, and every replicated table replaced by the result"),
    ("remote::restore", "the snapshot table each dump table's rows go to"),
    ("remote::apps", "application tables of a commit (created, filled, dropped)"),
    ("meta::appsql", "`import`: the rows of a plain SQLite database into the application table it names"),
    ("snapshot", "the snap_* tables of a snapshot being removed"),
];

/// Every write statement of `code`: (table as written, lower case, `main.` and quotes
/// dropped). `INSERT [OR x] INTO t`, `REPLACE INTO t`, `UPDATE [OR x] t`, `DELETE FROM
/// t`, in upper case as this crate writes SQL; an upsert's `DO UPDATE SET` and a
/// trigger's `UPDATE OF`/`UPDATE ON` are not writes of their own.
fn writes(code: &str) -> Vec<String> {
    let words: Vec<String> = code
        .split(|c: char| c.is_whitespace() || "(),;&|!=<>+*".contains(c))
        .map(|w| w.trim_matches(|c| c == '"' || c == '\\').to_string())
        .filter(|w| !w.is_empty())
        .collect();
    let conflict = ["OR", "REPLACE", "IGNORE", "ABORT", "FAIL", "ROLLBACK"];
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        let mut j = i + 1;
        let at = |k: usize| words.get(k).map(String::as_str).unwrap_or("");
        let skip_or = |j: &mut usize| {
            if at(*j) == "OR" && conflict.contains(&at(*j + 1)) {
                *j += 2;
            }
        };
        let target = match w.as_str() {
            "INSERT" => {
                skip_or(&mut j);
                (at(j) == "INTO").then(|| at(j + 1))
            }
            "REPLACE" if at(j) == "INTO" && at(i.wrapping_sub(1)) != "OR" => Some(at(j + 1)),
            "UPDATE" => {
                skip_or(&mut j);
                Some(at(j)).filter(|t| !["SET", "OF", "ON", ""].contains(t))
            }
            "DELETE" => (at(j) == "FROM").then(|| at(j + 1)),
            _ => None,
        };
        if let Some(t) = target {
            let t = t.replace(['"', '\\'], "").to_lowercase();
            out.push(t.strip_prefix("main.").unwrap_or(&t).to_string());
        }
    }
    out
}

fn within(module: &str, prefix: &str) -> bool {
    module == prefix || module.starts_with(&format!("{prefix}::"))
}

/// Tables `code` creates as TEMP tables (a module's own scratch).
fn temp_tables(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("CREATE TEMP TABLE ") {
        let after = rest[i + 18..].trim_start_matches("IF NOT EXISTS ");
        let name: String = after.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        out.push(name);
        rest = &rest[i + 18..];
    }
    out
}

/// Violations of the ownership rule in `files` (module, source), and the allowlist
/// entries no write used.
fn ownership(files: &[(String, String)]) -> (Vec<String>, Vec<String>) {
    let mut bad = Vec::new();
    let mut used = vec![false; ALLOWED.len()];
    let mut dynamic_used = vec![false; DYNAMIC.len()];
    for (module, text) in files {
        let code = non_test_code(text);
        let scratch = temp_tables(&code);
        for table in writes(&code) {
            if table.starts_with("temp.") || scratch.contains(&table) {
                continue; // the module's own scratch
            }
            if table.contains('{') {
                match DYNAMIC.iter().position(|(m, _)| within(module, m)) {
                    Some(k) => dynamic_used[k] = true,
                    None => {
                        bad.push(format!("{module} writes a table named at run time ({table}) and is not in DYNAMIC"))
                    }
                }
                continue;
            }
            let Some((_, owner)) = OWNERS.iter().find(|(t, _)| *t == table) else {
                bad.push(format!("{module} writes {table}, which has no owner in OWNERS"));
                continue;
            };
            if within(module, owner) {
                continue;
            }
            let allowed = ALLOWED.iter().position(|(ms, tables, _)| {
                ms.split('|').any(|m| within(module, m)) && tables.contains(&table.as_str())
            });
            match allowed {
                Some(k) => used[k] = true,
                None => bad.push(format!("{module} writes {table}, owned by {owner}, and ALLOWED does not say why")),
            }
        }
    }
    let mut stale: Vec<String> =
        ALLOWED.iter().zip(&used).filter(|(_, u)| !**u).map(|((m, t, _), _)| format!("ALLOWED {m} {t:?}")).collect();
    stale.extend(DYNAMIC.iter().zip(&dynamic_used).filter(|(_, u)| !**u).map(|((m, _), _)| format!("DYNAMIC {m}")));
    (bad, stale)
}

fn library_sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &root, &mut files);
    // A module its parent declares under `#[cfg(test)]` (`#[cfg(test)] mod x;`) is test
    // code in a file of its own: a build without `cfg(test)` never sees it.
    let mut test_only = BTreeSet::new();
    for (module, text) in &files {
        let mut lines = text.lines().peekable();
        while let Some(l) = lines.next() {
            if l.trim() != "#[cfg(test)]" {
                continue;
            }
            let Some(name) = lines.peek().and_then(|n| n.trim().strip_prefix("mod ")?.strip_suffix(';')) else {
                continue;
            };
            test_only.insert(if module == "crate" { name.to_string() } else { format!("{module}::{name}") });
        }
    }
    files.retain(|(m, _)| !test_only.contains(m));
    files
}

#[test]
fn each_table_is_written_by_its_owner_or_an_allowed_exception() {
    let files = library_sources();
    let (bad, stale) = ownership(&files);
    assert!(bad.is_empty(), "writes outside the table's owner:\n{}", bad.join("\n"));
    // An entry per exception still needed: one that matches no write has gone stale.
    assert!(stale.is_empty(), "allowlist entries no write uses (remove them):\n{}", stale.join("\n"));
    // Every table of the schema has an owner, so a new table forces the decision here.
    let schema = files.iter().find(|(m, _)| m == "storage::schema").map(|(_, t)| non_test_code(t)).unwrap_or_default();
    let mut rest = schema.as_str();
    let mut tables = 0;
    while let Some(i) = rest.find("CREATE TABLE ") {
        let after = rest[i + 13..].trim_start_matches("IF NOT EXISTS ");
        let name: String = after.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        assert!(OWNERS.iter().any(|(t, _)| *t == name), "table {name} (storage/schema.rs) has no owner in OWNERS");
        tables += 1;
        rest = &rest[i + 13..];
    }
    assert!(tables > 15, "found only {tables} tables in storage/schema.rs");
}

#[test]
fn a_write_outside_the_owner_is_caught() {
    // The rule itself, on a module that writes what it does not own (and a scratch
    // table, an upsert and a trigger, which are not violations).
    let files = vec![(
        "meta::tags".to_string(),
        "fn f(tx: &Connection) {\n    tx.execute(\"INSERT INTO tags(ino) VALUES (1) ON CONFLICT DO UPDATE SET v = 1\", [])?;\n    \
         tx.execute(\"CREATE TEMP TABLE IF NOT EXISTS scratch(a); DELETE FROM temp.scratch; INSERT INTO scratch VALUES (1)\", [])?;\n    \
         tx.execute(\"UPDATE OR FAIL \\\"inodes\\\" SET nlink = 0\", [])?;\n}\n"
            .to_string(),
    )];
    let (bad, _) = ownership(&files);
    assert_eq!(bad, ["meta::tags writes inodes, owned by fs::tree, and ALLOWED does not say why"]);
}
