//! What users of a container sandbox rely on beyond the defaults, against
//! the real engines (as `containers.rs`, skipped without
//! `WARDEN_CI_IMAGE`): the container's network and the engine's own
//! arguments; the work tree's owner as the container's user, with a HOME
//! and the agent's state directory; devices, groups and extra mounts.

use std::io::Read;
use std::net::TcpListener;

use crate::containers::{ENGINES, contained, image, leftover};
use crate::support::Case;

#[test]
fn the_host_network_reaches_a_server_on_the_host_loopback_and_engine_args_pass() {
    let Some(image) = image() else { return };
    for engine in ENGINES {
        // A server only the host's loopback reaches, as a fake model
        // server is.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let case = Case::new();
        let done = contained(
            &case,
            engine,
            &image,
            &[
                "-q",
                "--container-network",
                "host",
                "--engine-arg",
                "--tmpfs=/scratch",
            ],
            &format!(
                "bash -c 'echo hello from {engine} > /dev/tcp/127.0.0.1/{port}' && \
                 grep -q ' /scratch tmpfs ' /proc/mounts && echo scratch is a tmpfs"
            ),
        );
        assert_eq!(done.code, 0, "{engine}: {}", done.stderr);
        let out = String::from_utf8(done.log("stdout.log")).unwrap();
        assert_eq!(out.trim(), "scratch is a tmpfs", "{engine}");
        // The container connected and wrote before it ended: the
        // connection waits in the listener's queue.
        listener.set_nonblocking(true).unwrap();
        let (mut conn, _) = listener.accept().expect("the container connected");
        conn.set_nonblocking(false).unwrap();
        let mut said = String::new();
        conn.read_to_string(&mut said).unwrap();
        assert_eq!(said, format!("hello from {engine}\n"));
        assert_eq!(leftover(engine, &done), None, "{engine}");
    }
}

#[test]
fn container_settings_are_refused_where_they_mean_nothing() {
    // Refused before anything starts: no engine is needed.
    for (flags, says) in [
        (
            vec!["--sandbox", "bwrap", "--container-network", "host"],
            "--container-network is for a container: set --sandbox to docker or podman (it is bwrap)",
        ),
        (
            vec!["--engine-arg", "--privileged"],
            "--engine-arg is for a container: set --sandbox to docker or podman (it is host)",
        ),
        (
            vec![
                "--sandbox",
                "docker",
                "--image",
                "img",
                "--no-network",
                "--container-network",
                "host",
            ],
            "--no-network cuts the network, and --container-network host would give the container one: drop one of them",
        ),
    ] {
        let case = Case::new();
        let mut args = vec!["run", "exec"];
        args.extend(flags);
        args.extend(["--", "true"]);
        let done = case.run(&args);
        assert_eq!(done.code, 2, "{args:?}: {}", done.stderr);
        assert!(done.stderr.contains(says), "{args:?}: {}", done.stderr);
    }
}

/// Gives `path` to uid and gid 1000, as a work tree checked out by a
/// user other than the one warden runs as.
fn give_to_1000(path: &std::path::Path) {
    std::os::unix::fs::chown(path, Some(1000), Some(1000)).unwrap();
}

fn owner(path: &std::path::Path) -> (u32, u32) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (m.uid(), m.gid())
}

#[test]
fn the_work_trees_owner_writes_as_itself_with_a_home_it_can_write() {
    let Some(image) = image() else { return };
    if !crate::support::is_root() {
        eprintln!("skipped: a work tree of another user needs root to make");
        return;
    }
    for engine in ENGINES {
        let case = Case::new();
        give_to_1000(case.path());
        // The image has no passwd entry for uid 1000.
        let done = contained(
            &case,
            engine,
            &image,
            &["-q"],
            "echo made > made.txt && touch \"$HOME/written\" && echo \"$(id -u):$(id -g) $HOME\"",
        );
        assert_eq!(done.code, 0, "{engine}: {}", done.stderr);
        let out = String::from_utf8(done.log("stdout.log")).unwrap();
        assert_eq!(out.trim(), "1000:1000 /home/warden", "{engine}");
        assert_eq!(
            owner(&case.path().join("made.txt")),
            (1000, 1000),
            "{engine}"
        );
        // `image` keeps the image's user (root here).
        let done = contained(
            &case,
            engine,
            &image,
            &["-q", "--container-user", "image", "--run-dir", "run-2"],
            "echo root > by-image-user.txt",
        );
        assert_eq!(done.code, 0, "{engine}: {}", done.stderr);
        assert_eq!(
            owner(&case.path().join("by-image-user.txt")),
            (0, 0),
            "{engine}"
        );
        assert_eq!(leftover(engine, &done), None, "{engine}");
    }
}

#[test]
fn the_agents_state_directory_lasts_from_one_run_to_the_next() {
    let Some(image) = image() else { return };
    if !crate::support::is_root() {
        eprintln!("skipped: a work tree of another user needs root to make");
        return;
    }
    for engine in ENGINES {
        let case = Case::new();
        give_to_1000(case.path());
        // The user's HOME on the host, with the CLI's state directory.
        let home = tempfile::tempdir().unwrap();
        let state = home.path().join(".claude");
        std::fs::create_dir(&state).unwrap();
        // A stand-in Claude Code, in the work tree (mounted), that keeps
        // a line per run in its state directory and says how many it saw.
        let cli = case.path().join("claude-cli");
        crate::support::write_script(
            &cli,
            "#!/bin/sh\necho \"$(id -u) $HOME\" >> \"$HOME/.claude/runs.txt\"\n\
             n=$(wc -l < \"$HOME/.claude/runs.txt\")\n\
             echo '{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"run '$n'\",\"num_turns\":1,\"session_id\":\"s\"}'\n",
        );
        give_to_1000(&cli);
        // Root's state directory would be no use to uid 1000: not
        // mounted, and said before the run.
        let mut cmd = case.command(&[
            "run",
            "claude",
            "hello",
            "--sandbox",
            engine,
            "--image",
            &image,
            "--agent-bin",
            cli.to_str().unwrap(),
            "--run-dir",
            "run-0",
        ]);
        cmd.env("HOME", home.path());
        let done = case.finished(cmd.output().unwrap(), std::time::Instant::now());
        let warning = format!(
            "warden: warning: the container runs as uid 1000 (--container-user), which does not own {}: not mounted",
            state.display()
        );
        assert!(done.stderr.contains(&warning), "{engine}: {}", done.stderr);
        assert_eq!(done.code, 0, "{engine}: {}", done.stderr);
        assert!(!state.join("runs.txt").exists(), "{engine}");
        give_to_1000(&state);
        for run in ["run-1", "run-2"] {
            let mut cmd = case.command(&[
                "run",
                "claude",
                "hello",
                "-q",
                "--sandbox",
                engine,
                "--image",
                &image,
                "--agent-bin",
                cli.to_str().unwrap(),
                "--run-dir",
                run,
            ]);
            cmd.env("HOME", home.path());
            let done = case.finished(cmd.output().unwrap(), std::time::Instant::now());
            assert_eq!(done.code, 0, "{engine}: {}", done.stderr);
        }
        let runs = std::fs::read_to_string(state.join("runs.txt")).unwrap();
        assert_eq!(runs, "1000 /home/warden\n1000 /home/warden\n", "{engine}");
        assert_eq!(owner(&state.join("runs.txt")), (1000, 1000), "{engine}");
    }
}

#[test]
fn devices_groups_and_extra_mounts_reach_the_container() {
    let Some(image) = image() else { return };
    for engine in ENGINES {
        let case = Case::new();
        let ro = tempfile::tempdir().unwrap();
        let rw = tempfile::tempdir().unwrap();
        std::fs::write(ro.path().join("data.txt"), "read me").unwrap();
        let (ro_dir, rw_dir) = (ro.path().display(), rw.path().display());
        let done = contained(
            &case,
            engine,
            &image,
            &[
                "-q",
                "--device",
                "/dev/zero:/dev/warden-zero",
                "--group-add",
                "4242",
                "--ro",
                ro.path().to_str().unwrap(),
                "--rw",
                rw.path().to_str().unwrap(),
            ],
            &format!(
                "head -c 3 /dev/warden-zero | od -An -tx1; id -G | tr ' ' '\\n' | grep -x 4242; \
                 cat {ro_dir}/data.txt; echo; \
                 echo written > {rw_dir}/out.txt; \
                 if echo no > {ro_dir}/no.txt 2>/dev/null; then echo ro-written; else echo ro-refused; fi"
            ),
        );
        assert_eq!(done.code, 0, "{engine}: {}", done.stderr);
        let out = String::from_utf8(done.log("stdout.log")).unwrap();
        let lines: Vec<&str> = out.lines().map(str::trim).collect();
        assert_eq!(
            lines,
            ["00 00 00", "4242", "read me", "ro-refused"],
            "{engine}"
        );
        assert_eq!(
            std::fs::read_to_string(rw.path().join("out.txt")).unwrap(),
            "written\n",
            "{engine}"
        );
        assert!(!ro.path().join("no.txt").exists(), "{engine}");
        assert_eq!(leftover(engine, &done), None, "{engine}");

        // A device the host does not have is named before anything starts.
        let case = Case::new();
        let done = contained(
            &case,
            engine,
            &image,
            &["-q", "--device", "/dev/warden-no-such-device"],
            "true",
        );
        assert_eq!(done.code, 2, "{engine}: {}", done.stderr);
        assert!(
            done.stderr
                .contains("--device /dev/warden-no-such-device: no such file or directory"),
            "{engine}: {}",
            done.stderr
        );
    }
}

#[test]
fn an_agents_own_image_in_warden_toml_beats_the_files_image() {
    let Some(image) = image() else { return };
    for engine in ENGINES {
        let case = Case::new();
        std::fs::write(
            case.path().join("warden.toml"),
            format!(
                "image = \"localhost/warden-no-such-image:1\"\n\n[agent.exec]\nimage = \"{image}\"\n"
            ),
        )
        .unwrap();
        let done = case.run(&[
            "run",
            "exec",
            "-q",
            "--sandbox",
            engine,
            "--",
            "sh",
            "-c",
            "echo in-the-image",
        ]);
        assert_eq!(done.code, 0, "{engine}: {}", done.stderr);
        assert_eq!(
            String::from_utf8(done.log("stdout.log")).unwrap(),
            "in-the-image\n",
            "{engine}"
        );
    }
    // An agent warden does not know is named, before anything starts.
    let case = Case::new();
    std::fs::write(
        case.path().join("warden.toml"),
        "[agent.claud]\nimage = \"x\"\n",
    )
    .unwrap();
    let done = case.run(&["run", "exec", "--", "true"]);
    assert_eq!(done.code, 2, "{}", done.stderr);
    assert!(
        done.stderr.contains("[agent.claud] in ")
            && done
                .stderr
                .contains("no agent is named `claud`; known agents: claude"),
        "{}",
        done.stderr
    );
}
