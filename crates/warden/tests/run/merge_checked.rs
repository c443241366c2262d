//! `--merge` merges exactly what the check passed on, and moves the
//! user's checkout by the user's own attributes: an agent that hides
//! changes from git, commits after the check, or marks its files for a
//! filter of the user's gets nothing merged or run.

use std::path::Path;

use serde_json::Value;

use crate::support::{Case, Finished, git, repo};

fn session(case: &Case) -> Value {
    let text = std::fs::read_to_string(case.path().join("run/session.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// `run exec --worktree --merge` with `flags`, the agent being `script`,
/// with `home` as HOME when given.
fn merged(case: &Case, flags: &[&str], script: &str, home: Option<&Path>) -> Finished {
    let mut args = vec![
        "run",
        "exec",
        "--worktree",
        "--merge",
        "--kill-grace",
        "200ms",
    ];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    let mut cmd = case.command(&args);
    if let Some(home) = home {
        cmd.env("HOME", home);
    }
    case.finished(cmd.output().unwrap(), std::time::Instant::now())
}

fn user_repo(case: &Case) -> String {
    let base = repo(case);
    std::fs::write(case.path().join(".git/info/exclude"), "/run/\n/.warden/\n").unwrap();
    std::fs::write(case.path().join("file"), "start\n").unwrap();
    git(case.path(), &["add", "file"]);
    git(case.path(), &["commit", "-qm", "file"]);
    let _ = base;
    git(case.path(), &["rev-parse", "HEAD"])
}

#[test]
fn a_check_passed_on_changes_the_index_hides_merges_nothing() {
    let case = Case::new();
    let main = user_repo(&case);
    let done = merged(
        &case,
        &["--check", "grep -qx good file"],
        "echo BAD > file && git commit -qam evil && echo good > file \
         && git update-index --skip-worktree file",
        None,
    );
    assert_eq!(done.code, 11, "{}", done.stderr);
    let s = session(&case);
    assert_eq!(s["verdict"], "merge_conflict", "{s}");
    assert!(
        s["error"].as_str().unwrap().contains("the index hides"),
        "{s}"
    );
    assert_eq!(git(case.path(), &["rev-parse", "main"]), main, "main moved");
    assert_eq!(
        std::fs::read_to_string(case.path().join("file")).unwrap(),
        "start\n"
    );
}

#[test]
fn a_commit_made_after_the_check_passed_is_not_merged() {
    let case = Case::new();
    let main = user_repo(&case);
    let done = merged(
        &case,
        &[
            "--check",
            "grep -qx good file",
            "--finally",
            "echo BAD > file && git commit -qam after-the-check",
        ],
        "echo good > file && git commit -qam good",
        None,
    );
    assert_eq!(done.code, 11, "{}", done.stderr);
    let s = session(&case);
    assert_eq!(s["verdict"], "merge_conflict", "{s}");
    assert!(
        s["error"]
            .as_str()
            .unwrap()
            .contains("where the check passed"),
        "{s}"
    );
    assert_eq!(git(case.path(), &["rev-parse", "main"]), main, "main moved");

    // The same work, committed before the check and left alone, merges.
    let case = Case::new();
    user_repo(&case);
    let done = merged(
        &case,
        &["--check", "grep -qx good file"],
        "echo good > file && git commit -qam good",
        None,
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(
        std::fs::read_to_string(case.path().join("file")).unwrap(),
        "good\n"
    );
}

#[test]
fn the_fast_forward_reads_the_users_attributes_not_the_branchs() {
    // A filter of the user's own (in ~/.gitconfig), which the branch's
    // `.gitattributes` names for every file: checking the merge out must
    // not run it.
    let case = Case::new();
    user_repo(&case);
    let home = tempfile::tempdir().unwrap();
    let marker = home.path().join("smudged");
    std::fs::write(
        home.path().join(".gitconfig"),
        format!(
            "[filter \"spy\"]\n\tsmudge = sh -c 'touch {}; cat'\n\tclean = cat\n",
            marker.display()
        ),
    )
    .unwrap();
    let done = merged(
        &case,
        &[],
        "echo '* filter=spy' > .gitattributes && echo new > new.txt \
         && git add .gitattributes new.txt && git commit -qm marked",
        Some(home.path()),
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    let s = session(&case);
    assert_eq!(s["merged_into"], "main", "{s}");
    assert_eq!(
        std::fs::read_to_string(case.path().join("new.txt")).unwrap(),
        "new\n"
    );
    assert!(
        !marker.exists(),
        "the user's filter ran on the branch's say"
    );
}

#[test]
fn host_setup_outside_a_sandbox_needs_a_new_worktree() {
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--sandbox",
        "bwrap",
        "--host-setup",
        "sh bootstrap.sh",
        "--",
        "true",
    ]);
    assert_eq!(done.code, 2, "{}", done.stderr);
    assert!(
        done.stderr.contains("--host-setup") && done.stderr.contains("--worktree"),
        "{}",
        done.stderr
    );
}
