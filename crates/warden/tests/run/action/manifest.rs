//! `action.yml` against what the runner requires, its expressions against
//! its own inputs and steps, and the book's Action chapter against both.

use super::runner::StepKind;
use super::*;

#[test]
fn the_action_is_well_formed_and_documented() {
    let a = action();
    assert_eq!(a.name, "warden");
    a.check_expressions().unwrap();
    for i in &a.inputs {
        assert!(
            !i.description.is_empty(),
            "input {} has no description",
            i.name
        );
        // The runner only warns about a missing required input; the
        // action's first step checks them, with a message that helps.
        assert!(!i.required, "input {}: checked by check-inputs.sh", i.name);
    }
    for o in &a.outputs {
        assert!(
            !o.description.is_empty(),
            "output {} has no description",
            o.name
        );
    }
    for s in &a.steps {
        assert!(!s.name.is_empty(), "every step has a name for the log");
        match &s.kind {
            StepKind::Run { script, shell } => {
                assert_eq!(shell, "bash");
                // `exec`: the runner's signals reach the script itself.
                assert!(
                    script.starts_with("exec bash \"$GITHUB_ACTION_PATH/action/"),
                    "{script}"
                );
                assert!(s.id.is_some(), "a run step has an id");
            }
            StepKind::Uses { action, .. } => {
                // Pinned by a commit's full SHA (organisations may require
                // it); the tag is in the comment, checked below.
                let (name, sha) = action.split_once('@').expect("pinned");
                assert!(
                    sha.len() == 40 && sha.bytes().all(|b| b.is_ascii_hexdigit()),
                    "{action}: not pinned by a full commit SHA"
                );
                assert!(
                    [
                        "actions/cache/restore",
                        "actions/cache/save",
                        "actions/upload-artifact"
                    ]
                    .contains(&name),
                    "{action}"
                );
            }
        }
    }
    let text = std::fs::read_to_string(repo_root().join("action.yml")).unwrap();
    // Each pin says which release it is, and a sub-action's two pins
    // (cache/restore, cache/save) are the same commit.
    let mut pins = std::collections::BTreeMap::new();
    for line in text.lines().filter(|l| l.trim_start().starts_with("uses:")) {
        let (uses, tag) = line
            .split_once(" # ")
            .unwrap_or_else(|| panic!("{line}: no `# vX.Y.Z` comment"));
        assert!(
            tag.starts_with('v') && tag[1..].split('.').count() == 3,
            "{line}: the comment is not a release tag"
        );
        let (name, sha) = uses
            .trim()
            .trim_start_matches("uses: ")
            .split_once('@')
            .unwrap();
        let repo: String = name.split('/').take(2).collect::<Vec<_>>().join("/");
        if let Some((other, other_tag)) =
            pins.insert(repo.clone(), (sha.to_string(), tag.to_string()))
        {
            assert_eq!(
                (other, other_tag),
                (sha.to_string(), tag.to_string()),
                "{repo}: two pins"
            );
        }
    }
    // Every input is used by a step.
    for i in &a.inputs {
        assert!(
            text.contains(&format!("inputs.{} }}}}", i.name)),
            "input {} is never used",
            i.name
        );
    }
    // The book's Action chapter documents every input and output.
    let section = std::fs::read_to_string(repo_root().join("docs/src/github-action.md"))
        .expect("the book's GitHub Action chapter");
    for name in a
        .inputs
        .iter()
        .map(|i| &i.name)
        .chain(a.outputs.iter().map(|o| &o.name))
    {
        assert!(
            section.contains(&format!("| `{name}` |")),
            "docs/src/github-action.md has no row for `{name}`"
        );
    }
}

/// One Rust version everywhere: every "1.NN or later" the README, the
/// book and the action say is the workspace's `rust-version`, and the
/// action's scripts read it from Cargo.toml rather than write it down.
#[test]
fn the_rust_version_is_the_workspaces_everywhere() {
    let root = repo_root();
    let cargo = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let want = cargo
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("rust-version in Cargo.toml");
    let mut files = vec![root.join("README.md"), root.join("action.yml")];
    for dir in ["docs/src", "action"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            files.push(e.unwrap().path());
        }
    }
    let mut seen = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (i, _) in text.match_indices(" or later") {
            let before = text[..i].trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
            let version = &text[before.len()..i];
            if version.starts_with("1.") {
                assert_eq!(version, want, "{}: Rust {version}", f.display());
                seen += 1;
            }
        }
        if f.extension().is_some_and(|e| e == "sh") {
            assert!(
                !text.contains(want),
                "{}: writes the version down",
                f.display()
            );
        }
    }
    assert!(seen >= 2, "the install chapter and the action's say it");
}
