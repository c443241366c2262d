//! The README and the book link only to what exists: every relative link
//! names a file of the repository, and every `#anchor` a heading of the
//! page it points to. (CI also builds the book with mdBook and checks the
//! site's links with linkchecker: `.ci/book`.)

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The anchors of a Markdown page's headings, as mdBook and GitHub make
/// them (lower case, blanks as `-`, other punctuation dropped).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut fence = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fence = !fence;
        }
        if fence || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        let slug: String = title
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                c if c.is_whitespace() => Some('-'),
                _ => None,
            })
            .collect();
        out.insert(slug);
    }
    out
}

/// The targets of the page's links, outside code: `](target)`.
fn links(text: &str) -> Vec<String> {
    let mut fence = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fence = !fence;
        }
        if fence {
            continue;
        }
        // Inline code is not a link.
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    out
}

fn check(page: &Path, problems: &mut Vec<String>) {
    let text = std::fs::read_to_string(page).unwrap();
    for link in links(&text) {
        if link.contains("://") || link.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = match link.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (link.as_str(), None),
        };
        let target = if path.is_empty() {
            page.to_path_buf()
        } else {
            page.parent().unwrap().join(path)
        };
        if !target.exists() {
            problems.push(format!("{}: `{link}`: no such file", page.display()));
            continue;
        }
        if let Some(anchor) = anchor
            && target.extension().is_some_and(|e| e == "md")
            && !anchors(&std::fs::read_to_string(&target).unwrap()).contains(anchor)
        {
            problems.push(format!("{}: `{link}`: no such heading", page.display()));
        }
    }
}

#[test]
fn every_link_of_the_readme_and_the_book_leads_somewhere() {
    let root = root();
    let mut pages = vec![root.join("README.md")];
    let src = root.join("docs/src");
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    assert!(pages.len() > 10, "the book's chapters are in docs/src");
    let mut problems = Vec::new();
    for page in &pages {
        check(page, &mut problems);
    }
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
    // Every chapter is in the book's table of contents.
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    for page in pages.iter().filter(|p| p.starts_with(&src)) {
        let name = page.file_name().unwrap().to_string_lossy();
        assert!(
            name == "SUMMARY.md" || summary.contains(&format!("({name})")),
            "{name} is not in SUMMARY.md"
        );
    }
}

#[test]
fn a_broken_link_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("a.md");
    std::fs::write(
        &page,
        "# A title\n\n[ok](#a-title) [gone](b.md) [bad](#nowhere) `[code](x.md)`\n```\n[fenced](y.md)\n```\n",
    )
    .unwrap();
    let mut problems = Vec::new();
    check(&page, &mut problems);
    assert_eq!(problems.len(), 2, "{problems:?}");
}
