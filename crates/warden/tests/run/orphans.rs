//! The agent exits, something it started lives on: the run still ends at
//! once, the orphans are named and killed, and nothing survives.

use std::time::Duration;

use crate::support::{CONTAINMENTS, Case, ms};

#[test]
fn orphan_holding_stdout_does_not_delay_finalize() {
    for containment in CONTAINMENTS {
        let case = Case::new();
        let done = case.run(&[
            "run",
            "exec",
            "--containment",
            containment,
            "--",
            "sh",
            "-c",
            "echo did the work; sleep 600 & exit 0",
        ]);
        assert_eq!(done.code, 0, "{containment}: {}", done.stderr);
        let report = done.report();
        assert_eq!(report["verdict"], "succeeded");
        assert!(
            ms(&report["duration_ms"]) < 1000,
            "{containment}: finalize waited for the orphan: {report}"
        );
        assert!(
            done.elapsed < Duration::from_secs(3),
            "{containment}: took {:?}",
            done.elapsed
        );
        assert_eq!(done.log("stdout.log"), b"did the work\n");
        let orphans = report["orphans"].as_array().unwrap();
        // The orphan is the `sleep 600`, or the shell it is forked from
        // when warden finds it before its exec (`sh`, or `[sh]` while the
        // exec replaces its command line): either way it holds the pipe.
        assert!(
            orphans
                .iter()
                .any(|o| o["cmdline"].as_str().is_some_and(|c| {
                    c.contains("sleep 600") || c == "[sh]" || c.starts_with("sh ")
                }) && o["held_pipe"] == true),
            "{containment}: orphan not listed: {orphans:?}"
        );
        assert_eq!(report["orphans_killed"], 1);
        assert_eq!(report["output_truncated"], serde_json::Value::Null);
        case.assert_nothing_left();
    }
}

#[test]
fn orphan_ignoring_sigterm_is_killed_after_the_drain_grace() {
    for containment in CONTAINMENTS {
        let case = Case::new();
        let done = case.run(&[
            "run",
            "exec",
            "--containment",
            containment,
            "--drain-grace",
            "1s",
            "--",
            "sh",
            "-c",
            // The agent exits only once its orphan ignores SIGTERM: warden
            // sends it the moment the agent is gone.
            "echo did the work; (trap '' TERM; : > ignoring; exec sleep 600) & \
             until [ -e ignoring ]; do sleep 0.01; done; printf 'no newline'; exit 0",
        ]);
        assert_eq!(done.code, 0, "{containment}: {}", done.stderr);
        let report = done.report();
        assert_eq!(
            report["verdict"], "succeeded",
            "aborting the drain never fails a run"
        );
        let d = ms(&report["duration_ms"]);
        assert!(
            (900..5000).contains(&d),
            "{containment}: finalized after {d} ms, expected about the 1s grace"
        );
        let truncated = &report["output_truncated"];
        assert!(
            truncated["holders"]
                .as_array()
                .unwrap()
                .iter()
                .any(|h| h["cmdline"]
                    .as_str()
                    .is_some_and(|c| c.contains("sleep 600"))),
            "{containment}: holder not named: {report}"
        );
        assert_eq!(ms(&truncated["bytes"]), 23);
        assert_eq!(done.log("stdout.log"), b"did the work\nno newline");
        let texts: Vec<_> = done
            .events_of("text")
            .iter()
            .map(|e| e["text"].clone())
            .collect();
        assert!(
            texts.contains(&"no newline".into()),
            "a last line without newline is kept: {texts:?}"
        );
        case.assert_nothing_left();
    }
}

#[test]
fn setsid_double_forked_daemon_is_killed_and_counted() {
    for containment in CONTAINMENTS {
        let case = Case::new();
        let done = case.run(&[
            "run",
            "exec",
            "--containment",
            containment,
            "--",
            "sh",
            "-c",
            "(setsid sleep 600 </dev/null >/dev/null 2>&1 &) ; sleep 0.2; echo started",
        ]);
        assert_eq!(done.code, 0, "{containment}: {}", done.stderr);
        let report = done.report();
        assert_eq!(report["verdict"], "succeeded");
        let orphans = report["orphans"].as_array().unwrap();
        assert!(
            orphans.iter().any(|o| o["cmdline"]
                .as_str()
                .is_some_and(|c| c.contains("sleep 600"))
                && o["held_pipe"] == false),
            "{containment}: the daemon was not found: {report}"
        );
        assert!(ms(&report["orphans_killed"]) >= 1);
        // Dead when warden returns, not some time later.
        let left = case.survivors();
        assert!(
            left.is_empty(),
            "{containment}: daemon survived warden: {left:?}"
        );
    }
}

#[test]
fn term_ignoring_tree_is_killed_by_sigkill_after_the_kill_grace() {
    for containment in CONTAINMENTS {
        let case = Case::new();
        let done = case.run(&[
            "run",
            "exec",
            "--containment",
            containment,
            "--stall-timeout",
            "300ms",
            "--kill-grace",
            "600ms",
            "--",
            "sh",
            "-c",
            "trap '' TERM; echo up; sleep 600 & sleep 600 & wait",
        ]);
        assert_eq!(done.code, 3, "{containment}: {}", done.stderr);
        let signalled = done.events_of("signalled");
        let term = signalled
            .iter()
            .find(|e| e["signal"] == "SIGTERM")
            .expect("SIGTERM sent");
        let kill = signalled
            .iter()
            .find(|e| e["signal"] == "SIGKILL")
            .expect("SIGKILL sent");
        let gap = ms(&kill["t_ms"]) - ms(&term["t_ms"]);
        assert!(
            (550..3000).contains(&gap),
            "{containment}: SIGKILL came {gap} ms after SIGTERM"
        );
        assert!(
            term["pids"].as_array().unwrap().len() >= 3,
            "the whole tree gets SIGTERM: {term}"
        );
        assert_eq!(done.report()["signal"], 9);
        case.assert_nothing_left();
    }
}

#[test]
fn the_agent_cannot_take_its_shim_down_politely() {
    // `kill $PPID` from the agent hits its shim (its parent): the shim
    // ignores it and the run ends as usual.
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--",
        "sh",
        "-c",
        "kill -TERM $PPID; kill -INT $PPID; sleep 0.2; echo still-supervised",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(done.log("stdout.log"), b"still-supervised\n");
    assert_eq!(done.report()["error"], serde_json::Value::Null);
}

#[test]
fn a_shim_killed_outright_ends_the_run_at_once_and_leaves_nothing() {
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--containment",
        "auto",
        "--timeout",
        "0",
        "--stall-timeout",
        "0",
        "--startup-timeout",
        "0",
        "--",
        "sh",
        "-c",
        "sleep 600 & echo up; kill -KILL $PPID; sleep 600",
    ]);
    assert!(
        done.elapsed < Duration::from_secs(10),
        "the run hung without its shim: {:?}",
        done.elapsed
    );
    let report = done.report();
    assert_eq!(report["verdict"], "internal_error", "{report}");
    assert!(
        report["error"].as_str().unwrap().contains("shim exited"),
        "{report}"
    );
    case.assert_nothing_left();
}

#[test]
fn a_process_with_a_name_that_is_not_utf8_is_still_found_and_killed() {
    for containment in CONTAINMENTS {
        let case = Case::new();
        let odd = case.path().join("проверка");
        std::fs::copy("/bin/sleep", &odd).unwrap();
        let script = format!("('{}' 600 &); echo started", odd.display());
        let done = case.run(&[
            "run",
            "exec",
            "--containment",
            containment,
            "--",
            "sh",
            "-c",
            &script,
        ]);
        assert_eq!(done.code, 0, "{containment}: {}", done.stderr);
        let report = done.report();
        assert!(
            ms(&report["orphans_killed"]) >= 1,
            "{containment}: the oddly named process was not found: {report}"
        );
        assert!(ms(&report["duration_ms"]) < 3000, "{containment}: {report}");
        case.assert_nothing_left();
    }
}
