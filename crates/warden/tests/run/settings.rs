//! Bad input gets a clear error and exit code 2 (or 6 for a command that
//! cannot start); nothing is silently replaced by a default.

use crate::support::Case;

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
