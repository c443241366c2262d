//! Claude Code and Codex inside a container, on both real engines, against
//! the fake model server on the host's loopback.
//!
//! The image is the one `.ci/containers up` builds for the CLIs
//! (`WARDEN_CI_AGENT_IMAGE`: Debian with Node.js and git); the CLIs
//! themselves are mounted read-only at their host path. The container
//! shares the host's network (`--container-network host`) so that it can
//! reach the server on 127.0.0.1. Without the variable the tests say they
//! were skipped; under `CI=true` that is a failure.

use std::process::Command;
use std::time::{Duration, Instant};

use warden_fake_model::Turn;

use crate::kit::Kit;

const ENGINES: [&str; 2] = ["docker", "podman"];

fn image() -> Option<String> {
    match std::env::var("WARDEN_CI_AGENT_IMAGE") {
        Ok(i) if !i.is_empty() => Some(i),
        _ if std::env::var("CI").is_ok_and(|v| v == "true") => panic!(
            "CI=true but WARDEN_CI_AGENT_IMAGE is not set: run `.ci/containers up DIR` first"
        ),
        _ => {
            eprintln!("SKIPPED: no WARDEN_CI_AGENT_IMAGE (run `.ci/containers up DIR`)");
            None
        }
    }
}

/// The directory the CLIs are installed in (their links point inside it).
fn agents_dir(kit: &Kit) -> std::path::PathBuf {
    let bin = std::fs::canonicalize(&kit.bin).unwrap();
    bin.ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "node_modules"))
        .expect("the CLI is installed under a node_modules directory")
        .to_path_buf()
}

/// Whether the engine still lists the container `name` after a moment.
fn container_left(engine: &str, name: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = Command::new(engine)
            .args(["ps", "-a", "-q", "--filter", &format!("name=^{name}$")])
            .output()
            .expect("the engine's client");
        if out.stdout.iter().all(u8::is_ascii_whitespace) {
            return false;
        }
        if Instant::now() > deadline {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A tool call that writes into the work tree and tells where it ran, then
/// a final answer: the run succeeds, the tool ran inside the container,
/// its file is on the host, the tokens are counted, nothing is left.
fn tool_call_in_a_container(agent: &'static str) {
    let Some(image) = image() else { return };
    for engine in ENGINES {
        let script = vec![
            Turn::Shell(
                "echo made-in-the-container > made.txt; \
                 test -e /.dockerenv -o -e /run/.containerenv && echo inside-a-container"
                    .into(),
            ),
            Turn::Text("all done".into()),
        ];
        let Some(mut kit) = Kit::new(agent, script) else {
            return;
        };
        // The CLI by a path the container has: only the install is mounted.
        let dir = std::fs::canonicalize(kit.bin.parent().unwrap()).unwrap();
        kit.bin = dir.join(kit.bin.file_name().unwrap());
        let agents = agents_dir(&kit);
        let agents = agents.to_str().unwrap();
        let mut flags = vec![
            "--timeout",
            "120s",
            "--sandbox",
            engine,
            "--image",
            &image,
            "--container-network",
            "host",
            "--ro",
            agents,
        ];
        for name in &kit.sandbox_env {
            flags.extend(["--env", name]);
        }
        let done = kit.run("write a file through the shell", &flags);
        let why = format!(
            "{engine}: exit {}\n--- warden stderr:\n{}\n--- agent stderr:\n{}\n--- agent stdout:\n{}",
            done.code,
            done.stderr,
            String::from_utf8_lossy(&done.log("stderr.log")),
            String::from_utf8_lossy(&done.log("stdout.log")),
        );
        assert_eq!(done.code, 0, "{why}");
        let r = done.report();
        assert_eq!(r["verdict"], "succeeded", "{why}");
        assert_eq!(r["sandbox"], engine, "{why}");
        assert!(
            r["final_text"]
                .as_str()
                .is_some_and(|t| t.contains("all done")),
            "{why}"
        );
        assert!(r["tokens"]["input"].as_u64().unwrap_or(0) > 0, "{why}");
        assert_eq!(
            std::fs::read_to_string(kit.case.path().join("made.txt"))
                .unwrap_or_default()
                .trim(),
            "made-in-the-container",
            "the tool's file is in the work tree on the host\n{why}"
        );
        let finished = done.events_of("tool_finished");
        assert!(
            finished.iter().any(|e| e["output"]
                .as_str()
                .is_some_and(|o| o.contains("inside-a-container"))),
            "the tool ran inside the container: {finished:?}\n{why}"
        );
        assert_eq!(
            r["orphans"].as_array().map(Vec::len),
            Some(0),
            "the engine's own processes are not orphans\n{why}"
        );
        let id = r["run_id"].as_str().unwrap();
        assert!(
            !container_left(engine, &format!("warden-{id}")),
            "the container outlived the run\n{why}"
        );
    }
}

#[test]
fn claude_runs_a_tool_in_a_container() {
    tool_call_in_a_container("claude");
}

#[test]
fn codex_runs_a_tool_in_a_container() {
    tool_call_in_a_container("codex");
}
