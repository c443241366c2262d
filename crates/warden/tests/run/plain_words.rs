//! What warden's own lines say is what happened: a budget warning names
//! the share reached, the summary line stays one line, and a replay
//! claims no verdict the recording does not show.

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
