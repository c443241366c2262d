//! The repository's GitHub Action (`action.yml` and `action/*.sh`), run
//! step by step in a simulated runner (`runner.rs`, `expr.rs`) with the
//! real warden, real bash and real files: every output of the composite
//! is checked against what warden wrote (`run.json`, `batch.json`), and
//! so are the upload step's condition and path, the step's exit status
//! (`runs.rs`), the errors for bad inputs (`inputs.rs`), the install
//! steps' decisions, without running cargo or npm (`install.rs`), a
//! stand-in release downloaded, checked and run, and the build decided
//! when there is none (`release.rs`), the credentials and the actor check
//! (`access.rs`), and what the runner requires of `action.yml`
//! (`manifest.rs`).

mod access;
mod expr;
mod inputs;
mod install;
mod manifest;
mod release;
mod runner;
mod runs;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::WARDEN;
use runner::{Action, Outcome, Runner};

/// The repository, which is the action (`uses: ./`).
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn action() -> Action {
    Action::load(&repo_root().join("action.yml"))
}

/// The directory of the warden under test (with its warden-shim).
fn warden_dir() -> PathBuf {
    Path::new(WARDEN).parent().unwrap().to_path_buf()
}

/// A runner's PATH: the system's directories, and warden's first when
/// `with_warden` (a runner where warden is already installed).
fn machine_path(with_warden: bool) -> Vec<PathBuf> {
    let mut path: Vec<PathBuf> = Vec::new();
    if with_warden {
        path.push(warden_dir());
    }
    for d in [
        "/usr/local/sbin",
        "/usr/local/bin",
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/bin",
    ] {
        assert!(
            !Path::new(d).join("warden").exists(),
            "{d}/warden exists: the action's tests need a machine without another warden on PATH"
        );
        path.push(d.into());
    }
    path
}

/// `warden --version`'s number.
fn warden_version() -> String {
    let out = Command::new(WARDEN).arg("--version").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    text.trim().rsplit(' ').next().unwrap().to_string()
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Every output of the action, empty: what an expectation starts from,
/// so that an output added to action.yml is an output this test checks.
fn all_outputs_empty(a: &Action) -> BTreeMap<String, String> {
    a.outputs
        .iter()
        .map(|o| (o.name.clone(), String::new()))
        .collect()
}

/// The outputs a single run gives, from its run.json.
fn run_outputs(
    a: &Action,
    o: &Outcome,
    report: &Value,
    exit_code: i32,
) -> BTreeMap<String, String> {
    let mut e = all_outputs_empty(a);
    let set = |e: &mut BTreeMap<String, String>, k: &str, v: String| {
        assert!(e.insert(k.to_string(), v).is_some(), "no output {k}");
    };
    set(
        &mut e,
        "verdict",
        report["verdict"].as_str().unwrap().into(),
    );
    set(&mut e, "exit_code", exit_code.to_string());
    set(
        &mut e,
        "run_dir",
        report["run_dir"].as_str().unwrap().to_string(),
    );
    set(
        &mut e,
        "branch",
        report["branch"].as_str().unwrap_or("").into(),
    );
    set(
        &mut e,
        "commits",
        report["commits"].as_array().unwrap().len().to_string(),
    );
    set(
        &mut e,
        "cost_usd",
        report["cost_usd"]
            .as_f64()
            .map(|c| c.to_string())
            .unwrap_or_default(),
    );
    // Empty when not known (`null`).
    set(
        &mut e,
        "tokens",
        report["tokens"]["total"]
            .as_u64()
            .map(|t| t.to_string())
            .unwrap_or_default(),
    );
    // The junit file is the action's own; checked by the caller.
    set(&mut e, "junit_file", o.outputs["junit_file"].clone());
    set(&mut e, "warden", o.step("warden").outputs["warden"].clone());
    e
}

/// The JUnit file exists where the output says, outside the workspace,
/// with `cases` test cases.
fn check_junit(runner: &Runner, o: &Outcome, cases: usize) {
    let junit = PathBuf::from(&o.outputs["junit_file"]);
    assert!(junit.starts_with(&runner.temp), "{}", junit.display());
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(xml.matches("<testcase ").count(), cases, "{xml}");
}

/// The upload step ran (its `if:` held) and points at `dir` under the
/// name the action gave; hidden files included, since `dir` is in
/// `.warden/`.
fn check_upload(o: &Outcome, dir: &Path, name: &str, retention_days: &str) {
    let up = o.step("upload");
    assert!(up.ran, "the upload step did not run\n{}", o.log());
    assert_eq!(Path::new(&up.with["path"]), dir);
    assert!(dir.join("run.json").is_file() || dir.join("batch.json").is_file());
    assert_eq!(up.with["name"], name);
    assert_eq!(o.outputs["artifact_name"], name);
    assert_eq!(up.with["include-hidden-files"], "true");
    assert_eq!(up.with["retention-days"], retention_days);
    // The artifact's id and URL come from upload-artifact, not run here.
    assert_eq!(o.outputs["artifact_id"], "");
    assert_eq!(o.outputs["artifact_url"], "");
}

/// Every output the run step wrote (warden's own, and the action's
/// `junit_file` and `artifact_name`) is an output of the action, but for
/// what only the upload step reads.
fn check_every_warden_output_is_the_actions(a: &Action, o: &Outcome) {
    for name in o.step("run").outputs.keys() {
        assert!(
            ["upload", "artifact_path"].contains(&name.as_str())
                || a.outputs.iter().any(|out| &out.name == name),
            "the run step's output `{name}` is not an output of the action"
        );
    }
}
