//! The house rule that data flows one way inside each crate: no module imports another that
//! imports it back, directly or round a longer loop. Modules nested in one another (a module
//! and its own submodules) are exempt: a parent declaring what its children share is the
//! normal shape of a Rust module tree.
//!
//! The module graph is read from the source text: every `crate::`, `super::` and `self::`
//! path (also inside `use ...::{...}` groups) names the longest module it reaches. That is
//! a text scan, not the compiler's resolution, so it errs towards seeing an edge (a path in a
//! doc comment's code counts; `//` comments do not).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates' source roots, from the repository root.
const ROOTS: &[&str] = &[
    "src",
    "domain/src",
    "coordinator/src",
    "worker/src",
    "archive/src",
    "client/src",
    "testkit/src",
    "bench/loadgen/src",
    "engines/minnow/src",
];

type Module = Vec<String>;

#[test]
fn no_module_cycles_inside_a_crate() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for root in ROOTS {
        let graph = module_graph(&repo.join(root));
        assert!(!graph.is_empty(), "{root}: no Rust files found");
        for cycle in cycles(&graph) {
            let names: Vec<String> = cycle.iter().map(|m| m.join("::")).collect();
            found.push(format!("{root}: {}", names.join(" -> ")));
        }
    }
    assert!(
        found.is_empty(),
        "modules that import each other (move what they share to a third module):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scan_sees_a_cycle_when_there_is_one() {
    // Two sibling modules that name each other, and a third that only uses one of them.
    let files = [
        (vec!["a"], "use super::b::Thing;"),
        (vec!["b"], "pub fn f() { crate::a::g(); }"),
        (vec!["c"], "use crate::{a::Thing, b};"),
        (vec![], "mod a; mod b; mod c; use self::c::x;"),
    ];
    let known: BTreeSet<Module> = files.iter().map(|(m, _)| owned(m)).collect();
    let graph: BTreeMap<Module, BTreeSet<Module>> = files
        .iter()
        .map(|(m, text)| (owned(m), references(&owned(m), text, &known)))
        .collect();
    assert_eq!(graph[&owned(&["c"])], [owned(&["a"]), owned(&["b"])].into());
    let found = cycles(&graph);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        found[0].iter().cloned().collect::<BTreeSet<_>>(),
        [owned(&["a"]), owned(&["b"])].into()
    );
}

fn owned(parts: &[&str]) -> Module {
    parts.iter().map(|s| s.to_string()).collect()
}

/// Each module of the crate at `root` with the modules it names, leaving out its own
/// ancestors and descendants.
fn module_graph(root: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let files = rust_files(root);
    let modules: BTreeMap<Module, PathBuf> = files
        .into_iter()
        .map(|f| (module_of(root, &f), f))
        .collect();
    let known: BTreeSet<Module> = modules.keys().cloned().collect();
    modules
        .iter()
        .map(|(m, file)| {
            let text = std::fs::read_to_string(file).unwrap();
            (m.clone(), references(m, &text, &known))
        })
        .collect()
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// `src/store/postgres/mod.rs` -> `store::postgres`; `lib.rs`/`main.rs` -> the crate root.
fn module_of(root: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Module = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The modules of `known` that `text` (the source of `module`) names, other than `module`'s
/// ancestors and descendants.
fn references(module: &Module, text: &str, known: &BTreeSet<Module>) -> BTreeSet<Module> {
    let code: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = BTreeSet::new();
    for path in paths(&code) {
        let (base, rest) = resolve_head(module, &path);
        let full: Module = base.into_iter().chain(rest).collect();
        if let Some(target) = (1..=full.len())
            .rev()
            .map(|k| full[..k].to_vec())
            .find(|p| known.contains(p))
        {
            let nested = target.starts_with(module) || module.starts_with(&target);
            if !nested {
                out.insert(target);
            }
        }
    }
    out
}

/// The base module a path's leading `crate`/`super`/`self` segments stand for, and the rest.
fn resolve_head(module: &Module, path: &[String]) -> (Module, Vec<String>) {
    let mut base = match path[0].as_str() {
        "crate" => Vec::new(),
        _ => module.clone(),
    };
    let mut rest = path.iter().skip(usize::from(path[0] != "super")).peekable();
    if path[0] == "super" {
        while rest.peek().is_some_and(|s| *s == "super") {
            rest.next();
            base.pop();
        }
    }
    (base, rest.cloned().collect())
}

/// Every path that starts with `crate`, `super` or `self`, with `{a, b::c}` groups
/// expanded (one level deep, as the code base writes them).
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < bytes.len() {
        let starts_word = i == 0 || !is_ident(bytes[i - 1]);
        let starts_path = ["crate::", "super::", "self::"]
            .iter()
            .any(|h| bytes[i..].starts_with(h.as_bytes()));
        if !(starts_word && starts_path) {
            i += 1;
            continue;
        }
        // The run of path characters from here: identifiers, `::`, and one `{...}` group.
        let mut end = i;
        while end < bytes.len() && (is_ident(bytes[end]) || bytes[end] == b':') {
            end += 1;
        }
        let prefix: Vec<String> = code[i..end]
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        if bytes.get(end) == Some(&b'{') {
            let close = code[end..].find('}').map_or(bytes.len(), |c| end + c);
            for item in code[end + 1..close].split(',') {
                let mut p = prefix.clone();
                p.extend(
                    item.trim()
                        .split("::")
                        .map(|s| s.split_whitespace().next().unwrap_or("").to_string())
                        .filter(|s| !s.is_empty() && s != "self"),
                );
                out.push(p);
            }
            i = close;
        } else {
            out.push(prefix);
            i = end;
        }
    }
    out
}

/// The strongly connected components of more than one module (Tarjan), each a cycle.
fn cycles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct Walk<'g> {
        graph: &'g BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'g Module, usize>,
        low: BTreeMap<&'g Module, usize>,
        stack: Vec<&'g Module>,
        found: Vec<Vec<Module>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, v: &'g Module) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            let graph = self.graph;
            for w in graph.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    self.low.insert(v, self.low[v].min(self.low[w]));
                } else if self.stack.contains(&w) {
                    self.low.insert(v, self.low[v].min(self.index[w]));
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    component.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}
