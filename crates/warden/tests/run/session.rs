//! Sessions against real git in temporary repositories: commits in every
//! report, the iterations loop, worktrees, templates, structured output.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Case, git, kill, repo};

const COMMIT: &str = "echo work > work.txt && git add work.txt && git commit -qm 'agent work'";

fn assert_one_commit(report: &Value, base: &str, what: &str) {
    assert_eq!(report["base_commit"], base, "{what}: {report}");
    let commits = report["commits"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: no commits field"));
    assert_eq!(commits.len(), 1, "{what}: {commits:?}");
    assert_eq!(commits[0]["subject"], "agent work");
    assert_eq!(commits[0]["author"], "Test Agent <agent@example.com>");
    assert_eq!(commits[0]["files_changed"], 1);
}

#[test]
fn commits_are_reported_after_success_forced_completion_stall_and_cancel() {
    let case = Case::new();
    let base = repo(&case);
    let done = case.run(&[
        "run",
        "exec",
        "--",
        "sh",
        "-c",
        &format!("{COMMIT} && echo done"),
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_one_commit(&done.report(), &base, "success");

    for (what, flags, script, code) in [
        (
            "forced completion",
            vec!["--completion-timeout", "300ms"],
            format!("{COMMIT}; echo '<promise>COMPLETE</promise>'; sleep 600"),
            0,
        ),
        (
            "stall",
            vec!["--stall-timeout", "300ms"],
            format!("{COMMIT}; echo working; sleep 600"),
            3,
        ),
    ] {
        let case = Case::new();
        let base = repo(&case);
        let mut args = vec!["run", "exec", "--kill-grace", "200ms"];
        args.extend(flags);
        args.extend(["--", "sh", "-c", &script]);
        let done = case.run(&args);
        assert_eq!(done.code, code, "{what}: {}", done.stderr);
        assert_one_commit(&done.report(), &base, what);
    }

    let case = Case::new();
    let base = repo(&case);
    let child = case.spawn(&[
        "run",
        "exec",
        "--",
        "sh",
        "-c",
        &format!("{COMMIT}; echo committed; sleep 600"),
    ]);
    case.wait_for_output("stdout.log", "committed", Duration::from_secs(10));
    kill(child.id(), "INT");
    let done = case.finished(child.wait_with_output().unwrap(), Instant::now());
    assert_eq!(done.code, 130, "{}", done.stderr);
    assert_one_commit(&done.report(), &base, "cancel");
    case.assert_nothing_left();
}

/// Counts its iterations in a file, commits each, and prints the signal
/// at iteration `signal_at` (or fails at `fail_at`).
fn iteration_script(signal_at: u32, fail_at: u32) -> String {
    format!(
        "n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; git add count; git commit -qm \"iteration $n\"; \
         [ $n -eq {fail_at} ] && exit 1; [ $n -eq {signal_at} ] && echo '<promise>COMPLETE</promise>'; exit 0"
    )
}

fn session_json(case: &Case) -> Value {
    let text = std::fs::read_to_string(case.run_dir().join("session.json")).expect("session.json");
    serde_json::from_str(&text).unwrap()
}

#[test]
fn the_loop_stops_at_the_iteration_that_printed_the_signal() {
    let case = Case::new();
    repo(&case);
    let done = case.run(&[
        "run",
        "exec",
        "--iterations",
        "5",
        "--",
        "sh",
        "-c",
        &iteration_script(3, 99),
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let s = session_json(&case);
    assert_eq!(s["iterations_run"], 3, "{s}");
    assert_eq!(s["iterations_requested"], 5);
    assert_eq!(s["stopped_because"], "completion_signal");
    assert_eq!(s["verdict"], "succeeded");
    let runs = s["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    assert_eq!(runs[2]["completion_signal_seen"], true);
    assert_eq!(runs[0]["completion_signal_seen"], false);
    assert_eq!(s["commits"].as_array().unwrap().len(), 3);
    for (i, r) in runs.iter().enumerate() {
        let dir = Path::new(r["run_dir"].as_str().unwrap());
        assert!(
            dir.join("run.json").exists(),
            "iteration {} has its own run dir",
            i + 1
        );
        assert_eq!(r["commits"].as_array().unwrap().len(), 1);
    }
    assert!(
        done.stderr.contains("stopped by completion signal"),
        "{}",
        done.stderr
    );
}

#[test]
fn a_failing_iteration_ends_the_session_with_its_verdict() {
    let case = Case::new();
    repo(&case);
    let done = case.run(&[
        "run",
        "exec",
        "--iterations",
        "5",
        "--",
        "sh",
        "-c",
        &iteration_script(99, 2),
    ]);
    assert_eq!(done.code, 1, "{}", done.stderr);
    let s = session_json(&case);
    assert_eq!(s["iterations_run"], 2);
    assert_eq!(s["stopped_because"], "iteration_failed");
    assert_eq!(s["verdict"], "agent_failed");
    // Exhausting the iterations without the signal is not a failure.
    let case = Case::new();
    repo(&case);
    let done = case.run(&[
        "run",
        "exec",
        "--iterations",
        "2",
        "--",
        "sh",
        "-c",
        &iteration_script(99, 99),
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(
        session_json(&case)["stopped_because"],
        "iterations_exhausted"
    );
}

#[test]
fn a_clean_worktree_is_removed_and_its_branch_keeps_the_commits() {
    let case = Case::new();
    let base = repo(&case);
    let done = case.run(&[
        "run",
        "exec",
        "--worktree",
        "--name",
        "fixer",
        "--iterations",
        "1",
        "--",
        "sh",
        "-c",
        COMMIT,
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let s = session_json(&case);
    let wt = &s["worktree"];
    let branch = wt["branch"].as_str().unwrap();
    assert!(branch.starts_with("warden/fixer/"), "{branch}");
    assert_eq!(wt["removed"], true, "{s}");
    assert!(!Path::new(wt["path"].as_str().unwrap()).exists());
    assert_eq!(
        git(case.path(), &["log", "-1", "--format=%s", branch]),
        "agent work"
    );
    assert_eq!(wt["base"], base);
    assert!(
        !case.path().join("work.txt").exists(),
        "the work happened in the worktree, not here"
    );
}

#[test]
fn a_dirty_worktree_is_kept_and_reported() {
    let case = Case::new();
    repo(&case);
    let done = case.run(&[
        "run",
        "exec",
        "--worktree",
        "feature/x",
        "--",
        "sh",
        "-c",
        "echo wip > notes.txt",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let s = session_json(&case);
    let wt = &s["worktree"];
    assert_eq!(wt["branch"], "feature/x");
    assert_eq!(wt["removed"], false);
    assert_eq!(wt["dirty"], true);
    let path = Path::new(wt["path"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(path.join("notes.txt")).unwrap(),
        "wip\n"
    );
    assert!(done.stderr.contains("worktree kept at"), "{}", done.stderr);
    // The same branch again is refused: sessions never share one.
    let again = case.run(&[
        "run",
        "exec",
        "--run-dir",
        "run-2",
        "--worktree",
        "feature/x",
        "--",
        "true",
    ]);
    assert_eq!(again.code, 2, "{}", again.stderr);
    assert!(again.stderr.contains("feature/x"), "{}", again.stderr);
}

#[test]
fn two_sessions_at_once_never_share_a_worktree_or_branch() {
    let case = Case::new();
    repo(&case);
    let start = |_: u32| {
        let mut cmd = case.command(&[
            "run",
            "exec",
            "--worktree",
            "--keep-worktree",
            "--",
            "sh",
            "-c",
            "sleep 0.3; pwd",
        ]);
        cmd.env_remove("WARDEN_RUN_DIR");
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (start(1), start(2));
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert!(
        a.status.success() && b.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&a.stderr),
        String::from_utf8_lossy(&b.stderr)
    );
    let sessions: Vec<Value> = std::fs::read_dir(case.path().join(".warden/sessions"))
        .unwrap()
        .flatten()
        .map(|d| {
            serde_json::from_str(&std::fs::read_to_string(d.path().join("session.json")).unwrap())
                .unwrap()
        })
        .collect();
    assert_eq!(sessions.len(), 2);
    assert_ne!(
        sessions[0]["worktree"]["branch"],
        sessions[1]["worktree"]["branch"]
    );
    assert_ne!(
        sessions[0]["worktree"]["path"],
        sessions[1]["worktree"]["path"]
    );
}

/// A stand-in claude that records its stdin and argv and answers with
/// `text` as its final result.
fn fake_claude(case: &Case, result_if_resumed: &str, result: &str) -> std::path::PathBuf {
    let line = |t: &str| {
        serde_json::json!({"type": "result", "subtype": "success", "is_error": false, "result": t, "num_turns": 1, "session_id": "sess-1"}).to_string()
    };
    let script = format!(
        "#!/bin/sh\ncat > '{dir}/stdin'\nprintf '%s\\n' \"$@\" > '{dir}/argv'\necho '{{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"sess-1\"}}'\ncase \" $* \" in *' --resume '*) echo '{resumed}' ;; *) echo '{first}' ;; esac\n",
        dir = case.path().display(),
        resumed = line(result_if_resumed),
        first = line(result)
    );
    let bin = case.path().join("claude-stand-in");
    std::fs::write(&bin, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

#[test]
fn prompt_files_are_templates_filled_from_args_and_builtins() {
    let case = Case::new();
    repo(&case);
    let bin = fake_claude(&case, "x", "done");
    std::fs::write(
        case.path().join("task.md"),
        "Fix issue {{ISSUE}} on {{BRANCH}} (iteration {{ITERATION}}).",
    )
    .unwrap();
    let done = case.run(&[
        "run",
        "claude",
        "-f",
        "task.md",
        "--arg",
        "ISSUE=42",
        "--arg",
        "UNUSED=1",
        "--agent-bin",
        bin.to_str().unwrap(),
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let stdin = std::fs::read_to_string(case.path().join("stdin")).unwrap();
    assert_eq!(stdin, "Fix issue 42 on main (iteration 1).");
    assert!(
        done.stderr.contains("--arg UNUSED is not used"),
        "{}",
        done.stderr
    );

    let missing = case.run(&[
        "run",
        "claude",
        "-f",
        "task.md",
        "--agent-bin",
        bin.to_str().unwrap(),
    ]);
    assert_eq!(missing.code, 2, "{}", missing.stderr);
    assert!(
        missing.stderr.contains("{{ISSUE}}") && missing.stderr.contains("--arg ISSUE=VALUE"),
        "{}",
        missing.stderr
    );

    let bad = case.run(&[
        "run",
        "claude",
        "-f",
        "task.md",
        "--arg",
        "ISSUE",
        "--agent-bin",
        bin.to_str().unwrap(),
    ]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("NAME=VALUE"), "{}", bad.stderr);

    // The preamble tells the agent its deadline and the signal.
    let done = case.run(&[
        "run",
        "claude",
        "plain prompt",
        "--run-dir",
        "run-2",
        "--preamble",
        "--agent-bin",
        bin.to_str().unwrap(),
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let stdin = std::fs::read_to_string(case.path().join("stdin")).unwrap();
    assert!(
        stdin.starts_with("plain prompt\n")
            && stdin.contains("<promise>COMPLETE</promise>")
            && stdin.contains("WARDEN_DEADLINE"),
        "{stdin}"
    );
}

#[test]
fn structured_output_is_validated_against_the_schema() {
    let case = Case::new();
    std::fs::write(
        case.path().join("schema.json"),
        r#"{"type":"object","required":["ok","count"],"properties":{"ok":{"type":"boolean"},"count":{"type":"integer"}}}"#,
    )
    .unwrap();
    let good = case.run(&[
        "run",
        "exec",
        "--output-tag",
        "result",
        "--output-schema",
        "schema.json",
        "--",
        "sh",
        "-c",
        "echo 'draft <result>{}</result>'; echo '<result>{\"ok\": true, \"count\": 3}</result>'",
    ]);
    assert_eq!(good.code, 0, "{}", good.stderr);
    assert_eq!(
        good.report()["output"],
        serde_json::json!({"ok": true, "count": 3})
    );

    let case = Case::new();
    std::fs::write(
        case.path().join("schema.json"),
        r#"{"type":"object","properties":{"count":{"type":"integer"}}}"#,
    )
    .unwrap();
    let wrong = case.run(&[
        "run",
        "exec",
        "--output-tag",
        "result",
        "--output-schema",
        "schema.json",
        "--",
        "echo",
        "<result>{\"count\": \"three\"}</result>",
    ]);
    assert_eq!(wrong.code, 1, "{}", wrong.stderr);
    let r = wrong.report();
    assert_eq!(r["verdict"], "agent_failed");
    let reason = r["reason"].as_str().unwrap();
    assert!(
        reason.contains("<result>") && reason.contains("/count"),
        "{reason}"
    );

    let case = Case::new();
    let none = case.run(&[
        "run",
        "exec",
        "--output-tag",
        "result",
        "--",
        "echo",
        "no tag here",
    ]);
    assert_eq!(none.code, 1);
    assert!(
        none.report()["reason"]
            .as_str()
            .unwrap()
            .contains("no <result>"),
        "{}",
        none.stderr
    );

    let case = Case::new();
    let no_tag = case.run(&[
        "run",
        "exec",
        "--output-schema",
        "missing.json",
        "--",
        "true",
    ]);
    assert_eq!(no_tag.code, 2);
    assert!(no_tag.stderr.contains("missing.json"), "{}", no_tag.stderr);
}

#[test]
fn a_wrong_output_is_retried_by_resuming_the_agent_session() {
    let case = Case::new();
    repo(&case);
    let bin = fake_claude(
        &case,
        "fixed: <result>{\"ok\": true}</result>",
        "I forgot the tag",
    );
    let done = case.run(&[
        "run",
        "claude",
        "report",
        "--output-tag",
        "result",
        "--output-retries",
        "2",
        "--agent-bin",
        bin.to_str().unwrap(),
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let s = session_json(&case);
    let runs = s["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{s}");
    assert_eq!(runs[1]["output_retry"], true);
    assert_eq!(s["output"], "{\"ok\": true}");
    assert_eq!(s["verdict"], "succeeded");
    let argv = std::fs::read_to_string(case.path().join("argv")).unwrap();
    assert!(argv.contains("--resume\nsess-1"), "{argv}");
    let stdin = std::fs::read_to_string(case.path().join("stdin")).unwrap();
    assert!(
        stdin.contains("<result>") && stdin.contains("no <result>"),
        "the correction names the problem: {stdin}"
    );

    let e = case.run(&[
        "run",
        "opencode",
        "x",
        "--output-tag",
        "r",
        "--output-retries",
        "1",
        "--agent-bin",
        "/bin/true",
    ]);
    assert_eq!(e.code, 2);
    assert!(e.stderr.contains("claude, codex and pi"), "{}", e.stderr);
}

#[test]
fn exec_refuses_agent_options() {
    let case = Case::new();
    for flag in [["--model", "x"], ["--resume", "s"], ["--arg", "A=b"]] {
        let done = case.run(&["run", "exec", flag[0], flag[1], "--", "true"]);
        assert_eq!(done.code, 2, "{flag:?}: {}", done.stderr);
        assert!(done.stderr.contains(flag[0]), "{}", done.stderr);
    }
}
