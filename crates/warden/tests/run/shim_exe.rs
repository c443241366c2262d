//! Which executable a run's shim is: `warden-shim` next to warden when it
//! is of the same build, warden itself otherwise (no such file, a file of
//! another build, something that is not a regular file).

use std::process::Command;

use crate::support::*;

/// The name of the agent's parent (its shim), as the agent saw it.
const PARENT_NAME: &str = "cat /proc/$PPID/comm";

/// warden copied into the case's directory, with `shim` (if any) beside it
/// as `warden-shim`.
fn warden_beside(case: &Case, shim: Option<&dyn Fn(&std::path::Path)>) -> std::path::PathBuf {
    let dir = case.path().join("bin");
    std::fs::create_dir(&dir).unwrap();
    let warden = dir.join("warden");
    std::fs::copy(WARDEN, &warden).unwrap();
    if let Some(make) = shim {
        make(&dir.join("warden-shim"));
    }
    warden
}

fn run_with(case: &Case, warden: &std::path::Path) -> Finished {
    let start = std::time::Instant::now();
    let mut cmd = case.command(&["run", "exec", "--", "sh", "-c", PARENT_NAME]);
    cmd.env_remove("WARDEN_SHIM_OF");
    let out = Command::new(warden)
        .args(cmd.get_args())
        .current_dir(case.path())
        .envs(cmd.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    case.finished(out, start)
}

fn shim_name(run: &Finished) -> String {
    String::from_utf8_lossy(&run.log("stdout.log"))
        .trim()
        .to_string()
}

#[test]
fn the_small_shim_of_the_same_build_is_used() {
    let case = Case::new();
    let run = case.run(&["run", "exec", "--", "sh", "-c", PARENT_NAME]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(shim_name(&run), "warden-shim");
    case.assert_nothing_left();
}

#[test]
fn without_a_shim_beside_it_warden_is_its_own() {
    let case = Case::new();
    let warden = warden_beside(&case, None);
    let run = run_with(&case, &warden);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(shim_name(&run), "warden");
    case.assert_nothing_left();
}

#[test]
fn a_shim_of_another_build_is_never_started() {
    let case = Case::new();
    let ran = case.path().join("other-shim-ran");
    let ran_at = ran.clone();
    let other = move |path: &std::path::Path| {
        write_script(
            path,
            &format!("#!/bin/sh\n: > '{}'\nexit 1\n", ran_at.display()),
        );
    };
    let warden = warden_beside(&case, Some(&other));
    let run = run_with(&case, &warden);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(shim_name(&run), "warden");
    assert!(
        !ran.exists(),
        "a warden-shim without this build's mark was started"
    );
    case.assert_nothing_left();
}

#[test]
fn a_fifo_in_place_of_the_shim_is_not_waited_on() {
    let case = Case::new();
    let fifo = |path: &std::path::Path| {
        let made = Command::new("mkfifo").arg(path).status().unwrap();
        assert!(made.success());
    };
    let warden = warden_beside(&case, Some(&fifo));
    let run = run_with(&case, &warden);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(shim_name(&run), "warden");
    assert!(run.elapsed < std::time::Duration::from_secs(20));
    case.assert_nothing_left();
}
