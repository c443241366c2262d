//! warden's own console against a hostile agent and a hostile environment:
//! workflow commands smuggled through any line split, a stderr or stdout
//! nobody reads or that went away, a prompt pipe that never closes,
//! signals in the first milliseconds and SIGHUP to a batch, and bad values
//! named for what they are.

use std::io::Write;
use std::path::Path;
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Case, WARDEN, kill};

/// Waits for warden up to `limit`; kills it and gives `None` past that.
fn wait_bounded(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let until = Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            return Some(s);
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn report_of(case: &Case) -> Value {
    let text = std::fs::read_to_string(case.run_dir().join("run.json"))
        .unwrap_or_else(|e| panic!("run.json missing in {}: {e}", case.run_dir().display()));
    serde_json::from_str(&text).expect("run.json is JSON")
}

/// Every line the Actions runner would see: it splits at `\r\n`, `\r`
/// and `\n`.
fn runner_lines(s: &str) -> Vec<&str> {
    s.split("\r\n")
        .flat_map(|l| l.split(['\r', '\n']))
        .collect()
}

/// The lines of `out` that would run a workflow command not warden's own
/// (the agent's all say `owned`, also one dressed as warden's).
fn smuggled_commands(out: &str) -> Vec<String> {
    runner_lines(out)
        .into_iter()
        .filter(|l| {
            let t = l.trim_start();
            (t.starts_with("::")
                && (l.contains("owned")
                    || !(t.starts_with("::warning title=warden::")
                        || t.starts_with("::error title=warden::"))))
                || l.contains("##[")
        })
        .map(str::to_string)
        .collect()
}

fn git(dir: &Path, args: &[&str]) {
    let ok = std::process::Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("git")
        .success();
    assert!(ok, "git {args:?}");
}

#[test]
fn github_workflow_commands_cannot_start_through_any_line_split() {
    let case = Case::new();
    git(case.path(), &["init", "-q"]);
    git(
        case.path(),
        &["commit", "-q", "--allow-empty", "-m", "base"],
    );
    let summary = case.path().join("summary.md");
    // Every way a runner could be made to start a line with a command, on
    // stdout and stderr, and a commit whose subject tries the summary.
    let script = r#"
printf 'progress\r::error title=x::owned-cr\n'
printf 'a\r\n \t::add-mask::owned-crlf\n'
printf '50%%\r\r  ::stop-commands::owned-token\n'
printf 'see ##[error]owned-old-style\n'
printf 'x\r::error title=warden::owned-dressed-as-warden\n'
printf 'e\r::warning::owned-stderr ##[add-mask]x\n' >&2
git -c user.name=a -c user.email=a@a -c commit.gpgsign=false commit -q --allow-empty \
  -m "$(printf 'subj\r::error::owned-subject | x | ![i](http://e/i.png) <img src=x>')"
exit 7
"#;
    let mut cmd = case.command(&["run", "--json", "exec", "--", "sh", "-c", script]);
    cmd.env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", &summary);
    let done = case.finished(cmd.output().unwrap(), Instant::now());
    assert_eq!(done.code, 1, "the agent failed: {}", done.stderr);
    let bad = smuggled_commands(&done.stderr);
    assert!(
        bad.is_empty(),
        "workflow commands reached stderr: {bad:?}\n{}",
        done.stderr
    );
    let bad = smuggled_commands(&done.stdout);
    assert!(
        bad.is_empty(),
        "workflow commands reached the --json stdout: {bad:?}"
    );
    for kept in [
        "owned-cr",
        "owned-crlf",
        "owned-token",
        "owned-old-style",
        "owned-stderr",
    ] {
        assert!(
            done.stderr.contains(kept),
            "`{kept}` is shown, made harmless: {}",
            done.stderr
        );
    }
    // Warden's own annotation is still there.
    assert!(
        runner_lines(&done.stderr)
            .iter()
            .any(|l| l.starts_with("::error title=warden::agent_failed")),
        "{}",
        done.stderr
    );
    // The --json lines still decode to what the agent printed.
    let texts: Vec<Value> = done
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("each --json line is JSON"))
        .collect();
    assert!(
        texts.iter().any(|e| e["text"]
            .as_str()
            .is_some_and(|t| t.contains("##[error]owned-old-style"))),
        "the JSON text is unchanged for a JSON reader"
    );
    let md = std::fs::read_to_string(&summary).expect("the step summary");
    assert!(md.contains("owned-subject"), "{md}");
    for forbidden in ["![", "<img", "\r", "::error"] {
        assert!(
            !md.contains(forbidden),
            "`{forbidden:?}` in the summary:\n{md}"
        );
    }
    let table_rows = md.lines().filter(|l| l.starts_with('|')).count();
    let commit_row = md
        .lines()
        .find(|l| l.starts_with("| commits |"))
        .expect("a commits row");
    assert_eq!(
        commit_row.matches(" | ").count(),
        1,
        "the subject adds no cells: {commit_row}"
    );
    assert!(table_rows >= 4, "{md}");
}

/// A command that fills any pipe, then waits to be ended by the clock.
/// Long lines, so that what the live feed passes on (it drops what the
/// view cannot take) is still far more than a pipe holds.
const FLOOD_THEN_WAIT: &str = "yes $(printf '%0999d' 0) | head -n 600; echo filled; sleep 600";

#[test]
fn a_stderr_or_json_stdout_nobody_reads_does_not_stop_the_clocks() {
    for json in [false, true] {
        let case = Case::new();
        let (reader, writer) = std::io::pipe().expect("pipe");
        let mut args = vec!["run"];
        if json {
            args.push("--json");
        }
        args.extend([
            "--timeout",
            "1s",
            "--kill-grace",
            "200ms",
            "exec",
            "--",
            "sh",
            "-c",
            FLOOD_THEN_WAIT,
        ]);
        let mut cmd = case.command(&args);
        if json {
            cmd.stdout(writer).stderr(Stdio::null());
        } else {
            cmd.stderr(writer).stdout(Stdio::null());
        }
        let start = Instant::now();
        let mut child = cmd.spawn().expect("spawn warden");
        drop(cmd);
        let stream = if json { "--json stdout" } else { "stderr" };
        let status = wait_bounded(&mut child, Duration::from_secs(30));
        let elapsed = start.elapsed();
        drop(reader);
        let Some(status) = status else {
            case.assert_nothing_left();
            panic!("warden still ran after 30 s with --timeout 1s: nobody read its {stream}");
        };
        assert_eq!(status.code(), Some(5), "timed_out's exit code ({stream})");
        assert!(
            elapsed < Duration::from_secs(20),
            "{stream}: took {elapsed:?}"
        );
        let report = report_of(&case);
        assert_eq!(report["verdict"], "timed_out", "{stream}");
        let log = std::fs::read_to_string(case.run_dir().join("stdout.log")).unwrap();
        assert!(log.contains("filled"), "every line is in the log");
        case.assert_nothing_left();
    }
}

#[test]
fn a_console_that_went_away_neither_kills_the_run_nor_changes_its_exit_code() {
    let script = "seq 2000; exit 3";
    for (what, json) in [
        ("stderr: a closed pipe", false),
        ("stderr: a full disk", false),
        ("--json stdout: a closed pipe", true),
    ] {
        let case = Case::new();
        let mut args = vec!["run"];
        if json {
            args.push("--json");
        }
        args.extend(["exec", "--", "sh", "-c", script]);
        let mut cmd = case.command(&args);
        let target: Stdio = if what.contains("full disk") {
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .expect("/dev/full")
                .into()
        } else {
            // The read end is gone before warden writes: every write gets
            // EPIPE, as after `| head -2`.
            let (reader, writer) = std::io::pipe().expect("pipe");
            drop(reader);
            writer.into()
        };
        if json {
            cmd.stdout(target).stderr(Stdio::null());
        } else {
            cmd.stderr(target).stdout(Stdio::null());
        }
        let mut child = cmd.spawn().expect("spawn warden");
        drop(cmd);
        let status = wait_bounded(&mut child, Duration::from_secs(30)).expect("warden ended");
        assert_eq!(
            status.code(),
            Some(1),
            "{what}: agent_failed's code, not a panic"
        );
        assert_eq!(report_of(&case)["verdict"], "agent_failed", "{what}");
        let log = std::fs::read_to_string(case.run_dir().join("stdout.log")).unwrap();
        assert_eq!(log.lines().count(), 2000, "{what}: every line logged");
        case.assert_nothing_left();
    }
}

#[test]
fn batch_completions_and_man_survive_a_closed_output() {
    let case = Case::new();
    let file = case.path().join("b.toml");
    std::fs::write(
        &file,
        "[[run]]\nagent = \"exec\"\ncommand = [\"sh\", \"-c\", \"seq 500\"]\n",
    )
    .unwrap();
    let closed = || {
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        Stdio::from(writer)
    };
    let dir = case.path().join("batch");
    let status = case
        .command(&[
            "batch",
            file.to_str().unwrap(),
            "--dir",
            dir.to_str().unwrap(),
        ])
        .stderr(closed())
        .stdout(closed())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0), "batch with its stderr gone");
    assert!(dir.join("batch.json").is_file());
    for args in [&["completions", "bash"][..], &["man"], &["man", "run"]] {
        let status = case.command(args).stdout(closed()).status().unwrap();
        assert_eq!(status.code(), Some(0), "{args:?} with its stdout gone");
    }
}

#[test]
fn a_prompt_pipe_that_never_closes_is_announced_bounded_and_cancellable() {
    // Bounded: by the startup timeout, with a word about what warden waits for.
    let case = Case::new();
    let mut child = case
        .command(&["run", "claude", "--startup-timeout", "1500ms"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let held_open = child.stdin.take();
    let start = Instant::now();
    let status = wait_bounded(&mut child, Duration::from_secs(20));
    let elapsed = start.elapsed();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    drop(held_open);
    let status = status.expect("warden waited more than 20 s for a prompt on an open pipe");
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    assert!(err.contains("reading the prompt from stdin"), "{err}");
    assert!(err.contains("no prompt on stdin after"), "{err}");

    // Cancellable: SIGTERM while waiting.
    let case = Case::new();
    let mut child = case
        .command(&["run", "claude"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let held_open = child.stdin.take();
    catches_sigterm(child.id());
    kill(child.id(), "TERM");
    let status = wait_bounded(&mut child, Duration::from_secs(10));
    drop(held_open);
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(130),
        "SIGTERM ends the wait"
    );

    // A prompt that comes late, after the notice, is used.
    let case = Case::new();
    let bin = case.path().join("fake-claude");
    std::fs::write(
        &bin,
        format!("#!/bin/sh\ncat > '{}/got'\n", case.path().display()),
    )
    .unwrap();
    std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut child = case
        .command(&["run", "claude", "--agent-bin", bin.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    stdin.write_all(b"late prompt").unwrap();
    drop(stdin);
    let status = wait_bounded(&mut child, Duration::from_secs(20));
    assert!(status.is_some(), "the run ended");
    let got = std::fs::read_to_string(case.path().join("got")).unwrap_or_default();
    assert_eq!(got, "late prompt");
}

/// Whether this process has `sig` ignored (and so its children too).
fn ignored_here(sig: libc::c_int) -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("SigIgn:"))
                .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        })
        .is_some_and(|m| m & (1 << (sig - 1)) != 0)
}

#[test]
fn sighup_cancels_a_batch_and_still_writes_every_report() {
    if ignored_here(libc::SIGHUP) {
        eprintln!("skipped: the tests run with SIGHUP ignored (nohup), which warden keeps");
        return;
    }
    let case = Case::new();
    let file = case.path().join("b.toml");
    let up = case.path().join("up");
    std::fs::write(
        &file,
        format!(
            "[defaults]\nagent = \"exec\"\n[[run]]\nname = \"a\"\ncommand = [\"sh\", \"-c\", \"touch '{}'; sleep 600\"]\n[[run]]\nname = \"b\"\ncommand = [\"sleep\", \"600\"]\n",
            up.display()
        ),
    )
    .unwrap();
    let dir = case.path().join("batch");
    let mut child = case
        .command(&[
            "batch",
            file.to_str().unwrap(),
            "-j",
            "1",
            "--dir",
            dir.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while !up.exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(up.exists(), "the first run started");
    kill(child.id(), "HUP");
    let status = wait_bounded(&mut child, Duration::from_secs(20)).expect("the batch ended");
    assert_eq!(status.code(), Some(130), "SIGHUP cancels like SIGINT");
    let b: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("batch.json")).expect("batch.json"))
            .unwrap();
    for run in b["runs"].as_array().unwrap() {
        assert_eq!(run["verdict"], "cancelled", "{b}");
    }
    case.assert_nothing_left();
}

/// Whether `pid` runs warden's own code yet (std's start-up has set
/// SIGPIPE to ignored, which the test's `Command` reset for the child).
fn warden_started(pid: u32) -> bool {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    if exe.as_deref() != Some(Path::new(WARDEN).canonicalize().unwrap().as_path()) {
        return false;
    }
    signal_mask(pid, "SigIgn").is_some_and(|m| m & (1 << (libc::SIGPIPE - 1)) != 0)
}

/// One of the signal masks in `/proc/PID/status` (`SigIgn`, `SigCgt`).
fn signal_mask(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?;
    u64::from_str_radix(mask.trim(), 16).ok()
}

#[test]
fn sigterm_at_any_early_moment_cancels_and_leaves_nothing() {
    let case = Case::new();
    let mut codes = Vec::new();
    for i in 0..40u64 {
        let mut child = case
            .command(&["run", "--kill-grace", "2s", "exec", "--", "sleep", "600"])
            .env("WARDEN_RUN_DIR", case.path().join(format!("run-{i}")))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        while !warden_started(child.id()) && Instant::now() < until {
            std::hint::spin_loop();
        }
        std::thread::sleep(Duration::from_micros(500 * i));
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
            rustix::process::Signal::TERM,
        )
        .unwrap();
        let status = wait_bounded(&mut child, Duration::from_secs(20));
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        let code = status.and_then(|s| s.code());
        if code != Some(130) {
            codes.push((i, code, err));
        }
    }
    case.assert_nothing_left();
    assert!(
        codes.is_empty(),
        "SIGTERM after {{i}} x 0.5 ms did not give 130: {codes:?}"
    );
}

#[test]
fn bad_values_are_named_for_what_is_wrong_and_where() {
    let case = Case::new();
    let done = case.run(&["run", "--timeout", "101y", "exec", "--", "true"]);
    assert_eq!(done.code, 2);
    assert!(
        done.stderr.contains("--timeout is too large") && done.stderr.contains("100 years"),
        "{}",
        done.stderr
    );
    let done = case.run(&[
        "run",
        "--max-line",
        "99999999999999999999999",
        "exec",
        "--",
        "true",
    ]);
    assert_eq!(done.code, 2);
    assert!(
        done.stderr.contains("--max-line is too large"),
        "{}",
        done.stderr
    );

    let file = case.path().join("b.toml");
    std::fs::write(
        &file,
        "[defaults]\nagent = \"exec\"\nstall_timeout = \"300000000000y\"\n[[run]]\nname = \"a\"\ntimeout = \"soon\"\ncommand = [\"true\"]\n",
    )
    .unwrap();
    let done = case.run(&["batch", file.to_str().unwrap()]);
    assert_eq!(done.code, 2);
    assert!(
        done.stderr.contains("b.toml")
            && !done.stderr.contains("--timeout")
            && !done.stderr.contains("--stall-timeout"),
        "named as the file's keys: {}",
        done.stderr
    );
    assert!(
        done.stderr.contains("`timeout`") || done.stderr.contains("`stall_timeout` in [defaults]"),
        "{}",
        done.stderr
    );
    std::fs::write(
        &file,
        "[defaults]\nagent = \"exec\"\nstall_timeout = \"300000000000y\"\n[[run]]\ncommand = [\"true\"]\n",
    )
    .unwrap();
    let done = case.run(&["batch", file.to_str().unwrap()]);
    assert!(
        done.stderr.contains("`stall_timeout` in [defaults]") && done.stderr.contains("too large"),
        "{}",
        done.stderr
    );

    std::fs::write(
        &file,
        "[[run]]\nagent = \"exec\"\niterations = 4294967297\ncommand = [\"true\"]\n",
    )
    .unwrap();
    let done = case.run(&["batch", file.to_str().unwrap()]);
    assert_eq!(done.code, 2, "not cut to 1 iteration: {}", done.stderr);
    assert!(
        done.stderr.contains("`iterations`") && done.stderr.contains("too large"),
        "{}",
        done.stderr
    );

    for jobs in [
        "4611686018427387904",
        "18446744073709551615",
        "99999999999999999999999",
        "1025",
        "0",
    ] {
        let done = case.run(&["batch", file.to_str().unwrap(), "-j", jobs]);
        assert_eq!(done.code, 2, "-j {jobs}: {}", done.stderr);
        assert!(
            !done.stderr.contains("panicked"),
            "-j {jobs}: {}",
            done.stderr
        );
        assert!(
            done.stderr.contains("-j") || done.stderr.contains("--jobs"),
            "{}",
            done.stderr
        );
    }
    let done = case.run(&["batch", file.to_str().unwrap(), "-j", "4611686018427387904"]);
    assert!(done.stderr.contains("too large"), "{}", done.stderr);
}

#[test]
fn a_sighup_ignored_by_the_caller_stays_ignored() {
    let supported = std::process::Command::new("env")
        .args(["--ignore-signal=HUP", "true"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !supported {
        eprintln!("skipped: this `env` cannot start a program with SIGHUP ignored");
        return;
    }
    let case = Case::new();
    // As `nohup` starts it: SIGHUP ignored from the start.
    let mut child = std::process::Command::new("env")
        .args(["--ignore-signal=HUP", WARDEN, "run", "exec", "--"])
        .args(["sh", "-c", "echo up; sleep 1"])
        .current_dir(case.path())
        .env("WARDEN_TEST_MARK", &case.mark)
        .env("WARDEN_RUN_DIR", case.run_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    case.wait_for_output("stdout.log", "up", Duration::from_secs(10));
    kill(child.id(), "HUP");
    let status = wait_bounded(&mut child, Duration::from_secs(20)).expect("the run ended");
    assert_eq!(status.code(), Some(0), "the run went on to succeed");
    assert_eq!(report_of(&case)["verdict"], "succeeded");
}

#[test]
fn a_terminal_held_with_ctrl_s_does_not_stop_the_clocks() {
    let have_tmux = std::process::Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_tmux {
        eprintln!("skipped: tmux is not installed");
        return;
    }
    let case = Case::new();
    let code = case.path().join("code");
    let script = case.path().join("pane.sh");
    std::fs::write(
        &script,
        format!(
            "cd '{dir}'\nexport WARDEN_TEST_MARK='{mark}' WARDEN_RUN_DIR='{run}'\nstty ixon\n'{warden}' run --timeout 1s --kill-grace 200ms exec -- sh -c '{flood}'\necho $? > '{code}'\nsleep 60\n",
            dir = case.path().display(),
            mark = case.mark,
            run = case.run_dir().display(),
            warden = WARDEN,
            flood = "sleep 0.5; yes $(printf %0999d 0) | head -n 600; sleep 600",
            code = code.display()
        ),
    )
    .unwrap();
    let session = format!("warden-{}", case.mark);
    let tmux = |args: &[&str]| {
        std::process::Command::new("tmux")
            .args(args)
            .status()
            .is_ok_and(|s| s.success())
    };
    let script_cmd = format!("sh {}", script.display());
    assert!(
        tmux(&[
            "new-session",
            "-d",
            "-s",
            &session,
            "-x",
            "100",
            "-y",
            "20",
            &script_cmd
        ]),
        "tmux did not start"
    );
    // Ctrl-S: the terminal stops taking output, as a person scrolling back
    // in some terminals does; writes to it block once its buffer is full.
    std::thread::sleep(Duration::from_millis(200));
    tmux(&["send-keys", "-t", &session, "C-s"]);
    let until = Instant::now() + Duration::from_secs(30);
    while !code.exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    tmux(&["send-keys", "-t", &session, "C-q"]);
    let ended = std::fs::read_to_string(&code).ok();
    tmux(&["kill-session", "-t", &session]);
    case.assert_nothing_left();
    let ended =
        ended.expect("warden still ran 30 s into a --timeout 1s run: its terminal was held");
    assert_eq!(ended.trim(), "5", "timed_out's exit code");
    assert_eq!(report_of(&case)["verdict"], "timed_out");
}

#[test]
fn a_background_job_on_a_tostop_terminal_is_not_stopped_by_it() {
    let have_tmux = std::process::Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_tmux {
        eprintln!("skipped: tmux is not installed");
        return;
    }
    let case = Case::new();
    let code = case.path().join("code");
    let script = case.path().join("pane.sh");
    // Job control on, `stty tostop`: a background job that writes to the
    // terminal, or changes its modes, is sent SIGTTOU, which stops it.
    std::fs::write(
        &script,
        format!(
            "set -m\ncd '{dir}'\nexport WARDEN_TEST_MARK='{mark}' WARDEN_RUN_DIR='{run}'\nstty tostop\n'{warden}' run --timeout 1s --kill-grace 200ms exec -- sh -c 'echo hi; sleep 600' &\nwait $!\necho $? > '{code}'\nsleep 60\n",
            dir = case.path().display(),
            mark = case.mark,
            run = case.run_dir().display(),
            warden = WARDEN,
            code = code.display()
        ),
    )
    .unwrap();
    let session = format!("warden-{}", case.mark);
    let tmux = |args: &[&str]| {
        std::process::Command::new("tmux")
            .args(args)
            .status()
            .is_ok_and(|s| s.success())
    };
    let script_cmd = format!("sh {}", script.display());
    assert!(
        tmux(&[
            "new-session",
            "-d",
            "-s",
            &session,
            "-x",
            "100",
            "-y",
            "20",
            &script_cmd
        ]),
        "tmux did not start"
    );
    let until = Instant::now() + Duration::from_secs(20);
    while !code.exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    let ended = std::fs::read_to_string(&code).ok();
    // A stopped warden (and its run) is killed with the session.
    let stopped: Vec<i32> = case.survivors().into_iter().map(|(pid, _)| pid).collect();
    for pid in &stopped {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
    tmux(&["kill-session", "-t", &session]);
    case.assert_nothing_left();
    let ended = ended.expect("warden did not end: SIGTTOU stopped it in the background");
    assert_eq!(ended.trim(), "5", "timed_out's exit code");
    assert_eq!(report_of(&case)["verdict"], "timed_out");
}

#[test]
fn the_agents_escape_sequences_never_reach_the_terminal() {
    let case = Case::new();
    // Clear the screen, retitle the window, write the clipboard (OSC 52),
    // a CSI in its one-byte C1 form, a bare CR that would overwrite
    // warden's timestamp, and a right-to-left override, on both streams.
    let script = r#"printf 'a\033[2Jb\033]0;owned\007c\033]52;c;b3duZWQ=\007d\302\233e\rf\342\200\256g\n'; printf 'x\033[31my\rz\n' >&2"#;
    std::fs::write(case.path().join("agent.sh"), script).unwrap();
    // On a terminal (a dumb one, so warden draws no sequence of its own):
    // every control is shown as a symbol.
    let Some(screen) = crate::terminal::on_a_terminal(&case, "dumb", "run exec -- sh agent.sh")
    else {
        return;
    };
    assert!(screen.contains("EXIT=0"), "{screen}");
    for c in ['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}'] {
        assert!(
            !screen.contains(c),
            "{c:?} from the agent reached the terminal:\n{}",
            screen.escape_debug()
        );
    }
    assert!(
        screen.contains("a\u{241b}[2Jb\u{241b}]0;owned\u{2407}c"),
        "the sequences are shown as symbols:\n{screen}"
    );
    assert!(screen.contains("x\u{241b}[31my\u{240d}z"), "{screen}");
    // Into pipes, as into files, the command's bytes pass as they are (no
    // terminal reads them), and warden's own lines carry none of them.
    let done = case.run(&["run", "exec", "--", "sh", "agent.sh"]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(done.stdout.starts_with("a\x1b[2Jb\x1b]0;owned\x07c"));
    assert!(done.stderr.contains("x\x1b[31my\rz\n"));
    for l in done.stderr.lines().filter(|l| l.contains("warden")) {
        assert!(!l.contains('\u{1b}'), "{}", l.escape_debug());
    }
    // The logs keep the agent's bytes exactly.
    assert!(
        done.log("stdout.log")
            .starts_with(b"a\x1b[2Jb\x1b]0;owned\x07c"),
        "stdout.log is byte-exact"
    );
}

/// Waits (10 s at most) until process `pid` catches SIGTERM: before
/// warden has set its handler, on a slow start, the signal's default
/// action would kill it, which is not what the test is about.
fn catches_sigterm(pid: u32) {
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        if signal_mask(pid, "SigCgt").is_some_and(|m| m & (1 << (libc::SIGTERM - 1)) != 0) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("process {pid} never caught SIGTERM");
}
