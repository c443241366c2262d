//! The agent can write the configuration of the repository it works in:
//! hooks, filters, a file-system monitor, diff drivers. None of it may
//! run on the host through warden's own git (worktrees made and removed,
//! commits and state read at the end of a run and of a session, `warden
//! gc`). And a git question that cannot be answered leaves the commits
//! unknown (`null`), saying why, never "no commits".

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::support::{Case, bwrap_works, git, repo, write_script};

/// What the agent's own git runs with in these tests, so that only warden's
/// git could set off a marker.
const AGENT_GIT: &str = "git -c core.hooksPath=/dev/null -c core.fsmonitor=false \
    -c filter.evil.clean= -c filter.evil.smudge= -c filter.evil.required=false";

/// Plants, in the repository at `dir`, every kind of program its
/// configuration can name; each writes a file in `markers` named for what
/// ran it. `data.txt` is committed with the attributes that select the
/// filter and the diff driver.
fn plant(dir: &Path, markers: &Path) {
    std::fs::write(dir.join(".gitattributes"), "*.txt filter=evil diff=evil\n").unwrap();
    std::fs::write(dir.join("data.txt"), "data\n").unwrap();
    git(dir, &["add", ".gitattributes", "data.txt"]);
    git(dir, &["commit", "-qm", "attributes"]);
    let program = |name: &str, tail: &str| {
        let path = markers.join(format!("{name}.sh"));
        write_script(
            &path,
            &format!(
                "#!/bin/sh\ntouch '{}'\n{tail}\n",
                markers.join(name).display()
            ),
        );
        path.display().to_string()
    };
    for hook in [
        "post-checkout",
        "reference-transaction",
        "pre-auto-gc",
        "post-index-change",
    ] {
        let script = program(hook, "exit 0");
        std::fs::copy(&script, dir.join(".git/hooks").join(hook)).unwrap();
    }
    let config = [
        ("filter.evil.clean", program("clean", "exec cat")),
        ("filter.evil.smudge", program("smudge", "exec cat")),
        ("filter.evil.required", "true".into()),
        ("diff.evil.textconv", program("textconv", "exec cat \"$1\"")),
        ("core.fsmonitor", program("fsmonitor", "exit 1")),
        ("gpg.program", program("gpg", "exit 1")),
        ("log.showSignature", "true".into()),
    ];
    for (key, value) in config {
        git(dir, &["config", key, &value]);
    }
}

/// The markers set off so far (the scripts themselves excluded).
fn set_off(markers: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(markers)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".sh"))
        .collect();
    names.sort();
    names
}

#[test]
fn programs_planted_in_the_repository_never_run_through_warden() {
    let case = Case::new();
    repo(&case);
    let markers = tempfile::tempdir().unwrap();
    plant(case.path(), markers.path());
    assert!(set_off(markers.path()).is_empty());

    // A session in a new worktree (made, read, and kept) whose agent
    // commits.
    let script = format!(
        "echo work > work.txt && {AGENT_GIT} add work.txt && {AGENT_GIT} commit -qm 'agent work'"
    );
    let done = case.run(&[
        "run",
        "exec",
        "--worktree",
        "--keep-worktree",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let session: Value = serde_json::from_str(
        &std::fs::read_to_string(case.run_dir().join("session.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        session["commits"].as_array().map(Vec::len),
        Some(1),
        "{session}"
    );
    assert_eq!(session["worktree"]["dirty"], false, "{session}");
    let worktree = session["worktree"]["path"].as_str().unwrap().to_string();
    assert_eq!(
        set_off(markers.path()),
        Vec::<String>::new(),
        "the session's git ran what the repository names"
    );

    // A run in the repository itself, which commits.
    let script = format!("echo more >> README && {AGENT_GIT} commit -qam more");
    let done = case.run(&[
        "run",
        "exec",
        "--run-dir",
        "run-2",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(case.path().join("run-2/run.json")).unwrap())
            .unwrap();
    assert_eq!(
        report["commits"].as_array().map(Vec::len),
        Some(1),
        "{report}"
    );
    assert_eq!(
        set_off(markers.path()),
        Vec::<String>::new(),
        "the run's git"
    );

    // gc of the worktree once its session is gone: its state read, then
    // removed. A file touched since the checkout makes git compare
    // contents, through the clean filter if it ran one.
    std::fs::remove_dir_all(case.run_dir()).unwrap();
    // A filter only the worktree's own configuration names, selected by
    // attributes in the repository's git directory (neither makes the
    // worktree dirty).
    git(
        case.path(),
        &["config", "extensions.worktreeConfig", "true"],
    );
    let wt_clean = markers.path().join("wt-clean.sh");
    write_script(
        &wt_clean,
        &format!(
            "#!/bin/sh\ntouch '{}'\nexec cat\n",
            markers.path().join("wt-clean").display()
        ),
    );
    git(
        Path::new(&worktree),
        &[
            "config",
            "--worktree",
            "filter.wt.clean",
            wt_clean.to_str().unwrap(),
        ],
    );
    std::fs::write(
        case.path().join(".git/info/attributes"),
        "*.txt filter=wt\n",
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let data = Path::new(&worktree).join("data.txt");
    std::fs::write(&data, std::fs::read(&data).unwrap()).unwrap();
    let gc = case.run(&["gc", "--keep-runs", "0"]);
    assert_eq!(gc.code, 0, "{}{}", gc.stdout, gc.stderr);
    assert!(gc.stdout.contains("removed worktree"), "{}", gc.stdout);
    assert!(!Path::new(&worktree).exists());
    assert_eq!(set_off(markers.path()), Vec::<String>::new(), "gc's git");

    // The same planted programs do run under a plain git: the test can
    // fail.
    std::fs::remove_file(case.path().join(".git/info/attributes")).unwrap();
    let control = case.path().join("control");
    git(
        case.path(),
        &["worktree", "add", "-q", control.to_str().unwrap()],
    );
    std::thread::sleep(Duration::from_millis(20));
    // Same size, other bytes: git must compare the contents.
    std::fs::write(control.join("data.txt"), "DATA\n").unwrap();
    git(&control, &["status", "--porcelain"]);
    git(&control, &["log", "-p", "-1", "--", "data.txt"]);
    let ran = set_off(markers.path());
    for m in ["clean", "fsmonitor", "post-checkout", "smudge", "textconv"] {
        assert!(
            ran.iter().any(|r| r == m),
            "{m} never ran under plain git: {ran:?}"
        );
    }
}

#[test]
fn a_fifo_at_the_branch_ref_leaves_the_commits_unknown_at_once() {
    let case = Case::new();
    repo(&case);
    let done = case.run(&[
        "run",
        "exec",
        "--",
        "sh",
        "-c",
        "rm .git/refs/heads/main && mkfifo .git/refs/heads/main",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(
        done.elapsed < Duration::from_secs(8),
        "took {:?}",
        done.elapsed
    );
    let report = done.report();
    assert!(report["commits"].is_null(), "unknown, not none: {report}");
    let error = report["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("could not collect commits") && error.contains("refs/heads/main is a FIFO"),
        "{report}"
    );
}

#[test]
fn a_git_question_that_times_out_leaves_the_commits_unknown_and_says_so() {
    let case = Case::new();
    repo(&case);
    // HEAD moves (so git is asked for the commits), then git blocks
    // reading the objects.
    let script = format!(
        "{AGENT_GIT} commit -q --allow-empty -m one && mkfifo .git/objects/info/alternates"
    );
    let done = case.run(&["run", "exec", "--", "sh", "-c", &script]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let report = done.report();
    assert!(report["commits"].is_null(), "unknown, not none: {report}");
    let error = report["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("could not collect commits") && error.contains("did not finish within 10s"),
        "{report}"
    );
    case.assert_nothing_left();
}

#[test]
fn a_sandboxed_session_commits_in_a_repository_of_its_own_and_the_commits_come_home() {
    if !bwrap_works() {
        eprintln!("skipped: bwrap cannot make a PID namespace here");
        return;
    }
    let case = Case::new();
    let (user, base) = user_repo();
    let dir = user.path();
    let config_before = std::fs::read(dir.join(".git/config")).unwrap();
    let home = tempfile::tempdir().unwrap();
    let host_git = dir.join(".git");
    // The agent commits with its own git, then tries the user's
    // repository: its configuration, its hooks, another branch.
    let script = format!(
        "echo x > f && git add f && git commit -qm m && \
         (echo '[core] hooksPath = /tmp' >> {g}/config || echo config-refused) && \
         (echo evil > {g}/hooks/post-checkout || echo hooks-refused) && \
         (git --git-dir={g} branch evil 2>/dev/null || echo branch-refused)",
        g = host_git.display()
    );
    let mut cmd = case.command(&[
        "run",
        "exec",
        "--sandbox",
        "bwrap",
        "--kill-grace",
        "500ms",
        "--worktree",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    cmd.current_dir(dir).env("HOME", home.path());
    let done = case.finished(cmd.output().unwrap(), std::time::Instant::now());
    assert_eq!(done.code, 0, "{}", done.stderr);
    let out = String::from_utf8_lossy(&done_log(&case, "iteration-1/stdout.log")).into_owned();
    for refused in ["config-refused", "hooks-refused", "branch-refused"] {
        assert!(out.contains(refused), "{refused}: {out}");
    }
    assert_eq!(
        std::fs::read(dir.join(".git/config")).unwrap(),
        config_before
    );
    assert!(!host_git.join("hooks/post-checkout").exists());
    let session: Value = serde_json::from_str(
        &std::fs::read_to_string(case.run_dir().join("session.json")).unwrap(),
    )
    .unwrap();
    let commits = session["commits"].as_array().expect("commits known");
    assert_eq!(commits.len(), 1, "{session}");
    assert_eq!(commits[0]["subject"], "m");
    let run: Value = serde_json::from_str(
        &std::fs::read_to_string(case.run_dir().join("iteration-1/run.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(run["commits"][0]["subject"], "m", "{run}");
    let branch = session["worktree"]["branch"].as_str().unwrap();
    assert_eq!(
        git(dir, &["log", "-1", "--format=%s", branch]),
        "m",
        "the commit reached the user's branch"
    );
    assert_eq!(git(dir, &["rev-parse", &format!("{branch}~1")]), base);
    assert_eq!(session["worktree"]["removed"], true, "{session}");
    assert_eq!(session["worktree"]["own_repository"], true, "{session}");
    assert!(!Path::new(session["worktree"]["path"].as_str().unwrap()).exists());
    assert!(
        !git(dir, &["branch", "--list", "evil"]).contains("evil"),
        "no other branch was made"
    );
}

/// A repository with one commit outside /tmp (which the sandbox replaces
/// with a private one: the agent sees this one through the read-only
/// root); its HEAD.
fn user_repo() -> (tempfile::TempDir, String) {
    let user = tempfile::tempdir_in("/var/tmp").unwrap();
    let dir = user.path();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.name", "Test Agent"]);
    git(dir, &["config", "user.email", "agent@example.com"]);
    std::fs::write(dir.join("README"), "hello\n").unwrap();
    git(dir, &["add", "README"]);
    git(dir, &["commit", "-qm", "initial"]);
    let base = git(dir, &["rev-parse", "HEAD"]);
    (user, base)
}

/// A repository with one commit ("private subject") at `under/private`:
/// under a HOME the sandbox hides, where only warden's git on the host
/// could read it.
fn private_repo(under: &Path) -> std::path::PathBuf {
    let private = under.join("private");
    std::fs::create_dir(&private).unwrap();
    git(&private, &["init", "-q", "-b", "main"]);
    git(
        &private,
        &[
            "-c",
            "user.name=p",
            "-c",
            "user.email=p@p",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "private subject",
        ],
    );
    private
}

/// `warden run exec --sandbox bwrap --worktree -- sh -c SCRIPT` in the
/// repository `dir` (with `home` as HOME if given), which must end 0; its
/// `session.json`.
fn bwrap_worktree_session(case: &Case, dir: &Path, script: &str, home: Option<&Path>) -> Value {
    let mut cmd = case.command(&[
        "run",
        "exec",
        "--sandbox",
        "bwrap",
        "--worktree",
        "--",
        "sh",
        "-c",
        script,
    ]);
    cmd.current_dir(dir);
    if let Some(home) = home {
        cmd.env("HOME", home);
    }
    let done = case.finished(cmd.output().unwrap(), std::time::Instant::now());
    assert_eq!(done.code, 0, "{}", done.stderr);
    serde_json::from_str(&std::fs::read_to_string(case.run_dir().join("session.json")).unwrap())
        .unwrap()
}

/// git's stdout, or `None` when it fails (the helper above asserts success).
fn try_git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn done_log(case: &Case, name: &str) -> Vec<u8> {
    std::fs::read(case.run_dir().join(name)).unwrap_or_default()
}

#[test]
fn gc_removes_a_sandboxed_sessions_own_repository_once_its_commits_are_home() {
    if !bwrap_works() {
        eprintln!("skipped: bwrap cannot make a PID namespace here");
        return;
    }
    let case = Case::new();
    let (user, _) = user_repo();
    let dir = user.path();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = case.command(&[
        "run",
        "exec",
        "--sandbox",
        "bwrap",
        "--worktree",
        "--keep-worktree",
        "--",
        "sh",
        "-c",
        "echo x > f && git add f && git commit -qm m",
    ]);
    cmd.current_dir(dir).env("HOME", home.path());
    let done = case.finished(cmd.output().unwrap(), std::time::Instant::now());
    assert_eq!(done.code, 0, "{}", done.stderr);
    let session: Value = serde_json::from_str(
        &std::fs::read_to_string(case.run_dir().join("session.json")).unwrap(),
    )
    .unwrap();
    let own = std::path::PathBuf::from(session["worktree"]["path"].as_str().unwrap());
    let branch = session["worktree"]["branch"].as_str().unwrap().to_string();
    assert!(own.join(".git").is_dir(), "{session}");
    std::fs::remove_dir_all(case.run_dir()).unwrap();
    // A commit made after the session fetched its branch.
    git(&own, &["commit", "-q", "--allow-empty", "-m", "later"]);
    let gc = |what: &str| {
        let mut cmd = case.command(&["gc", "--keep-runs", "0"]);
        cmd.current_dir(dir);
        let done = case.finished(cmd.output().unwrap(), std::time::Instant::now());
        assert_eq!(done.code, 0, "{what}: {}{}", done.stdout, done.stderr);
        done.stdout
    };
    let out = gc("with a commit not home");
    assert!(own.is_dir(), "removed with a commit not home: {out}");
    assert!(out.contains("not in the repository's"), "{out}");
    git(&own, &["reset", "-q", "--hard", "HEAD~1"]);
    let out = gc("all home");
    assert!(!own.exists(), "{out}");
    assert!(out.contains("removed worktree"), "{out}");
    assert_eq!(git(dir, &["log", "-1", "--format=%s", &branch]), "m");
}

#[test]
fn programs_a_sandboxed_agent_plants_in_its_own_repository_never_run_on_the_host() {
    if !bwrap_works() {
        eprintln!("skipped: bwrap cannot make a PID namespace here");
        return;
    }
    let case = Case::new();
    let (user, _) = user_repo();
    let dir = user.path();
    // Read-only inside the sandbox: a marker there was written on the host.
    let markers = tempfile::tempdir_in("/var/tmp").unwrap();
    let m = markers.path().display();
    let home = tempfile::tempdir().unwrap();
    // Inside, the agent makes every hook and every program key of its own
    // repository (the one warden reads and fetches from at the end) a
    // script that leaves a marker, with attributes that select them.
    let script = format!(
        r#"set -e
g=$(git rev-parse --absolute-git-dir)
printf '#!/bin/sh\ntouch {m}/"$1"\ncat\n' > "$g/evil.sh"
chmod +x "$g/evil.sh"
mkdir -p "$g/hooks"
for h in post-checkout reference-transaction pre-auto-gc post-index-change \
         pre-receive update post-update post-merge pre-push; do
  printf '#!/bin/sh\ntouch {m}/hook-%s\n' "$h" > "$g/hooks/$h"
  chmod +x "$g/hooks/$h"
done
for kv in "core.fsmonitor fsmonitor" "filter.evil.clean clean" "filter.evil.smudge smudge" \
          "diff.evil.textconv textconv" "uploadpack.packObjectsHook pack" \
          "core.alternateRefsCommand alternates" "gpg.program gpg"; do
  set -- $kv
  git config "$1" "$g/evil.sh $2"
done
git config filter.evil.required true
git config log.showSignature true
echo '* filter=evil diff=evil' > .gitattributes
echo x > f
{AGENT_GIT} add .gitattributes f
{AGENT_GIT} commit -qm planted
touch f
"#
    );
    let mut cmd = case.command(&[
        "run",
        "exec",
        "--sandbox",
        "bwrap",
        "--worktree",
        "--keep-worktree",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    cmd.current_dir(dir).env("HOME", home.path());
    let done = case.finished(cmd.output().unwrap(), std::time::Instant::now());
    assert_eq!(done.code, 0, "{}", done.stderr);
    let session: Value = serde_json::from_str(
        &std::fs::read_to_string(case.run_dir().join("session.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(session["commits"][0]["subject"], "planted", "{session}");
    let branch = session["worktree"]["branch"].as_str().unwrap();
    assert_eq!(git(dir, &["log", "-1", "--format=%s", branch]), "planted");
    assert_eq!(
        set_off(markers.path()),
        Vec::<String>::new(),
        "a program the agent named ran on the host"
    );
    // The same repository under a plain git on the host does run them:
    // the test can fail.
    let own = Path::new(session["worktree"]["path"].as_str().unwrap());
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(own.join("f"), "y\n").unwrap();
    git(own, &["status", "--porcelain"]);
    let ran = set_off(markers.path());
    for m in ["clean", "fsmonitor"] {
        assert!(
            ran.iter().any(|r| r == m),
            "{m} never ran under plain git: {ran:?}"
        );
    }
}

#[test]
fn an_unprivileged_bwrap_session_commits_in_its_own_repository_too() {
    if !bwrap_works() || !crate::support::is_root() || !Path::new("/usr/bin/setpriv").is_file() {
        eprintln!("skipped: needs bwrap, and root with setpriv to become nobody");
        return;
    }
    let case = Case::new();
    let (user, _) = user_repo();
    let dir = user.path();
    let home = tempfile::tempdir().unwrap();
    for path in [dir, case.path(), home.path()] {
        let ok = std::process::Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(path)
            .status()
            .unwrap()
            .success();
        assert!(ok, "chown {}", path.display());
    }
    let out = std::process::Command::new("/usr/bin/setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(crate::support::WARDEN)
        .args(["run", "exec", "--sandbox", "bwrap", "--kill-grace", "500ms"])
        .args(["--worktree", "--", "sh", "-c"])
        .arg("echo x > f && git add f && git commit -qm m")
        .current_dir(dir)
        .env("HOME", home.path())
        .env("WARDEN_RUN_DIR", case.run_dir())
        .env_remove("GITHUB_ACTIONS")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let done = case.finished(out, std::time::Instant::now());
    assert_eq!(done.code, 0, "{}", done.stderr);
    let session: Value = serde_json::from_str(
        &std::fs::read_to_string(case.run_dir().join("session.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(session["commits"][0]["subject"], "m", "{session}");
    let branch = session["worktree"]["branch"].as_str().unwrap();
    let log = std::process::Command::new("git")
        .args(["-c", "safe.directory=*", "-C"])
        .arg(dir)
        .args(["log", "-1", "--format=%s", branch])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&log.stdout).trim(), "m");
}

#[test]
fn a_sandboxed_agent_cannot_have_warden_fetch_a_repository_the_sandbox_hides() {
    if !bwrap_works() {
        eprintln!("skipped: bwrap cannot make a PID namespace here");
        return;
    }
    let case = Case::new();
    let (user, base) = user_repo();
    let dir = user.path();
    // Under HOME, which the sandbox hides: the agent cannot read it, but
    // warden's git on the host could, through a link the agent plants.
    let home = tempfile::tempdir().unwrap();
    let private = private_repo(home.path());
    let script = format!(
        "g=$(git rev-parse --absolute-git-dir) && b=$(git symbolic-ref HEAD) && \
         echo {p}/.git/objects >> $g/objects/info/alternates && \
         rm $g/$b && ln -s {p}/.git/refs/heads/main $g/$b && echo planted",
        p = private.display()
    );
    let session = bwrap_worktree_session(&case, dir, &script, Some(home.path()));
    let branch = session["worktree"]["branch"].as_str().unwrap();
    assert_eq!(
        git(dir, &["rev-parse", branch]),
        base,
        "the hidden repository's history reached the user's branch: {session}"
    );
    let error = session["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("not fetched") && error.contains("symbolic link"),
        "{session}"
    );
    assert_eq!(session["worktree"]["removed"], false, "kept: {session}");
}

/// The agent breaks its `.git` and makes its work tree's root a bare
/// repository of links into one the sandbox hides: upload-pack, asked for
/// the checked `.git` strictly, never takes the root instead.
#[test]
fn a_bare_repository_of_links_at_the_work_tree_root_is_never_fetched() {
    if !bwrap_works() {
        eprintln!("skipped: bwrap cannot make a PID namespace here");
        return;
    }
    let case = Case::new();
    let (user, _) = user_repo();
    let dir = user.path();
    let home = tempfile::tempdir_in("/var/tmp").unwrap();
    let private = private_repo(home.path());
    let secret = git(&private, &["rev-parse", "HEAD"]);
    let script = format!(
        "echo x > f && git add f && git commit -qm agent && b=$(git symbolic-ref --short HEAD) && \
         mv .git/HEAD .git/HEAD.bak && echo \"ref: refs/heads/$b\" > HEAD && \
         mkdir -p refs/heads/$(dirname $b) && ln -s {p}/.git/refs/heads/main refs/heads/$b && \
         ln -s {p}/.git/objects objects && echo planted",
        p = private.display()
    );
    let session = bwrap_worktree_session(&case, dir, &script, Some(home.path()));
    assert_eq!(done_log(&case, "iteration-1/stdout.log"), b"planted\n");
    let branch = session["worktree"]["branch"].as_str().unwrap();
    assert_ne!(
        git(dir, &["rev-parse", branch]),
        secret,
        "the hidden repository's history reached the user's branch: {session}"
    );
    assert_eq!(
        try_git(dir, &["cat-file", "-e", &secret]),
        None,
        "the hidden commit is in the user's repository"
    );
    let error = session["error"].as_str().unwrap_or_default();
    assert!(error.contains("not fetched"), "{session}");
    assert!(
        !error.contains(&secret),
        "the error names the hidden commit: {error}"
    );
    assert_eq!(session["worktree"]["removed"], false, "kept: {session}");
}

/// A `shallow` file in the agent's `.git` made the fetch end quietly
/// without the branch, and the repository holding the commits was then
/// removed: now the branch's tip is compared, and the repository kept.
#[test]
fn commits_that_did_not_come_home_keep_the_agents_repository() {
    if !bwrap_works() {
        eprintln!("skipped: bwrap cannot make a PID namespace here");
        return;
    }
    let case = Case::new();
    let (user, _) = user_repo();
    let dir = user.path();
    let script = "echo a > a && git add a && git commit -qm one && echo b > b && git add b && \
                  git commit -qm two && git rev-parse HEAD > \"$(git rev-parse --git-dir)/shallow\" && \
                  git rev-parse HEAD";
    let session = bwrap_worktree_session(&case, dir, script, None);
    let agent_tip = String::from_utf8(done_log(&case, "iteration-1/stdout.log")).unwrap();
    let agent_tip = agent_tip.trim();
    let branch = session["worktree"]["branch"].as_str().unwrap();
    let home_tip = try_git(dir, &["rev-parse", "--verify", "--quiet", branch]).unwrap_or_default();
    if home_tip != agent_tip {
        // Not home: said, and the repository holding them is kept.
        let error = session["error"].as_str().unwrap_or_default();
        assert!(error.contains("not fetched"), "{session}");
        assert_eq!(session["worktree"]["removed"], false, "kept: {session}");
        let own = Path::new(session["worktree"]["path"].as_str().unwrap());
        assert_eq!(git(own, &["cat-file", "-t", agent_tip]), "commit");
    }
}
