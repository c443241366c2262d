//! Budgets with the real CLIs: a cost budget passed mid-run (pi prices
//! each model call) and at the end (Claude Code reports its cost only in
//! its last line), a turn budget, the 80% warning, the exit code, a
//! session and a batch that stop on their budgets, and the refusal of a
//! cost budget for a CLI that reports no cost.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use warden_fake_model::{Turn, Usage};

use crate::kit::Kit;
use crate::support::{Finished, ms};

fn explain(kit: &Kit, done: &Finished, dir: &Path) -> String {
    let log = |name: &str| {
        let bytes = std::fs::read(dir.join(name)).unwrap_or_default();
        let start = bytes.len().saturating_sub(4000);
        String::from_utf8_lossy(&bytes[start..]).into_owned()
    };
    format!(
        "{} exited {} after {:?}\n--- warden stderr:\n{}\n--- agent stdout (tail):\n{}\n--- events (tail):\n{}\n--- requests: {}",
        kit.agent,
        done.code,
        done.elapsed,
        done.stderr,
        log("stdout.log"),
        log("events.jsonl"),
        kit.server.requests().len()
    )
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("could not read {}: {e}", path.display()));
    serde_json::from_str(&text).expect("JSON")
}

fn events_of(dir: &Path, kind: &str) -> Vec<Value> {
    std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("an event is JSON"))
        .filter(|e| e["kind"] == kind)
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

/// What each of pi's model calls reports: 1000 prompt tokens and 100
/// generated, which its model configuration below prices at $100 per
/// million each: $0.11 a call.
const PI_USAGE: Usage = Usage {
    input: 1000,
    cache_read: 0,
    cache_write: 0,
    output: 100,
    reasoning: 0,
};
const PI_CALL_USD: f64 = 0.11;

/// pi with a model configuration that prices each call at $0.11.
fn priced_pi(script: Vec<Turn>) -> Option<Kit> {
    let kit = Kit::with_usage("pi", |_| script, PI_USAGE)?;
    let url = kit.server.url();
    std::fs::write(
        kit.case.path().join("home/pi/models.json"),
        format!(
            r#"{{"providers":{{"fake":{{"baseUrl":"{url}/v1","api":"openai-completions","apiKey":"fake","compat":{{"supportsDeveloperRole":false,"supportsReasoningEffort":false}},"models":[{{"id":"fake-model","cost":{{"input":100,"output":100,"cacheRead":0,"cacheWrite":0}}}}]}}}}}}"#
        ),
    )
    .unwrap();
    Some(kit)
}

/// Checks a run ended by its $0.25 cost budget at the `calls`th priced
/// call ($0.11 each), and returns what the report says was spent. The
/// end is decided at that call, but the tool it started is stopped with
/// the agent, which may still send the tool's failure and be priced for
/// the answer before it exits: the report counts what was spent by the
/// end, so the `late` calls at most made while stopping are in its
/// numbers and its reason.
fn ended_at_a_call_past(r: &Value, calls: u64, late: u64, why: &str) -> f64 {
    let spent = r["cost_usd"].as_f64().expect("cost_usd");
    let made = (spent / PI_CALL_USD).round();
    assert!(
        close(spent, made * PI_CALL_USD),
        "a whole number of calls: ${spent}\n{why}"
    );
    assert!(
        made as u64 >= calls && made as u64 <= calls + late,
        "ended at call {calls}, or at most {late} later while stopping: {made}\n{why}"
    );
    assert_eq!(
        r["reason"],
        format!("run cost budget $0.25 exceeded: ${spent:.2} spent; the run was ended"),
        "{why}"
    );
    spent
}

/// Checks a run ended by `--max-turns 2` at its third model call (or a
/// fourth made while it was being stopped, as above), and returns its
/// turns.
fn ended_past_two_turns(r: &Value, why: &str) -> u64 {
    let turns = ms(&r["turns"]);
    assert!(turns == 3 || turns == 4, "{turns} turns\n{why}");
    assert_eq!(
        r["reason"],
        format!("run turn budget 2 exceeded: {turns} turns; the run was ended"),
        "{why}"
    );
    turns
}

/// Three calls, the third a tool that sleeps `secs` (each test its own
/// odd number, so that looking for what is left finds only its own, and
/// nothing of another program's).
fn three_calls(secs: &str) -> Vec<Turn> {
    vec![
        Turn::Shell("echo one".into()),
        // The second call's $0.22 (88%: a warning) must be read before the
        // third's $0.33: on a loaded machine both could come in one read,
        // which crosses 80% and the limit in one step (the end says so,
        // no warning is given). The pause keeps them apart.
        Turn::Shell("sleep 0.3; echo two".into()),
        Turn::Shell(format!("sleep {secs}; echo three")),
        Turn::Text("done".into()),
    ]
}

/// The batch view shows a run's budget warning and its end as lines.
#[test]
fn the_batch_view_shows_the_budget_warning_and_the_end() {
    let Some(kit) = priced_pi(three_calls("33.447")) else {
        return;
    };
    let base = kit.case.path().to_path_buf();
    let file = base.join("runs.toml");
    let extra: Vec<String> = kit.extra.iter().map(|a| format!("{a:?}")).collect();
    std::fs::write(
        &file,
        format!(
            "[[run]]
name = \"a\"
agent = \"pi\"
agent_bin = {:?}
model = \"fake-model\"
extra_args = [{}]
prompt = \"run three commands\"
max_cost = 0.25
kill_grace = \"2s\"
",
            kit.bin.to_string_lossy(),
            extra.join(", ")
        ),
    )
    .unwrap();
    let batch = run_batch(&kit, &file, &base.join("batch"));
    let why = format!("batch exited {}\n{}", batch.code, batch.stderr);
    assert_eq!(batch.code, 7, "{why}");
    assert!(
        batch
            .stderr
            .contains("[a] warning: 88% of the run cost budget $0.25 used: $0.22 spent"),
        "{why}"
    );
    assert!(
        batch
            .stderr
            .contains("[a] ending the run: run cost budget $0.25 exceeded: $0.33 spent"),
        "{why}"
    );
    let left = kit.leftovers("sleep 33.447");
    assert!(left.is_empty(), "left running: {left:?}");
}

/// pi prices each model call as it answers, so a cost budget ends the run
/// at the call that passes it, while that call's tool is still running;
/// the call before gives the 80% warning.
#[test]
fn pi_is_ended_at_the_model_call_that_passes_its_cost_budget() {
    let Some(kit) = priced_pi(three_calls("30.417")) else {
        return;
    };
    let done = kit.run(
        "run three commands",
        &[
            "--max-cost",
            "0.25",
            "--kill-grace",
            "2s",
            "--timeout",
            "120s",
        ],
    );
    let why = explain(&kit, &done, &done.run_dir);
    assert_eq!(done.code, 7, "exit code of budget_exceeded\n{why}");
    assert_eq!(done.verdict(), "budget_exceeded", "{why}");
    assert!(
        done.elapsed < Duration::from_secs(25),
        "the run was not ended at the third call: {:?}\n{why}",
        done.elapsed
    );
    let r = done.report();
    // One more answer: the killed tool's failure.
    let spent = ended_at_a_call_past(&r, 3, 1, &why);
    assert!(
        close(ms(&r["turns"]) as f64 * PI_CALL_USD, spent),
        "one turn for each priced call\n{why}"
    );
    let hit = &r["budget_exceeded"];
    assert_eq!(hit["scope"], "run", "{hit}");
    assert_eq!(hit["budget"], "cost", "{hit}");
    assert!(close(hit["limit"].as_f64().unwrap(), 0.25), "{hit}");
    assert!(close(hit["reached"].as_f64().unwrap(), spent), "{hit}");
    let warnings = events_of(&done.run_dir, "budget_warning");
    assert_eq!(warnings.len(), 1, "one warning, at $0.22 of $0.25\n{why}");
    assert!(
        close(warnings[0]["reached"].as_f64().unwrap(), 2.0 * PI_CALL_USD),
        "{}",
        warnings[0]
    );
    assert!(
        done.stderr
            .contains("warning: 88% of the run cost budget $0.25 used: $0.22 spent"),
        "the live view shows the warning\n{why}"
    );
    let terminating = events_of(&done.run_dir, "terminating");
    assert_eq!(
        terminating[0]["reason"], "run cost budget $0.25 exceeded: $0.33 spent",
        "{why}"
    );
    let left = kit.leftovers("sleep 30.417");
    assert!(left.is_empty(), "left running: {left:?}");
}

/// Claude Code: `--max-turns 2` lets two model calls finish and ends the
/// run at the third, while its tool runs; the second gives the warning.
#[test]
fn claude_is_ended_at_the_turn_past_its_turn_budget() {
    let script = vec![
        Turn::Shell("echo one".into()),
        // A pause keeps the second call's count (the warning) and the
        // third's (the end) in separate reads, as in `three_calls`.
        Turn::Shell("sleep 0.5; echo two".into()),
        Turn::Shell("sleep 31.427; echo three".into()),
        Turn::Text("done".into()),
    ];
    let Some(kit) = Kit::new("claude", script) else {
        return;
    };
    // As under GitHub Actions: the warning is an annotation, and the step
    // summary lists the budgets.
    let summary = kit.case.path().join("step-summary.md");
    let start = Instant::now();
    let out = kit
        .command(
            "run three commands",
            &[
                "--max-turns",
                "2",
                "--kill-grace",
                "2s",
                "--timeout",
                "120s",
            ],
        )
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .expect("run warden");
    let done = kit.case.finished(out, start);
    let why = explain(&kit, &done, &done.run_dir);
    assert_eq!(done.code, 7, "{why}");
    assert_eq!(done.verdict(), "budget_exceeded", "{why}");
    assert!(done.elapsed < Duration::from_secs(25), "{why}");
    let r = done.report();
    let turns = ended_past_two_turns(&r, &why);
    assert_eq!(r["budgets"][0]["budget"], "turns", "{why}");
    let warnings = events_of(&done.run_dir, "budget_warning");
    assert_eq!(warnings.len(), 1, "{why}");
    assert_eq!(warnings[0]["reached"], 2.0, "{}", warnings[0]);
    assert!(
        done.stderr
            .contains("::warning title=warden::100%25 of the run turn budget 2 used: 2 turns"),
        "{why}"
    );
    let md = std::fs::read_to_string(&summary).unwrap_or_default();
    assert!(
        md.contains(&format!("| budgets | run turn budget 2: {turns} |")),
        "{md}\n{why}"
    );
    let left = kit.leftovers("sleep 31.427");
    assert!(left.is_empty(), "left running: {left:?}");
}

/// What Claude Code's `result` says a run cost, for the usage below.
const CLAUDE_USAGE: Usage = Usage {
    input: 20_000,
    cache_read: 0,
    cache_write: 0,
    output: 2_000,
    reasoning: 0,
};

fn claude_run(kit: &Kit, dir: &Path, flags: &[&str]) -> Finished {
    let dir_s = dir.to_string_lossy().into_owned();
    let mut all = vec!["--run-dir", dir_s.as_str(), "--timeout", "120s"];
    all.extend_from_slice(flags);
    let start = Instant::now();
    let out = kit.command("say done", &all).output().expect("run warden");
    let mut done = kit.case.finished(out, start);
    done.run_dir = dir.to_path_buf();
    done
}

/// Claude Code reports its cost only in its last line: a cost budget
/// cannot cut its run short (warden warns so), but a run that ends over it
/// is `budget_exceeded`; a session stops on its budget at the run that
/// passes it; a batch starts no run once nothing is left of its budget.
#[test]
fn claude_cost_budgets_of_a_run_a_session_and_a_batch() {
    let Some(kit) = Kit::with_usage("claude", |_| Vec::new(), CLAUDE_USAGE) else {
        return;
    };
    let base = kit.case.path().to_path_buf();

    // What one run costs, as Claude Code prices it.
    let measured = claude_run(&kit, &base.join("measure"), &[]);
    let why = explain(&kit, &measured, &measured.run_dir);
    assert_eq!(measured.verdict(), "succeeded", "{why}");
    let cost = measured.report()["cost_usd"]
        .as_f64()
        .unwrap_or_else(|| panic!("Claude Code reported no cost\n{why}"));
    assert!(cost > 0.0, "{why}");
    eprintln!("claude: one run of 20000 input and 2000 output tokens reported ${cost}");

    // One run, over its budget when it ends.
    let limit = format!("{:.6}", cost / 2.0);
    let over = claude_run(&kit, &base.join("over"), &["--max-cost", &limit]);
    let why = explain(&kit, &over, &over.run_dir);
    assert_eq!(over.code, 7, "{why}");
    assert_eq!(over.verdict(), "budget_exceeded", "{why}");
    let r = over.report();
    let reason = r["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("run cost budget $") && reason.contains("not cut short"),
        "{reason}"
    );
    assert!(
        close(r["budget_exceeded"]["reached"].as_f64().unwrap(), cost),
        "{why}"
    );
    assert!(
        over.stderr
            .contains("reports its cost only in its last line"),
        "warned at the start\n{why}"
    );

    // A session of up to 4 runs with a budget of one and a half runs: the
    // second passes it and ends the session.
    let limit = format!("{:.6}", cost * 1.5);
    let session_dir = base.join("session");
    let session = claude_run(
        &kit,
        &session_dir,
        &["--iterations", "4", "--session-max-cost", &limit],
    );
    let why = format!(
        "{}\n--- session.json:\n{}",
        explain(&kit, &session, &session_dir.join("iteration-2")),
        std::fs::read_to_string(session_dir.join("session.json")).unwrap_or_default()
    );
    assert_eq!(session.code, 7, "{why}");
    let s = json(&session_dir.join("session.json"));
    assert_eq!(s["stopped_because"], "budget_exceeded", "{why}");
    assert_eq!(s["iterations_run"], 2, "{why}");
    assert_eq!(s["verdict"], "budget_exceeded", "{why}");
    assert_eq!(s["runs"][0]["verdict"], "succeeded", "{why}");
    assert_eq!(s["budget_exceeded"]["scope"], "session", "{why}");
    assert!(
        close(s["budgets"][0]["reached"].as_f64().unwrap(), 2.0 * cost),
        "{why}"
    );
    let second = json(&session_dir.join("iteration-2/run.json"));
    assert!(
        second["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("session cost budget $")),
        "{why}"
    );
    assert!(
        close(
            second["budget_exceeded"]["spent_before"].as_f64().unwrap(),
            cost
        ),
        "{why}"
    );
    assert!(!session_dir.join("iteration-3").exists(), "{why}");

    // A batch of three runs, one at a time, with the same budget: the
    // first succeeds, the second passes it, the third never starts.
    let batch_dir = base.join("batch");
    let file = base.join("runs.toml");
    let extra: Vec<String> = kit.extra.iter().map(|a| format!("{a:?}")).collect();
    std::fs::write(
        &file,
        format!(
            "[defaults]\nagent = \"claude\"\nagent_bin = {:?}\nextra_args = [{}]\nprompt = \"say done\"\ntimeout = \"120s\"\n\n[budget]\nmax_cost = {limit}\n\n[[run]]\nname = \"a\"\n\n[[run]]\nname = \"b\"\n\n[[run]]\nname = \"c\"\n",
            kit.bin.to_string_lossy(),
            extra.join(", ")
        ),
    )
    .unwrap();
    let batch = run_batch(&kit, &file, &batch_dir);
    let report = std::fs::read_to_string(batch_dir.join("batch.json")).unwrap_or_default();
    let why = format!(
        "batch exited {}\n{}\n--- batch.json:\n{report}",
        batch.code, batch.stderr
    );
    assert_eq!(batch.code, 7, "{why}");
    let b = json(&batch_dir.join("batch.json"));
    let verdicts: Vec<&str> = b["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["verdict"].as_str().unwrap_or("null"))
        .collect();
    assert_eq!(
        verdicts,
        ["succeeded", "budget_exceeded", "budget_exceeded"],
        "{why}"
    );
    assert!(
        b["runs"][2]["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("not started: batch cost budget $")),
        "{why}"
    );
    assert_eq!(b["never_ran"], serde_json::json!(["c"]), "{why}");
    assert!(
        close(b["budgets"][0]["reached"].as_f64().unwrap(), 2.0 * cost),
        "{why}"
    );
    let second = &b["runs"][1]["session"];
    assert_eq!(second["budget_exceeded"]["scope"], "batch", "{why}");
}

fn run_batch(kit: &Kit, file: &Path, dir: &Path) -> Finished {
    let start = Instant::now();
    let file = file.to_string_lossy().into_owned();
    let dir_s = dir.to_string_lossy().into_owned();
    let mut cmd = kit
        .case
        .command(&["batch", &file, "-j", "1", "--dir", &dir_s]);
    for (k, v) in &kit.env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run warden batch");
    kit.case.finished(out, start)
}

/// Codex reports no cost: a cost budget could never fire, and is refused
/// before anything starts, naming the agent and what to use instead.
#[test]
fn a_cost_budget_for_a_cli_that_reports_no_cost_is_refused() {
    let Some(kit) = Kit::new("codex", Vec::new()) else {
        return;
    };
    let done = kit.run("say done", &["--max-cost", "1"]);
    assert_eq!(done.code, 2, "{}", done.stderr);
    assert!(
        done.stderr.contains("--max-cost: `codex` reports no cost")
            && done.stderr.contains("--max-tokens"),
        "{}",
        done.stderr
    );
    assert!(!done.run_dir.exists(), "nothing started");
    assert!(kit.server.requests().is_empty(), "the CLI was not started");
    // A token budget is fine: Codex reports its tokens.
    let done = kit.run(
        "say done",
        &["--max-tokens", "1000000", "--timeout", "120s"],
    );
    assert_eq!(done.verdict(), "succeeded", "{}", done.stderr);
}

/// Two pi runs at once share a batch budget of $0.35 ($0.11 a call). The
/// run whose first call comes first sleeps in its tool; the other makes
/// three calls, the last of which takes the two past the budget (neither
/// alone ever passes it): both are ended then, the one asleep as well,
/// woken by the other's spending.
#[test]
fn runs_running_at_once_hold_the_batch_budget_together() {
    let mut script = vec![
        Turn::Shell("sleep 32.437; echo late".into()),
        Turn::Shell("echo two".into()),
        Turn::Shell("echo three".into()),
    ];
    script.extend((0..4).map(|_| Turn::Shell("sleep 34.457; echo late".into())));
    let Some(kit) = priced_pi(script) else {
        return;
    };
    let base = kit.case.path().to_path_buf();
    let file = base.join("runs.toml");
    let extra: Vec<String> = kit.extra.iter().map(|a| format!("{a:?}")).collect();
    std::fs::write(
        &file,
        format!(
            "[defaults]\nagent = \"pi\"\nagent_bin = {:?}\nmodel = \"fake-model\"\nextra_args = [{}]\nprompt = \"run commands\"\nkill_grace = \"2s\"\n\n[budget]\nmax_cost = 0.35\n\n[[run]]\nname = \"a\"\n\n[[run]]\nname = \"b\"\n",
            kit.bin.to_string_lossy(),
            extra.join(", ")
        ),
    )
    .unwrap();
    let start = Instant::now();
    let batch_dir = base.join("batch");
    let mut cmd = kit.case.command(&[
        "batch",
        file.to_str().unwrap(),
        "-j",
        "2",
        "--dir",
        batch_dir.to_str().unwrap(),
    ]);
    for (k, v) in &kit.env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run warden batch");
    let batch = kit.case.finished(out, start);
    let report = std::fs::read_to_string(batch_dir.join("batch.json")).unwrap_or_default();
    let why = format!(
        "batch exited {} after {:?}\n{}\n--- batch.json:\n{report}",
        batch.code, batch.elapsed, batch.stderr
    );
    assert_eq!(batch.code, 7, "{why}");
    assert!(
        batch.elapsed < Duration::from_secs(28),
        "the runs were not ended when the batch passed its budget\n{why}"
    );
    let b = json(&batch_dir.join("batch.json"));
    let mut calls = Vec::new();
    for run in b["runs"].as_array().unwrap() {
        assert_eq!(run["verdict"], "budget_exceeded", "{why}");
        let exceeded = &run["session"]["budget_exceeded"];
        assert_eq!(exceeded["scope"], "batch", "{why}");
        assert!(
            exceeded["reached"].as_f64().unwrap() > 0.35,
            "{exceeded}\n{why}"
        );
        let cost = run["session"]["cost_usd"].as_f64().unwrap();
        let made = (cost / PI_CALL_USD).round();
        assert!(close(cost, made * PI_CALL_USD), "${cost}\n{why}");
        calls.push(made as u64);
    }
    // Neither run alone came near the budget: one was ended after its
    // first call, the other at its third (each may be priced for one more
    // answer while it stops, as in the single run above).
    calls.sort_unstable();
    assert!(
        matches!(calls[..], [1 | 2, 3 | 4]),
        "calls made by each run: {calls:?}\n{why}"
    );
    assert!(b["budgets"][0]["reached"].as_f64().unwrap() > 0.35, "{why}");
    let mut left = kit.leftovers("sleep 32.437");
    left.extend(kit.leftovers("sleep 34.457"));
    assert!(left.is_empty(), "left running: {left:?}");
}

/// OpenCode prices each step (a model call and the tools it ran) when the
/// step ends: a cost budget ends its run at the end of the step that
/// passes it, before the next one's tool can run on.
#[test]
fn opencode_is_ended_after_the_step_that_passes_its_cost_budget() {
    let script = vec![
        Turn::Shell("echo one".into()),
        // Apart, as in `three_calls`: a step is priced when its tool ends.
        Turn::Shell("sleep 0.5; echo two".into()),
        Turn::Shell("sleep 0.5; echo three".into()),
        Turn::Shell("sleep 35.467; echo late".into()),
        Turn::Text("done".into()),
    ];
    let Some(mut kit) = Kit::with_usage("opencode", |_| script, PI_USAGE) else {
        return;
    };
    let url = kit.server.url();
    kit.env.retain(|(k, _)| k != "OPENCODE_CONFIG_CONTENT");
    kit.env.push((
        "OPENCODE_CONFIG_CONTENT".into(),
        format!(
            r#"{{"provider":{{"fake":{{"npm":"@ai-sdk/openai-compatible","name":"Fake","options":{{"baseURL":"{url}/v1","apiKey":"fake"}},"models":{{"fake-model":{{"name":"Fake","cost":{{"input":100,"output":100}}}}}}}}}},"model":"fake/fake-model","autoupdate":false,"share":"disabled","permission":{{"bash":"allow","edit":"allow","external_directory":"allow"}}}}"#
        ),
    ));
    let done = kit.run(
        "run four commands",
        &[
            "--max-cost",
            "0.25",
            "--kill-grace",
            "2s",
            "--timeout",
            "150s",
        ],
    );
    let why = explain(&kit, &done, &done.run_dir);
    assert_eq!(done.code, 7, "{why}");
    assert_eq!(done.verdict(), "budget_exceeded", "{why}");
    assert!(done.elapsed < Duration::from_secs(30), "{why}");
    // OpenCode prices the step it was in when stopped (its tool killed)
    // when that step ends, and may make one more call.
    ended_at_a_call_past(&done.report(), 3, 2, &why);
    assert_eq!(events_of(&done.run_dir, "budget_warning").len(), 1, "{why}");
    let left = kit.leftovers("sleep 35.467");
    assert!(left.is_empty(), "left running: {left:?}");
}

/// Claude Code reports the tokens of each message as it comes: a token
/// budget ends its run at the message that passes it, while the tool runs
/// (its cost, by contrast, comes only at the end).
#[test]
fn claude_is_ended_at_the_message_that_passes_its_token_budget() {
    let script = vec![
        Turn::Shell("echo one".into()),
        // Apart, as in `three_calls`.
        Turn::Shell("sleep 0.5; echo two".into()),
        Turn::Shell("sleep 36.477; echo three".into()),
        Turn::Text("done".into()),
    ];
    // 1100 tokens a call: 2200 after two (88% of 2500), 3300 after three.
    let Some(kit) = Kit::with_usage("claude", |_| script, PI_USAGE) else {
        return;
    };
    let done = kit.run(
        "run three commands",
        &[
            "--max-tokens",
            "2500",
            "--kill-grace",
            "2s",
            "--timeout",
            "120s",
        ],
    );
    let why = explain(&kit, &done, &done.run_dir);
    assert_eq!(done.code, 7, "{why}");
    assert_eq!(done.verdict(), "budget_exceeded", "{why}");
    assert!(done.elapsed < Duration::from_secs(30), "{why}");
    let r = done.report();
    // Claude Code reports a message's usage in two lines, the prompt's
    // (with one output token) and then the output's: the budget is passed
    // at the third message's first (3201), and the run may end before its
    // second (3300) is read, or a fourth message may be made while it
    // stops (4301, 4400).
    let tokens = ms(&r["tokens"]["total"]);
    assert!(
        [3201, 3300, 4301, 4400].contains(&tokens),
        "{tokens}\n{why}"
    );
    assert_eq!(
        r["reason"],
        format!("run token budget 2500 exceeded: {tokens} tokens; the run was ended"),
        "{why}"
    );
    let warnings = events_of(&done.run_dir, "budget_warning");
    assert_eq!(warnings.len(), 1, "{why}");
    // Claude Code streams a message's usage in parts (the prompt first):
    // 80% is reached within the second message.
    let reached = warnings[0]["reached"].as_f64().unwrap();
    assert!((2000.0..=2200.0).contains(&reached), "{reached}\n{why}");
    let left = kit.leftovers("sleep 36.477");
    assert!(left.is_empty(), "left running: {left:?}");
}

/// Codex and Gemini CLI report their tokens only when the run ends
/// (Codex's `turn.completed`, Gemini's final `result`): a token budget
/// cannot stop them mid-way. warden says so at the start, naming
/// `--max-turns`, which does stop them. A run ended by `--timeout` before
/// the CLI reported its usage: Gemini CLI's has tokens `null` (not
/// known), not 0; Codex's has what Codex recorded in its session file by
/// then (at least the first call's 29).
///
/// The third call's tool ignores SIGTERM and SIGINT, so only warden's
/// SIGKILL after the grace ends it, with the CLI: the CLI cannot send its
/// failure and be answered while it stops, and the counts are those of
/// three calls.
fn tokens_only_at_the_end(agent: &'static str, sleep: &str, timeout: &str) {
    let script = |_: &Path| {
        vec![
            Turn::Shell("echo one".into()),
            Turn::Shell("echo two".into()),
            Turn::Shell(format!("trap '' TERM INT; sleep {sleep}; echo three")),
            Turn::Text("done".into()),
        ]
    };
    let Some(kit) = Kit::with(agent, script) else {
        return;
    };
    let done = kit.run(
        "run three commands",
        &[
            "--max-tokens",
            "50",
            "--kill-grace",
            "1s",
            "--timeout",
            timeout,
        ],
    );
    let why = explain(&kit, &done, &done.run_dir);
    assert!(
        done.stderr.contains(&format!(
            "--max-tokens: `{agent}` reports its tokens only when its run ends"
        )) && done.stderr.contains("--max-turns stops it mid-way"),
        "warned at the start\n{why}"
    );
    assert_eq!(done.verdict(), "timed_out", "{why}");
    assert_eq!(done.code, 5, "{why}");
    let r = done.report();
    assert_eq!(r["turns"], 3, "{why}");
    if agent == "codex" {
        let total = r["tokens"]["total"].as_u64();
        assert!(
            total.is_some_and(|t| t >= 29 && t % 29 == 0),
            "tokens.total {total:?}: Codex's record of its calls\n{why}"
        );
    } else {
        for count in ["input", "output", "total"] {
            assert!(
                r["tokens"][count].is_null(),
                "tokens.{count}: not known, not 0\n{why}"
            );
        }
        assert!(
            done.stderr.contains("tokens ? in / ? out"),
            "the summary line says not known\n{why}"
        );
    }
    let left = kit.leftovers(sleep);
    assert!(left.is_empty(), "left running: {left:?}");

    // `--max-turns` stops it at the third model call, while its tool runs.
    let Some(kit) = Kit::with(agent, script) else {
        return;
    };
    let done = kit.run(
        "run three commands",
        &[
            "--max-tokens",
            "50",
            "--max-turns",
            "2",
            "--kill-grace",
            "2s",
            "--timeout",
            "120s",
        ],
    );
    let why = explain(&kit, &done, &done.run_dir);
    assert_eq!(done.code, 7, "{why}");
    // Three calls: the tool ignores SIGTERM, as above.
    assert_eq!(
        done.report()["reason"],
        "run turn budget 2 exceeded: 3 turns; the run was ended",
        "{why}"
    );
    assert!(done.elapsed < Duration::from_secs(25), "{why}");
    let left = kit.leftovers(sleep);
    assert!(left.is_empty(), "left running: {left:?}");
}

#[test]
fn codex_is_warned_that_a_token_budget_waits_for_its_end() {
    // Codex ends a tool call itself 10 s after it started: the run's
    // timeout comes first.
    tokens_only_at_the_end("codex", "37.613", "9s");
}

#[test]
fn gemini_is_warned_that_a_token_budget_waits_for_its_end() {
    tokens_only_at_the_end("gemini", "38.721", "15s");
}
