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

/// The shim waits for its child's exit through a signalfd, with SIGCHLD
/// blocked: the agent must not inherit that (a shell that waits on its
/// jobs with `sigsuspend` would hang), nor SIGPIPE ignored as the Rust
/// runtime has it. Both ways the shim is started: for an `exec` command
/// (nothing on its stdin) and for an agent CLI (its prompt piped in).
#[test]
fn the_agent_starts_with_no_signal_blocked_and_sigpipe_at_its_default() {
    let case = Case::new();
    let script = "grep -E '^Sig(Blk|Ign):' /proc/self/status";
    let agent = case.path().join("fake-claude");
    crate::support::write_script(&agent, &format!("#!/bin/sh\ncat > /dev/null\n{script}\n"));
    let agent = agent.to_str().unwrap();
    for args in [
        vec!["run", "exec", "--", "sh", "-c", script],
        vec!["run", "claude", "a prompt", "--agent-bin", agent],
    ] {
        let done = case.run(&args);
        let status = String::from_utf8(done.log("stdout.log")).unwrap();
        let mask = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
                .unwrap_or_else(|| panic!("{args:?}: no {name} in {status:?}: {}", done.stderr))
        };
        assert_eq!(mask("SigBlk:"), 0, "{args:?}: {status}");
        assert_eq!(
            mask("SigIgn:") & (1 << (libc::SIGPIPE - 1)),
            0,
            "{args:?}: {status}"
        );
    }
}
