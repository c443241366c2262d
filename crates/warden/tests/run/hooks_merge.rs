//! A session's hooks (`--host-setup`, `--setup`, `--on-success`,
//! `--finally`) and `--merge`, on the real binary against real git, with
//! the agent as hostile code that can write its work tree (and, outside a
//! sandbox, the repository's configuration): what it plants must never run
//! on the host, and a merge that cannot be made cleanly moves nothing.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Case, Finished, bwrap_works, git, kill, repo, unique_sleep, write_script};

/// What the agent's own git runs with in these tests, so that only
/// warden's git could set off a marker the test planted.
const AGENT_GIT: &str = "git -c core.hooksPath=/dev/null";

/// An agent that commits `work.txt`.
const COMMIT: &str = "echo work > work.txt && git -c core.hooksPath=/dev/null add work.txt && \
    git -c core.hooksPath=/dev/null commit -qm 'agent work'";

fn session(case: &Case) -> Value {
    let path = case.run_dir().join("session.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("session.json is JSON")
}

/// The session's line for its hook of `kind`.
fn hook<'a>(s: &'a Value, kind: &str) -> &'a Value {
    s["hooks"]
        .as_array()
        .and_then(|h| h.iter().find(|h| h["kind"] == kind))
        .unwrap_or_else(|| panic!("no {kind} hook in {s}"))
}

fn kinds(s: &Value) -> Vec<String> {
    s["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["kind"].as_str().unwrap().to_string())
        .collect()
}

fn error(s: &Value) -> &str {
    s["error"].as_str().unwrap_or_default()
}

/// `warden run exec FLAGS -- sh -c SCRIPT` in the case's directory.
fn exec(case: &Case, flags: &[&str], script: &str) -> Finished {
    let mut args = vec!["run", "exec", "--kill-grace", "200ms"];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    case.run(&args)
}

/// [`exec`] in `dir`, with `home` as HOME.
fn exec_in(case: &Case, dir: &Path, home: &Path, flags: &[&str], script: &str) -> Finished {
    let mut args = vec!["run", "exec", "--kill-grace", "200ms"];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    let mut cmd = case.command(&args);
    cmd.current_dir(dir).env("HOME", home);
    case.finished(cmd.output().unwrap(), Instant::now())
}

/// The case's repository (see [`repo`]), with warden's records kept out
/// of `git status`; its HEAD.
fn user_repo(case: &Case) -> String {
    let base = repo(case);
    exclude_records(case.path());
    base
}

fn exclude_records(dir: &Path) {
    std::fs::write(dir.join(".git/info/exclude"), "/run/\n/.warden/\n").unwrap();
}

/// Every ref of the repository at `dir`, with what it points at.
fn refs(dir: &Path) -> String {
    git(dir, &["for-each-ref", "--format=%(refname) %(objectname)"])
}

/// Everything `git status` can say of the checkout at `dir` (ignored
/// files too), but warden's records.
fn status(dir: &Path) -> String {
    let said = git(
        dir,
        &[
            "status",
            "--porcelain=v1",
            "--untracked-files=all",
            "--ignored",
        ],
    );
    but_records(&said)
}

/// `git status --porcelain --ignored` without warden's records.
fn but_records(said: &str) -> String {
    said.lines()
        .filter(|l| !l.starts_with("!! run/") && !l.starts_with("!! .warden/"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The session's branch.
fn branch(s: &Value) -> String {
    s["worktree"]["branch"].as_str().unwrap().to_string()
}

/// A script at `dir/name` that writes the marker `markers/name` when run.
fn marker_program(dir: &Path, markers: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    write_script(
        &path,
        &format!(
            "#!/bin/sh\ntouch '{}'\ncat \"$1\" >/dev/null 2>&1\nexit 0\n",
            markers.join(name).display()
        ),
    );
    path
}

fn markers_set(markers: &Path) -> Vec<String> {
    std::fs::read_dir(markers)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

// ---------------------------------------------------------------- hooks

#[test]
fn a_failing_setup_ends_the_session_before_any_agent_and_finally_still_runs() {
    let case = Case::new();
    let done = exec(
        &case,
        &[
            "--setup",
            "echo installing; exit 3",
            "--finally",
            "echo cleaned > finally.txt",
            "--iterations",
            "3",
        ],
        "touch agent-ran",
    );
    assert_eq!(done.code, 9, "{}", done.stderr);
    let s = session(&case);
    assert_eq!(s["verdict"], "setup_failed", "{s}");
    assert_eq!(s["stopped_because"], "setup_failed", "{s}");
    assert_eq!(s["runs"].as_array().unwrap().len(), 0, "{s}");
    assert_eq!(s["iterations_run"], 0, "{s}");
    assert!(!case.path().join("agent-ran").exists(), "an agent started");
    let setup_dir = case.run_dir().join("setup");
    let e = error(&s);
    assert!(
        e.contains("--setup")
            && e.contains("echo installing; exit 3")
            && e.contains("exited with status 3")
            && e.contains(&setup_dir.display().to_string()),
        "the error names the hook, its exit and its directory: {e}"
    );
    let setup = hook(&s, "setup");
    assert_eq!(setup["passed"], false);
    assert_eq!(setup["exit_code"], 3);
    assert_eq!(
        std::fs::read_to_string(setup_dir.join("stdout.log")).unwrap(),
        "installing\n"
    );
    assert_eq!(hook(&s, "finally")["passed"], true, "{s}");
    assert_eq!(
        std::fs::read_to_string(case.path().join("finally.txt")).unwrap(),
        "cleaned\n"
    );
    assert!(done.stderr.contains("--setup"), "{}", done.stderr);
}

#[test]
fn host_setup_runs_on_the_host_before_setup_which_runs_in_the_sandbox() {
    // Without bubblewrap, the order alone.
    let case = Case::new();
    let done = exec(
        &case,
        &[
            "--host-setup",
            "echo host-setup >> order.txt",
            "--setup",
            "echo setup >> order.txt",
        ],
        "echo agent >> order.txt",
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(
        std::fs::read_to_string(case.path().join("order.txt")).unwrap(),
        "host-setup\nsetup\nagent\n"
    );
    assert_eq!(kinds(&session(&case)), ["host_setup", "setup"]);

    if !bwrap_works() {
        eprintln!("skipped (the sandbox half): bwrap cannot make a PID namespace here");
        return;
    }
    // A host directory the sandbox shows read-only.
    let host = tempfile::tempdir_in("/var/tmp").unwrap();
    let home = tempfile::tempdir().unwrap();
    let case = Case::new();
    // Outside a sandbox only in a new worktree, which no agent wrote yet.
    user_repo(&case);
    let write = |name: &str| {
        format!(
            "(touch '{}') 2>/dev/null && echo {name}-wrote >> order.txt || echo {name}-refused >> order.txt",
            host.path().join(name).display()
        )
    };
    let done = exec_in(
        &case,
        case.path(),
        home.path(),
        &[
            "--sandbox",
            "bwrap",
            "--worktree",
            "--host-setup",
            &write("host-setup"),
            "--setup",
            &write("setup"),
        ],
        &write("agent"),
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    let s = session(&case);
    let worktree = PathBuf::from(s["worktree"]["path"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(worktree.join("order.txt")).unwrap(),
        "host-setup-wrote\nsetup-refused\nagent-refused\n"
    );
    assert!(host.path().join("host-setup").exists());
    assert!(
        !host.path().join("setup").exists(),
        "--setup ran on the host"
    );
}

#[test]
fn on_success_runs_only_after_a_session_that_succeeded_and_its_failure_is_hook_failed() {
    // Succeeded: it runs, after the agent.
    let case = Case::new();
    let done = exec(
        &case,
        &["--on-success", "cat agent.txt > on-success.txt"],
        "echo agent > agent.txt",
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(
        std::fs::read_to_string(case.path().join("on-success.txt")).unwrap(),
        "agent\n"
    );
    assert_eq!(session(&case)["verdict"], "succeeded");

    // The agent failed: it does not run; --finally does, and the verdict
    // stays the agent's.
    let case = Case::new();
    let done = exec(
        &case,
        &[
            "--on-success",
            "touch on-success.txt",
            "--finally",
            "touch finally.txt",
        ],
        "exit 1",
    );
    assert_eq!(done.code, 1, "{}", done.stderr);
    let s = session(&case);
    assert_eq!(s["verdict"], "agent_failed", "{s}");
    assert!(!case.path().join("on-success.txt").exists());
    assert!(case.path().join("finally.txt").exists());
    assert_eq!(kinds(&s), ["finally"]);

    // It fails: hook_failed (10), naming it.
    let case = Case::new();
    let done = exec(&case, &["--on-success", "exit 4"], "true");
    assert_eq!(done.code, 10, "{}", done.stderr);
    let s = session(&case);
    assert_eq!(s["verdict"], "hook_failed", "{s}");
    assert!(
        error(&s).contains("--on-success `exit 4` exited with status 4"),
        "{s}"
    );

    // --finally failing after a success: hook_failed too; after a failed
    // agent, the agent's verdict stays and the error says both.
    let case = Case::new();
    let done = exec(&case, &["--finally", "exit 5"], "true");
    assert_eq!(done.code, 10, "{}", done.stderr);
    assert_eq!(session(&case)["verdict"], "hook_failed");
    let case = Case::new();
    let done = exec(&case, &["--finally", "exit 5"], "exit 1");
    assert_eq!(done.code, 1, "{}", done.stderr);
    let s = session(&case);
    assert_eq!(s["verdict"], "agent_failed", "{s}");
    assert!(error(&s).contains("--finally `exit 5`"), "{s}");
}

#[test]
fn finally_still_runs_after_a_sigint_and_a_second_sigint_kills_it() {
    let case = Case::new();
    let agent_sleep = unique_sleep();
    let finally_sleep = unique_sleep();
    let finally = format!("touch cleaned; echo cleaning; {finally_sleep}");
    let child = case.spawn(&[
        "run",
        "exec",
        "--kill-grace",
        "200ms",
        "--on-success",
        "touch on-success",
        "--finally",
        &finally,
        "--",
        "sh",
        "-c",
        &format!("echo started; {agent_sleep}"),
    ]);
    case.wait_for_output("iteration-1/stdout.log", "started", Duration::from_secs(10));
    kill(child.id(), "INT");
    case.wait_for_output("finally/stdout.log", "cleaning", Duration::from_secs(10));
    kill(child.id(), "INT");
    let done = case.finished(child.wait_with_output().unwrap(), Instant::now());
    assert_eq!(done.code, 130, "{}", done.stderr);
    let s = session(&case);
    assert_eq!(s["verdict"], "cancelled", "{s}");
    assert!(case.path().join("cleaned").exists());
    assert!(
        !case.path().join("on-success").exists(),
        "--on-success ran after a cancel"
    );
    let f = hook(&s, "finally");
    assert_eq!(f["passed"], false, "{s}");
    assert_eq!(f["signal"], 9, "the second Ctrl-C killed it: {s}");
    case.assert_nothing_left();
}

#[test]
fn a_first_sigint_while_finally_runs_lets_it_finish() {
    let case = Case::new();
    let base = user_repo(&case);
    let mut child = case.spawn(&[
        "run",
        "exec",
        "--kill-grace",
        "200ms",
        "--worktree",
        "--merge",
        "--finally",
        &format!(
            "trap 'echo got-term; exit 1' TERM; echo cleaning; \
             while [ ! -e {d}/go ]; do sleep 0.01; done; echo done > {d}/cleaned",
            d = case.path().display()
        ),
        "--",
        "sh",
        "-c",
        COMMIT,
    ]);
    case.wait_for_output("finally/stdout.log", "cleaning", Duration::from_secs(10));
    kill(child.id(), "INT");
    // Once warden says it has the signal, the clean-up may go on.
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let mut said = Vec::new();
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(10)) {
        let noticed = line.contains("send it again");
        said.push(line);
        if noticed {
            break;
        }
    }
    std::fs::write(case.path().join("go"), "").unwrap();
    let status = child.wait().unwrap();
    reader.join().unwrap();
    said.extend(rx.try_iter());
    let stderr = said.join("\n");
    assert!(stderr.contains("send it again"), "{stderr}");
    let s = session(&case);
    let f = hook(&s, "finally");
    assert_eq!(
        f["passed"], true,
        "the first Ctrl-C ended the clean-up: {s}\n{stderr}"
    );
    assert!(case.path().join("cleaned").exists());
    // The session was stopped all the same: cancelled, and not merged.
    assert_eq!(status.code(), Some(130), "{s}\n{stderr}");
    assert_eq!(s["verdict"], "cancelled", "{s}");
    assert!(s["merged_into"].is_null(), "{s}");
    assert_eq!(git(case.path(), &["rev-parse", "main"]), base);
    case.assert_nothing_left();
}

#[test]
fn a_sigint_during_setup_cancels_the_session_and_finally_still_runs() {
    let case = Case::new();
    let setup_sleep = unique_sleep();
    let child = case.spawn(&[
        "run",
        "exec",
        "--kill-grace",
        "200ms",
        "--setup",
        &format!("echo installing; {setup_sleep}"),
        "--finally",
        "touch cleaned",
        "--",
        "sh",
        "-c",
        "touch agent-ran",
    ]);
    case.wait_for_output("setup/stdout.log", "installing", Duration::from_secs(10));
    kill(child.id(), "INT");
    let done = case.finished(child.wait_with_output().unwrap(), Instant::now());
    assert_eq!(done.code, 130, "{}", done.stderr);
    let s = session(&case);
    assert_eq!(s["verdict"], "cancelled", "{s}");
    assert_eq!(s["stopped_because"], "cancelled", "{s}");
    assert_eq!(s["runs"].as_array().unwrap().len(), 0, "{s}");
    assert!(!case.path().join("agent-ran").exists());
    assert!(
        case.path().join("cleaned").exists(),
        "--finally did not run"
    );
    case.assert_nothing_left();
}

#[test]
fn a_hook_that_hangs_is_ended_by_its_clock_with_its_whole_tree() {
    // --finally after a session that succeeded: hook_failed.
    let case = Case::new();
    let started = Instant::now();
    let done = exec(
        &case,
        &[
            "--hook-timeout",
            "300ms",
            "--finally",
            "sleep 600 & (sleep 600 &); setsid sleep 600 & echo waiting; sleep 600",
        ],
        "true",
    );
    assert_eq!(done.code, 10, "{}", done.stderr);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let s = session(&case);
    assert_eq!(s["verdict"], "hook_failed", "{s}");
    let v = hook(&s, "finally")["verdict"].as_str().unwrap().to_string();
    // Its one clock is both its wall and its stall clock.
    assert!(v == "timed_out" || v == "stalled", "{s}");
    assert!(error(&s).contains("--hook-timeout"), "{s}");
    case.assert_nothing_left();

    // --setup that prints nothing: no agent starts.
    let case = Case::new();
    let done = exec(
        &case,
        &[
            "--hook-timeout",
            "300ms",
            "--setup",
            "(sleep 600 &); sleep 600",
        ],
        "touch agent-ran",
    );
    assert_eq!(done.code, 9, "{}", done.stderr);
    let s = session(&case);
    assert_eq!(s["verdict"], "setup_failed", "{s}");
    let v = hook(&s, "setup")["verdict"].as_str().unwrap().to_string();
    assert!(v == "timed_out" || v == "stalled", "{s}");
    assert!(error(&s).contains("--hook-timeout"), "{s}");
    assert!(!case.path().join("agent-ran").exists());
    case.assert_nothing_left();
}

#[test]
fn with_bwrap_the_agent_cannot_make_its_check_or_hooks_run_on_the_host() {
    if !bwrap_works() {
        eprintln!("skipped: bwrap cannot make a PID namespace here");
        return;
    }
    let host = tempfile::tempdir_in("/var/tmp").unwrap();
    let home = tempfile::tempdir().unwrap();
    // The agent writes the program each of them runs.
    let agent = format!(
        "printf '%s\\n' '#!/bin/sh' '(touch \"{}/$1\") 2>/dev/null && echo wrote || echo refused' > hook.sh; chmod +x hook.sh",
        host.path().display()
    );
    let flags = [
        "--sandbox",
        "bwrap",
        "--check",
        "./hook.sh check",
        "--on-success",
        "./hook.sh on-success",
        "--finally",
        "./hook.sh finally",
    ];
    let case = Case::new();
    let done = exec_in(&case, case.path(), home.path(), &flags, &agent);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let s = session(&case);
    assert_eq!(s["stopped_because"], "check_passed", "{s}");
    for (dir, name) in [
        ("iteration-1-check", "check"),
        ("on-success", "on-success"),
        ("finally", "finally"),
    ] {
        let out = std::fs::read_to_string(case.run_dir().join(dir).join("stdout.log")).unwrap();
        assert_eq!(out, "refused\n", "{name}");
        assert!(!host.path().join(name).exists(), "{name} ran on the host");
    }

    // The same path given with --rw: each writes it (the path was reachable).
    let case = Case::new();
    let mut with_rw = flags.to_vec();
    let rw = host.path().display().to_string();
    with_rw.extend(["--rw", &rw]);
    let done = exec_in(&case, case.path(), home.path(), &with_rw, &agent);
    assert_eq!(done.code, 0, "{}", done.stderr);
    for name in ["check", "on-success", "finally"] {
        assert!(host.path().join(name).exists(), "{name}");
    }
}

// ---------------------------------------------------------------- merge

#[test]
fn merge_fast_forwards_the_starting_branch_and_its_checkout() {
    let case = Case::new();
    let base = user_repo(&case);
    let done = exec(&case, &["--worktree", "--merge"], COMMIT);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let s = session(&case);
    let head = git(case.path(), &["rev-parse", &branch(&s)]);
    assert_ne!(head, base);
    assert_eq!(s["merged_into"], "main", "{s}");
    assert_eq!(s["merge_commit"], head.as_str(), "a fast-forward: {s}");
    assert_eq!(git(case.path(), &["rev-parse", "main"]), head);
    assert_eq!(
        git(case.path(), &["symbolic-ref", "HEAD"]),
        "refs/heads/main"
    );
    assert_eq!(
        std::fs::read_to_string(case.path().join("work.txt")).unwrap(),
        "work\n",
        "the checkout moved with its branch"
    );
    assert_eq!(status(case.path()), "", "the checkout is clean");
    assert!(
        s["merge_conflicts"].as_array().is_none_or(|c| c.is_empty()),
        "{s}"
    );
}

#[test]
fn merge_moves_a_starting_branch_no_longer_checked_out_by_its_ref_alone() {
    let case = Case::new();
    let base = user_repo(&case);
    // The user switches their checkout to another branch meanwhile.
    let switch = format!(
        "git -C '{}' checkout -q -b elsewhere",
        case.path().display()
    );
    let done = exec(
        &case,
        &["--worktree", "--merge", "--host-setup", &switch],
        COMMIT,
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    let s = session(&case);
    let head = git(case.path(), &["rev-parse", &branch(&s)]);
    assert_eq!(s["merge_commit"], head.as_str(), "{s}");
    assert_eq!(git(case.path(), &["rev-parse", "main"]), head);
    assert_eq!(git(case.path(), &["rev-parse", "elsewhere"]), base);
    assert_eq!(
        git(case.path(), &["symbolic-ref", "HEAD"]),
        "refs/heads/elsewhere"
    );
    assert!(
        !case.path().join("work.txt").exists(),
        "the checkout stayed"
    );
    assert_eq!(status(case.path()), "");
}

/// `--host-setup` that commits `file` (with `text`) to main in the user's
/// checkout `dir`: the starting branch moves while the session works.
fn move_main(dir: &Path, file: &str, text: &str) -> String {
    format!(
        "cd '{}' && printf '{text}' > {file} && {AGENT_GIT} add {file} && {AGENT_GIT} commit -qm 'moved meanwhile'",
        dir.display()
    )
}

#[test]
fn merge_makes_a_merge_commit_when_the_starting_branch_moved() {
    let case = Case::new();
    let base = user_repo(&case);
    let done = exec(
        &case,
        &[
            "--worktree",
            "--merge",
            "--host-setup",
            &move_main(case.path(), "other.txt", "other\\n"),
        ],
        COMMIT,
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    let s = session(&case);
    let theirs = git(case.path(), &["rev-parse", &branch(&s)]);
    let main = git(case.path(), &["rev-parse", "main"]);
    assert_eq!(s["merge_commit"], main.as_str(), "{s}");
    assert_eq!(s["merged_into"], "main");
    let parents = git(case.path(), &["log", "-1", "--format=%P", "main"]);
    let parents: Vec<&str> = parents.split(' ').collect();
    assert_eq!(parents.len(), 2, "a merge commit: {parents:?}");
    assert_eq!(parents[1], theirs);
    assert_eq!(git(case.path(), &["rev-parse", "main~1~1"]), base);
    assert!(
        git(case.path(), &["log", "-1", "--format=%s", "main"]).contains(&branch(&s)),
        "the message names the branch"
    );
    for (f, text) in [("work.txt", "work\n"), ("other.txt", "other\n")] {
        assert_eq!(std::fs::read_to_string(case.path().join(f)).unwrap(), text);
    }
    assert_eq!(status(case.path()), "", "the checkout is clean");
}

#[test]
fn a_conflict_leaves_both_branches_and_the_checkout_as_they_were() {
    let case = Case::new();
    user_repo(&case);
    // The user's own work in progress, which nothing may touch.
    std::fs::write(case.path().join("notes.txt"), "mine\n").unwrap();
    git(case.path(), &["add", "notes.txt"]);
    git(case.path(), &["commit", "-qm", "notes"]);
    std::fs::write(case.path().join("notes.txt"), "mine, edited\n").unwrap();
    std::fs::write(case.path().join("scratch.txt"), "untracked\n").unwrap();
    // What the refs and the checkout are just before the merge (--finally
    // is the last thing before it), kept outside the repository.
    let snap = tempfile::tempdir().unwrap();
    let finally = format!(
        "git -C '{d}' for-each-ref > '{s}/refs' && git -C '{d}' status --porcelain=v1 --untracked-files=all --ignored > '{s}/status'",
        d = case.path().display(),
        s = snap.path().display()
    );
    let done = exec(
        &case,
        &[
            "--worktree",
            "--merge",
            "--host-setup",
            &move_main(case.path(), "README", "theirs\\n"),
            "--finally",
            &finally,
        ],
        &format!("echo agent > README && {AGENT_GIT} commit -qam 'agent work'"),
    );
    assert_eq!(done.code, 11, "{}", done.stderr);
    let s = session(&case);
    assert_eq!(s["verdict"], "merge_conflict", "{s}");
    assert_eq!(s["merge_conflicts"], serde_json::json!(["README"]), "{s}");
    assert!(
        s["merged_into"].is_null() && s["merge_commit"].is_null(),
        "{s}"
    );
    assert!(error(&s).contains("README"), "{s}");
    let before = std::fs::read_to_string(snap.path().join("refs")).unwrap();
    assert_eq!(
        git(case.path(), &["for-each-ref"]),
        before.trim_end(),
        "both branches are as they were"
    );
    let before = std::fs::read_to_string(snap.path().join("status")).unwrap();
    assert_eq!(status(case.path()), but_records(before.trim()));
    assert_eq!(
        std::fs::read_to_string(case.path().join("README")).unwrap(),
        "theirs\n"
    );
    assert_eq!(
        std::fs::read_to_string(case.path().join("notes.txt")).unwrap(),
        "mine, edited\n"
    );
    for leftover in ["MERGE_HEAD", "AUTO_MERGE", "ORIG_HEAD"] {
        assert!(
            !case.path().join(".git").join(leftover).exists(),
            "{leftover}"
        );
    }
    assert!(
        git(case.path(), &["stash", "list"]).is_empty(),
        "nothing was stashed"
    );
}

#[test]
fn local_changes_in_the_way_are_a_conflict_and_nothing_moves() {
    struct Way {
        what: &'static str,
        /// The user's state in their checkout before the session.
        prepare: fn(&Path),
        agent: &'static str,
        file: &'static str,
        /// The file's content in the checkout, kept.
        kept: &'static str,
    }
    let ways = [
        Way {
            what: "a change not committed",
            prepare: |d| std::fs::write(d.join("README"), "user's edit\n").unwrap(),
            agent: "echo agent > README && git -c core.hooksPath=/dev/null commit -qam 'agent work'",
            file: "README",
            kept: "user's edit\n",
        },
        Way {
            what: "a change not committed, with merge.autoStash on",
            prepare: |d| {
                git(d, &["config", "merge.autoStash", "true"]);
                std::fs::write(d.join("README"), "user's edit\n").unwrap();
            },
            agent: "echo agent > README && git -c core.hooksPath=/dev/null commit -qam 'agent work'",
            file: "README",
            kept: "user's edit\n",
        },
        Way {
            what: "an untracked file",
            prepare: |d| std::fs::write(d.join("new.txt"), "user's file\n").unwrap(),
            agent: "echo agent > new.txt && git -c core.hooksPath=/dev/null add new.txt && \
                    git -c core.hooksPath=/dev/null commit -qm 'agent work'",
            file: "new.txt",
            kept: "user's file\n",
        },
        Way {
            what: "an ignored file",
            prepare: |d| {
                std::fs::write(d.join(".gitignore"), ".env\n").unwrap();
                git(d, &["add", ".gitignore"]);
                git(d, &["commit", "-qm", "ignore .env"]);
                std::fs::write(d.join(".env"), "TOKEN=user's secret\n").unwrap();
            },
            agent: "echo TOKEN=agent > .env && git -c core.hooksPath=/dev/null add -f .env && \
                    git -c core.hooksPath=/dev/null commit -qm 'agent work'",
            file: ".env",
            kept: "TOKEN=user's secret\n",
        },
    ];
    for way in ways {
        let case = Case::new();
        user_repo(&case);
        (way.prepare)(case.path());
        let base = git(case.path(), &["rev-parse", "main"]);
        let status_before = status(case.path());
        let done = exec(&case, &["--worktree", "--merge"], way.agent);
        let what = way.what;
        assert_eq!(done.code, 11, "{what}: {}", done.stderr);
        let s = session(&case);
        assert_eq!(s["verdict"], "merge_conflict", "{what}: {s}");
        assert_eq!(
            s["merge_conflicts"],
            serde_json::json!([way.file]),
            "{what}: {s}"
        );
        assert!(error(&s).contains("local changes"), "{what}: {s}");
        assert_eq!(git(case.path(), &["rev-parse", "main"]), base, "{what}");
        assert_ne!(
            git(case.path(), &["rev-parse", &branch(&s)]),
            base,
            "{what}"
        );
        assert_eq!(
            std::fs::read_to_string(case.path().join(way.file)).unwrap(),
            way.kept,
            "{what}"
        );
        assert_eq!(status(case.path()), status_before, "{what}");
        assert!(git(case.path(), &["stash", "list"]).is_empty(), "{what}");
    }
}

#[test]
fn merge_is_refused_before_anything_starts_on_a_detached_head() {
    let case = Case::new();
    user_repo(&case);
    git(case.path(), &["checkout", "-q", "--detach"]);
    let before = refs(case.path());
    let done = exec(&case, &["--worktree", "--merge"], "touch agent-ran");
    assert_eq!(done.code, 2, "{}", done.stderr);
    assert!(done.stderr.contains("--merge"), "{}", done.stderr);
    assert!(done.stderr.contains("detached"), "{}", done.stderr);
    assert!(!case.path().join("agent-ran").exists());
    assert!(!case.run_dir().exists(), "a session directory was made");
    assert!(!case.path().join(".warden/worktrees").exists());
    assert_eq!(refs(case.path()), before, "no branch was made");

    // --merge without --worktree is refused as well.
    let case = Case::new();
    user_repo(&case);
    let done = exec(&case, &["--merge"], "touch agent-ran");
    assert_eq!(done.code, 2, "{}", done.stderr);
    assert!(done.stderr.contains("--merge"), "{}", done.stderr);
    assert!(!case.path().join("agent-ran").exists());
}

#[test]
fn a_session_that_failed_or_whose_check_failed_is_not_merged() {
    for (what, flags, agent, code, verdict) in [
        (
            "the agent failed",
            vec![],
            format!("{COMMIT}; exit 1"),
            1,
            "agent_failed",
        ),
        (
            "the check failed",
            vec!["--check", "false"],
            COMMIT.to_string(),
            8,
            "check_failed",
        ),
        (
            "--on-success failed",
            vec!["--on-success", "false"],
            COMMIT.to_string(),
            10,
            "hook_failed",
        ),
    ] {
        let case = Case::new();
        let base = user_repo(&case);
        let mut all = vec!["--worktree", "--merge"];
        all.extend(flags);
        let done = exec(&case, &all, &agent);
        assert_eq!(done.code, code, "{what}: {}", done.stderr);
        let s = session(&case);
        assert_eq!(s["verdict"], verdict, "{what}: {s}");
        assert!(s["merged_into"].is_null(), "{what}: {s}");
        assert_eq!(git(case.path(), &["rev-parse", "main"]), base, "{what}");
        assert_ne!(
            git(case.path(), &["rev-parse", &branch(&s)]),
            base,
            "{what}"
        );
        assert!(!case.path().join("work.txt").exists(), "{what}");
    }
}

/// A repository with one commit outside /tmp (which the sandbox replaces
/// with its own); its HEAD.
fn repo_outside_tmp() -> (tempfile::TempDir, String) {
    let user = tempfile::tempdir_in("/var/tmp").unwrap();
    let dir = user.path();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.name", "Test Agent"]);
    git(dir, &["config", "user.email", "agent@example.com"]);
    std::fs::write(dir.join("README"), "hello\n").unwrap();
    git(dir, &["add", "README"]);
    git(dir, &["commit", "-qm", "initial"]);
    exclude_records(dir);
    let base = git(dir, &["rev-parse", "HEAD"]);
    (user, base)
}

#[test]
fn merge_from_a_bwrap_sandbox_reaches_the_users_branch() {
    if !bwrap_works() {
        eprintln!("skipped: bwrap cannot make a PID namespace here");
        return;
    }
    let (user, base) = repo_outside_tmp();
    let dir = user.path();
    let home = tempfile::tempdir().unwrap();
    let case = Case::new();
    let done = exec_in(
        &case,
        dir,
        home.path(),
        &[
            "--sandbox",
            "bwrap",
            "--worktree",
            "--merge",
            "--host-setup",
            &move_main(dir, "other.txt", "other\\n"),
        ],
        "echo work > work.txt && git add work.txt && git commit -qm 'agent work'",
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    let s = session(&case);
    assert_eq!(s["worktree"]["own_repository"], true, "{s}");
    assert_eq!(s["merged_into"], "main", "{s}");
    let main = git(dir, &["rev-parse", "main"]);
    assert_eq!(s["merge_commit"], main.as_str());
    assert_eq!(
        git(dir, &["log", "-1", "--format=%P", "main"]),
        format!(
            "{} {}",
            git(dir, &["rev-parse", "main^1"]),
            git(dir, &["rev-parse", &branch(&s)])
        )
    );
    assert_eq!(git(dir, &["rev-parse", "main^1^"]), base);
    assert_eq!(
        std::fs::read_to_string(dir.join("work.txt")).unwrap(),
        "work\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("other.txt")).unwrap(),
        "other\n"
    );
    assert_eq!(status(dir), "");
}

/// A second commit in the case's repository: `data.txt`, five lines; a
/// change to its first line on one side and to its last on the other
/// merges cleanly as text, and only a merge driver would see it.
fn data_file(dir: &Path) {
    std::fs::write(dir.join("data.txt"), "1\n2\n3\n4\n5\n").unwrap();
    git(dir, &["add", "data.txt"]);
    git(dir, &["commit", "-qm", "data"]);
}

#[test]
fn nothing_of_the_repository_runs_during_a_merge_hooks_drivers_filters() {
    let case = Case::new();
    user_repo(&case);
    data_file(case.path());
    let markers = tempfile::tempdir().unwrap();
    let programs = tempfile::tempdir().unwrap();
    // The user's repository's own hooks.
    for h in [
        "post-merge",
        "reference-transaction",
        "post-checkout",
        "post-index-change",
    ] {
        let p = marker_program(programs.path(), markers.path(), &format!("user-{h}"));
        std::fs::copy(p, case.path().join(".git/hooks").join(h)).unwrap();
    }
    // The agent (outside a sandbox, so its git writes the repository's
    // configuration) names a merge driver and filters, selects them in
    // its branch's .gitattributes, and plants hooks of its own.
    let driver = marker_program(programs.path(), markers.path(), "merge-driver");
    let smudge = marker_program(programs.path(), markers.path(), "smudge");
    let clean = marker_program(programs.path(), markers.path(), "clean");
    let agent_hooks = programs.path().join("agent-hooks");
    std::fs::create_dir(&agent_hooks).unwrap();
    for h in ["post-merge", "reference-transaction"] {
        marker_program(&agent_hooks, markers.path(), &format!("agent-{h}"));
        std::fs::rename(agent_hooks.join(format!("agent-{h}")), agent_hooks.join(h)).unwrap();
    }
    let agent = format!(
        "{AGENT_GIT} config merge.evil.driver '{driver} %O %A %B' && \
         {AGENT_GIT} config filter.evil.smudge '{smudge}' && \
         {AGENT_GIT} config filter.evil.clean '{clean}' && \
         {AGENT_GIT} config core.hooksPath '{hooks}' && \
         printf '* merge=evil filter=evil\\n' > .gitattributes && \
         printf '1\\n2\\n3\\n4\\nfive\\n' > data.txt && \
         git -c core.hooksPath=/dev/null -c filter.evil.clean= -c filter.evil.smudge= add .gitattributes data.txt && \
         git -c core.hooksPath=/dev/null -c filter.evil.clean= -c filter.evil.smudge= commit -qm 'agent work'",
        driver = driver.display(),
        smudge = smudge.display(),
        clean = clean.display(),
        hooks = agent_hooks.display(),
    );
    let done = exec(
        &case,
        &[
            "--worktree",
            "--merge",
            "--host-setup",
            &move_main(case.path(), "data.txt", "one\\n2\\n3\\n4\\n5\\n"),
        ],
        &agent,
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    let s = session(&case);
    assert_eq!(s["merged_into"], "main", "{s}");
    assert_eq!(
        git(case.path(), &["log", "-1", "--format=%P", "main"])
            .split(' ')
            .count(),
        2,
        "a merge commit"
    );
    assert_eq!(
        std::fs::read_to_string(case.path().join("data.txt")).unwrap(),
        "one\n2\n3\n4\nfive\n",
        "git's own text merge, not the driver's"
    );
    assert_eq!(
        markers_set(markers.path()),
        Vec::<String>::new(),
        "programs ran"
    );
}

#[test]
fn a_merge_driver_named_outside_the_branch_does_not_run_either() {
    // The agent selects its driver where --attr-source does not reach:
    // the repository's info/attributes, and a core.attributesFile of its
    // own.
    for via in ["info", "attributes-file"] {
        let case = Case::new();
        user_repo(&case);
        data_file(case.path());
        let markers = tempfile::tempdir().unwrap();
        let programs = tempfile::tempdir().unwrap();
        let driver = marker_program(programs.path(), markers.path(), "merge-driver");
        let attributes = programs.path().join("attributes");
        let select = match via {
            "info" => {
                "printf '* merge=evil\\n' > \"$(git rev-parse --git-common-dir)/info/attributes\""
                    .to_string()
            }
            _ => format!(
                "printf '* merge=evil\\n' > '{a}' && {AGENT_GIT} config core.attributesFile '{a}'",
                a = attributes.display()
            ),
        };
        let agent = format!(
            "{AGENT_GIT} config merge.evil.driver '{driver} %O %A %B' && {select} && \
             printf '1\\n2\\n3\\n4\\nfive\\n' > data.txt && {AGENT_GIT} commit -qam 'agent work'",
            driver = driver.display(),
        );
        let done = exec(
            &case,
            &[
                "--worktree",
                "--merge",
                "--host-setup",
                &move_main(case.path(), "data.txt", "one\\n2\\n3\\n4\\n5\\n"),
            ],
            &agent,
        );
        assert_eq!(
            markers_set(markers.path()),
            Vec::<String>::new(),
            "{via}: the driver ran"
        );
        // The driver named cannot be run: the file is in conflict, and
        // nothing moved.
        assert_eq!(done.code, 11, "{via}: {}", done.stderr);
        let s = session(&case);
        assert_eq!(
            s["merge_conflicts"],
            serde_json::json!(["data.txt"]),
            "{via}: {s}"
        );
        assert_eq!(
            std::fs::read_to_string(case.path().join("data.txt")).unwrap(),
            "one\n2\n3\n4\n5\n",
            "{via}"
        );
    }
}

#[test]
fn hooks_the_agent_plants_in_the_repository_do_not_run_when_its_branch_is_merged() {
    let case = Case::new();
    user_repo(&case);
    let markers = tempfile::tempdir().unwrap();
    // Into the hooks directory its worktree shares with the user's
    // checkout, where its own git would find them.
    let plant = ["post-merge", "reference-transaction", "post-checkout", "post-index-change"]
        .map(|h| {
            format!(
                "printf '#!/bin/sh\\ntouch %s\\n' '{m}/agent-{h}' > \"$hooks/{h}\" && chmod +x \"$hooks/{h}\"",
                m = markers.path().display()
            )
        })
        .join(" && ");
    let agent = format!(
        "hooks=\"$(git rev-parse --git-path hooks)\" && mkdir -p \"$hooks\" && {plant} && {COMMIT}"
    );
    let done = exec(&case, &["--worktree", "--merge"], &agent);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let s = session(&case);
    assert_eq!(s["merged_into"], "main", "{s}");
    assert_eq!(
        git(case.path(), &["rev-parse", "main"]),
        git(case.path(), &["rev-parse", &branch(&s)]),
        "a fast-forward"
    );
    assert!(
        case.path().join(".git/hooks/post-merge").exists(),
        "the hooks were planted where git looks for them"
    );
    assert_eq!(
        markers_set(markers.path()),
        Vec::<String>::new(),
        "hooks ran"
    );
}

#[test]
fn a_sandboxed_sessions_commits_that_never_came_home_are_not_called_merged() {
    if !bwrap_works() {
        eprintln!("skipped: bwrap cannot make a PID namespace here");
        return;
    }
    let (user, base) = repo_outside_tmp();
    let dir = user.path();
    let home = tempfile::tempdir().unwrap();
    let case = Case::new();
    // A link in its repository's .git: warden fetches nothing from it.
    let done = exec_in(
        &case,
        dir,
        home.path(),
        &["--sandbox", "bwrap", "--worktree", "--merge"],
        "echo work > work.txt && git add work.txt && git commit -qm 'agent work' && \
         ln -s /etc/hostname .git/planted",
    );
    assert_eq!(done.code, 11, "{}", done.stderr);
    let s = session(&case);
    assert_eq!(s["verdict"], "merge_conflict", "{s}");
    assert!(
        s["merged_into"].is_null() && s["merge_commit"].is_null(),
        "{s}"
    );
    assert!(error(&s).contains("not merged"), "{s}");
    assert_eq!(git(dir, &["rev-parse", "main"]), base);
    assert_eq!(s["worktree"]["removed"], false, "the commits are kept: {s}");
    assert!(!dir.join("work.txt").exists());
}

#[test]
fn a_branch_the_agent_rewrote_to_an_unrelated_history_is_not_merged() {
    let case = Case::new();
    let base = user_repo(&case);
    // Its branch replaced by a history with nothing in common with main.
    let agent = format!(
        "b=$(git symbolic-ref --short HEAD) && {AGENT_GIT} checkout -q --orphan scratch && \
         {AGENT_GIT} rm -rfq . && echo all-new > new.txt && {AGENT_GIT} add new.txt && \
         {AGENT_GIT} commit -qm orphan && {AGENT_GIT} branch -q -M \"$b\""
    );
    let done = exec(&case, &["--worktree", "--merge"], &agent);
    assert_eq!(done.code, 11, "{}", done.stderr);
    let s = session(&case);
    assert_eq!(s["verdict"], "merge_conflict", "{s}");
    assert!(s["merged_into"].is_null(), "{s}");
    assert!(error(&s).contains("unrelated"), "{s}");
    assert_eq!(git(case.path(), &["rev-parse", "main"]), base);
    assert_eq!(status(case.path()), "");
    assert!(!case.path().join("new.txt").exists());
}

#[test]
fn a_hook_directory_the_agent_planted_is_not_written_through() {
    // Outside a sandbox the agent can reach the session's directory: it
    // plants the directory --finally's run is to have as a link to a
    // directory of the user's.
    let case = Case::new();
    let victim = tempfile::tempdir().unwrap();
    std::fs::write(victim.path().join("keep.txt"), "mine\n").unwrap();
    let agent = format!(
        "ln -s '{}' '{}'",
        victim.path().display(),
        case.run_dir().join("finally").display()
    );
    let done = exec(&case, &["--finally", "echo cleaned"], &agent);
    assert_eq!(done.code, 10, "{}", done.stderr);
    let s = session(&case);
    assert_eq!(s["verdict"], "hook_failed", "{s}");
    assert!(
        error(&s).contains("--finally `echo cleaned` could not start"),
        "{s}"
    );
    let names: Vec<String> = std::fs::read_dir(victim.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["keep.txt"], "warden wrote through the link");
}

#[test]
fn a_batchs_sessions_ending_together_all_merge_one_after_another() {
    let case = Case::new();
    let base = repo(&case);
    std::fs::write(
        case.path().join(".git/info/exclude"),
        "/batch/\n/.warden/\n/runs.toml\n",
    )
    .unwrap();
    let mut toml = String::from("[defaults]\nagent = \"exec\"\nworktree = true\nmerge = true\n\n");
    for n in 1..=6 {
        toml.push_str(&format!(
            "[[run]]\nname = \"r{n}\"\ncommand = [\"sh\", \"-c\", \"echo {n} > f{n} && {AGENT_GIT} add f{n} && {AGENT_GIT} commit -qm r{n}\"]\n"
        ));
    }
    std::fs::write(case.path().join("runs.toml"), toml).unwrap();
    // More sessions at once than this machine has cores: a lock one of
    // them waited for in a thread of the runtime held every thread.
    let mut child = case.spawn(&["batch", "runs.toml", "-j", "6", "--dir", "batch"]);
    let until = Instant::now() + Duration::from_secs(60);
    let ended = loop {
        if let Some(ended) = child.try_wait().unwrap() {
            break ended;
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("the batch never ended");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(ended.code(), Some(0), "{stderr}");
    let b: Value = serde_json::from_str(
        &std::fs::read_to_string(case.path().join("batch/batch.json")).unwrap(),
    )
    .unwrap();
    for r in b["runs"].as_array().unwrap() {
        assert_eq!(r["session"]["merged_into"], "main", "{r}");
    }
    for n in 1..=6 {
        assert_eq!(
            std::fs::read_to_string(case.path().join(format!("f{n}"))).unwrap(),
            format!("{n}\n")
        );
    }
    assert_eq!(
        git(
            case.path(),
            &["status", "--porcelain=v1", "--untracked-files=all"]
        ),
        "",
        "the checkout is clean"
    );
    let merged = git(
        case.path(),
        &["rev-list", "--count", &format!("{base}..main")],
    );
    // Six commits, and a merge commit for each but the first.
    assert_eq!(merged, "11");
}
