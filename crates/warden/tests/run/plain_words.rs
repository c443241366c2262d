//! What warden's own lines say is what happened: a budget warning names
//! the share reached, the summary line (live and in `warden report`)
//! stays one line, and a replay claims no verdict the recording does
//! not show.

use crate::support::*;

/// A stand-in pi that takes three turns, each a model call of $0.01.
fn three_turn_pi(case: &Case) -> String {
    let bin = case.path().join("fake-pi");
    let turn = r#"echo '{"type":"turn_start"}'
echo '{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"step"}],"stopReason":"toolUse","usage":{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"cost":{"total":0.01}}}}'
echo '{"type":"turn_end"}'
"#;
    write_script(
        &bin,
        &format!(
            "#!/bin/sh\ncat > /dev/null\n{}echo '{{\"type\":\"agent_end\",\"messages\":[]}}'\n",
            turn.repeat(3)
        ),
    );
    bin.to_string_lossy().into_owned()
}

#[test]
fn a_budget_warning_first_given_at_the_limit_says_100_percent() {
    let case = Case::new();
    let bin = three_turn_pi(&case);
    // 80% of 3 turns is 2.4: the first whole count past it is 3.
    let done = case.run(&[
        "run",
        "pi",
        "do it",
        "--agent-bin",
        &bin,
        "--max-turns",
        "3",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(
        done.stderr
            .contains("warning: 100% of the run turn budget 3 used: 3 turns"),
        "{}",
        done.stderr
    );
    assert!(!done.stderr.contains("80%"), "{}", done.stderr);
}

#[test]
fn a_multi_line_error_leaves_the_summary_line_one_line() {
    let case = Case::new();
    let bin = case.path().join("fake-pi");
    // A model call that failed with a three-line message, then pi gives up.
    write_script(
        &bin,
        r#"#!/bin/sh
cat > /dev/null
printf '%s\n' '{"type":"agent_start"}' '{"type":"turn_start"}' '{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"400 Bad Request\nline two\r\nline three\n"}}'
exit 1
"#,
    );
    let done = case.run(&["run", "pi", "do it", "--agent-bin", bin.to_str().unwrap()]);
    assert_eq!(done.code, 1, "{}", done.stderr);
    let summary: Vec<&str> = done
        .stderr
        .lines()
        .filter(|l| l.starts_with("warden: agent_failed in "))
        .collect();
    assert_eq!(summary.len(), 1, "{}", done.stderr);
    assert!(
        summary[0].contains(": 400 Bad Request \u{23ce} line two \u{23ce} line three; 0 turn(s)"),
        "{}",
        done.stderr
    );
    // The whole text, line breaks and all, is in the report.
    let reason = done.report()["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        reason.contains("400 Bad Request\nline two\r\nline three"),
        "{reason}"
    );
    // `warden report` says it on one line too.
    let out = case
        .command(&["report", done.run_dir.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let runs: Vec<&str> = text.lines().filter(|l| l.starts_with("run ")).collect();
    assert_eq!(runs.len(), 1, "{text}");
    assert!(
        runs[0].ends_with(": 400 Bad Request \u{23ce} line two \u{23ce} line three"),
        "{text}"
    );
    assert!(
        text.contains("  error at ") && text.contains(": 400 Bad Request \u{23ce} line two"),
        "{text}"
    );
    assert!(!text.lines().any(|l| l.starts_with("line")), "{text}");
}

#[test]
fn a_replay_of_a_command_that_stalled_says_stalled_not_succeeded() {
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--stall-timeout",
        "300ms",
        "--startup-timeout",
        "300ms",
        "--",
        "sh",
        "-c",
        "echo hi; sleep 5",
    ]);
    assert_eq!(done.verdict(), "stalled", "{}", done.stderr);
    let log = done.run_dir.join("stdout.log");
    let out = case
        .command(&["replay", "exec", log.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("outcome: stalled (the run's run.json)"),
        "{text}"
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
    let out = case
        .command(&["replay", "exec", log.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    // The summary: the last line of stderr.
    let text = String::from_utf8_lossy(&out.stderr);
    let summary: serde_json::Value =
        serde_json::from_str(text.lines().last().expect("a summary line")).unwrap();
    assert_eq!(summary["outcome"], "stalled", "{text}");

    // The same lines away from their run: the stream alone does not say.
    let alone = case.path().join("alone.log");
    std::fs::copy(&log, &alone).unwrap();
    let out = case
        .command(&["replay", "exec", alone.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("outcome: unknown ("), "{text}");
    assert!(!text.contains("succeeded"), "{text}");
    assert_eq!(out.status.code(), Some(0), "{text}");
}
