//! `--retries`: the real CLIs, failed by the fake model server with
//! transient HTTP errors (their own retries off), are tried again by
//! warden: resuming the agent's session when it got an answer before the
//! failure, starting afresh when it did not; never after a 401; never
//! past `--retries`; never sooner than the retry-after the CLI reported.

use serde_json::Value;
use warden_fake_model::Turn;

use crate::kit::Kit;

fn session(kit: &Kit) -> Value {
    let path = kit.case.run_dir().join("session.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("session.json is JSON")
}

fn run_json(kit: &Kit, dir: &str) -> Value {
    let path = kit.case.run_dir().join(dir).join("run.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("run.json is JSON")
}

/// The main requests the server saw (those that offer tools), as JSON text.
fn main_requests(kit: &Kit) -> Vec<String> {
    kit.server
        .requests()
        .iter()
        .filter(|r| {
            r.method == "POST"
                && r.body
                    .get("tools")
                    .and_then(|t| t.as_array())
                    .is_some_and(|t| !t.is_empty())
        })
        .map(|r| r.body.to_string())
        .collect()
}

/// pi's provider SDK retries silently unless told not to: off, so that
/// the failure reaches warden.
fn no_silent_retries(kit: &Kit) {
    if kit.agent == "pi" {
        std::fs::write(
            kit.case.path().join("home/pi/settings.json"),
            r#"{"retry":{"enabled":false,"provider":{"maxRetries":0}}}"#,
        )
        .unwrap();
    }
}

fn why(kit: &Kit, done: &crate::support::Finished) -> String {
    let s = std::fs::read_to_string(kit.case.run_dir().join("session.json")).unwrap_or_default();
    format!(
        "{} exited {}\n--- warden stderr:\n{}\n--- session.json:\n{s}",
        kit.agent, done.code, done.stderr
    )
}

/// A tool call answered, then `status` on the next request: the CLI
/// fails; warden resumes its session, and the resumed CLI sends the
/// conversation so far (the tool's output) with warden's note.
fn resumes_after(agent: &'static str, status: u16, because: &str) {
    let Some(mut kit) = Kit::new(
        agent,
        vec![
            Turn::Shell("echo step-one-$((40+2))".into()),
            Turn::Status(status),
            Turn::Text("all finished".into()),
        ],
    ) else {
        return;
    };
    // pi's kit runs it without a session file: nothing to resume.
    kit.extra.retain(|a| a != "--no-session");
    no_silent_retries(&kit);
    let done = kit.run(
        "run the step",
        &[
            "--retries",
            "2",
            "--retry-backoff",
            "1ms",
            "--timeout",
            "120s",
        ],
    );
    let why = why(&kit, &done);
    assert_eq!(done.code, 0, "{why}");
    let s = session(&kit);
    let runs = s["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{why}");
    assert_eq!(runs[0]["verdict"], "agent_failed", "{why}");
    assert_eq!(runs[0]["retried_because"], because, "{why}");
    assert_eq!(runs[1]["attempt"], 2, "{why}");
    assert_eq!(runs[1]["resumed"], true, "{why}");
    assert_eq!(runs[1]["verdict"], "succeeded", "{why}");
    assert_eq!(s["verdict"], "succeeded", "{why}");

    let first = run_json(&kit, "iteration-1");
    let second = run_json(&kit, "iteration-1-attempt-2");
    let session_id = first["session_id"].as_str().expect("a session id");
    let command: Vec<&str> = second["command"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        command.contains(&session_id),
        "the second attempt did not name the session {session_id}: {command:?}\n{why}"
    );
    // What the resumed CLI sent: the conversation so far, and the note.
    let requests = main_requests(&kit);
    let last = requests.last().expect("requests");
    assert!(
        last.contains("step-one-42"),
        "the resumed request lacks the tool's output\n{last}\n{why}"
    );
    assert!(last.contains("transient failure"), "{last}\n{why}");
    assert!(
        done.stderr
            .contains(&format!("{}, attempt 2 of 3)", because.replace('_', " "))),
        "{why}"
    );
    // Each attempt counts its own model calls (21 in, 8 out each): Codex
    // reports none when a turn fails, and then the whole thread's when the
    // resumed one completes; the failed attempt's come from Codex's own
    // record of the thread, and are taken off the resumed attempt's.
    if agent == "codex" {
        assert_eq!(first["tokens"]["total"], 29, "the first call: {first}");
        assert_eq!(second["tokens"]["total"], 29, "its own only: {second}");
        assert_eq!(s["tokens"]["total"], 58, "{why}");
        assert_eq!(s["tokens"]["input"], 42, "{why}");
    }
}

/// `failures` error answers in a row, more than `--retries` allows: one
/// attempt each, the last one's verdict, no resume (no answer came).
fn exhausts(agent: &'static str, failures: &[u16], retries: u32, because: &str) {
    let mut script: Vec<Turn> = failures.iter().map(|s| Turn::Status(*s)).collect();
    script.push(Turn::Text("too late".into()));
    let Some(kit) = Kit::new(agent, script) else {
        return;
    };
    no_silent_retries(&kit);
    let n = retries.to_string();
    let done = kit.run(
        "say hi",
        &[
            "--retries",
            &n,
            "--retry-backoff",
            "1ms",
            "--timeout",
            "120s",
        ],
    );
    let why = why(&kit, &done);
    assert_eq!(done.code, 1, "{why}");
    let s = session(&kit);
    let runs = s["runs"].as_array().unwrap();
    assert_eq!(runs.len() as u32, retries + 1, "{why}");
    for (i, r) in runs.iter().enumerate() {
        assert_eq!(r["attempt"], i + 1, "{why}");
        assert_eq!(r["verdict"], "agent_failed", "{why}");
        assert_eq!(r["resumed"], false, "nothing to resume: {why}");
        let want: Value = if i < retries as usize {
            because.into()
        } else {
            Value::Null
        };
        assert_eq!(r["retried_because"], want, "{why}");
    }
    assert_eq!(s["verdict"], "agent_failed");
    assert_eq!(
        main_requests(&kit).len() as u32,
        retries + 1,
        "one request per attempt: {why}"
    );
}

/// A 401 is never retried, whatever `--retry-on` says.
fn never_after_401(agent: &'static str) {
    let Some(kit) = Kit::new(agent, vec![Turn::Status(401); 4]) else {
        return;
    };
    let done = kit.run(
        "say hi",
        &[
            "--retries",
            "3",
            "--retry-on",
            "all",
            "--retry-backoff",
            "1ms",
            "--timeout",
            "120s",
        ],
    );
    let why = why(&kit, &done);
    assert_eq!(done.code, 1, "{why}");
    let s = session(&kit);
    let runs = s["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{why}");
    assert_eq!(runs[0]["retried_because"], Value::Null, "{why}");
    assert_eq!(
        run_json(&kit, "iteration-1")["error_class"],
        "authentication",
        "{why}"
    );
    assert!(!done.stderr.contains("retrying in"), "{why}");
}

/// The model's stream stops after its first event: the run stalls. It is
/// tried again only when `stalled` is in `--retry-on`.
fn a_stall_is_retried_only_when_asked(agent: &'static str) {
    for (retry_on, attempts) in [(None, 1), (Some("stalled"), 2)] {
        let Some(kit) = Kit::new(agent, vec![Turn::Stall, Turn::Text("recovered".into())]) else {
            return;
        };
        no_silent_retries(&kit);
        let mut flags = vec![
            "--retries",
            "1",
            "--retry-backoff",
            "1ms",
            "--stall-timeout",
            "3s",
            "--kill-grace",
            "1s",
            "--timeout",
            "120s",
        ];
        if let Some(on) = retry_on {
            flags.extend(["--retry-on", on]);
        }
        let done = kit.run("say hi", &flags);
        let why = why(&kit, &done);
        let s = session(&kit);
        let runs = s["runs"].as_array().unwrap();
        assert_eq!(runs.len(), attempts, "--retry-on {retry_on:?}\n{why}");
        assert_eq!(runs[0]["verdict"], "stalled", "{why}");
        if attempts == 1 {
            assert_eq!(done.code, 3, "{why}");
            assert_eq!(runs[0]["retried_because"], Value::Null, "{why}");
        } else {
            assert_eq!(done.code, 0, "{why}");
            assert_eq!(runs[0]["retried_because"], "stalled", "{why}");
            assert_eq!(runs[1]["verdict"], "succeeded", "{why}");
        }
        let left = kit.leftovers(&kit.case.mark);
        assert!(left.is_empty(), "left behind: {left:?}");
    }
}

/// `status` twice, then an answer, with `--retries 1 --retry-on LIST`:
/// the run is tried again exactly when `class` (the class warden gives
/// the CLI's report of that status) is in the list.
fn retried_only_as_listed(agent: &'static str, status: u16, class: &str, because: &str) {
    for (retry_on, retried) in [
        (
            "rate_limited,server_error,overloaded,network"
                .split(',')
                .filter(|o| *o != because)
                .collect::<Vec<_>>()
                .join(","),
            false,
        ),
        (because.to_string(), true),
    ] {
        let script = vec![
            Turn::Status(status),
            Turn::Status(status),
            Turn::Text("recovered".into()),
        ];
        let Some(kit) = Kit::new(agent, script) else {
            return;
        };
        no_silent_retries(&kit);
        let done = kit.run(
            "say hi",
            &[
                "--retries",
                "1",
                "--retry-on",
                &retry_on,
                "--retry-backoff",
                "1ms",
                "--timeout",
                "120s",
            ],
        );
        let why = why(&kit, &done);
        let first = run_json(&kit, "iteration-1");
        assert_eq!(first["error_class"], class, "{why}");
        let s = session(&kit);
        let runs = s["runs"].as_array().unwrap();
        if retried {
            assert_eq!(runs.len(), 2, "--retry-on {retry_on}: {why}");
            assert_eq!(runs[0]["retried_because"], because, "{why}");
        } else {
            assert_eq!(runs.len(), 1, "--retry-on {retry_on}: {why}");
            assert_eq!(runs[0]["retried_because"], Value::Null, "{why}");
            assert!(!done.stderr.contains("retrying in"), "{why}");
        }
        // The error that ended the run is one a retry may fix: not fatal.
        let fatal: Vec<Value> =
            std::fs::read_to_string(kit.case.run_dir().join("iteration-1/events.jsonl"))
                .unwrap_or_default()
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|e| e["kind"] == "error" && e["fatal"] == true)
                .collect();
        assert!(fatal.is_empty(), "{fatal:?}\n{why}");
    }
}

mod claude {
    #[test]
    fn a_stall_is_retried_only_when_asked() {
        super::a_stall_is_retried_only_when_asked("claude");
    }

    #[test]
    fn a_429_after_an_answer_is_retried_resuming_the_session() {
        super::resumes_after("claude", 429, "rate_limited");
    }

    #[test]
    fn a_500_after_an_answer_is_retried_resuming_the_session() {
        super::resumes_after("claude", 500, "server_error");
    }

    #[test]
    fn retries_run_out() {
        super::exhausts("claude", &[429, 429, 429], 2, "rate_limited");
    }

    #[test]
    fn a_401_is_never_retried() {
        super::never_after_401("claude");
    }

    #[test]
    fn a_529_is_retried_only_when_overloaded_is_listed() {
        super::retried_only_as_listed("claude", 529, "overloaded", "overloaded");
    }

    /// Claude Code retries once itself, waiting the server's retry-after
    /// and saying so; warden's wait is then at least that long.
    #[test]
    fn the_retry_after_it_reported_is_the_least_wait() {
        let Some(mut kit) = crate::kit::Kit::new(
            "claude",
            vec![
                warden_fake_model::Turn::Status(429),
                warden_fake_model::Turn::Status(429),
                warden_fake_model::Turn::Text("finally".into()),
            ],
        ) else {
            return;
        };
        kit.server.send_retry_after(1);
        kit.env.retain(|(k, _)| k != "CLAUDE_CODE_MAX_RETRIES");
        kit.env.push(("CLAUDE_CODE_MAX_RETRIES".into(), "1".into()));
        let done = kit.run(
            "say hi",
            &[
                "--retries",
                "1",
                "--retry-backoff",
                "1ms",
                "--timeout",
                "120s",
            ],
        );
        let why = super::why(&kit, &done);
        assert_eq!(done.code, 0, "{why}");
        let s = super::session(&kit);
        let runs = s["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2, "{why}");
        let announced = super::run_json(&kit, "iteration-1")["retries"].clone();
        assert_eq!(announced, 1, "the CLI retried once itself: {why}");
        let delay = runs[0]["retry_delay_ms"].as_u64().unwrap();
        assert!(
            delay >= 1000,
            "waited {delay} ms, less than the 1 s retry-after\n{why}"
        );
    }
}

mod codex {
    use super::*;

    /// `codex exec resume` reports usage over the whole thread: the
    /// resumed run counts only what it added (each request here is 21 in,
    /// 8 out), and the session sums each token once.
    #[test]
    fn a_resumed_thread_counts_its_earlier_tokens_once() {
        let Some(kit) = Kit::new(
            "codex",
            vec![
                Turn::Text("no tag here".into()),
                Turn::Text("<out>ok</out>".into()),
            ],
        ) else {
            return;
        };
        let done = kit.run(
            "say hi",
            &[
                "--output-tag",
                "out",
                "--output-retries",
                "1",
                "--timeout",
                "120s",
            ],
        );
        let why = why(&kit, &done);
        assert_eq!(done.code, 0, "{why}");
        let first = run_json(&kit, "iteration-1");
        let second = run_json(&kit, "iteration-1-retry-1");
        assert_eq!(first["tokens"]["total"], 29, "{why}");
        assert_eq!(second["tokens"]["total"], 29, "its own only: {second}");
        assert_eq!(session(&kit)["tokens"]["total"], 58, "{why}");
    }

    #[test]
    fn a_429_after_an_answer_is_retried_resuming_the_session() {
        super::resumes_after("codex", 429, "rate_limited");
    }

    #[test]
    fn a_401_is_never_retried() {
        super::never_after_401("codex");
    }

    /// Codex says "We're currently experiencing high demand" for an HTTP
    /// 500, with no status: a server error, retried as one.
    #[test]
    fn a_500_it_calls_high_demand_is_a_server_error() {
        super::retried_only_as_listed("codex", 500, "api", "server_error");
    }

    #[test]
    fn a_529_is_retried_only_when_overloaded_is_listed() {
        super::retried_only_as_listed("codex", 529, "overloaded", "overloaded");
    }
}

mod pi {
    #[test]
    fn a_429_after_an_answer_is_retried_resuming_the_session() {
        super::resumes_after("pi", 429, "rate_limited");
    }

    #[test]
    fn retries_run_out() {
        super::exhausts("pi", &[500, 500], 1, "server_error");
    }

    #[test]
    fn a_529_is_retried_only_when_overloaded_is_listed() {
        super::retried_only_as_listed("pi", 529, "overloaded", "overloaded");
    }
}
