//! Machine-readable output: each `--json` line names its run.

use std::path::Path;

use serde_json::Value;

use crate::schemas::{assert_valid, validator};
use crate::support::{Case, repo, two_committing_iterations};

fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

#[test]
fn every_json_line_names_its_run_and_events_jsonl_does_not() {
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--json",
        "--",
        "sh",
        "-c",
        "echo one; echo two >&2",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let run_id = done.report()["run_id"].as_str().expect("run_id").to_owned();
    let events = validator("event.schema.json");
    let lines = json_lines(&done.stdout);
    assert!(lines.len() >= 3, "{lines:?}");
    for line in &lines {
        assert_eq!(line["run_id"], run_id.as_str(), "{line}");
        assert_valid(&events, line, "a --json line");
    }
    // The file sits in the run's directory: it needs no run id.
    for line in done.raw_events() {
        assert!(line.get("run_id").is_none(), "{line}");
    }
    // `report --events` prints them as `--json` did: with the run id.
    let back = case.run(&["report", "--events", case.run_dir().to_str().unwrap()]);
    assert_eq!(back.code, 0, "{}", back.stderr);
    assert_eq!(
        back.stdout, done.stdout,
        "report --events is the --json feed"
    );
}

#[test]
fn a_sessions_json_lines_name_each_iterations_run() {
    let case = Case::new();
    repo(&case);
    let done = case.run(&[
        "run",
        "exec",
        "--json",
        "--iterations",
        "2",
        "--",
        "sh",
        "-c",
        "n=$(cat count 2>/dev/null || echo 0); echo $((n+1)) > count; git add count; git commit -qm it; echo done",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let session: Value = serde_json::from_str(
        &std::fs::read_to_string(case.run_dir().join("session.json")).expect("session.json"),
    )
    .expect("session.json is JSON");
    let ids: Vec<String> = session["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| {
            let dir = Path::new(r["run_dir"].as_str().expect("run_dir"));
            let report: Value =
                serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap())
                    .unwrap();
            report["run_id"].as_str().expect("run_id").to_owned()
        })
        .collect();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);
    let lines = json_lines(&done.stdout);
    let seen: Vec<&str> = lines
        .iter()
        .filter(|l| l["kind"] == "finished")
        .map(|l| l["run_id"].as_str().expect("run_id"))
        .collect();
    assert_eq!(seen, [ids[0].as_str(), ids[1].as_str()], "{lines:?}");
    assert!(lines.iter().all(|l| l["run_id"].is_string()), "{lines:?}");
}

fn report_json(case: &Case, dir: &Path) -> (i32, Value, String) {
    let done = case.run(&["report", dir.to_str().unwrap(), "--json"]);
    let doc = serde_json::from_str(&done.stdout)
        .unwrap_or_else(|e| panic!("report --json is one JSON document ({e}): {}", done.stdout));
    (done.code, doc, done.stderr)
}

#[test]
fn report_json_is_the_run_read_back_with_its_log_check() {
    let case = Case::new();
    let done = case.run(&["run", "exec", "--", "sh", "-c", "echo hello"]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let (code, doc, stderr) = report_json(&case, &case.run_dir());
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(doc["session"], Value::Null);
    let runs = doc["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1, "{doc}");
    let run = validator("run.schema.json");
    assert_valid(&run, &runs[0]["report"], "report --json's report");
    assert_eq!(runs[0]["report"], done.report(), "the report is run.json's");
    assert_eq!(runs[0]["logs"]["match"], true, "{doc}");

    // A log changed after the run: the document says so, and so does the exit code.
    let log = case.run_dir().join("stdout.log");
    std::fs::write(&log, "not what the agent said\n").unwrap();
    let (code, doc, stderr) = report_json(&case, &case.run_dir());
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(doc["runs"][0]["logs"]["match"], false, "{doc}");
    let changed = doc["runs"][0]["logs"]["changed"]
        .as_array()
        .expect("changed");
    assert!(
        changed
            .iter()
            .any(|c| c.as_str().unwrap().contains("stdout.log")),
        "{doc}"
    );
}

#[test]
fn report_json_of_a_session_has_the_session_and_each_run() {
    let case = Case::new();
    repo(&case);
    let done = two_committing_iterations(&case);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let (code, doc, stderr) = report_json(&case, &case.run_dir());
    assert_eq!(code, 0, "{stderr}");
    assert_valid(
        &validator("session.schema.json"),
        &doc["session"],
        "the session",
    );
    let runs = doc["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2, "{doc}");
    for r in runs {
        assert_valid(&validator("run.schema.json"), &r["report"], "a run");
        assert_eq!(r["logs"]["match"], true, "{doc}");
    }
}

#[test]
fn doctor_json_is_one_document_of_what_it_checked() {
    let case = Case::new();
    let done = case.run(&["doctor", "--json"]);
    let doc: Value = serde_json::from_str(&done.stdout)
        .unwrap_or_else(|e| panic!("doctor --json is one JSON document ({e}): {}", done.stdout));
    assert_eq!(doc["schema_version"], 1, "{doc}");
    assert_eq!(
        done.code, 0,
        "a supervised run works here: {doc} {}",
        done.stderr
    );
    assert_eq!(doc["supervised_run_works"], true, "{doc}");
    for agent in ["claude", "codex", "opencode", "pi", "gemini"] {
        assert!(doc["agents"][agent]["ok"].is_boolean(), "{agent}: {doc}");
        assert!(doc["agents"][agent]["detail"].is_string(), "{agent}: {doc}");
    }
    assert!(doc["containment"]["subreaper"].is_boolean(), "{doc}");
    for check in ["cgroup_v2", "user_namespaces"] {
        assert!(
            doc["containment"][check]["ok"].is_boolean(),
            "{check}: {doc}"
        );
    }
    for sandbox in ["host", "bwrap", "docker", "podman"] {
        assert!(
            doc["sandboxes"][sandbox]["ok"].is_boolean(),
            "{sandbox}: {doc}"
        );
    }
    assert_eq!(doc["sandboxes"]["host"]["ok"], true);
    let auto_sandbox = doc["auto"]["sandbox"].as_str().expect("auto.sandbox");
    assert_eq!(
        auto_sandbox == "bwrap",
        doc["sandboxes"]["bwrap"]["ok"] == true,
        "{doc}"
    );
    assert!(
        ["cgroup", "subreaper"].contains(&doc["auto"]["containment"].as_str().unwrap()),
        "{doc}"
    );
}

#[test]
fn batch_json_prints_batch_json_on_stdout() {
    let case = Case::new();
    let file = case.path().join("runs.toml");
    std::fs::write(
        &file,
        "[defaults]\nagent = \"exec\"\n\n\
         [[run]]\nname = \"good\"\ncommand = [\"sh\", \"-c\", \"echo fine\"]\n\n\
         [[run]]\nname = \"bad\"\ncommand = [\"sh\", \"-c\", \"exit 7\"]\n",
    )
    .unwrap();
    let dir = case.path().join("batch");
    let done = case.run(&[
        "batch",
        file.to_str().unwrap(),
        "--json",
        "--dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(done.code, 1, "one run failed: {}", done.stderr);
    let printed: Value = serde_json::from_str(&done.stdout)
        .unwrap_or_else(|e| panic!("batch --json is one JSON document ({e}): {}", done.stdout));
    assert_valid(&validator("batch.schema.json"), &printed, "batch --json");
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("batch.json")).unwrap()).unwrap();
    assert_eq!(printed, written, "stdout has batch.json's content");
    assert!(
        done.stderr.contains("good") && done.stderr.contains("bad"),
        "the summary stays on stderr: {}",
        done.stderr
    );
}

/// `warden report DIR` (text, `--json`, `--events`) exits with the code
/// `warden run` gave.
fn report_codes(case: &Case) -> [i32; 3] {
    let dir = case.run_dir();
    let dir = dir.to_str().unwrap();
    [
        case.run(&["report", dir]).code,
        case.run(&["report", dir, "--json"]).code,
        case.run(&["report", dir, "--events"]).code,
    ]
}

#[test]
fn report_exits_with_the_runs_verdict_code() {
    for (script, extra, want) in [
        ("echo fine", &[][..], 0),
        ("echo no; exit 7", &[][..], 1),
        (
            "echo working; sleep 600",
            &["--stall-timeout", "300ms", "--kill-grace", "200ms"][..],
            3,
        ),
    ] {
        let case = Case::new();
        let mut args = vec!["run", "exec"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "sh", "-c", script]);
        let done = case.run(&args);
        assert_eq!(done.code, want, "{script}: {}", done.stderr);
        assert_eq!(report_codes(&case), [want; 3], "{script}");
    }
}

#[test]
fn a_changed_log_wins_over_the_verdict() {
    for (script, extra, verdict) in [
        ("echo fine", &[][..], 0),
        (
            "echo working; sleep 600",
            &["--stall-timeout", "300ms", "--kill-grace", "200ms"][..],
            3,
        ),
    ] {
        let case = Case::new();
        let mut args = vec!["run", "exec"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "sh", "-c", script]);
        let done = case.run(&args);
        assert_eq!(done.code, verdict, "{script}: {}", done.stderr);
        std::fs::write(case.run_dir().join("stdout.log"), "rewritten\n").unwrap();
        assert_eq!(report_codes(&case), [1; 3], "{script}");
    }
}

#[test]
fn report_of_a_directory_that_is_no_run_exits_2() {
    let case = Case::new();
    let done = case.run(&["run", "exec", "--", "sh", "-c", "echo fine"]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    // Valid JSON, but not a run report: no verdict to exit with.
    std::fs::write(case.run_dir().join("run.json"), "{\"verdict\": 5}").unwrap();
    assert_eq!(report_codes(&case), [2; 3]);
}
