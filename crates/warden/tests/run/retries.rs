//! Retries, as the report and the summary line count them: one per model
//! request sent again, whether the agent says so on stdout or only on
//! stderr; the error that ends a run is not one. Stand-in CLIs replay
//! streams recorded from the real ones.

use std::path::{Path, PathBuf};

use crate::support::Case;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../warden-events/tests/fixtures")
        .join(rel)
}

/// A stand-in CLI that prints `stderr` on stderr and `stdout` on stdout.
fn fake_cli(case: &Case, stdout: &Path, stderr: Option<&Path>) -> PathBuf {
    let bin = case.path().join("fake-agent");
    let err = stderr.map_or(String::new(), |p| format!("cat '{}' >&2\n", p.display()));
    let script = format!(
        "#!/bin/sh\ncat > /dev/null\n{err}cat '{}'\nexit 0\n",
        stdout.display()
    );
    crate::support::write_script(&bin, &script);
    bin
}

fn summary_line(stderr: &str) -> &str {
    stderr
        .lines()
        .find(|l| l.starts_with("warden: ") && l.contains("turn(s)"))
        .unwrap_or_default()
}

fn announced_on_stderr(agent: &str) {
    let case = Case::new();
    let dir = format!("stderr/{agent}/retries");
    let bin = fake_cli(
        &case,
        &fixture(&format!("{dir}.stdout.jsonl")),
        Some(&fixture(&format!("{dir}.stderr.log"))),
    );
    let done = case.run(&["run", agent, "x", "--agent-bin", bin.to_str().unwrap()]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let r = done.report();
    assert_eq!(r["verdict"], "succeeded", "{}", done.stderr);
    assert_eq!(r["retries"], 2, "{}", done.stderr);
    assert_eq!(done.events_of("retry").len(), 2);
    let line = summary_line(&done.stderr);
    assert!(line.contains("; 2 retries"), "{line}");
}

#[test]
fn gemini_retries_announced_on_stderr_are_counted() {
    announced_on_stderr("gemini");
}

#[test]
fn opencode_retries_in_its_log_are_counted() {
    announced_on_stderr("opencode");
}

#[test]
fn codex_error_before_turn_failed_is_not_a_retry() {
    let case = Case::new();
    let bin = fake_cli(&case, &fixture("codex/turn_failed_auth.jsonl"), None);
    let done = case.run(&["run", "codex", "x", "--agent-bin", bin.to_str().unwrap()]);
    let r = done.report();
    assert_eq!(r["verdict"], "agent_failed", "{}", done.stderr);
    assert_eq!(r["retries"], 0, "{}", done.stderr);
    assert!(done.events_of("retry").is_empty());
    let line = summary_line(&done.stderr);
    assert!(
        !line.contains("retries") && !line.contains("1 retry"),
        "{line}"
    );
}

#[test]
fn codex_reconnects_are_retries() {
    let case = Case::new();
    let bin = fake_cli(&case, &fixture("codex/success_with_tools.jsonl"), None);
    let done = case.run(&["run", "codex", "x", "--agent-bin", bin.to_str().unwrap()]);
    let r = done.report();
    assert_eq!(r["retries"], 1, "{}", done.stderr);
    assert!(
        summary_line(&done.stderr).contains("; 1 retry"),
        "{}",
        done.stderr
    );
}

#[test]
fn replay_counts_the_retries_on_stderr_too() {
    let case = Case::new();
    let stdout = fixture("stderr/gemini/retries.stdout.jsonl");
    let stderr = fixture("stderr/gemini/retries.stderr.log");
    let replay = |extra: &[&str]| {
        let mut args = vec!["replay", "gemini", stdout.to_str().unwrap(), "--json"];
        args.extend(extra);
        let out = case.command(&args).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let retries = lines.iter().filter(|l| l["kind"] == "retry").count();
        // The summary: the last line of stderr.
        let err = String::from_utf8(out.stderr).unwrap();
        let summary: serde_json::Value =
            serde_json::from_str(err.lines().last().expect("a summary")).unwrap();
        (retries, summary["retries"].clone())
    };
    assert_eq!(replay(&[]), (0, serde_json::json!(0)));
    assert_eq!(
        replay(&["--stderr", stderr.to_str().unwrap()]),
        (2, serde_json::json!(2))
    );
}
