//! Step outputs under GitHub Actions: `$GITHUB_OUTPUT` gets what a run, a
//! session and a batch ended with, a value with a line break in the
//! heredoc form; nothing is written outside Actions.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::Value;

use crate::support::{Case, Finished, git, repo};

/// `$GITHUB_OUTPUT` read as the runner reads it; a key twice is an error.
fn outputs(file: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(file).expect("GITHUB_OUTPUT written");
    let mut out = BTreeMap::new();
    let mut lines = text.split('\n');
    while let Some(line) = lines.next() {
        if line.is_empty() {
            continue;
        }
        let (name, value) = if let Some((name, delim)) = line.split_once("<<") {
            let mut value = Vec::new();
            let mut closed = false;
            for l in lines.by_ref() {
                if l == delim {
                    closed = true;
                    break;
                }
                value.push(l);
            }
            assert!(closed, "unclosed heredoc {name} in {text}");
            (name, value.join("\n"))
        } else {
            let (n, v) = line
                .split_once('=')
                .unwrap_or_else(|| panic!("{line:?} in {text}"));
            (n, v.to_string())
        };
        assert!(
            out.insert(name.to_string(), value).is_none(),
            "{name} twice in {text}"
        );
    }
    out
}

/// `warden` with `args` under a simulated GitHub Actions step.
fn under_actions(case: &Case, args: &[&str]) -> (Finished, PathBuf) {
    let output = case.path().join("gh_output");
    let mut cmd: Command = case.command(args);
    cmd.env("GITHUB_ACTIONS", "true")
        .env("GITHUB_OUTPUT", &output)
        .env("GITHUB_STEP_SUMMARY", case.path().join("gh_summary"));
    (case.finished(cmd.output().unwrap(), Instant::now()), output)
}

fn keys(o: &BTreeMap<String, String>) -> Vec<&str> {
    o.keys().map(String::as_str).collect()
}

fn cost(v: &Value) -> String {
    v.as_f64().map(|c| c.to_string()).unwrap_or_default()
}

fn tokens(t: &Value) -> u64 {
    ["input", "cache_read", "cache_write", "output"]
        .iter()
        .map(|k| t[k].as_u64().unwrap())
        .sum()
}

#[test]
fn a_run_sets_every_output_and_the_final_text_keeps_its_lines() {
    let case = Case::new();
    repo(&case);
    // A stand-in pi whose last answer has two lines and one that tries to
    // add a key of its own; it commits once.
    let answer = "first line\nverdict=injected\nlast line";
    let lines = [
        r#"{"type":"session","version":3,"id":"s1"}"#.to_string(),
        r#"{"type":"agent_start"}"#.to_string(),
        r#"{"type":"turn_start"}"#.to_string(),
        serde_json::json!({"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":answer}],"stopReason":"stop","usage":{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"cost":{"total":0.25}}}}).to_string(),
        r#"{"type":"agent_end","messages":[]}"#.to_string(),
    ];
    std::fs::write(case.path().join("lines.jsonl"), lines.join("\n") + "\n").unwrap();
    let bin = case.path().join("fake-pi");
    crate::support::write_script(
        &bin,
        &format!(
            "#!/bin/sh\necho w > w.txt && git add w.txt && git commit -qm work\ncat '{}'\n",
            case.path().join("lines.jsonl").display()
        ),
    );
    // A run directory whose name has a line break (and a key after it):
    // its value must take the heredoc form.
    let run_dir = case.path().join("runs\nverdict=injected");
    let output = case.path().join("gh_output");
    let mut cmd = case.command(&["run", "pi", "do it", "--agent-bin", bin.to_str().unwrap()]);
    cmd.env("WARDEN_RUN_DIR", &run_dir)
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_OUTPUT", &output)
        .env("GITHUB_STEP_SUMMARY", case.path().join("gh_summary"));
    let mut done = case.finished(cmd.output().unwrap(), Instant::now());
    done.run_dir = run_dir.clone();
    let file = output;
    assert_eq!(done.code, 0, "{}", done.stderr);
    let r = done.report();
    let o = outputs(&file);
    assert_eq!(
        keys(&o),
        [
            "branch",
            "check",
            "commits",
            "cost_usd",
            "exit_code",
            "final_text_file",
            "merge_commit",
            "merged_into",
            "run_dir",
            "tokens",
            "verdict"
        ]
    );
    assert_eq!(o["verdict"], "succeeded");
    assert_eq!(o["exit_code"], "0");
    assert_eq!(Path::new(&o["run_dir"]), done.run_dir);
    // The branch the run's commits are on, as `run.json` says.
    assert_eq!(o["branch"], "main");
    assert_eq!(r["branch"], "main");
    assert_eq!(o["commits"], "1");
    assert_eq!(o["cost_usd"], cost(&r["cost_usd"]));
    assert_eq!(o["tokens"], tokens(&r["tokens"]).to_string());
    assert_eq!(r["final_text"], answer, "{r}");
    let text_file = PathBuf::from(&o["final_text_file"]);
    assert_eq!(text_file, done.run_dir.join("final_text.txt"));
    assert_eq!(std::fs::read_to_string(&text_file).unwrap(), answer);
    assert_ne!(o["cost_usd"], "", "{r}");
    // The heredoc form, with a delimiter of its own; the plain form else.
    let raw = std::fs::read_to_string(&file).unwrap();
    assert!(raw.contains("\nrun_dir<<ghadelimiter_"), "{raw}");
    assert!(raw.starts_with("verdict=succeeded\n"), "{raw}");
}

#[test]
fn a_session_with_a_worktree_gives_its_branch_and_commits() {
    let case = Case::new();
    repo(&case);
    let (done, file) = under_actions(
        &case,
        &[
            "run",
            "exec",
            "--worktree",
            "--name",
            "fixer",
            "--iterations",
            "2",
            "--",
            "sh",
            "-c",
            "n=$(cat count 2>/dev/null || echo 0); echo $((n+1)) > count; git add count; git commit -qm it; echo done",
        ],
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    let o = outputs(&file);
    assert_eq!(
        keys(&o),
        [
            "branch",
            "check",
            "commits",
            "cost_usd",
            "exit_code",
            "final_text_file",
            "merge_commit",
            "merged_into",
            "run_dir",
            "tokens",
            "verdict"
        ]
    );
    let session_dir = PathBuf::from(&o["run_dir"]);
    let s: Value =
        serde_json::from_str(&std::fs::read_to_string(session_dir.join("session.json")).unwrap())
            .unwrap();
    assert_eq!(o["verdict"], "succeeded");
    assert_eq!(o["exit_code"], "0");
    let branch = &o["branch"];
    assert!(branch.starts_with("warden/fixer/"), "{branch}");
    assert_eq!(s["worktree"]["branch"], *branch);
    assert_eq!(s["branch"], *branch);
    assert_eq!(o["commits"], "2");
    assert_eq!(
        git(
            case.path(),
            &["rev-list", "--count", &format!("main..{branch}")]
        ),
        "2"
    );
    assert_eq!(o["cost_usd"], "", "exec has no cost");
    assert_eq!(o["tokens"], "", "exec reports no tokens: not known");
    assert_eq!(o["final_text_file"], "", "exec has no final text");
}

/// Without a worktree, `branch` is the branch HEAD was on when the last
/// run ended, in the outputs, `session.json` and the last `run.json`
/// alike: one meaning, the branch the commits are on.
#[test]
fn a_session_without_a_worktree_gives_the_branch_its_commits_are_on() {
    let case = Case::new();
    repo(&case);
    let (done, file) = under_actions(
        &case,
        &[
            "run",
            "exec",
            "--iterations",
            "2",
            "--",
            "sh",
            "-c",
            "git checkout -q -B feature; echo x >> f; git add f; git commit -qm it; echo done",
        ],
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    let o = outputs(&file);
    let session_dir = PathBuf::from(&o["run_dir"]);
    let read = |p: PathBuf| -> Value {
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    };
    let s = read(session_dir.join("session.json"));
    let last = read(session_dir.join("iteration-2/run.json"));
    assert_eq!(o["branch"], "feature", "{}", done.stderr);
    assert_eq!(s["branch"], "feature");
    assert_eq!(last["branch"], "feature");
    assert_eq!(s["worktree"], Value::Null);
}

#[test]
fn a_batch_gives_its_directory_report_and_a_count_per_verdict() {
    let case = Case::new();
    let file = crate::batch::write(
        &case,
        "[defaults]\nagent = \"exec\"\n\n\
         [[run]]\nname = \"ok\"\ncommand = [\"sh\", \"-c\", \"echo done\"]\n\
         [[run]]\nname = \"ok2\"\ncommand = [\"sh\", \"-c\", \"echo done\"]\n\
         [[run]]\nname = \"broken\"\ncommand = [\"sh\", \"-c\", \"exit 7\"]\n",
    );
    let dir = case.path().join("batch");
    let (done, out) = under_actions(&case, &["batch", &file, "--dir", dir.to_str().unwrap()]);
    assert_eq!(done.code, 1, "{}", done.stderr);
    let o = outputs(&out);
    assert_eq!(
        keys(&o),
        [
            "agent_failed",
            "batch_dir",
            "batch_json",
            "budget_exceeded",
            "cancelled",
            "check_failed",
            "exit_code",
            "failed",
            "hook_failed",
            "internal_error",
            "merge_conflict",
            "never_ran",
            "setup_failed",
            "spawn_failed",
            "stalled",
            "startup_timeout",
            "succeeded",
            "timed_out"
        ]
    );
    assert_eq!(Path::new(&o["batch_dir"]), dir);
    assert_eq!(Path::new(&o["batch_json"]), dir.join("batch.json"));
    assert!(dir.join("batch.json").is_file());
    assert_eq!(o["exit_code"], "1");
    assert_eq!(o["succeeded"], "2");
    assert_eq!(o["agent_failed"], "1");
    assert_eq!(o["failed"], "1");
    for k in [
        "cancelled",
        "budget_exceeded",
        "stalled",
        "startup_timeout",
        "timed_out",
        "spawn_failed",
        "internal_error",
        "never_ran",
    ] {
        assert_eq!(o[k], "0", "{k}");
    }
}

#[test]
fn nothing_is_written_outside_github_actions_and_a_bad_output_file_is_a_warning() {
    let case = Case::new();
    let output = case.path().join("gh_output");
    let mut cmd = case.command(&["run", "exec", "--", "sh", "-c", "echo done"]);
    cmd.env("GITHUB_OUTPUT", &output);
    let done = case.finished(cmd.output().unwrap(), Instant::now());
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(!output.exists(), "GITHUB_ACTIONS is not set");
    assert!(!done.run_dir.join("final_text.txt").exists());

    // An output file that cannot be written: warned about, and the exit
    // code is still the run's.
    let case = Case::new();
    let mut cmd = case.command(&["run", "exec", "--", "sh", "-c", "exit 1"]);
    cmd.env("GITHUB_ACTIONS", "true")
        .env("GITHUB_OUTPUT", case.path().join("no/such/dir/out"));
    let done = case.finished(cmd.output().unwrap(), Instant::now());
    assert_eq!(done.code, 1, "{}", done.stderr);
    assert!(
        done.stderr.contains("could not write the step outputs"),
        "{}",
        done.stderr
    );
}
