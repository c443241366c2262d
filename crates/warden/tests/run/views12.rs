//! Every view shows what the supervisor decided: the live and plain views'
//! quiet counter, `warden report` and its HTML timeline read the
//! supervisor's status snapshots and `run.json`, never their own idea of
//! activity. And the timeline draws each fact as it is: one band per
//! silence, tokens as steps, the end of the run on top, each tool call
//! with what it ran, the header and the session's summary.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{Case, WARDEN};

const FIXTURE: &str = "../warden-events/tests/fixtures/claude/success_with_tools.jsonl";

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE)
}

/// An executable stand-in for the claude CLI: `body` after reading stdin.
fn stand_in(case: &Case, body: &str) -> String {
    let bin = case.path().join("claude-stand-in");
    crate::support::write_script(&bin, &format!("#!/bin/sh\ncat > /dev/null\n{body}\n"));
    bin.to_str().unwrap().to_string()
}

/// `warden report DIR --silence S --html FILE`: the text and the page.
fn report(dir: &Path, silence: &str, case: &Case) -> (String, String) {
    let html = case.path().join("timeline.html");
    let out = Command::new(WARDEN)
        .arg("report")
        .arg(dir)
        .args(["--silence", silence, "--html"])
        .arg(&html)
        .output()
        .unwrap();
    // `report` exits with the run's verdict code; only its own errors
    // (a changed log, an unreadable directory) fail the view.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() != Some(2) && !stderr.contains("warden: error"),
        "warden report failed: {stderr}"
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        std::fs::read_to_string(&html).unwrap(),
    )
}

/// The `d` of the token line.
fn token_path(page: &str) -> &str {
    let at = page
        .find("<path class=\"tokens\" d=\"")
        .expect("a token line in the page");
    let rest = &page[at + "<path class=\"tokens\" d=\"".len()..];
    &rest[..rest.find('"').unwrap()]
}

/// The `<circle` elements of the page, in drawing order.
fn circles(page: &str) -> Vec<&str> {
    page.match_indices("<circle")
        .map(|(i, _)| &page[i..i + page[i..].find("</circle>").unwrap()])
        .collect()
}

#[test]
fn the_timeline_draws_two_silences_steps_tokens_and_names_each_command() {
    let case = Case::new();
    let f = fixture();
    let f = f.display();
    // Two silences of 600 ms back to back, split by one line.
    let bin = stand_in(
        &case,
        &format!("head -n 3 '{f}'\nsleep 0.6\nsed -n 4p '{f}'\nsleep 0.6\ntail -n +5 '{f}'"),
    );
    let done = case.run(&["run", "claude", "x", "--agent-bin", &bin]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let (_, page) = report(&done.run_dir, "500ms", &case);

    let bands = page.matches("<rect class=\"silence\"").count();
    assert_eq!(bands, 2, "two silences, two bands:\n{page}");

    let d = token_path(&page);
    assert!(
        d.starts_with('M')
            && d.split_whitespace()
                .all(|p| p.starts_with(['M', 'H', 'V']) || p.parse::<f64>().is_ok()),
        "the token line is made of steps (H and V), never a slope: {d}"
    );
    assert!(
        d.contains(" V"),
        "the token line rises where the count changed: {d}"
    );

    assert!(
        page.contains(">Bash: cargo test</text>"),
        "the tool row names the command it ran"
    );
    assert!(
        page.contains("<title>Bash: cargo test</title>"),
        "the full input is on hover"
    );

    for row in [
        "<td>model</td><td>claude-sonnet-4-5</td>",
        "<td>cost</td><td>$0.0412</td>",
        "<td>commits</td>",
    ] {
        assert!(page.contains(row), "the header has {row}");
    }
    assert!(
        page.contains("width=\"100%\"") && page.contains("viewBox=\"0 0 1200 "),
        "the chart is as wide as the page"
    );
    let c = circles(&page);
    let last = c.last().expect("the end is drawn");
    assert!(
        last.contains("class=\"end\"") && last.contains("#1a7f37"),
        "a run that succeeded ends in green: {last}"
    );
}

#[test]
fn a_stalled_runs_timeline_ends_in_red_on_top() {
    let case = Case::new();
    let f = fixture();
    let bin = stand_in(
        &case,
        &format!("head -n 2 '{}'\nexec sleep 600", f.display()),
    );
    let done = case.run(&[
        "run",
        "claude",
        "x",
        "--agent-bin",
        &bin,
        "--stall-timeout",
        "400ms",
        "--kill-grace",
        "200ms",
    ]);
    assert_eq!(done.code, 3, "{}", done.stderr);
    let (_, page) = report(&done.run_dir, "300ms", &case);
    let c = circles(&page);
    let last = c.last().expect("the end is drawn");
    assert!(
        last.contains("class=\"end\"") && last.contains("#cf222e") && last.contains("stalled"),
        "a stalled run ends in a red marker, drawn last: {last}"
    );
    assert!(
        !c.iter()
            .any(|c| c.contains("exited") && c.contains("#1a7f37")),
        "the kill is no green dot: {c:#?}"
    );
    case.assert_nothing_left();
}

#[test]
fn a_session_page_opens_with_the_sessions_summary() {
    let case = Case::new();
    let done = case.run(&["run", "exec", "--iterations", "2", "--", "echo", "hi"]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let (_, page) = report(&case.run_dir(), "30s", &case);
    let at = page
        .find("<section class=\"session\">")
        .expect("a session summary");
    assert!(
        at < page.find("<section class=\"run\">").expect("the runs"),
        "the summary comes first"
    );
    for row in [
        "<td>iterations</td><td>2 of 2</td>",
        "<td>stopped because</td>",
        "<td>tokens</td>",
        "<td>tool calls</td>",
        "<td>commits</td><td>none</td>",
        "<td>runs</td><td><table",
    ] {
        assert!(page.contains(row), "the session summary has {row}:\n{page}");
    }
    assert_eq!(page.matches("<section class=\"run\">").count(), 2);
}

/// The seconds of each plain heartbeat's "last activity X ago".
fn heartbeats(stderr: &str) -> Vec<f64> {
    stderr
        .lines()
        .filter_map(|l| l.split("last activity ").nth(1))
        .filter_map(|l| l.split(" ago").next())
        .map(|q| {
            if let Some(ms) = q.strip_suffix("ms") {
                ms.parse::<f64>().unwrap() / 1000.0
            } else if let Some(s) = q.strip_suffix('s') {
                s.parse::<f64>().unwrap_or(f64::MAX)
            } else {
                f64::MAX
            }
        })
        .collect()
}

#[test]
fn lines_with_no_event_are_activity_in_the_quiet_counter() {
    let case = Case::new();
    // Well-formed lines the decoder knows no event for, for 3 s: the
    // agent is alive, though no event says so.
    let bin = stand_in(
        &case,
        &format!(
            "head -n 1 '{f}'\ni=0\nwhile [ $i -lt 30 ]; do echo '{{\"type\":\"not_an_event\"}}'; sleep 0.1; i=$((i+1)); done\ntail -n 1 '{f}'",
            f = fixture().display()
        ),
    );
    let done = case.run(&[
        "run",
        "claude",
        "x",
        "--agent-bin",
        &bin,
        "--heartbeat",
        "300ms",
        "--stall-timeout",
        "2s",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let beats = heartbeats(&done.stderr);
    assert!(beats.len() >= 5, "heartbeats:\n{}", done.stderr);
    let worst = beats.iter().copied().fold(0.0, f64::max);
    assert!(
        worst < 1.8,
        "the quiet counter says the agent was quiet for {worst}s while it printed a line every 100 ms:\n{}",
        done.stderr
    );
    assert!(
        !done.stderr.contains("no activity for"),
        "no stall warning: {}",
        done.stderr
    );
    // The snapshots agree with run.json, and so does `warden report`.
    let r = done.report();
    let status = done.events_of("status");
    let last = status.last().expect("status snapshots in events.jsonl");
    assert_eq!(last["last_activity_ms"], r["last_activity_ms"]);
    assert_eq!(last["activity_lines"], r["activity_lines"]);
    assert!(r["activity_lines"].as_u64().unwrap() >= 32, "{r}");
    let (text, page) = report(&done.run_dir, "800ms", &case);
    let longest = crate::support::ms(&r["longest_silence_ms"]);
    assert!(longest < 800, "{r}");
    assert!(
        text.contains(&format!("longest silence {}", fmt_ms(longest))),
        "report says what run.json says ({longest} ms):\n{text}"
    );
    assert_eq!(
        page.matches("<rect class=\"silence\"").count(),
        0,
        "no silence of 800 ms in the timeline either"
    );
}

fn fmt_ms(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else {
        format!("{:.1}s", ms as f64 / 1000.0)
    }
}

#[test]
fn blank_and_malformed_lines_are_not_activity_in_any_view() {
    let case = Case::new();
    let bin = stand_in(
        &case,
        &format!(
            "head -n 1 '{}'\ni=0\nwhile [ $i -lt 40 ]; do echo 'not json'; echo; sleep 0.05; i=$((i+1)); done\nexec sleep 600",
            fixture().display()
        ),
    );
    let done = case.run(&[
        "run",
        "claude",
        "x",
        "--agent-bin",
        &bin,
        "--heartbeat",
        "300ms",
        "--stall-timeout",
        "1s",
        "--kill-grace",
        "200ms",
    ]);
    assert_eq!(done.code, 3, "stalled: {}", done.stderr);
    let beats = heartbeats(&done.stderr);
    assert!(
        beats.iter().any(|q| *q >= 0.5),
        "the quiet counter grows through lines that are not activity:\n{}",
        done.stderr
    );
    let r = done.report();
    assert_eq!(r["activity_lines"], 1, "{r}");
    let longest = crate::support::ms(&r["longest_silence_ms"]);
    assert!(longest >= 1000, "{r}");
    let (text, page) = report(&done.run_dir, "500ms", &case);
    assert!(
        text.contains(&format!("longest silence {}", fmt_ms(longest))),
        "report says what run.json says ({longest} ms):\n{text}"
    );
    assert_eq!(
        page.matches("<rect class=\"silence\"").count(),
        1,
        "one silence, from the first line to the end"
    );
    case.assert_nothing_left();
}

#[test]
fn a_tool_with_a_declared_limit_shows_the_supervisors_deadline_not_a_stall() {
    let case = Case::new();
    let f = fixture();
    let f = f.display();
    // The Bash call declares a 15 min limit, so the supervisor stretches
    // the 1 s stall clock; the views must say so, not count down to 1 s.
    let bin = stand_in(
        &case,
        &format!("head -n 3 '{f}'\nsleep 1.6\ntail -n +4 '{f}'"),
    );
    let done = case.run(&[
        "run",
        "claude",
        "x",
        "--agent-bin",
        &bin,
        "--heartbeat",
        "300ms",
        "--stall-timeout",
        "1s",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let beats: Vec<&str> = done
        .stderr
        .lines()
        .filter(|l| l.contains("still running"))
        .collect();
    assert!(beats.len() >= 3, "{}", done.stderr);
    for b in &beats[1..] {
        assert!(
            b.contains("ended as stalled in 15m"),
            "the heartbeat shows the supervisor's stretched deadline: {b}\n{}",
            done.stderr
        );
    }
    let status = done.events_of("status");
    assert!(
        status
            .iter()
            .any(|s| ms_of(&s["stall_deadline_ms"]) > 15 * 60 * 1000),
        "{status:?}"
    );
}

fn ms_of(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or(0)
}
