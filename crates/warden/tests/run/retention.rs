//! Retention: `warden gc` on the directories of real runs and sessions,
//! aged with `touch -d`; never one in use, never through a planted link.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{Case, git, kill, repo};

/// `warden` in the case's directory with the default run directory
/// (`.warden/runs/<id>`), not the harness's fixed one.
fn warden(case: &Case, args: &[&str]) -> Command {
    let mut cmd = case.command(args);
    cmd.env_remove("WARDEN_RUN_DIR")
        .env_remove("WARDEN_KEEP_RUNS")
        .env_remove("WARDEN_KEEP_DAYS");
    cmd
}

fn run_ok(case: &Case, args: &[&str]) -> (i32, String, String) {
    let out = warden(case, args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The directories in `dir`, sorted.
fn dirs(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn age(path: &Path, days: u32) {
    let st = Command::new("touch")
        .args(["-h", "-d", &format!("{days} days ago")])
        .arg(path)
        .status()
        .unwrap();
    assert!(st.success());
}

/// Three real runs, oldest first.
fn three_runs(case: &Case) -> Vec<PathBuf> {
    for _ in 0..3 {
        let (code, _, err) = run_ok(case, &["run", "exec", "-q", "--", "true"]);
        assert_eq!(code, 0, "{err}");
    }
    let runs = case.path().join(".warden/runs");
    let names = dirs(&runs);
    assert_eq!(names.len(), 3, "{names:?}");
    names.iter().map(|n| runs.join(n)).collect()
}

#[test]
fn gc_removes_old_runs_keeps_the_newest_and_never_follows_a_link() {
    let case = Case::new();
    let runs = three_runs(&case);
    let root = case.path().join(".warden/runs");
    // What an agent could plant: links to something outside, in a run
    // directory that will go, and among the run directories.
    let outside = case.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("precious"), "keep me").unwrap();
    std::os::unix::fs::symlink(&outside, runs[0].join("dir-link")).unwrap();
    std::os::unix::fs::symlink(outside.join("precious"), runs[0].join("file-link")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("planted")).unwrap();
    age(&runs[0], 10);
    age(&runs[1], 5);

    // A dry run lists what would go and why, and touches nothing.
    let (code, out, err) = run_ok(&case, &["gc", "--keep-days", "3", "--dry-run"]);
    assert_eq!(code, 0, "{err}");
    for r in &runs[..2] {
        assert!(
            out.contains(&format!("would remove run {}", r.display())),
            "{out}"
        );
    }
    assert!(out.contains("more than keep_days 3"), "{out}");
    assert!(out.contains("nothing was touched"), "{out}");
    assert!(
        runs.iter().all(|r| r.join("run.json").is_file()),
        "a dry run removed something"
    );
    let (code, out, err) = run_ok(&case, &["gc", "--keep-days", "3", "--dry-run", "--json"]);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).expect("one JSON document");
    let items = doc["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{doc}");
    assert!(
        items
            .iter()
            .all(|i| i["kind"] == "run" && i["action"] == "would_remove"),
        "{doc}"
    );
    assert!(runs.iter().all(|r| r.join("run.json").is_file()));

    // keep_days: the two old ones go, the links with them, never their
    // target.
    let (code, out, err) = run_ok(&case, &["gc", "--keep-days", "3"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!runs[0].exists() && !runs[1].exists(), "{out}");
    assert!(runs[2].join("run.json").is_file(), "{out}");
    assert_eq!(
        std::fs::read_to_string(outside.join("precious")).unwrap(),
        "keep me",
        "gc followed a link"
    );
    assert!(
        root.join("planted").symlink_metadata().is_ok(),
        "a link among the runs is not a run: left alone"
    );

    // keep_runs from warden.toml: the newest N stay.
    let more = three_runs_more(&case, 2);
    std::fs::write(case.path().join("warden.toml"), "keep_runs = 2\n").unwrap();
    let (code, out, err) = run_ok(&case, &["gc"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("not among the newest 2 runs"), "{out}");
    let left = dirs(&root);
    assert_eq!(left.len(), 2, "{left:?}\n{out}");
    for m in &more {
        assert!(m.exists(), "the newest were kept: {left:?}");
    }
    assert_eq!(
        std::fs::read_to_string(outside.join("precious")).unwrap(),
        "keep me"
    );
}

/// `n` more runs, a little apart so their times order them; their dirs.
fn three_runs_more(case: &Case, n: usize) -> Vec<PathBuf> {
    let root = case.path().join(".warden/runs");
    let before = dirs(&root);
    for _ in 0..n {
        std::thread::sleep(Duration::from_millis(20));
        let (code, _, err) = run_ok(case, &["run", "exec", "-q", "--", "true"]);
        assert_eq!(code, 0, "{err}");
    }
    dirs(&root)
        .into_iter()
        .filter(|d| !before.contains(d))
        .map(|d| root.join(d))
        .collect()
}

#[test]
fn gc_never_removes_a_run_in_progress() {
    let case = Case::new();
    let mut child = warden(&case, &["run", "exec", "-q", "--", "sleep", "30"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let root = case.path().join(".warden/runs");
    let until = Instant::now() + Duration::from_secs(20);
    let run = loop {
        if let Some(d) = dirs(&root).first()
            && root.join(d).join("run.json").is_file()
        {
            break root.join(d);
        }
        assert!(Instant::now() < until, "the run never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    // A session between two iterations runs nothing, and is in use all
    // the same: its warden holds its directory.
    let mut session = warden(
        &case,
        &[
            "run",
            "exec",
            "-q",
            "--iterations",
            "2",
            "--",
            "sh",
            "-c",
            "sleep 30",
        ],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let sessions = case.path().join(".warden/sessions");
    let until = Instant::now() + Duration::from_secs(20);
    let session_dir = loop {
        if let Some(d) = dirs(&sessions).first()
            && !dirs(&sessions.join(d)).is_empty()
        {
            break sessions.join(d);
        }
        assert!(Instant::now() < until, "the session never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    age(&run, 30);
    age(&session_dir, 30);
    let (code, out, err) = run_ok(&case, &["gc", "--keep-runs", "0", "--keep-days", "1"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        run.join("run.json").is_file(),
        "a running run was removed:\n{out}"
    );
    assert!(
        session_dir.is_dir(),
        "a running session was removed:\n{out}"
    );
    assert_eq!(out.matches("in use:").count(), 2, "{out}");

    // Once they have ended, they go.
    for c in [&mut child, &mut session] {
        kill(c.id(), "TERM");
        assert_eq!(c.wait().unwrap().code(), Some(130));
    }
    let (code, out, err) = run_ok(&case, &["gc", "--keep-runs", "0"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!run.exists() && !session_dir.exists(), "{out}");
    case.assert_nothing_left();
}

#[test]
fn gc_removes_the_clean_worktrees_of_sessions_that_are_gone_and_keeps_dirty_ones() {
    let case = Case::new();
    repo(&case);
    let session = |script: &str| {
        let (code, _, err) = run_ok(
            &case,
            &[
                "run",
                "exec",
                "-q",
                "--worktree",
                "--keep-worktree",
                "--",
                "sh",
                "-c",
                script,
            ],
        );
        assert_eq!(code, 0, "{err}");
    };
    session("true");
    std::thread::sleep(Duration::from_millis(20));
    session("echo work > uncommitted.txt");
    let worktrees = case.path().join(".warden/worktrees");
    let sessions = case.path().join(".warden/sessions");
    assert_eq!(dirs(&worktrees).len(), 2);
    assert_eq!(dirs(&sessions).len(), 2);
    let branches = || {
        git(
            case.path(),
            &[
                "for-each-ref",
                "--format=%(refname:short) %(objectname)",
                "refs/heads/warden/",
            ],
        )
    };
    let branches_before = branches();
    assert_eq!(branches_before.lines().count(), 2);

    // While their sessions are kept, their worktrees are too.
    let (code, out, err) = run_ok(&case, &["gc", "--keep-runs", "5"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(dirs(&worktrees).len(), 2, "{out}");

    let (code, out, err) = run_ok(&case, &["gc", "--keep-runs", "0", "--dry-run"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(dirs(&sessions).len(), 2, "a dry run removed a session");
    assert_eq!(dirs(&worktrees).len(), 2, "a dry run removed a worktree");
    assert!(out.contains("would remove worktree"), "{out}");

    // Something that is no worktree: git would answer for the repository
    // around it, so it is left alone.
    std::fs::create_dir(worktrees.join("not-a-worktree")).unwrap();
    std::fs::write(worktrees.join("not-a-worktree/file"), "x").unwrap();

    let (code, out, err) = run_ok(&case, &["gc", "--keep-runs", "0"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(dirs(&sessions).is_empty(), "{out}");
    let left: Vec<String> = dirs(&worktrees)
        .into_iter()
        .filter(|d| d != "not-a-worktree")
        .collect();
    assert_eq!(
        left.len(),
        1,
        "the clean one goes, the dirty one stays: {out}"
    );
    assert!(
        worktrees.join(&left[0]).join("uncommitted.txt").is_file(),
        "{out}"
    );
    assert!(out.contains("uncommitted changes"), "{out}");
    assert!(worktrees.join("not-a-worktree/file").is_file(), "{out}");
    assert!(out.contains("not a git worktree"), "{out}");
    assert!(out.contains("removed worktree"), "{out}");
    // git no longer lists the removed one; the branches keep their commits.
    let listed = git(case.path(), &["worktree", "list"]);
    assert_eq!(listed.lines().count(), 2, "{listed}");
    assert_eq!(branches(), branches_before);
}

#[test]
fn keep_runs_applies_after_each_run_and_bad_values_are_refused() {
    let case = Case::new();
    std::fs::write(case.path().join("warden.toml"), "keep_runs = 2\n").unwrap();
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(20));
        let (code, _, err) = run_ok(&case, &["run", "exec", "-q", "--", "true"]);
        assert_eq!(code, 0, "{err}");
    }
    let (_, _, err) = run_ok(&case, &["run", "exec", "-q", "--", "true"]);
    assert!(err.contains("warden: gc: removed run"), "{err}");
    assert_eq!(dirs(&case.path().join(".warden/runs")).len(), 2);

    std::fs::remove_file(case.path().join("warden.toml")).unwrap();
    let (code, _, err) = run_ok(&case, &["gc", "--keep-days", "soon"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("keep-days") && err.contains("whole number"),
        "{err}"
    );
    let (code, _, err) = run_ok(&case, &["gc"]);
    assert_eq!(code, 2);
    assert!(err.contains("--keep-runs"), "{err}");
}

#[test]
fn a_batch_in_progress_is_neither_removed_nor_resumed_by_another_warden() {
    let case = Case::new();
    let file = crate::batch::write(
        &case,
        "[defaults]\nagent = \"exec\"\n[[run]]\nname = \"slow\"\ncommand = [\"sleep\", \"30\"]\n",
    );
    let mut batch = warden(&case, &["batch", &file, "-q"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let batches = case.path().join(".warden/batches");
    let until = Instant::now() + Duration::from_secs(20);
    let dir = loop {
        if let Some(d) = dirs(&batches).first()
            && dirs(&batches.join(d)).contains(&"slow".to_string())
        {
            break batches.join(d);
        }
        assert!(Instant::now() < until, "the batch never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    let (code, out, err) = run_ok(&case, &["gc", "--keep-runs", "0"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(dir.is_dir(), "a running batch was removed:\n{out}");
    assert!(
        out.contains("kept batch") && out.contains("in use:"),
        "{out}"
    );

    let (code, _, err) = run_ok(&case, &["batch", "--resume", dir.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(err.contains("another warden is running it"), "{err}");
    // Refused before it read or moved anything: the running entry's
    // directory was not moved aside.
    assert!(dir.join("slow").is_dir(), "{err}");
    assert!(!dir.join("attempts").exists(), "{err}");

    kill(batch.id(), "TERM");
    batch.wait().unwrap();
    let (code, out, err) = run_ok(&case, &["gc", "--keep-runs", "0"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!dir.exists(), "{out}");
    case.assert_nothing_left();
}

#[test]
fn a_bad_kind_directory_is_a_failure_of_its_own_and_gc_goes_on() {
    let case = Case::new();
    let runs = three_runs(&case);
    // An agent replaces `.warden/batches` with a link: gc reports it, and
    // still does (and says) the rest.
    let outside = case.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, case.path().join(".warden/batches")).unwrap();
    let (code, out, err) = run_ok(&case, &["gc", "--keep-runs", "0"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(runs.iter().all(|r| !r.exists()), "{out}{err}");
    for r in &runs {
        assert!(
            out.contains(&format!("removed run {}", r.display())),
            "{out}"
        );
    }
    assert!(
        out.contains("failed to remove batch") && out.contains("symbolic link"),
        "{out}"
    );
    assert!(!out.contains("a directory it writes in"), "{out}");
    assert!(outside.is_dir());
}

#[test]
fn the_gc_after_a_run_spares_that_run() {
    let case = Case::new();
    std::fs::write(case.path().join("warden.toml"), "keep_runs = 0\n").unwrap();
    let (code, _, err) = run_ok(&case, &["run", "exec", "--", "true"]);
    assert_eq!(code, 0, "{err}");
    let runs = dirs(&case.path().join(".warden/runs"));
    assert_eq!(runs.len(), 1, "the run that just ended was removed: {err}");
    // The next run removes it, and is spared in turn.
    let (code, _, err) = run_ok(&case, &["run", "exec", "--", "true"]);
    assert_eq!(code, 0, "{err}");
    let after = dirs(&case.path().join(".warden/runs"));
    assert_eq!(after.len(), 1, "{err}");
    assert_ne!(after, runs, "{err}");

    // The same for a session: its directory and its runs stay.
    let (code, _, err) = run_ok(&case, &["run", "exec", "--iterations", "2", "--", "true"]);
    assert_eq!(code, 0, "{err}");
    let sessions = case.path().join(".warden/sessions");
    assert_eq!(dirs(&sessions).len(), 1, "{err}");
    let session = sessions.join(&dirs(&sessions)[0]);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(session.join("session.json")).unwrap())
            .unwrap();
    for r in doc["runs"].as_array().unwrap() {
        let dir = PathBuf::from(r["run_dir"].as_str().unwrap());
        assert!(dir.join("run.json").is_file(), "{err}");
    }
}

#[test]
fn gc_keeps_the_worktree_of_a_batch_started_in_a_subdirectory() {
    let case = Case::new();
    repo(&case);
    let sub = case.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    // A project of its own in `sub` (its warden.toml): the batch goes in
    // `sub/.warden/batches`, not at the repository's top.
    std::fs::write(sub.join("warden.toml"), "").unwrap();
    let file = crate::batch::write(
        &case,
        "[defaults]\nagent = \"exec\"\nworktree = true\nkeep_worktree = true\n\
         [[run]]\nname = \"one\"\ncommand = [\"true\"]\n",
    );
    let mut cmd = warden(&case, &["batch", &file, "-q"]);
    cmd.current_dir(&sub);
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let worktrees = case.path().join(".warden/worktrees");
    assert_eq!(dirs(&worktrees).len(), 1, "{out:?}");
    assert_eq!(dirs(&sub.join(".warden/batches")).len(), 1);

    let mut cmd = warden(&case, &["gc", "--keep-runs", "10"]);
    cmd.current_dir(&sub);
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        dirs(&worktrees).len(),
        1,
        "a worktree its batch's session still names was removed: {text}"
    );
    // From the top of the repository, which does not look in `sub`: the
    // worktree's owner file leads gc to the session that names it.
    let (code, out, err) = run_ok(&case, &["gc", "--keep-runs", "10"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(dirs(&worktrees).len(), 1, "removed from the top: {out}");
    // Once that session is gone, the worktree goes, with its owner file.
    std::fs::remove_dir_all(sub.join(".warden/batches")).unwrap();
    let (code, out, err) = run_ok(&case, &["gc", "--keep-runs", "10"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(dirs(&worktrees).is_empty(), "{out}");
    let left: Vec<_> = std::fs::read_dir(&worktrees)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn gc_keeps_a_worktree_with_ignored_files() {
    let case = Case::new();
    repo(&case);
    // Ignored in every worktree of the repository.
    std::fs::write(case.path().join(".git/info/exclude"), "secret.env\n").unwrap();
    let (code, _, err) = run_ok(
        &case,
        &[
            "run",
            "exec",
            "-q",
            "--worktree",
            "--keep-worktree",
            "--",
            "sh",
            "-c",
            "echo KEY=1 > secret.env",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let worktrees = case.path().join(".warden/worktrees");
    let (code, out, err) = run_ok(&case, &["gc", "--keep-runs", "0"]);
    assert_eq!(code, 0, "{out}{err}");
    let left = dirs(&worktrees);
    assert_eq!(left.len(), 1, "{out}");
    assert!(
        worktrees.join(&left[0]).join("secret.env").is_file(),
        "{out}"
    );
    assert!(out.contains("ignored files"), "{out}");
}

#[test]
fn two_gc_at_once_report_no_spurious_failure() {
    let case = Case::new();
    let runs = case.path().join(".warden/runs");
    for round in 0..3 {
        for i in 0..300 {
            let d = runs.join(format!("r{round}-{i:03}"));
            std::fs::create_dir_all(d.join("sub")).unwrap();
            for f in 0..10 {
                std::fs::write(d.join(format!("f{f}")), "x").unwrap();
                std::fs::write(d.join("sub").join(format!("f{f}")), "x").unwrap();
            }
        }
        let spawn = || {
            warden(&case, &["gc", "--keep-runs", "0"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (spawn(), spawn());
        for child in [a, b] {
            let out = child.wait_with_output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            // Whatever the other one removed first is gone, as asked:
            // not a failure.
            assert_eq!(out.status.code(), Some(0), "round {round}: {text}");
            assert!(!text.contains("failed to remove"), "round {round}: {text}");
        }
        assert!(dirs(&runs).is_empty());
    }
}

#[test]
fn gc_leaves_the_users_own_worktree_entries_alone() {
    let case = Case::new();
    repo(&case);
    // The user's own worktree, on a disk that is not mounted now: git
    // lists it as prunable; `git worktree prune` would drop it.
    let mine = case.path().join("../").join(format!(
        "mine-{}",
        case.path().file_name().unwrap().to_string_lossy()
    ));
    git(
        case.path(),
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "mine",
            mine.to_str().unwrap(),
        ],
    );
    std::fs::remove_dir_all(&mine).unwrap();
    let (code, _, err) = run_ok(
        &case,
        &[
            "run",
            "exec",
            "-q",
            "--worktree",
            "--keep-worktree",
            "--",
            "true",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = run_ok(&case, &["gc", "--keep-runs", "0"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("removed worktree"), "{out}");
    let listed = git(case.path(), &["worktree", "list", "--porcelain"]);
    assert!(
        listed.contains("branch refs/heads/mine"),
        "gc dropped the user's own worktree entry: {listed}"
    );
}
