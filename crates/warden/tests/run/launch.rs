//! A launch of many runs at once: every run starts and ends well, a run's
//! stall clock keeps time while the others are being started, and a batch
//! starts no git of its own where git has nothing to say.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::batch::write;
use crate::startup::logging_git;
use crate::support::{Case, repo};

fn batch_json(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("batch.json")).expect("batch.json"))
        .unwrap()
}

const DEFAULTS: &str = "[defaults]\nagent = \"exec\"\ntimeout = \"60s\"\n\n";

/// `n` runs that note their start in `<dir>/starts/<i>` and then sleep
/// `secs`.
fn sleepers(case: &Case, n: usize, secs: &str) -> String {
    let starts = case.path().join("starts");
    std::fs::create_dir_all(&starts).unwrap();
    let mut toml = String::new();
    for i in 0..n {
        toml.push_str(&format!(
            "[[run]]\nname = \"r{i}\"\ncommand = [\"sh\", \"-c\", \"echo up > '{}/{i}'; sleep {secs}; echo done\"]\n",
            starts.display()
        ));
    }
    toml
}

#[test]
fn forty_runs_at_once_all_start_and_all_succeed() {
    let case = Case::new();
    let file = write(&case, &format!("{DEFAULTS}{}", sleepers(&case, 40, "1")));
    let dir = case.path().join("batch");
    let done = case.run(&["batch", &file, "-j", "40", "--dir", dir.to_str().unwrap()]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let b = batch_json(&dir);
    assert_eq!(b["succeeded"], 40, "{b}");
    let started = std::fs::read_dir(case.path().join("starts"))
        .unwrap()
        .count();
    assert_eq!(started, 40, "every run's command started");
    // Forty runs of 1 s at once, not one after the other.
    assert!(
        done.elapsed < Duration::from_secs(30),
        "40 runs of 1 s, 40 at a time, took {:?}",
        done.elapsed
    );
    case.assert_nothing_left();
}

#[test]
fn a_stall_clock_fires_while_a_big_batch_is_being_started() {
    let case = Case::new();
    // The first run falls silent at once; its stall clock (300 ms) runs
    // out while the other 59 are still being started.
    let toml = format!(
        "{DEFAULTS}[[run]]\nname = \"silent\"\ncommand = [\"sh\", \"-c\", \"echo hello; exec sleep 60\"]\nstall_timeout = \"300ms\"\nkill_grace = \"200ms\"\n\n{}",
        sleepers(&case, 59, "2")
    );
    let file = write(&case, &toml);
    let dir = case.path().join("batch");
    let start = Instant::now();
    let done = case.run(&["batch", &file, "-j", "60", "--dir", dir.to_str().unwrap()]);
    assert_eq!(done.code, 1, "one run stalls: {}", done.stderr);
    let b = batch_json(&dir);
    assert_eq!(b["succeeded"], 59, "{b}");
    let silent = b["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "silent")
        .unwrap();
    assert_eq!(silent["verdict"], "stalled", "{silent}");
    // Well under its 60 s timeout and the others' 2 s: the clock was not
    // held up by the launch.
    let ms = silent["duration_ms"].as_u64().unwrap();
    assert!(
        ms < 10_000,
        "the 300 ms stall clock ended the run after {ms} ms"
    );
    assert!(start.elapsed() < Duration::from_secs(60));
    case.assert_nothing_left();
}

/// A batch of three quick runs with a logging `git` on PATH; what it
/// logged.
fn git_calls_of_a_batch(case: &Case) -> String {
    let log = case.path().join("git-calls.log");
    let bin = logging_git(&log);
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut toml = String::from("[defaults]\nagent = \"exec\"\n\n");
    for i in 0..3 {
        toml.push_str(&format!("[[run]]\nname = \"r{i}\"\ncommand = [\"true\"]\n"));
    }
    let file = write(case, &toml);
    let dir = case.path().join("batch");
    let out = case
        .command(&["batch", &file, "-j", "3", "--dir", dir.to_str().unwrap()])
        .env("PATH", &path)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&bin);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(batch_json(&dir)["succeeded"], 3);
    std::fs::read_to_string(&log).unwrap_or_default()
}

#[test]
fn a_batch_outside_a_git_work_tree_starts_no_git() {
    let case = Case::new();
    assert!(
        !case.path().ancestors().any(|d| d.join(".git").exists()),
        "the case's directory must be outside any work tree"
    );
    let calls = git_calls_of_a_batch(&case);
    assert!(
        calls.is_empty(),
        "a batch outside any work tree ran git:\n{calls}"
    );
}

#[test]
fn a_batch_in_a_work_tree_whose_head_does_not_move_starts_no_git() {
    let case = Case::new();
    repo(&case);
    let calls = git_calls_of_a_batch(&case);
    assert!(
        calls.is_empty(),
        "a batch in a work tree whose HEAD did not move ran git:\n{calls}"
    );
}

#[test]
fn a_batch_on_a_terminal_with_no_size_prints_plain_lines() {
    let case = Case::new();
    let file = write(&case, &format!("{DEFAULTS}{}", sleepers(&case, 3, "0.2")));
    let dir = case.path().join("batch");
    let Some(text) = crate::support::in_unsized_terminal(
        &case,
        &format!(
            "'{}' batch '{file}' -j 3 --dir '{}'",
            crate::support::WARDEN,
            dir.display()
        ),
    ) else {
        return;
    };
    assert!(!text.contains("panicked"), "{text}");
    assert!(text.contains("EXIT=0"), "{text}");
    assert_eq!(batch_json(&dir)["succeeded"], 3, "{text}");
}
