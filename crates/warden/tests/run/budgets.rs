//! Budgets that need no real CLI: what is refused before anything starts,
//! and a session that starts no run once nothing is left of its budget
//! (a stand-in pi that prices each run at exactly $0.50). The budgets the
//! real CLIs pass are in `tests/real_agents/budgets.rs`.

use serde_json::Value;

use crate::support::Case;

#[test]
fn exec_refuses_every_budget_since_its_output_says_nothing_of_spending() {
    let case = Case::new();
    for flag in [
        "--max-cost",
        "--max-tokens",
        "--max-turns",
        "--session-max-turns",
    ] {
        let done = case.run(&["run", "exec", flag, "5", "--", "true"]);
        assert_eq!(done.code, 2, "{flag}: {}", done.stderr);
        assert!(
            done.stderr
                .contains(&format!("{flag}: `exec` runs a command"))
                && done.stderr.contains("--timeout"),
            "{flag}: {}",
            done.stderr
        );
        assert!(!case.run_dir().exists(), "{flag}: nothing started");
    }
}

#[test]
fn bad_budget_values_are_refused_naming_where_they_came_from() {
    let case = Case::new();
    let done = case.run(&["run", "exec", "--max-cost", "free", "--", "true"]);
    assert_eq!(done.code, 2);
    assert!(
        done.stderr.contains("--max-cost") && done.stderr.contains("`0.50`"),
        "{}",
        done.stderr
    );
    std::fs::write(case.path().join("warden.toml"), "max_turns = 0\n").unwrap();
    let done = case.run(&["run", "exec", "--", "true"]);
    assert_eq!(done.code, 2);
    assert!(
        done.stderr.contains("`max_turns` in") && done.stderr.contains("at least 1"),
        "{}",
        done.stderr
    );
    std::fs::remove_file(case.path().join("warden.toml")).unwrap();
    for (table, needle) in [
        (
            "[budget]\nmax_cost = -1\n",
            "`max_cost` must be a sum of US dollars",
        ),
        (
            "[budget]\nmax_turns = 2.5\n",
            "`max_turns` must be a whole number",
        ),
        ("[budget]\nmax_money = 1\n", "unknown key `max_money`"),
    ] {
        let file = crate::batch::write(
            &case,
            &format!("{table}\n[[run]]\nagent = \"exec\"\ncommand = [\"true\"]\n"),
        );
        let done = case.run(&["batch", &file]);
        assert_eq!(done.code, 2, "{table}: {}", done.stderr);
        assert!(done.stderr.contains(needle), "{table}: {}", done.stderr);
    }
}

/// A stand-in pi whose one model call costs exactly $0.50.
fn half_dollar_pi(case: &Case) -> String {
    let bin = case.path().join("fake-pi");
    let lines = [
        r#"{"type":"agent_start"}"#,
        r#"{"type":"turn_start"}"#,
        r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"done"}],"stopReason":"stop","usage":{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"cost":{"total":0.5}}}}"#,
        r#"{"type":"agent_end","messages":[]}"#,
    ];
    let body: String = lines.iter().map(|l| format!("echo '{l}'\n")).collect();
    crate::support::write_script(&bin, &format!("#!/bin/sh\ncat > /dev/null\n{body}"));
    bin.to_string_lossy().into_owned()
}

#[test]
fn a_session_starts_no_run_once_nothing_is_left_of_its_budget() {
    let case = Case::new();
    let bin = half_dollar_pi(&case);
    let done = case.run(&[
        "run",
        "pi",
        "do it",
        "--agent-bin",
        &bin,
        "--iterations",
        "5",
        "--session-max-cost",
        "1",
    ]);
    let text = std::fs::read_to_string(case.run_dir().join("session.json")).unwrap_or_default();
    let why = format!(
        "exit {}\n{}\n--- session.json:\n{text}",
        done.code, done.stderr
    );
    assert_eq!(done.code, 7, "{why}");
    let s: Value = serde_json::from_str(&text).expect("session.json");
    // $0.50 and $1.00 are within $1.00: both runs succeed; then nothing
    // is left, and a third would pass it at its first call.
    assert_eq!(s["iterations_run"], 2, "{why}");
    assert_eq!(s["runs"][1]["verdict"], "succeeded", "{why}");
    assert_eq!(s["stopped_because"], "budget_exceeded", "{why}");
    assert_eq!(s["verdict"], "budget_exceeded", "{why}");
    assert_eq!(s["turns"], 2, "{why}");
    assert_eq!(
        s["error"], "no further run started: session cost budget $1.00 used up: $1.00 spent",
        "{why}"
    );
    // The second run began with $0.50 spent: its call passed 80% and reached 100%.
    let second: Value = serde_json::from_str(
        &std::fs::read_to_string(case.run_dir().join("iteration-2/run.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(second["budgets"][0]["spent_before"], 0.5, "{second}");
    assert_eq!(second["budgets"][0]["reached"], 1.0, "{second}");
    assert!(
        done.stderr
            .contains("warning: 100% of the session cost budget $1.00 used: $1.00 spent"),
        "{why}"
    );
}

/// A stand-in pi whose one model call costs `cost`; the first `stalls`
/// times it runs (counted in a file of the case) it then hangs.
fn pi_that_spends_then_stalls(case: &Case, cost: &str, stalls: u32) -> String {
    let bin = case.path().join("fake-pi-stalls");
    let count = case.path().join("count");
    let call = format!(
        r#"{{"type":"message_end","message":{{"role":"assistant","content":[{{"type":"text","text":"done"}}],"stopReason":"stop","usage":{{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"cost":{{"total":{cost}}}}}}}}}"#
    );
    let script = format!(
        "#!/bin/sh\ncat > /dev/null\n\
         n=$(cat '{c}' 2>/dev/null || echo 0); echo $((n+1)) > '{c}'\n\
         echo '{{\"type\":\"agent_start\"}}'\n\
         echo '{{\"type\":\"turn_start\"}}'\n\
         echo '{call}'\n\
         if [ $n -lt {stalls} ]; then exec sleep 30; fi\n\
         echo '{{\"type\":\"agent_end\",\"messages\":[]}}'\n",
        c = count.display()
    );
    crate::support::write_script(&bin, &script);
    bin.to_string_lossy().into_owned()
}

#[test]
fn a_run_that_used_up_the_session_budget_is_not_retried_nor_waited_for() {
    let case = Case::new();
    let bin = pi_that_spends_then_stalls(&case, "0.4", 1);
    let done = case.run(&[
        "run",
        "pi",
        "do it",
        "--agent-bin",
        &bin,
        "--session-max-cost",
        "0.4",
        "--retries",
        "2",
        "--retry-on",
        "stalled",
        "--retry-backoff",
        "2s",
        "--stall-timeout",
        "300ms",
        "--kill-grace",
        "200ms",
    ]);
    let text = std::fs::read_to_string(case.run_dir().join("session.json")).unwrap_or_default();
    let why = format!(
        "exit {}\n{}\n--- session.json:\n{text}",
        done.code, done.stderr
    );
    assert_eq!(done.code, 7, "{why}");
    assert!(!done.stderr.contains("retrying in"), "{why}");
    let s: Value = serde_json::from_str(&text).expect("session.json");
    let runs = s["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{why}");
    assert_eq!(runs[0]["verdict"], "stalled", "{why}");
    assert_eq!(runs[0]["retried_because"], Value::Null, "{why}");
    assert_eq!(runs[0]["retry_delay_ms"], Value::Null, "{why}");
    assert_eq!(s["stopped_because"], "budget_exceeded", "{why}");
    assert_eq!(
        s["error"], "no further run started: session cost budget $0.40 used up: $0.40 spent",
        "{why}"
    );
}

#[test]
fn a_retry_counts_what_the_attempts_before_it_spent_against_the_run_budget() {
    let case = Case::new();
    let bin = pi_that_spends_then_stalls(&case, "0.4", 1);
    let done = case.run(&[
        "run",
        "pi",
        "do it",
        "--agent-bin",
        &bin,
        "--max-cost",
        "0.5",
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
    ]);
    let text = std::fs::read_to_string(case.run_dir().join("session.json")).unwrap_or_default();
    let why = format!(
        "exit {}\n{}\n--- session.json:\n{text}",
        done.code, done.stderr
    );
    // $0.40 by the stalled attempt, $0.40 by the retry: $0.80 for the
    // one run, past its $0.50.
    assert_eq!(done.code, 7, "{why}");
    let s: Value = serde_json::from_str(&text).expect("session.json");
    let runs = s["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{why}");
    assert_eq!(runs[0]["retried_because"], "stalled", "{why}");
    assert_eq!(runs[1]["verdict"], "budget_exceeded", "{why}");
    let second: Value = serde_json::from_str(
        &std::fs::read_to_string(case.run_dir().join("iteration-1-attempt-2/run.json")).unwrap(),
    )
    .unwrap();
    let line = &second["budget_exceeded"];
    assert_eq!(line["scope"], "run", "{second}");
    assert_eq!(line["spent_before"], 0.4, "{second}");
    assert_eq!(line["reached"], 0.8, "{second}");
}

#[test]
fn a_run_that_is_done_is_not_made_over_budget_by_what_another_spends_after() {
    let case = Case::new();
    // `done` spends $0.10 and ends; while it exits (a line on stderr,
    // no spending) `big` passes the batch's $0.50 on its own. `big` waits
    // until warden has written `done`'s end, whenever each starts.
    let dir = case.path().join("batch");
    let ended = dir.join("done/iteration-1/events.jsonl");
    let done_bin = case.path().join("fake-pi-done");
    crate::support::write_script(
        &done_bin,
        "#!/bin/sh\ncat > /dev/null\n\
         echo '{\"type\":\"agent_start\"}'\n\
         echo '{\"type\":\"turn_start\"}'\n\
         echo '{\"type\":\"message_end\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"done\"}],\"stopReason\":\"stop\",\"usage\":{\"input\":10,\"output\":5,\"cacheRead\":0,\"cacheWrite\":0,\"cost\":{\"total\":0.1}}}}'\n\
         echo '{\"type\":\"agent_end\",\"messages\":[]}'\n\
         sleep 2\necho 'saving the session' >&2\n",
    );
    let big_bin = case.path().join("fake-pi-big");
    crate::support::write_script(
        &big_bin,
        &format!(
            "#!/bin/sh\ncat > /dev/null\n\
         i=0; until grep -qs '\"kind\":\"result\"' '{ended}' || [ $i -ge 300 ]; do sleep 0.05; i=$((i+1)); done\n\
         echo '{{\"type\":\"agent_start\"}}'\n\
         echo '{{\"type\":\"turn_start\"}}'\n\
         echo '{{\"type\":\"message_end\",\"message\":{{\"role\":\"assistant\",\"content\":[{{\"type\":\"text\",\"text\":\"done\"}}],\"stopReason\":\"stop\",\"usage\":{{\"input\":10,\"output\":5,\"cacheRead\":0,\"cacheWrite\":0,\"cost\":{{\"total\":1.0}}}}}}}}'\n\
         sleep 5\n",
            ended = ended.display()
        ),
    );
    let file = crate::batch::write(
        &case,
        &format!(
            "[budget]\nmax_cost = 0.5\n\n\
             [[run]]\nname = \"done\"\nagent = \"pi\"\nprompt = \"x\"\nagent_bin = {:?}\n\n\
             [[run]]\nname = \"big\"\nagent = \"pi\"\nprompt = \"x\"\nagent_bin = {:?}\n",
            done_bin.display().to_string(),
            big_bin.display().to_string()
        ),
    );
    let out = case.run(&["batch", &file, "-j", "2", "--dir", dir.to_str().unwrap()]);
    let text = std::fs::read_to_string(dir.join("batch.json")).unwrap_or_default();
    let why = format!("exit {}\n{}\n--- batch.json:\n{text}", out.code, out.stderr);
    let b: Value = serde_json::from_str(&text).expect("batch.json");
    let verdict = |name: &str| {
        b["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .map(|r| r["verdict"].clone())
    };
    assert_eq!(verdict("big"), Some("budget_exceeded".into()), "{why}");
    assert_eq!(verdict("done"), Some("succeeded".into()), "{why}");
}

#[test]
fn a_resumed_batch_counts_what_the_attempts_it_runs_again_spent() {
    let case = Case::new();
    // Spends $0.60 and fails.
    let bin = case.path().join("fake-pi-fails");
    crate::support::write_script(
        &bin,
        "#!/bin/sh\ncat > /dev/null\n\
         echo '{\"type\":\"agent_start\"}'\n\
         echo '{\"type\":\"turn_start\"}'\n\
         echo '{\"type\":\"message_end\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"hm\"}],\"stopReason\":\"stop\",\"usage\":{\"input\":10,\"output\":5,\"cacheRead\":0,\"cacheWrite\":0,\"cost\":{\"total\":0.6}}}}'\n\
         exit 1\n",
    );
    let file = crate::batch::write(
        &case,
        &format!(
            "[budget]\nmax_cost = 1\n\n\
             [[run]]\nname = \"a\"\nagent = \"pi\"\nprompt = \"x\"\nagent_bin = {:?}\n",
            bin.display().to_string()
        ),
    );
    let dir = case.path().join("batch");
    let first = case.run(&["batch", &file, "--dir", dir.to_str().unwrap()]);
    assert_eq!(first.code, 1, "{}", first.stderr);
    let again = case.run(&["batch", "--resume", dir.to_str().unwrap(), "--rerun-failed"]);
    let text = std::fs::read_to_string(dir.join("batch.json")).unwrap_or_default();
    let why = format!(
        "exit {}\n{}\n--- batch.json:\n{text}",
        again.code, again.stderr
    );
    // $0.60 before, $0.60 again: past the batch's $1.00.
    assert_eq!(again.code, 7, "{why}");
    let b: Value = serde_json::from_str(&text).expect("batch.json");
    assert_eq!(b["runs"][0]["verdict"], "budget_exceeded", "{why}");
    assert_eq!(b["budgets"][0]["reached"], 1.2, "{why}");
    let run: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("a/iteration-1/run.json")).unwrap())
            .unwrap();
    assert_eq!(run["budgets"][0]["spent_before"], 0.6, "{run}");
}

#[test]
fn a_batch_cost_budget_for_claude_code_warns_that_it_ends_no_run_mid_way() {
    let case = Case::new();
    let bin = case.path().join("fake-claude");
    crate::support::write_script(&bin, "#!/bin/sh\ncat > /dev/null\nexit 0\n");
    let file = crate::batch::write(
        &case,
        &format!(
            "[budget]\nmax_cost = 1\n\n\
             [[run]]\nname = \"c\"\nagent = \"claude\"\nprompt = \"x\"\nagent_bin = {:?}\n",
            bin.display().to_string()
        ),
    );
    let dir = case.path().join("batch");
    let done = case.run(&["batch", &file, "--dir", dir.to_str().unwrap()]);
    assert!(
        done.stderr.contains(
            "warden: warning: run `c`: the batch's `max_cost`: `claude` reports its cost only in its last line"
        ),
        "exit {}\n{}",
        done.code,
        done.stderr
    );
}

#[test]
fn runs_holding_a_batch_budget_together_warn_of_its_80_percent_once() {
    let case = Case::new();
    let call = "{\"type\":\"message_end\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"done\"}],\"stopReason\":\"stop\",\"usage\":{\"input\":10,\"output\":5,\"cacheRead\":0,\"cacheWrite\":0,\"cost\":{\"total\":0.45}}}}";
    // Each spends $0.45 of the batch's $1.00, `b` half a second after
    // `a`, both still running when the two together pass 80%.
    let script = |name: &str, before: &str, after: &str| {
        let bin = case.path().join(name);
        crate::support::write_script(
            &bin,
            &format!(
                "#!/bin/sh\ncat > /dev/null\nsleep {before}\n\
                 echo '{{\"type\":\"agent_start\"}}'\necho '{{\"type\":\"turn_start\"}}'\n\
                 echo '{call}'\nsleep {after}\necho '{{\"type\":\"agent_end\",\"messages\":[]}}'\n"
            ),
        );
        bin.display().to_string()
    };
    let (a, b) = (script("pi-a", "0", "2"), script("pi-b", "0.5", "1"));
    let file = crate::batch::write(
        &case,
        &format!(
            "[budget]\nmax_cost = 1\n\n\
             [[run]]\nname = \"a\"\nagent = \"pi\"\nprompt = \"x\"\nagent_bin = {a:?}\n\n\
             [[run]]\nname = \"b\"\nagent = \"pi\"\nprompt = \"x\"\nagent_bin = {b:?}\n"
        ),
    );
    let dir = case.path().join("batch");
    let done = case.run(&["batch", &file, "-j", "2", "--dir", dir.to_str().unwrap()]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let warnings = done
        .stderr
        .matches("warning: 90% of the batch cost budget $1.00 used")
        .count();
    assert_eq!(warnings, 1, "{}", done.stderr);
}

/// A stand-in pi that writes `calls` (each the `usage` of one model call)
/// and its end in one write, so that warden reads them at once.
fn pi_with_usages(case: &Case, name: &str, usages: &[&str]) -> String {
    let bin = case.path().join(name);
    let mut lines = vec![r#"{"type":"agent_start"}"#.to_string()];
    for u in usages {
        lines.push(format!(
            r#"{{"type":"message_end","message":{{"role":"assistant","content":[{{"type":"text","text":"done"}}],"stopReason":"stop","usage":{u}}}}}"#
        ));
    }
    lines.push(r#"{"type":"agent_end","messages":[]}"#.to_string());
    let text = lines.join("\n") + "\n";
    let file = case.path().join(format!("{name}.jsonl"));
    std::fs::write(&file, text).unwrap();
    crate::support::write_script(
        &bin,
        &format!("#!/bin/sh\ncat > /dev/null\ncat '{}'\n", file.display()),
    );
    bin.to_string_lossy().into_owned()
}

const HONEST_DOLLAR: &str =
    r#"{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"cost":{"total":1.0}}"#;
const FORGED_REFUND: &str =
    r#"{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"cost":{"total":-100}}"#;

/// The `usage_ignored` events of a run's events.jsonl.
fn ignored_usage(run_dir: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(run_dir.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["kind"] == "usage_ignored")
        .collect()
}

#[test]
fn a_negative_cost_gives_no_spending_back_and_the_run_ends_over_budget() {
    let case = Case::new();
    let bin = pi_with_usages(&case, "fake-pi-refund", &[HONEST_DOLLAR, FORGED_REFUND]);
    let done = case.run(&[
        "run",
        "pi",
        "do it",
        "--agent-bin",
        &bin,
        "--max-cost",
        "0.50",
    ]);
    let text = std::fs::read_to_string(case.run_dir().join("run.json")).unwrap_or_default();
    let why = format!("exit {}\n{}\n--- run.json:\n{text}", done.code, done.stderr);
    assert_eq!(done.code, 7, "{why}");
    let r: Value = serde_json::from_str(&text).expect("run.json");
    assert_eq!(r["verdict"], "budget_exceeded", "{why}");
    assert_eq!(r["cost_usd"], 1.0, "{why}");
    assert_eq!(r["budget_exceeded"]["reached"], 1.0, "{why}");
    let ignored = ignored_usage(&case.run_dir());
    assert_eq!(ignored.len(), 1, "{ignored:?}");
    assert_eq!(ignored[0]["line"], 3, "{ignored:?}");
    assert_eq!(
        ignored[0]["field"], "message.usage.cost.total",
        "{ignored:?}"
    );
    assert_eq!(ignored[0]["value"], "-100", "{ignored:?}");
    assert_eq!(ignored[0]["problem"], "negative", "{ignored:?}");
    assert!(
        done.stderr.contains(
            "warden: warning: not counted: `message.usage.cost.total` -100 on line 3 of stdout.log is negative"
        ),
        "{why}"
    );
}

#[test]
fn a_negative_cost_gives_a_batch_budget_nothing_back() {
    let case = Case::new();
    let honest_half =
        r#"{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"cost":{"total":0.5}}"#;
    let bin = pi_with_usages(&case, "fake-pi-batch", &[honest_half, FORGED_REFUND]);
    let file = crate::batch::write(
        &case,
        &format!(
            "[budget]\nmax_cost = 2.5\n\n\
             [[run]]\nname = \"a\"\nagent = \"pi\"\nprompt = \"x\"\nagent_bin = {bin:?}\n\n\
             [[run]]\nname = \"b\"\nagent = \"pi\"\nprompt = \"x\"\nagent_bin = {bin:?}\n"
        ),
    );
    let dir = case.path().join("batch");
    let done = case.run(&["batch", &file, "--dir", dir.to_str().unwrap()]);
    let text = std::fs::read_to_string(dir.join("batch.json")).unwrap_or_default();
    let why = format!(
        "exit {}\n{}\n--- batch.json:\n{text}",
        done.code, done.stderr
    );
    assert_eq!(done.code, 0, "{why}");
    let b: Value = serde_json::from_str(&text).expect("batch.json");
    assert_eq!(b["budgets"][0]["reached"], 1.0, "{why}");
    for run in b["runs"].as_array().unwrap() {
        assert_eq!(run["session"]["cost_usd"], 0.5, "{why}");
        let run_json: Value = serde_json::from_str(
            &std::fs::read_to_string(format!(
                "{}/run.json",
                run["session"]["runs"][0]["run_dir"].as_str().unwrap()
            ))
            .unwrap(),
        )
        .unwrap();
        for line in run_json["budgets"].as_array().unwrap() {
            assert!(
                line["reached"].as_f64().is_some_and(|r| r >= 0.5),
                "{run_json}"
            );
        }
    }
}

#[test]
fn counts_that_are_infinite_or_no_number_are_ignored_with_a_warning() {
    let case = Case::new();
    let bin = pi_with_usages(
        &case,
        "fake-pi-nan",
        &[
            r#"{"input":1e999,"output":"NaN","cacheRead":-7,"cacheWrite":0,"cost":{"total":0.1}}"#,
            r#"{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"cost":{"total":0.1}}"#,
        ],
    );
    let done = case.run(&[
        "run",
        "pi",
        "do it",
        "--agent-bin",
        &bin,
        "--max-tokens",
        "100",
    ]);
    let text = std::fs::read_to_string(case.run_dir().join("run.json")).unwrap_or_default();
    let why = format!("exit {}\n{}\n--- run.json:\n{text}", done.code, done.stderr);
    assert_eq!(done.code, 0, "{why}");
    let r: Value = serde_json::from_str(&text).expect("run.json");
    assert_eq!(r["verdict"], "succeeded", "{why}");
    assert_eq!(r["tokens"]["total"], 15, "{why}");
    assert_eq!(r["turns"], 2, "both lines decoded: {why}");
    let problems: Vec<(String, String)> = ignored_usage(&case.run_dir())
        .iter()
        .map(|e| {
            (
                e["field"].as_str().unwrap().to_string(),
                e["problem"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        problems,
        [
            ("message.usage.input", "infinite"),
            ("message.usage.output", "not_a_number"),
            ("message.usage.cacheRead", "negative"),
        ]
        .map(|(f, p)| (f.to_string(), p.to_string())),
        "{why}"
    );
    for warning in [
        "warden: warning: not counted: `message.usage.input` inf on line 2 of stdout.log is infinite",
        "warden: warning: not counted: `message.usage.output` not a number on line 2 of stdout.log is not a number",
    ] {
        assert!(done.stderr.contains(warning), "{warning}\n{why}");
    }
}

/// A forged running total of zero (a Claude `result` line written into the
/// CLI's stdout by a process of the agent's) after honest messages: what
/// the messages spent stays counted, so the token budget still ends the
/// run. (Before, each zero `result` wiped out the steps before it.)
#[test]
fn a_forged_zero_total_does_not_wipe_out_the_tokens_counted_before_it() {
    let case = Case::new();
    let message = |id: &str| {
        format!(
            r#"{{"type":"assistant","message":{{"id":"{id}","model":"m","role":"assistant","content":[{{"type":"text","text":"x"}}],"usage":{{"input_tokens":500000,"output_tokens":500000}}}}}}"#
        )
    };
    let zero = r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0}}"#;
    let lines = [
        message("m1"),
        zero.to_string(),
        message("m2"),
        zero.to_string(),
    ];
    let stream = case.path().join("forged.jsonl");
    std::fs::write(&stream, lines.join("\n") + "\n").unwrap();
    let bin = case.path().join("fake-claude-zero");
    crate::support::write_script(
        &bin,
        &format!("#!/bin/sh\ncat > /dev/null\ncat '{}'\n", stream.display()),
    );
    let done = case.run(&[
        "run",
        "claude",
        "do it",
        "--agent-bin",
        bin.to_str().unwrap(),
        "--max-tokens",
        "1500000",
    ]);
    let text = std::fs::read_to_string(case.run_dir().join("run.json")).unwrap_or_default();
    let why = format!("exit {}\n{}\n--- run.json:\n{text}", done.code, done.stderr);
    assert_eq!(done.code, 7, "{why}");
    let r: Value = serde_json::from_str(&text).expect("run.json");
    assert_eq!(r["verdict"], "budget_exceeded", "{why}");
    assert!(r["tokens"]["total"].as_u64().unwrap() >= 1_500_000, "{why}");
    let ignored = ignored_usage(&case.run_dir());
    assert!(
        ignored
            .iter()
            .any(|e| e["line"] == 2 && e["problem"] == "went_down"),
        "{ignored:?}"
    );
}
