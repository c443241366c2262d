//! What an agent plants in its work tree must not hang, blind or fool
//! warden: FIFOs and devices where git or warden read a file, a git that
//! blocks, a `warden.toml` that is no text file. Also: which values are
//! masked as secrets, and git's background maintenance inside a run.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Case, Finished, git, is_root, kill, repo};

/// Waits for `child` at most `limit`; kills it (and fails) if it is still
/// running then: the hang the test is about.
fn wait_bounded(case: &Case, mut child: Child, limit: Duration, what: &str) -> Finished {
    let start = Instant::now();
    while start.elapsed() < limit {
        if child.try_wait().unwrap().is_some() {
            let out: Output = child.wait_with_output().unwrap();
            return case.finished(out, start);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    for (pid, _) in case.survivors() {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    panic!("warden still running after {limit:?}: {what}");
}

fn mkfifo(path: &Path) {
    let ok = Command::new("mkfifo").arg(path).status().unwrap().success();
    assert!(ok, "mkfifo {}", path.display());
}

// ---- FIFOs and special files in the repository ----

#[test]
fn a_fifo_planted_at_git_head_does_not_hang_warden_and_the_report_says_why() {
    let case = Case::new();
    repo(&case);
    let child = case.spawn(&[
        "run",
        "exec",
        "--timeout",
        "5s",
        "--",
        "sh",
        "-c",
        "rm .git/HEAD && mkfifo .git/HEAD && echo planted",
    ]);
    let done = wait_bounded(&case, child, Duration::from_secs(30), "FIFO at .git/HEAD");
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(
        done.elapsed < Duration::from_secs(15),
        "took {:?}",
        done.elapsed
    );
    let report = done.report();
    let error = report["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("could not collect commits") && error.contains("HEAD is a FIFO"),
        "the report must say why there are no commits: {report}"
    );
    case.assert_nothing_left();
}

#[test]
fn sigterm_while_git_is_stuck_reading_the_commits_ends_warden_at_once() {
    let case = Case::new();
    repo(&case);
    // HEAD moves, then the objects' alternates file becomes a FIFO:
    // HEAD and its ref are fine, so git starts and then blocks reading the
    // commits.
    let child = case.spawn(&[
        "run",
        "exec",
        "--timeout",
        "5s",
        "--",
        "sh",
        "-c",
        "git commit -q --allow-empty -m one && mkfifo .git/objects/info/alternates && echo planted",
    ]);
    case.wait_for_output("stdout.log", "planted", Duration::from_secs(10));
    // Commit collection starts once the agent is gone; give it a moment
    // to be stuck in git.
    std::thread::sleep(Duration::from_millis(700));
    kill(child.id(), "TERM");
    let done = wait_bounded(
        &case,
        child,
        Duration::from_secs(8),
        "SIGTERM swallowed while git blocks on a FIFO",
    );
    assert_eq!(done.code, 0, "the agent itself succeeded: {}", done.stderr);
    let report = done.report();
    let error = report["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("could not collect commits"),
        "the report must say the commits were not collected: {report}"
    );
    // git carried the marker: it was killed, not left blocked.
    case.assert_nothing_left();
}

#[test]
fn signals_stop_a_sessions_git_at_the_end_too() {
    let case = Case::new();
    repo(&case);
    let child = case.spawn(&[
        "run",
        "exec",
        "--iterations",
        "2",
        "--timeout",
        "5s",
        "--",
        "sh",
        "-c",
        "git commit -q --allow-empty -m one && mkfifo .git/objects/info/alternates && echo planted '<promise>COMPLETE</promise>'",
    ]);
    case.wait_for_output("iteration-1/stdout.log", "planted", Duration::from_secs(10));
    // The first signal stops the run's own commit collection, the second
    // the session's at its end.
    std::thread::sleep(Duration::from_millis(700));
    kill(child.id(), "TERM");
    std::thread::sleep(Duration::from_millis(700));
    kill(child.id(), "TERM");
    let done = wait_bounded(
        &case,
        child,
        Duration::from_secs(8),
        "SIGTERM swallowed while the session's git blocks on a FIFO",
    );
    let session: Value = serde_json::from_str(
        &std::fs::read_to_string(case.run_dir().join("session.json")).unwrap(),
    )
    .unwrap();
    let error = session["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("cancelled while git was reading the session's commits"),
        "session.json must say the commits were not collected: {session}\n{}",
        done.stderr
    );
    case.assert_nothing_left();
}

#[test]
fn git_head_linked_to_dev_zero_or_huge_does_not_hang_or_flood_warden() {
    for (what, plant) in [
        ("/dev/zero", "ln -sf /dev/zero .git/HEAD"),
        ("a huge HEAD", "rm .git/HEAD && truncate -s 3G .git/HEAD"),
    ] {
        let case = Case::new();
        repo(&case);
        let script = format!("{plant} && echo planted");
        let child = case.spawn(&["run", "exec", "--timeout", "5s", "--", "sh", "-c", &script]);
        let done = wait_bounded(&case, child, Duration::from_secs(40), what);
        assert_eq!(done.code, 0, "{what}: {}", done.stderr);
        let report = done.report();
        assert_eq!(report["verdict"], "succeeded", "{what}: {report}");
        // Unknown, not none: git could not be asked.
        assert!(report["commits"].is_null(), "{what}: {report}");
        assert!(
            report["error"]
                .as_str()
                .is_some_and(|e| e.contains("could not collect commits")),
            "{what}: {report}"
        );
        assert!(
            report["branch"].is_null(),
            "{what}: no branch is read from such a HEAD: {report}"
        );
        case.assert_nothing_left();
    }
}

// ---- warden.toml ----

fn assert_config_refused(done: &Finished, needles: &[&str]) {
    assert_eq!(
        done.code, 2,
        "expected a usage error; stderr:\n{}",
        done.stderr
    );
    for n in needles {
        assert!(
            done.stderr.contains(n),
            "`{n}` missing from:\n{}",
            done.stderr
        );
    }
    assert!(
        done.elapsed < Duration::from_secs(5),
        "refused at once, not after {:?}",
        done.elapsed
    );
    assert!(!done.run_dir.exists(), "no run should start on bad input");
}

fn run_bounded(case: &Case, what: &str) -> Finished {
    let child = case.spawn(&["run", "exec", "--", "true"]);
    wait_bounded(case, child, Duration::from_secs(10), what)
}

#[test]
fn a_fifo_at_warden_toml_is_refused_at_once() {
    let case = Case::new();
    mkfifo(&case.path().join("warden.toml"));
    let done = run_bounded(&case, "FIFO at warden.toml");
    assert_config_refused(&done, &["warden.toml", "FIFO", "not a regular file"]);

    // Named with --config, and reached through a link: the same.
    let case = Case::new();
    mkfifo(&case.path().join("pipe"));
    std::os::unix::fs::symlink("pipe", case.path().join("warden.toml")).unwrap();
    let done = run_bounded(&case, "link to a FIFO at warden.toml");
    assert_config_refused(&done, &["warden.toml", "FIFO"]);
    let child = case.spawn(&["run", "exec", "--config", "pipe", "--", "true"]);
    let done = wait_bounded(&case, child, Duration::from_secs(10), "--config FIFO");
    assert_config_refused(&done, &["pipe", "FIFO"]);
}

#[test]
fn a_directory_device_or_huge_warden_toml_is_refused_naming_the_file() {
    let case = Case::new();
    std::fs::create_dir(case.path().join("warden.toml")).unwrap();
    let done = run_bounded(&case, "directory at warden.toml");
    assert_config_refused(&done, &["warden.toml", "a directory"]);

    let case = Case::new();
    std::os::unix::fs::symlink("/dev/zero", case.path().join("warden.toml")).unwrap();
    let done = run_bounded(&case, "/dev/zero at warden.toml");
    assert_config_refused(&done, &["warden.toml", "character device"]);

    let case = Case::new();
    let big = std::fs::File::create(case.path().join("warden.toml")).unwrap();
    big.set_len(1 << 30).unwrap();
    let done = run_bounded(&case, "1 GiB warden.toml");
    assert_config_refused(&done, &["warden.toml", "bytes long"]);
}

#[test]
fn a_warden_toml_that_is_not_utf8_is_refused_naming_the_file() {
    let case = Case::new();
    std::fs::write(
        case.path().join("warden.toml"),
        b"timeout = \"5s\"\n# \xff\xfe\n",
    )
    .unwrap();
    let done = run_bounded(&case, "non-UTF-8 warden.toml");
    assert_config_refused(&done, &["warden.toml", "not UTF-8"]);
}

#[test]
fn a_warden_toml_linked_to_another_file_never_prints_its_lines() {
    let case = Case::new();
    let elsewhere = tempfile::tempdir().unwrap();
    let key = elsewhere.path().join("id_key");
    std::fs::write(
        &key,
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEF\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(&key, case.path().join("warden.toml")).unwrap();
    let done = run_bounded(&case, "warden.toml linked to a key");
    assert_config_refused(&done, &["warden.toml", "line 1"]);
    assert!(
        !done.stderr.contains("BEGIN") && !done.stderr.contains("MIIEvQ"),
        "the linked file's lines are printed:\n{}",
        done.stderr
    );
}

#[test]
fn an_unreadable_warden_toml_is_refused_naming_the_file() {
    let case = Case::new();
    let file = case.path().join("warden.toml");
    std::fs::write(&file, "timeout = \"5s\"\n").unwrap();
    set_mode(&file, 0o000);
    let done = if is_root() {
        // root reads anything: run warden as `nobody`.
        if !nobody_can_run_warden() {
            println!("skipped: `nobody` cannot reach the warden binary here");
            return;
        }
        set_mode(case.path(), 0o755);
        let mut cmd = Command::new("setpriv");
        cmd.args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            crate::support::WARDEN,
            "run",
            "exec",
            "--",
            "true",
        ])
        .current_dir(case.path())
        .env("WARDEN_TEST_MARK", &case.mark)
        .env("WARDEN_RUN_DIR", case.run_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let child = cmd.spawn().unwrap();
        wait_bounded(&case, child, Duration::from_secs(10), "unreadable")
    } else {
        run_bounded(&case, "unreadable warden.toml")
    };
    assert_config_refused(&done, &["warden.toml", "ermission denied"]);
}

// ---- the settings of the next warden ----

/// The lines of `stderr` that warn of `warden.toml` being changed.
fn config_warnings(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains("warden.toml was "))
        .collect()
}

#[test]
fn a_warden_toml_the_agent_writes_for_the_next_run_is_reported() {
    let case = Case::new();
    let planted = "echo 'sandbox = \"host\"' > warden.toml; echo done";
    let mut cmd = case.command(&["run", "exec", "--quiet", "--", "sh", "-c", planted]);
    cmd.env("GITHUB_ACTIONS", "true");
    let done = case.finished(cmd.output().unwrap(), Instant::now());
    assert_eq!(done.code, 0, "the verdict is the run's: {}", done.stderr);
    let toml = case.path().join("warden.toml");
    let warned = config_warnings(&done.stderr);
    assert_eq!(warned.len(), 2, "a line and an annotation: {}", done.stderr);
    assert!(
        warned[0].starts_with(&format!(
            "warden: warning: {} was created while warden ran",
            toml.display()
        )) && warned[0].contains("--config FILE"),
        "{}",
        warned[0]
    );
    assert!(
        warned[1].starts_with("::warning title=warden::"),
        "{}",
        warned[1]
    );

    // Read, and left alone: no warning. Changed by the agent: one.
    let _ = std::fs::remove_dir_all(case.run_dir());
    let done = case.run(&["run", "exec", "--", "sh", "-c", "cat warden.toml"]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(config_warnings(&done.stderr).is_empty(), "{}", done.stderr);
    let _ = std::fs::remove_dir_all(case.run_dir());
    let done = case.run(&[
        "run",
        "exec",
        "--iterations",
        "2",
        "--",
        "sh",
        "-c",
        "echo 'max_turns = 1000' >> warden.toml",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let warned = config_warnings(&done.stderr);
    assert_eq!(
        warned.len(),
        1,
        "once, at the session's end: {}",
        done.stderr
    );
    assert!(
        warned[0].contains("warden.toml was changed"),
        "{}",
        warned[0]
    );

    // A file named with --config is watched the same way.
    let named = case.path().join("settings.toml");
    std::fs::write(&named, "").unwrap();
    let _ = std::fs::remove_dir_all(case.run_dir());
    let script = format!("rm '{}'", named.display());
    let done = case.run(&[
        "run",
        "--config",
        named.to_str().unwrap(),
        "exec",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(
        done.stderr.contains(&format!(
            "{} was removed while warden ran: a warden given the same config file reads it",
            named.display()
        )),
        "{}",
        done.stderr
    );
}

#[test]
fn a_batch_says_once_that_a_run_wrote_the_warden_toml_of_its_directory() {
    let case = Case::new();
    let toml = "[defaults]\nagent = \"exec\"\n\n\
                [[run]]\nname = \"plants\"\ncommand = [\"sh\", \"-c\", \"echo 'timeout = \\\"0\\\"' > warden.toml\"]\n\n\
                [[run]]\nname = \"quiet\"\ncommand = [\"true\"]\n";
    let file = crate::batch::write(&case, toml);
    let dir = case.path().join("batch");
    let done = case.run(&["batch", &file, "-j", "1", "--dir", dir.to_str().unwrap()]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let warned = config_warnings(&done.stderr);
    assert_eq!(warned.len(), 1, "{}", done.stderr);
    assert!(
        warned[0].contains("warden.toml was created"),
        "{}",
        warned[0]
    );
    assert!(
        std::fs::read_to_string(case.path().join("warden.toml"))
            .unwrap()
            .contains("timeout"),
        "the run did plant it"
    );
}

#[test]
fn a_batch_says_when_a_run_rewrote_its_batch_file_or_a_resumed_run_its_warden_toml() {
    let case = Case::new();
    let toml = "[defaults]\nagent = \"exec\"\n\n\
                [[run]]\nname = \"edits\"\ncommand = [\"sh\", \"-c\", \"echo '# more' >> runs.toml\"]\n\n\
                [[run]]\nname = \"later\"\ncommand = [\"sh\", \"-c\", \"if [ -e go ]; then echo 'timeout = \\\"0\\\"' > warden.toml; fi; exit 1\"]\n";
    let file = crate::batch::write(&case, toml);
    let dir = case.path().join("batch");
    let done = case.run(&["batch", &file, "-j", "1", "--dir", dir.to_str().unwrap()]);
    assert_eq!(done.code, 1, "`later` failed: {}", done.stderr);
    let warned = config_warnings(&done.stderr);
    assert!(warned.is_empty(), "{}", done.stderr);
    assert!(
        done.stderr.contains(&format!(
            "{file} was changed while warden ran: a batch of this file runs what it says"
        )),
        "{}",
        done.stderr
    );

    // Resumed, the failed run runs again and this time plants warden.toml.
    std::fs::write(case.path().join("go"), "").unwrap();
    let again = case.run(&["batch", "--resume", dir.to_str().unwrap(), "--rerun-failed"]);
    assert_eq!(again.code, 1, "{}", again.stderr);
    let warned = config_warnings(&again.stderr);
    assert_eq!(warned.len(), 1, "{}", again.stderr);
    assert!(
        warned[0].contains("warden.toml was created"),
        "{}",
        warned[0]
    );
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn nobody_can_run_warden() -> bool {
    Command::new("setpriv")
        .args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            crate::support::WARDEN,
            "--version",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

// ---- blocking work and the clocks ----

/// A `git` first on PATH that is slow for `git status` only (which warden
/// asks at the end of a worktree session) and the real git otherwise.
fn slow_git_status(case: &Case, secs: u32) -> PathBuf {
    let real = String::from_utf8(
        Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let bin = case.path().join("slow-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = format!(
        "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = status ] && sleep {secs} && break; done\nexec {} \"$@\"\n",
        real.trim()
    );
    let path = bin.join("git");
    std::fs::write(&path, script).unwrap();
    set_mode(&path, 0o755);
    bin
}

#[test]
fn a_slow_git_in_one_run_of_a_batch_does_not_delay_another_runs_clocks() {
    let case = Case::new();
    repo(&case);
    let bin = slow_git_status(&case, 6);
    let toml = "[defaults]\nagent = \"exec\"\n\n\
         [[run]]\nname = \"slow-git\"\nworktree = true\ncommand = [\"sh\", \"-c\", \"echo quick\"]\n\n\
         [[run]]\nname = \"clocked\"\ntimeout = \"1500ms\"\nkill_grace = \"100ms\"\ncommand = [\"sleep\", \"600\"]\n";
    let file = case.path().join("runs.toml");
    std::fs::write(&file, toml).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let batch_dir = case.path().join("batch");
    let mut cmd = case.command(&[
        "batch",
        file.to_str().unwrap(),
        "-j",
        "2",
        "--dir",
        batch_dir.to_str().unwrap(),
    ]);
    cmd.env("PATH", &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    let done = wait_bounded(&case, child, Duration::from_secs(60), "batch");
    let clocked: Value = serde_json::from_str(
        &std::fs::read_to_string(batch_dir.join("clocked/iteration-1/run.json"))
            .unwrap_or_else(|e| panic!("clocked run.json: {e}\n{}", done.stderr)),
    )
    .unwrap();
    assert_eq!(clocked["verdict"], "timed_out", "{clocked}");
    let took = clocked["duration_ms"].as_u64().unwrap();
    assert!(
        took < 4000,
        "a 1.5s timeout fired after {took} ms: another run's git held the clocks\n{}",
        done.stderr
    );
    case.assert_nothing_left();
}

/// A `bwrap` first on PATH whose `--version` (the first step of warden's
/// probe) takes `secs`; the real bubblewrap otherwise.
fn slow_bwrap_probe(case: &Case, secs: u32) -> Option<PathBuf> {
    let real = String::from_utf8(
        Command::new("sh")
            .args(["-c", "command -v bwrap"])
            .output()
            .ok()?
            .stdout,
    )
    .ok()?;
    let real = real.trim();
    if real.is_empty() {
        return None;
    }
    let works = Command::new(real)
        .args(["--ro-bind", "/", "/", "--", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !works {
        return None;
    }
    let bin = case.path().join("slow-bwrap");
    std::fs::create_dir_all(&bin).unwrap();
    let script = format!("#!/bin/sh\n[ \"$1\" = --version ] && sleep {secs}\nexec {real} \"$@\"\n");
    let path = bin.join("bwrap");
    std::fs::write(&path, script).unwrap();
    set_mode(&path, 0o755);
    Some(bin)
}

#[test]
fn a_slow_bwrap_probe_in_one_run_of_a_batch_does_not_delay_another_runs_clocks() {
    let case = Case::new();
    let Some(bin) = slow_bwrap_probe(&case, 4) else {
        println!("skipped: bubblewrap cannot run here");
        return;
    };
    // The clocked run comes first, so it is running when the other run
    // probes bubblewrap.
    let toml = "[defaults]\nagent = \"exec\"\n\n\
         [[run]]\nname = \"clocked\"\ntimeout = \"1500ms\"\nkill_grace = \"100ms\"\ncommand = [\"sleep\", \"600\"]\n\n\
         [[run]]\nname = \"slow-probe\"\nsandbox = \"bwrap\"\ncommand = [\"true\"]\n";
    let file = case.path().join("runs.toml");
    std::fs::write(&file, toml).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let batch_dir = case.path().join("batch");
    let mut cmd = case.command(&[
        "batch",
        file.to_str().unwrap(),
        "-j",
        "2",
        "--dir",
        batch_dir.to_str().unwrap(),
    ]);
    cmd.env("PATH", &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    let done = wait_bounded(&case, child, Duration::from_secs(60), "batch");
    let clocked: Value = serde_json::from_str(
        &std::fs::read_to_string(batch_dir.join("clocked/iteration-1/run.json"))
            .unwrap_or_else(|e| panic!("clocked run.json: {e}\n{}", done.stderr)),
    )
    .unwrap();
    assert_eq!(clocked["verdict"], "timed_out", "{clocked}");
    let took = clocked["duration_ms"].as_u64().unwrap();
    assert!(
        took < 3500,
        "a 1.5s timeout fired after {took} ms: another run's bwrap probe held the clocks\n{}",
        done.stderr
    );
    case.assert_nothing_left();
}

// ---- git's background maintenance ----

#[test]
fn git_auto_maintenance_in_a_run_leaves_no_orphan() {
    let case = Case::new();
    repo(&case);
    // gc.auto = 1 makes the commit start automatic maintenance, which git
    // detaches into the background unless told not to.
    git(case.path(), &["config", "gc.auto", "1"]);
    let script = "mkdir d && i=0 && while [ $i -lt 2000 ]; do i=$((i+1)); echo $i > d/$i; done \
                  && git add d && git commit -qm many && echo committed";
    let done = case.run(&["run", "exec", "--timeout", "2m", "--", "sh", "-c", script]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let report = done.report();
    assert_eq!(
        report["commits"].as_array().map(Vec::len),
        Some(1),
        "{report}"
    );
    assert_eq!(
        report["orphans"].as_array().map(Vec::len),
        Some(0),
        "git's maintenance is no orphan of the agent: {report}"
    );
    assert_eq!(report["orphans_killed"], 0, "{report}");
    assert!(
        std::fs::read_dir(case.path().join(".git/objects/pack"))
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().ends_with(".pack")),
        "the maintenance ran, in the foreground"
    );
    case.assert_nothing_left();
}

// ---- which values are masked ----

const TOKEN: &str = "npm_5Fz8Qw2Lk9xYzT";
const GIVEN: &str = "s3cr3t-Given-Value";

#[test]
fn ordinary_host_values_are_not_masked_and_real_secrets_are_everywhere() {
    let case = Case::new();
    let script = format!(
        "echo user ubuntu fakery session-user; echo token={TOKEN}; echo \"given '{GIVEN}'\""
    );
    let mut cmd = case.command(&[
        "run",
        "exec",
        "--env",
        "MODE=fake",
        "--env",
        &format!("API_SECRET={GIVEN}"),
        "--json",
        "--",
        "sh",
        "-c",
        &script,
        "user",
    ]);
    cmd.env("XDG_SESSION_CLASS", "user")
        .env("DESKTOP_SESSION", "ubuntu")
        .env("SSH_AUTH_SOCK", "/run/user/1000/keyring/ssh")
        .env("NPM_TOKEN", TOKEN);
    let done = case.finished(cmd.output().unwrap(), Instant::now());
    assert_eq!(done.code, 0, "{}", done.stderr);

    let events = std::fs::read_to_string(done.run_dir.join("events.jsonl")).unwrap();
    let report = std::fs::read_to_string(done.run_dir.join("run.json")).unwrap();
    for (name, text) in [
        ("events.jsonl", &events),
        ("run.json", &report),
        ("--json", &done.stdout),
        ("the terminal", &done.stderr),
    ] {
        assert!(!text.contains(TOKEN), "{name} shows the token:\n{text}");
        assert!(
            !text.contains(GIVEN),
            "{name} shows the --env secret:\n{text}"
        );
        assert!(text.contains("token=***"), "{name}:\n{text}");
        assert!(text.contains("given '***'"), "{name}:\n{text}");
    }
    for (name, text) in [("events.jsonl", &events), ("run.json", &report)] {
        assert!(
            text.contains("user ubuntu fakery session-user"),
            "{name}: ordinary words are masked:\n{text}"
        );
    }
    let report = done.report();
    let command = report["command"].as_array().unwrap();
    assert_eq!(
        command.last().unwrap(),
        "user",
        "the command line keeps `user`: {report}"
    );
}

#[test]
fn a_secret_too_short_to_mask_is_warned_about() {
    let case = Case::new();
    let done = case.run(&["run", "exec", "--env", "API_TOKEN=abc12", "--", "true"]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(
        done.stderr.contains("--env API_TOKEN") && done.stderr.contains("too few to be masked"),
        "{}",
        done.stderr
    );
    let case = Case::new();
    let done = case.run(&["run", "exec", "--env", "DEBUG=1", "--", "true"]);
    assert!(!done.stderr.contains("masked"), "{}", done.stderr);
}
