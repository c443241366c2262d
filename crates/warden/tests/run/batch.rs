//! `warden batch`: runs N at a time, failures isolated, Ctrl-C for all,
//! `batch.json`, and bad files refused before anything starts.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Case, kill};

fn batch_json(case: &Case) -> Value {
    let dir = case.path().join("batch");
    serde_json::from_str(&std::fs::read_to_string(dir.join("batch.json")).expect("batch.json"))
        .unwrap()
}

pub(crate) fn write(case: &Case, toml: &str) -> String {
    let p = case.path().join("runs.toml");
    std::fs::write(&p, toml).unwrap();
    p.to_string_lossy().into_owned()
}

/// Each run notes when it started and ended (ms since the epoch).
fn timed_run(name: &str, dir: &Path) -> String {
    format!(
        "[[run]]\nname = \"{name}\"\ncommand = [\"sh\", \"-c\", \"date +%s%3N > '{d}/{name}.start'; sleep 0.5; date +%s%3N > '{d}/{name}.end'; echo done\"]\n",
        d = dir.display()
    )
}

#[test]
fn runs_go_n_at_a_time_and_a_failure_stops_no_other() {
    let case = Case::new();
    let mut toml = String::from("[defaults]\nagent = \"exec\"\n\n");
    for n in ["a", "b", "c", "d"] {
        toml.push_str(&timed_run(n, case.path()));
    }
    toml.push_str("[[run]]\nname = \"broken\"\ncommand = [\"sh\", \"-c\", \"exit 7\"]\n");
    let file = write(&case, &toml);
    let start = Instant::now();
    let done = case.run(&[
        "batch",
        &file,
        "-j",
        "2",
        "--dir",
        case.path().join("batch").to_str().unwrap(),
    ]);
    assert_eq!(done.code, 1, "one run failed: {}", done.stderr);
    let b = batch_json(&case);
    assert_eq!(b["succeeded"], 4, "{b}");
    assert_eq!(b["failed"], 1);
    let runs = b["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 5);
    assert!(
        runs.iter()
            .all(|r| r["session"]["runs"][0]["run_dir"].is_string()),
        "every run has its report"
    );
    // Never more than two at once.
    let read = |n: &str, what: &str| -> u64 {
        std::fs::read_to_string(case.path().join(format!("{n}.{what}")))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let spans: Vec<(u64, u64)> = ["a", "b", "c", "d"]
        .iter()
        .map(|n| (read(n, "start"), read(n, "end")))
        .collect();
    for &(s, _) in &spans {
        let overlapping = spans.iter().filter(|(s2, e2)| *s2 <= s && s < *e2).count();
        assert!(overlapping <= 2, "more than 2 runs at once: {spans:?}");
    }
    assert!(
        start.elapsed() >= Duration::from_millis(1000),
        "4 runs of 0.5s, 2 at a time"
    );
    assert!(
        done.stderr.contains("tokens in/out") && done.stderr.contains("broken"),
        "the summary table: {}",
        done.stderr
    );
}

#[test]
fn ctrl_c_cancels_every_run_and_still_writes_the_reports() {
    let case = Case::new();
    let toml = "[defaults]\nagent = \"exec\"\nkill_grace = \"500ms\"\n\n\
        [[run]]\nname = \"one\"\ncommand = [\"sh\", \"-c\", \"echo up; sleep 600\"]\n\
        [[run]]\nname = \"two\"\ncommand = [\"sh\", \"-c\", \"echo up; sleep 600\"]\n\
        [[run]]\nname = \"three\"\ncommand = [\"sh\", \"-c\", \"echo up; sleep 600\"]\n";
    let file = write(&case, toml);
    let dir = case.path().join("batch");
    let child = case.spawn(&["batch", &file, "-j", "2", "--dir", dir.to_str().unwrap()]);
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        let up = ["one", "two"]
            .iter()
            .filter(|n| {
                std::fs::read_to_string(dir.join(n).join("iteration-1/stdout.log"))
                    .is_ok_and(|s| s.contains("up"))
            })
            .count();
        if up == 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    kill(child.id(), "INT");
    let done = case.finished(child.wait_with_output().unwrap(), Instant::now());
    assert_eq!(done.code, 130, "{}", done.stderr);
    let b = batch_json(&case);
    assert_eq!(b["cancelled"], 3, "{b}");
    case.assert_nothing_left();
}

#[test]
fn a_bad_batch_file_is_refused_before_anything_starts() {
    for (toml, needle) in [
        (
            "[[run]]\nagent = \"exec\"\ncommand = [\"true\"]\nstal_timeout = \"1m\"\n",
            "unknown key `stal_timeout`",
        ),
        ("[[run]]\ncommand = [\"true\"]\n", "has no `agent`"),
        (
            "[defaults]\nagent = \"exec\"\n[[run]]\nname = \"x\"\ncommand = [\"true\"]\n[[run]]\nname = \"x\"\ncommand = [\"true\"]\n",
            "two runs are named `x`",
        ),
        ("[defaults]\nagent = \"exec\"\n", "no [[run]] tables"),
        (
            "[[run]]\nagent = \"exec\"\ncommand = [\"true\"]\ntimeout = \"soon\"\n",
            "`soon`",
        ),
        ("[[run]]\nagent = \"exec\"\n", "no command given"),
        ("[[run]]\nagent = \"nope\"\n", "unknown agent"),
        ("[runs]\n", "unknown table `runs`"),
    ] {
        let case = Case::new();
        let file = write(&case, toml);
        let dir = case.path().join("batch");
        let done = case.run(&["batch", &file, "--dir", dir.to_str().unwrap()]);
        assert_eq!(done.code, 2, "{toml}: {}", done.stderr);
        assert!(
            done.stderr.contains(needle),
            "`{needle}` not in: {}",
            done.stderr
        );
        assert!(!dir.exists(), "nothing may start: {toml}");
    }
}
