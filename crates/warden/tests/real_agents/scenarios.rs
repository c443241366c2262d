//! The same scenarios for every CLI.

use std::time::{Duration, Instant};

use warden_fake_model::{INPUT_TOKENS, OUTPUT_TOKENS, Turn};

use crate::kit::Kit;
use crate::support::{Finished, kill, ms, unique_sleep};

fn explain(kit: &Kit, done: &Finished) -> String {
    let log = |name: &str| {
        let bytes = std::fs::read(done.run_dir.join(name)).unwrap_or_default();
        let start = bytes.len().saturating_sub(3000);
        String::from_utf8_lossy(&bytes[start.min(bytes.len())..]).into_owned()
    };
    format!(
        "{} exited {} after {:?}\n--- warden stderr:\n{}\n--- agent stdout (tail):\n{}\n--- agent stderr (tail):\n{}\n--- requests: {:?}",
        kit.agent,
        done.code,
        done.elapsed,
        done.stderr,
        log("stdout.log"),
        log("stderr.log"),
        kit.server
            .requests()
            .iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect::<Vec<_>>()
    )
}

fn assert_nothing_left(kit: &Kit, token: &str, done: &Finished) {
    let left = kit.leftovers(token);
    assert!(
        left.is_empty(),
        "processes of the run survived: {left:?}\n{}",
        explain(kit, done)
    );
}

pub fn happy_path(agent: &'static str) {
    let script = vec![
        Turn::Shell("echo hello-from-tool".into()),
        Turn::Text("all done".into()),
    ];
    let Some(kit) = Kit::new(agent, script) else {
        return;
    };
    let done = kit.run("say hello through the shell", &["--timeout", "120s"]);
    let why = explain(&kit, &done);
    assert_eq!(done.code, 0, "{why}");
    let r = done.report();
    assert_eq!(r["verdict"], "succeeded", "{why}");
    assert!(
        r["final_text"]
            .as_str()
            .is_some_and(|t| t.contains("all done")),
        "final text: {}\n{why}",
        r["final_text"]
    );
    // The answer is warden's stdout, as `claude -p` prints it (the test
    // reads warden through pipes).
    let answer = r["final_text"].as_str().unwrap_or_default();
    let nl = if answer.ends_with('\n') { "" } else { "\n" };
    assert_eq!(done.stdout, format!("{answer}{nl}"), "{why}");
    assert!(
        r["session_id"].as_str().is_some_and(|s| !s.is_empty()),
        "no session id\n{why}"
    );
    assert!(ms(&r["tool_calls"]) >= 1, "{why}");
    // Two model calls, each reporting the fake server's usage.
    assert!(
        ms(&r["tokens"]["input"]) >= 2 * INPUT_TOKENS,
        "tokens {}\n{why}",
        r["tokens"]
    );
    assert!(
        ms(&r["tokens"]["output"]) >= 2 * OUTPUT_TOKENS,
        "tokens {}\n{why}",
        r["tokens"]
    );
    let finished = done.events_of("tool_finished");
    assert!(
        finished.iter().any(|e| e["is_error"] == false
            && e["output"]
                .as_str()
                .is_some_and(|o| o.contains("hello-from-tool"))),
        "the tool's output is not in a tool_finished event: {finished:?}\n{why}"
    );
    // The tool really ran: its output went back to the model.
    let posts: Vec<String> = kit
        .server
        .requests()
        .iter()
        .filter(|r| r.method == "POST")
        .map(|r| r.body.to_string())
        .collect();
    assert!(posts.len() >= 2, "{why}");
    assert!(
        // More mentions than the `echo` command itself accounts for.
        posts
            .iter()
            .any(|b| b.matches("hello-from-tool").count()
                > b.matches("echo hello-from-tool").count()),
        "no later request carried the tool's output\n{why}"
    );
}

/// The happy path again, inside bubblewrap: the agent's own state dirs
/// are writable, the fake server on the host loopback is reachable.
pub fn happy_path_in_bwrap(agent: &'static str) {
    let script = vec![
        Turn::Shell("echo hello-from-tool".into()),
        Turn::Text("all done".into()),
    ];
    let Some(kit) = Kit::new(agent, script) else {
        return;
    };
    let mut flags = vec!["--timeout", "120s", "--sandbox", "bwrap"];
    for name in &kit.sandbox_env {
        flags.extend(["--env", name]);
    }
    let done = kit.run("say hello through the shell", &flags);
    let why = explain(&kit, &done);
    assert_eq!(done.code, 0, "{why}");
    let r = done.report();
    assert_eq!(r["sandbox"], "bwrap", "{why}");
    assert_eq!(
        r["orphans"].as_array().map(Vec::len),
        Some(0),
        "bwrap's own processes are not orphans: {why}"
    );
    assert!(
        r["final_text"]
            .as_str()
            .is_some_and(|t| t.contains("all done")),
        "{why}"
    );
}

/// A tool call that leaves a background job behind (with `setsid`, in its
/// own session). Claude Code, Codex and pi exit normally; warden must end
/// the run promptly and kill what they left. OpenCode's and Gemini's shell
/// tools wait for the job to release the tool's pipe and so hang: warden
/// ends those runs with the stall clock.
pub fn background_job(agent: &'static str, setsid: bool, expected: &str) {
    let sleep = unique_sleep();
    let command = if setsid {
        format!("echo hi; setsid {sleep} > /dev/null 2>&1 &")
    } else {
        format!("echo hi; {sleep} &")
    };
    let Some(kit) = Kit::new(agent, vec![Turn::Shell(command), Turn::Text("done".into())]) else {
        return;
    };
    let done = kit.run(
        "start a background job",
        &[
            "--stall-timeout",
            "5s",
            "--kill-grace",
            "1s",
            "--timeout",
            "90s",
        ],
    );
    let why = explain(&kit, &done);
    assert_eq!(done.verdict(), expected, "{why}");
    assert!(
        done.elapsed < Duration::from_secs(45),
        "took {:?}\n{why}",
        done.elapsed
    );
    assert_nothing_left(&kit, &sleep, &done);
}

/// The model stalls mid-stream: the run is `stalled`, its processes are
/// gone, and the report says when the last activity was.
pub fn model_stalls(agent: &'static str) {
    let Some(kit) = Kit::new(agent, vec![Turn::Stall]) else {
        return;
    };
    let done = kit.run(
        "think forever",
        &[
            "--stall-timeout",
            "2s",
            "--startup-timeout",
            "30s",
            "--kill-grace",
            "1s",
        ],
    );
    let why = explain(&kit, &done);
    assert_eq!(done.code, 3, "{why}");
    let r = done.report();
    assert_eq!(r["verdict"], "stalled", "{why}");
    let last = ms(&r["last_activity_ms"]);
    let total = ms(&r["duration_ms"]);
    assert!(
        total >= last + 2000,
        "last activity at {last} ms, ended at {total} ms\n{why}"
    );
    assert!(done.stderr.contains("no activity for"), "{why}");
    assert_nothing_left(&kit, "\u{0}never\u{0}", &done);
}

/// The model answers 401: `agent_failed` quickly, saying authentication.
pub fn unauthorized(agent: &'static str) {
    let Some(kit) = Kit::new(
        agent,
        vec![Turn::Status(401), Turn::Status(401), Turn::Status(401)],
    ) else {
        return;
    };
    let done = kit.run(
        "anything",
        &[
            "--timeout",
            "60s",
            "--completion-timeout",
            "5s",
            "--kill-grace",
            "1s",
        ],
    );
    let why = explain(&kit, &done);
    let r = done.report();
    assert_eq!(r["verdict"], "agent_failed", "{why}");
    assert!(
        done.elapsed < Duration::from_secs(30),
        "took {:?}\n{why}",
        done.elapsed
    );
    let said = format!("{} {}", r["reason"], r["error_message"]).to_lowercase();
    assert!(
        said.contains("authentication"),
        "the report does not say authentication: {said}\n{why}"
    );
}

/// SIGINT to warden while a tool runs: `cancelled`, and nothing of the run
/// is left (for Codex, the native binary behind its node launcher too).
pub fn interrupted_during_tool(agent: &'static str) {
    let sleep = unique_sleep();
    let script = |dir: &std::path::Path| {
        let flag = dir.join("tool-started");
        vec![
            Turn::Shell(format!("touch '{}'; {sleep}", flag.display())),
            Turn::Text("done".into()),
        ]
    };
    let Some(kit) = Kit::with(agent, script) else {
        return;
    };
    let flag = kit.case.path().join("tool-started");
    let mut child = kit
        .command("run a long tool", &["--kill-grace", "2s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    while !flag.exists() && Instant::now() < until && child.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let started = flag.exists();
    // Let the CLI settle into waiting on the tool.
    std::thread::sleep(Duration::from_millis(300));
    let start = Instant::now();
    if started {
        kill(child.id(), "INT");
    }
    let out = child.wait_with_output().unwrap();
    let done = kit.case.finished(out, start);
    let why = explain(&kit, &done);
    assert!(started, "the tool never started\n{why}");
    assert_eq!(done.code, 130, "{why}");
    assert_eq!(done.verdict(), "cancelled", "{why}");
    assert!(
        done.elapsed < Duration::from_secs(10),
        "took {:?} to cancel\n{why}",
        done.elapsed
    );
    assert_nothing_left(&kit, &sleep, &done);
}

macro_rules! per_agent {
    ($($agent:ident: plain_job = $plain:literal, setsid_job = $setsid:literal;)*) => {
        $(
            mod $agent {
                #[test]
                fn happy_path() {
                    super::happy_path(stringify!($agent));
                }

                #[test]
                fn happy_path_in_bwrap() {
                    super::happy_path_in_bwrap(stringify!($agent));
                }

                #[test]
                fn background_job_left_by_a_tool() {
                    super::background_job(stringify!($agent), false, $plain);
                }

                #[test]
                fn setsid_job_left_by_a_tool() {
                    super::background_job(stringify!($agent), true, $setsid);
                }

                #[test]
                fn model_stalls_mid_stream() {
                    super::model_stalls(stringify!($agent));
                }

                #[test]
                fn unauthorized() {
                    super::unauthorized(stringify!($agent));
                }

                #[test]
                fn interrupted_during_a_tool() {
                    super::interrupted_during_tool(stringify!($agent));
                }
            }
        )*
    };
}

per_agent! {
    claude: plain_job = "succeeded", setsid_job = "succeeded";
    codex: plain_job = "succeeded", setsid_job = "succeeded";
    pi: plain_job = "succeeded", setsid_job = "succeeded";
    opencode: plain_job = "stalled", setsid_job = "succeeded";
    gemini: plain_job = "stalled", setsid_job = "succeeded";
}
