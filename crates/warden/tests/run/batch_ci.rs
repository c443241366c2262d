//! A batch and a session in CI: off a terminal, a heartbeat for each
//! silent run, warnings, and a failed run's reason and stderr tail; under
//! GitHub Actions, one folded group per run, annotations, and one step
//! summary for a batch or a session.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::batch::write;
use crate::support::{Case, Finished, repo};

/// Three runs: one that says something and succeeds, one silent for a
/// while (its heartbeats), one that fails with a line on stderr, and one
/// that stalls (a warning first).
const BATCH: &str = r#"[defaults]
agent = "exec"

[[run]]
name = "ok"
command = ["sh", "-c", "echo hello from ok"]

[[run]]
name = "quiet"
command = ["sh", "-c", "sleep 1.2"]

[[run]]
name = "bad"
command = ["sh", "-c", "echo oops on stderr >&2; exit 3"]

[[run]]
name = "stuck"
stall_timeout = "800ms"
command = ["sh", "-c", "echo up; exec sleep 30"]
"#;

fn batch(case: &Case, github: bool) -> Finished {
    let file = write(case, BATCH);
    let dir = case.path().join("batch");
    let mut cmd: Command =
        case.command(&["batch", &file, "-j", "4", "--dir", dir.to_str().unwrap()]);
    cmd.env("WARDEN_HEARTBEAT", "300ms");
    if github {
        cmd.env("GITHUB_ACTIONS", "true")
            .env("GITHUB_STEP_SUMMARY", case.path().join("summary.md"))
            .env("GITHUB_WORKSPACE", case.path());
    }
    case.finished(cmd.output().unwrap(), Instant::now())
}

/// The log's groups: each title with its lines; fails on a group opened
/// inside another or never closed.
fn groups(log: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let mut open: Option<(String, Vec<String>)> = None;
    for line in log.lines() {
        if let Some(title) = line.strip_prefix("::group::") {
            assert!(open.is_none(), "a group inside another: {log}");
            open = Some((title.to_string(), Vec::new()));
        } else if line == "::endgroup::" {
            out.push(open.take().expect("an end without a group"));
        } else if let Some((_, lines)) = open.as_mut() {
            lines.push(line.to_string());
        }
    }
    assert!(open.is_none(), "a group never closed: {log}");
    out
}

fn group<'a>(all: &'a [(String, Vec<String>)], name: &str) -> &'a (String, Vec<String>) {
    let tag = format!("] [{name}] ");
    let mine: Vec<_> = all.iter().filter(|(t, _)| t.contains(&tag)).collect();
    assert_eq!(mine.len(), 1, "one group for {name}: {all:?}");
    mine[0]
}

#[test]
fn under_github_actions_a_batch_folds_each_run_annotates_and_writes_one_summary() {
    let case = Case::new();
    let done = batch(&case, true);
    assert_eq!(done.code, 1, "two runs did not succeed: {}", done.stderr);
    let log = &done.stderr;
    let all = groups(log);
    assert_eq!(all.len(), 4, "a group per run: {log}");

    let (title, lines) = group(&all, "ok");
    assert!(title.contains("[ok] succeeded in"), "{title}");
    assert!(
        lines.iter().any(|l| l == "[ok] out| hello from ok"),
        "the run's output folds in its group: {lines:?}"
    );
    let (title, lines) = group(&all, "bad");
    assert!(
        title.contains("[bad] agent_failed in") && title.contains("exited with code 3"),
        "{title}"
    );
    let at = lines
        .iter()
        .position(|l| l == "[bad] stderr.log, last 1 line(s):")
        .unwrap_or_else(|| panic!("the stderr tail: {lines:?}"));
    assert_eq!(lines[at + 1], "[bad]   | oops on stderr");
    let (title, lines) = group(&all, "stuck");
    assert!(title.contains("[stuck] stalled in"), "{title}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("[stuck] warning: no activity for")),
        "the stall warning is in the run's group: {lines:?}"
    );

    // Annotations: a warning for the stall warning, an error per run that
    // did not succeed, none for one that did.
    assert!(
        log.lines()
            .any(|l| l.starts_with("::warning title=warden%3A stuck::no activity for")),
        "{log}"
    );
    let errors: Vec<&str> = log.lines().filter(|l| l.starts_with("::error ")).collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors
            .iter()
            .any(|l| l.starts_with("::error title=warden%3A bad::agent_failed in"))
    );
    assert!(
        errors
            .iter()
            .any(|l| l.starts_with("::error title=warden%3A stuck::stalled in"))
    );

    // The silent run's heartbeat, outside any group.
    let heartbeat = log
        .lines()
        .find(|l| l.contains("[quiet] still running; last activity"))
        .unwrap_or_else(|| panic!("a heartbeat for the silent run: {log}"));
    assert!(!all.iter().any(|(_, ls)| ls.iter().any(|l| l == heartbeat)));

    // One summary: the counts, then a row per run with its directory.
    let md = std::fs::read_to_string(case.path().join("summary.md")).unwrap();
    assert_eq!(md.matches("### ").count(), 1, "one summary: {md}");
    assert!(
        md.contains("2 succeeded, 2 failed, 0 cancelled of 4"),
        "{md}"
    );
    for (name, verdict) in [
        ("ok", "✅ succeeded"),
        ("quiet", "✅ succeeded"),
        ("bad", "❌ agent_failed"),
        ("stuck", "❌ stalled"),
    ] {
        let row = md
            .lines()
            .find(|l| l.starts_with(&format!("| {name} |")))
            .unwrap_or_else(|| panic!("a row for {name}: {md}"));
        assert!(row.contains(verdict), "{row}");
        assert!(row.contains(&format!("| `batch/{name}` |")), "{row}");
    }
    assert!(md.contains("`batch/batch.json`"), "{md}");
    case.assert_nothing_left();
}

#[test]
fn off_a_terminal_a_batch_says_each_silent_run_is_alive_and_why_a_run_failed() {
    let case = Case::new();
    let done = batch(&case, false);
    assert_eq!(done.code, 1, "{}", done.stderr);
    let log = &done.stderr;
    assert!(
        !log.contains("::group::") && !log.contains("::error"),
        "{log}"
    );
    // A line at a time, each with the batch's clock.
    let line = |needle: &str| {
        log.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle:?} in {log}"))
    };
    assert!(line("[quiet] still running; last activity").starts_with('['));
    line("[bad] agent_failed in");
    line("[bad] stderr.log, last 1 line(s):");
    line("[bad]   | oops on stderr");
    line("[stuck] warning: no activity for");
    line("[stuck] stalled in");
    // A run that succeeded shows no stderr, a silent run only heartbeats.
    assert!(!log.contains("[ok] stderr.log"), "{log}");
    assert!(
        !log.contains("[stuck] stderr.log"),
        "nothing on its stderr: {log}"
    );
    case.assert_nothing_left();
}

#[test]
fn a_session_under_github_actions_writes_one_summary_with_every_iteration() {
    let case = Case::new();
    repo(&case);
    let mut cmd = case.command(&[
        "run",
        "exec",
        "--iterations",
        "2",
        "--",
        "sh",
        "-c",
        "n=$(cat count 2>/dev/null || echo 0); echo $((n+1)) > count; git add count; git commit -qm it; echo done",
    ]);
    let summary = case.path().join("summary.md");
    cmd.env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", &summary);
    let done = case.finished(cmd.output().unwrap(), Instant::now());
    assert_eq!(done.code, 0, "{}", done.stderr);
    let md = std::fs::read_to_string(&summary).unwrap();
    assert_eq!(
        md.matches("### ").count(),
        1,
        "one summary for the session: {md}"
    );
    assert!(
        md.contains("warden session") && md.contains("succeeded"),
        "{md}"
    );
    assert!(md.contains("| iterations | 2 of 2 |"), "{md}");
    assert!(md.contains("| commits | 2 |"), "{md}");
    for n in 1..=2 {
        assert!(
            md.lines()
                .any(|l| l.starts_with(&format!("| {n} | 1 | ✅ succeeded |"))),
            "a row for iteration {n}: {md}"
        );
    }
    assert!(Path::new(&summary).exists());
}
