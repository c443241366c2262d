//! The container sandbox against the real engines: Docker's daemon and
//! Podman, both started by `.ci/containers`, and the image it builds from
//! Debian's archive (`WARDEN_CI_IMAGE`). Each promise is held on both.
//! Without `WARDEN_CI_IMAGE` the tests say they were skipped; under
//! `CI=true` that is a failure.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{Case, Finished};

pub(crate) const ENGINES: [&str; 2] = ["docker", "podman"];

/// The image `.ci/containers up` made, or `None` (skipped) off CI.
pub(crate) fn image() -> Option<String> {
    match std::env::var("WARDEN_CI_IMAGE") {
        Ok(i) if !i.is_empty() => Some(i),
        _ if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true but WARDEN_CI_IMAGE is not set: run `.ci/containers up DIR` first")
        }
        _ => {
            eprintln!("skipped: no WARDEN_CI_IMAGE (run `.ci/containers up DIR`)");
            None
        }
    }
}

/// `warden run exec --sandbox ENGINE --image IMAGE FLAGS -- sh -c SCRIPT`.
pub(crate) fn contained(
    case: &Case,
    engine: &str,
    image: &str,
    flags: &[&str],
    script: &str,
) -> Finished {
    let mut args = vec!["run", "exec", "--sandbox", engine, "--image", image];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    case.run(&args)
}

/// The run's container, if the engine still has it (running or not).
pub(crate) fn leftover(engine: &str, done: &Finished) -> Option<String> {
    let id = done.report()["run_id"].as_str().unwrap().to_string();
    // `--rm` removes it as the client exits; give the engine a moment.
    still_there(engine, &format!("warden-{id}"), Duration::from_secs(10))
}

/// The container `name`, if the engine still lists it after `within`.
pub(crate) fn still_there(engine: &str, name: &str, within: Duration) -> Option<String> {
    let deadline = Instant::now() + within;
    loop {
        let out = Command::new(engine)
            .args(["ps", "-a", "-q", "--filter", &format!("name=^{name}$")])
            .output()
            .expect("the engine's client");
        let listed = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if listed.is_empty() {
            return None;
        }
        if Instant::now() > deadline {
            return Some(format!("{name}: {listed}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn output_is_kept_byte_for_byte_and_the_container_goes_with_the_run() {
    let Some(image) = image() else { return };
    for engine in ENGINES {
        let case = Case::new();
        let done = contained(
            &case,
            engine,
            &image,
            &["-q"],
            "seq 1 100000; printf 'no newline at the end'; echo to-stderr >&2",
        );
        assert_eq!(done.code, 0, "{engine}: {}", done.stderr);
        let mut want: String = (1..=100_000).map(|n| format!("{n}\n")).collect();
        want.push_str("no newline at the end");
        assert_eq!(
            String::from_utf8(std::fs::read(done.run_dir.join("stdout.log")).unwrap()).unwrap(),
            want,
            "{engine}"
        );
        let report = done.report();
        assert_eq!(report["sandbox"], engine);
        assert_eq!(
            leftover(engine, &done),
            None,
            "{engine}: the container stayed"
        );
    }
}

#[test]
fn the_work_directory_is_mounted_at_its_path_and_only_named_variables_pass() {
    let Some(image) = image() else { return };
    for engine in ENGINES {
        let case = Case::new();
        let mut cmd = case.command(&[
            "run",
            "exec",
            "--sandbox",
            engine,
            "--image",
            &image,
            "-q",
            "--env",
            "GIVEN_SECRET=s3cret-value-for-the-test",
            "--",
            "sh",
            "-c",
            "pwd > where.txt; echo \"given=$GIVEN_SECRET host=${HOST_ONLY:-unset}\" > env.txt",
        ]);
        cmd.env("HOST_ONLY", "from-the-host");
        let done = case.finished(cmd.output().unwrap(), Instant::now());
        assert_eq!(done.code, 0, "{engine}: {}", done.stderr);
        let path = |f: &str| std::fs::read_to_string(case.path().join(f)).unwrap();
        assert_eq!(
            path("where.txt").trim(),
            case.path().to_str().unwrap(),
            "{engine}"
        );
        assert_eq!(
            path("env.txt").trim(),
            "given=s3cret-value-for-the-test host=unset",
            "{engine}"
        );
        let report = std::fs::read_to_string(done.run_dir.join("run.json")).unwrap();
        assert!(
            !report.contains("s3cret-value-for-the-test"),
            "{engine}: the secret is in run.json"
        );
    }
}

#[test]
fn no_network_leaves_only_loopback() {
    let Some(image) = image() else { return };
    for engine in ENGINES {
        let case = Case::new();
        let done = contained(
            &case,
            engine,
            &image,
            &["-q", "--no-network"],
            "ls /sys/class/net > nets.txt",
        );
        assert_eq!(done.code, 0, "{engine}: {}", done.stderr);
        let nets = std::fs::read_to_string(case.path().join("nets.txt")).unwrap();
        assert_eq!(nets.trim(), "lo", "{engine}");
    }
}

#[test]
fn a_stall_and_the_run_clock_end_the_run_and_its_container() {
    let Some(image) = image() else { return };
    for engine in ENGINES {
        for (flags, verdict) in [
            (["--stall-timeout", "1s"], "stalled"),
            (["--timeout", "1s"], "timed_out"),
        ] {
            let case = Case::new();
            let mut all = vec!["-q", "--kill-grace", "1s"];
            all.extend_from_slice(&flags);
            // A child in the background, in a session of its own, that
            // the container's end must take too.
            // It ignores SIGTERM: the kill after the grace takes it, and
            // the engine's helpers with it.
            let done = contained(
                &case,
                engine,
                &image,
                &all,
                "trap '' TERM; setsid sleep 1000 & echo started; sleep 1000",
            );
            let report = done.report();
            assert_eq!(report["verdict"], verdict, "{engine}: {}", done.stderr);
            // The engine's own processes (Podman's conmon and its
            // cleanup) are not the agent's orphans.
            let named = report["orphans"].to_string();
            assert!(
                !named.contains("conmon") && !named.contains("container cleanup"),
                "{engine}: the engine's helpers named as orphans: {named}"
            );
            assert!(
                report["error"].is_null()
                    || !report["error"]
                        .as_str()
                        .unwrap()
                        .contains("moved themselves"),
                "{engine}: {}",
                report["error"]
            );
            assert!(
                done.elapsed < Duration::from_secs(30),
                "{engine}: took {:?}",
                done.elapsed
            );
            assert_eq!(
                leftover(engine, &done),
                None,
                "{engine}: the container stayed"
            );
        }
    }
}

/// SIGTERM or SIGINT to warden: the run is cancelled and its container
/// goes with it.
#[test]
fn sigterm_or_sigint_to_warden_cancels_the_run_and_removes_its_container() {
    let Some(image) = image() else { return };
    for engine in ENGINES {
        for signal in ["TERM", "INT"] {
            let case = Case::new();
            let child = case.spawn(&[
                "run",
                "exec",
                "--sandbox",
                engine,
                "--image",
                &image,
                "--kill-grace",
                "1s",
                "--",
                "sh",
                "-c",
                "echo ready; sleep 1000",
            ]);
            case.wait_for_output("stdout.log", "ready", Duration::from_secs(30));
            crate::support::kill(child.id(), signal);
            let out = child.wait_with_output().unwrap();
            let done = case.finished(out, Instant::now());
            assert_eq!(done.code, 130, "{engine} {signal}: {}", done.stderr);
            assert_eq!(done.report()["verdict"], "cancelled", "{engine} {signal}");
            assert_eq!(
                leftover(engine, &done),
                None,
                "{engine} {signal}: the container stayed"
            );
        }
    }
}

#[test]
fn a_container_does_not_outlive_a_sigkilled_warden() {
    let Some(image) = image() else { return };
    for engine in ENGINES {
        let case = Case::new();
        let child = case.spawn(&[
            "run",
            "exec",
            "--sandbox",
            engine,
            "--image",
            &image,
            "--",
            "sh",
            "-c",
            "echo ready; sleep 1000",
        ]);
        case.wait_for_output("stdout.log", "ready", Duration::from_secs(30));
        let text = std::fs::read_to_string(case.run_dir().join("run.json")).unwrap();
        let report: serde_json::Value = serde_json::from_str(&text).unwrap();
        let name = format!("warden-{}", report["run_id"].as_str().unwrap());
        crate::support::kill(child.id(), "KILL");
        let _ = child.wait_with_output();
        // The shim is given to another parent and removes the container.
        let left = still_there(engine, &name, Duration::from_secs(30));
        if left.is_some() {
            let _ = Command::new(engine).args(["rm", "-f", &name]).output();
        }
        assert_eq!(left, None, "{engine}: the container outlived warden");
        case.assert_nothing_left();
    }
}

#[test]
fn the_kill_grace_is_one_sigterm_then_the_grace() {
    let Some(image) = image() else { return };
    for engine in ENGINES {
        let case = Case::new();
        // Counts the SIGTERMs it gets, and takes a second to finish after
        // the first: within a 5 s grace it must be let finish.
        let done = contained(
            &case,
            engine,
            &image,
            &["--timeout", "1s", "--kill-grace", "5s"],
            "n=0; trap 'n=$((n+1)); echo term $n; t=1' TERM; t=; echo ready; \
             while [ -z \"$t\" ]; do sleep 0.1; done; \
             i=0; while [ $i -lt 10 ]; do sleep 0.1; i=$((i+1)); done; \
             echo finished after $n term",
        );
        let out = std::fs::read_to_string(done.run_dir.join("stdout.log")).unwrap();
        assert_eq!(done.report()["verdict"], "timed_out", "{engine}: {out}");
        assert!(
            out.contains("finished after 1 term"),
            "{engine}: the grace was cut short or SIGTERM came twice: {out}"
        );
        assert!(!out.contains("term 2"), "{engine}: {out}");
        assert_eq!(
            leftover(engine, &done),
            None,
            "{engine}: the container stayed"
        );
    }
}

#[test]
fn doctor_finds_both_engines_usable() {
    let Some(_) = image() else { return };
    let out = Command::new(crate::support::WARDEN)
        .arg("doctor")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    for engine in ENGINES {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(engine))
            .unwrap_or_else(|| panic!("no line for {engine}: {text}"));
        assert!(
            line.contains("usable") && line.contains("; engine "),
            "{engine}: {line}"
        );
    }
}

/// warden's records and the host's daemons are not in the container even
/// where they lie inside its mounts: a batch directory inside the work
/// directory is an empty read-only directory there (no file of it is seen), a daemon's socket is
/// an empty file (nothing listens), and the socket `--allow-socket` names
/// is the real one.
#[test]
fn records_and_sockets_inside_the_work_directory_are_covered() {
    let Some(image) = image() else { return };
    for engine in ENGINES {
        let case = Case::new();
        let work = std::fs::canonicalize(case.path()).unwrap();
        let daemon = work.join("daemon.sock");
        let allowed = work.join("allowed.sock");
        let _daemon = std::os::unix::net::UnixListener::bind(&daemon).unwrap();
        let _allowed = std::os::unix::net::UnixListener::bind(&allowed).unwrap();
        // Nested records are covered one by one: their mount points are
        // empty directories in the cover, never a file.
        let script = "{ find bd ! -type d | wc -l; touch bd/x 2>/dev/null && echo bd-writable; \
             test -S daemon.sock && echo daemon-is-a-socket; \
             test -S allowed.sock && echo allowed-is-a-socket; } > seen.txt";
        let toml = format!(
            "[defaults]\nagent = \"exec\"\nsandbox = {engine:?}\nimage = {image:?}\n\
             allow_socket = [{allowed:?}]\n\n[[run]]\nname = \"one\"\n\
             command = [\"sh\", \"-c\", {script:?}]\n",
            allowed = allowed.display().to_string()
        );
        std::fs::write(work.join("b.toml"), toml).unwrap();
        let bd = work.join("bd");
        let mut cmd = case.command(&["batch", "b.toml", "--dir", bd.to_str().unwrap()]);
        cmd.env_remove("WARDEN_RUN_DIR");
        let done = case.finished(cmd.output().unwrap(), Instant::now());
        assert_eq!(done.code, 0, "{engine}: {}", done.stderr);
        let seen = std::fs::read_to_string(work.join("seen.txt")).unwrap();
        assert_eq!(
            seen.lines().collect::<Vec<_>>(),
            ["0", "allowed-is-a-socket"],
            "{engine}: the batch directory must be empty and read-only, the daemon's socket \
             hidden, the allowed one there"
        );
        assert!(
            bd.join("plan.json").is_file() || bd.join("batch.json").is_file(),
            "{engine}: the batch's own records are on the host: {:?}",
            std::fs::read_dir(&bd).map(|d| d.count())
        );
    }
}
