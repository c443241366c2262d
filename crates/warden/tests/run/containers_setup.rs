//! Against the real engines, what is the engine's and what the agent's:
//! an engine that cannot create the container (no daemon, no permission
//! on its socket, no such image) ends the run as a set-up failure, an
//! agent that exits with the engine's codes does not; the engine's own
//! warnings go to warden's stderr, not the agent's log; the engine's
//! variables of warden's environment reach the client and not the
//! container; containers carry their run and owner, and those of dead
//! owners go at the next start. Skipped as `containers.rs` is.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::containers::{ENGINES, contained, image, leftover, still_there};
use crate::support::{Case, Finished};

/// The variable that points each engine's client at its engine.
fn host_var(engine: &str) -> &'static str {
    if engine == "docker" {
        "DOCKER_HOST"
    } else {
        "CONTAINER_HOST"
    }
}

/// A run ended as a set-up failure by the engine: `spawn_failed`, exit 6,
/// its reason naming the engine and `fix`.
fn assert_engine_failed(engine: &str, done: &Finished, fix: &str) {
    let report = done.report();
    let reason = report["reason"].as_str().unwrap_or_default().to_string();
    assert_eq!(
        (done.code, done.verdict()),
        (6, "spawn_failed".to_string()),
        "{engine}: {reason}\n{}",
        done.stderr
    );
    assert!(
        reason.starts_with(&format!("{engine} could not create the container: \"")),
        "{engine}: {reason}"
    );
    assert!(reason.contains(fix), "{engine}: {reason}");
    assert!(done.stderr.contains(fix), "{engine}: {}", done.stderr);
}

#[test]
fn an_image_that_is_not_there_is_a_set_up_failure() {
    let Some(_) = image() else { return };
    for engine in ENGINES {
        let case = Case::new();
        // No registry is reachable: the pull fails.
        let done = contained(
            &case,
            engine,
            "localhost/warden-no-such-image:1",
            &[],
            "true",
        );
        assert_engine_failed(
            engine,
            &done,
            &format!("{engine} pull localhost/warden-no-such-image:1"),
        );
    }
}

#[test]
fn no_daemon_is_a_set_up_failure() {
    let Some(image) = image() else { return };
    for engine in ENGINES {
        let case = Case::new();
        let socket = case.path().join("no-daemon.sock");
        let mut cmd = case.command(&[
            "run",
            "exec",
            "--sandbox",
            engine,
            "--image",
            &image,
            "--",
            "true",
        ]);
        cmd.env(host_var(engine), format!("unix://{}", socket.display()));
        let done = case.finished(cmd.output().unwrap(), Instant::now());
        let fix = if engine == "docker" {
            "start the daemon"
        } else {
            "start the Podman service"
        };
        assert_engine_failed(engine, &done, fix);
    }
}

/// warden as an unprivileged user, its engine's socket one only root may
/// use (a listening socket of this test, mode 0600).
#[test]
fn no_permission_on_the_engines_socket_is_a_set_up_failure() {
    let Some(image) = image() else { return };
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: needs root, to run warden as another user");
        return;
    }
    for engine in ENGINES {
        let case = Case::new();
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("engine.sock");
        let _listening = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600)).unwrap();
        for d in [dir.path(), case.path(), case.state.path()] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        let warden = case.command(&[]);
        let mut cmd = Command::new("setpriv");
        cmd.args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            "--",
        ])
        .arg(warden.get_program())
        .args([
            "run",
            "exec",
            "--sandbox",
            engine,
            "--image",
            &image,
            "--",
            "true",
        ]);
        for (k, v) in warden.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        cmd.current_dir(case.path())
            .env("HOME", case.path())
            .env(host_var(engine), format!("unix://{}", socket.display()))
            .stdin(std::process::Stdio::null());
        let done = case.finished(cmd.output().unwrap(), Instant::now());
        let fix = if engine == "docker" {
            "add yourself to the docker group"
        } else {
            "give this user access to it"
        };
        assert_engine_failed(engine, &done, fix);
    }
}

/// An agent may exit 125 or 126 itself, and print what an engine would:
/// its container existed, so the failure is the agent's.
#[test]
fn an_agent_that_exits_with_the_engines_codes_failed_itself() {
    let Some(image) = image() else { return };
    for engine in ENGINES {
        for code in [125, 126] {
            let case = Case::new();
            let done = contained(
                &case,
                engine,
                &image,
                &[],
                &format!(
                    "echo '{engine}: Error response from daemon: Cannot connect to the Docker \
                     daemon' >&2; echo 'Error: unable to connect to Podman socket' >&2; exit {code}"
                ),
            );
            assert_eq!(
                (done.code, done.verdict()),
                (1, "agent_failed".to_string()),
                "{engine} {code}: {}",
                done.stderr
            );
            assert_eq!(done.report()["exit_code"], code, "{engine}");
            assert_eq!(
                done.report()["reason"],
                format!("exited with code {code}"),
                "{engine}"
            );
        }
    }
}

/// A container the engine created but that never ran the agent is a
/// set-up failure too: the runtime refused to start it (a file mounted
/// over a directory), or the image has no such program.
#[test]
fn a_container_that_could_not_start_the_agent_is_a_set_up_failure() {
    let Some(image) = image() else { return };
    for engine in ENGINES {
        let case = Case::new();
        let done = case.run(&[
            "run",
            "exec",
            "--sandbox",
            engine,
            "--image",
            &image,
            "--engine-arg=-v=/etc/hostname:/usr",
            "--",
            "true",
        ]);
        assert_eq!(
            (done.code, done.verdict()),
            (6, "spawn_failed".to_string()),
            "{engine}: {}",
            done.stderr
        );
        let reason = done.report()["reason"].as_str().unwrap().to_string();
        assert!(
            reason.starts_with(&format!(
                "{engine} created the container but could not start it"
            )),
            "{engine}: {reason}"
        );
        let case = Case::new();
        let done = case.run(&[
            "run",
            "exec",
            "--sandbox",
            engine,
            "--image",
            &image,
            "--",
            "no-such-agent-cli",
        ]);
        assert_eq!(
            (done.code, done.verdict()),
            (6, "spawn_failed".to_string()),
            "{engine}: {}",
            done.stderr
        );
        let reason = done.report()["reason"].as_str().unwrap().to_string();
        assert!(
            reason.starts_with(&format!(
                "the agent's program could not be started in the image {image}"
            )),
            "{engine}: {reason}"
        );
        assert_eq!(leftover(engine, &done), None, "{engine}");
    }
}

/// With the temporary directory inside the work tree, the file the engine
/// writes the container's id to is made elsewhere: an agent that removes
/// every id file it can reach and then fails like the engine still failed
/// itself.
#[test]
fn the_container_id_file_is_out_of_the_agents_reach() {
    let Some(image) = image() else { return };
    for engine in ENGINES {
        let case = Case::new();
        let tmp = case.path().join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        let mut cmd = case.command(&[
            "run",
            "exec",
            "--sandbox",
            engine,
            "--image",
            &image,
            "--",
            "sh",
            "-c",
            "rm -rf tmp/warden-cid-*; \
             echo 'docker: Error response from daemon: pull access denied' >&2; exit 125",
        ]);
        cmd.env("TMPDIR", &tmp);
        let done = case.finished(cmd.output().unwrap(), Instant::now());
        assert_eq!(
            (done.code, done.verdict()),
            (1, "agent_failed".to_string()),
            "{engine}: {}",
            done.stderr
        );
    }
}

/// Each engine made to warn for real: Docker's client about a config file
/// it cannot parse (`DOCKER_CONFIG`, from warden's environment), Podman
/// about the events it cannot write (`CONTAINERS_CONF` with the journal as
/// its events logger, and no journal here). The warnings before the
/// container's own output are shown by warden and are not in `stderr.log`.
#[test]
fn the_engines_warnings_go_to_wardens_stderr_not_the_agents_log() {
    let Some(image) = image() else { return };
    for engine in ENGINES {
        let case = Case::new();
        let conf = case.path().join("engine-conf");
        std::fs::create_dir_all(&conf).unwrap();
        let (var, value, said) = if engine == "docker" {
            std::fs::write(conf.join("config.json"), "{bad").unwrap();
            (
                "DOCKER_CONFIG",
                conf.clone(),
                "WARNING: Error parsing config file",
            )
        } else {
            let file = conf.join("containers.conf");
            // The settings this machine's Podman needs (as `.ci/containers`
            // writes them), and the journal as the events logger.
            std::fs::write(
                &file,
                "[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = \"runc\"\n\
                 cgroup_manager = \"cgroupfs\"\nevents_logger = \"journald\"\n",
            )
            .unwrap();
            ("CONTAINERS_CONF", file, "level=error msg=\"Unable to write")
        };
        if engine == "podman" && std::path::Path::new("/run/systemd/journal/socket").exists() {
            eprintln!("skipped podman: a journal is listening, Podman would not warn");
            continue;
        }
        let mut cmd = case.command(&[
            "run",
            "exec",
            "--sandbox",
            engine,
            "--image",
            &image,
            "--",
            "sh",
            "-c",
            "echo out; echo err >&2",
        ]);
        cmd.env(var, &value);
        let done = case.finished(cmd.output().unwrap(), Instant::now());
        assert_eq!(done.code, 0, "{engine}: {}", done.stderr);
        let stderr_log = String::from_utf8(done.log("stderr.log")).unwrap();
        assert!(
            stderr_log.starts_with("err\n"),
            "{engine}: the engine's lines before the agent's are in its log: {stderr_log:?}"
        );
        assert!(
            done.stderr
                .lines()
                .any(|l| l.contains("warning: container engine: ") && l.contains(said)),
            "{engine}: {}",
            done.stderr
        );
        let shown = done.events_of("engine_line");
        assert!(!shown.is_empty(), "{engine}");
        assert_eq!(String::from_utf8(done.log("stdout.log")).unwrap(), "out\n");
    }
}

/// `DOCKER_HOST` in warden's environment, pointing at the running daemon
/// by another path, is the client's: the run works through it, and the
/// container does not see it.
#[test]
fn docker_host_reaches_the_client_and_not_the_container() {
    let Some(image) = image() else { return };
    let case = Case::new();
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("docker.sock");
    std::os::unix::fs::symlink("/var/run/docker.sock", &link).unwrap();
    let mut cmd = case.command(&[
        "run",
        "exec",
        "--sandbox",
        "docker",
        "--image",
        &image,
        "--",
        "sh",
        "-c",
        "echo \"host=${DOCKER_HOST:-unset}\"",
    ]);
    cmd.env("DOCKER_HOST", format!("unix://{}", link.display()));
    let done = case.finished(cmd.output().unwrap(), Instant::now());
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(
        String::from_utf8(done.log("stdout.log")).unwrap(),
        "host=unset\n"
    );
    // And through a path where no daemon is, the run fails: the variable
    // is the one the client used.
    let case = Case::new();
    let mut cmd = case.command(&[
        "run",
        "exec",
        "--sandbox",
        "docker",
        "--image",
        &image,
        "--",
        "true",
    ]);
    cmd.env(
        "DOCKER_HOST",
        format!("unix://{}", dir.path().join("none.sock").display()),
    );
    let done = case.finished(cmd.output().unwrap(), Instant::now());
    assert_eq!(done.code, 6, "{}", done.stderr);
    // The agent's own `--env DOCKER_HOST` goes into the container, never
    // to the client: the run's end asks warden's engine, so a client sent
    // elsewhere would leave its container where nothing removes it.
    let case = Case::new();
    let mut cmd = case.command(&[
        "run",
        "exec",
        "--sandbox",
        "docker",
        "--image",
        &image,
        "--env",
        "DOCKER_HOST=unix:///nowhere.sock",
        "--",
        "sh",
        "-c",
        "echo \"host=${DOCKER_HOST:-unset}\"",
    ]);
    cmd.env("DOCKER_HOST", format!("unix://{}", link.display()));
    let done = case.finished(cmd.output().unwrap(), Instant::now());
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(
        String::from_utf8(done.log("stdout.log")).unwrap(),
        "host=unix:///nowhere.sock\n"
    );
}

/// This test process as an owner label names it, and the same with
/// another start time: a process that had this pid once, and is gone.
fn owners() -> (String, String) {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    let machine = read("/etc/machine-id");
    let boot = read("/proc/sys/kernel/random/boot_id");
    let pidns: String = std::fs::read_link("/proc/self/ns/pid")
        .unwrap()
        .to_string_lossy()
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    let stat = read("/proc/self/stat");
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let start: u64 = after.split(' ').nth(19).unwrap().parse().unwrap();
    let pid = std::process::id();
    (
        format!("{machine}:{boot}:{pidns}:{pid}:{start}"),
        format!("{machine}:{boot}:{pidns}:{pid}:{}", start + 1),
    )
}

/// Starts a container named `name` labelled as warden's, owned by `owner`.
fn start_labelled(engine: &str, image: &str, name: &str, owner: &str) {
    let out = Command::new(engine)
        .args(["run", "-d", "--init", "--name", name])
        .args(["--label", &format!("warden.owner={owner}")])
        .args(["--label", "warden.run=left-behind"])
        .args([image, "sleep", "600"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{engine}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn containers_carry_their_run_and_owner_and_dead_owners_leftovers_go() {
    let Some(image) = image() else { return };
    let (alive, dead) = owners();
    for engine in ENGINES {
        let case = Case::new();
        let gone = format!("warden-test-dead-owner-{}", case.mark);
        let kept = format!("warden-test-live-owner-{}", case.mark);
        start_labelled(engine, &image, &gone, &dead);
        start_labelled(engine, &image, &kept, &alive);
        let done = contained(&case, engine, &image, &[], "echo done");
        assert_eq!(done.code, 0, "{engine}: {}", done.stderr);
        assert_eq!(
            still_there(engine, &gone, Duration::from_secs(20)),
            None,
            "{engine}: the container of a dead owner stayed"
        );
        assert!(
            still_there(engine, &kept, Duration::ZERO).is_some(),
            "{engine}: the container of a live owner was removed"
        );
        let _ = Command::new(engine).args(["rm", "-f", &kept]).output();
        assert_eq!(leftover(engine, &done), None, "{engine}");
    }
}

/// A run's container, while it runs, carries `warden.run` (the run's id)
/// and `warden.owner` (this warden).
#[test]
fn a_running_container_is_labelled_with_its_run_and_owner() {
    let Some(image) = image() else { return };
    for engine in ENGINES {
        let case = Case::new();
        let mut child = case.spawn(&[
            "run",
            "exec",
            "--sandbox",
            engine,
            "--image",
            &image,
            "--",
            "sleep",
            "30",
        ]);
        // The run's id from its first report, then its container by the
        // label that carries that id.
        let deadline = Instant::now() + Duration::from_secs(30);
        let cid = loop {
            let run_id = std::fs::read_to_string(case.run_dir().join("run.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .and_then(|r| r["run_id"].as_str().map(str::to_string));
            if let Some(run_id) = run_id {
                let out = Command::new(engine)
                    .args(["ps", "-q", "--no-trunc", "--filter"])
                    .arg(format!("label=warden.run={run_id}"))
                    .output()
                    .unwrap();
                let listed = String::from_utf8_lossy(&out.stdout).trim().to_string();
                if !listed.is_empty() {
                    break listed;
                }
            }
            assert!(
                Instant::now() < deadline,
                "{engine}: no container labelled with the run"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let format =
            "{{index .Config.Labels \"warden.run\"}} {{index .Config.Labels \"warden.owner\"}}";
        let out = Command::new(engine)
            .args(["inspect", "--format", format, &cid])
            .output()
            .unwrap();
        let labels = String::from_utf8_lossy(&out.stdout).trim().to_string();
        crate::support::kill(child.id(), "TERM");
        let _ = child.wait();
        let report: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(case.run_dir().join("run.json")).unwrap(),
        )
        .unwrap();
        let run_id = report["run_id"].as_str().unwrap();
        let (run, owner) = labels.split_once(' ').unwrap_or_default();
        assert_eq!(run, run_id, "{engine}: {labels}");
        let parts: Vec<&str> = owner.split(':').collect();
        assert_eq!(parts.len(), 5, "{engine}: {owner}");
        assert_eq!(parts[3], child.id().to_string(), "{engine}: {owner}");
    }
}

/// Lines of the engine's shape are taken as the engine's only before the
/// agent's first other stderr line: after it, the agent's own `WARNING:`
/// and log-like lines stay in its log. One it prints first is shown as
/// the engine's (its shape is all there is to tell by), control
/// characters dropped.
#[test]
fn an_agents_lines_of_the_engines_shape_stay_in_its_log_after_its_first() {
    let Some(image) = image() else { return };
    for engine in ENGINES {
        let case = Case::new();
        let (first, later) = if engine == "docker" {
            ("WARNING: first \x1b[31mred", "WARNING: later")
        } else {
            (
                "time=\"t\" level=warning msg=\"first \x1b[31mred\"",
                "time=\"t\" level=warning msg=\"later\"",
            )
        };
        let script =
            format!("printf '%s\\n' '{first}' >&2; echo mine >&2; printf '%s\\n' '{later}' >&2");
        let done = contained(&case, engine, &image, &[], &script);
        assert_eq!(done.code, 0, "{engine}: {}", done.stderr);
        assert_eq!(
            String::from_utf8(done.log("stderr.log")).unwrap(),
            format!("mine\n{later}\n"),
            "{engine}"
        );
        let shown = done.events_of("engine_line");
        assert_eq!(shown.len(), 1, "{engine}: {shown:?}");
        let text = shown[0]["text"].as_str().unwrap();
        assert!(
            !text.contains('\x1b') && text.contains("first"),
            "{engine}: {text:?}"
        );
    }
}
