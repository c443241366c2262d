//! bubblewrap against a hostile agent: no capabilities even when warden
//! runs as root, no host unix socket (network or not) unless allowed, no
//! access to warden's own records, and no false orphans from bwrap's own
//! processes.

use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use crate::support::{Case, Finished, home_with_ssh_key, is_root, run_in_bwrap};

fn out(done: &Finished) -> String {
    String::from_utf8_lossy(&done.log("stdout.log")).into_owned()
}

#[test]
fn bwrap_as_root_leaves_the_agent_no_capabilities() {
    if !is_root() {
        eprintln!("skipped: bwrap_as_root_leaves_the_agent_no_capabilities needs root");
        return;
    }
    let case = Case::new();
    let home = home_with_ssh_key(&case);
    let etc_file = format!("/etc/warden-escape-{}", std::process::id());
    // Every step prints a word only when the attack worked. The sysctl is
    // opened for appending nothing, so even a successful open changes
    // nothing on the host.
    let script = format!(
        "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status; \
         mount -o remount,rw / 2>/dev/null && echo REMOUNTED-ROOT; \
         (echo x > {etc_file}) 2>/dev/null && echo WROTE-ETC; \
         umount -l \"$HOME\" 2>/dev/null && echo UNMOUNTED-HOME; \
         cat \"$HOME/.ssh/id_test\" 2>/dev/null; \
         (printf '' >> /proc/sys/kernel/domainname) 2>/dev/null && echo WROTE-PROC-SYS; \
         unshare --user --map-root-user true 2>/dev/null && echo NEW-USER-NAMESPACE; \
         echo done"
    );
    let done = run_in_bwrap(&case, &home, &[], &script);
    let _ = std::fs::remove_file(&etc_file);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let text = out(&done);
    assert!(text.contains("done"), "{text}");
    assert_no_capabilities(&text);
    for escape in [
        "REMOUNTED-ROOT",
        "WROTE-ETC",
        "UNMOUNTED-HOME",
        "PRIVATE-KEY-MATERIAL",
        "WROTE-PROC-SYS",
        "NEW-USER-NAMESPACE",
    ] {
        assert!(!text.contains(escape), "{escape}:\n{text}");
    }
    assert!(!Path::new(&etc_file).exists(), "{etc_file} was written");
}

/// The capability lines of /proc/self/status, and whether each is empty.
fn assert_no_capabilities(text: &str) {
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        let line = text
            .lines()
            .find(|l| l.starts_with(set))
            .unwrap_or_else(|| panic!("no {set} in:\n{text}"));
        assert!(
            line.ends_with("0000000000000000"),
            "the agent holds capabilities: {line}\n{text}"
        );
    }
    assert!(
        text.lines().any(|l| l == "NoNewPrivs:\t1"),
        "no_new_privs is not set:\n{text}"
    );
}

#[test]
fn bwrap_run_by_an_unprivileged_user_gives_the_same_guarantees() {
    if !is_root() {
        eprintln!(
            "skipped: bwrap_run_by_an_unprivileged_user_gives_the_same_guarantees needs root to become nobody"
        );
        return;
    }
    if !Path::new("/usr/bin/setpriv").is_file() {
        eprintln!("skipped: no setpriv to become nobody with");
        return;
    }
    let case = Case::new();
    let home = home_with_ssh_key(&case);
    let sleep = crate::support::unique_sleep();
    let nobody = 65534;
    for entry in [case.path().to_path_buf(), home.clone(), home.join(".ssh")] {
        std::os::unix::fs::chown(&entry, Some(nobody), Some(nobody)).unwrap();
    }
    std::fs::set_permissions(
        case.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let script = format!(
        "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status; \
         umount -l \"$HOME\" 2>/dev/null && echo UNMOUNTED-HOME; \
         unshare --user --map-root-user true 2>/dev/null && echo NEW-USER-NAMESPACE; \
         (echo x > run/stdout.log) 2>/dev/null && echo REWROTE-LOG; \
         {sleep} & echo done"
    );
    let out = std::process::Command::new("/usr/bin/setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(crate::support::WARDEN)
        .args(["run", "exec", "--sandbox", "bwrap", "--kill-grace", "500ms"])
        .args(["--", "sh", "-c", &script])
        .current_dir(case.path())
        .env("HOME", &home)
        .env("WARDEN_RUN_DIR", case.run_dir())
        .env_remove("GITHUB_ACTIONS")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let done = case.finished(out, std::time::Instant::now());
    let left = crate::support::kill_leftovers(&sleep);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let text = self::out(&done);
    assert!(text.contains("done"), "{text}\n{}", done.stderr);
    assert_no_capabilities(&text);
    for escape in ["UNMOUNTED-HOME", "NEW-USER-NAMESPACE", "REWROTE-LOG"] {
        assert!(!text.contains(escape), "{escape}:\n{text}");
    }
    assert!(left.is_empty(), "the orphan survived: {left:?}");
    let orphans = done.report()["orphans"].as_array().cloned().unwrap();
    assert_eq!(orphans.len(), 1, "{orphans:?}");
    // Named by what it was when found: the sleep, or the shell's fork
    // that was about to become it.
    assert!(
        orphans[0]["cmdline"]
            .as_str()
            .is_some_and(|c| c.contains(sleep.as_str())),
        "{orphans:?}"
    );
}

/// A perl outside HOME, to speak to unix sockets from inside (perl-base,
/// with IO::Socket::UNIX, is essential on Debian).
fn perl() -> Option<&'static str> {
    ["/usr/bin/perl", "/bin/perl"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
}

#[test]
fn bwrap_hides_host_unix_sockets_with_the_network_on_unless_allowed() {
    let Some(perl) = perl() else {
        eprintln!("skipped: no perl in /usr/bin to connect to unix sockets with");
        return;
    };
    let case = Case::new();
    let home = home_with_ssh_key(&case);
    let shared = case.path().join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    // A daemon's socket in a directory given with --ro, one in the work dir
    // made before the run, and (as root) one under /run, one in a daemon's
    // directory there (as munge's is) and one under /var/tmp, seen through
    // the read-only root.
    let mut sockets = vec![shared.join("daemon.sock"), case.path().join("dev.sock")];
    let id = std::process::id();
    let daemon_dir = PathBuf::from(format!("/run/user/warden-test-{id}"));
    let var_tmp = PathBuf::from(format!("/var/tmp/warden-test-{id}"));
    // Removed however the test ends, also when an assertion fails.
    let _cleanup = Removed(vec![
        daemon_dir.clone(),
        var_tmp.clone(),
        PathBuf::from(format!("/run/warden-test-{id}.sock")),
    ]);
    if is_root() {
        sockets.push(PathBuf::from(format!("/run/warden-test-{id}.sock")));
        std::fs::create_dir_all(&daemon_dir).unwrap();
        sockets.push(daemon_dir.join("bus"));
        std::fs::create_dir_all(&var_tmp).unwrap();
        sockets.push(var_tmp.join("agent.sock"));
    }
    for s in &sockets {
        let _ = std::fs::remove_file(s);
    }
    let _listeners: Vec<UnixListener> = sockets
        .iter()
        .map(|s| UnixListener::bind(s).unwrap())
        .collect();
    let mut script = String::new();
    for s in &sockets {
        script.push_str(&format!(
            "{perl} -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Peer => $ARGV[0]) or exit 1' {s} \
             && echo 'reached {s}' || echo 'unreachable {s}'; ",
            s = s.display()
        ));
    }
    // The agent's own socket in its work dir still works.
    script.push_str(&format!(
        "{perl} -MIO::Socket::UNIX -e '$l = IO::Socket::UNIX->new(Local => \"own.sock\", Listen => 1) or die $!; \
         IO::Socket::UNIX->new(Peer => \"own.sock\") or die $!; unlink \"own.sock\"; print \"own socket works\\n\"'"
    ));
    let shared_arg = shared.display().to_string();
    let mut allow: Vec<String> = Vec::new();
    for s in &sockets {
        allow.push("--allow-socket".into());
        allow.push(s.display().to_string());
    }
    for (extra, reach) in [
        (vec![], false),
        (vec!["--no-network"], false),
        (allow.iter().map(String::as_str).collect::<Vec<_>>(), true),
        (
            allow
                .iter()
                .map(String::as_str)
                .chain(["--no-network"])
                .collect(),
            true,
        ),
    ] {
        let _ = std::fs::remove_dir_all(case.run_dir());
        let mut args = vec!["--ro", shared_arg.as_str()];
        args.extend(&extra);
        let done = run_in_bwrap(&case, &home, &args, &script);
        assert_eq!(done.code, 0, "{args:?}: {}", done.stderr);
        let text = out(&done);
        for s in &sockets {
            let want = if reach { "reached" } else { "unreachable" };
            assert!(
                text.contains(&format!("{want} {}", s.display())),
                "{args:?}: {} should be {want}:\n{text}\n{}",
                s.display(),
                done.stderr
            );
        }
        assert!(text.contains("own socket works"), "{text}\n{}", done.stderr);
    }
    // A path that is not a socket is refused by name, before anything runs.
    let _ = std::fs::remove_dir_all(case.run_dir());
    let not_socket = case.path().join("plain-file");
    std::fs::write(&not_socket, "").unwrap();
    let refused = run_in_bwrap(
        &case,
        &home,
        &["--allow-socket", &not_socket.display().to_string()],
        "echo RAN",
    );
    assert_ne!(refused.code, 0);
    assert!(
        refused.stderr.contains(&format!(
            "--allow-socket {}: not a unix socket",
            not_socket.display()
        )),
        "{}",
        refused.stderr
    );
    // Nor is a name that leads to a socket through a symbolic link: the
    // agent could swap such a name (in its work tree) for a link to
    // another daemon's socket before the next run.
    let _ = std::fs::remove_dir_all(case.run_dir());
    let real = case.path().join("real.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&real).unwrap();
    let link = case.path().join("link.sock");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let refused = run_in_bwrap(
        &case,
        &home,
        &["--allow-socket", &link.display().to_string()],
        "echo RAN",
    );
    assert_ne!(refused.code, 0, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("symbolic link"),
        "{}",
        refused.stderr
    );
}

/// Paths outside the case's directory a test made: removed when dropped.
///
/// Declared before the sockets' listeners, so they are closed first: a
/// closed socket is no longer listed as bound, and no run that starts
/// after sets out to cover it. A run of another test that saw it a moment
/// before builds its sandbox within milliseconds, and bwrap cannot cover
/// a path that is gone: the files stay a second longer than their
/// listeners.
struct Removed(Vec<PathBuf>);

impl Drop for Removed {
    fn drop(&mut self) {
        std::thread::sleep(std::time::Duration::from_secs(1));
        for p in &self.0 {
            let _ = std::fs::remove_dir_all(p).or_else(|_| std::fs::remove_file(p));
        }
    }
}

#[test]
fn daemon_variables_do_not_reach_a_sandboxed_agent_and_doctor_names_the_sockets() {
    let case = Case::new();
    let home = home_with_ssh_key(&case);
    let socket = case.path().join("listening.sock");
    let _listener = UnixListener::bind(&socket).unwrap();
    let script = "for v in SSH_AUTH_SOCK DBUS_SESSION_BUS_ADDRESS DOCKER_HOST CONTAINER_HOST \
                  XDG_RUNTIME_DIR DBUS_SYSTEM_BUS_ADDRESS; do \
                  eval \"[ -n \\\"\\${$v+x}\\\" ] && echo PASSED-$v\"; done; echo done";
    let mut cmd = case.command(&[
        "run",
        "exec",
        "--sandbox",
        "bwrap",
        "--kill-grace",
        "500ms",
        "--",
        "sh",
        "-c",
        script,
    ]);
    cmd.env("HOME", &home)
        .env("SSH_AUTH_SOCK", &socket)
        .env(
            "DBUS_SESSION_BUS_ADDRESS",
            format!("unix:path={}", socket.display()),
        )
        .env(
            "DBUS_SYSTEM_BUS_ADDRESS",
            format!("unix:path={}", socket.display()),
        )
        .env("DOCKER_HOST", format!("unix://{}", socket.display()))
        .env("CONTAINER_HOST", format!("unix://{}", socket.display()))
        .env("XDG_RUNTIME_DIR", case.path());
    let done = case.finished(cmd.output().unwrap(), std::time::Instant::now());
    assert_eq!(done.code, 0, "{}", done.stderr);
    let text = out(&done);
    assert!(text.contains("done"), "{text}");
    assert!(!text.contains("PASSED-"), "{text}");

    let doctor = case.run(&["doctor", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&doctor.stdout).unwrap();
    let real = std::fs::canonicalize(&socket).unwrap();
    assert!(
        doc["sandbox_hides"]["sockets"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s.as_str() == real.to_str()),
        "{}",
        doc["sandbox_hides"]
    );
    let text = case.run(&["doctor"]).stdout;
    assert!(
        text.contains(&format!("socket           {}", real.display())),
        "{text}"
    );
}

#[test]
fn bwrap_keeps_the_run_directories_out_of_the_agents_reach() {
    let case = Case::new();
    let home = home_with_ssh_key(&case);
    // An earlier run in the same work tree, with its logs where warden
    // puts them by default.
    let mut cmd = case.command(&["run", "exec", "--", "sh", "-c", "echo EARLIER-RUN-OUTPUT"]);
    cmd.env_remove("WARDEN_RUN_DIR");
    let first = cmd.output().unwrap();
    assert!(first.status.success(), "{first:?}");
    let runs = case.path().join(".warden/runs");
    let earlier = std::fs::read_dir(&runs)
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let earlier_log = std::fs::read(earlier.join("stdout.log")).unwrap();
    assert!(String::from_utf8_lossy(&earlier_log).contains("EARLIER-RUN-OUTPUT"));

    // The agent tries to read the earlier run's log, to rewrite it, and to
    // rewrite its own (at the run dir the test gives warden, inside the
    // work dir).
    let script = "echo CONFESSION; \
         cat .warden/runs/*/stdout.log 2>/dev/null; \
         for f in .warden/runs/*/stdout.log run/stdout.log run/events.jsonl run/run.json; do \
           (echo TAMPERED > \"$f\") 2>/dev/null && echo \"rewrote $f\"; \
         done; \
         (echo TAMPERED > .warden/planted) 2>/dev/null && echo 'wrote .warden'; \
         echo made-here > made-here.txt; echo finished";
    let done = run_in_bwrap(&case, &home, &[], script);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let text = out(&done);
    assert!(
        text.contains("CONFESSION") && text.contains("finished"),
        "{text}"
    );
    assert!(
        !text.contains("EARLIER-RUN-OUTPUT"),
        "the agent read another run's log:\n{text}"
    );
    assert!(
        !text.contains("rewrote") && !text.contains("wrote .warden"),
        "{text}"
    );
    assert_eq!(
        std::fs::read(earlier.join("stdout.log")).unwrap(),
        earlier_log,
        "another run's log was changed"
    );
    assert!(
        !text.contains("TAMPERED"),
        "its own log was rewritten:\n{text}"
    );
    assert!(!case.path().join(".warden/planted").exists());
    assert_eq!(done.report()["verdict"], "succeeded");
    assert_eq!(
        std::fs::read_to_string(case.path().join("made-here.txt")).unwrap(),
        "made-here\n",
        "the work dir stays writable"
    );
}

#[test]
fn bwraps_own_init_is_never_an_orphan_but_what_the_agent_leaves_is() {
    let case = Case::new();
    let home = home_with_ssh_key(&case);
    for round in 0..5 {
        let _ = std::fs::remove_dir_all(case.run_dir());
        let done = run_in_bwrap(&case, &home, &[], "echo healthy");
        assert_eq!(done.code, 0, "{}", done.stderr);
        let r = done.report();
        assert_eq!(
            r["orphans"].as_array().map(Vec::len),
            Some(0),
            "round {round}: a healthy run reports orphans: {}",
            r["orphans"]
        );
        assert!(!done.stderr.contains("orphan"), "{}", done.stderr);
    }

    let sleep = crate::support::unique_sleep();
    for round in 0..3 {
        let _ = std::fs::remove_dir_all(case.run_dir());
        let done = run_in_bwrap(&case, &home, &[], &format!("{sleep} & echo left-a-sleeper"));
        let left = crate::support::kill_leftovers(&sleep);
        assert!(
            left.is_empty(),
            "round {round}: the orphan survived: {left:?}"
        );
        let orphans = done.report()["orphans"].as_array().cloned().unwrap();
        assert_eq!(
            orphans.len(),
            1,
            "round {round}: exactly the agent's sleeper is an orphan: {orphans:?}"
        );
        // Named by what it was when found: the sleep, or the shell's fork
        // that was about to become it; or, when the kernel was killing it
        // as bwrap's init left the namespace (an exiting process has no
        // command line any more), by its name.
        assert!(
            orphans[0]["cmdline"]
                .as_str()
                .is_some_and(|c| c.contains(sleep.as_str()) || c == "[sleep]"),
            "{orphans:?}"
        );
        assert_eq!(orphans[0]["held_pipe"], true, "{orphans:?}");
    }
}

#[test]
fn a_timed_out_agent_in_bwrap_gets_sigterm_and_finishes_its_clean_up() {
    let case = Case::new();
    let home = home_with_ssh_key(&case);
    // bwrap's own processes must not die of warden's SIGTERM before the
    // agent: the run would end before the clean-up, with bwrap's exit
    // status, and the agent named as its own orphan.
    let script = "trap 'echo got-term; sleep 0.3; echo cleaned-up; exit 0' TERM; \
                  echo up; while :; do sleep 0.05; done";
    let mut args = vec![
        "run",
        "exec",
        "--sandbox",
        "bwrap",
        "--timeout",
        "1s",
        "--kill-grace",
        "5s",
        "--",
        "bash",
        "-c",
        script,
    ];
    if !Path::new("/bin/bash").exists() && !Path::new("/usr/bin/bash").exists() {
        args[9] = "sh";
    }
    let mut cmd = case.command(&args);
    cmd.env("HOME", &home);
    let done = case.finished(cmd.output().unwrap(), std::time::Instant::now());
    let text = out(&done);
    let r = done.report();
    assert_eq!(r["verdict"], "timed_out", "{}", done.stderr);
    assert!(
        text.contains("cleaned-up"),
        "the clean-up did not finish:\n{text}\n{}",
        done.stderr
    );
    assert_eq!(r["exit_code"], 0, "the agent's own exit status: {r}");
    assert_eq!(
        r["orphans"].as_array().map(Vec::len),
        Some(0),
        "the agent named as its own orphan: {}",
        r["orphans"]
    );
}

#[test]
fn in_a_worktree_the_agent_writes_its_worktree_but_reaches_no_record() {
    let case = Case::new();
    let home = home_with_ssh_key(&case);
    let repo = case.path();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q"]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@example.com",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "initial",
    ]);
    let mut earlier = case.command(&["run", "exec", "--", "sh", "-c", "echo EARLIER-RUN-OUTPUT"]);
    earlier.env_remove("WARDEN_RUN_DIR");
    assert!(earlier.output().unwrap().status.success());

    // The repository is under /tmp, hidden inside the sandbox: --ro makes
    // it visible, so its `.warden` is what has to be sealed.
    let records = repo.join(".warden");
    let script = format!(
        "cat {r}/runs/*/stdout.log 2>/dev/null; \
         for f in {r}/sessions/*/iteration-1/stdout.log {r}/runs/*/stdout.log; do \
           (echo TAMPERED > \"$f\") 2>/dev/null && echo \"rewrote $f\"; \
         done; \
         echo mine > from-the-agent.txt && echo worktree-is-writable",
        r = records.display()
    );
    let repo_arg = repo.display().to_string();
    let mut cmd = case.command(&[
        "run",
        "exec",
        "--worktree",
        "hostile",
        "--keep-worktree",
        "--sandbox",
        "bwrap",
        "--ro",
        &repo_arg,
        "--",
        "sh",
        "-c",
        &script,
    ]);
    cmd.env_remove("WARDEN_RUN_DIR").env("HOME", &home);
    let done = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{stderr}");
    let log = std::fs::read_dir(records.join("sessions"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path()
        .join("iteration-1/stdout.log");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("worktree-is-writable"), "{text}\n{stderr}");
    assert!(
        !text.contains("EARLIER-RUN-OUTPUT"),
        "another run's log was read:\n{text}"
    );
    assert!(!text.contains("rewrote"), "{text}");
    assert!(!text.contains("TAMPERED"), "{text}");
    assert_eq!(
        std::fs::read_to_string(records.join("worktrees/hostile/from-the-agent.txt")).unwrap(),
        "mine\n"
    );
}
