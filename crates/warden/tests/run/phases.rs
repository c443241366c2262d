//! The supervisor's phases, seen from outside: what a view is told while
//! warden ends a run.

use crate::support::Case;

#[test]
fn no_stall_deadline_is_shown_once_warden_is_ending_the_run() {
    let case = Case::new();
    // The agent answers SIGTERM with a line after a silence (so a status
    // snapshot is written while warden is ending the run) and goes on
    // until SIGKILL.
    let done = case.run(&[
        "run",
        "exec",
        "--stall-timeout",
        "400ms",
        "--kill-grace",
        "1s",
        "--",
        "sh",
        "-c",
        "trap 'echo got term' TERM; echo working; while :; do sleep 0.05; done",
    ]);
    assert_eq!(done.report()["verdict"], "stalled", "{}", done.stderr);
    let events = done.events();
    let ending = events
        .iter()
        .position(|e| e["kind"] == "terminating")
        .unwrap_or_else(|| panic!("no terminating event: {events:?}"));
    let status = |range: &[serde_json::Value]| -> Vec<serde_json::Value> {
        range
            .iter()
            .filter(|e| e["kind"] == "status")
            .cloned()
            .collect()
    };
    let before = status(&events[..ending]);
    assert!(
        before.iter().any(|s| s["stall_deadline_ms"].is_u64()),
        "while running, the stall deadline is shown: {before:?}"
    );
    let after = status(&events[ending..]);
    assert!(
        !after.is_empty(),
        "the line after SIGTERM is written down: {events:?}"
    );
    for s in &after {
        assert!(
            s["stall_deadline_ms"].is_null(),
            "no stall can come once the run is being ended: {s}"
        );
    }
}
