//! The library's modules depend one way: each module may use modules of its own layer
//! or of a layer below it, and the module graph has no cycle. The graph is read from
//! the source (`crate::` and `super::` paths outside unit-test modules), so a new
//! upward import fails here, not in review.

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
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &root, &mut files);
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
