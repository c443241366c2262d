//! The run directory against an agent that plants links, rewrites its
//! logs, shares or reuses directories, fills the disk, or kills warden:
//! warden writes only its own files, in its own directory, says when a
//! log was changed after the run, and never claims a report it did not
//! write.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Case, Finished, bwrap_works, is_root, kill};

/// A file outside the case's directory (so also outside a sandbox's view)
/// that no run may touch.
struct Victim {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Victim {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("victim");
        std::fs::write(&path, "precious\n").unwrap();
        Self { _dir: dir, path }
    }

    /// A path in the same place where nothing exists yet.
    fn missing(&self) -> PathBuf {
        self.path.with_file_name("must-not-exist")
    }

    fn assert_untouched(&self) {
        assert_eq!(
            std::fs::read_to_string(&self.path).unwrap(),
            "precious\n",
            "warden wrote through a planted link into {}",
            self.path.display()
        );
        assert!(
            !self.missing().exists(),
            "warden created {} through a planted link",
            self.missing().display()
        );
    }
}

fn sh(case: &Case, extra: &[&str], script: &str) -> Finished {
    let mut args = vec!["run", "exec", "--kill-grace", "500ms"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    case.run(&args)
}

fn run_json(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap()
}

// ---- links planted in the run directory and on the way to it ----

#[test]
fn a_planted_temporary_report_link_overwrites_nothing() {
    let case = Case::new();
    let victim = Victim::new();
    // The agent knows its run directory (a fixed one here) and plants the
    // names warden used for its temporary reports, and run.json itself.
    let script = format!(
        "ln -s '{v}' run/.run.json.tmp; ln -s '{v}' run/.session.json.tmp; \
         ln -s '{m}' run/run.json.tmp; echo planted",
        v = victim.path.display(),
        m = victim.missing().display()
    );
    let done = sh(&case, &[], &script);
    assert_eq!(done.code, 0, "{}", done.stderr);
    victim.assert_untouched();
    assert_eq!(done.verdict(), "succeeded", "the run still has its report");

    // A link in place of run.json is replaced, not followed.
    let case = Case::new();
    let script = format!("sleep 0.2; ln -sf '{}' run/run.json", victim.path.display());
    let done = sh(&case, &[], &script);
    assert_eq!(done.code, 0, "{}", done.stderr);
    victim.assert_untouched();
    assert_eq!(done.verdict(), "succeeded");
}

#[test]
fn the_space_set_aside_for_the_report_swapped_for_a_link_is_not_used() {
    let case = Case::new();
    let victim = Victim::new();
    // The agent sees warden's hidden file for the final report and puts a
    // link (to a file, then a forged report) in its place. It waits for the
    // first run.json, so that the only temporary file left is the one set
    // aside for the final report (not the first report's, in its rename).
    let script = format!(
        "while [ ! -e run/run.json ]; do sleep 0.01; done; \
         for f in run/.run.json.*.tmp; do rm -f \"$f\"; ln -s '{}' \"$f\"; done; echo swapped",
        victim.path.display()
    );
    let done = sh(&case, &[], &script);
    assert_eq!(done.code, 0, "{}", done.stderr);
    victim.assert_untouched();
    let report = done.report();
    assert_eq!(report["verdict"], "succeeded", "{report}");
    assert!(
        report["error"]
            .as_str()
            .is_some_and(|e| e.contains("set aside for run.json")),
        "the tampering is said: {report}"
    );
    assert!(
        !std::fs::symlink_metadata(case.run_dir().join("run.json"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn planted_session_and_batch_report_links_overwrite_nothing() {
    let case = Case::new();
    let victim = Victim::new();
    // A session's directory is the fixed run dir; session.json is written
    // after each iteration.
    let script = format!(
        "ln -sf '{v}' run/.session.json.tmp; ln -sf '{v}' run/session.json.tmp",
        v = victim.path.display()
    );
    let done = sh(&case, &["--iterations", "2"], &script);
    assert_eq!(done.code, 0, "{}", done.stderr);
    victim.assert_untouched();
    let session: Value = serde_json::from_str(
        &std::fs::read_to_string(case.run_dir().join("session.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(session["iterations_run"], 2);

    // batch.json in the batch directory, the parent of the run's session.
    let case = Case::new();
    let dir = case.path().join("batch");
    let file = case.path().join("b.toml");
    let script = format!(
        "ln -sf '{}' '{}/batch.json'",
        victim.path.display(),
        dir.display()
    );
    std::fs::write(
        &file,
        format!(
            "[[run]]\nname = \"t\"\nagent = \"exec\"\ncommand = [\"sh\", \"-c\", {script:?}]\n"
        ),
    )
    .unwrap();
    let done = case.run(&[
        "batch",
        file.to_str().unwrap(),
        "--dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    victim.assert_untouched();
    let batch: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("batch.json")).unwrap()).unwrap();
    assert_eq!(batch["succeeded"], 1);
}

#[test]
fn a_search_only_directory_on_the_way_is_no_obstacle() {
    if !is_root() {
        eprintln!("skipped: running as another user needs root");
        return;
    }
    // /home/<user> is often 0711: warden must pass through it without
    // reading it.
    let case = Case::new();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(case.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let work = case.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let chown = Command::new("chown")
        .arg("nobody")
        .arg(&work)
        .status()
        .unwrap();
    assert!(chown.success());
    let out = Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(crate::support::WARDEN)
        .args(["run", "exec", "--", "echo", "hi"])
        .current_dir(&work)
        .env_remove("WARDEN_RUN_DIR")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(work.join(".warden/.gitignore").exists());
}

#[test]
fn a_dangling_gitignore_link_makes_the_next_run_create_nothing() {
    let case = Case::new();
    let victim = Victim::new();
    let script = format!(
        "rm -f .warden/.gitignore; ln -s '{}' .warden/.gitignore",
        victim.missing().display()
    );
    for _ in 0..2 {
        let mut cmd = case.command(&["run", "exec", "--", "sh", "-c", &script]);
        cmd.env_remove("WARDEN_RUN_DIR");
        let out = cmd.output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    victim.assert_untouched();
}

#[test]
fn a_log_swapped_for_a_link_in_a_fixed_run_dir_is_never_appended_to() {
    let case = Case::new();
    let victim = Victim::new();
    let script = format!(
        "rm run/stdout.log run/stderr.log run/events.jsonl; \
         ln -s '{v}' run/stdout.log; ln -s '{v}' run/stderr.log; ln -s '{v}' run/events.jsonl",
        v = victim.path.display()
    );
    let first = sh(&case, &[], &script);
    assert_eq!(first.code, 0, "{}", first.stderr);
    // The next run on the same directory would have appended to the
    // victim; it is refused instead (one run per directory).
    let second = sh(&case, &[], "echo second run");
    assert_eq!(second.code, 2, "{}", second.stderr);
    assert!(
        second.stderr.contains("not empty"),
        "the refusal says why: {}",
        second.stderr
    );
    victim.assert_untouched();
}

#[test]
fn a_link_on_the_way_to_the_run_directory_is_refused_with_its_name() {
    let case = Case::new();
    let elsewhere = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), case.path().join(".warden")).unwrap();
    let mut cmd = case.command(&["run", "exec", "--", "true"]);
    cmd.env_remove("WARDEN_RUN_DIR");
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(".warden") && stderr.contains("symbolic link"),
        "the error names the link: {stderr}"
    );
    assert!(
        std::fs::read_dir(elsewhere.path())
            .unwrap()
            .next()
            .is_none(),
        "nothing was written where the link points"
    );
}

#[test]
fn links_planted_from_inside_bwrap_reach_no_file_outside() {
    if !bwrap_works() {
        eprintln!("skipped: bubblewrap cannot run here");
        return;
    }
    let case = Case::new();
    let victim = Victim::new();
    // The default run directory, found through WARDEN_RUN_ID; the victim
    // is outside the sandbox's view, so only warden could write it.
    let script = format!(
        "d=.warden/runs/$WARDEN_RUN_ID; \
         for f in .run.json.tmp .session.json.tmp run.json; do rm -f \"$d/$f\"; ln -s '{v}' \"$d/$f\"; done 2>/dev/null; \
         ln -s '{m}' \"$d/.run.json.tmp2\" 2>/dev/null; echo planted",
        v = victim.path.display(),
        m = victim.missing().display()
    );
    let mut cmd = case.command(&[
        "run",
        "exec",
        "--sandbox",
        "bwrap",
        "--no-network",
        "--kill-grace",
        "500ms",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    cmd.env_remove("WARDEN_RUN_DIR");
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    victim.assert_untouched();
    let runs: Vec<_> = std::fs::read_dir(case.path().join(".warden/runs"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(runs.len(), 1);
    assert_eq!(run_json(&runs[0].path())["verdict"], "succeeded");
}

// ---- the audit trail ----

#[test]
fn a_log_rewritten_by_the_agent_is_reported_as_changed() {
    for (how, rewrite) in [
        (
            "replaced",
            "echo all-good > run/stdout.log.new; mv run/stdout.log.new run/stdout.log",
        ),
        ("truncated", ": > run/stdout.log"),
        ("rewritten", "echo all-good > run/stdout.log"),
    ] {
        let case = Case::new();
        let script = format!("echo 'I deleted the production database'; sleep 0.5; {rewrite}");
        let done = sh(&case, &[], &script);
        assert_eq!(done.code, 0, "{how}: {}", done.stderr);
        let logs = &done.report()["logs"];
        assert_eq!(logs["stdout.log"]["bytes"], 34, "{how}: {logs}");

        let out = case
            .command(&["report", case.run_dir().to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{how}: a changed log fails the report\n{stdout}\n{stderr}"
        );
        assert!(
            stderr.contains("stdout.log no longer matches what warden wrote"),
            "{how}: {stderr}"
        );
        assert!(stdout.contains("LOGS CHANGED"), "{how}: {stdout}");
    }
}

#[test]
fn an_untouched_run_checks_out_and_its_digests_are_the_files() {
    let case = Case::new();
    let done = sh(&case, &[], "echo out; echo err >&2");
    assert_eq!(done.code, 0, "{}", done.stderr);
    let logs = done.report()["logs"].clone();
    for name in ["stdout.log", "stderr.log", "events.jsonl"] {
        let bytes = done.log(name);
        assert_eq!(logs[name]["bytes"], bytes.len() as u64, "{name}");
        // The BLAKE3 of the file as it lies on disk, by the reference
        // implementation (the digest warden records is of its own copy).
        let on_disk = std::fs::read(case.run_dir().join(name)).unwrap();
        assert_eq!(
            logs[name]["blake3"].as_str().unwrap(),
            blake3::hash(&on_disk).to_hex().as_str(),
            "{name}"
        );
        assert_eq!(logs[name].get("sha256"), None, "{name}");
    }
    let out = case
        .command(&["report", case.run_dir().to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("logs as warden wrote them"), "{stdout}");
}

// ---- one run per directory ----

#[test]
fn a_used_run_directory_is_refused_and_left_as_it_was() {
    let case = Case::new();
    let first = sh(&case, &[], "echo first");
    assert_eq!(first.code, 0, "{}", first.stderr);
    let before: Vec<Vec<u8>> = ["stdout.log", "events.jsonl", "run.json"]
        .iter()
        .map(|f| first.log(f))
        .collect();
    let second = sh(&case, &[], "echo second");
    assert_eq!(second.code, 2, "{}", second.stderr);
    assert!(
        second.stderr.contains("is not empty") && second.stderr.contains("pick a new directory"),
        "{}",
        second.stderr
    );
    let after: Vec<Vec<u8>> = ["stdout.log", "events.jsonl", "run.json"]
        .iter()
        .map(|f| first.log(f))
        .collect();
    assert!(before == after, "the first run's files were changed");
}

#[test]
fn concurrent_runs_on_one_directory_never_merge() {
    for round in 0..8 {
        let case = Case::new();
        let children: Vec<_> = (0..3)
            .map(|i| case.spawn(&["run", "exec", "--", "sh", "-c", &format!("echo run-{i}")]))
            .collect();
        let codes: Vec<i32> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap().status.code().unwrap_or(-1))
            .collect();
        let won = codes.iter().filter(|c| **c == 0).count();
        assert_eq!(
            won, 1,
            "round {round}: exactly one run owns the dir: {codes:?}"
        );
        assert!(
            codes.iter().all(|c| *c == 0 || *c == 2),
            "round {round}: {codes:?}"
        );
        let report = run_json(&case.run_dir());
        let stdout = std::fs::read(case.run_dir().join("stdout.log")).unwrap();
        assert_eq!(report["stdout_bytes"], stdout.len() as u64, "round {round}");
        assert_eq!(stdout.len(), 6, "one run's output: {stdout:?}");
        let leftovers: Vec<_> = std::fs::read_dir(case.run_dir())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    }
}

#[test]
fn run_ids_carry_64_random_bits() {
    let case = Case::new();
    let mut ids = Vec::new();
    for _ in 0..2 {
        let mut cmd = case.command(&["run", "exec", "--", "true"]);
        cmd.env_remove("WARDEN_RUN_DIR");
        assert!(cmd.status().unwrap().success());
    }
    for e in std::fs::read_dir(case.path().join(".warden/runs"))
        .unwrap()
        .flatten()
    {
        ids.push(run_json(&e.path())["run_id"].as_str().unwrap().to_string());
    }
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);
    for id in &ids {
        let (_, random) = id.rsplit_once('-').unwrap();
        assert_eq!(random.len(), 16, "{id}: 64 bits in hex");
        assert!(random.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
    }
}

// ---- batch names ----

#[test]
fn batch_names_that_share_or_escape_a_directory_are_refused() {
    for (names, needles) in [
        (
            &["fix a", "fix/a"][..],
            &["`fix a`", "`fix/a`", "fix-a"][..],
        ),
        (&[".."][..], &["`..`"][..]),
        (&["."][..], &["`.`"][..]),
        (&[""][..], &["``"][..]),
        (&["batch.json"][..], &["batch.json"][..]),
        (&["run-2", "x"][..], &["run-2"][..]),
    ] {
        let case = Case::new();
        let mut toml = String::from("[defaults]\nagent = \"exec\"\ncommand = [\"true\"]\n");
        for n in names {
            toml.push_str(&format!("[[run]]\nname = {n:?}\n"));
        }
        if names.len() == 2 && names[0] == "run-2" {
            // The second run's default name would be `run-2` too.
            toml = "[defaults]\nagent = \"exec\"\ncommand = [\"true\"]\n[[run]]\nname = \"run-2\"\n[[run]]\n"
                .into();
        }
        let file = case.path().join("b.toml");
        std::fs::write(&file, &toml).unwrap();
        let dir = case.path().join("batch");
        let done = case.run(&[
            "batch",
            file.to_str().unwrap(),
            "--dir",
            dir.to_str().unwrap(),
        ]);
        assert_eq!(done.code, 2, "{names:?}: {}", done.stderr);
        for n in needles {
            assert!(
                done.stderr.contains(n),
                "{names:?}: `{n}` not in {}",
                done.stderr
            );
        }
        assert!(!dir.exists(), "{names:?}: nothing may be created");
        assert!(
            !case.path().join(".warden").exists(),
            "{names:?}: nothing may be created"
        );
    }
}

// ---- secrets in the structured output and at the event cap ----

const SECRET: &str = "sk-live-7f3a9c2e51d84b06a1f9";

#[test]
fn a_secret_in_the_structured_output_is_masked_everywhere() {
    let case = Case::new();
    let env = format!("API_TOKEN={SECRET}");
    let script = "echo \"<out>the token is $API_TOKEN</out>\"";
    let done = sh(&case, &["--env", &env, "--output-tag", "out"], script);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let report = std::fs::read_to_string(case.run_dir().join("run.json")).unwrap();
    assert!(
        !report.contains(SECRET),
        "run.json leaks the secret:\n{report}"
    );
    assert!(
        done.report()["output"]
            .as_str()
            .unwrap()
            .contains("the token is")
    );

    // The same through a session and a batch.
    let session = Case::new();
    let done = session.run(&[
        "run",
        "exec",
        "--iterations",
        "2",
        "--env",
        &env,
        "--output-tag",
        "out",
        "--",
        "sh",
        "-c",
        script,
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let text = std::fs::read_to_string(session.run_dir().join("session.json")).unwrap();
    assert!(!text.contains(SECRET), "session.json leaks the secret");

    let batch = Case::new();
    let file = batch.path().join("b.toml");
    std::fs::write(
        &file,
        format!(
            "[[run]]\nname = \"t\"\nagent = \"exec\"\noutput_tag = \"out\"\nenv = [{env:?}]\ncommand = [\"sh\", \"-c\", {script:?}]\n"
        ),
    )
    .unwrap();
    let dir = batch.path().join("batch");
    let done = batch.run(&[
        "batch",
        file.to_str().unwrap(),
        "--dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let text = std::fs::read_to_string(dir.join("batch.json")).unwrap();
    assert!(!text.contains(SECRET), "batch.json leaks the secret");
    assert!(text.contains("the token is"), "{text}");
}

#[test]
fn a_secret_across_the_event_cap_leaks_none_of_its_bytes() {
    let case = Case::new();
    let env = format!("API_TOKEN={SECRET}");
    // The secret starts 9 bytes before the 64 KiB cut.
    let pad = 64 * 1024 - 10;
    let script = format!("printf '%{pad}s %s tail\\n' x \"$API_TOKEN\"");
    let done = sh(&case, &["--env", &env], &script);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let events = String::from_utf8(done.log("events.jsonl")).unwrap();
    assert!(
        !events.contains(&SECRET[..8]),
        "the first bytes of the secret are in events.jsonl"
    );
    assert!(events.contains("***"), "the secret is masked");
}

// ---- a full disk ----

/// A 1 MiB tmpfs, unmounted at the end.
struct TinyFs {
    path: PathBuf,
}

impl TinyFs {
    fn mount(case: &Case) -> Option<Self> {
        if !is_root() {
            eprintln!("skipped: mounting a small file system needs root");
            return None;
        }
        let path = case.path().join("tiny");
        std::fs::create_dir(&path).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
            .arg(&path)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("skipped: could not mount a tmpfs");
            return None;
        }
        Some(Self { path })
    }
}

impl Drop for TinyFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

fn assert_no_false_report_claim(done: &Finished, run_dir: &Path) {
    if !run_dir.join("run.json").exists() {
        assert!(
            !done.stderr.contains("warden: report:"),
            "a report that was not written is named:\n{}",
            done.stderr
        );
    }
}

#[test]
fn output_lost_to_a_full_disk_is_never_success() {
    let case = Case::new();
    let Some(fs) = TinyFs::mount(&case) else {
        return;
    };
    let run_dir = fs.path.join("run");
    // 10 MB into 1 MiB.
    let done = case.run(&[
        "run",
        "exec",
        "--run-dir",
        run_dir.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "head -c 10000000 /dev/zero | tr '\\0' x; echo",
    ]);
    assert_eq!(done.code, 74, "a full disk is exit 74: {}", done.stderr);
    assert!(
        done.stderr.contains("No space left"),
        "the error says why: {}",
        done.stderr
    );
    assert_no_false_report_claim(&done, &run_dir);
    // The space set aside at the start still holds the final report.
    let r = run_json(&run_dir);
    assert_eq!(
        r["verdict"], "succeeded",
        "the agent's verdict is kept: {r}"
    );
    assert!(
        r["output_lost"].as_str().unwrap().contains("No space left"),
        "{r}"
    );
    assert!(done.stderr.contains("warden: report:"), "{}", done.stderr);
}

#[test]
fn a_disk_full_from_the_start_claims_no_report() {
    let case = Case::new();
    let Some(fs) = TinyFs::mount(&case) else {
        return;
    };
    let _ = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "head -c 2000000 /dev/zero > '{}/fill'",
            fs.path.display()
        ))
        .status();
    let run_dir = fs.path.join("run");
    let done = case.run(&[
        "run",
        "exec",
        "--run-dir",
        run_dir.to_str().unwrap(),
        "--",
        "echo",
        "hello",
    ]);
    assert_eq!(done.code, 74, "{}", done.stderr);
    assert_no_false_report_claim(&done, &run_dir);
    assert!(done.stderr.contains("No space left"), "{}", done.stderr);
    assert!(
        !run_dir.join("run.json").exists(),
        "no agent starts whose report could not be kept"
    );
}

// ---- reports of unfinished runs ----

#[test]
fn a_report_of_a_run_whose_warden_was_killed_says_so_with_sane_times() {
    let case = Case::new();
    // A Claude stand-in with a Bash call that never finishes.
    let bin = case.path().join("fake-claude");
    std::fs::write(
        &bin,
        "#!/bin/sh\ncat >/dev/null\n\
         echo '{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"s1\"}'\n\
         sleep 0.3\n\
         echo '{\"type\":\"assistant\",\"message\":{\"id\":\"m1\",\"content\":[{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"Bash\",\"input\":{\"command\":\"make\"}}]},\"parent_tool_use_id\":null}'\n\
         echo tool-started >&2\n\
         sleep 30\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut child = case.spawn(&["run", "claude", "x", "--agent-bin", bin.to_str().unwrap()]);
    case.wait_for_output("events.jsonl", "tool_started", Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(200));
    kill(child.id(), "KILL");
    let _ = child.wait();
    let start = Instant::now();
    while case.survivors().iter().any(|(_, c)| c.contains("sleep 30"))
        && start.elapsed() < Duration::from_secs(5)
    {
        std::thread::sleep(Duration::from_millis(20));
    }

    let html = case.path().join("t.html");
    let out = case
        .command(&[
            "report",
            case.run_dir().to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // No verdict yet: `report` exits 75 (try again once it has ended).
    assert_eq!(out.status.code(), Some(75), "{stdout}\n{stderr}");
    assert!(stdout.contains("UNFINISHED"), "{stdout}");
    assert!(
        !stdout.contains("first activity after never"),
        "events.jsonl has activity: {stdout}"
    );
    // No absurd spans: nothing of an hour or more in a run of seconds
    // (the clocks line says the limits set, not spans).
    let spans: String = stdout
        .lines()
        .filter(|l| !l.trim_start().starts_with("clocks:"))
        .collect::<Vec<_>>()
        .join("\n");
    for word in spans.split_whitespace() {
        let w = word.trim_end_matches([':', ',', ';', ')']);
        assert!(
            !(w.contains('h') && w.ends_with('m') && w.starts_with(|c: char| c.is_ascii_digit())),
            "an absurd duration `{word}` in:\n{stdout}"
        );
    }
    assert!(
        stdout.contains("Bash"),
        "the open tool call is listed: {stdout}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("unfinished"), "the page says so");
    case.assert_nothing_left();
}
