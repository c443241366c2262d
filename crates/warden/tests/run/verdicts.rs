//! The verdict comes from the agent's last word: a terminal event followed
//! by more work is not terminal, and a fatal error the CLI would retry for
//! minutes ends the run within seconds (unless `--on-fatal-error wait`).
//! Stand-in CLIs play the lines the real ones write.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::{Case, Finished, ms};

/// A stand-in CLI: a shell script.
fn fake_cli(case: &Case, body: &str) -> PathBuf {
    let bin = case.path().join("fake-agent");
    crate::support::write_script(&bin, &format!("#!/bin/sh\n{body}\n"));
    bin
}

/// `echo` of JSON lines, one per argument.
fn say(lines: &[&str]) -> String {
    lines
        .iter()
        .map(|l| format!("echo '{l}'\n"))
        .collect::<String>()
}

fn run(case: &Case, agent: &str, bin: &Path, flags: &[&str]) -> Finished {
    let mut args = vec!["run", agent, "do it", "--agent-bin", bin.to_str().unwrap()];
    args.extend(flags);
    case.run(&args)
}

fn why(done: &Finished) -> String {
    format!(
        "exit {} after {:?}\nstderr:\n{}\nevents:\n{}",
        done.code,
        done.elapsed,
        done.stderr,
        std::fs::read_to_string(done.run_dir.join("events.jsonl")).unwrap_or_default()
    )
}

/// pi after a run of 429s: an assistant message that failed, `agent_end`,
/// then its own retry.
const PI_ERROR_END: &[&str] = &[
    r#"{"type":"session","version":3,"id":"s1"}"#,
    r#"{"type":"agent_start"}"#,
    r#"{"type":"turn_start"}"#,
    r#"{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"429 Too Many Requests"}}"#,
    r#"{"type":"turn_end"}"#,
    r#"{"type":"agent_end","messages":[]}"#,
];

const PI_RETRY: &[&str] = &[
    r#"{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":100,"errorMessage":"429 Too Many Requests"}"#,
    r#"{"type":"agent_start"}"#,
    r#"{"type":"turn_start"}"#,
    r#"{"type":"tool_execution_start","toolCallId":"c1","toolName":"bash","args":{"command":"sleep 2"}}"#,
];

const PI_SUCCESS_END: &[&str] = &[
    r#"{"type":"tool_execution_end","toolCallId":"c1","toolName":"bash","result":{"content":[]},"isError":false}"#,
    r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"all done"}],"stopReason":"stop"}}"#,
    r#"{"type":"agent_end","messages":[]}"#,
];

#[test]
fn a_terminal_event_followed_by_work_is_not_terminal_and_the_last_one_decides() {
    let case = Case::new();
    let bin = fake_cli(
        &case,
        &format!(
            "{}{}sleep 2\n{}exit 0",
            say(PI_ERROR_END),
            say(PI_RETRY),
            say(PI_SUCCESS_END)
        ),
    );
    // The quiet tool (2 s) is longer than the completion window: only the
    // stall clock may judge it.
    let done = run(
        &case,
        "pi",
        &bin,
        &["--completion-timeout", "300ms", "--stall-timeout", "30s"],
    );
    let why = why(&done);
    let r = done.report();
    assert_eq!(r["verdict"], "succeeded", "{why}");
    assert_eq!(r["forced_completion"], false, "{why}");
    assert_eq!(r["final_text"], "all done", "{why}");
    assert!(done.events_of("terminating").is_empty(), "{why}");
    assert_eq!(done.events_of("result").len(), 2, "{why}");
    // The report's terminal event is the last one.
    assert!(ms(&r["terminal_event_ms"]) >= 2000, "{why}");
}

#[test]
fn work_after_a_terminal_event_is_under_the_stall_clock() {
    let case = Case::new();
    let bin = fake_cli(
        &case,
        &format!("{}{}sleep 600", say(PI_ERROR_END), say(PI_RETRY)),
    );
    let done = run(
        &case,
        "pi",
        &bin,
        &[
            "--completion-timeout",
            "300ms",
            "--stall-timeout",
            "1500ms",
            "--kill-grace",
            "200ms",
        ],
    );
    let why = why(&done);
    let r = done.report();
    assert_eq!(r["verdict"], "stalled", "{why}");
    assert_eq!(r["forced_completion"], false, "{why}");
    case.assert_nothing_left();
}

#[test]
fn a_terminal_event_then_silence_still_gets_the_completion_window() {
    let case = Case::new();
    let bin = fake_cli(&case, &format!("{}sleep 600", say(PI_ERROR_END)));
    let done = run(
        &case,
        "pi",
        &bin,
        &[
            "--completion-timeout",
            "300ms",
            "--stall-timeout",
            "60s",
            "--kill-grace",
            "200ms",
        ],
    );
    let why = why(&done);
    let r = done.report();
    assert_eq!(r["verdict"], "agent_failed", "{why}");
    assert_eq!(r["forced_completion"], true, "{why}");
    assert!(done.elapsed < Duration::from_secs(20), "{why}");
    case.assert_nothing_left();
}

/// Recorded from the real pi: 429s, an `agent_end` with the error, its
/// own retry, then a tool, and a final `agent_end`; and the same run as
/// warden once cut it short (killed in the tool after the first one).
#[test]
fn replay_judges_by_the_last_terminal_event_in_force() {
    let case = Case::new();
    for (name, outcome, code) in [
        ("agent_end_then_recovers", "succeeded", 0),
        (
            "agent_end_then_killed_while_working",
            "no_terminal_event",
            1,
        ),
    ] {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../warden-events/tests/fixtures/pi")
            .join(format!("{name}.jsonl"));
        let out = case
            .command(&["replay", "pi", fixture.to_str().unwrap()])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(&format!("outcome: {outcome}")),
            "{name}: {text}"
        );
        assert_eq!(out.status.code(), Some(code), "{name}: {text}");
    }
}

/// Claude Code meeting a 401: an `api_retry` line per attempt, with
/// growing silences in between.
const CLAUDE_INIT: &str = r#"{"type":"system","subtype":"init","session_id":"s1","model":"m"}"#;
const CLAUDE_401: &str = r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":500,"error_status":401,"error":"authentication_failed","session_id":"s1"}"#;
const CLAUDE_RESULT: &str = r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":401,"result":"Failed to authenticate. API Error: 401","session_id":"s1"}"#;

#[test]
fn a_fatal_error_the_cli_would_retry_ends_the_run_within_seconds() {
    let case = Case::new();
    // One retry, then a long silence: a stall warning (at 1.5 s) would
    // promise a kill that the fatal-error rule (at 2 s) comes before.
    let bin = fake_cli(
        &case,
        &format!("{}sleep 600", say(&[CLAUDE_INIT, CLAUDE_401])),
    );
    let done = run(
        &case,
        "claude",
        &bin,
        &["--stall-timeout", "3s", "--kill-grace", "500ms"],
    );
    let why = why(&done);
    let r = done.report();
    assert_eq!(r["verdict"], "agent_failed", "{why}");
    assert!(done.elapsed < Duration::from_secs(15), "{why}");
    let reason = r["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("authentication"), "{reason}\n{why}");
    assert!(reason.contains("--on-fatal-error wait"), "{reason}\n{why}");
    assert_eq!(r["stall_warnings"], 0, "{why}");
    assert_eq!(r["limits"]["on_fatal_error"], "end", "{why}");
    assert_eq!(done.events_of("terminating").len(), 1, "{why}");
    case.assert_nothing_left();
}

#[test]
fn a_retried_fatal_error_is_one_event() {
    let case = Case::new();
    let bin = fake_cli(
        &case,
        &format!(
            "{}sleep 600",
            say(&[CLAUDE_INIT, CLAUDE_401, CLAUDE_401, CLAUDE_401, CLAUDE_401])
        ),
    );
    let done = run(&case, "claude", &bin, &["--kill-grace", "500ms"]);
    let why = why(&done);
    let fatal = done
        .events_of("error")
        .into_iter()
        .filter(|e| e["fatal"] == true)
        .count();
    assert_eq!(fatal, 1, "{why}");
    assert_eq!(done.verdict(), "agent_failed", "{why}");
}

/// `wait`, from each source: the CLI retries and ends by itself, and the
/// verdict comes from its result.
#[test]
fn on_fatal_error_wait_leaves_the_retries_to_the_cli() {
    let script = format!(
        "{}sleep 3\n{}exit 1",
        say(&[CLAUDE_INIT, CLAUDE_401]),
        say(&[CLAUDE_401, CLAUDE_RESULT])
    );
    for source in ["flag", "env", "file"] {
        let case = Case::new();
        let bin = fake_cli(&case, &script);
        let mut args = vec![
            "run",
            "claude",
            "do it",
            "--agent-bin",
            bin.to_str().unwrap(),
        ];
        let mut cmd = match source {
            "flag" => {
                args.extend(["--on-fatal-error", "wait"]);
                case.command(&args)
            }
            "env" => {
                let mut c = case.command(&args);
                c.env("WARDEN_ON_FATAL_ERROR", "wait");
                c
            }
            _ => {
                std::fs::write(
                    case.path().join("warden.toml"),
                    "on_fatal_error = \"wait\"\n",
                )
                .unwrap();
                case.command(&args)
            }
        };
        let start = std::time::Instant::now();
        let done = case.finished(cmd.output().unwrap(), start);
        let why = format!("from the {source}: {}", why(&done));
        let r = done.report();
        assert_eq!(r["verdict"], "agent_failed", "{why}");
        assert_eq!(r["limits"]["on_fatal_error"], "wait", "{why}");
        assert!(done.events_of("terminating").is_empty(), "{why}");
        assert_eq!(r["exit_code"], 1, "the CLI ended by itself: {why}");
        assert!(done.elapsed >= Duration::from_secs(3), "{why}");
        let reason = r["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("authentication"), "{reason}\n{why}");
    }
}

#[test]
fn a_bad_on_fatal_error_value_names_the_setting_and_the_choices() {
    let case = Case::new();
    let bin = fake_cli(&case, "exit 0");
    let done = run(&case, "claude", &bin, &["--on-fatal-error", "later"]);
    assert_eq!(done.code, 2, "{}", done.stderr);
    assert!(
        done.stderr.contains("--on-fatal-error") && done.stderr.contains("`wait`"),
        "{}",
        done.stderr
    );
}

/// `--preserve-status` on a run warden ended for a fatal error: the
/// SIGTERM was warden's, so warden's code (1), not 128 + 15.
#[test]
fn preserve_status_keeps_wardens_code_for_a_fatal_error_warden_ended() {
    let case = Case::new();
    let bin = fake_cli(
        &case,
        &format!("{}exec sleep 600", say(&[CLAUDE_INIT, CLAUDE_401])),
    );
    let done = run(&case, "claude", &bin, &["--preserve-status"]);
    let why = why(&done);
    assert_eq!(done.verdict(), "agent_failed", "{why}");
    assert_eq!(done.report()["ended_by_warden"], true, "{why}");
    assert_eq!(done.code, 1, "{why}");
}
