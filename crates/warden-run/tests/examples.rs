//! The examples are the library's documentation: each is run here, as a
//! user would run it, and what it prints and writes is checked. `cargo
//! test` builds them before any test runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use warden_fake_model::{FakeModel, Turn};

/// `target/<profile>/examples/<name>`, next to this test's own directory.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>");
    let bin = profile_dir.join("examples").join(name);
    assert!(
        bin.is_file(),
        "{} is not built: run the tests with `cargo test` (which builds the examples)",
        bin.display()
    );
    bin
}

fn run(name: &str, args: &[&str], dir: &Path, env: &[(String, String)]) -> Output {
    Command::new(example(name))
        .args(args)
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("the example starts")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).expect("the report exists")).expect("JSON")
}

#[test]
fn agent_run_runs_a_command_and_prints_its_events_and_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        "agent_run",
        &["exec", "sh", "-c", "echo hello"],
        dir.path(),
        &[],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("text: hello"), "{stdout}");
    assert!(stdout.contains("succeeded in"), "{stdout}");
    let runs: Vec<_> = std::fs::read_dir(dir.path().join(".warden/runs"))
        .unwrap()
        .collect();
    assert_eq!(runs.len(), 1);
    let report = json(&runs[0].as_ref().unwrap().path().join("run.json"));
    assert_eq!(report["verdict"], "succeeded");

    let out = run(
        "agent_run",
        &["exec", "sh", "-c", "exit 3"],
        dir.path(),
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "a failed run exits as warden does"
    );
}

#[test]
fn agent_run_drives_a_real_agent_cli() {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.agents/node_modules/.bin");
    let bin = std::env::var_os("WARDEN_AGENTS_BIN").map_or(bin, PathBuf::from);
    if !bin.join("claude").exists() {
        let msg = format!("the claude CLI is not installed in {}", bin.display());
        assert!(std::env::var_os("CI").is_none_or(|v| v != "true"), "{msg}");
        eprintln!("SKIPPED: {msg}");
        return;
    }
    let server = FakeModel::start(vec![Turn::Text("the files are listed".into())]);
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join("tmp")).unwrap();
    let h = |p: &str| home.join(p).to_string_lossy().into_owned();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let env: Vec<(String, String)> = vec![
        ("PATH".into(), path),
        ("HOME".into(), h("")),
        ("XDG_CONFIG_HOME".into(), h(".config")),
        ("TMPDIR".into(), h("tmp")),
        ("ANTHROPIC_BASE_URL".into(), server.url()),
        ("ANTHROPIC_API_KEY".into(), "sk-ant-fake".into()),
        ("CLAUDE_CODE_TMPDIR".into(), h("tmp")),
        ("CLAUDE_CODE_MAX_RETRIES".into(), "0".into()),
        ("DISABLE_TELEMETRY".into(), "1".into()),
        ("DISABLE_ERROR_REPORTING".into(), "1".into()),
    ];
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let out = run(
        "agent_run",
        &["claude", "list", "the", "files"],
        &work,
        &env,
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("text: the files are listed"), "{stdout}");
    assert!(stdout.contains("succeeded in"), "{stdout}");

    // The README's program, against a fake model of its own.
    let server = FakeModel::start(vec![Turn::Text("the test passes now".into())]);
    let env: Vec<(String, String)> = env
        .into_iter()
        .map(|(k, v)| match k.as_str() {
            "ANTHROPIC_BASE_URL" => (k, server.url()),
            _ => (k, v),
        })
        .collect();
    let out = run("one_run", &[], &work, &env);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains(" ms  text"), "{stdout}");
    assert!(stdout.contains("succeeded: "), "{stdout}");
    let runs: Vec<_> = std::fs::read_dir(work.join(".warden/runs"))
        .unwrap()
        .collect();
    assert_eq!(runs.len(), 2, "agent_run's and one_run's");
}

#[test]
fn session_runs_its_iterations_and_writes_session_json() {
    let dir = tempfile::tempdir().unwrap();
    let out = run("session", &["3", "sh", "-c", "echo step"], dir.path(), &[]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert_eq!(stdout.matches("  step").count(), 3, "{stdout}");
    assert!(
        stdout.contains("stopped by iterations_exhausted"),
        "{stdout}"
    );
    let sessions: Vec<_> = std::fs::read_dir(dir.path().join(".warden/sessions"))
        .unwrap()
        .collect();
    let report = json(&sessions[0].as_ref().unwrap().path().join("session.json"));
    assert_eq!(report["iterations_run"], 3);
    assert_eq!(report["runs"].as_array().unwrap().len(), 3);
}

#[test]
fn batch_runs_every_entry_and_writes_batch_json() {
    let dir = tempfile::tempdir().unwrap();
    let out = run("batch", &["5", "2"], dir.path(), &[]);
    let stdout = text(&out.stdout);
    // Runs 1, 3 and 5 fail on purpose: the batch says so, and the others
    // ran regardless.
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("2 succeeded, 3 failed, 0 cancelled"),
        "{stdout}"
    );
    for n in 1..=5 {
        assert!(stdout.contains(&format!("run-{n}: started")), "{stdout}");
    }
    // Two at a time: when the first ends, the other one is still running
    // and the three left are queued; when the last ends, nothing is.
    let ends: Vec<&str> = stdout.lines().filter(|l| l.contains(" in ")).collect();
    assert_eq!(ends.len(), 5, "{stdout}");
    assert!(ends[0].ends_with("(1 running, 3 queued)"), "{stdout}");
    assert!(ends[4].ends_with("(0 running, 0 queued)"), "{stdout}");
    let batches: Vec<_> = std::fs::read_dir(dir.path().join(".warden/batches"))
        .unwrap()
        .collect();
    let report = json(&batches[0].as_ref().unwrap().path().join("batch.json"));
    assert_eq!(report["succeeded"], 2);
    assert_eq!(report["runs"][1]["verdict"], "succeeded");
    assert_eq!(report["runs"][0]["verdict"], "agent_failed");
}

/// The programs of the book's library chapter (and the README's one) are
/// these examples, word for word: what a reader copies is what CI
/// compiles.
#[test]
fn the_readme_shows_the_examples_as_they_are() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
    let (readme, chapter) = (read("../../README.md"), read("../../docs/src/library.md"));
    let block = |name: &str| format!("```rust\n{}```\n", read(&format!("examples/{name}.rs")));
    for name in ["one_run", "one_session", "one_batch"] {
        assert!(
            chapter.contains(&block(name)),
            "docs/src/library.md does not show examples/{name}.rs as it is"
        );
    }
    assert!(
        readme.contains(&block("one_run")),
        "README.md does not show examples/one_run.rs as it is"
    );
    let one_run = std::fs::read_to_string(root.join("examples/one_run.rs")).unwrap();
    assert!(one_run.lines().count() <= 15, "{one_run}");
}
