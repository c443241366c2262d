//! What users of a container sandbox rely on beyond the defaults, against
//! the real engines (as `containers.rs`, skipped without
//! `WARDEN_CI_IMAGE`): the container's network, the engine's own
//! arguments.

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
