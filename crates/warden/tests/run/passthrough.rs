//! The command's output passes through warden as through `timeout(1)`:
//! an `exec` command's stdout on warden's stdout and its stderr on
//! warden's stderr, byte for byte, through real pipes and files; an
//! agent's final answer on stdout; `--json` keeps stdout for the events.

use std::io::Read;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::Case;

/// A stand-in Claude Code that plays a recorded successful stream.
fn fake_claude(case: &Case) -> std::path::PathBuf {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../warden-events/tests/fixtures/claude/success_with_tools.jsonl");
    let bin = case.path().join("fake-claude");
    crate::support::write_script(
        &bin,
        &format!("#!/bin/sh\ncat > /dev/null\ncat '{}'\n", fixture.display()),
    );
    bin
}

/// A stdout whose every write fails with `ENOSPC`.
fn full_disk() -> std::fs::File {
    std::fs::File::options()
        .write(true)
        .open("/dev/full")
        .unwrap()
}

fn run_raw(case: &Case, args: &[&str]) -> std::process::Output {
    case.command(args).output().expect("run warden")
}

#[test]
fn an_exec_commands_stdout_and_stderr_pass_through_byte_for_byte() {
    let case = Case::new();
    let out = run_raw(
        &case,
        &[
            "run",
            "exec",
            "--",
            "sh",
            "-c",
            r"printf 'a\nb'; printf 'e1\n\033[2Je2' >&2; printf '\000\377\r\n::x\n##[y\nlast'",
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, b"a\nb\x00\xff\r\n::x\n##[y\nlast");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("e1\n\x1b[2Je2"), "{stderr}");
    assert!(
        !stderr.contains("out|") && !stderr.contains("err|"),
        "{stderr}"
    );
    assert!(stderr.contains("warden: succeeded"), "{stderr}");
    let run = case.run_dir();
    assert_eq!(std::fs::read(run.join("stdout.log")).unwrap(), out.stdout);
}

/// With both streams passed on and no status line, the view shows none of
/// the output's lines, so the run makes no live event for them: none is
/// counted as dropped from a feed nobody reads, however fast they come.
#[test]
fn output_redirected_to_a_file_is_the_commands_own_and_makes_no_live_events() {
    let case = Case::new();
    let file = case.path().join("out.txt");
    let status = case
        .command(&["run", "exec", "--", "seq", "1", "300000"])
        .stdout(std::fs::File::create(&file).unwrap())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let want: String = (1..=300_000).map(|n| format!("{n}\n")).collect();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), want);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(case.run_dir().join("run.json")).unwrap())
            .unwrap();
    assert_eq!(report["live_events_dropped"], 0, "{report:#}");
    assert_eq!(report["event_counts"]["text"], 300_000, "{report:#}");
}

/// `> /dev/null` throws the output away: nothing is read back for it, and
/// the view still leaves it out (it is the command's, sent where the user
/// chose); the logs have it all.
#[test]
fn output_sent_to_dev_null_is_not_shown_and_the_logs_keep_it() {
    let case = Case::new();
    let out = case
        .command(&[
            "run",
            "exec",
            "--",
            "sh",
            "-c",
            "seq 1 20000; echo to-stderr >&2",
        ])
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("to-stderr\n"), "{stderr}");
    assert!(
        !stderr.contains("out|") && !stderr.contains("19999"),
        "{stderr}"
    );
    assert!(stderr.contains("warden: succeeded"), "{stderr}");
    let want: String = (1..=20000).map(|n| format!("{n}\n")).collect();
    let log = std::fs::read_to_string(case.run_dir().join("stdout.log")).unwrap();
    assert_eq!(log, want);
}

#[test]
fn a_slow_reader_gets_every_byte_and_the_run_is_not_held_up() {
    let case = Case::new();
    let mut child = case
        .command(&["run", "exec", "--", "seq", "1", "300000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut got = Vec::new();
    let mut buf = vec![0; 16 * 1024];
    loop {
        let n = stdout.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        std::thread::sleep(Duration::from_millis(2));
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let want: String = (1..=300000).map(|n| format!("{n}\n")).collect();
    assert!(
        got == want.as_bytes(),
        "{} bytes, wanted {}",
        got.len(),
        want.len()
    );
    let run = case.run_dir();
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("run.json")).unwrap()).unwrap();
    // The command wrote into the log at its own pace: the run was over
    // long before the reader was done (300,000 lines read in 2 ms steps
    // of 16 KiB take over 0.2 s).
    assert_eq!(report["verdict"], "succeeded");
}

#[test]
fn a_reader_that_goes_away_stops_the_command_as_sigpipe_would() {
    let case = Case::new();
    let mark = crate::support::unique_sleep();
    let script = format!("while :; do echo y; done; {mark}");
    let start = Instant::now();
    let mut child = case
        .command(&["run", "exec", "--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0; 4];
    stdout.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"y\ny\n");
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "took {:?}",
        start.elapsed()
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("the reader of warden's stdout went away"),
        "{stderr}"
    );
    let run = case.run_dir();
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("run.json")).unwrap()).unwrap();
    assert_eq!(report["verdict"], "cancelled");
    let reason = report["reason"].as_str().unwrap();
    assert!(
        reason.contains("reader of warden's stdout went away"),
        "{reason}"
    );
    case.assert_nothing_left();
}

#[test]
fn json_keeps_stdout_for_the_events_and_stderr_still_passes() {
    let case = Case::new();
    let out = run_raw(
        &case,
        &[
            "run",
            "--json",
            "exec",
            "--",
            "sh",
            "-c",
            "echo x; echo e >&2",
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "text" && e["text"] == "x")
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.lines().any(|l| l == "e"), "{stderr}");
}

#[test]
fn each_iteration_of_a_session_passes_its_output_in_order() {
    let case = Case::new();
    let out = run_raw(
        &case,
        &[
            "run",
            "--iterations",
            "3",
            "exec",
            "--",
            "sh",
            "-c",
            "n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; printf 'iteration %s\\n' $n; printf 'stderr %s\\n' $n >&2",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "iteration 1\niteration 2\niteration 3\n"
    );
    let at = |s: &str| stderr.find(s).unwrap_or_else(|| panic!("{s} in {stderr}"));
    assert!(at("stderr 1\n") < at("stderr 2\n") && at("stderr 2\n") < at("stderr 3\n"));
}

#[test]
fn under_github_actions_a_workflow_command_passes_inert() {
    let case = Case::new();
    let out = case
        .command(&[
            "run",
            "exec",
            "--",
            "sh",
            "-c",
            "printf '::error::forged\\nplain ##[group]x\\n'; printf '  ::warning::w\\n' >&2",
        ])
        .env("GITHUB_ACTIONS", "true")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "\u{2024}::error::forged\nplain ##\u{2060}[group]x\n"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("\u{2024}  ::warning::w\n"), "{stderr}");
    assert!(
        !stderr
            .lines()
            .any(|l| l.trim_start().starts_with("::warning::w"))
    );
}

#[test]
fn an_agents_final_answer_is_its_stdout() {
    let case = Case::new();
    let bin = fake_claude(&case);
    let out = run_raw(
        &case,
        &[
            "run",
            "claude",
            "fix it",
            "--agent-bin",
            bin.to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let run = case.run_dir();
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("run.json")).unwrap()).unwrap();
    let answer = report["final_text"].as_str().expect("a final answer");
    assert!(!answer.is_empty());
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{answer}\n"));
    // What the agent said on the way is the view's, on stderr.
    assert!(stderr.contains("say|"), "{stderr}");
    let json = case
        .command(&[
            "run",
            "--json",
            "claude",
            "fix it",
            "--agent-bin",
            bin.to_str().unwrap(),
        ])
        .env("WARDEN_RUN_DIR", case.path().join("second"))
        .output()
        .unwrap();
    let stdout = String::from_utf8(json.stdout).unwrap();
    assert!(
        stdout
            .lines()
            .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()),
        "{stdout}"
    );
}

#[test]
fn a_reader_slower_than_the_waits_still_gets_every_byte() {
    // 16 KiB a second: a 64 KiB write takes 4 s, longer than the end of a
    // run waited for one before (it lost the rest, with exit 0).
    let case = Case::new();
    let mut child = case
        .command(&["run", "exec", "--", "head", "-c", "100000", "/dev/zero"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut got = 0;
    let mut buf = vec![0; 4096];
    loop {
        let n = stdout.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        got += n;
        std::thread::sleep(Duration::from_millis(250));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(got, 100_000, "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("not all passed on"), "{stderr}");
}

#[test]
fn output_that_cannot_be_written_is_a_failure_that_names_the_log() {
    let case = Case::new();
    // A full disk.
    let out = case
        .command(&["run", "exec", "--", "sh", "-c", "echo important-result"])
        .stdout(full_disk())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(74), "{stderr}");
    assert!(
        stderr.contains("not all passed on: writing warden's stdout failed")
            && stderr.contains("stdout.log has it all"),
        "{stderr}"
    );
    // A reader gone once the command had ended (`cmd | true`).
    let case = Case::new();
    let mut child = case
        .command(&["run", "exec", "--", "sh", "-c", "sleep 0.3; echo result"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(74), "{stderr}");
    assert!(
        stderr.contains("the reader of warden's stdout went away"),
        "{stderr}"
    );
    // An agent's answer that cannot be written.
    let case = Case::new();
    let bin = fake_claude(&case);
    let out = case
        .command(&[
            "run",
            "claude",
            "fix it",
            "--agent-bin",
            bin.to_str().unwrap(),
        ])
        .stdout(full_disk())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(74), "{stderr}");
}

/// A session whose view shows no line (`--quiet`), and a batch's log of
/// many runs (no terminal, no GitHub Actions), make no live event for an
/// `exec` run's lines either: none is dropped, and every line is counted.
#[test]
fn a_session_or_batch_that_shows_no_line_makes_no_live_events_for_them() {
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "-q",
        "--iterations",
        "2",
        "--",
        "seq",
        "1",
        "300000",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let toml = "[defaults]\nagent = \"exec\"\n\n\
        [[run]]\nname = \"flood\"\ncommand = [\"seq\", \"1\", \"300000\"]\n";
    let file = crate::batch::write(&case, toml);
    let dir = case.path().join("batch");
    let batch = case.run(&["batch", &file, "--dir", dir.to_str().unwrap()]);
    assert_eq!(batch.code, 0, "{}", batch.stderr);
    let reports = crate::support::run_reports_under(case.path());
    assert_eq!(
        reports.len(),
        3,
        "two runs of the session, one of the batch"
    );
    for r in reports {
        assert_eq!(r["live_events_dropped"], 0, "{r:#}");
        assert_eq!(r["event_counts"]["text"], 300_000, "{r:#}");
    }
}

/// Under GitHub Actions a batch prints each run's lines as a group: they
/// are still made.
#[test]
fn a_batch_under_github_actions_still_groups_the_lines() {
    let case = Case::new();
    let toml = "[defaults]\nagent = \"exec\"\n\n\
        [[run]]\nname = \"few\"\ncommand = [\"sh\", \"-c\", \"echo first-line; echo second-line\"]\n";
    let file = crate::batch::write(&case, toml);
    let dir = case.path().join("batch");
    let out = case
        .command(&["batch", &file, "--dir", dir.to_str().unwrap()])
        .env("GITHUB_ACTIONS", "true")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let group = stderr
        .split("::group::")
        .nth(1)
        .and_then(|g| g.split("::endgroup::").next())
        .unwrap_or_default();
    assert!(
        group.contains("[few] out| first-line\n[few] out| second-line\n"),
        "{stderr}"
    );
}
