//! The action run whole: a run that succeeds, fails, is cancelled, a
//! batch, a build, an agent given its prompt; every output checked.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::runner::Runner;
use super::*;
use crate::support::write_script;

#[test]
fn an_exec_run_that_succeeds_sets_every_output_and_uploads_nothing() {
    let t = tempfile::tempdir().unwrap();
    let runner = Runner::new(t.path(), &repo_root(), machine_path(true));
    let a = action();
    let start = Instant::now();
    // Two lines and a `$`: the command is a bash script, as in a step's
    // `run:`. `env` shows what the command was given.
    let o = runner.run(
        &a,
        &[
            ("agent", "exec"),
            ("command", "echo \"hi $UNSET_WORD\"\nenv > seen-env.txt"),
        ],
    );
    assert!(!o.failed, "{}", o.log());
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );

    // warden was on PATH with the action's version: not built, no cache.
    let lookup = o.step("warden-lookup");
    assert_eq!(
        Path::new(&lookup.outputs["path"]),
        warden_dir().join("warden")
    );
    assert_eq!(lookup.outputs["version"], warden_version());
    assert!(
        !o.step("warden-cache").ran,
        "the cache is not restored for a warden on PATH"
    );
    assert_eq!(o.step("warden").outputs["built"], "false");
    assert!(!o.step("warden-cache-save").ran, "nothing built to save");
    assert!(o.path_added.is_empty(), "already on PATH");
    assert_eq!(
        o.step("agent").outputs["installed"],
        "",
        "exec installs nothing"
    );
    assert_eq!(o.step("run").status, Some(0));
    assert!(!o.step("upload").ran, "nothing to upload for a success");

    let run_dir = PathBuf::from(&o.outputs["run_dir"]);
    assert!(
        run_dir.starts_with(runner.workspace.join(".warden/runs")),
        "{}",
        run_dir.display()
    );
    let report = json(&run_dir.join("run.json"));
    assert_eq!(report["verdict"], "succeeded");
    let expected = run_outputs(&a, &o, &report, 0);
    assert_eq!(o.outputs, expected, "{}", o.log());
    assert_eq!(expected["cost_usd"], "", "exec has no cost");
    assert_eq!(expected["tokens"], "", "exec reports no tokens: not known");
    check_junit(&runner, &o, 1);
    check_every_warden_output_is_the_actions(&a, &o);
    assert_eq!(
        std::fs::read_to_string(run_dir.join("stdout.log")).unwrap(),
        "hi \n"
    );

    // The command ran in the workspace, under Actions, and got none of the
    // action's inputs (the prompt of an agent run would be among them).
    let env = std::fs::read_to_string(runner.workspace.join("seen-env.txt")).unwrap();
    assert!(env.lines().any(|l| l == "GITHUB_ACTIONS=true"), "{env}");
    assert!(!env.contains("INPUT_"), "{env}");
    // warden's own step summary reached the job's.
    assert!(o.summary.contains("succeeded"), "{}", o.summary);
}

#[test]
fn a_failing_run_fails_the_step_with_wardens_exit_code_and_is_uploaded() {
    let t = tempfile::tempdir().unwrap();
    // No warden on PATH; one of the action's version in the cache's
    // folder, as a cache hit leaves it: the install step hands it to the
    // run step, and puts it on PATH (GITHUB_PATH) for the job's later
    // steps.
    let runner = Runner::new(t.path(), &repo_root(), machine_path(false));
    let cached = runner.temp.join("warden/bin");
    std::fs::create_dir_all(&cached).unwrap();
    std::os::unix::fs::symlink(WARDEN, cached.join("warden")).unwrap();
    let a = action();
    // One argument per line, spaces kept inside a line; --preserve-status
    // makes the command's own `exit 3` warden's exit code.
    let o = runner.run(
        &a,
        &[
            ("agent", "exec"),
            (
                "command",
                "echo \"$GREETING\" > greeting.txt\necho broken >&2\nexit 3",
            ),
            (
                "args",
                "  --env\nGREETING=hello  world\n\n--preserve-status\n",
            ),
        ],
    );
    assert!(o.failed);
    let lookup = o.step("warden-lookup");
    assert_eq!(lookup.outputs["path"], "", "no warden on PATH");
    let cache = o.step("warden-cache");
    assert!(
        cache.ran,
        "the cache is restored when warden is not on PATH"
    );
    assert_eq!(Path::new(&cache.with["path"]), runner.temp.join("warden"));
    let key = &cache.with["key"];
    assert!(
        key.starts_with(&format!(
            "warden-{}-{}-linux-source-",
            warden_version(),
            std::env::consts::ARCH,
        )),
        "{key}"
    );
    assert_eq!(o.step("warden").outputs["built"], "false", "{}", o.log());
    assert_eq!(
        Path::new(&o.step("warden").outputs["warden"]),
        cached.join("warden")
    );
    assert!(!o.step("warden-cache-save").ran, "restored, not built");
    // The workflow's later steps find it too (`warden report`, say).
    assert_eq!(o.path_added, [cached.display().to_string()]);

    let run = o.step("run");
    assert_eq!(
        run.status,
        Some(3),
        "the step's status is warden's\n{}",
        o.log()
    );
    assert_eq!(
        std::fs::read_to_string(runner.workspace.join("greeting.txt")).unwrap(),
        "hello  world\n"
    );
    let run_dir = PathBuf::from(&o.outputs["run_dir"]);
    let report = json(&run_dir.join("run.json"));
    assert_eq!(report["verdict"], "agent_failed");
    assert_eq!(report["exit_code"], 3);
    let mut expected = run_outputs(&a, &o, &report, 3);
    let name = format!("warden-{}", run_dir.file_name().unwrap().to_str().unwrap());
    expected.insert("artifact_name".into(), name.clone());
    assert_eq!(o.outputs, expected, "{}", o.log());
    check_upload(&o, &run_dir, &name, "");
    check_junit(&runner, &o, 1);
}

#[test]
fn a_build_is_put_on_path_and_saved_to_the_cache_at_once() {
    let t = tempfile::tempdir().unwrap();
    // No warden anywhere, and a stand-in cargo whose `install` leaves the
    // warden under test where the real one would put its build.
    let fake = t.path().join("fake-bin");
    std::fs::create_dir(&fake).unwrap();
    let cargo_args = t.path().join("cargo-args.txt");
    write_script(
        &fake.join("cargo"),
        &format!(
            "#!/bin/sh\n[ \"$1\" = --version ] && {{ echo 'cargo 1.95.0 (stand-in)'; exit 0; }}\n\
             printf '%s\\n' \"$@\" > '{}'\n\
             root=\n\
             while [ $# -gt 0 ]; do [ \"$1\" = --root ] && root=$2; shift; done\n\
             [ -n \"$root\" ] || exit 9\n\
             mkdir -p \"$root/bin\" && ln -s '{WARDEN}' \"$root/bin/warden\"\n",
            cargo_args.display()
        ),
    );
    let mut path = vec![fake];
    path.extend(machine_path(false));
    let runner = Runner::new(t.path(), &repo_root(), path);
    let a = action();
    let o = runner.run(&a, &[("agent", "exec"), ("command", "echo built")]);
    assert!(!o.failed, "{}", o.log());
    let root = runner.temp.join("warden");
    assert_eq!(
        std::fs::read_to_string(&cargo_args).unwrap(),
        format!(
            "install\n--locked\n--force\n--path\n{}/crates/warden\n--root\n{}\n",
            repo_root().display(),
            root.display()
        )
    );
    let lookup = o.step("warden-lookup");
    assert!(o.step("warden-cache").ran);
    assert_eq!(o.step("warden").outputs["built"], "true");
    // Saved right after the build, whatever the run does next.
    let save = o.step("warden-cache-save");
    assert!(save.ran, "{}", o.log());
    assert_eq!(Path::new(&save.with["path"]), root);
    assert!(root.join("bin/warden").exists());
    assert_eq!(save.with["key"], lookup.outputs["cache-key"]);
    assert_eq!(
        o.outputs["warden"],
        root.join("bin/warden").display().to_string()
    );
    assert_eq!(o.outputs["verdict"], "succeeded");
}

#[test]
fn a_batch_with_a_failing_run_gives_its_counts_and_is_uploaded() {
    let t = tempfile::tempdir().unwrap();
    let runner = Runner::new(t.path(), &repo_root(), machine_path(true));
    // In a subdirectory: the batch file is found from `working-directory`
    // and the batch directory is made there.
    let wd = runner.workspace.join("sub");
    std::fs::create_dir(&wd).unwrap();
    std::fs::write(
        wd.join("runs.toml"),
        "[defaults]\nagent = \"exec\"\n\n\
         [[run]]\nname = \"one\"\ncommand = [\"sh\", \"-c\", \"echo one\"]\n\
         [[run]]\nname = \"two\"\ncommand = [\"sh\", \"-c\", \"echo two\"]\n\
         [[run]]\nname = \"broken\"\ncommand = [\"sh\", \"-c\", \"exit 7\"]\n",
    )
    .unwrap();
    let a = action();
    let o = runner.run(
        &a,
        &[
            ("batch", "runs.toml"),
            ("working-directory", "sub"),
            ("args", "-j\n3"),
            ("artifact-retention-days", "3"),
        ],
    );
    assert!(o.failed);
    assert_eq!(o.step("run").status, Some(1), "{}", o.log());
    assert_eq!(o.step("agent").outputs["installed"], "");

    let batch_dir = PathBuf::from(&o.outputs["batch_dir"]);
    assert!(
        batch_dir.starts_with(wd.join(".warden/batches")),
        "{}",
        batch_dir.display()
    );
    let b = json(&batch_dir.join("batch.json"));
    assert_eq!(b["jobs"], 3, "`args` reached warden batch");
    let runs = b["runs"].as_array().unwrap();
    let count = |v: &str| runs.iter().filter(|r| r["verdict"] == v).count();
    let mut e = all_outputs_empty(&a);
    let name = format!(
        "warden-batch-{}",
        batch_dir.file_name().unwrap().to_str().unwrap()
    );
    for (k, v) in [
        ("batch_dir", batch_dir.display().to_string()),
        (
            "batch_json",
            batch_dir.join("batch.json").display().to_string(),
        ),
        ("exit_code", "1".into()),
        ("failed", b["failed"].to_string()),
        (
            "never_ran",
            b["never_ran"].as_array().unwrap().len().to_string(),
        ),
        ("junit_file", o.outputs["junit_file"].clone()),
        ("artifact_name", name.clone()),
        ("warden", o.step("warden").outputs["warden"].clone()),
    ] {
        assert!(e.insert(k.into(), v).is_some(), "no output {k}");
    }
    for v in [
        "succeeded",
        "agent_failed",
        "stalled",
        "startup_timeout",
        "timed_out",
        "cancelled",
        "spawn_failed",
        "internal_error",
        "budget_exceeded",
        "check_failed",
        "setup_failed",
        "hook_failed",
        "merge_conflict",
    ] {
        assert!(
            e.insert(v.into(), count(v).to_string()).is_some(),
            "no output {v}"
        );
    }
    assert_eq!(o.outputs, e, "{}", o.log());
    assert_eq!(e["succeeded"], "2");
    assert_eq!(e["agent_failed"], "1");
    assert_eq!(e["failed"], "1");
    check_upload(&o, &batch_dir, &name, "3");
    check_junit(&runner, &o, 3);
    check_every_warden_output_is_the_actions(&a, &o);
}

#[test]
fn a_cancelled_job_reaches_warden_which_ends_the_run_and_reports_it() {
    let t = tempfile::tempdir().unwrap();
    let runner = Runner::new(t.path(), &repo_root(), machine_path(true));
    let a = action();
    let started = runner.workspace.join("started");
    let start = Instant::now();
    // The runner cancels a step with SIGINT to the step's shell alone.
    let o = runner.run_with(
        &a,
        &[("agent", "exec"), ("command", "touch started\nsleep 30")],
        |id, pid| {
            if id == "run" {
                let started = started.clone();
                std::thread::spawn(move || {
                    let until = Instant::now() + Duration::from_secs(20);
                    while !started.exists() && Instant::now() < until {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    let _ = Command::new("kill")
                        .args(["-INT", &pid.to_string()])
                        .status();
                });
            }
        },
    );
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "the signal did not end the run: {:?}\n{}",
        start.elapsed(),
        o.log()
    );
    assert_eq!(o.step("run").status, Some(130), "{}", o.log());
    let run_dir = PathBuf::from(&o.outputs["run_dir"]);
    let report = json(&run_dir.join("run.json"));
    assert_eq!(report["verdict"], "cancelled");
    let mut expected = run_outputs(&a, &o, &report, 130);
    let name = format!("warden-{}", run_dir.file_name().unwrap().to_str().unwrap());
    expected.insert("artifact_name".into(), name.clone());
    assert_eq!(o.outputs, expected, "{}", o.log());
    check_upload(&o, &run_dir, &name, "");
}

#[test]
fn a_bad_warden_flag_is_wardens_exit_code_with_no_upload() {
    let t = tempfile::tempdir().unwrap();
    let runner = Runner::new(t.path(), &repo_root(), machine_path(true));
    let a = action();
    let o = runner.run(
        &a,
        &[
            ("agent", "exec"),
            ("command", "true"),
            ("args", "--no-such-flag"),
        ],
    );
    let run = o.step("run");
    assert_eq!(run.status, Some(2), "{}", o.log());
    assert!(run.stderr.contains("--no-such-flag"), "{}", run.stderr);
    let mut e = all_outputs_empty(&a);
    e.insert("exit_code".into(), "2".into());
    e.insert("warden".into(), o.step("warden").outputs["warden"].clone());
    assert_eq!(o.outputs, e);
    assert!(!o.step("upload").ran, "no run directory was made");
}

#[test]
fn an_agent_run_gets_its_prompt_on_stdin_and_the_cli_args_after_a_double_dash() {
    let t = tempfile::tempdir().unwrap();
    let runner = Runner::new(t.path(), &repo_root(), machine_path(true));
    // A stand-in pi that keeps its stdin and arguments, then ends as pi
    // does. It is found through --agent-bin (install-agent false).
    let bin = t.path().join("fake-pi");
    write_script(
        &bin,
        "#!/bin/sh\ncat > prompt-seen.txt\nprintf '%s\\n' \"$@\" > args-seen.txt\n\
         echo '{\"type\":\"session\",\"version\":3,\"id\":\"s1\"}'\n\
         echo '{\"type\":\"agent_start\"}'\n\
         echo '{\"type\":\"turn_start\"}'\n\
         echo '{\"type\":\"message_end\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"all done\"}],\"stopReason\":\"stop\",\"usage\":{\"input\":10,\"output\":5,\"cacheRead\":0,\"cacheWrite\":0,\"cost\":{\"total\":0.5}}}}'\n\
         echo '{\"type\":\"agent_end\",\"messages\":[]}'\n",
    );
    let prompt = "fix the test\n$(touch pwned) `touch pwned` \"quoted\"\n";
    let a = action();
    let args = format!("--agent-bin\n{}\n--\n--an extra\n", bin.display());
    let o = runner.run(
        &a,
        &[
            ("agent", "pi"),
            ("prompt", prompt),
            ("install-agent", "false"),
            ("args", &args),
            ("upload-artifact", "always"),
        ],
    );
    assert!(!o.failed, "{}", o.log());
    assert_eq!(
        std::fs::read_to_string(runner.workspace.join("prompt-seen.txt")).unwrap(),
        prompt
    );
    assert!(!runner.workspace.join("pwned").exists());
    let args_seen = std::fs::read_to_string(runner.workspace.join("args-seen.txt")).unwrap();
    assert!(args_seen.ends_with("\n--an extra\n"), "{args_seen}");
    // The prompt is not left in RUNNER_TEMP.
    let left: Vec<_> = walk(&runner.temp)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "prompt"))
        .collect();
    assert!(left.is_empty(), "{left:?}");

    let run_dir = PathBuf::from(&o.outputs["run_dir"]);
    let report = json(&run_dir.join("run.json"));
    assert_eq!(report["verdict"], "succeeded");
    let mut expected = run_outputs(&a, &o, &report, 0);
    let final_text = run_dir.join("final_text.txt");
    assert_eq!(std::fs::read_to_string(&final_text).unwrap(), "all done");
    expected.insert("final_text_file".into(), final_text.display().to_string());
    let name = format!("warden-{}", run_dir.file_name().unwrap().to_str().unwrap());
    expected.insert("artifact_name".into(), name.clone());
    assert_eq!(o.outputs, expected, "{}", o.log());
    assert_eq!(o.outputs["cost_usd"], "0.5");
    assert_eq!(o.outputs["tokens"], "15");
    // upload-artifact: always uploads a success too.
    check_upload(&o, &run_dir, &name, "");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}
