//! `warden.toml` found where people keep it: from the directory warden
//! runs in up to the top of its git work tree, the nearest file alone;
//! never above the top; only the directory itself outside a work tree.
//! The file found is the one watched for the agent's changes.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::support::{Case, Finished, git};

/// `<case>/repo`, a git work tree, with `<repo>/sub/deeper` in it, and a
/// `warden.toml` above the repository that must never be read.
fn repository(case: &Case) -> (PathBuf, PathBuf) {
    let repo = case.path().join("repo");
    let deeper = repo.join("sub/deeper");
    std::fs::create_dir_all(&deeper).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(
        case.path().join("warden.toml"),
        "startup_timeout = \"333ms\"\n",
    )
    .unwrap();
    (repo.canonicalize().unwrap(), deeper.canonicalize().unwrap())
}

/// warden with `args`, started in `dir`.
fn run_in(case: &Case, dir: &Path, args: &[&str]) -> Finished {
    let _ = std::fs::remove_dir_all(case.run_dir());
    let mut cmd = case.command(args);
    cmd.current_dir(dir);
    case.finished(cmd.output().unwrap(), Instant::now())
}

fn startup_ms(done: &Finished) -> serde_json::Value {
    assert_eq!(done.code, 0, "{}", done.stderr);
    done.report()["limits"]["startup_timeout_ms"].clone()
}

const ECHO: &[&str] = &["run", "exec", "--", "echo", "hi"];

#[test]
fn the_nearest_warden_toml_up_to_the_repository_top_applies() {
    let case = Case::new();
    let (repo, deeper) = repository(&case);

    // Nothing in the repository: the file above its top is not read.
    let default = startup_ms(&run_in(&case, &deeper, ECHO));
    assert_ne!(default, 333, "the file above the repository was read");

    // At the top: read from two levels down.
    std::fs::write(repo.join("warden.toml"), "startup_timeout = \"222ms\"\n").unwrap();
    assert_eq!(startup_ms(&run_in(&case, &deeper, ECHO)), 222);
    assert_eq!(startup_ms(&run_in(&case, &repo, ECHO)), 222);

    // A nearer one wins, alone: its keys, not the top's added to them.
    std::fs::write(repo.join("sub/warden.toml"), "kill_grace = \"111ms\"\n").unwrap();
    let done = run_in(&case, &deeper, ECHO);
    assert_eq!(startup_ms(&done), default, "the files are not merged");
    assert_eq!(done.report()["limits"]["kill_grace_ms"], 111);

    // A file named with --config or WARDEN_CONFIG beats the one found.
    let named = case.path().join("named.toml");
    std::fs::write(&named, "startup_timeout = \"444ms\"\n").unwrap();
    let named = named.to_str().unwrap();
    let flag = run_in(
        &case,
        &deeper,
        &["run", "--config", named, "exec", "--", "echo", "hi"],
    );
    assert_eq!(startup_ms(&flag), 444);
    let _ = std::fs::remove_dir_all(case.run_dir());
    let mut cmd = case.command(ECHO);
    cmd.current_dir(&deeper).env("WARDEN_CONFIG", named);
    let by_env = case.finished(cmd.output().unwrap(), Instant::now());
    assert_eq!(startup_ms(&by_env), 444);

    // An error in the file found names that file.
    std::fs::write(repo.join("sub/warden.toml"), "stall_timeout = \"ever\"\n").unwrap();
    let bad = run_in(&case, &deeper, ECHO);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    let sub_file = repo.join("sub/warden.toml");
    assert!(
        bad.stderr
            .contains(&format!("`stall_timeout` in {}", sub_file.display())),
        "{}",
        bad.stderr
    );
}

#[test]
fn a_worktree_top_marked_by_a_git_file_stops_the_search_too() {
    let case = Case::new();
    let (repo, deeper) = repository(&case);
    std::fs::write(repo.join("warden.toml"), "startup_timeout = \"222ms\"\n").unwrap();
    // A linked worktree's top holds a `.git` file, not a directory.
    std::fs::write(repo.join("sub/.git"), "gitdir: /nowhere\n").unwrap();
    assert_ne!(startup_ms(&run_in(&case, &deeper, ECHO)), 222);
}

#[test]
fn outside_a_work_tree_only_the_current_directory_is_looked_in() {
    let case = Case::new();
    let sub = case.path().join("plain/sub");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(
        case.path().join("plain/warden.toml"),
        "startup_timeout = \"222ms\"\n",
    )
    .unwrap();
    // Only meaningful where the temporary directory is in no work tree.
    let in_tree = std::process::Command::new("git")
        .arg("-C")
        .arg(&sub)
        .args(["rev-parse", "--is-inside-work-tree"])
        .output()
        .is_ok_and(|o| o.status.success());
    if in_tree {
        return;
    }
    assert_ne!(startup_ms(&run_in(&case, &sub, ECHO)), 222);
    assert_eq!(
        startup_ms(&run_in(&case, &case.path().join("plain"), ECHO)),
        222
    );
}

/// The lines of `stderr` that warn of a `warden.toml` being changed.
fn config_warnings(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains("warden.toml was "))
        .collect()
}

#[test]
fn the_watch_follows_the_file_found_and_the_nearer_places_looked_in() {
    let case = Case::new();
    let (repo, deeper) = repository(&case);
    let top = repo.join("warden.toml");
    std::fs::write(&top, "startup_timeout = \"5s\"\n").unwrap();
    let sub = repo.join("sub");

    // The agent, run in a subdirectory, lifts a limit in the file found.
    let edit = [
        "run",
        "exec",
        "--",
        "sh",
        "-c",
        "echo 'kill_grace = \"3s\"' >> ../warden.toml",
    ];
    let done = run_in(&case, &sub, &edit);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let warned = config_warnings(&done.stderr);
    assert_eq!(warned.len(), 1, "{}", done.stderr);
    assert!(
        warned[0].starts_with(&format!(
            "warden: warning: {} was changed while warden ran",
            top.display()
        )),
        "{}",
        warned[0]
    );

    // Or plants a nearer one, which the next warden started there reads.
    let plant = [
        "run",
        "exec",
        "--",
        "sh",
        "-c",
        "echo 'kill_grace = \"100ms\"' > ../warden.toml",
    ];
    let done = run_in(&case, &deeper, &plant);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let warned = config_warnings(&done.stderr);
    assert_eq!(warned.len(), 1, "{}", done.stderr);
    assert!(
        warned[0].contains(&format!(
            "{} was created",
            sub.join("warden.toml").display()
        )),
        "{}",
        warned[0]
    );

    // Left alone, nothing is said; a file above the found one is not
    // watched (the found one hides it).
    let done = run_in(
        &case,
        &sub,
        &["run", "exec", "--", "sh", "-c", "echo x >> ../warden.toml"],
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(config_warnings(&done.stderr).is_empty(), "{}", done.stderr);
}

#[test]
fn the_user_file_applies_beneath_the_project_file_key_by_key() {
    let case = Case::new();
    let (repo, deeper) = repository(&case);
    let config = case.path().join("config");
    std::fs::create_dir_all(config.join("warden")).unwrap();
    let user = config.join("warden/warden.toml");
    std::fs::write(
        &user,
        "startup_timeout = \"555ms\"\nkill_grace = \"122ms\"\n",
    )
    .unwrap();
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let _ = std::fs::remove_dir_all(case.run_dir());
        let mut cmd = case.command(args);
        cmd.current_dir(&deeper).env("XDG_CONFIG_HOME", &config);
        for (k, v) in env {
            cmd.env(k, v);
        }
        case.finished(cmd.output().unwrap(), Instant::now())
    };

    // Alone, the user file gives its settings.
    let done = run(ECHO, &[]);
    assert_eq!(startup_ms(&done), 555);
    assert_eq!(done.report()["limits"]["kill_grace_ms"], 122);

    // The project file beats it key by key; a variable beats both.
    std::fs::write(repo.join("warden.toml"), "startup_timeout = \"222ms\"\n").unwrap();
    let done = run(ECHO, &[]);
    assert_eq!(startup_ms(&done), 222);
    assert_eq!(done.report()["limits"]["kill_grace_ms"], 122);
    let done = run(ECHO, &[("WARDEN_KILL_GRACE", "133ms")]);
    assert_eq!(done.report()["limits"]["kill_grace_ms"], 133);

    // A bad value there is named with the file.
    std::fs::write(&user, "kill_grace = \"soon\"\n").unwrap();
    let bad = run(ECHO, &[]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(
        bad.stderr
            .contains(&format!("`kill_grace` in {}", user.display())),
        "{}",
        bad.stderr
    );

    // An agent that writes it is reported too.
    std::fs::write(&user, "kill_grace = \"122ms\"\n").unwrap();
    let script = format!("echo '# more' >> '{}'", user.display());
    let done = run(&["run", "exec", "--", "sh", "-c", &script], &[]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let warned = config_warnings(&done.stderr);
    assert_eq!(warned.len(), 1, "{}", done.stderr);
    assert!(
        warned[0].contains(&format!("{} was changed", user.display())),
        "{}",
        warned[0]
    );
}

#[test]
fn a_git_the_agent_makes_between_here_and_the_file_found_is_reported() {
    let case = Case::new();
    let (repo, deeper) = repository(&case);
    std::fs::write(repo.join("warden.toml"), "startup_timeout = \"5s\"\n").unwrap();
    // A `.git` in `sub` would end the next search there, below the file.
    let make = ["run", "exec", "--", "sh", "-c", "mkdir ../.git"];
    let done = run_in(&case, &deeper, &make);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let mark = repo.join("sub/.git");
    assert!(
        done.stderr.contains(&format!(
            "{} was created while warden ran: it decides which warden.toml",
            mark.display()
        )),
        "{}",
        done.stderr
    );
    std::fs::remove_dir(&mark).unwrap();
    // So would the top's, taken away.
    let hide = [
        "run",
        "exec",
        "--",
        "sh",
        "-c",
        "mv ../../.git ../../.git.away",
    ];
    let done = run_in(&case, &deeper, &hide);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(
        done.stderr
            .contains(&format!("{} was removed", repo.join(".git").display())),
        "{}",
        done.stderr
    );
}
