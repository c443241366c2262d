//! `--retries` with `exec` runs: a stall is retried only when `stalled` is
//! in `--retry-on`, each attempt in its own directory, the session report
//! saying why each was retried; retries run out; Ctrl-C during the wait
//! before a retry ends the session at once. (Failures of the model's API
//! are tested with the real CLIs, in `real_agents`.)

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Case, kill};

fn session(case: &Case) -> Value {
    let path = case.run_dir().join("session.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("session.json is JSON")
}

/// A command that stalls the first `stalls` times it runs (counted in a
/// file of the case) and then prints `done`.
fn stalls_then_succeeds(case: &Case, stalls: u32) -> String {
    let count = case.path().join("count");
    format!(
        "n=$(cat '{c}' 2>/dev/null || echo 0); echo $((n+1)) > '{c}'; \
         if [ $n -lt {stalls} ]; then echo started; exec sleep 30; fi; echo done",
        c = count.display()
    )
}

#[test]
fn a_stall_is_not_retried_by_default() {
    let case = Case::new();
    let script = stalls_then_succeeds(&case, 1);
    let done = case.run(&[
        "run",
        "exec",
        "--retries",
        "2",
        "--retry-backoff",
        "1ms",
        "--stall-timeout",
        "300ms",
        "--kill-grace",
        "200ms",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(done.code, 3, "stalled\n{}", done.stderr);
    let s = session(&case);
    let runs = s["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{s:#}");
    assert_eq!(runs[0]["attempt"], 1);
    assert_eq!(runs[0]["retried_because"], Value::Null);
    assert_eq!(s["verdict"], "stalled");
    assert!(!done.stderr.contains("retrying in"), "{}", done.stderr);
    case.assert_nothing_left();
}

#[test]
fn a_stall_is_retried_when_asked_each_attempt_in_its_own_directory() {
    let case = Case::new();
    let script = stalls_then_succeeds(&case, 1);
    let done = case.run(&[
        "run",
        "exec",
        "--retries",
        "2",
        "--retry-on",
        "stalled",
        "--retry-backoff",
        "1ms",
        "--stall-timeout",
        "300ms",
        "--kill-grace",
        "200ms",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let s = session(&case);
    let runs = s["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{s:#}");
    assert_eq!(runs[0]["attempt"], 1);
    assert_eq!(runs[0]["verdict"], "stalled");
    assert_eq!(runs[0]["retried_because"], "stalled");
    assert!(runs[0]["retry_delay_ms"].as_u64().unwrap() <= 1, "{s:#}");
    assert_eq!(runs[1]["attempt"], 2);
    assert_eq!(runs[1]["verdict"], "succeeded");
    assert_eq!(runs[1]["retried_because"], Value::Null);
    assert_eq!(runs[1]["resumed"], false, "exec has no session to resume");
    assert_eq!(s["verdict"], "succeeded");
    assert_eq!(s["iterations_run"], 1);
    let dir = case.run_dir();
    assert_eq!(
        runs[0]["run_dir"],
        dir.join("iteration-1").to_str().unwrap()
    );
    assert_eq!(
        runs[1]["run_dir"],
        dir.join("iteration-1-attempt-2").to_str().unwrap()
    );
    let log = |d: &str| std::fs::read_to_string(dir.join(d).join("stdout.log")).unwrap();
    assert_eq!(log("iteration-1"), "started\n");
    assert_eq!(log("iteration-1-attempt-2"), "done\n");
    assert!(
        done.stderr
            .contains("warden: retrying in 0ms (stalled, attempt 2 of 3)")
            || done
                .stderr
                .contains("warden: retrying in 1ms (stalled, attempt 2 of 3)"),
        "{}",
        done.stderr
    );
    case.assert_nothing_left();
}

#[test]
fn retries_run_out_and_the_last_attempt_gives_the_verdict() {
    let case = Case::new();
    let script = stalls_then_succeeds(&case, 10);
    let done = case.run(&[
        "run",
        "exec",
        "--retries",
        "2",
        "--retry-on",
        "stalled,network",
        "--retry-backoff",
        "1ms",
        "--stall-timeout",
        "300ms",
        "--kill-grace",
        "200ms",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(done.code, 3, "{}", done.stderr);
    let s = session(&case);
    let runs = s["runs"].as_array().unwrap();
    let attempts: Vec<(u64, Value)> = runs
        .iter()
        .map(|r| (r["attempt"].as_u64().unwrap(), r["retried_because"].clone()))
        .collect();
    assert_eq!(
        attempts,
        [
            (1, "stalled".into()),
            (2, "stalled".into()),
            (3, Value::Null)
        ],
        "{s:#}"
    );
    assert_eq!(s["verdict"], "stalled");
    assert_eq!(s["stopped_because"], "iteration_failed");
    assert!(
        case.run_dir()
            .join("iteration-1-attempt-3/run.json")
            .is_file(),
        "{s:#}"
    );
    case.assert_nothing_left();
}

#[test]
fn ctrl_c_while_waiting_to_retry_ends_the_session_at_once() {
    let case = Case::new();
    let mut child = case.spawn(&[
        "run",
        "exec",
        "--retries",
        "3",
        "--retry-on",
        "stalled",
        "--retry-backoff",
        "100h",
        "--stall-timeout",
        "300ms",
        "--kill-grace",
        "200ms",
        "--",
        "sh",
        "-c",
        "echo started; exec sleep 30",
    ]);
    // The view says when the wait begins (session.json marks a run
    // retried only once the next attempt is sure to start). Warden ends
    // the stalled run in about a second: a line that never comes ends in
    // EOF when warden exits, not in a hang.
    use std::io::{BufRead, Read};
    let mut stderr_pipe = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut stderr = String::new();
    while !stderr.contains("retrying in") {
        if stderr_pipe.read_line(&mut stderr).unwrap() == 0 {
            panic!("warden never said it would retry:\n{stderr}");
        }
    }
    let asked = Instant::now();
    kill(child.id(), "INT");
    // A wait that the cancel did not cut short would last for hours: give
    // up on it after a while, and fail.
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if asked.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("warden was still waiting to retry 30 s after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = asked.elapsed();
    stderr_pipe.read_to_string(&mut stderr).unwrap();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(
        took < Duration::from_secs(20),
        "took {took:?} to end\n{stderr}"
    );
    assert!(stderr.contains("retrying in"), "{stderr}");
    let s = session(&case);
    assert_eq!(s["verdict"], "cancelled", "{s:#}");
    assert_eq!(s["stopped_because"], "cancelled");
    let runs = s["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "no attempt after the cancel: {s:#}");
    assert_eq!(runs[0]["verdict"], "stalled");
    // Cancelled during the wait: it was never tried again.
    assert_eq!(runs[0]["retried_because"], Value::Null, "{s:#}");
    assert_eq!(runs[0]["retry_delay_ms"], Value::Null, "{s:#}");
    assert!(!case.run_dir().join("iteration-1-attempt-2").exists());
    case.assert_nothing_left();
}

#[test]
fn bad_retry_settings_are_refused_by_name() {
    let case = Case::new();
    let done = case.run(&["run", "exec", "--retry-on", "stalled,timeout", "--", "true"]);
    assert_eq!(done.code, 2, "{}", done.stderr);
    assert!(
        done.stderr.contains("--retry-on") && done.stderr.contains("startup_timeout"),
        "{}",
        done.stderr
    );
    let done = case.run(&["run", "exec", "--retries", "many", "--", "true"]);
    assert_eq!(done.code, 2, "{}", done.stderr);
    assert!(
        done.stderr.contains("--retries") && done.stderr.contains("whole number"),
        "{}",
        done.stderr
    );
}

#[test]
fn a_batch_run_retries_with_its_own_keys_and_the_view_says_so() {
    let case = Case::new();
    let script = stalls_then_succeeds(&case, 1);
    let toml = format!(
        "[defaults]\nagent = \"exec\"\nstall_timeout = \"300ms\"\nkill_grace = \"200ms\"\n\n\
         [[run]]\nname = \"flaky\"\nretries = 2\nretry_on = [\"stalled\"]\nretry_backoff = \"1ms\"\n\
         command = [\"sh\", \"-c\", {script:?}]\n"
    );
    let file = case.path().join("runs.toml");
    std::fs::write(&file, toml).unwrap();
    let dir = case.path().join("batch");
    let done = case.run(&[
        "batch",
        file.to_str().unwrap(),
        "--dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let b: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("batch.json")).unwrap()).unwrap();
    let runs = b["runs"][0]["session"]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{b:#}");
    assert_eq!(runs[0]["retried_because"], "stalled");
    assert_eq!(runs[1]["attempt"], 2);
    assert_eq!(runs[1]["verdict"], "succeeded");
    assert!(
        done.stderr.contains("[flaky] retrying in")
            && done.stderr.contains("(stalled, attempt 2 of 3)")
            && done.stderr.contains("[flaky] started (attempt 2)")
            && done.stderr.matches("[flaky] started").count() == 2,
        "{}",
        done.stderr
    );
    case.assert_nothing_left();
}

#[test]
fn a_retry_wait_the_agent_announced_before_its_last_answer_is_not_waited_for() {
    let case = Case::new();
    let count = case.path().join("count");
    let bin = case.path().join("fake-claude");
    // First run: a retry announced with a 3 s wait, which the model then
    // answered; later the run fails on an overload (no wait announced).
    // Second run: succeeds.
    crate::support::write_script(
        &bin,
        &format!(
            "#!/bin/sh\ncat > /dev/null\n\
             n=$(cat '{c}' 2>/dev/null || echo 0); echo $((n+1)) > '{c}'\n\
             if [ $n -eq 0 ]; then\n\
             echo '{{\"type\":\"system\",\"subtype\":\"api_retry\",\"attempt\":1,\"max_retries\":10,\"retry_delay_ms\":3000,\"error_status\":529,\"error\":\"overloaded\"}}'\n\
             echo '{{\"type\":\"assistant\",\"message\":{{\"id\":\"m1\",\"content\":[{{\"type\":\"text\",\"text\":\"working\"}}]}}}}'\n\
             echo '{{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":true,\"api_error_status\":529,\"result\":\"API Error: 529 overloaded_error\"}}'\n\
             exit 1\nfi\n\
             echo '{{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"done\",\"num_turns\":1}}'\n",
            c = count.display()
        ),
    );
    let done = case.run(&[
        "run",
        "claude",
        "x",
        "--agent-bin",
        bin.to_str().unwrap(),
        "--retries",
        "1",
        "--retry-backoff",
        "1ms",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let s = session(&case);
    let runs = s["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{s:#}");
    assert_eq!(runs[0]["retried_because"], "overloaded", "{s:#}");
    assert!(
        runs[0]["retry_delay_ms"].as_u64().unwrap() < 1000,
        "the 3 s announced before the model's answer is not the wait: {s:#}"
    );
}
