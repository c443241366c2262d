//! Sandboxes with the real bubblewrap, a stand-in container engine, the
//! environment allowlist and secret masking.

use std::path::PathBuf;

use crate::support::{Case, home_with_ssh_key, run_in_bwrap, unique_sleep};

#[test]
fn bwrap_confines_writes_hides_home_and_kills_the_whole_run() {
    let case = Case::new();
    let home = home_with_ssh_key(&case);
    let sleep = unique_sleep();
    let outside = format!("warden-outside-{}", std::process::id());
    let script = format!(
        "echo inside > made-here.txt; \
         (echo x > /etc/warden-escape) 2>/dev/null && echo WROTE-ETC || echo etc-is-read-only; \
         (echo x > /usr/local/warden-escape) 2>/dev/null && echo WROTE-USR || echo usr-is-read-only; \
         echo x > \"$(dirname \"$PWD\")/{outside}\"; \
         cat \"$HOME/.ssh/id_test\" 2>/dev/null || echo ssh-is-hidden; \
         echo pid-in-namespace=$$; \
         setsid {sleep} </dev/null >/dev/null 2>&1 & echo started"
    );
    let done = run_in_bwrap(&case, &home, &[], &script);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let out = String::from_utf8(done.log("stdout.log")).unwrap();
    for want in [
        "etc-is-read-only",
        "usr-is-read-only",
        "ssh-is-hidden",
        "started",
    ] {
        assert!(out.contains(want), "`{want}` missing from:\n{out}");
    }
    assert!(
        !out.contains("PRIVATE-KEY-MATERIAL"),
        "~/.ssh was readable:\n{out}"
    );
    assert!(!std::path::Path::new("/etc/warden-escape").exists());
    assert!(!std::path::Path::new("/usr/local/warden-escape").exists());
    let host_tmp = case.path().parent().unwrap().join(&outside);
    assert!(
        !host_tmp.exists(),
        "a write to /tmp outside the work dir reached the host: {}",
        host_tmp.display()
    );
    assert_eq!(
        std::fs::read_to_string(case.path().join("made-here.txt")).unwrap(),
        "inside\n",
        "the work dir is writable"
    );
    let pid: u32 = out
        .lines()
        .find_map(|l| l.strip_prefix("pid-in-namespace="))
        .unwrap()
        .parse()
        .unwrap();
    assert!(pid < 10, "not in its own PID namespace (pid {pid})");
    let r = done.report();
    assert_eq!(r["sandbox"], "bwrap");
    assert!(
        r["containment"]
            .as_str()
            .unwrap()
            .ends_with("+pid_namespace"),
        "{}",
        r["containment"]
    );
    let left = crate::support::kill_leftovers(&sleep);
    assert!(left.is_empty(), "the setsid daemon survived: {left:?}");
}

#[test]
fn bwrap_no_network_blocks_a_listener_on_the_host_loopback() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let case = Case::new();
    let home = home_with_ssh_key(&case);
    let script = format!(
        "bash -c 'echo > /dev/tcp/127.0.0.1/{port}' 2>/dev/null && echo connected || echo blocked"
    );
    let open = run_in_bwrap(&case, &home, &[], &script);
    assert_eq!(
        String::from_utf8(open.log("stdout.log")).unwrap().trim(),
        "connected",
        "{}",
        open.stderr
    );
    let case = Case::new();
    let home = home_with_ssh_key(&case);
    let cut = run_in_bwrap(&case, &home, &["--no-network"], &script);
    assert_eq!(
        String::from_utf8(cut.log("stdout.log")).unwrap().trim(),
        "blocked",
        "{}",
        cut.stderr
    );
    drop(listener);
}

#[test]
fn a_sandboxed_agent_gets_an_allowlisted_environment() {
    let case = Case::new();
    let home = home_with_ssh_key(&case);
    let mut cmd = case.command(&[
        "run",
        "exec",
        "--sandbox",
        "bwrap",
        "--env",
        "EXTRA_SETTING=on",
        "--env",
        "PASSED_BY_NAME",
        "--",
        "env",
    ]);
    cmd.env("HOME", &home)
        .env("HOST_ONLY_VARIABLE", "should-not-pass")
        .env("AWS_SECRET_ACCESS_KEY", "aws-should-not-pass")
        .env("PASSED_BY_NAME", "yes-passed");
    let done = case.finished(cmd.output().unwrap(), std::time::Instant::now());
    assert_eq!(done.code, 0, "{}", done.stderr);
    let env = String::from_utf8(done.log("stdout.log")).unwrap();
    assert!(env.lines().any(|l| l.starts_with("PATH=")), "{env}");
    assert!(
        env.contains("EXTRA_SETTING=on") && env.contains("PASSED_BY_NAME=yes-passed"),
        "{env}"
    );
    assert!(
        !env.contains("HOST_ONLY_VARIABLE") && !env.contains("AWS_SECRET_ACCESS_KEY"),
        "{env}"
    );
    assert!(env.contains("WARDEN_DEADLINE="), "{env}");
}

#[test]
fn a_secret_given_with_env_appears_nowhere_but_the_agents_own_output() {
    const SECRET: &str = "s3cr3t-Value-9f8e7d";
    let case = Case::new();
    let secret_arg = format!("API_TOKEN={SECRET}");
    // The secret is printed by the agent, and is also on its command line.
    let script = format!("echo the token is $API_TOKEN; echo also {SECRET} in an argument; exit 3");
    let done = case.run(&[
        "run",
        "exec",
        "--env",
        &secret_arg,
        "--json",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(done.code, 1, "{}", done.stderr);
    let out = String::from_utf8(done.log("stdout.log")).unwrap();
    assert!(
        out.contains(SECRET),
        "the agent's own output is kept as it is"
    );
    for entry in std::fs::read_dir(&done.run_dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "stdout.log" {
            continue;
        }
        let text = String::from_utf8_lossy(&std::fs::read(entry.path()).unwrap()).into_owned();
        assert!(!text.contains(SECRET), "{name} leaks the secret:\n{text}");
    }
    assert!(
        !done.stderr.contains(SECRET),
        "the terminal shows the secret:\n{}",
        done.stderr
    );
    assert!(!done.stdout.contains(SECRET), "--json shows the secret");
    assert!(done.stderr.contains("***"), "{}", done.stderr);
    assert!(done.report()["command"].to_string().contains("***"));
}

/// A stand-in for the docker client, for what needs no engine (requests
/// refused before anything starts); what a container does is tested
/// against the real engines in `containers.rs`. Records its arguments and
/// whether the secret reached its environment; `run` runs the command
/// after the image; `rm -f NAME` is logged; `ps` (the look for dead
/// wardens' containers) lists none.
fn fake_docker(case: &Case) -> PathBuf {
    let dir = case.path().join("bin");
    std::fs::create_dir_all(&dir).unwrap();
    let script = format!(
        r#"#!/bin/sh
log='{log}'
if [ "$1" = rm ]; then echo "rm $*" >> "$log"; exit 0; fi
if [ "$1" = ps ]; then exit 0; fi
printf '%s\n' "$@" > '{args}'
[ -n "$API_TOKEN" ] && echo "token in env" >> "$log"
while [ "$1" != test-image ]; do shift; done
shift
exec "$@"
"#,
        log = case.path().join("docker.log").display(),
        args = case.path().join("docker.args").display()
    );
    let bin = dir.join("docker");
    std::fs::write(&bin, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

#[test]
fn sandbox_auto_picks_bwrap_here() {
    let case = Case::new();
    let home = home_with_ssh_key(&case);
    let mut cmd = case.command(&["run", "exec", "--sandbox", "auto", "--", "true"]);
    cmd.env("HOME", &home);
    let done = case.finished(cmd.output().unwrap(), std::time::Instant::now());
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(
        done.stderr.contains("sandbox auto: bwrap"),
        "{}",
        done.stderr
    );
    assert_eq!(done.report()["sandbox"], "bwrap");
}

#[test]
fn bad_sandbox_requests_start_nothing() {
    let case = Case::new();
    let done = case.run(&["run", "exec", "--sandbox", "jail", "--", "true"]);
    assert_eq!(done.code, 2);
    assert!(
        done.stderr.contains("`jail`") && done.stderr.contains("bwrap"),
        "{}",
        done.stderr
    );

    fake_docker(&case);
    let mut cmd = case.command(&["run", "exec", "--sandbox", "docker", "--", "true"]);
    cmd.env(
        "PATH",
        format!("{}:/usr/bin:/bin", case.path().join("bin").display()),
    );
    let done = case.finished(cmd.output().unwrap(), std::time::Instant::now());
    assert_eq!(done.code, 2, "{}", done.stderr);
    assert!(done.stderr.contains("--image"), "{}", done.stderr);

    let mut cmd = case.command(&["run", "exec", "--sandbox", "bwrap", "--", "true"]);
    cmd.env("PATH", "/nonexistent");
    let done = case.finished(cmd.output().unwrap(), std::time::Instant::now());
    assert_eq!(done.code, 6, "{}", done.stderr);
    assert!(done.stderr.contains("bubblewrap"), "{}", done.stderr);

    let done = case.run(&["run", "exec", "--no-network", "--", "true"]);
    assert_eq!(done.code, 2);
    assert!(done.stderr.contains("need a sandbox"), "{}", done.stderr);

    let done = case.run(&["run", "exec", "--env", "1BAD", "--", "true"]);
    assert_eq!(done.code, 2);
    assert!(done.stderr.contains("NAME=VALUE"), "{}", done.stderr);
    assert!(!case.run_dir().exists(), "nothing may start on bad input");
}
