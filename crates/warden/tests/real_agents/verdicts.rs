//! Verdicts the real CLIs earn when the model API fails: a CLI that
//! recovers after reporting an error is not killed for it, and a fatal
//! error (bad credentials) ends the run within seconds unless the user
//! lets the CLI retry.

use std::time::Duration;

use warden_fake_model::Turn;

use crate::kit::Kit;
use crate::support::{Finished, ms};

fn explain(kit: &Kit, done: &Finished) -> String {
    let log = |name: &str| {
        let bytes = std::fs::read(done.run_dir.join(name)).unwrap_or_default();
        let start = bytes.len().saturating_sub(4000);
        String::from_utf8_lossy(&bytes[start..]).into_owned()
    };
    format!(
        "{} exited {} after {:?}\n--- warden stderr:\n{}\n--- agent stdout (tail):\n{}\n--- agent stderr (tail):\n{}\n--- requests: {}",
        kit.agent,
        done.code,
        done.elapsed,
        done.stderr,
        log("stdout.log"),
        log("stderr.log"),
        kit.server.requests().len()
    )
}

/// Copies the run's stdout to `$WARDEN_RECORD_DIR/<name>` when that is
/// set: how the decoder fixtures of these cases were recorded.
fn record(done: &Finished, name: &str) {
    if let Some(dir) = std::env::var_os("WARDEN_RECORD_DIR") {
        let dir = std::path::Path::new(&dir);
        let _ = std::fs::copy(done.run_dir.join("stdout.log"), dir.join(name));
        let _ = std::fs::copy(
            done.run_dir.join("events.jsonl"),
            dir.join(format!("{name}.events")),
        );
    }
}

/// Sets a variable of the kit's environment (replacing the kit's value).
fn set_env(kit: &mut Kit, key: &str, value: Option<&str>) {
    kit.env.retain(|(k, _)| k != key);
    if let Some(v) = value {
        kit.env.push((key.into(), v.into()));
    }
}

/// pi with its own retries on, and short delays.
fn pi_with_retries(script: Vec<Turn>) -> Option<Kit> {
    let kit = Kit::new("pi", script)?;
    std::fs::write(
        kit.case.path().join("home/pi/settings.json"),
        r#"{"retry":{"enabled":true,"maxRetries":3,"baseDelayMs":100,"maxDelayMs":1000}}"#,
    )
    .unwrap();
    Some(kit)
}

/// pi answers a run of 429s with an `agent_end` that reports the error,
/// then retries by itself and goes on with a tool that is quiet for longer
/// than the completion window. The run must be judged by the last
/// terminal event (success), and the quiet tool must be under the stall
/// clock, not the completion window.
#[test]
fn pi_recovers_after_an_error_agent_end() {
    let mut script = vec![Turn::Status(429); 4];
    script.extend([
        // Quiet for more than twice the completion window below, which
        // itself leaves pi's retry delay (at most 1 s) twice over.
        Turn::Shell("sleep 7; echo slept".into()),
        Turn::Text("all done".into()),
    ]);
    let Some(kit) = pi_with_retries(script) else {
        return;
    };
    let done = kit.run(
        "run the tool",
        &[
            "--completion-timeout",
            "3s",
            "--stall-timeout",
            "60s",
            "--kill-grace",
            "1s",
            "--timeout",
            "120s",
        ],
    );
    record(&done, "pi-agent-end-then-recovers.jsonl");
    let why = explain(&kit, &done);
    let stdout = String::from_utf8_lossy(&done.log("stdout.log")).into_owned();
    let ends = stdout.matches("\"type\":\"agent_end\"").count();
    let r = done.report();
    assert_eq!(r["verdict"], "succeeded", "reason: {}\n{why}", r["reason"]);
    assert_eq!(r["forced_completion"], false, "{why}");
    assert!(
        r["final_text"]
            .as_str()
            .is_some_and(|t| t.contains("all done")),
        "{why}"
    );
    let results = done.events_of("result");
    assert_eq!(
        results.last().map(|e| e["success"].clone()),
        Some(serde_json::Value::Bool(true)),
        "the last terminal event is the success: {results:?}\n{why}"
    );
    // What the run looked like, for the record (pi's own terminal events).
    eprintln!(
        "pi wrote {ends} agent_end lines; results: {results:?}; retries: {}",
        r["retries"]
    );

    // `warden replay` of the same stream gives the same verdict.
    let replay = kit
        .case
        .command(&[
            "replay",
            "pi",
            done.run_dir.join("stdout.log").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&replay.stdout);
    assert!(
        text.contains("outcome: succeeded") && replay.status.code() == Some(0),
        "replay: {text}"
    );
}

/// Claude Code retries a 401 ten times (minutes). By default warden ends
/// the run within seconds of the first one, `agent_failed`, saying
/// authentication, with one fatal error event and no stall warning.
#[test]
fn claude_unauthorized_ends_within_seconds() {
    let Some(mut kit) = Kit::new("claude", vec![Turn::Status(401); 20]) else {
        return;
    };
    // Claude Code's own default: ten retries with backoff.
    set_env(&mut kit, "CLAUDE_CODE_MAX_RETRIES", None);
    let done = kit.run(
        "anything",
        &[
            "--timeout",
            "300s",
            "--stall-timeout",
            "6s",
            "--kill-grace",
            "2s",
        ],
    );
    record(&done, "claude-401-end.jsonl");
    let why = explain(&kit, &done);
    let r = done.report();
    assert_eq!(r["verdict"], "agent_failed", "{why}");
    assert!(
        done.elapsed < Duration::from_secs(25),
        "took {:?}\n{why}",
        done.elapsed
    );
    let reason = r["reason"].as_str().unwrap_or_default().to_lowercase();
    assert!(reason.contains("authentication"), "reason: {reason}\n{why}");
    let fatal: Vec<_> = done
        .events_of("error")
        .into_iter()
        .filter(|e| e["fatal"] == true)
        .collect();
    assert_eq!(fatal.len(), 1, "one fatal error event: {fatal:?}\n{why}");
    assert!(
        done.events_of("stall_warning").is_empty(),
        "no stall warning once the fatal error decides: {why}"
    );
    assert_eq!(ms(&r["stall_warnings"]), 0, "{why}");
}

/// With `--on-fatal-error wait`, warden lets Claude Code retry and end by
/// itself (here after two retries), and the verdict comes from its result.
#[test]
fn claude_unauthorized_waits_for_the_cli_when_asked() {
    let Some(mut kit) = Kit::new("claude", vec![Turn::Status(401); 20]) else {
        return;
    };
    set_env(&mut kit, "CLAUDE_CODE_MAX_RETRIES", Some("2"));
    let done = kit.run(
        "anything",
        &[
            "--timeout",
            "120s",
            "--kill-grace",
            "2s",
            "--on-fatal-error",
            "wait",
        ],
    );
    record(&done, "claude-401-wait.jsonl");
    let why = explain(&kit, &done);
    let r = done.report();
    assert_eq!(r["verdict"], "agent_failed", "{why}");
    assert!(
        done.events_of("terminating").is_empty(),
        "warden did not end the run itself: {why}"
    );
    assert!(
        !done.events_of("result").is_empty(),
        "the CLI's own terminal event came: {why}"
    );
    let posts = kit
        .server
        .requests()
        .iter()
        .filter(|q| q.method == "POST" && q.path.contains("/messages"))
        .count();
    assert!(posts >= 3, "the CLI retried ({posts} requests)\n{why}");
    let reason = r["reason"].as_str().unwrap_or_default().to_lowercase();
    assert!(reason.contains("authentication"), "reason: {reason}\n{why}");
}

/// The same for a CLI that gives up on a 401 by itself: the fatal-error
/// rule does not cut its terminal event short.
fn unauthorized_quickly(agent: &'static str) {
    let Some(kit) = Kit::new(agent, vec![Turn::Status(401); 20]) else {
        return;
    };
    let done = kit.run("anything", &["--timeout", "120s", "--kill-grace", "2s"]);
    record(&done, &format!("{agent}-401.jsonl"));
    let why = explain(&kit, &done);
    let r = done.report();
    eprintln!(
        "{agent}: {} in {:?}: {}; terminating: {:?}",
        r["verdict"],
        done.elapsed,
        r["reason"],
        done.events_of("terminating")
    );
    assert_eq!(r["verdict"], "agent_failed", "{why}");
    assert!(
        done.elapsed < Duration::from_secs(30),
        "took {:?}\n{why}",
        done.elapsed
    );
    let said = format!("{} {}", r["reason"], r["error_message"]).to_lowercase();
    assert!(said.contains("authentication"), "{said}\n{why}");
    let fatal = done
        .events_of("error")
        .into_iter()
        .filter(|e| e["fatal"] == true)
        .count();
    assert!(fatal <= 1, "{fatal} fatal error events\n{why}");
}

#[test]
fn codex_unauthorized_ends_within_seconds() {
    unauthorized_quickly("codex");
}

#[test]
fn pi_unauthorized_ends_within_seconds() {
    unauthorized_quickly("pi");
}

/// Every CLI, with its own retries on, meets two 429s and then a model
/// that works: the run succeeds, judged by its last terminal event, and
/// it is not ended early.
fn rate_limited_then_recovers(agent: &'static str) {
    recovers_after(agent, 429, "succeeded");
}

/// Two answers with HTTP `status`, then a model that works: the run ends
/// `expected`, by the CLI's own last word, never by warden's clocks.
fn recovers_after(agent: &'static str, status: u16, expected: &str) {
    let script = vec![
        Turn::Status(status),
        Turn::Status(status),
        Turn::Shell("echo recovered-tool".into()),
        Turn::Text("all done".into()),
    ];
    let Some(mut kit) = Kit::new(agent, script) else {
        return;
    };
    match agent {
        "claude" => set_env(&mut kit, "CLAUDE_CODE_MAX_RETRIES", Some("4")),
        "codex" => {
            let config = kit.case.path().join("home/codex/config.toml");
            let text = std::fs::read_to_string(&config)
                .unwrap()
                .replace("request_max_retries = 0", "request_max_retries = 4")
                .replace("stream_max_retries = 0", "stream_max_retries = 4");
            std::fs::write(&config, text).unwrap();
        }
        "pi" => std::fs::write(
            kit.case.path().join("home/pi/settings.json"),
            r#"{"retry":{"enabled":true,"maxRetries":3,"baseDelayMs":100,"maxDelayMs":1000}}"#,
        )
        .unwrap(),
        _ => {}
    }
    let done = kit.run(
        "run the tool",
        &[
            // Gemini CLI takes a few seconds to exit after its result.
            "--completion-timeout",
            "20s",
            "--stall-timeout",
            "90s",
            "--kill-grace",
            "1s",
            "--timeout",
            "240s",
        ],
    );
    record(&done, &format!("{agent}-{status}-then-recovers.jsonl"));
    let why = explain(&kit, &done);
    let r = done.report();
    eprintln!(
        "{agent}: {} in {:?}, retries {}, results {:?}, errors {:?}",
        r["verdict"],
        done.elapsed,
        r["retries"],
        done.events_of("result"),
        done.events_of("error")
    );
    assert_eq!(r["verdict"], expected, "reason: {}\n{why}", r["reason"]);
    assert_eq!(r["forced_completion"], false, "{why}");
    assert!(done.events_of("terminating").is_empty(), "{why}");
    if expected == "succeeded" {
        assert!(
            r["final_text"]
                .as_str()
                .is_some_and(|t| t.contains("all done")),
            "{why}"
        );
    }
}

mod rate_limited_then_recovers {
    #[test]
    fn claude() {
        super::rate_limited_then_recovers("claude");
    }

    /// Codex does not retry a 429 of the Responses API: its `error` line
    /// and `turn.failed` come at once ("exceeded retry limit").
    #[test]
    fn codex() {
        super::recovers_after("codex", 429, "agent_failed");
    }

    /// It retries a 500 without a word on stdout.
    #[test]
    fn codex_500() {
        super::recovers_after("codex", 500, "succeeded");
    }

    #[test]
    fn pi() {
        super::rate_limited_then_recovers("pi");
    }

    #[test]
    fn opencode() {
        super::rate_limited_then_recovers("opencode");
    }

    #[test]
    fn gemini() {
        super::rate_limited_then_recovers("gemini");
    }
}

#[test]
fn opencode_unauthorized_ends_within_seconds() {
    unauthorized_quickly("opencode");
}

#[test]
fn gemini_unauthorized_ends_within_seconds() {
    unauthorized_quickly("gemini");
}
