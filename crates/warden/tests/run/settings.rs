//! Settings: every one takes effect from its flag, its variable and
//! `warden.toml`; bad input gets a clear error and exit code 2 (or 6 for a
//! command that cannot start); nothing is silently replaced by a default.

use crate::support::{Case, Finished};

fn assert_usage_error(done: &crate::support::Finished, needles: &[&str]) {
    assert_eq!(
        done.code, 2,
        "expected a usage error; stderr:\n{}",
        done.stderr
    );
    for n in needles {
        assert!(
            done.stderr.contains(n),
            "`{n}` missing from:\n{}",
            done.stderr
        );
    }
    assert!(!done.run_dir.exists(), "no run should start on bad input");
}

#[test]
fn invalid_duration_flag_names_flag_value_and_example() {
    let case = Case::new();
    let done = case.run(&["run", "exec", "--stall-timeout", "ten", "--", "true"]);
    assert_usage_error(&done, &["--stall-timeout", "`ten`", "15m"]);
}

#[test]
fn invalid_duration_in_environment_names_the_variable() {
    let case = Case::new();
    let mut cmd = case.command(&["run", "exec", "--", "true"]);
    cmd.env("WARDEN_STALL_TIMEOUT", "5 fortnights");
    let done = case.finished(cmd.output().unwrap(), std::time::Instant::now());
    assert_usage_error(&done, &["WARDEN_STALL_TIMEOUT", "`5 fortnights`", "15m"]);
}

#[test]
fn invalid_value_and_unknown_key_in_warden_toml() {
    let case = Case::new();
    std::fs::write(
        case.path().join("warden.toml"),
        "stall_timeout = \"forever\"\n",
    )
    .unwrap();
    let done = case.run(&["run", "exec", "--", "true"]);
    assert_usage_error(
        &done,
        &["`stall_timeout` in", "warden.toml", "`forever`", "15m"],
    );

    std::fs::write(case.path().join("warden.toml"), "stall_timout = \"1m\"\n").unwrap();
    let done = case.run(&["run", "exec", "--", "true"]);
    assert_usage_error(&done, &["unknown key `stall_timout`", "stall_timeout"]);

    std::fs::write(case.path().join("warden.toml"), "stall_timeout = [1\n").unwrap();
    let done = case.run(&["run", "exec", "--", "true"]);
    assert_usage_error(&done, &["warden.toml"]);
}

#[test]
fn config_file_values_apply_and_flags_override_them() {
    let case = Case::new();
    std::fs::write(
        case.path().join("custom.toml"),
        "startup_timeout = \"200ms\"\nkill_grace = \"100ms\"\n",
    )
    .unwrap();
    let done = case.run(&[
        "run",
        "exec",
        "--config",
        "custom.toml",
        "--",
        "sleep",
        "600",
    ]);
    assert_eq!(done.code, 4, "{}", done.stderr);
    assert_eq!(done.report()["limits"]["startup_timeout_ms"], 200);
    let done = case.run(&[
        "run",
        "exec",
        "--config",
        "custom.toml",
        "--run-dir",
        "run-2",
        "--startup-timeout",
        "0",
        "--timeout",
        "300ms",
        "--",
        "sleep",
        "600",
    ]);
    assert_eq!(
        done.code, 5,
        "the flag disabled the file's startup clock: {}",
        done.stderr
    );
    let fresh = Case::new();
    let missing = fresh.run(&["run", "exec", "--config", "nope.toml", "--", "true"]);
    assert_usage_error(&missing, &["nope.toml"]);
}

#[test]
fn missing_command_is_spawn_failed_with_exit_6() {
    let case = Case::new();
    let done = case.run(&["run", "exec", "--", "no-such-command-xyz", "arg"]);
    assert_eq!(done.code, 6, "{}", done.stderr);
    let report = done.report();
    assert_eq!(report["verdict"], "spawn_failed");
    assert!(
        report["reason"]
            .as_str()
            .unwrap()
            .contains("no-such-command-xyz")
    );
    assert!(
        done.stderr.contains("no-such-command-xyz") && done.stderr.contains("not found"),
        "{}",
        done.stderr
    );
    case.assert_nothing_left();
}

#[test]
fn unknown_agent_and_missing_command_are_usage_errors() {
    let case = Case::new();
    let done = case.run(&["run", "nosuchagent", "--", "true"]);
    assert_usage_error(&done, &["unknown agent `nosuchagent`", "exec"]);
    let done = case.run(&["run", "exec"]);
    assert_usage_error(&done, &["no command", "--"]);
}

#[test]
fn a_clock_too_long_to_hold_is_a_usage_error_not_a_crash() {
    let case = Case::new();
    let done = case.run(&["run", "exec", "--timeout", "300000000000y", "--", "true"]);
    assert_usage_error(&done, &["--timeout", "`300000000000y`", "`0` disables it"]);
}

/// How one setting shows that it took effect in a run.
struct Effect {
    /// The setting's `warden.toml` key.
    key: &'static str,
    /// A valid value that is not the default (`true` for a switch).
    value: &'static str,
    /// Flags the run needs besides the setting.
    flags: &'static [&'static str],
    /// The command `exec` runs.
    command: &'static [&'static str],
    /// Whether the finished run shows the value took effect.
    took: fn(&Case, &Finished) -> bool,
}

fn limit(done: &Finished, field: &str) -> serde_json::Value {
    if done.code == 2 {
        return serde_json::Value::Null;
    }
    done.report()["limits"][field].clone()
}

const EFFECTS: &[Effect] = &[
    Effect {
        key: "timeout",
        value: "7s",
        flags: &[],
        command: &["true"],
        took: |_, d| limit(d, "timeout_ms") == 7000,
    },
    Effect {
        key: "stall_timeout",
        value: "7s",
        flags: &[],
        command: &["true"],
        took: |_, d| limit(d, "stall_timeout_ms") == 7000,
    },
    Effect {
        key: "startup_timeout",
        value: "7s",
        flags: &[],
        command: &["true"],
        took: |_, d| limit(d, "startup_timeout_ms") == 7000,
    },
    Effect {
        key: "completion_timeout",
        value: "7s",
        flags: &[],
        command: &["true"],
        took: |_, d| limit(d, "completion_timeout_ms") == 7000,
    },
    Effect {
        key: "completion_signal",
        value: "all-done-here",
        flags: &[],
        command: &["true"],
        took: |_, d| limit(d, "completion_signal") == "all-done-here",
    },
    Effect {
        key: "on_fatal_error",
        value: "wait",
        flags: &[],
        command: &["true"],
        took: |_, d| limit(d, "on_fatal_error") == "wait",
    },
    Effect {
        key: "drain_grace",
        value: "3s",
        flags: &[],
        command: &["true"],
        took: |_, d| limit(d, "drain_grace_ms") == 3000,
    },
    Effect {
        key: "kill_grace",
        value: "3s",
        flags: &[],
        command: &["true"],
        took: |_, d| limit(d, "kill_grace_ms") == 3000,
    },
    Effect {
        key: "max_line",
        value: "4KiB",
        flags: &[],
        command: &["true"],
        took: |_, d| limit(d, "max_line") == 4096,
    },
    Effect {
        key: "containment",
        value: "subreaper",
        flags: &[],
        command: &["true"],
        took: |_, d| d.code == 0 && d.report()["containment"] == "subreaper",
    },
    Effect {
        key: "run_dir",
        value: "elsewhere",
        flags: &[],
        command: &["true"],
        took: |case, d| d.code == 0 && case.path().join("elsewhere/run.json").is_file(),
    },
    Effect {
        key: "sandbox",
        value: "docker",
        flags: &["--image", "some-image"],
        command: &["true"],
        took: |_, d| d.code == 0 && d.report()["sandbox"] == "docker",
    },
    // On the host there is no network to cut: warden refuses the run,
    // which it does only when the setting is on.
    Effect {
        key: "no_network",
        value: "true",
        flags: &[],
        command: &["true"],
        took: |_, d| {
            d.code == 2
                && d.stderr
                    .contains("--no-network, --ro, --rw and --allow-socket need a sandbox")
        },
    },
    // A path that is no socket is refused by name, which it is only when
    // the setting is on (what an allowed socket does is in `sandbox`).
    Effect {
        key: "allow_socket",
        value: "/dev/null",
        flags: &["--sandbox", "docker", "--image", "some-image"],
        command: &["true"],
        took: |_, d| {
            d.code != 0
                && d.stderr
                    .contains("--allow-socket /dev/null: not a unix socket")
        },
    },
    Effect {
        key: "image",
        value: "some-image",
        flags: &["--sandbox", "docker"],
        command: &["true"],
        took: |case, d| {
            d.code == 0
                && std::fs::read_to_string(case.path().join("docker.args"))
                    .is_ok_and(|args| args.lines().any(|a| a == "some-image"))
        },
    },
    Effect {
        key: "container_network",
        value: "host",
        flags: &["--sandbox", "docker", "--image", "some-image"],
        command: &["true"],
        took: |case, d| d.code == 0 && engine_got(case, &["--network", "host"]),
    },
    // Given just before the image.
    Effect {
        key: "engine_arg",
        value: "--shm-size=1g",
        flags: &["--sandbox", "docker", "--image", "some-image"],
        command: &["true"],
        took: |case, d| d.code == 0 && engine_got(case, &["--shm-size=1g", "some-image"]),
    },
    Effect {
        key: "container_user",
        value: "1000:1000",
        flags: &["--sandbox", "docker", "--image", "some-image"],
        command: &["true"],
        took: |case, d| d.code == 0 && engine_got(case, &["--user", "1000:1000"]),
    },
    Effect {
        key: "device",
        value: "/dev/null",
        flags: &["--sandbox", "docker", "--image", "some-image"],
        command: &["true"],
        took: |case, d| d.code == 0 && engine_got(case, &["--device", "/dev/null"]),
    },
    Effect {
        key: "group_add",
        value: "44",
        flags: &["--sandbox", "docker", "--image", "some-image"],
        command: &["true"],
        took: |case, d| d.code == 0 && engine_got(case, &["--group-add", "44"]),
    },
    Effect {
        key: "heartbeat",
        value: "100ms",
        flags: &[],
        command: &["sleep", "1"],
        took: |_, d| d.code == 0 && d.stderr.contains("still running"),
    },
    Effect {
        key: "otel_endpoint",
        // Nothing listens there: the export fails, the run does not.
        value: "http://127.0.0.1:9",
        flags: &[],
        command: &["true"],
        took: |_, d| d.code == 0 && d.report()["otel"]["span_id"].is_string(),
    },
    Effect {
        key: "otel_protocol",
        value: "grpc",
        flags: &["--otel", "http://127.0.0.1:9"],
        command: &["true"],
        // Over HTTP the base URL gets `/v1/traces`; over gRPC it does not.
        took: |_, d| d.code == 0 && d.stderr.contains("collector http://127.0.0.1:9\n"),
    },
    Effect {
        key: "otel_agent",
        value: "true",
        flags: &["--otel", "http://127.0.0.1:9"],
        command: &[
            "sh",
            "-c",
            "echo \"exporting to $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT\"",
        ],
        took: |_, d| d.code == 0 && d.stdout == "exporting to http://127.0.0.1:9/v1/traces\n",
    },
    Effect {
        key: "otel_flush",
        value: "300ms",
        flags: &["--otel", HANGING_COLLECTOR],
        command: &["true"],
        took: |_, d| d.code == 0 && d.stderr.contains("not sent within 300ms"),
    },
    Effect {
        key: "json",
        value: "true",
        flags: &[],
        command: &["true"],
        took: |_, d| {
            d.code == 0
                && d.stdout.lines().next().is_some_and(|l| {
                    serde_json::from_str::<serde_json::Value>(l)
                        .is_ok_and(|e| e["kind"].is_string())
                })
        },
    },
    Effect {
        key: "quiet",
        value: "true",
        flags: &[],
        command: &["echo", "an-echoed-line"],
        // warden's own notices go; the command's output still passes.
        took: |_, d| {
            d.code == 0 && !d.stderr.contains("exec started") && d.stdout == "an-echoed-line\n"
        },
    },
    // The resource limits, through the stand-in container engine (which
    // takes them as its own flags: no cgroup, no root needed here; the
    // cgroups are tested in `resource_limits`).
    Effect {
        key: "memory",
        value: "64MiB",
        flags: &["--sandbox", "docker", "--image", "some-image"],
        command: &["true"],
        took: |case, d| {
            d.code == 0
                && d.report()["resources"]["memory_bytes"] == 64 << 20
                && engine_got(case, &["--memory", "67108864b"])
        },
    },
    Effect {
        key: "pids",
        value: "50",
        flags: &["--sandbox", "docker", "--image", "some-image"],
        command: &["true"],
        took: |case, d| {
            d.code == 0
                && d.report()["resources"]["pids"] == 50
                && engine_got(case, &["--pids-limit", "50"])
        },
    },
    Effect {
        key: "cpus",
        value: "1.5",
        flags: &["--sandbox", "docker", "--image", "some-image"],
        command: &["true"],
        took: |case, d| {
            d.code == 0
                && d.report()["resources"]["cpus"] == 1.5
                && engine_got(case, &["--cpus", "1.500"])
        },
    },
    Effect {
        key: "preserve_status",
        value: "true",
        flags: &[],
        command: &["sh", "-c", "exit 3"],
        took: |_, d| d.code == 3,
    },
    // Retention after the run: an older run directory the command leaves
    // beside its own goes with 0 kept (or 0 days); the run that just ended
    // is spared.
    Effect {
        key: "keep_runs",
        value: "0",
        flags: &["--run-dir", ".warden/runs/this-run"],
        command: &["mkdir", "-p", ".warden/runs/older"],
        took: |case, d| {
            d.code == 0
                && d.stderr.contains("warden: gc: removed run")
                && !case.path().join(".warden/runs/older").exists()
                && case.path().join(".warden/runs/this-run/run.json").exists()
        },
    },
    Effect {
        key: "keep_days",
        value: "0",
        flags: &["--run-dir", ".warden/runs/this-run"],
        command: &["mkdir", "-p", ".warden/runs/older"],
        took: |case, d| {
            d.code == 0
                && d.stderr.contains("warden: gc: removed run")
                && !case.path().join(".warden/runs/older").exists()
                && case.path().join(".warden/runs/this-run/run.json").exists()
        },
    },
    // A run that stalls: retried, it has a second attempt's directory.
    Effect {
        key: "retries",
        value: "1",
        flags: &[
            "--retry-on",
            "stalled",
            "--retry-backoff",
            "0",
            "--stall-timeout",
            "300ms",
            "--kill-grace",
            "200ms",
        ],
        command: &["sh", "-c", "echo x; exec sleep 30"],
        took: |case, _| {
            case.run_dir()
                .join("iteration-1-attempt-2/run.json")
                .is_file()
        },
    },
    Effect {
        key: "retry_on",
        value: "stalled",
        flags: &[
            "--retries",
            "1",
            "--retry-backoff",
            "0",
            "--stall-timeout",
            "300ms",
            "--kill-grace",
            "200ms",
        ],
        command: &["sh", "-c", "echo x; exec sleep 30"],
        took: |case, _| {
            case.run_dir()
                .join("iteration-1-attempt-2/run.json")
                .is_file()
        },
    },
    // No wait at all with a base of 0; the default base (5s) draws one.
    Effect {
        key: "retry_backoff",
        value: "0",
        flags: &[
            "--retries",
            "1",
            "--retry-on",
            "stalled",
            "--stall-timeout",
            "300ms",
            "--kill-grace",
            "200ms",
        ],
        command: &["sh", "-c", "echo x; exec sleep 30"],
        took: |case, _| {
            std::fs::read_to_string(case.run_dir().join("session.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .is_some_and(|s| s["runs"][0]["retry_delay_ms"] == 0)
        },
    },
    // `exec` reports no spending: a budget given to it is refused, which
    // it is only when the setting is on (the budgets' effect on agents is
    // in `tests/real_agents/budgets.rs`).
    Effect {
        key: "max_cost",
        value: "0.25",
        flags: &[],
        command: &["true"],
        took: |_, d| d.code == 2 && d.stderr.contains("--max-cost: `exec` runs a command"),
    },
    Effect {
        key: "max_tokens",
        value: "7",
        flags: &[],
        command: &["true"],
        took: |_, d| d.code == 2 && d.stderr.contains("--max-tokens: `exec` runs a command"),
    },
    Effect {
        key: "max_turns",
        value: "7",
        flags: &[],
        command: &["true"],
        took: |_, d| d.code == 2 && d.stderr.contains("--max-turns: `exec` runs a command"),
    },
    Effect {
        key: "session_max_cost",
        value: "0.25",
        flags: &[],
        command: &["true"],
        took: |_, d| {
            d.code == 2
                && d.stderr
                    .contains("--session-max-cost: `exec` runs a command")
        },
    },
    Effect {
        key: "session_max_tokens",
        value: "7",
        flags: &[],
        command: &["true"],
        took: |_, d| {
            d.code == 2
                && d.stderr
                    .contains("--session-max-tokens: `exec` runs a command")
        },
    },
    Effect {
        key: "session_max_turns",
        value: "7",
        flags: &[],
        command: &["true"],
        took: |_, d| {
            d.code == 2
                && d.stderr
                    .contains("--session-max-turns: `exec` runs a command")
        },
    },
    Effect {
        key: "check",
        value: "echo checked-by-setting",
        flags: &[],
        command: &["true"],
        took: |c, _| {
            session(c).is_some_and(|s| s["checks"][0]["command"] == "echo checked-by-setting")
        },
    },
    Effect {
        key: "check_timeout",
        value: "7s",
        flags: &["--check", "true"],
        command: &["true"],
        took: |c, _| step_limit(c, "checks", "timeout_ms") == 7000,
    },
    Effect {
        key: "check_stall_timeout",
        value: "7s",
        flags: &["--check", "true"],
        command: &["true"],
        took: |c, _| step_limit(c, "checks", "stall_timeout_ms") == 7000,
    },
    Effect {
        key: "check_feedback",
        value: "none",
        // The stand-in claude; the check fails once, saying so.
        flags: &[
            "Fix it.",
            "--iterations",
            "2",
            "--check",
            "test -f .second || { touch .second; echo check-said-this; exit 1; }",
        ],
        command: &[],
        took: |c, _| {
            std::fs::read_to_string(c.path().join("claude.prompts"))
                .is_ok_and(|p| p == "Fix it.Fix it.")
        },
    },
    Effect {
        key: "check_first",
        value: "true",
        flags: &["--check", "true"],
        command: &["touch", "agent-ran"],
        took: |c, _| {
            !c.path().join("agent-ran").exists()
                && session(c).is_some_and(|s| s["stopped_because"] == "check_passed")
        },
    },
    Effect {
        key: "host_setup",
        value: "touch host-setup-ran",
        flags: &[],
        command: &["true"],
        took: |c, _| c.path().join("host-setup-ran").exists(),
    },
    Effect {
        key: "setup",
        value: "touch setup-ran",
        flags: &[],
        command: &["true"],
        took: |c, _| c.path().join("setup-ran").exists(),
    },
    Effect {
        key: "on_success",
        value: "touch on-success-ran",
        flags: &[],
        command: &["true"],
        took: |c, _| c.path().join("on-success-ran").exists(),
    },
    Effect {
        key: "finally",
        value: "touch finally-ran",
        flags: &[],
        command: &["false"],
        took: |c, _| c.path().join("finally-ran").exists(),
    },
    Effect {
        key: "hook_timeout",
        value: "7s",
        flags: &["--setup", "true"],
        command: &["true"],
        took: |c, _| step_limit(c, "hooks", "timeout_ms") == 7000,
    },
    Effect {
        key: "prompt_command_timeout",
        value: "7s",
        // The stand-in claude, with its prompt file (`{{$ CMD}}` in it).
        flags: &["-f", "task.md"],
        command: &[],
        took: |c, _| step_limit(c, "hooks", "timeout_ms") == 7000,
    },
    Effect {
        key: "merge",
        value: "true",
        flags: &[],
        command: &["true"],
        took: |_, d| {
            d.code == 2
                && d.stderr
                    .contains("which only a worktree has: add --worktree")
        },
    },
];

/// The session's report, if the run was one.
fn session(case: &Case) -> Option<serde_json::Value> {
    let text = std::fs::read_to_string(case.run_dir().join("session.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// A limit of the first of the session's `checks` or `hooks`, as its
/// own run.json has it.
fn step_limit(case: &Case, list: &str, field: &str) -> serde_json::Value {
    let Some(dir) = session(case).and_then(|s| s[list][0]["run_dir"].as_str().map(String::from))
    else {
        return serde_json::Value::Null;
    };
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{dir}/run.json")).unwrap()).unwrap();
    report["limits"][field].clone()
}

/// A collector that takes connections and never answers (see
/// [`hanging_collector`]): `otel_flush` bounds the wait for it.
const HANGING_COLLECTOR: &str = "http://127.0.0.1:47319";

/// Listens at [`HANGING_COLLECTOR`] for the rest of the test process and
/// accepts nothing: a connection completes (the kernel's backlog) and no
/// answer ever comes.
fn hanging_collector() {
    static LISTENER: std::sync::OnceLock<std::net::TcpListener> = std::sync::OnceLock::new();
    LISTENER.get_or_init(|| {
        std::net::TcpListener::bind("127.0.0.1:47319")
            .expect("port 47319 for the hanging collector")
    });
}

/// Whether the stand-in engine was given `pair` (a flag and its value).
fn engine_got(case: &Case, pair: &[&str; 2]) -> bool {
    std::fs::read_to_string(case.path().join("docker.args")).is_ok_and(|args| {
        let args: Vec<&str> = args.lines().collect();
        args.windows(2).any(|w| w == pair)
    })
}

/// Where a setting's value comes from in one run.
#[derive(Debug, Clone, Copy)]
enum Source {
    Nowhere,
    Flag,
    Env,
    File,
}

/// A stand-in `docker` that records the arguments of its `run` alone and
/// runs nothing (it has no container to `inspect`; the sweep of dead
/// owners' containers, `ps` and `rm`, runs beside the run and would
/// otherwise overwrite them), a stand-in `claude` that adds each prompt
/// to `claude.prompts`, and a prompt file, `task.md`, with a command in it.
fn fake_docker(case: &Case) -> std::path::PathBuf {
    let dir = case.path().join("bin");
    std::fs::create_dir_all(&dir).unwrap();
    crate::support::write_script(
        &dir.join("claude"),
        &format!(
            "#!/bin/sh\ncat >> '{}'\necho '{{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"done\",\"num_turns\":1,\"session_id\":\"s\"}}'\n",
            case.path().join("claude.prompts").display()
        ),
    );
    std::fs::write(
        case.path().join("task.md"),
        "Task: {{$ echo from-a-command}}",
    )
    .unwrap();
    crate::support::write_script(
        &dir.join("docker"),
        &format!(
            "#!/bin/sh\n[ \"$1\" = inspect ] && exit 1\n[ \"$1\" = run ] || exit 0\nprintf '%s\\n' \"$@\" > '{}'\n",
            case.path().join("docker.args").display()
        ),
    );
    dir
}

fn run_with(effect: &Effect, source: Source) -> (Case, Finished) {
    let case = Case::new();
    let flag = format!("--{}", effect.key.replace('_', "-"));
    let env = format!("WARDEN_{}", effect.key.to_uppercase());
    let switch = effect.value == "true";
    // A setting that acts on the prompt runs the stand-in claude.
    let agent = if effect.command.is_empty() {
        "claude"
    } else {
        "exec"
    };
    let mut args = vec!["run", agent];
    if let Source::Flag = source {
        args.push(&flag);
        if !switch {
            args.push(effect.value);
        }
    }
    args.extend(effect.flags);
    args.push("--");
    args.extend(effect.command);
    let mut cmd = case.command(&args);
    // Only the setting under test, and only from its source.
    for e in EFFECTS
        .iter()
        .filter(|e| e.key != "run_dir" || effect.key == "run_dir")
    {
        cmd.env_remove(format!("WARDEN_{}", e.key.to_uppercase()));
    }
    cmd.env_remove("WARDEN_CONFIG");
    crate::support::without_own_telemetry(&mut cmd);
    match source {
        Source::Env => {
            cmd.env(&env, effect.value);
        }
        Source::File => {
            let value = if switch {
                "true".to_string()
            } else {
                format!("{:?}", effect.value)
            };
            std::fs::write(
                case.path().join("warden.toml"),
                format!("{} = {value}\n", effect.key),
            )
            .unwrap();
        }
        Source::Nowhere | Source::Flag => {}
    }
    let bin = fake_docker(&case);
    cmd.env(
        "PATH",
        format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
    );
    let done = case.finished(cmd.output().unwrap(), std::time::Instant::now());
    (case, done)
}

#[test]
fn every_setting_takes_effect_from_its_flag_its_variable_and_warden_toml() {
    hanging_collector();
    // Every setting warden knows (as its message about an unknown key
    // lists them) has an effect checked here.
    let case = Case::new();
    std::fs::write(case.path().join("warden.toml"), "no_such_key = 1\n").unwrap();
    let done = case.run(&["run", "exec", "--", "true"]);
    let known = done
        .stderr
        .split("known keys: ")
        .nth(1)
        .unwrap_or_else(|| panic!("no list of known keys in:\n{}", done.stderr));
    let known: Vec<&str> = known.trim().split(", ").collect();
    let checked: Vec<&str> = EFFECTS.iter().map(|e| e.key).collect();
    assert_eq!(checked, known, "a setting without a check of its effect");

    for effect in EFFECTS {
        let (case, done) = run_with(effect, Source::Nowhere);
        assert!(
            !(effect.took)(&case, &done),
            "`{}` shows as set when it was not: the check proves nothing\nstderr:\n{}",
            effect.key,
            done.stderr
        );
        for source in [Source::Flag, Source::Env, Source::File] {
            let (case, done) = run_with(effect, source);
            assert!(
                (effect.took)(&case, &done),
                "`{}` = {:?} from {source:?} did not take effect (exit {})\nstdout:\n{}\nstderr:\n{}",
                effect.key,
                effect.value,
                done.code,
                done.stdout,
                done.stderr
            );
        }
    }
}
