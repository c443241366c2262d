//! The shape of `warden-run`'s sources: which module stands on which floor,
//! and what may refer to what.
//!
//! The test parses every `src/**/*.rs` with `syn` and builds the graph of
//! references between file modules (`src/a.rs` and `src/a/mod.rs` are
//! `a`, `src/a/b.rs` is `a::b`, `src/lib.rs` is the crate root, written
//! `crate`). A reference is a `use` of a path into the crate, or a path in
//! the code (`crate::a::B`, `super::b::C`, `self::b::C`, `child::D` from a
//! parent, or a name a `use` brought in, also inside macro invocations).
//! It then checks:
//!
//! - **No import cycle** among modules. A cycle is printed as its modules
//!   and the references that tie them.
//! - **Floors** ([`FLOORS`]). Records and files at the bottom; one run
//!   above them; the fleet (sessions, batches, executors) above that;
//!   exporters at
//!   the side, fed by plain data (records, and the reports named in
//!   [`EXPORTER_FEED`]), never by a run's or the fleet's internals. A module
//!   may refer to its own floor and to those below; the run and the fleet
//!   may also refer to the exporters. Anything else runs up.
//! - **No function over [`MAX_FN_LINES`] lines** (from `fn` to its closing
//!   brace; tests excluded).
//!
//! How references are read, decided here once:
//!
//! - Code under `#[cfg(test)]` is left out: a test may reach anywhere.
//!   Attributes are not read (a path in `#[serde(with = "...")]` is a
//!   string), nor are doc links.
//! - A reference is resolved to the module where the item lives: a path
//!   through a re-export (`crate::Report`, re-exported from `report`) is a
//!   reference to `report`, not to the crate root. A `pub use` is a door,
//!   not a dependency: it makes an edge only when the module's own code
//!   uses the name too. A name re-exported from another crate makes no edge.
//! - A parent referring to its child is fine (it declares it). A child
//!   reaching back into its parent's own items runs up, whatever the
//!   floors say, unless the parent holds only module declarations and
//!   re-exports (then the reference resolves through the re-export to the
//!   sibling that holds the item). The crate root is every top-level
//!   module's parent and holds `Run`, so `crate::Run` from `session` runs
//!   up.
//!
//! What today's code breaks is listed in [`ALLOWED_UPWARD`],
//! [`ALLOWED_CYCLE_EDGES`] and [`ALLOWED_LONG_FNS`], each entry (the file
//! and the module it refers to, or the function) with why: a new cycle, a
//! new upward reference or a new long function fails, and so does an entry
//! that no longer matches anything, so the lists only shrink. For cycles,
//! the allowed references are taken out of the graph and what is left must
//! have none; a new reference that closes a loop only through an allowed
//! one is not a new cycle, as it goes when that one goes.
//!
//! `cargo test -p warden-run --test structure -- --nocapture` prints the
//! figures: modules, cycles and the modules each takes in, upward
//! references, the longest function, `Supervisor`'s fields.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::visit::{self, Visit};

/// The longest a function may be, in lines.
const MAX_FN_LINES: usize = 150;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Floor {
    /// Records and files: what a run leaves, and the files warden reads.
    Records,
    /// One run: its request, its supervisor, its clocks and resources.
    Run,
    /// Many runs: sessions, batches, their executors, budgets and retries.
    Fleet,
    /// At the side: telemetry, JUnit, GitHub outputs, fed by plain data.
    Exporters,
}

/// Which module stands on which floor. A submodule stands on its parent's
/// floor unless it is listed itself.
const FLOORS: &[(&str, Floor)] = &[
    ("artifacts", Floor::Records),
    // What a batch wrote (`batch.json`'s types): plain data.
    ("batch_report", Floor::Records),
    // Budgets are values and their arithmetic (and the pool a batch's
    // runs count against): no file, no process, and a run's limits and
    // report hold them.
    ("budget", Floor::Records),
    ("defaults", Floor::Records),
    ("held_dir", Floor::Records),
    ("keys", Floor::Records),
    ("limits", Floor::Records),
    ("logged_lines", Floor::Records),
    ("outcome", Floor::Records),
    ("output", Floor::Records),
    ("pipe", Floor::Records),
    ("regular_file", Floor::Records),
    ("remove", Floor::Records),
    ("report", Floor::Records),
    // Which ends of a run are worth another attempt, and how long to wait:
    // read from a report alone, and held by a request.
    ("retry", Floor::Records),
    // What a session wrote (`session.json`'s types): plain data, as a
    // run's report is.
    ("session::report", Floor::Records),
    ("template", Floor::Records),
    // The one fold of a run's events: pure, on records.
    ("timeline", Floor::Records),
    ("verdict", Floor::Records),
    ("crate", Floor::Run),
    ("clocks", Floor::Run),
    // Codex's own record of a thread's tokens, read for a run that ended
    // without reporting them.
    ("codex_thread", Floor::Run),
    // The containers of dead wardens, removed as a run starts.
    ("container_sweep", Floor::Run),
    ("git", Floor::Run),
    ("live", Floor::Run),
    ("plan", Floor::Run),
    ("request", Floor::Run),
    ("resources", Floor::Run),
    ("run", Floor::Run),
    // What a run, a session or a batch says as it goes: a run's events and
    // worktree, an entry's report.
    ("update", Floor::Run),
    ("supervisor", Floor::Run),
    ("batch", Floor::Fleet),
    ("batch_key", Floor::Fleet),
    ("batch_plan", Floor::Fleet),
    ("executor", Floor::Fleet),
    ("gc", Floor::Fleet),
    ("session", Floor::Fleet),
    ("junit", Floor::Exporters),
    ("outputs", Floor::Exporters),
    // Reading a run or a session back from its files.
    ("readback", Floor::Exporters),
    ("telemetry", Floor::Exporters),
];

/// Modules above the records that are still plain data an exporter may be
/// fed with: a batch's report, as written to `batch.json`.
const EXPORTER_FEED: &[&str] = &["batch_report"];

/// References that run up today: (file, target module, why).
const ALLOWED_UPWARD: &[(&str, &str, &str)] = &[
    (
        "src/supervisor/lines.rs",
        "supervisor",
        "the Supervisor's impl for the agent's output, apart by concern: reads its fields",
    ),
    (
        "src/supervisor/procs.rs",
        "supervisor",
        "the Supervisor's impl for the run's processes, apart by concern: reads its fields",
    ),
    (
        "src/supervisor/report.rs",
        "supervisor",
        "makes the report from the Supervisor's fields",
    ),
];

/// References that close a cycle without running up a floor (both ends on
/// one floor): (file, target module, why).
const ALLOWED_CYCLE_EDGES: &[(&str, &str, &str)] = &[];

/// Functions over the limit today: (file, function, why).
const ALLOWED_LONG_FNS: &[(&str, &str, &str)] = &[];

fn may_refer(from: Floor, to: Floor, target: &str) -> bool {
    use Floor::*;
    match from {
        Records => to == Records,
        Run => matches!(to, Records | Run | Exporters),
        Fleet => true,
        Exporters => {
            matches!(to, Records | Exporters)
                || EXPORTER_FEED
                    .iter()
                    .any(|m| target == *m || target.starts_with(&format!("{m}::")))
        }
    }
}

fn floor_of(module: &str) -> Floor {
    let mut name = module;
    loop {
        if let Some((_, f)) = FLOORS.iter().find(|(m, _)| *m == name) {
            return *f;
        }
        match name.rfind("::") {
            Some(i) => name = &name[..i],
            None => panic!("module `{module}` stands on no floor: add it to FLOORS"),
        }
    }
}

/// One file module.
struct Module {
    /// `crate`, `a`, `a::b`.
    name: String,
    /// Relative to the crate, as printed: `src/a/b.rs`.
    file: String,
    ast: syn::File,
    /// Names of items defined at its top level (not brought in by `use`).
    defined: HashSet<String>,
    /// Names its top-level `use`s bind, to the path as written.
    bindings: HashMap<String, Binding>,
    /// Child file modules it declares, with whether they are test-only.
    children: Vec<(String, bool)>,
    /// Holds only module declarations and `use`s.
    pure: bool,
}

#[derive(Clone)]
struct Binding {
    /// The path as written (`crate::a::B`, `super::b`, `child::C`).
    raw: Vec<String>,
    /// A `pub`/`pub(crate)` use: a re-export.
    reexport: bool,
    /// Inline module depth of the `use`.
    depth: usize,
    line: usize,
}

/// One reference from a module to another.
#[derive(Clone, Debug)]
struct Reference {
    from: String,
    to: String,
    file: String,
    line: usize,
    /// The path as written.
    path: String,
}

fn module_name(rel: &Path) -> String {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().expect("a file name");
    let stem = last.strip_suffix(".rs").expect("a .rs file").to_owned();
    if parts.is_empty() && stem == "lib" {
        return "crate".into();
    }
    if stem != "mod" {
        parts.push(stem);
    }
    parts.join("::")
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && matches!(&a.meta, syn::Meta::List(l) if l.tokens.to_string() == "test")
    })
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item::*;
    match item {
        Const(i) => &i.attrs,
        Enum(i) => &i.attrs,
        ExternCrate(i) => &i.attrs,
        Fn(i) => &i.attrs,
        ForeignMod(i) => &i.attrs,
        Impl(i) => &i.attrs,
        Macro(i) => &i.attrs,
        Mod(i) => &i.attrs,
        Static(i) => &i.attrs,
        Struct(i) => &i.attrs,
        Trait(i) => &i.attrs,
        TraitAlias(i) => &i.attrs,
        Type(i) => &i.attrs,
        Union(i) => &i.attrs,
        Use(i) => &i.attrs,
        _ => &[],
    }
}

fn item_name(item: &syn::Item) -> Option<String> {
    use syn::Item::*;
    let ident = match item {
        Const(i) => &i.ident,
        Enum(i) => &i.ident,
        Fn(i) => &i.sig.ident,
        Macro(i) => i.ident.as_ref()?,
        Mod(i) => &i.ident,
        Static(i) => &i.ident,
        Struct(i) => &i.ident,
        Trait(i) => &i.ident,
        TraitAlias(i) => &i.ident,
        Type(i) => &i.ident,
        Union(i) => &i.ident,
        _ => return None,
    };
    Some(ident.to_string())
}

/// Calls `leaf` with each path a use tree names, the name it binds (`None`
/// for a glob) and the line.
fn use_leaves(
    tree: &syn::UseTree,
    prefix: &mut Vec<String>,
    leaf: &mut dyn FnMut(Vec<String>, Option<String>, usize),
) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_leaves(&p.tree, prefix, leaf);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let line = n.ident.span().start().line;
            if n.ident == "self" {
                leaf(prefix.clone(), prefix.last().cloned(), line);
            } else {
                let mut path = prefix.clone();
                path.push(n.ident.to_string());
                leaf(path, Some(n.ident.to_string()), line);
            }
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            leaf(
                path,
                Some(r.rename.to_string()),
                r.rename.span().start().line,
            );
        }
        syn::UseTree::Glob(g) => leaf(prefix.clone(), None, g.star_token.spans[0].start().line),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_leaves(t, prefix, leaf);
            }
        }
    }
}

fn load(src: &Path) -> BTreeMap<String, Module> {
    let mut files = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read src") {
            let path = entry.expect("read src").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let mut modules = BTreeMap::new();
    for path in files {
        let rel = path.strip_prefix(src).expect("under src");
        let text = std::fs::read_to_string(&path).expect("read a source file");
        let ast = syn::parse_file(&text)
            .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
        let mut defined = HashSet::new();
        let mut bindings = HashMap::new();
        let mut children = Vec::new();
        let mut pure = true;
        for item in &ast.items {
            if let syn::Item::Mod(m) = item
                && m.content.is_none()
            {
                children.push((m.ident.to_string(), is_cfg_test(&m.attrs)));
            }
            if is_cfg_test(item_attrs(item)) {
                continue;
            }
            match item {
                syn::Item::Use(u) => {
                    let reexport = !matches!(u.vis, syn::Visibility::Inherited);
                    use_leaves(&u.tree, &mut Vec::new(), &mut |raw, name, line| {
                        if let Some(name) = name {
                            bindings.insert(
                                name,
                                Binding {
                                    raw,
                                    reexport,
                                    depth: 0,
                                    line,
                                },
                            );
                        }
                    });
                }
                syn::Item::Mod(m) if m.content.is_none() => {}
                _ => pure = false,
            }
            if let Some(name) = item_name(item) {
                defined.insert(name);
            }
        }
        let name = module_name(rel);
        let file = format!("src/{}", rel.display());
        modules.insert(
            name.clone(),
            Module {
                name,
                file,
                ast,
                defined,
                bindings,
                children,
                pure,
            },
        );
    }
    modules
}

/// The modules compiled outside tests: reached from the crate root through
/// declarations that are not `#[cfg(test)]`.
fn library_modules(modules: &BTreeMap<String, Module>) -> BTreeSet<String> {
    let mut reached = BTreeSet::new();
    let mut todo = vec!["crate".to_owned()];
    while let Some(name) = todo.pop() {
        let module = modules
            .get(&name)
            .unwrap_or_else(|| panic!("module `{name}` is declared but has no file"));
        reached.insert(name.clone());
        for (child, test_only) in &module.children {
            if !test_only {
                todo.push(if name == "crate" {
                    child.clone()
                } else {
                    format!("{name}::{child}")
                });
            }
        }
    }
    reached
}

struct Graph<'a> {
    modules: &'a BTreeMap<String, Module>,
    library: &'a BTreeSet<String>,
}

impl Graph<'_> {
    fn segments(name: &str) -> Vec<String> {
        if name == "crate" {
            Vec::new()
        } else {
            name.split("::").map(str::to_owned).collect()
        }
    }

    fn join(segments: &[String]) -> String {
        if segments.is_empty() {
            "crate".into()
        } else {
            segments.join("::")
        }
    }

    /// A path as written in `module` (at inline depth `depth`) as a path from
    /// the crate root, or `None` when it leads out of the crate.
    fn absolute(
        &self,
        module: &Module,
        raw: &[String],
        depth: usize,
        hops: usize,
    ) -> Option<Vec<String>> {
        if hops > 16 {
            return None;
        }
        let here = Self::segments(&module.name);
        let first = raw.first()?;
        match first.as_str() {
            "crate" => Some(raw[1..].to_vec()),
            "self" => Some(here.into_iter().chain(raw[1..].iter().cloned()).collect()),
            "super" => {
                let ups = raw.iter().take_while(|s| *s == "super").count();
                let rest = raw[ups..].iter().cloned();
                // Within the file's inline modules, `super` stays in the file.
                let up = ups.saturating_sub(depth);
                if up > here.len() {
                    return None;
                }
                Some(
                    here[..here.len() - up]
                        .iter()
                        .cloned()
                        .chain(rest)
                        .collect(),
                )
            }
            name => {
                if module.children.iter().any(|(c, _)| c == name) {
                    return Some(here.into_iter().chain(raw.iter().cloned()).collect());
                }
                let b = module.bindings.get(name)?;
                if b.raw.first().map(String::as_str) == Some(name) && b.raw.len() == 1 {
                    return None;
                }
                let base = self.absolute(module, &b.raw, b.depth, hops + 1)?;
                Some(base.into_iter().chain(raw[1..].iter().cloned()).collect())
            }
        }
    }

    /// The file module where the item a path from the crate root names
    /// lives, through re-exports; `None` when it lives in another crate.
    fn home(&self, path: &[String], hops: usize) -> Option<String> {
        if hops > 16 {
            return None;
        }
        let k = (0..=path.len())
            .rev()
            .find(|k| self.modules.contains_key(&Self::join(&path[..*k])))?;
        let module = &self.modules[&Self::join(&path[..k])];
        let rest = &path[k..];
        let Some(name) = rest.first() else {
            return Some(module.name.clone());
        };
        if module.defined.contains(name) {
            return Some(module.name.clone());
        }
        if let Some(b) = module.bindings.get(name) {
            let base = self.absolute(module, &b.raw, b.depth, 0)?;
            let full: Vec<String> = base.into_iter().chain(rest[1..].iter().cloned()).collect();
            return self.home(&full, hops + 1);
        }
        Some(module.name.clone())
    }

    /// Whether a path from the crate root names a module rather than an item.
    fn is_module(&self, path: &[String]) -> bool {
        self.modules.contains_key(&Self::join(path))
    }

    /// Every reference between modules and every function, in one walk
    /// of each module's syntax tree.
    fn collect(&self) -> (Vec<Reference>, Vec<Function>) {
        let (mut out, mut fns) = (Vec::new(), Vec::new());
        for name in self.library {
            let module = &self.modules[name];
            let mut v = Collect {
                module,
                graph: self,
                depth: 0,
                local_bindings: Vec::new(),
                refs: Vec::new(),
                used: HashSet::new(),
                fns: Vec::new(),
            };
            v.visit_file(&module.ast);
            // A top-level re-export is an edge only when the code uses the name.
            for (bound, b) in &module.bindings {
                if b.reexport && !v.used.contains(bound) {
                    continue;
                }
                let Some(abs) = self.absolute(module, &b.raw, 0, 0) else {
                    continue;
                };
                if self.is_module(&abs) {
                    continue;
                }
                if let Some(to) = self.home(&abs, 0) {
                    v.push(to, b.line, &b.raw);
                }
            }
            out.extend(v.refs);
            fns.extend(v.fns);
        }
        (out, fns)
    }
}

#[derive(Debug, Clone)]
struct Function {
    name: String,
    file: String,
    line: usize,
    lines: usize,
}

struct Collect<'a> {
    module: &'a Module,
    graph: &'a Graph<'a>,
    depth: usize,
    /// `use`s inside functions and inline modules: name, binding.
    local_bindings: Vec<(String, Binding)>,
    refs: Vec<Reference>,
    /// Names the code (not its `use`s) mentions.
    used: HashSet<String>,
    fns: Vec<Function>,
}

impl Collect<'_> {
    fn push(&mut self, to: String, line: usize, raw: &[String]) {
        if to == self.module.name {
            return;
        }
        self.refs.push(Reference {
            from: self.module.name.clone(),
            to,
            file: self.module.file.clone(),
            line,
            path: raw.join("::"),
        });
    }

    fn binding(&self, name: &str) -> Option<Binding> {
        self.local_bindings
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, b)| b.clone())
            .or_else(|| self.module.bindings.get(name).cloned())
    }

    /// A path in the code (not in a `use`).
    fn code_path(&mut self, raw: Vec<String>, line: usize) {
        let Some(first) = raw.first().cloned() else {
            return;
        };
        self.used.insert(first.clone());
        let is_rooted = matches!(first.as_str(), "crate" | "self" | "super")
            || self.module.children.iter().any(|(c, _)| *c == first);
        let abs = if is_rooted {
            if raw.len() < 2 {
                return;
            }
            self.graph.absolute(self.module, &raw, self.depth, 0)
        } else if let Some(b) = self.binding(&first) {
            // A `use` of an item is counted at the `use`; one of a module
            // is counted where the code goes through it.
            let base = self.graph.absolute(self.module, &b.raw, b.depth, 0);
            match base {
                Some(base) if self.graph.is_module(&base) => {
                    Some(base.into_iter().chain(raw[1..].iter().cloned()).collect())
                }
                _ => None,
            }
        } else {
            None
        };
        if let Some(abs) = abs
            && let Some(to) = self.graph.home(&abs, 0)
        {
            self.push(to, line, &raw);
        }
    }

    fn fn_lines(&mut self, name: String, sig: &syn::Signature, block: &syn::Block) {
        let line = sig.fn_token.span.start().line;
        let end = block.brace_token.span.close().end().line;
        self.fns.push(Function {
            name,
            file: self.module.file.clone(),
            line,
            lines: end - line + 1,
        });
    }
}

/// Paths in a macro's tokens: `a::b::C` sequences.
fn token_paths(tokens: TokenStream, out: &mut Vec<(Vec<String>, usize)>) {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < trees.len() {
        match &trees[i] {
            TokenTree::Group(g) => token_paths(g.stream(), out),
            TokenTree::Ident(id) => {
                let line = id.span().start().line;
                let mut path = vec![id.to_string()];
                while let (
                    Some(TokenTree::Punct(a)),
                    Some(TokenTree::Punct(b)),
                    Some(TokenTree::Ident(next)),
                ) = (trees.get(i + 1), trees.get(i + 2), trees.get(i + 3))
                {
                    if a.as_char() != ':' || b.as_char() != ':' {
                        break;
                    }
                    path.push(next.to_string());
                    i += 3;
                }
                out.push((path, line));
            }
            _ => {}
        }
        i += 1;
    }
}

fn span_line(span: Span) -> usize {
    span.start().line
}

fn type_name(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default(),
        _ => "_".into(),
    }
}

impl<'ast> Visit<'ast> for Collect<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if is_cfg_test(item_attrs(item)) {
            return;
        }
        visit::visit_item(self, item);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if m.content.is_some() {
            self.depth += 1;
            let mark = self.local_bindings.len();
            visit::visit_item_mod(self, m);
            self.local_bindings.truncate(mark);
            self.depth -= 1;
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        // Top-level uses are the module's bindings, counted once for the file.
        if self.depth == 0
            && self
                .module
                .ast
                .items
                .iter()
                .any(|i| matches!(i, syn::Item::Use(x) if std::ptr::eq(x, u)))
        {
            return;
        }
        let depth = self.depth;
        let mut leaves = Vec::new();
        use_leaves(&u.tree, &mut Vec::new(), &mut |raw, name, line| {
            leaves.push((raw, name, line))
        });
        for (raw, name, line) in leaves {
            if let Some(abs) = self.graph.absolute(self.module, &raw, depth, 0)
                && (!self.graph.is_module(&abs) || name.is_none())
                && let Some(to) = self.graph.home(&abs, 0)
            {
                self.push(to, line, &raw);
            }
            if let Some(name) = name {
                self.local_bindings.push((
                    name,
                    Binding {
                        raw,
                        reexport: false,
                        depth,
                        line,
                    },
                ));
            }
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if is_cfg_test(&f.attrs) {
            return;
        }
        visit::visit_impl_item_fn(self, f);
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        let ty = type_name(&i.self_ty);
        for item in &i.items {
            if let syn::ImplItem::Fn(f) = item
                && !is_cfg_test(&f.attrs)
            {
                self.fn_lines(format!("{ty}::{}", f.sig.ident), &f.sig, &f.block);
            }
        }
        visit::visit_item_impl(self, i);
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.fn_lines(f.sig.ident.to_string(), &f.sig, &f.block);
        let mark = self.local_bindings.len();
        visit::visit_item_fn(self, f);
        self.local_bindings.truncate(mark);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(block) = &f.default {
            self.fn_lines(f.sig.ident.to_string(), &f.sig, block);
        }
        visit::visit_trait_item_fn(self, f);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let raw: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        let line = p
            .segments
            .first()
            .map(|s| span_line(s.ident.span()))
            .unwrap_or(0);
        self.code_path(raw, line);
        visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        let mut paths = Vec::new();
        token_paths(m.tokens.clone(), &mut paths);
        for (raw, line) in paths {
            self.code_path(raw, line);
        }
        visit::visit_macro(self, m);
    }

    // `pub(in crate::x)` and attributes name no dependency.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}
    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {}
}

/// The strongly connected components with more than one module (Tarjan).
fn cycles(nodes: &BTreeSet<String>, edges: &BTreeSet<(String, String)>) -> Vec<Vec<String>> {
    struct State<'a> {
        adj: HashMap<&'a str, Vec<&'a str>>,
        index: HashMap<&'a str, usize>,
        low: HashMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: HashSet<&'a str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn connect<'a>(s: &mut State<'a>, v: &'a str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.adj.get(v).cloned().unwrap_or_default() {
            if !s.index.contains_key(w) {
                connect(s, w);
                let l = s.low[v].min(s.low[w]);
                s.low.insert(v, l);
            } else if s.on_stack.contains(w) {
                let l = s.low[v].min(s.index[w]);
                s.low.insert(v, l);
            }
        }
        if s.low[v] == s.index[v] {
            let mut scc = Vec::new();
            loop {
                let w = s.stack.pop().expect("on the stack");
                s.on_stack.remove(w);
                scc.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                s.out.push(scc);
            }
        }
    }
    let mut adj: HashMap<&str, Vec<&str>> = HashMap::new();
    for (a, b) in edges {
        adj.entry(a.as_str()).or_default().push(b.as_str());
    }
    let mut s = State {
        adj,
        index: HashMap::new(),
        low: HashMap::new(),
        stack: Vec::new(),
        on_stack: HashSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in nodes {
        if !s.index.contains_key(v.as_str()) {
            connect(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

/// The shortest cycle within `scc` (breadth first from each module), as
/// its modules in order.
fn shortest_cycle(scc: &[String], edges: &BTreeSet<(String, String)>) -> Vec<String> {
    let mut best: Option<Vec<String>> = None;
    for start in scc {
        let mut came_from: HashMap<&str, &str> = HashMap::new();
        let mut queue = std::collections::VecDeque::from([start.as_str()]);
        'search: while let Some(at) = queue.pop_front() {
            for (from, to) in edges {
                if from != at || !scc.contains(to) {
                    continue;
                }
                if to == start {
                    let mut path = vec![at.to_owned()];
                    let mut step = at;
                    while step != start {
                        step = came_from[step];
                        path.push(step.to_owned());
                    }
                    path.reverse();
                    if best.as_ref().is_none_or(|b| path.len() < b.len()) {
                        best = Some(path);
                    }
                    break 'search;
                }
                if to.as_str() != start && !came_from.contains_key(to.as_str()) {
                    came_from.insert(to, at);
                    queue.push_back(to);
                }
            }
        }
    }
    best.expect("a strongly connected component of two or more modules has a cycle")
}

fn is_ancestor(ancestor: &str, module: &str) -> bool {
    ancestor == "crate" && module != "crate" || module.starts_with(&format!("{ancestor}::"))
}

/// Why a reference runs up, if it does.
fn runs_up(graph: &Graph, r: &Reference) -> Option<String> {
    if is_ancestor(&r.to, &r.from) {
        if graph.modules[&r.to].pure {
            return None;
        }
        return Some(format!("reaches back into its parent `{}`", r.to));
    }
    if is_ancestor(&r.from, &r.to) {
        return None;
    }
    let (from, to) = (floor_of(&r.from), floor_of(&r.to));
    (!may_refer(from, to, &r.to)).then(|| format!("{from:?} -> {to:?}"))
}

/// What the checks share: the graph, its references by module pair, and
/// what they found.
struct Checks<'a> {
    graph: &'a Graph<'a>,
    by_edge: BTreeMap<(String, String), Vec<Reference>>,
    /// Shown with `--nocapture`.
    report: String,
    /// Each fails the test.
    problems: Vec<String>,
}

impl Checks<'_> {
    fn file_of(&self, module: &str) -> &str {
        &self.graph.modules[module].file
    }

    fn allowed(&self, list: &[(&str, &str, &str)], from: &str, to: &str) -> bool {
        list.iter()
            .any(|(f, t, _)| *f == self.file_of(from) && *t == to)
    }

    fn edges(&self) -> BTreeSet<(String, String)> {
        self.by_edge.keys().cloned().collect()
    }

    /// `from -> to (file:line names)`, the first reference and every name.
    fn tie(&self, from: &str, to: &str) -> String {
        let rs = &self.by_edge[&(from.to_owned(), to.to_owned())];
        let names: BTreeSet<&str> = rs.iter().map(|r| r.path.as_str()).collect();
        let names: Vec<&str> = names.into_iter().collect();
        format!(
            "{from} -> {to} ({}:{} {})",
            rs[0].file,
            rs[0].line,
            names.join(", ")
        )
    }

    /// Every file is compiled, and every module stands on a floor.
    fn declared(&mut self) {
        let modules = self.graph.modules;
        for name in modules.keys() {
            let test_only = modules.values().any(|m| {
                m.children.iter().any(|(c, t)| {
                    *t && (m.name == "crate" && c == name || *name == format!("{}::{c}", m.name))
                })
            });
            if !self.graph.library.contains(name) && !test_only {
                self.problems.push(format!(
                    "{} is not declared by any module: it is never compiled",
                    modules[name].file
                ));
            }
            if self.graph.library.contains(name) {
                floor_of(name);
            }
        }
    }

    /// The module pairs whose references run up.
    fn upward(&mut self) -> usize {
        let mut upward = Vec::new();
        for ((from, to), rs) in &self.by_edge {
            let Some(why) = runs_up(self.graph, &rs[0]) else {
                continue;
            };
            upward.push((from.clone(), to.clone()));
            let at: Vec<String> = rs
                .iter()
                .map(|r| format!("{}:{} `{}`", r.file, r.line, r.path))
                .collect();
            let line = format!("{} -> {to} ({why}): {}", self.file_of(from), at.join(", "));
            writeln!(self.report, "  up: {line}").unwrap();
            if !self.allowed(ALLOWED_UPWARD, from, to) {
                self.problems
                    .push(format!("a reference runs up a floor: {line}"));
            }
        }
        for (file, to, _) in ALLOWED_UPWARD {
            if !upward
                .iter()
                .any(|(f, t)| self.file_of(f) == *file && t == to)
            {
                self.problems.push(format!(
                    "ALLOWED_UPWARD lists {file} -> {to}, which no longer runs up: remove it"
                ));
            }
        }
        upward.len()
    }

    /// The cycles of the whole graph; those left once the allowed
    /// references are taken out are problems.
    fn cycles(&mut self) -> Vec<Vec<String>> {
        let edges = self.edges();
        let all = cycles(self.graph.library, &edges);
        for scc in &all {
            writeln!(
                self.report,
                "  cycle of {} modules: {}",
                scc.len(),
                scc.join(", ")
            )
            .unwrap();
            for (from, to) in &edges {
                if scc.contains(from) && scc.contains(to) {
                    writeln!(self.report, "    {}", self.tie(from, to)).unwrap();
                }
            }
        }
        let kept: BTreeSet<(String, String)> = edges
            .iter()
            .filter(|(f, t)| {
                !self.allowed(ALLOWED_UPWARD, f, t) && !self.allowed(ALLOWED_CYCLE_EDGES, f, t)
            })
            .cloned()
            .collect();
        for scc in cycles(self.graph.library, &kept) {
            let path = shortest_cycle(&scc, &kept);
            let tie: Vec<String> = path
                .iter()
                .zip(path.iter().cycle().skip(1))
                .map(|(from, to)| self.tie(from, to))
                .collect();
            self.problems.push(format!(
                "an import cycle among {} ({} modules), the shortest: {} -> {}\n    tied by: {}",
                scc.join(", "),
                scc.len(),
                path.join(" -> "),
                path[0],
                tie.join("\n             ")
            ));
        }
        for (file, to, _) in ALLOWED_CYCLE_EDGES {
            let closes = all.iter().any(|scc| {
                scc.iter().any(|m| m == to)
                    && scc.iter().any(|m| {
                        self.file_of(m) == *file && edges.contains(&(m.clone(), (*to).to_owned()))
                    })
            });
            if !closes {
                self.problems.push(format!(
                    "ALLOWED_CYCLE_EDGES lists {file} -> {to}, which closes no cycle now: remove it"
                ));
            }
        }
        all
    }

    /// `fns`, longest first, checked against the bound.
    fn functions(&mut self, mut fns: Vec<Function>) -> Vec<Function> {
        fns.sort_by_key(|f| std::cmp::Reverse(f.lines));
        for f in fns.iter().filter(|f| f.lines > MAX_FN_LINES) {
            let line = format!("{} ({}:{}) is {} lines", f.name, f.file, f.line, f.lines);
            writeln!(self.report, "  long: {line}").unwrap();
            if !ALLOWED_LONG_FNS
                .iter()
                .any(|(file, name, _)| *file == f.file && *name == f.name)
            {
                self.problems
                    .push(format!("a function over {MAX_FN_LINES} lines: {line}"));
            }
        }
        for (file, name, _) in ALLOWED_LONG_FNS {
            if !fns
                .iter()
                .any(|f| f.file == *file && f.name == *name && f.lines > MAX_FN_LINES)
            {
                self.problems.push(format!(
                    "ALLOWED_LONG_FNS lists {name} in {file}, which is no longer over {MAX_FN_LINES} lines: remove it"
                ));
            }
        }
        fns
    }
}

/// The number of fields of `struct Supervisor`.
fn supervisor_fields(modules: &BTreeMap<String, Module>) -> Option<usize> {
    modules
        .get("supervisor")?
        .ast
        .items
        .iter()
        .find_map(|i| match i {
            syn::Item::Struct(s) if s.ident == "Supervisor" => Some(s.fields.len()),
            _ => None,
        })
}

#[test]
fn modules_stand_on_floors_without_cycles_or_long_functions() {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = load(&src);
    let library = library_modules(&modules);
    let graph = Graph {
        modules: &modules,
        library: &library,
    };
    let (refs, fns) = graph.collect();
    let mut by_edge: BTreeMap<(String, String), Vec<Reference>> = BTreeMap::new();
    for r in &refs {
        by_edge
            .entry((r.from.clone(), r.to.clone()))
            .or_default()
            .push(r.clone());
    }
    let mut checks = Checks {
        graph: &graph,
        by_edge,
        report: String::new(),
        problems: Vec::new(),
    };
    checks.declared();
    let upward = checks.upward();
    let all_cycles = checks.cycles();
    let fns = checks.functions(fns);

    let longest = &fns[0];
    println!("warden-run's structure:");
    println!(
        "  modules: {} ({} at the top level, the crate root included)",
        library.len(),
        library.iter().filter(|m| !m.contains("::")).count()
    );
    println!(
        "  references between modules: {} ({} module pairs)",
        refs.len(),
        checks.by_edge.len()
    );
    let sizes: Vec<String> = all_cycles.iter().map(|c| c.len().to_string()).collect();
    match sizes.len() {
        0 => println!("  import cycles: 0"),
        n => println!("  import cycles: {n} (taking in {})", sizes.join(", ")),
    }
    println!("  upward references: {upward} module pairs");
    println!(
        "  longest function: {} ({}:{}), {} lines",
        longest.name, longest.file, longest.line, longest.lines
    );
    println!(
        "  functions over {MAX_FN_LINES} lines: {}",
        fns.iter().filter(|f| f.lines > MAX_FN_LINES).count()
    );
    if let Some(n) = supervisor_fields(&modules) {
        println!("  Supervisor's fields: {n}");
    }
    print!("{}", checks.report);
    assert!(
        checks.problems.is_empty(),
        "warden-run's structure:\n- {}",
        checks.problems.join("\n- ")
    );
}
