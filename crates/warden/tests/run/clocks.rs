//! The clocks: stall (with its warning), startup, run, completion.

use std::time::Duration;

use crate::support::{Case, ms};

#[test]
fn silent_child_is_stalled_with_one_warning_at_half() {
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--stall-timeout",
        "400ms",
        "--kill-grace",
        "200ms",
        "--",
        "sh",
        "-c",
        "echo working; sleep 600",
    ]);
    assert_eq!(done.code, 3, "{}", done.stderr);
    let report = done.report();
    assert_eq!(report["verdict"], "stalled");
    assert_eq!(report["stall_warnings"], 1);
    let warnings = done.events_of("stall_warning");
    assert_eq!(warnings.len(), 1);
    let first = ms(&report["time_to_first_activity_ms"]);
    let warned = ms(&warnings[0]["t_ms"]);
    // Due at half the timeout; a timer late under load moves the end too,
    // so the bound above is the end, not a fixed time.
    let ended = ms(&done.events_of("terminating")[0]["t_ms"]);
    assert!(
        warned >= first + 190 && warned <= ended,
        "warning at {warned} ms, first activity at {first} ms, end at {ended} ms"
    );
    assert!(ms(&report["longest_silence_ms"]) >= 400);
    assert!(done.stderr.contains("no activity for"), "{}", done.stderr);
    case.assert_nothing_left();
}

#[test]
fn stall_warning_is_rearmed_by_activity() {
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--stall-timeout",
        "600ms",
        "--",
        "sh",
        "-c",
        "echo a; sleep 0.45; echo b; sleep 0.45; echo c",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(
        done.report()["stall_warnings"],
        2,
        "one warning per silent stretch"
    );
}

#[test]
fn no_output_at_all_is_a_startup_timeout() {
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--startup-timeout",
        "300ms",
        "--kill-grace",
        "200ms",
        "--",
        "sleep",
        "600",
    ]);
    assert_eq!(done.code, 4, "{}", done.stderr);
    let report = done.report();
    assert_eq!(report["verdict"], "startup_timeout");
    assert_eq!(report["time_to_first_activity_ms"], serde_json::Value::Null);
    case.assert_nothing_left();
}

/// `--stall-timeout` alone on a command that never prints: the stall
/// ends it, not the startup clock's two minutes later. An agent's CLI
/// gets its first-line allowance on top, so a shorter startup clock still
/// governs there.
#[test]
fn a_short_stall_timeout_ends_a_command_that_never_prints() {
    let case = Case::new();
    let start = std::time::Instant::now();
    let done = case.run(&[
        "run",
        "exec",
        "--stall-timeout",
        "300ms",
        "--kill-grace",
        "200ms",
        "--",
        "sleep",
        "600",
    ]);
    assert_eq!(done.code, 3, "{}", done.stderr);
    assert_eq!(done.report()["verdict"], "stalled");
    assert!(start.elapsed() < std::time::Duration::from_secs(30));
    case.assert_nothing_left();

    let case = Case::new();
    let silent = case.path().join("silent-agent");
    crate::support::write_script(&silent, "#!/bin/sh\nexec sleep 600\n");
    let done = case.run(&[
        "run",
        "claude",
        "hello",
        "--agent-bin",
        silent.to_str().unwrap(),
        "--stall-timeout",
        "300ms",
        "--startup-timeout",
        "1s",
        "--kill-grace",
        "200ms",
    ]);
    assert_eq!(
        done.report()["verdict"],
        "startup_timeout",
        "{}",
        done.stderr
    );
    case.assert_nothing_left();
}

#[test]
fn run_clock_ends_a_busy_run_as_timed_out() {
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--timeout",
        "500ms",
        "--kill-grace",
        "200ms",
        "--",
        "sh",
        "-c",
        "while true; do echo tick; sleep 0.05; done",
    ]);
    assert_eq!(done.code, 5, "{}", done.stderr);
    assert_eq!(done.report()["verdict"], "timed_out");
    assert!(ms(&done.report()["activity_lines"]) >= 3);
    case.assert_nothing_left();
}

#[test]
fn deadline_is_in_the_child_environment() {
    let case = Case::new();
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let done = case.run(&[
        "run",
        "exec",
        "--timeout",
        "1h",
        "--",
        "sh",
        "-c",
        "echo $WARDEN_DEADLINE",
    ]);
    let printed: u64 = String::from_utf8(done.log("stdout.log"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        (before + 3599..=before + 3602).contains(&printed),
        "deadline {printed}, start {before}"
    );
}

#[test]
fn the_child_runs_in_the_working_directory_with_a_matching_pwd() {
    let case = Case::new();
    let mut cmd = case.command(&["run", "exec", "--", "env"]);
    cmd.env("PWD", "/somewhere/else");
    let done = case.finished(cmd.output().unwrap(), std::time::Instant::now());
    assert_eq!(done.code, 0, "{}", done.stderr);
    let env = String::from_utf8(done.log("stdout.log")).unwrap();
    let pwd = env.lines().find_map(|l| l.strip_prefix("PWD=")).unwrap();
    assert_eq!(std::path::Path::new(pwd), case.path());
}

#[test]
fn completion_signal_then_hang_is_forced_with_the_earned_verdict() {
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--completion-timeout",
        "500ms",
        "--kill-grace",
        "200ms",
        "--",
        "sh",
        "-c",
        "echo '<promise>COMPLETE</promise>'; sleep 0.3; echo trailing; sleep 600",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let report = done.report();
    assert_eq!(report["verdict"], "succeeded");
    assert_eq!(report["forced_completion"], true);
    assert!(
        report["hanging"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["cmdline"]
                .as_str()
                .is_some_and(|c| c.contains("sleep 600"))),
        "{report}"
    );
    let texts: Vec<_> = done
        .events_of("text")
        .iter()
        .map(|e| e["text"].clone())
        .collect();
    assert!(
        texts.contains(&"trailing".into()),
        "trailing line inside the window is kept: {texts:?}"
    );
    // The trailing line restarted the window: ended ≥ 0.3s + 0.5s after the signal.
    let seen = ms(&report["completion_signal_seen_ms"]);
    assert!(ms(&report["duration_ms"]) >= seen + 750, "{report}");
    assert!(done.stderr.contains("did not exit"), "{}", done.stderr);
    case.assert_nothing_left();
}

#[test]
fn completion_signal_split_across_writes_without_newline_is_found() {
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--completion-timeout",
        "300ms",
        "--kill-grace",
        "200ms",
        "--",
        "sh",
        "-c",
        "printf 'done: <promise>COMP'; sleep 0.2; printf 'LETE</promise>'; sleep 600",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let report = done.report();
    assert_eq!(report["forced_completion"], true);
    assert!(report["completion_signal_seen_ms"].as_u64().is_some());
    case.assert_nothing_left();
}

#[test]
fn process_exiting_after_the_signal_ends_normally_without_waiting() {
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--completion-timeout",
        "30s",
        "--",
        "sh",
        "-c",
        "echo '<promise>COMPLETE</promise>'; exit 0",
    ]);
    assert_eq!(done.code, 0);
    assert_eq!(done.report()["forced_completion"], false);
    assert!(done.elapsed < Duration::from_secs(5));
}

#[test]
fn non_zero_exit_is_agent_failed() {
    let case = Case::new();
    let done = case.run(&["run", "exec", "--", "sh", "-c", "echo oops >&2; exit 7"]);
    assert_eq!(done.code, 1);
    let report = done.report();
    assert_eq!(report["verdict"], "agent_failed");
    assert_eq!(report["exit_code"], 7);
    assert_eq!(done.log("stderr.log"), b"oops\n");
}

#[test]
fn with_no_completion_window_the_stall_clock_still_ends_a_hung_agent() {
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--completion-timeout",
        "0",
        "--stall-timeout",
        "500ms",
        "--kill-grace",
        "200ms",
        "--",
        "sh",
        "-c",
        "echo '<promise>COMPLETE</promise>'; sleep 600",
    ]);
    assert_eq!(done.code, 3, "{}", done.stderr);
    assert_eq!(done.report()["verdict"], "stalled");
    case.assert_nothing_left();
}

#[test]
fn what_the_agent_prints_while_being_stopped_is_not_its_last_activity() {
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--stall-timeout",
        "300ms",
        "--kill-grace",
        "2s",
        "--",
        "sh",
        "-c",
        "trap 'echo stopping >&2; sleep 0.2; echo bye >&2; exit 1' TERM; echo up; sleep 300 & wait",
    ]);
    let report = done.report();
    assert_eq!(report["verdict"], "stalled", "{}", done.stderr);
    assert!(
        done.stderr.contains("stopping"),
        "it did print: {}",
        done.stderr
    );
    let last = crate::support::ms(&report["last_activity_ms"]);
    let total = crate::support::ms(&report["duration_ms"]);
    // The stall came 300 ms after `up`; the lines printed on SIGTERM
    // (200 ms apart) do not move that.
    assert!(
        total >= last + 300 + 150,
        "last activity at {last} ms, ended at {total} ms: {report}"
    );
    case.assert_nothing_left();
}
