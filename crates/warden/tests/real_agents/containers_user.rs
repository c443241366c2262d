//! Claude Code and Codex in a container as the owner of a work tree that
//! is not root's (uid 1000, which the image has no passwd entry for): the
//! CLI gets a HOME it can write, what it writes is the owner's on the
//! host, and a second run resumes the first one's session from the
//! state directory kept on the host. Both real engines, the fake model
//! server on the host's loopback.

use serde_json::Value;
use warden_fake_model::Turn;

use crate::containers::{agents_dir, container_left, image};
use crate::kit::Kit;

/// Gives everything under `path` to uid and gid 1000.
fn give_to_1000(path: &std::path::Path) {
    std::os::unix::fs::chown(path, Some(1000), Some(1000)).unwrap();
    if path.is_dir() && !path.is_symlink() {
        for entry in std::fs::read_dir(path).unwrap() {
            give_to_1000(&entry.unwrap().path());
        }
    }
}

fn resumes_as_the_trees_owner(agent: &'static str) {
    let Some(image) = image() else { return };
    if !crate::support::is_root() {
        eprintln!("SKIPPED: a work tree of another user needs root to make");
        return;
    }
    for engine in ["docker", "podman"] {
        let script = vec![
            Turn::Shell("echo first-step-$((40+2)) | tee made.txt".into()),
            Turn::Text("first run done".into()),
            Turn::Text("second run done".into()),
        ];
        let Some(mut kit) = Kit::new(agent, script) else {
            return;
        };
        let dir = std::fs::canonicalize(kit.bin.parent().unwrap()).unwrap();
        kit.bin = dir.join(kit.bin.file_name().unwrap());
        // Claude Code keeps its sessions in ~/.claude; Codex in CODEX_HOME.
        std::fs::create_dir_all(kit.case.path().join("home/.claude")).unwrap();
        give_to_1000(kit.case.path());
        let agents = agents_dir(&kit);
        let agents = agents.to_str().unwrap().to_string();
        let mut flags: Vec<String> = [
            "--timeout",
            "120s",
            "--sandbox",
            engine,
            "--image",
            &image,
            "--container-network",
            "host",
            "--ro",
            &agents,
        ]
        .map(String::from)
        .to_vec();
        for name in &kit.sandbox_env {
            flags.extend(["--env".into(), name.to_string()]);
        }
        let run = |name: &str, prompt: &str, more: &[&str]| {
            let mut all: Vec<&str> = flags.iter().map(String::as_str).collect();
            let dir = kit.case.path().join(name);
            let dir = dir.to_str().unwrap().to_string();
            all.extend(["--run-dir", &dir]);
            all.extend(more);
            let start = std::time::Instant::now();
            let out = kit.command(prompt, &all).output().unwrap();
            let mut done = kit.case.finished(out, start);
            done.run_dir = kit.case.path().join(name);
            done
        };
        let why = |done: &crate::support::Finished| {
            format!(
                "{agent} on {engine}: exit {}\n--- warden stderr:\n{}\n--- agent stderr:\n{}",
                done.code,
                done.stderr,
                String::from_utf8_lossy(
                    &std::fs::read(done.run_dir.join("stderr.log")).unwrap_or_default()
                ),
            )
        };
        let first = run("run-1", "run the step", &[]);
        assert_eq!(first.code, 0, "{}", why(&first));
        let report: Value = first.report();
        let made = kit.case.path().join("made.txt");
        assert_eq!(
            std::fs::read_to_string(&made).unwrap_or_default().trim(),
            "first-step-42",
            "{}",
            why(&first)
        );
        {
            use std::os::unix::fs::MetadataExt;
            let m = std::fs::metadata(&made).unwrap();
            assert_eq!((m.uid(), m.gid()), (1000, 1000), "{}", why(&first));
        }
        // The session is kept on the host, in the owner's state directory.
        let kept = kit.case.path().join(match agent {
            "claude" => "home/.claude/projects",
            _ => "home/codex/sessions",
        });
        {
            use std::os::unix::fs::MetadataExt;
            let m = std::fs::metadata(&kept)
                .unwrap_or_else(|e| panic!("{}: {e}\n{}", kept.display(), why(&first)));
            assert_eq!(m.uid(), 1000, "{}", kept.display());
        }
        let session = report["session_id"]
            .as_str()
            .expect("a session id")
            .to_string();
        let second = run("run-2", "go on", &["--resume", &session]);
        assert_eq!(second.code, 0, "{}", why(&second));
        assert_eq!(second.report()["verdict"], "succeeded", "{}", why(&second));
        // The resumed CLI sent the first run's conversation: the tool's
        // output, which only the kept session holds.
        let bodies: Vec<String> = kit
            .server
            .requests()
            .iter()
            .filter(|r| r.method == "POST")
            .map(|r| r.body.to_string())
            .collect();
        let last = bodies.last().expect("requests");
        assert!(
            last.contains("first-step-42") && last.contains("go on"),
            "the resumed request lacks the first run's conversation\n{last}\n{}",
            why(&second)
        );
        for done in [&first, &second] {
            let id = done.report()["run_id"].as_str().unwrap().to_string();
            assert!(!container_left(engine, &format!("warden-{id}")), "{engine}");
        }
    }
}

#[test]
fn claude_resumes_in_a_container_as_the_trees_owner() {
    resumes_as_the_trees_owner("claude");
}

#[test]
fn codex_resumes_in_a_container_as_the_trees_owner() {
    resumes_as_the_trees_owner("codex");
}
