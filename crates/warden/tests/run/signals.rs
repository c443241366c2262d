//! Signals to warden, and warden's own death.

use std::time::{Duration, Instant};

use crate::support::{Case, kill};

#[test]
fn sigint_cancels_writes_the_report_and_leaves_nothing() {
    let case = Case::new();
    let child = case.spawn(&[
        "run",
        "exec",
        "--kill-grace",
        "2s",
        "--",
        "sh",
        "-c",
        "echo up; sleep 600 & sleep 600",
    ]);
    case.wait_for_output("stdout.log", "up", Duration::from_secs(10));
    let start = Instant::now();
    kill(child.id(), "INT");
    let done = case.finished(child.wait_with_output().unwrap(), start);
    assert_eq!(done.code, 130, "{}", done.stderr);
    assert_eq!(done.report()["verdict"], "cancelled");
    assert!(
        done.elapsed < Duration::from_secs(2),
        "sleep dies on SIGTERM; took {:?}",
        done.elapsed
    );
    case.assert_nothing_left();
}

#[test]
fn second_sigint_kills_at_once() {
    let case = Case::new();
    let child = case.spawn(&[
        "run",
        "exec",
        "--kill-grace",
        "60s",
        "--",
        "sh",
        "-c",
        "trap '' TERM INT; echo up; sleep 600",
    ]);
    case.wait_for_output("stdout.log", "up", Duration::from_secs(10));
    let start = Instant::now();
    kill(child.id(), "INT");
    std::thread::sleep(Duration::from_millis(200));
    kill(child.id(), "INT");
    let done = case.finished(child.wait_with_output().unwrap(), start);
    assert_eq!(done.code, 130, "{}", done.stderr);
    assert!(
        done.elapsed < Duration::from_secs(5),
        "did not kill at once: {:?}",
        done.elapsed
    );
    assert_eq!(done.report()["verdict"], "cancelled");
    case.assert_nothing_left();
}

#[test]
fn sigterm_to_warden_also_cancels() {
    let case = Case::new();
    let child = case.spawn(&["run", "exec", "--", "sh", "-c", "echo up; sleep 600"]);
    case.wait_for_output("stdout.log", "up", Duration::from_secs(10));
    let start = Instant::now();
    kill(child.id(), "TERM");
    let done = case.finished(child.wait_with_output().unwrap(), start);
    assert_eq!(done.code, 130);
    case.assert_nothing_left();
}

#[test]
fn warden_sigkilled_leaves_nothing_of_the_run() {
    for containment in crate::support::CONTAINMENTS {
        let case = Case::new();
        let mut child = case.spawn(&[
            "run", "exec", "--containment", containment, "--", "sh", "-c",
            "trap '' TERM; sleep 600 & (setsid sleep 600 </dev/null >/dev/null 2>&1 &); echo up; sleep 600",
        ]);
        case.wait_for_output("stdout.log", "up", Duration::from_secs(10));
        assert!(
            case.survivors().len() >= 4,
            "the run is up: {:?}",
            case.survivors()
        );
        kill(child.id(), "KILL");
        child.wait().unwrap();
        let left = case.survivors_after(Duration::from_secs(10));
        assert!(
            left.is_empty(),
            "{containment}: survived warden's death: {left:?}"
        );
        let report = case.run_dir().join("run.json");
        let first: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
        assert_eq!(
            first["verdict"],
            serde_json::Value::Null,
            "the run.json of a killed warden says it never finished"
        );
    }
}
