//! Agents through the whole supervisor, with a stand-in CLI: a script that
//! records its arguments and stdin, then plays a recorded stream (and then
//! exits, fails or hangs as told). The real CLIs against a fake model
//! server are tested separately; these pin warden's own rules.

use std::path::{Path, PathBuf};

use crate::support::{Case, ms};

fn fixture(agent: &str, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../warden-events/tests/fixtures")
        .join(agent)
        .join(format!("{name}.jsonl"))
}

/// Writes a stand-in CLI that records its argv and stdin, prints `stream`
/// (with `pause` seconds between lines if given), then runs `then`.
fn fake_cli(case: &Case, stream: &str, then: &str) -> PathBuf {
    let bin = case.path().join("fake-agent");
    let script = format!(
        "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{dir}/argv'\ncat > '{dir}/stdin'\n{stream}\n{then}\n",
        dir = case.path().display()
    );
    crate::support::write_script(&bin, &script);
    bin
}

fn play(path: &Path) -> String {
    format!("cat '{}'", path.display())
}

#[test]
fn claude_success_fills_the_report_and_gets_the_prompt_on_stdin() {
    let case = Case::new();
    let bin = fake_cli(
        &case,
        &play(&fixture("claude", "success_with_tools")),
        "exit 0",
    );
    let done = case.run(&[
        "run",
        "claude",
        "fix the failing test",
        "--model",
        "opus",
        "--agent-bin",
        bin.to_str().unwrap(),
        "--",
        "--max-turns",
        "3",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let r = done.report();
    assert_eq!(r["verdict"], "succeeded");
    assert_eq!(r["agent"], "claude");
    assert_eq!(r["session_id"], "3f0c9a2e-1b7d-4e55-9c1a-0d2b7c6e9f10");
    assert_eq!(r["model"], "claude-sonnet-4-5");
    assert_eq!(r["agent_version"], "2.1.197");
    // Two messages, two model calls (the `result` says `num_turns: 3`,
    // Claude's own count, which is not that).
    assert_eq!(r["turns"], 2);
    assert_eq!(r["tool_calls"], 1);
    assert_eq!(r["tokens"]["input"], 1712);
    assert_eq!(r["tokens"]["cache_read"], 25400);
    assert_eq!(r["cost_usd"], 0.0412);
    assert!(
        r["final_text"]
            .as_str()
            .unwrap()
            .starts_with("All 12 tests pass.")
    );
    assert!(r["terminal_event_ms"].is_u64());
    let stdin = std::fs::read_to_string(case.path().join("stdin")).unwrap();
    assert_eq!(
        stdin, "fix the failing test",
        "the prompt goes on stdin, which is then closed"
    );
    let argv = std::fs::read_to_string(case.path().join("argv")).unwrap();
    let argv: Vec<&str> = argv.lines().collect();
    for flag in [
        "-p",
        "--verbose",
        "--dangerously-skip-permissions",
        "--max-turns",
    ] {
        assert!(argv.contains(&flag), "{flag} missing from {argv:?}");
    }
    assert!(argv.windows(2).any(|w| w == ["--model", "opus"]));
    assert!(
        !argv.contains(&"fix the failing test"),
        "the prompt is not an argument"
    );
    assert!(
        done.stderr.contains("tool| Bash: cargo test"),
        "{}",
        done.stderr
    );
    assert!(done.stderr.contains("$0.0412"), "{}", done.stderr);
}

#[test]
fn an_error_result_with_exit_zero_is_agent_failed() {
    let case = Case::new();
    let bin = fake_cli(
        &case,
        &play(&fixture("claude", "api_error_exit_zero")),
        "exit 0",
    );
    let done = case.run(&["run", "claude", "x", "--agent-bin", bin.to_str().unwrap()]);
    assert_eq!(done.code, 1, "{}", done.stderr);
    let r = done.report();
    assert_eq!(r["verdict"], "agent_failed");
    assert_eq!(r["exit_code"], 0);
    assert!(
        r["error_message"]
            .as_str()
            .unwrap()
            .contains("API Error: 500"),
        "{r}"
    );
    assert_eq!(r["retries"], 2);
}

#[test]
fn authentication_errors_are_named_as_such() {
    let case = Case::new();
    let bin = fake_cli(&case, &play(&fixture("pi", "error_exit_zero")), "exit 0");
    let done = case.run(&["run", "pi", "x", "--agent-bin", bin.to_str().unwrap()]);
    assert_eq!(done.code, 1, "{}", done.stderr);
    let r = done.report();
    assert_eq!(r["verdict"], "agent_failed");
    assert_eq!(r["error_class"], "authentication");
    assert!(done.stderr.contains("authentication"), "{}", done.stderr);
}

#[test]
fn exit_zero_without_a_terminal_event_is_agent_failed() {
    let case = Case::new();
    let bin = fake_cli(
        &case,
        &play(&fixture("claude", "no_terminal_event")),
        "exit 0",
    );
    let done = case.run(&["run", "claude", "x", "--agent-bin", bin.to_str().unwrap()]);
    assert_eq!(done.code, 1, "{}", done.stderr);
    let r = done.report();
    assert_eq!(r["verdict"], "agent_failed");
    assert!(
        r["reason"].as_str().unwrap().contains("no terminal event"),
        "{r}"
    );
    let finished = done.events_of("tool_finished");
    assert!(
        finished.iter().any(|e| e["is_error"] == true),
        "the open tool call is closed as failed"
    );
}

#[test]
fn a_terminal_event_then_a_hang_is_a_forced_completion_that_keeps_success() {
    let case = Case::new();
    let bin = fake_cli(
        &case,
        &play(&fixture("codex", "success_with_tools")),
        "exec sleep 600",
    );
    let done = case.run(&[
        "run",
        "codex",
        "x",
        "--agent-bin",
        bin.to_str().unwrap(),
        "--completion-timeout",
        "300ms",
        "--kill-grace",
        "200ms",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let r = done.report();
    assert_eq!(r["verdict"], "succeeded");
    assert_eq!(r["forced_completion"], true);
    assert_eq!(r["tokens"]["reasoning"], 64);
    assert!(ms(&r["duration_ms"]) < 5000);
    case.assert_nothing_left();
}

#[test]
fn the_completion_signal_is_found_in_escaped_json_text() {
    let case = Case::new();
    let stream = r#"echo '{"type":"system","subtype":"init","session_id":"s1"}'
echo '{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"done \u003cpromise\u003eCOMPLETE\u003c/promise\u003e"}]},"parent_tool_use_id":null}'"#;
    let bin = fake_cli(&case, stream, "exec sleep 600");
    let done = case.run(&[
        "run",
        "claude",
        "x",
        "--agent-bin",
        bin.to_str().unwrap(),
        "--completion-timeout",
        "300ms",
        "--kill-grace",
        "200ms",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let r = done.report();
    assert_eq!(r["verdict"], "succeeded", "{r}");
    assert!(r["completion_signal_seen_ms"].is_u64());
    assert_eq!(r["forced_completion"], true);
    case.assert_nothing_left();
}

fn bash_call(timeout_ms: Option<u64>) -> String {
    let input = match timeout_ms {
        Some(t) => format!(r#"{{"command":"cargo test","timeout":{t}}}"#),
        None => r#"{"command":"cargo test"}"#.to_string(),
    };
    format!(
        r#"echo '{{"type":"system","subtype":"init","session_id":"s1"}}'
echo '{{"type":"assistant","message":{{"id":"m1","content":[{{"type":"tool_use","id":"t1","name":"Bash","input":{input}}}]}},"parent_tool_use_id":null}}'
sleep 1
echo '{{"type":"user","message":{{"content":[{{"type":"tool_result","tool_use_id":"t1","content":"ok"}}]}}}}'
echo '{{"type":"result","subtype":"success","is_error":false,"result":"done","num_turns":1}}'"#
    )
}

#[test]
fn a_tool_call_with_a_declared_limit_stretches_the_stall_clock() {
    let case = Case::new();
    let bin = fake_cli(&case, &bash_call(Some(5000)), "exit 0");
    let done = case.run(&[
        "run",
        "claude",
        "x",
        "--agent-bin",
        bin.to_str().unwrap(),
        "--stall-timeout",
        "400ms",
        "--kill-grace",
        "100ms",
    ]);
    assert_eq!(
        done.code, 0,
        "the declared 5s limit covers the 1s silence: {}",
        done.stderr
    );
    let r = done.report();
    let ext = r["stall_extensions"].as_array().unwrap();
    assert_eq!(ext.len(), 1, "{r}");
    assert_eq!(ext[0]["tool"], "Bash");
    assert_eq!(ext[0]["timeout_ms"], 5000);

    // Without a declared limit the same silence is a stall.
    let case = Case::new();
    let bin = fake_cli(&case, &bash_call(None), "exit 0");
    let done = case.run(&[
        "run",
        "claude",
        "x",
        "--agent-bin",
        bin.to_str().unwrap(),
        "--stall-timeout",
        "400ms",
        "--kill-grace",
        "100ms",
    ]);
    assert_eq!(done.code, 3, "{}", done.stderr);
    case.assert_nothing_left();
}

#[test]
fn the_prompt_comes_from_a_file_or_stdin() {
    let case = Case::new();
    let bin = fake_cli(
        &case,
        &play(&fixture("gemini", "success_with_tools")),
        "exit 0",
    );
    std::fs::write(case.path().join("task.md"), "from the file\n").unwrap();
    let done = case.run(&[
        "run",
        "gemini",
        "-f",
        "task.md",
        "--agent-bin",
        bin.to_str().unwrap(),
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(
        std::fs::read_to_string(case.path().join("stdin")).unwrap(),
        "from the file\n"
    );

    let mut cmd = case.command(&["run", "gemini", "--agent-bin", bin.to_str().unwrap()]);
    // A run directory holds one run: the second run gets its own.
    cmd.env("WARDEN_RUN_DIR", case.path().join("run-2"));
    cmd.stdin(std::process::Stdio::piped());
    let mut child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"from stdin")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(case.path().join("stdin")).unwrap(),
        "from stdin"
    );
}

/// Quotes, `$()`, backticks, newlines and a leading `-`: the prompt never
/// passes through a shell, and is never an argument a CLI could take for
/// an option.
const NASTY_PROMPT: &str =
    "-n 'single' \"double\" $(touch pwned) `touch pwned2` \\ ; rm -rf x\nsecond line $HOME\n";

#[test]
fn a_prompt_with_shell_metacharacters_reaches_every_agent_unchanged() {
    for agent in ["claude", "codex", "opencode", "pi", "gemini"] {
        let case = Case::new();
        let bin = fake_cli(
            &case,
            &play(&fixture(agent, "success_with_tools")),
            "exit 0",
        );
        let done = case.run(&[
            "run",
            agent,
            "--prompt",
            NASTY_PROMPT,
            "--agent-bin",
            bin.to_str().unwrap(),
        ]);
        assert_eq!(done.code, 0, "{agent}: {}", done.stderr);
        let stdin = std::fs::read_to_string(case.path().join("stdin")).unwrap();
        assert_eq!(
            stdin, NASTY_PROMPT,
            "{agent}: the prompt changed on the way"
        );
        let argv = std::fs::read_to_string(case.path().join("argv")).unwrap();
        assert!(
            !argv.contains("touch pwned"),
            "{agent}: the prompt is an argument: {argv}"
        );
        assert!(
            !case.path().join("pwned").exists() && !case.path().join("pwned2").exists(),
            "{agent}: a shell ran the prompt"
        );
    }
}

#[test]
fn exec_arguments_reach_the_command_unchanged() {
    let case = Case::new();
    let done = case.run(&["run", "exec", "--", "printf", "%s", NASTY_PROMPT]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(done.log("stdout.log"), NASTY_PROMPT.as_bytes());
    assert!(!case.path().join("pwned").exists());
}

#[test]
fn opencode_takes_effort_as_its_variant() {
    let case = Case::new();
    let bin = fake_cli(
        &case,
        &play(&fixture("opencode", "success_with_tools")),
        "exit 0",
    );
    let done = case.run(&[
        "run",
        "opencode",
        "do the thing",
        "--agent-bin",
        bin.to_str().unwrap(),
        "--effort",
        "high",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let argv = std::fs::read_to_string(case.path().join("argv")).unwrap();
    assert!(argv.contains("--variant\nhigh"), "{argv}");
    assert_eq!(done.report()["cost_usd"], 0.0043);
}

#[test]
fn bad_agent_input_gets_a_clear_error() {
    let case = Case::new();
    let done = case.run(&["run", "claud", "x"]);
    assert_eq!(done.code, 2);
    assert!(
        done.stderr.contains("unknown agent `claud`") && done.stderr.contains("claude, codex"),
        "{}",
        done.stderr
    );

    let mut cmd = case.command(&["run", "codex"]);
    cmd.env("PATH", case.path());
    let out = cmd.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "no prompt: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("no prompt"));

    let mut cmd = case.command(&["run", "codex", "task"]);
    cmd.env("PATH", "/nonexistent");
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{err}");
    assert!(err.contains("npm install -g @openai/codex"), "{err}");

    let done = case.run(&[
        "run",
        "claude",
        "x",
        "--effort",
        "high",
        "--agent-bin",
        "/bin/true",
    ]);
    assert_eq!(done.code, 2);
    assert!(
        done.stderr.contains("does not take --effort"),
        "{}",
        done.stderr
    );
    assert!(!case.run_dir().exists());
}

#[test]
fn replay_decodes_a_recording_offline() {
    let case = Case::new();
    let file = fixture("claude", "success_with_tools");
    let out = case
        .command(&["replay", "claude", file.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["kind"], "session_started");
    // Only events on stdout; the summary on stderr's last line.
    assert!(lines.iter().all(|l| l["schema_version"] == 1), "{text}");
    assert_eq!(lines.last().unwrap()["kind"], "result");
    let err = String::from_utf8(out.stderr).unwrap();
    let last: serde_json::Value = serde_json::from_str(err.lines().last().unwrap()).unwrap();
    assert_eq!(last["outcome"], "succeeded");
    assert_eq!(last["tool_calls"], 1);
    assert_eq!(last["lines"], 9);

    let out = case
        .command(&[
            "replay",
            "claude",
            fixture("claude", "no_terminal_event").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("outcome: no_terminal_event"), "{text}");
    // The same line the live view shows for the tool call.
    assert!(text.contains("  tool| Bash: sleep 1000"), "{text}");

    let out = case.command(&["replay", "nope", "x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}
