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
                let (name, tag) = action.split_once('@').expect("pinned");
                assert!(tag.starts_with('v'), "{action}: pinned by tag");
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
    // Every input is used by a step.
    let text = std::fs::read_to_string(repo_root().join("action.yml")).unwrap();
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
