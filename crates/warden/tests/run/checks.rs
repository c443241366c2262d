//! Sessions that verify their work: `--check` after each iteration (its
//! failure told to the next), `--check-first`, the check's own clocks and
//! sandbox, the prompt's `{{$ CMD}}`, the settings that set them, and the
//! same from a batch file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::support::{
    Case, bwrap_works, home_with_ssh_key, kill_leftovers, unique_sleep, write_script,
};

/// The check the stand-in agents are checked by: it passes once the agent
/// made `fixed`, else it says what is wrong (on stdout and on stderr)
/// and exits 1.
const CHECK: &str = "echo 'running 1 test'; test -f fixed && echo 'test ok' && exit 0; \
                     echo 'FAILED: widget-7731 expected 3, got 4' >&2; exit 1";

/// What the check says when it fails, and nothing else has in it.
const CHECK_SAYS: &str = "widget-7731 expected 3, got 4";

fn session_json(case: &Case) -> Value {
    let path = case.run_dir().join("session.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} missing: {e}", path.display()));
    serde_json::from_str(&text).expect("session.json is JSON")
}

fn checks(s: &Value) -> &Vec<Value> {
    s["checks"]
        .as_array()
        .unwrap_or_else(|| panic!("no checks in {s}"))
}

fn hooks(s: &Value) -> &Vec<Value> {
    s["hooks"]
        .as_array()
        .unwrap_or_else(|| panic!("no hooks in {s}"))
}

/// A step's run directory holds what any run's does.
fn assert_step_dir(step: &Value) -> PathBuf {
    let dir = PathBuf::from(step["run_dir"].as_str().expect("run_dir"));
    for f in ["stdout.log", "stderr.log", "run.json"] {
        assert!(dir.join(f).is_file(), "{} has no {f}", dir.display());
    }
    dir
}

fn step_run_json(step: &Value) -> Value {
    let dir = assert_step_dir(step);
    serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap()
}

/// `run exec` of `script` in a session with `flags`.
fn exec_session(case: &Case, flags: &[&str], script: &str) -> crate::support::Finished {
    let mut args = vec!["run", "exec", "--kill-grace", "200ms"];
    args.extend_from_slice(flags);
    args.extend(["--", "sh", "-c", script]);
    case.run(&args)
}

/// A stand-in `claude` that keeps each prompt it is sent in
/// `rec/prompt-N` (N: its Nth run) and, from its `fix_at`th run on, makes
/// `fixed` in its working directory (what [`CHECK`] looks for).
fn fake_claude(case: &Case, fix_at: u32) -> PathBuf {
    let rec = case.path().join("rec");
    std::fs::create_dir_all(&rec).unwrap();
    let bin = case.path().join("claude-stand-in");
    let script = format!(
        "#!/bin/sh\n\
         rec='{rec}'\n\
         n=$(( $(cat \"$rec/count\" 2>/dev/null || echo 0) + 1 ))\n\
         echo $n > \"$rec/count\"\n\
         cat > \"$rec/prompt-$n\"\n\
         [ $n -ge {fix_at} ] && touch fixed\n\
         echo '{{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"sess-1\"}}'\n\
         echo '{{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"done\",\"num_turns\":1,\"session_id\":\"sess-1\"}}'\n",
        rec = rec.display()
    );
    write_script(&bin, &script);
    bin
}

/// The prompt the stand-in got at its `n`th run, if it ran that often.
fn prompt(case: &Case, n: u32) -> Option<String> {
    std::fs::read_to_string(case.path().join(format!("rec/prompt-{n}"))).ok()
}

/// `run claude` with the stand-in and `args` (the prompt among them).
fn claude_session(case: &Case, bin: &Path, args: &[&str]) -> crate::support::Finished {
    let mut all = vec!["run", "claude", "--agent-bin", bin.to_str().unwrap()];
    all.extend_from_slice(args);
    case.run(&all)
}

/// Counts its runs in `count`; prints the completion signal every time.
const COUNTING_AGENT: &str = "n=$(cat count 2>/dev/null || echo 0); echo $((n+1)) > count; \
                              echo '<promise>COMPLETE</promise>'";

#[test]
fn a_check_that_passes_after_iteration_2_ends_the_session() {
    let case = Case::new();
    let check = "c=$(cat count); echo \"count is $c\"; [ $c -ge 2 ]";
    let done = exec_session(
        &case,
        &["--iterations", "5", "--check", check],
        COUNTING_AGENT,
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    let s = session_json(&case);
    assert_eq!(s["stopped_because"], "check_passed", "{s}");
    assert_eq!(s["verdict"], "succeeded");
    assert_eq!(
        s["iterations_run"], 2,
        "the signal of iteration 1 did not end it"
    );
    assert_eq!(s["runs"].as_array().unwrap().len(), 2);
    let checks = checks(&s);
    assert_eq!(checks.len(), 2, "{s}");
    for (i, c) in checks.iter().enumerate() {
        let n = i as u64 + 1;
        assert_eq!(c["kind"], "check");
        assert_eq!(c["iteration"], n);
        assert_eq!(c["command"], check);
        assert!(c["duration_ms"].is_u64(), "{c}");
        let dir = assert_step_dir(c);
        assert!(
            dir.ends_with(format!("iteration-{n}-check")),
            "{}",
            dir.display()
        );
        let out = std::fs::read_to_string(dir.join("stdout.log")).unwrap();
        assert_eq!(out, format!("count is {n}\n"));
        assert_eq!(step_run_json(c)["run_id"], c["run_id"]);
    }
    assert_eq!(checks[0]["passed"], false);
    assert_eq!(checks[0]["exit_code"], 1);
    assert_ne!(checks[0]["verdict"], "succeeded");
    assert_eq!(checks[1]["passed"], true);
    assert_eq!(checks[1]["exit_code"], 0);
    assert_eq!(checks[1]["verdict"], "succeeded");
    assert!(
        done.stderr.contains("stopped by check passed"),
        "{}",
        done.stderr
    );
}

#[test]
fn iterations_run_out_with_the_check_failing_check_failed() {
    let case = Case::new();
    let check = "echo 'still broken: E4021'; exit 1";
    // The agent says it is done each time; the check says it is not.
    let done = exec_session(
        &case,
        &["--iterations", "2", "--check", check],
        COUNTING_AGENT,
    );
    assert_eq!(done.code, 8, "{}", done.stderr);
    let s = session_json(&case);
    assert_eq!(s["verdict"], "check_failed", "{s}");
    assert_eq!(s["stopped_because"], "iterations_exhausted");
    assert_eq!(s["iterations_run"], 2);
    let runs = s["runs"].as_array().unwrap();
    assert!(
        runs.iter()
            .all(|r| r["verdict"] == "succeeded" && r["completion_signal_seen"] == true),
        "the agent's runs are not blamed: {s}"
    );
    assert_eq!(checks(&s).len(), 2);
    let error = s["error"].as_str().expect("an error");
    assert!(
        error.contains(&format!("the check `{check}`"))
            && error.contains("after iteration 2")
            && error.contains("exited with status 1"),
        "{error}"
    );
    assert!(done.stderr.contains(error), "{}", done.stderr);
}

#[test]
fn a_failed_checks_output_is_appended_to_a_plain_prompt() {
    let case = Case::new();
    let bin = fake_claude(&case, 2);
    let done = claude_session(
        &case,
        &bin,
        &["Fix the widget.", "--iterations", "3", "--check", CHECK],
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    let s = session_json(&case);
    assert_eq!(s["stopped_because"], "check_passed", "{s}");
    assert_eq!(s["iterations_run"], 2);
    assert_eq!(prompt(&case, 1).unwrap(), "Fix the widget.");
    let second = prompt(&case, 2).unwrap();
    assert!(second.starts_with("Fix the widget."), "{second}");
    for want in [
        &format!("warden ran the check `{CHECK}`"),
        "exited with status 1",
        "running 1 test",
        CHECK_SAYS,
    ] {
        assert!(second.contains(want), "`{want}` missing from:\n{second}");
    }
    assert!(prompt(&case, 3).is_none());
}

#[test]
fn a_prompt_file_gets_the_checks_output_through_its_placeholder_only() {
    let case = Case::new();
    let bin = fake_claude(&case, 2);
    std::fs::write(
        case.path().join("task.md"),
        "Fix the widget.\nLast check:\n{{CHECK_OUTPUT}}\nEnd.",
    )
    .unwrap();
    let done = claude_session(
        &case,
        &bin,
        &["-f", "task.md", "--iterations", "3", "--check", CHECK],
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(
        prompt(&case, 1).unwrap(),
        "Fix the widget.\nLast check:\n\nEnd."
    );
    let second = prompt(&case, 2).unwrap();
    assert!(
        second.starts_with("Fix the widget.\nLast check:\n")
            && second.contains(CHECK_SAYS)
            && second.ends_with("\nEnd."),
        "{second}"
    );
    assert!(
        !second.contains("warden ran the check"),
        "no note where the template took the output:\n{second}"
    );
}

#[test]
fn check_feedback_none_tells_the_next_iteration_nothing() {
    let case = Case::new();
    let bin = fake_claude(&case, 2);
    let done = claude_session(
        &case,
        &bin,
        &[
            "Fix the widget.",
            "--iterations",
            "3",
            "--check",
            CHECK,
            "--check-feedback",
            "none",
        ],
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(session_json(&case)["iterations_run"], 2);
    assert_eq!(prompt(&case, 2).unwrap(), "Fix the widget.");
}

#[test]
fn a_secret_the_check_prints_is_masked_in_what_the_agent_is_told() {
    const SECRET: &str = "s3cr3t-widget-5150";
    let case = Case::new();
    let bin = fake_claude(&case, 2);
    // The secret is in the check's output, and written into its command.
    let check = format!(": {SECRET}; echo \"token is $API_TOKEN\"; {CHECK}");
    let done = claude_session(
        &case,
        &bin,
        &[
            "Fix the widget.",
            "--iterations",
            "2",
            "--env",
            &format!("API_TOKEN={SECRET}"),
            "--check",
            &check,
        ],
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    let second = prompt(&case, 2).unwrap();
    assert!(
        second.contains("token is ***") && second.contains(CHECK_SAYS),
        "{second}"
    );
    assert!(!second.contains(SECRET), "the agent was told:\n{second}");
    assert!(
        second.contains(": ***; echo"),
        "the command is named, masked:\n{second}"
    );
    let session = std::fs::read_to_string(case.run_dir().join("session.json")).unwrap();
    assert!(!session.contains(SECRET), "{session}");
    assert!(!done.stderr.contains(SECRET), "{}", done.stderr);
}

#[test]
fn a_hanging_check_is_ended_by_its_own_clock() {
    let case = Case::new();
    let bin = fake_claude(&case, 99);
    let sleep = unique_sleep();
    let check = format!("echo checking; {sleep}");
    let done = claude_session(
        &case,
        &bin,
        &[
            "Fix the widget.",
            "--iterations",
            "2",
            "--kill-grace",
            "200ms",
            "--check",
            &check,
            "--check-timeout",
            "300ms",
        ],
    );
    assert_eq!(done.code, 8, "{}", done.stderr);
    assert!(done.elapsed < Duration::from_secs(20), "{:?}", done.elapsed);
    let s = session_json(&case);
    assert_eq!(s["verdict"], "check_failed", "{s}");
    assert!(
        s["runs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["verdict"] == "succeeded"),
        "the agent is not blamed: {s}"
    );
    for c in checks(&s) {
        assert_eq!(c["verdict"], "timed_out", "{c}");
        assert_eq!(c["passed"], false);
        assert_eq!(step_run_json(c)["verdict"], "timed_out");
    }
    let error = s["error"].as_str().unwrap();
    assert!(
        error.contains("timed out") && error.contains("--check-timeout"),
        "{error}"
    );
    // The next iteration is told the check hung, not that it failed a test.
    let second = prompt(&case, 2).unwrap();
    assert!(
        second.contains("timed out") && second.contains("checking"),
        "{second}"
    );
    case.assert_nothing_left();
    let left = kill_leftovers(&sleep);
    assert!(left.is_empty(), "the check's sleep survived: {left:?}");
}

#[test]
fn a_silent_check_is_ended_by_its_stall_clock() {
    let case = Case::new();
    let sleep = unique_sleep();
    let check = format!("echo checking; {sleep}");
    let done = exec_session(
        &case,
        &["--check", &check, "--check-stall-timeout", "300ms"],
        "echo work",
    );
    assert_eq!(done.code, 8, "{}", done.stderr);
    let s = session_json(&case);
    assert_eq!(s["verdict"], "check_failed", "{s}");
    assert_eq!(s["runs"][0]["verdict"], "succeeded");
    assert_eq!(checks(&s)[0]["verdict"], "stalled");
    let error = s["error"].as_str().unwrap();
    assert!(
        error.contains("stalled") && error.contains("--check-stall-timeout"),
        "{error}"
    );
    case.assert_nothing_left();
    assert!(kill_leftovers(&sleep).is_empty());
}

#[test]
fn a_first_check_that_passes_ends_the_session_before_any_agent() {
    let case = Case::new();
    let done = exec_session(
        &case,
        &["--check", "echo nothing to do", "--check-first"],
        "touch agent-ran",
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    let s = session_json(&case);
    assert_eq!(s["verdict"], "succeeded", "{s}");
    assert_eq!(s["stopped_because"], "check_passed");
    assert_eq!(s["iterations_run"], 0);
    assert_eq!(s["runs"].as_array().unwrap().len(), 0);
    let c = &checks(&s)[0];
    assert_eq!(c["iteration"], 0);
    assert_eq!(c["passed"], true);
    assert!(assert_step_dir(c).ends_with("check-first"));
    assert!(!case.path().join("agent-ran").exists());
}

#[test]
fn a_first_check_that_fails_is_told_to_iteration_1() {
    let case = Case::new();
    let bin = fake_claude(&case, 1);
    let done = claude_session(
        &case,
        &bin,
        &["Fix the widget.", "--check", CHECK, "--check-first"],
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    let first = prompt(&case, 1).unwrap();
    assert!(
        first.starts_with("Fix the widget.") && first.contains(CHECK_SAYS),
        "{first}"
    );
    let s = session_json(&case);
    assert_eq!(s["stopped_because"], "check_passed", "{s}");
    let checks = checks(&s);
    assert_eq!(checks.len(), 2);
    assert_eq!(
        (&checks[0]["iteration"], &checks[0]["passed"]),
        (&Value::from(0), &Value::from(false))
    );
    assert_eq!(
        (&checks[1]["iteration"], &checks[1]["passed"]),
        (&Value::from(1), &Value::from(true))
    );
}

#[test]
fn the_check_runs_in_the_agents_sandbox() {
    if !bwrap_works() {
        eprintln!("SKIPPED: bubblewrap cannot make a PID namespace here");
        return;
    }
    let case = Case::new();
    let home = home_with_ssh_key(&case);
    let outside = format!("warden-check-outside-{}", std::process::id());
    let check = format!(
        "echo checked > checked-here; echo x > \"$(dirname \"$PWD\")/{outside}\"; \
         cat \"$HOME/.ssh/id_test\" 2>/dev/null || echo ssh-is-hidden"
    );
    let mut cmd = case.command(&[
        "run",
        "exec",
        "--sandbox",
        "bwrap",
        "--kill-grace",
        "500ms",
        "--check",
        &check,
        "--",
        "sh",
        "-c",
        "echo work > work.txt",
    ]);
    cmd.env("HOME", &home);
    let done = case.finished(cmd.output().unwrap(), std::time::Instant::now());
    assert_eq!(done.code, 0, "{}", done.stderr);
    let s = session_json(&case);
    let c = &checks(&s)[0];
    assert_eq!(step_run_json(c)["sandbox"], "bwrap");
    let out = std::fs::read_to_string(assert_step_dir(c).join("stdout.log")).unwrap();
    assert!(out.contains("ssh-is-hidden"), "{out}");
    assert!(
        case.path().join("checked-here").exists(),
        "the work tree is the check's"
    );
    let host = case.path().parent().unwrap().join(&outside);
    assert!(
        !host.exists(),
        "the check wrote outside the work tree: {}",
        host.display()
    );
}

#[test]
fn a_prompt_files_commands_are_replaced_by_their_output_and_args_never_run() {
    let case = Case::new();
    let bin = fake_claude(&case, 1);
    let marker = case.path().join("marker");
    let planted = format!("{{{{$ touch {}}}}}", marker.display());
    std::fs::write(
        case.path().join("task.md"),
        "Status: {{$ printf 'cmd-out-%s' 5512 }}\nTask: {{TASK}}",
    )
    .unwrap();
    let done = claude_session(
        &case,
        &bin,
        &["-f", "task.md", "--arg", &format!("TASK={planted}")],
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(
        prompt(&case, 1).unwrap(),
        format!("Status: cmd-out-5512\nTask: {planted}")
    );
    assert!(!marker.exists(), "text from --arg was run");
    let s = session_json(&case);
    let hooks = hooks(&s);
    assert_eq!(hooks.len(), 1, "{s}");
    assert_eq!(hooks[0]["kind"], "prompt_command");
    assert_eq!(hooks[0]["command"], "printf 'cmd-out-%s' 5512");
    assert_eq!(hooks[0]["iteration"], 1);
    assert_eq!(hooks[0]["passed"], true);
    assert!(assert_step_dir(&hooks[0]).ends_with("iteration-1-prompt-1"));
}

#[test]
fn only_a_prompt_file_runs_commands_never_standard_input_or_an_inline_prompt() {
    // A workflow may pipe an issue's text in, or pass it inline: whoever
    // wrote it must not get a command run by it.
    let case = Case::new();
    let bin = fake_claude(&case, 1);
    let marker = case.path().join("marker");
    let text = format!("Issue: {{{{$ touch {}}}}}", marker.display());
    let mut cmd = case.command(&[
        "run",
        "claude",
        "--agent-bin",
        bin.to_str().unwrap(),
        "-f",
        "-",
    ]);
    cmd.stdin(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(prompt(&case, 1).unwrap(), text, "sent as text");
    let inline = Case::new();
    let bin = fake_claude(&inline, 1);
    let done = claude_session(&inline, &bin, &[&text, "--arg", "X=1"]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(prompt(&inline, 1).unwrap(), text, "sent as text");
    assert!(
        !marker.exists(),
        "a command from stdin or the command line ran"
    );
}

#[test]
fn a_failing_prompt_command_is_setup_failed_and_no_agent_starts() {
    let case = Case::new();
    let bin = fake_claude(&case, 1);
    std::fs::write(
        case.path().join("task.md"),
        "Log: {{$ echo about to fail; exit 3}}",
    )
    .unwrap();
    let done = claude_session(&case, &bin, &["-f", "task.md"]);
    assert_eq!(done.code, 9, "{}", done.stderr);
    let s = session_json(&case);
    assert_eq!(s["verdict"], "setup_failed", "{s}");
    assert_eq!(s["stopped_because"], "setup_failed");
    assert_eq!(s["runs"].as_array().unwrap().len(), 0);
    assert!(prompt(&case, 1).is_none(), "the agent started");
    let error = s["error"].as_str().unwrap();
    assert!(
        error.contains("`echo about to fail; exit 3`") && error.contains("exited with status 3"),
        "{error}"
    );
    assert!(done.stderr.contains(error), "{}", done.stderr);
}

#[test]
fn a_prompt_command_is_bounded_by_its_clock() {
    let case = Case::new();
    let bin = fake_claude(&case, 1);
    let sleep = unique_sleep();
    std::fs::write(
        case.path().join("task.md"),
        format!("Log: {{{{$ {sleep}}}}}"),
    )
    .unwrap();
    let done = claude_session(
        &case,
        &bin,
        &[
            "-f",
            "task.md",
            "--kill-grace",
            "200ms",
            "--prompt-command-timeout",
            "300ms",
        ],
    );
    assert_eq!(done.code, 9, "{}", done.stderr);
    assert!(prompt(&case, 1).is_none(), "the agent started");
    let s = session_json(&case);
    assert_eq!(hooks(&s)[0]["verdict"], "timed_out", "{s}");
    let error = s["error"].as_str().unwrap();
    assert!(
        error.contains("timed out") && error.contains("--prompt-command-timeout"),
        "{error}"
    );
    case.assert_nothing_left();
    assert!(kill_leftovers(&sleep).is_empty());
}

#[test]
fn a_prompt_command_runs_in_the_sandbox() {
    if !bwrap_works() {
        eprintln!("SKIPPED: bubblewrap cannot make a PID namespace here");
        return;
    }
    let case = Case::new();
    let home = home_with_ssh_key(&case);
    let bin = fake_claude(&case, 1);
    let outside = format!("warden-prompt-outside-{}", std::process::id());
    std::fs::write(
        case.path().join("task.md"),
        format!(
            "Got: {{{{$ echo x > \"$(dirname \"$PWD\")/{outside}\"; echo made > made-here; echo ok}}}}"
        ),
    )
    .unwrap();
    let mut cmd = case.command(&[
        "run",
        "claude",
        "--agent-bin",
        bin.to_str().unwrap(),
        "--sandbox",
        "bwrap",
        "-f",
        "task.md",
    ]);
    cmd.env("HOME", &home);
    let done = case.finished(cmd.output().unwrap(), std::time::Instant::now());
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(prompt(&case, 1).unwrap(), "Got: ok");
    let s = session_json(&case);
    assert_eq!(step_run_json(&hooks(&s)[0])["sandbox"], "bwrap");
    assert!(case.path().join("made-here").exists());
    let host = case.path().parent().unwrap().join(&outside);
    assert!(
        !host.exists(),
        "the prompt's command wrote outside the work tree: {}",
        host.display()
    );
}

#[test]
fn the_check_comes_from_warden_toml_and_its_clock_from_the_environment() {
    let case = Case::new();
    let sleep = unique_sleep();
    std::fs::write(
        case.path().join("warden.toml"),
        format!("check = \"echo from-toml; {sleep}\"\n"),
    )
    .unwrap();
    let mut cmd = case.command(&["run", "exec", "--kill-grace", "200ms", "--", "true"]);
    cmd.env("WARDEN_CHECK_TIMEOUT", "300ms");
    let done = case.finished(cmd.output().unwrap(), std::time::Instant::now());
    assert_eq!(done.code, 8, "{}", done.stderr);
    let s = session_json(&case);
    let c = &checks(&s)[0];
    assert_eq!(c["command"], format!("echo from-toml; {sleep}"));
    assert_eq!(c["verdict"], "timed_out", "{c}");
    case.assert_nothing_left();
    assert!(kill_leftovers(&sleep).is_empty());
}

#[test]
fn bad_check_settings_are_refused_naming_the_setting() {
    let refused = |case: &Case, done: crate::support::Finished, needles: &[&str]| {
        assert_eq!(done.code, 2, "{needles:?}: {}", done.stderr);
        for n in needles {
            assert!(
                done.stderr.contains(n),
                "`{n}` missing from:\n{}",
                done.stderr
            );
        }
        assert!(!case.run_dir().exists(), "nothing may start: {needles:?}");
    };
    let case = Case::new();
    for (flags, needles) in [
        (
            vec!["--check", "true", "--check-feedback", "maybe"],
            vec!["--check-feedback", "`maybe`", "auto"],
        ),
        (
            vec!["--check", ""],
            vec!["--check", "a shell command such as"],
        ),
        (vec!["--check", "   "], vec!["--check"]),
        (
            vec!["--check", "true", "--check-timeout", "soon"],
            vec!["--check-timeout", "`soon`"],
        ),
        (vec!["--merge"], vec!["--merge", "--worktree"]),
        (vec!["--check-first"], vec!["--check-first needs --check"]),
        (
            vec!["--check-timeout", "1m"],
            vec!["--check-timeout needs --check"],
        ),
        (vec!["--setup", ""], vec!["--setup"]),
    ] {
        let mut args = vec!["run", "exec"];
        args.extend(flags);
        args.extend(["--", "true"]);
        refused(&case, case.run(&args), &needles);
    }
    let mut cmd = case.command(&["run", "exec", "--check", "true", "--", "true"]);
    cmd.env("WARDEN_CHECK_FEEDBACK", "maybe");
    let done = case.finished(cmd.output().unwrap(), std::time::Instant::now());
    refused(&case, done, &["WARDEN_CHECK_FEEDBACK", "`maybe`"]);
    // In warden.toml a check's clock waits for the runs that have a check.
    std::fs::write(case.path().join("warden.toml"), "check_timeout = \"1m\"\n").unwrap();
    let done = case.run(&["run", "exec", "--", "true"]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    std::fs::remove_dir_all(case.run_dir()).unwrap();
    std::fs::write(
        case.path().join("warden.toml"),
        "check_first = \"perhaps\"\n",
    )
    .unwrap();
    let done = case.run(&["run", "exec", "--check", "true", "--", "true"]);
    refused(
        &case,
        done,
        &["`check_first` in", "warden.toml", "`perhaps`"],
    );
}

fn batch_json(case: &Case) -> Value {
    let text = std::fs::read_to_string(case.path().join("batch/batch.json")).expect("batch.json");
    serde_json::from_str(&text).unwrap()
}

#[test]
fn a_batch_entry_checks_its_work_as_the_command_line_does() {
    let case = Case::new();
    let toml = "[defaults]\nagent = \"exec\"\nkill_grace = \"200ms\"\n\n\
        [[run]]\nname = \"fixer\"\niterations = 3\n\
        command = [\"sh\", \"-c\", \"n=$(cat fixer-count 2>/dev/null || echo 0); echo $((n+1)) > fixer-count\"]\n\
        setup = \"echo prepared > fixer-setup\"\n\
        check = \"c=$(cat fixer-count); echo fixer count $c; [ $c -ge 2 ]\"\n\n\
        [[run]]\nname = \"idle\"\ncommand = [\"sh\", \"-c\", \"touch idle-ran\"]\n\
        check = \"echo already fine\"\ncheck_first = true\n\n\
        [[run]]\nname = \"stuck\"\ncommand = [\"true\"]\n\
        check = \"echo stuck-says-no; exit 1\"\ncheck_feedback = \"none\"\n";
    // An agent's entry whose prompt file runs a command, told the check's
    // failure through it; an `args` value is never run.
    let bin = fake_claude(&case, 2);
    let marker = case.path().join("marker");
    std::fs::write(
        case.path().join("task.md"),
        "{{$ echo from-a-command}} {{TASK}}\n{{CHECK_OUTPUT}}",
    )
    .unwrap();
    let toml = format!(
        "{toml}\n[[run]]\nname = \"agent\"\nagent = \"claude\"\nagent_bin = \"{bin}\"\n\
         prompt_file = \"task.md\"\niterations = 2\ncheck = '''{CHECK}'''\n\
         [run.args]\nTASK = \"{{{{$ touch {marker}}}}}\"\n",
        bin = bin.display(),
        marker = marker.display()
    );
    let file = crate::batch::write(&case, &toml);
    let dir = case.path().join("batch");
    let done = case.run(&["batch", &file, "-j", "3", "--dir", dir.to_str().unwrap()]);
    assert_eq!(done.code, 1, "one entry's check failed: {}", done.stderr);
    let b = batch_json(&case);
    let entry = |name: &str| -> Value {
        let from_batch = b["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("no entry {name} in {b}"))["session"]
            .clone();
        let own: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join(name).join("session.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(from_batch["checks"], own["checks"], "{name}");
        own
    };

    let fixer = entry("fixer");
    assert_eq!(fixer["verdict"], "succeeded", "{fixer}");
    assert_eq!(fixer["stopped_because"], "check_passed");
    assert_eq!(fixer["iterations_run"], 2);
    let c = checks(&fixer);
    assert_eq!(c.len(), 2);
    assert_eq!(
        (&c[0]["passed"], &c[1]["passed"]),
        (&false.into(), &true.into())
    );
    assert!(assert_step_dir(&c[1]).starts_with(dir.join("fixer")));
    let h = hooks(&fixer);
    assert_eq!(
        (&h[0]["kind"], &h[0]["passed"]),
        (&"setup".into(), &true.into())
    );
    assert_eq!(
        std::fs::read_to_string(case.path().join("fixer-setup")).unwrap(),
        "prepared\n"
    );

    let idle = entry("idle");
    assert_eq!(idle["verdict"], "succeeded", "{idle}");
    assert_eq!(idle["stopped_because"], "check_passed");
    assert_eq!(idle["runs"].as_array().unwrap().len(), 0);
    assert_eq!(checks(&idle)[0]["iteration"], 0);
    assert!(!case.path().join("idle-ran").exists());

    let agent = entry("agent");
    assert_eq!(agent["stopped_because"], "check_passed", "{agent}");
    assert_eq!(
        prompt(&case, 1).unwrap(),
        format!("from-a-command {{{{$ touch {}}}}}\n", marker.display())
    );
    assert!(prompt(&case, 2).unwrap().contains(CHECK_SAYS));
    assert!(!marker.exists(), "an `args` value was run");

    let stuck = entry("stuck");
    assert_eq!(stuck["verdict"], "check_failed", "{stuck}");
    assert!(
        stuck["error"]
            .as_str()
            .unwrap()
            .contains("echo stuck-says-no; exit 1"),
        "{stuck}"
    );
}

#[test]
fn a_check_cancelled_by_ctrl_c_ends_the_session_cancelled_with_nothing_left() {
    let case = Case::new();
    let sleep = unique_sleep();
    let check = format!("echo checking; {sleep}");
    let child = case.spawn(&[
        "run",
        "exec",
        "--kill-grace",
        "200ms",
        "--iterations",
        "3",
        "--check",
        &check,
        "--",
        "true",
    ]);
    case.wait_for_output(
        "iteration-1-check/stdout.log",
        "checking",
        Duration::from_secs(10),
    );
    crate::support::kill(child.id(), "INT");
    let done = case.finished(child.wait_with_output().unwrap(), std::time::Instant::now());
    assert_eq!(done.code, 130, "{}", done.stderr);
    let s = session_json(&case);
    assert_eq!(s["verdict"], "cancelled", "{s}");
    assert_eq!(s["stopped_because"], "cancelled");
    assert_eq!(s["iterations_run"], 1, "no iteration after the cancel: {s}");
    assert_eq!(checks(&s)[0]["verdict"], "cancelled");
    case.assert_nothing_left();
    assert!(kill_leftovers(&sleep).is_empty());
}

#[test]
fn the_whole_tree_of_a_check_that_passed_is_ended_with_it() {
    let case = Case::new();
    let sleep = unique_sleep();
    // A daemon in a session of its own, left running by a check that
    // passes at once.
    let check = format!("setsid {sleep} </dev/null >/dev/null 2>&1 & echo passed");
    let done = exec_session(&case, &["--check", &check, "--check-first"], "true");
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(session_json(&case)["stopped_because"], "check_passed");
    case.assert_nothing_left();
    let left = kill_leftovers(&sleep);
    assert!(left.is_empty(), "the check's daemon survived: {left:?}");
}

#[test]
fn the_feedback_is_the_last_lines_of_the_check_and_never_run() {
    let case = Case::new();
    let bin = fake_claude(&case, 2);
    let marker = case.path().join("marker");
    std::fs::write(case.path().join("task.md"), "Fix it.\n{{CHECK_OUTPUT}}").unwrap();
    // 200 lines, then one that looks like a command of the template.
    let check = format!(
        "test -f fixed && exit 0; seq -f 'line-%g' 1 200; echo '{{{{$ touch {}}}}}'; exit 1",
        marker.display()
    );
    let done = claude_session(
        &case,
        &bin,
        &["-f", "task.md", "--iterations", "2", "--check", &check],
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    let second = prompt(&case, 2).unwrap();
    assert!(
        second.contains("line-200\n") && second.contains("line-142\n"),
        "{second}"
    );
    assert!(!second.contains("line-141\n"), "not bounded:\n{second}");
    assert!(
        second.ends_with(&format!("{{{{$ touch {}}}}}", marker.display())),
        "{second}"
    );
    assert!(!marker.exists(), "the check's output was run");
}

#[test]
fn a_prompts_commands_run_again_before_each_iteration() {
    let case = Case::new();
    let bin = fake_claude(&case, 2);
    std::fs::write(
        case.path().join("task.md"),
        "Runs so far: {{$ cat rec/count 2>/dev/null || echo 0}}",
    )
    .unwrap();
    let done = claude_session(
        &case,
        &bin,
        &["-f", "task.md", "--iterations", "3", "--check", CHECK],
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(prompt(&case, 1).unwrap(), "Runs so far: 0");
    assert!(
        prompt(&case, 2).unwrap().starts_with("Runs so far: 1"),
        "{:?}",
        prompt(&case, 2)
    );
    let s = session_json(&case);
    let names: Vec<String> = hooks(&s)
        .iter()
        .map(|h| {
            let dir = assert_step_dir(h);
            dir.file_name().unwrap().to_string_lossy().into_owned()
        })
        .collect();
    assert_eq!(names, ["iteration-1-prompt-1", "iteration-2-prompt-1"]);
}

#[test]
fn the_check_runs_in_the_sessions_worktree() {
    let case = Case::new();
    crate::support::repo(&case);
    let done = exec_session(
        &case,
        &[
            "--worktree",
            "--keep-worktree",
            "--check",
            "pwd; test -f work.txt",
        ],
        "echo work > work.txt && git add work.txt && git commit -qm 'agent work'",
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    let s = session_json(&case);
    let c = &checks(&s)[0];
    assert_eq!(c["passed"], true, "{s}");
    let out = std::fs::read_to_string(assert_step_dir(c).join("stdout.log")).unwrap();
    let worktree = Path::new(s["worktree"]["path"].as_str().unwrap());
    assert_eq!(
        Path::new(out.trim()).canonicalize().unwrap(),
        worktree.canonicalize().unwrap()
    );
    assert!(!case.path().join("work.txt").exists());
}

#[test]
fn ctrl_c_during_a_prompt_command_cancels_the_session() {
    let case = Case::new();
    let bin = fake_claude(&case, 1);
    let sleep = unique_sleep();
    std::fs::write(
        case.path().join("task.md"),
        format!("Log: {{{{$ echo started; {sleep}}}}}"),
    )
    .unwrap();
    let child = case.spawn(&[
        "run",
        "claude",
        "--agent-bin",
        bin.to_str().unwrap(),
        "-f",
        "task.md",
        "--kill-grace",
        "200ms",
    ]);
    case.wait_for_output(
        "iteration-1-prompt-1/stdout.log",
        "started",
        Duration::from_secs(10),
    );
    crate::support::kill(child.id(), "INT");
    let done = case.finished(child.wait_with_output().unwrap(), std::time::Instant::now());
    assert_eq!(done.code, 130, "{}", done.stderr);
    let s = session_json(&case);
    assert_eq!(s["verdict"], "cancelled", "{s}");
    assert_eq!(s["stopped_because"], "cancelled");
    assert!(prompt(&case, 1).is_none(), "the agent started");
    case.assert_nothing_left();
    assert!(kill_leftovers(&sleep).is_empty());
}

#[test]
fn a_prompt_commands_output_is_bounded() {
    let case = Case::new();
    let bin = fake_claude(&case, 1);
    std::fs::write(
        case.path().join("task.md"),
        "Big: {{$ head -c 100000 /dev/zero | tr '\\0' a}} end",
    )
    .unwrap();
    let done = claude_session(&case, &bin, &["-f", "task.md"]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let sent = prompt(&case, 1).unwrap();
    assert!(
        sent.len() < 70_000 && sent.contains(&"a".repeat(60_000)),
        "{} bytes",
        sent.len()
    );
    assert!(
        sent.contains("cut by warden") && sent.ends_with(" end"),
        "{}",
        &sent[sent.len() - 200..]
    );
    // The whole output is in the command's own log.
    let s = session_json(&case);
    let log = assert_step_dir(&hooks(&s)[0]).join("stdout.log");
    assert_eq!(std::fs::metadata(log).unwrap().len(), 100_000);
}

#[test]
fn work_whose_check_was_cancelled_is_not_merged() {
    let case = Case::new();
    let base = crate::support::repo(&case);
    let sleep = unique_sleep();
    let check = format!("echo checking; {sleep}");
    let child = case.spawn(&[
        "run",
        "exec",
        "--kill-grace",
        "200ms",
        "--worktree",
        "--merge",
        "--on-success",
        "echo on-success",
        "--check",
        &check,
        "--",
        "sh",
        "-c",
        "echo work > work.txt && git add work.txt && git commit -qm 'agent work'",
    ]);
    case.wait_for_output(
        "iteration-1-check/stdout.log",
        "checking",
        Duration::from_secs(10),
    );
    crate::support::kill(child.id(), "INT");
    let done = case.finished(child.wait_with_output().unwrap(), std::time::Instant::now());
    assert_eq!(done.code, 130, "{}", done.stderr);
    let s = session_json(&case);
    assert_eq!(s["verdict"], "cancelled", "{s}");
    assert!(s["merged_into"].is_null(), "{s}");
    assert_eq!(
        crate::support::git(case.path(), &["rev-parse", "main"]),
        base,
        "the starting branch moved"
    );
    assert!(
        hooks(&s).iter().all(|h| h["kind"] != "on_success"),
        "--on-success ran: {s}"
    );
    case.assert_nothing_left();
    assert!(kill_leftovers(&sleep).is_empty());
}
