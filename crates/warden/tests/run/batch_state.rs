//! What a batch keeps in its directory is believed only as warden wrote
//! it: `plan.json`, the saved requests and the reports read back carry a
//! MAC with the batch's key (kept outside the directory), and the secrets
//! of `--env NAME=VALUE` are sealed with it. Whoever rewrites them (an
//! agent that reaches the directory) gets its file refused by name, never
//! run.

use std::path::{Path, PathBuf};

use serde_json::Value;
use warden_run::batch_key::{BatchKey, Role, mac_path};

use crate::support::Case;

pub(crate) fn batch_json(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("batch.json")).unwrap()).unwrap()
}

pub(crate) fn run_of<'a>(b: &'a Value, name: &str) -> &'a Value {
    b["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no run {name} in {b}"))
}

/// Every file under `dir` whose bytes hold `needle`.
pub(crate) fn files_holding(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let t = e.file_type().unwrap();
            if t.is_dir() {
                todo.push(e.path());
            } else if t.is_file() {
                let bytes = std::fs::read(e.path()).unwrap();
                if bytes.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                    found.push(e.path());
                }
            }
        }
    }
    found
}

/// Rewrites the saved request `path` as an agent would: another command,
/// on the host.
pub(crate) fn rewrite_request(path: &Path, command: &str) {
    let mut r: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    r["command"] = serde_json::json!(["sh", "-c", command]);
    r["sandbox"]["sandbox"] = "host".into();
    std::fs::write(path, serde_json::to_vec_pretty(&r).unwrap()).unwrap();
}

/// The batch's key, as warden kept it for the case.
fn key_of(case: &Case, dir: &Path) -> (BatchKey, PathBuf) {
    let plan: Value =
        serde_json::from_slice(&std::fs::read(dir.join("plan.json")).unwrap()).unwrap();
    let path = case
        .state
        .path()
        .join("warden/keys")
        .join(plan["batch_id"].as_str().unwrap());
    let text = std::fs::read_to_string(&path).expect("the batch's key file");
    (BatchKey::from_hex(text.trim()).unwrap(), path)
}

/// A batch of a run that succeeds and one that fails (`exit 3`), done.
fn ended_batch(case: &Case) -> PathBuf {
    std::fs::write(
        case.path().join("b.toml"),
        "[defaults]\nagent = \"exec\"\n\
         [[run]]\nname = \"ok\"\ncommand = [\"sh\", \"-c\", \"echo ok\"]\n\
         [[run]]\nname = \"fails\"\ncommand = [\"sh\", \"-c\", \"exit 3\"]\n",
    )
    .unwrap();
    let dir = case.path().join("batch");
    let done = case.run(&["batch", "b.toml", "--dir", dir.to_str().unwrap()]);
    assert_eq!(done.code, 1, "{}", done.stderr);
    dir
}

#[test]
fn a_rewritten_request_is_refused_on_resume_and_never_runs() {
    let case = Case::new();
    let dir = ended_batch(&case);
    let marker = case.path().join("marker");
    rewrite_request(
        &dir.join("requests/1.json"),
        &format!("touch {}", marker.display()),
    );
    let done = case.run(&["batch", "--resume", dir.to_str().unwrap(), "--rerun-failed"]);
    assert!(
        !marker.exists(),
        "the rewritten command ran: {}",
        done.stderr
    );
    assert_eq!(done.code, 1, "{}", done.stderr);
    let b = batch_json(&dir);
    let fails = run_of(&b, "fails");
    assert_eq!(fails["verdict"], "internal_error", "{fails}");
    let error = fails["error"].as_str().unwrap();
    assert!(
        error.contains("requests/1.json") && error.contains("tampered"),
        "{error}"
    );
    assert_eq!(run_of(&b, "ok")["verdict"], "succeeded");
    assert!(done.stderr.contains("requests/1.json"), "{}", done.stderr);
}

#[test]
fn a_tampered_plan_is_refused_on_resume_by_name() {
    let case = Case::new();
    let dir = ended_batch(&case);
    let path = dir.join("plan.json");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("\"jobs\": 4", "\"jobs\": 3")).unwrap();
    let done = case.run(&["batch", "--resume", dir.to_str().unwrap()]);
    assert_eq!(done.code, 2, "{}", done.stderr);
    assert!(
        done.stderr.contains("plan.json") && done.stderr.contains("tampered"),
        "{}",
        done.stderr
    );
}

#[test]
fn a_plan_s_jobs_out_of_range_is_an_error_not_a_panic() {
    let case = Case::new();
    let dir = ended_batch(&case);
    let (key, _) = key_of(&case, &dir);
    // As a plan signed with the batch's key would say it (a warden with
    // another bound, say): the value is checked after reading.
    let path = dir.join("plan.json");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("\"jobs\": 4", "\"jobs\": 4611686018427387904");
    std::fs::write(&path, &text).unwrap();
    std::fs::write(mac_path(&path), key.sign(Role::Plan, text.as_bytes())).unwrap();
    let done = case.run(&["batch", "--resume", dir.to_str().unwrap()]);
    assert_eq!(done.code, 2, "{}", done.stderr);
    assert!(
        done.stderr.contains("plan.json")
            && done.stderr.contains("`jobs`")
            && done.stderr.contains("4611686018427387904"),
        "{}",
        done.stderr
    );
}

#[test]
fn a_resume_without_the_batch_s_key_names_the_key_file() {
    let case = Case::new();
    let dir = ended_batch(&case);
    let (_, key_file) = key_of(&case, &dir);
    // Never in the batch directory, owner only.
    assert!(!key_file.starts_with(&dir));
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&key_file), 0o600);
    assert_eq!(mode(key_file.parent().unwrap()), 0o700);
    let hex = std::fs::read_to_string(&key_file).unwrap();
    assert!(files_holding(&dir, hex.trim()).is_empty());
    std::fs::remove_file(&key_file).unwrap();
    let done = case.run(&["batch", "--resume", dir.to_str().unwrap()]);
    assert_eq!(done.code, 2, "{}", done.stderr);
    assert!(
        done.stderr.contains(key_file.to_str().unwrap()) && done.stderr.contains("copy the key"),
        "{}",
        done.stderr
    );
}

#[test]
fn another_entry_s_report_copied_into_a_failed_entry_does_not_keep_it() {
    let case = Case::new();
    let dir = ended_batch(&case);
    for f in ["session.json", "session.json.mac"] {
        std::fs::copy(dir.join("ok").join(f), dir.join("fails").join(f)).unwrap();
    }
    let done = case.run(&["batch", "--resume", dir.to_str().unwrap(), "--rerun-failed"]);
    assert_eq!(done.code, 1, "{}", done.stderr);
    assert!(
        done.stderr.contains("fails/session.json") && done.stderr.contains("runs again"),
        "{}",
        done.stderr
    );
    let b = batch_json(&dir);
    assert_eq!(run_of(&b, "fails")["verdict"], "agent_failed", "{b}");
    assert!(dir.join("attempts/fails.1").is_dir());
    // The earlier attempt's run.json was signed by its session: no
    // warning about it.
    assert!(!done.stderr.contains("run.json"), "{}", done.stderr);
}

#[test]
fn env_values_are_never_stored_in_clear_and_a_resume_in_a_new_process_still_has_them() {
    let case = Case::new();
    let go = case.path().join("go");
    std::fs::write(
        case.path().join("b.toml"),
        format!(
            "[defaults]\nagent = \"exec\"\nenv = [\"API_KEY=secretvalue123\"]\n\
             [[run]]\nname = \"needs\"\ncommand = [\"sh\", \"-c\", \"test \\\"$API_KEY\\\" = secret''value123 && test -z \\\"$WARDEN_BATCH_KEY\\\" && test -e {go} && echo got it\"]\n",
            go = go.display()
        ),
    )
    .unwrap();
    let dir = case.path().join("batch");
    let done = case.run(&["batch", "b.toml", "--dir", dir.to_str().unwrap()]);
    assert_eq!(done.code, 1, "not yet: {}", done.stderr);
    assert_eq!(files_holding(&dir, "secretvalue123"), Vec::<PathBuf>::new());
    std::fs::write(&go, "").unwrap();
    let done = case.run(&["batch", "--resume", dir.to_str().unwrap(), "--rerun-failed"]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(run_of(&batch_json(&dir), "needs")["verdict"], "succeeded");
    assert_eq!(files_holding(&dir, "secretvalue123"), Vec::<PathBuf>::new());
}

#[test]
fn gc_removes_a_batch_s_key_with_its_directory() {
    let case = Case::new();
    std::fs::write(
        case.path().join("b.toml"),
        "[[run]]\nname = \"ok\"\nagent = \"exec\"\ncommand = [\"true\"]\n",
    )
    .unwrap();
    let done = case.run(&["batch", "b.toml"]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let batches = case.path().join(".warden/batches");
    let dir = std::fs::read_dir(&batches)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let (_, key_file) = key_of(&case, &dir);
    let done = case.run(&["gc", "--keep-runs", "0"]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(!dir.exists(), "{}", done.stderr);
    assert!(!key_file.exists(), "the key stayed: {}", done.stderr);
}

#[test]
fn the_batch_key_in_warden_s_environment_never_reaches_the_agent() {
    let key = "ab".repeat(32);
    let mut sandboxes = vec!["host"];
    if crate::support::bwrap_works() {
        sandboxes.push("bwrap");
    }
    for sandbox in sandboxes {
        let case = Case::new();
        let out = case
            .command(&[
                "run",
                "exec",
                "--sandbox",
                sandbox,
                "--",
                "sh",
                "-c",
                "test -z \"$WARDEN_BATCH_KEY\"",
            ])
            .env("WARDEN_BATCH_KEY", &key)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{sandbox}: {stderr}");
    }
}

/// With `XDG_STATE_HOME` outside HOME and outside `/tmp` (which every
/// sandbox replaces), the keys' directory is visible through a sandbox's
/// read-only root unless warden hides it: an agent that read a batch's key
/// could sign a request of its own for the batch to run on `--resume`.
#[test]
fn a_sandboxed_agent_cannot_read_a_batch_s_key_kept_outside_home() {
    if !crate::support::bwrap_works() {
        eprintln!("skipped: bwrap does not work here");
        return;
    }
    let case = Case::new();
    let state = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::write(
        case.path().join("b.toml"),
        "[defaults]\nagent = \"exec\"\n[[run]]\nname = \"ok\"\ncommand = [\"true\"]\n",
    )
    .unwrap();
    let dir = case.path().join("batch");
    let done = case
        .command(&["batch", "b.toml", "--dir", dir.to_str().unwrap()])
        .env("XDG_STATE_HOME", state.path())
        .output()
        .unwrap();
    assert_eq!(
        done.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let plan: Value =
        serde_json::from_slice(&std::fs::read(dir.join("plan.json")).unwrap()).unwrap();
    let key_file = state
        .path()
        .join("warden/keys")
        .join(plan["batch_id"].as_str().unwrap());
    // The file is there for the host's eyes: the test reads what it should.
    let key_text = std::fs::read_to_string(&key_file).expect("the batch's key file");
    let script = format!("cat '{}'", key_file.display());
    let out = case
        .command(&[
            "run",
            "exec",
            "--sandbox",
            "bwrap",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .env("XDG_STATE_HOME", state.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "the agent read the key: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout_log = std::fs::read_to_string(case.run_dir().join("stdout.log")).unwrap();
    assert!(!stdout_log.contains(key_text.trim()), "{stdout_log}");
}

#[test]
fn run_request_runs_only_a_request_signed_with_the_key_it_was_given() {
    let case = Case::new();
    let marker = case.path().join("marker");
    std::fs::write(
        case.path().join("b.toml"),
        format!(
            "[[run]]\nname = \"a\"\nagent = \"exec\"\nenv = [\"API_KEY=secretvalue123\"]\ncommand = [\"sh\", \"-c\", \"touch {}\"]\n",
            marker.display()
        ),
    )
    .unwrap();
    let dir = case.path().join("batch");
    let done = case.run(&["batch", "b.toml", "--dir", dir.to_str().unwrap()]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    std::fs::remove_file(&marker).unwrap();
    let (key, _) = key_of(&case, &dir);
    let request = dir.join("requests/0.json");
    // Without the key its sealed value cannot be opened: named.
    let done = case.run(&["run-request", request.to_str().unwrap()]);
    assert_eq!(done.code, 2, "{}", done.stderr);
    assert!(
        done.stderr.contains("API_KEY") && done.stderr.contains("WARDEN_BATCH_KEY"),
        "{}",
        done.stderr
    );
    // Another batch's key: not run.
    let out = case
        .command(&["run-request", request.to_str().unwrap()])
        .env("WARDEN_BATCH_KEY", "cd".repeat(32))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("0.json") && stderr.contains("not run"),
        "{stderr}"
    );
    // Renamed as another entry's: not run either.
    let other = dir.join("requests/1.json");
    std::fs::copy(&request, &other).unwrap();
    std::fs::copy(mac_path(&request), mac_path(&other)).unwrap();
    let out = case
        .command(&["run-request", other.to_str().unwrap()])
        .env("WARDEN_BATCH_KEY", key.to_hex())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("1.json") && stderr.contains("tampered"),
        "{stderr}"
    );
    assert!(!marker.exists(), "a refused request ran");
}

/// With XDG_STATE_HOME in a tree an agent could write, the agent could
/// link the keys' directory to a place of its own: warden refuses to keep
/// a key through a link.
#[test]
fn a_batch_key_is_never_written_through_a_linked_keys_directory() {
    let case = Case::new();
    let state = case.path().join("state");
    let mine = case.path().join("mine");
    std::fs::create_dir_all(state.join("warden")).unwrap();
    std::fs::create_dir(&mine).unwrap();
    std::os::unix::fs::symlink(&mine, state.join("warden/keys")).unwrap();
    std::fs::write(
        case.path().join("b.toml"),
        "[defaults]\nagent = \"exec\"\n[[run]]\nname = \"ok\"\ncommand = [\"true\"]\n",
    )
    .unwrap();
    let dir = case.path().join("batch");
    let out = case
        .command(&["batch", "b.toml", "--dir", dir.to_str().unwrap()])
        .env("XDG_STATE_HOME", &state)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("symbolic link"), "{stderr}");
    assert_eq!(
        std::fs::read_dir(&mine).unwrap().count(),
        0,
        "a key was written through the link"
    );
}
