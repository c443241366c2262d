//! Bad inputs: each fails the first step, before anything is installed,
//! with one error annotation that names the input and the fix.

use super::runner::Runner;
use super::*;

/// Inputs and the start of the error each must give.
const BAD: &[(&[(&str, &str)], &str)] = &[
    (
        &[("agent", "claude")],
        "no prompt for claude: give input `prompt`",
    ),
    (&[], "input `agent` is empty"),
    (
        &[("agent", "claude"), ("prompt", "x"), ("batch", "runs.toml")],
        "inputs `batch` and `prompt` exclude each other",
    ),
    (
        &[("agent", "claud"), ("prompt", "x")],
        "input `agent`: unknown agent `claud`; use one of: claude codex opencode pi gemini exec",
    ),
    // No globbing: a `*` is not the workspace's files.
    (
        &[("agent", "*"), ("prompt", "x")],
        "input `agent`: unknown agent `*`",
    ),
    (
        &[
            ("agent", "claude"),
            ("prompt", "x"),
            ("prompt-file", "p.md"),
        ],
        "inputs `prompt` and `prompt-file` exclude each other",
    ),
    (
        &[("agent", "claude"), ("prompt-file", "missing.md")],
        "input `prompt-file`: no file `missing.md`",
    ),
    (&[("agent", "exec")], "input `command` is empty"),
    (
        &[("agent", "exec"), ("prompt", "fix it")],
        "agent `exec` runs a command, not a prompt",
    ),
    (
        &[("agent", "codex"), ("command", "make")],
        "input `command` is for agent `exec`",
    ),
    (
        &[("agent", "exec"), ("command", "true"), ("args", "--\nmore")],
        "input `args`: `--` is for an agent CLI's own arguments",
    ),
    (
        &[
            ("agent", "exec"),
            ("command", "true"),
            ("args", "--junit\nx.xml"),
        ],
        "input `args`: remove `--junit`",
    ),
    (
        &[("batch", "nope.toml")],
        "input `batch`: no file `nope.toml`",
    ),
    (
        &[("agent", "claude codex"), ("prompt", "x")],
        "input `agent`: one agent for a single run",
    ),
    (
        &[
            ("agent", "exec"),
            ("command", "true"),
            ("agent-version", "1.0"),
        ],
        "input `agent-version` needs exactly one agent CLI to install",
    ),
    (
        &[
            ("agent", "pi"),
            ("prompt", "x"),
            ("agent-version", "1.0; rm -rf /"),
        ],
        "input `agent-version`: `1.0; rm -rf /` is not a version",
    ),
    (
        &[
            ("agent", "exec"),
            ("command", "true"),
            ("upload-artifact", "true"),
        ],
        "input `upload-artifact`: `true`; use on-failure",
    ),
    (
        &[
            ("agent", "exec"),
            ("command", "true"),
            ("install-agent", "yes"),
        ],
        "input `install-agent`: `yes`; use true or false",
    ),
    (
        &[
            ("agent", "exec"),
            ("command", "true"),
            ("warden-install", "cargo"),
        ],
        "input `warden-install`: `cargo`",
    ),
    (
        &[
            ("agent", "exec"),
            ("command", "true"),
            ("artifact-name", "a/b"),
        ],
        "input `artifact-name`: `a/b` has a character",
    ),
    (
        &[
            ("agent", "exec"),
            ("command", "true"),
            ("artifact-retention-days", "a week"),
        ],
        "input `artifact-retention-days`: `a week` is not a number of days",
    ),
    (
        &[
            ("agent", "exec"),
            ("command", "true"),
            ("working-directory", "nowhere"),
        ],
        "input `working-directory`: `nowhere` is not a directory",
    ),
    // A value that tries to end the annotation and start a command of
    // its own is escaped as the runner decodes it.
    (
        &[
            ("agent", "exec"),
            ("command", "true"),
            ("upload-artifact", "x\n::add-mask::y"),
        ],
        "input `upload-artifact`: `x%0A::add-mask::y`; use on-failure",
    ),
];

#[test]
fn bad_inputs_fail_before_anything_is_installed_and_name_the_input() {
    let t = tempfile::tempdir().unwrap();
    let runner = Runner::new(t.path(), &repo_root(), machine_path(true));
    std::fs::write(runner.workspace.join("runs.toml"), "").unwrap();
    let a = action();
    for (given, message) in BAD {
        let o = runner.run(&a, given);
        let check = o.step("check");
        assert!(o.failed, "{given:?} was accepted");
        assert_eq!(check.status, Some(1), "{given:?}");
        assert!(
            check
                .stderr
                .contains(&format!("::error title=warden action::{message}")),
            "{given:?}: expected `{message}` in:\n{}",
            check.stderr
        );
        assert_eq!(
            check.stderr.lines().count(),
            1,
            "one line: {}",
            check.stderr
        );
        for s in &o.steps[1..] {
            assert!(
                !s.ran,
                "{given:?}: step {} ran after the check failed",
                s.name
            );
        }
        assert!(o.outputs.values().all(String::is_empty), "{:?}", o.outputs);
    }

    // warden needs Linux: another runner is told so at once.
    let mut mac = Runner::new(&t.path().join("mac"), &repo_root(), machine_path(true));
    mac.env.insert("RUNNER_OS".into(), "macOS".into());
    let o = mac.run(&a, &[("agent", "exec"), ("command", "true")]);
    assert!(
        o.step("check")
            .stderr
            .contains("warden runs on Linux only, and this runner is macOS"),
        "{}",
        o.log()
    );
    assert!(o.failed);
}
