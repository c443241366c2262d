//! What a run costs at its start and end: in a git work tree whose HEAD
//! does not move, the base commit and the commits made are read from the
//! repository's files with no git process; what git would answer
//! differently (a packed branch, a detached HEAD, commits made during the
//! run) is still answered the same.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::support::{Case, git, repo};

/// A directory holding a `git` that logs each call to `log` and then runs
/// the real git.
pub(crate) fn logging_git(log: &Path) -> PathBuf {
    let real = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    // Outside the work tree, so the run's report is not about it.
    let bin = std::env::temp_dir().join(format!("warden-git-log-{}", std::process::id()));
    std::fs::create_dir_all(&bin).unwrap();
    let script = bin.join("git");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            real.trim()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

#[test]
fn a_run_whose_head_does_not_move_starts_no_git() {
    let case = Case::new();
    let base = repo(&case);
    let log = case.path().join("git-calls.log");
    let bin = logging_git(&log);
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = case
        .command(&["run", "exec", "-q", "--", "true"])
        .env("PATH", &path)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&bin);
    assert!(out.status.success(), "{out:?}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(case.run_dir().join("run.json")).unwrap())
            .unwrap();
    assert_eq!(report["base_commit"], base.as_str(), "{report}");
    assert_eq!(report["branch"], "main", "{report}");
    assert!(report["commits"].as_array().unwrap().is_empty(), "{report}");
    let calls = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        calls.is_empty(),
        "a run in a work tree whose HEAD did not move ran git:\n{calls}"
    );
}

#[test]
fn a_packed_branch_still_gives_the_base_and_only_the_new_commits() {
    let case = Case::new();
    let base = repo(&case);
    git(case.path(), &["pack-refs", "--all"]);
    assert!(!case.path().join(".git/refs/heads/main").exists());
    let done = case.run(&[
        "run",
        "exec",
        "--",
        "sh",
        "-c",
        "git commit -q --allow-empty -m during",
    ]);
    let report = done.report();
    assert_eq!(report["base_commit"], base.as_str(), "{report}");
    let commits = report["commits"].as_array().unwrap();
    assert_eq!(commits.len(), 1, "only the run's commit: {report}");
    assert_eq!(commits[0]["subject"], "during", "{report}");
}

#[test]
fn a_detached_head_gives_its_commit_as_the_base() {
    let case = Case::new();
    let base = repo(&case);
    git(case.path(), &["checkout", "-q", "--detach"]);
    let done = case.run(&["run", "exec", "--", "true"]);
    let report = done.report();
    assert_eq!(report["base_commit"], base.as_str(), "{report}");
    assert!(report["branch"].is_null(), "{report}");
    assert!(report["commits"].as_array().unwrap().is_empty(), "{report}");
}

#[test]
fn a_commit_made_during_the_run_is_reported() {
    let case = Case::new();
    let base = repo(&case);
    let done = case.run(&[
        "run",
        "exec",
        "--",
        "sh",
        "-c",
        "echo more >> README && git commit -qam 'more text'",
    ]);
    let report = done.report();
    assert_eq!(report["base_commit"], base.as_str(), "{report}");
    let commits = report["commits"].as_array().unwrap();
    assert_eq!(commits.len(), 1, "{report}");
    assert_eq!(commits[0]["subject"], "more text", "{report}");
    assert_eq!(commits[0]["files_changed"], 1, "{report}");
}
