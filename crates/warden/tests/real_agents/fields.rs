//! What `run.json` says about tokens, turns, tools and the model means the
//! same for every CLI, and matches what the model server sent.

use std::time::{Duration, Instant};

use warden_fake_model::{Turn, Usage};

use crate::kit::Kit;
use crate::support::{Finished, kill, ms};

/// What the server reports for each of the three model calls: a prompt of
/// 1011 tokens of which 15 came from the cache, and 103 generated.
const USAGE: Usage = Usage {
    input: 996,
    cache_read: 15,
    cache_write: 0,
    output: 103,
    reasoning: 0,
};
const CALLS: u64 = 3;

fn explain(kit: &Kit, done: &Finished) -> String {
    let log = |name: &str| {
        let bytes = std::fs::read(done.run_dir.join(name)).unwrap_or_default();
        let start = bytes.len().saturating_sub(6000);
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
        kit.server.requests().len(),
    )
}

/// The counts `agent`'s CLI does not report: `null` in `run.json` (not
/// known), never 0.
fn not_reported(agent: &str) -> &'static [&'static str] {
    match agent {
        "claude" | "pi" => &["reasoning"],
        "gemini" => &["cache_write"],
        _ => &[],
    }
}

/// Three model calls (two tools, then an answer), each reporting
/// [`USAGE`]: `run.json` has the sums, split the one way warden defines.
pub fn usage_matches_the_server(agent: &'static str) {
    let script = vec![
        Turn::Shell("echo first".into()),
        Turn::Shell("sleep 1.5; echo second".into()),
        Turn::Text("all done".into()),
    ];
    let Some(kit) = Kit::with_usage(agent, |_| script, USAGE) else {
        return;
    };
    // Codex does not say which model it uses: the report takes the one
    // its command line names.
    let flags: &[&str] = match agent {
        "codex" => &["--timeout", "180s", "--model", "gpt-5.5"],
        _ => &["--timeout", "180s"],
    };
    let done = kit.run("run two commands", flags);
    let why = explain(&kit, &done);
    assert_eq!(done.verdict(), "succeeded", "{why}");
    let r = done.report();
    let t = &r["tokens"];
    let want = |field: &str, n: u64| {
        if not_reported(agent).contains(&field) {
            assert!(t[field].is_null(), "tokens.{field} in {t}\n{why}");
        } else {
            assert_eq!(ms(&t[field]), n, "tokens.{field} in {t}\n{why}");
        }
    };
    want("input", CALLS * USAGE.input);
    want("cache_read", CALLS * USAGE.cache_read);
    want("cache_write", CALLS * USAGE.cache_write);
    want("output", CALLS * USAGE.output);
    want("total", CALLS * USAGE.total());
    assert_eq!(ms(&r["turns"]), CALLS, "turns\n{why}");
    assert!(
        r["model"].as_str().is_some_and(|m| !m.is_empty()),
        "no model in the report\n{why}"
    );
    // The tool that slept has a duration of its own, by the CLI's clock
    // where it gives one, else by warden's.
    let finished = done.events_of("tool_finished");
    let slept = finished
        .iter()
        .find(|e| e["output"].as_str().is_some_and(|o| o.contains("second")))
        .unwrap_or_else(|| panic!("no tool_finished for the sleeping tool\n{why}"));
    let started = done
        .events_of("tool_started")
        .into_iter()
        .find(|e| e["id"] == slept["id"]);
    let took = slept["duration_ms"]
        .as_u64()
        .or_else(|| started.map(|s| ms(&slept["t_ms"]).saturating_sub(ms(&s["t_ms"]))));
    assert!(
        took.is_some_and(|d| d >= 1000),
        "the sleeping tool took {took:?} ms: {slept}\n{why}"
    );
}

/// One model call whose output includes reasoning (and, for Claude, the
/// only API with the notion, tokens written to the cache): `output` counts
/// the reasoning, `reasoning` says how much of it there was, where the CLI
/// passes that on.
pub fn reasoning_is_part_of_output(agent: &'static str) {
    let usage = Usage {
        input: 500,
        cache_read: 20,
        cache_write: if agent == "claude" { 30 } else { 0 },
        output: 90,
        reasoning: 40,
    };
    let Some(kit) = Kit::with_usage(agent, |_| vec![Turn::Text("all done".into())], usage) else {
        return;
    };
    let done = kit.run("say done", &["--timeout", "120s"]);
    let why = explain(&kit, &done);
    assert_eq!(done.verdict(), "succeeded", "{why}");
    let t = &done.report()["tokens"];
    let want = |field: &str, n: u64| {
        if not_reported(agent).contains(&field) {
            assert!(t[field].is_null(), "tokens.{field} in {t}\n{why}");
        } else {
            assert_eq!(ms(&t[field]), n, "tokens.{field} in {t}\n{why}");
        }
    };
    want("input", usage.input);
    want("cache_read", usage.cache_read);
    want("cache_write", usage.cache_write);
    want("output", usage.output);
    want("total", usage.total());
    // Known where the CLI reports it (pi's and Claude Code's is `null`).
    want("reasoning", usage.reasoning);
}

/// Claude Code, stopped by Ctrl-C while a tool runs: no `result` comes, so
/// the output tokens are the ones its messages reported, the last usage of
/// each message, not the first.
pub fn claude_output_tokens_without_result() {
    let script = |dir: &std::path::Path| {
        let flag = dir.join("tool-started");
        vec![
            // The tool ignores SIGINT and SIGTERM, so only warden's
            // SIGKILL after the grace ends it, with Claude Code: Claude
            // cannot send its failure and be answered, which would bring
            // a `result`.
            Turn::Shell(format!(
                "trap '' TERM INT; touch '{}'; sleep 61.537",
                flag.display()
            )),
            Turn::Text("done".into()),
        ]
    };
    let Some(kit) = Kit::with_usage("claude", script, USAGE) else {
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
    std::thread::sleep(Duration::from_millis(300));
    let start = Instant::now();
    let started = flag.exists();
    if started {
        kill(child.id(), "INT");
    }
    let out = child.wait_with_output().unwrap();
    let done = kit.case.finished(out, start);
    let why = explain(&kit, &done);
    assert!(started, "the tool never started\n{why}");
    assert_eq!(done.verdict(), "cancelled", "{why}");
    let t = &done.report()["tokens"];
    assert_eq!(ms(&t["output"]), USAGE.output, "tokens {t}\n{why}");
    assert_eq!(ms(&t["input"]), USAGE.input, "tokens {t}\n{why}");
    assert_eq!(ms(&t["cache_read"]), USAGE.cache_read, "tokens {t}\n{why}");
    let left = kit.leftovers("sleep 61.537");
    assert!(left.is_empty(), "left running: {left:?}");
}

/// Claude Code says it is done and then runs a long tool: warden ends it
/// when the completion window runs out, with no `result`. The output
/// tokens are still the server's.
pub fn claude_output_tokens_after_forced_completion() {
    let script = vec![Turn::SayThenShell(
        "finished <promise>COMPLETE</promise>".into(),
        // Ended only by warden's SIGKILL, as above.
        "trap '' TERM INT; sleep 62.547".into(),
    )];
    let Some(kit) = Kit::with_usage("claude", |_| script, USAGE) else {
        return;
    };
    let done = kit.run(
        "finish, then wait",
        &["--completion-timeout", "1500ms", "--kill-grace", "1s"],
    );
    let why = explain(&kit, &done);
    let r = done.report();
    assert_eq!(r["forced_completion"], true, "{why}");
    assert!(
        r["terminal_event_ms"].is_null(),
        "a result came: the case is not what it means to be\n{why}"
    );
    let t = &r["tokens"];
    assert_eq!(ms(&t["output"]), USAGE.output, "tokens {t}\n{why}");
    assert_eq!(ms(&t["total"]), USAGE.total(), "tokens {t}\n{why}");
    assert_eq!(ms(&r["turns"]), 1, "{why}");
    let left = kit.leftovers("sleep 62.547");
    assert!(left.is_empty(), "left running: {left:?}");
}

#[test]
fn claude_output_tokens_after_a_forced_completion() {
    claude_output_tokens_after_forced_completion();
}

#[test]
fn claude_output_tokens_when_no_result_arrives() {
    claude_output_tokens_without_result();
}

macro_rules! per_agent {
    ($($agent:ident),*) => {
        $(
            mod $agent {
                #[test]
                fn usage_and_turns_match_the_server() {
                    super::usage_matches_the_server(stringify!($agent));
                }

                #[test]
                fn reasoning_is_part_of_output() {
                    super::reasoning_is_part_of_output(stringify!($agent));
                }
            }
        )*
    };
}

per_agent!(claude, codex, pi, opencode, gemini);
