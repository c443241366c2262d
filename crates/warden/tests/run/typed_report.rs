//! `warden report` reads `run.json`, `session.json` and `events.jsonl` as
//! warden's own types: a file that is not one is an error that names it,
//! never a view that silently shows nothing.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::{Case, Finished, repo, two_committing_iterations};

/// Rewrites the JSON file `path` through `edit`.
fn edit_json(path: &Path, edit: impl FnOnce(&mut Value)) {
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    edit(&mut doc);
    std::fs::write(path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
}

/// `warden report DIR` as text, `--json`, `--events` and `--html`.
fn every_view(case: &Case, dir: &Path) -> Vec<(&'static str, Finished)> {
    let dir = dir.to_str().unwrap();
    let page = case.path().join("page.html");
    vec![
        ("text", case.run(&["report", dir])),
        ("--json", case.run(&["report", dir, "--json"])),
        ("--events", case.run(&["report", dir, "--events"])),
        (
            "--html",
            case.run(&["report", dir, "--html", page.to_str().unwrap()]),
        ),
    ]
}

/// Every view exits 2, prints nothing on stdout, and says on stderr that
/// `file` is not a `what` of this warden, with each of `said`.
fn assert_refused(case: &Case, dir: &Path, file: &Path, what: &str, said: &[&str]) {
    for (view, done) in every_view(case, dir) {
        assert_eq!(done.code, 2, "{view}: {}{}", done.stdout, done.stderr);
        assert_eq!(done.stdout, "", "{view}: nothing is shown of it");
        let want = format!(
            "{} is not a {what} of this warden, which reads schema_version 1: ",
            file.display()
        );
        assert!(
            done.stderr.contains(&want),
            "{view}: the error names the file and the version warden reads:\n{}",
            done.stderr
        );
        for s in said {
            assert!(
                done.stderr.contains(s),
                "{view}: serde's message `{s}` is in the error:\n{}",
                done.stderr
            );
        }
    }
}

fn finished_run(case: &Case) -> PathBuf {
    let done = case.run(&["run", "exec", "--", "sh", "-c", "echo fine"]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    case.run_dir()
}

#[test]
fn a_run_json_field_of_the_wrong_type_is_exit_2_naming_the_file() {
    let case = Case::new();
    let dir = finished_run(&case);
    let file = dir.join("run.json");
    edit_json(&file, |r| r["tool_calls"] = "many".into());
    assert_refused(
        &case,
        &dir,
        &file,
        "run report",
        &["invalid type: string \"many\", expected u32"],
    );
}

#[test]
fn a_run_json_of_schema_version_2_is_exit_2_saying_which_version_warden_reads() {
    let case = Case::new();
    let dir = finished_run(&case);
    let file = dir.join("run.json");
    edit_json(&file, |r| r["schema_version"] = 2.into());
    assert_refused(&case, &dir, &file, "run report", &["schema_version 2"]);
}

#[test]
fn a_session_json_of_schema_version_2_is_exit_2_naming_it() {
    let case = Case::new();
    repo(&case);
    let done = two_committing_iterations(&case);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let dir = case.run_dir();
    let file = dir.join("session.json");
    edit_json(&file, |s| s["schema_version"] = 2.into());
    assert_refused(&case, &dir, &file, "session report", &["schema_version 2"]);
}

#[test]
fn an_iteration_whose_run_json_lost_a_field_is_exit_2_not_a_view_without_it() {
    // The session's own file is fine; one iteration's report had its
    // commits renamed away. Read as loose JSON, that was a session shown
    // with no commits and exit 0.
    let case = Case::new();
    repo(&case);
    let done = two_committing_iterations(&case);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let dir = case.run_dir();
    let session: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("session.json")).unwrap()).unwrap();
    let second = PathBuf::from(session["runs"][1]["run_dir"].as_str().unwrap());
    let file = second.join("run.json");
    edit_json(&file, |r| {
        let commits = r.as_object_mut().unwrap().remove("commits").unwrap();
        r["commit_list"] = commits;
    });
    assert_refused(
        &case,
        &dir,
        &file,
        "run report",
        &["missing field `commits`"],
    );
}

#[test]
fn a_run_json_that_is_not_json_keeps_its_message() {
    let case = Case::new();
    let dir = finished_run(&case);
    std::fs::write(dir.join("run.json"), "{\"verdict\": ").unwrap();
    for (view, done) in every_view(&case, &dir) {
        assert_eq!(done.code, 2, "{view}: {}", done.stderr);
        assert!(
            done.stderr.contains(&format!(
                "{} is not valid JSON: ",
                dir.join("run.json").display()
            )),
            "{view}: {}",
            done.stderr
        );
    }
}

#[test]
fn lines_of_events_jsonl_that_are_no_event_are_left_out_of_the_view_and_copied_by_events() {
    let case = Case::new();
    let done = case.run(&["run", "exec", "--", "sh", "-c", "echo fine"]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let dir = case.run_dir();
    let run_id = done.report()["run_id"].as_str().unwrap().to_owned();
    let before = case.run(&["report", dir.to_str().unwrap()]);
    assert_eq!(before.code, 0, "{}", before.stderr);
    let events = dir.join("events.jsonl");
    let mut text = std::fs::read_to_string(&events).unwrap();
    // Not JSON, an event of a later warden, and a stamp far past the end:
    // none is an event this warden reads, so none stretches the timeline.
    text.push_str("not json\n");
    text.push_str("{\"schema_version\":1,\"t_ms\":999999999,\"kind\":\"from_a_later_warden\"}\n");
    std::fs::write(&events, &text).unwrap();
    let view = case.run(&["report", dir.to_str().unwrap()]);
    assert_eq!(view.code, 1, "the log changed: {}", view.stderr);
    assert_eq!(
        view.stdout.lines().next(),
        before.stdout.lines().next(),
        "the run's view, its length unchanged by the lines left out:\n{}",
        view.stdout
    );
    let back = case.run(&["report", dir.to_str().unwrap(), "--events"]);
    assert_eq!(back.code, 1, "{}", back.stderr);
    let lines: Vec<&str> = back.stdout.lines().collect();
    assert_eq!(
        lines[lines.len() - 2..],
        [
            "not json".to_string(),
            format!(
                "{{\"run_id\":\"{run_id}\",\"schema_version\":1,\"t_ms\":999999999,\"kind\":\"from_a_later_warden\"}}"
            )
        ],
        "copied as they are, an object named with its run:\n{}",
        back.stdout
    );
}

#[test]
fn a_lines_event_that_is_no_event_of_this_warden_is_exit_1_naming_it() {
    let case = Case::new();
    let dir = finished_run(&case);
    let events = dir.join("events.jsonl");
    let text = std::fs::read_to_string(&events).unwrap();
    let forged: String = text
        .lines()
        .map(|l| {
            if l.contains("\"kind\":\"lines\"") {
                l.replace("\"offset\":", "\"offset_bytes\":")
            } else {
                l.to_string()
            }
        })
        .map(|l| l + "\n")
        .collect();
    assert_ne!(forged, text, "the run wrote a `lines` event");
    std::fs::write(&events, forged).unwrap();
    let back = case.run(&["report", dir.to_str().unwrap(), "--events"]);
    assert_eq!(back.code, 1, "{}", back.stderr);
    assert!(
        back.stderr
            .contains("a `lines` event of events.jsonl is not one this warden reads")
            && back.stderr.contains("missing field `offset`"),
        "{}",
        back.stderr
    );
    assert!(
        !back.stdout.contains("\"kind\":\"text\"") && !back.stdout.contains("offset"),
        "neither the lines nor the forged event are printed:\n{}",
        back.stdout
    );
}

#[test]
fn events_of_a_session_are_only_json_lines() {
    // The text view's session summary is not an event: `--events` (as
    // `--json`) prints nothing but JSON on stdout.
    let case = Case::new();
    repo(&case);
    let done = two_committing_iterations(&case);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let back = case.run(&["report", case.run_dir().to_str().unwrap(), "--events"]);
    assert_eq!(back.code, 0, "{}", back.stderr);
    let mut runs = std::collections::BTreeSet::new();
    for line in back.stdout.lines() {
        let event: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}\n{}", back.stdout));
        runs.insert(event["run_id"].as_str().expect("run_id").to_owned());
    }
    assert_eq!(runs.len(), 2, "both iterations' events:\n{}", back.stdout);
}
