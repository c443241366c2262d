//! An `exec` run's plain lines: events.jsonl points at their bytes in the
//! logs instead of copying them, and every reader gets them back exactly
//! as the run's events carried them (masked, cut at the cap, invalid
//! UTF-8 replaced).

use std::process::Command;

use serde_json::Value;

use crate::support::*;

const SECRET: &str = "sk-live-0c4d2a9e77b14f3a8e21";

fn exec(case: &Case, extra: &[&str], script: &str) -> Finished {
    let mut args = vec!["run", "exec", "--json"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    case.run(&args)
}

/// `warden report --events DIR`: exit code, events, stderr.
fn report_events(dir: &std::path::Path) -> (i32, Vec<Value>, String) {
    let out = Command::new(WARDEN)
        .args(["report", "--events"])
        .arg(dir)
        .output()
        .expect("run warden report --events");
    let events = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line of report --events is JSON"))
        .collect();
    (
        out.status.code().unwrap_or(-1),
        events,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn texts(events: &[Value], kind: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["kind"] == kind)
        .map(|e| {
            e["text"]
                .as_str()
                .expect("a line event has text")
                .to_string()
        })
        .collect()
}

/// events.jsonl as on disk, but for the `spawned` event (the command
/// line holds the script, and so the words it prints).
fn raw_file(done: &Finished) -> String {
    String::from_utf8(done.log("events.jsonl"))
        .expect("events.jsonl is UTF-8")
        .lines()
        .filter(|l| !l.contains(r#""kind":"spawned""#))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The number of line events the `lines` events of events.jsonl stand for.
fn lines_pointed_at(done: &Finished, stream: &str) -> u64 {
    done.raw_events()
        .iter()
        .filter(|e| e["kind"] == "lines" && e["stream"] == stream)
        .map(|e| e["lines"].as_u64().expect("a count of lines"))
        .sum()
}

#[test]
fn an_exec_runs_lines_are_read_back_from_the_logs_not_copied() {
    let case = Case::new();
    let script = "i=0; while [ $i -lt 500 ]; do echo \"plain-line-$i\"; i=$((i+1)); done; \
                  echo; echo '   '; echo to-stderr-1 >&2; echo >&2; echo to-stderr-2 >&2; \
                  printf 'crlf-line\\r\\n'; printf 'no-newline-at-end'";
    let done = exec(&case, &[], script);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let mut want: Vec<String> = (0..500).map(|i| format!("plain-line-{i}")).collect();
    want.extend(["crlf-line".to_string(), "no-newline-at-end".to_string()]);

    let file = raw_file(&done);
    for copied in ["plain-line-", "to-stderr-", "crlf-line", "no-newline"] {
        assert!(
            !file.contains(copied),
            "events.jsonl copies the line `{copied}…` that stdout.log/stderr.log already hold:\n{file}"
        );
    }
    assert_eq!(lines_pointed_at(&done, "stdout"), want.len() as u64);
    assert_eq!(lines_pointed_at(&done, "stderr"), 2);
    // The report's counts are the line events', as before.
    let report = done.report();
    assert_eq!(report["event_counts"]["text"], want.len(), "{report}");
    assert_eq!(report["event_counts"]["stderr"], 2, "{report}");

    // `warden report --events` reads them back as the run showed them.
    let (code, events, stderr) = report_events(&done.run_dir);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(texts(&events, "text"), want);
    assert_eq!(texts(&events, "stderr"), ["to-stderr-1", "to-stderr-2"]);
    assert!(!events.iter().any(|e| e["kind"] == "lines"));
    // ... and as --json showed them live, when it showed them all.
    let live: Vec<Value> = done
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    if !done.stderr.contains("not shown live") && !done.stderr.contains("were not written") {
        assert_eq!(texts(&live, "text"), want);
        assert_eq!(live, events, "--json and report --events differ");
    }

    // `warden replay` decodes the log itself.
    let out = Command::new(WARDEN)
        .args(["replay", "exec", "--json"])
        .arg(done.run_dir.join("stdout.log"))
        .output()
        .unwrap();
    let replayed: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(texts(&replayed, "text"), want);

    // The report and its HTML timeline read the same file.
    let page = case.path().join("t.html");
    let out = Command::new(WARDEN)
        .args(["report", "--html"])
        .arg(&page)
        .arg(&done.run_dir)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(shown.contains("logs as warden wrote them"), "{shown}");
    assert!(std::fs::read_to_string(&page).unwrap().contains("<svg"));
}

#[test]
fn a_secret_in_a_plain_line_is_masked_in_what_the_report_shows() {
    let case = Case::new();
    let env = format!("API_TOKEN={SECRET}");
    let script = "echo plain-before; echo \"the token is $API_TOKEN\"; \
                  echo \"stderr token $API_TOKEN\" >&2; echo plain-after";
    let done = exec(&case, &["--env", &env], script);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let file = raw_file(&done);
    assert!(
        !String::from_utf8_lossy(&done.log("events.jsonl")).contains(SECRET),
        "events.jsonl leaks the secret"
    );
    assert!(
        file.contains(r#""kind":"text","text":"the token is ***""#),
        "the masked line is an event of its own:\n{file}"
    );
    assert!(!file.contains("plain-before"), "{file}");
    let (code, events, stderr) = report_events(&done.run_dir);
    assert_eq!(code, 0, "{stderr}");
    let shown = serde_json::to_string(&events).unwrap();
    assert!(!shown.contains(SECRET), "report --events leaks the secret");
    assert_eq!(
        texts(&events, "text"),
        ["plain-before", "the token is ***", "plain-after"]
    );
    assert_eq!(texts(&events, "stderr"), ["stderr token ***"]);
}

#[test]
fn a_log_changed_after_the_run_is_still_detected() {
    let case = Case::new();
    let done = exec(&case, &[], "echo first-line; echo second-line");
    assert_eq!(done.code, 0, "{}", done.stderr);
    let log = done.run_dir.join("stdout.log");
    // Same length, other bytes: the events still point inside the file.
    std::fs::write(&log, "FIRST-LINE\nsecond-line\n").unwrap();
    let (code, events, stderr) = report_events(&done.run_dir);
    assert_eq!(code, 1, "a changed log must fail report --events: {stderr}");
    assert!(
        stderr.contains("stdout.log no longer matches what warden wrote"),
        "{stderr}"
    );
    assert_eq!(texts(&events, "text"), ["FIRST-LINE", "second-line"]);
    let out = Command::new(WARDEN)
        .arg("report")
        .arg(&done.run_dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));

    // Cut short: the lines that are gone are said to be gone.
    std::fs::write(&log, "FIRST").unwrap();
    let (code, _, stderr) = report_events(&done.run_dir);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("bytes before the lines"), "{stderr}");
}

#[test]
fn a_line_longer_than_the_event_cap_is_read_back_cut_like_its_event() {
    let case = Case::new();
    // 100 KiB, then a line of 'é' (2 bytes) that the 64 KiB cap cuts.
    let script = "head -c 102400 /dev/zero | tr '\\0' y; echo; \
                  i=0; while [ $i -lt 40000 ]; do printf 'é'; i=$((i+1)); done; echo; echo after";
    let done = exec(&case, &[], script);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(
        done.log("events.jsonl").len() < 16 * 1024,
        "events.jsonl copies the long lines:\n{}",
        raw_file(&done)
    );
    let (code, events, stderr) = report_events(&done.run_dir);
    assert_eq!(code, 0, "{stderr}");
    let got = texts(&events, "text");
    let cap = 64 * 1024;
    assert_eq!(
        got.len(),
        3,
        "{:?}",
        got.iter().map(String::len).collect::<Vec<_>>()
    );
    assert_eq!(
        got[0],
        format!(
            "{}… [{} more bytes in the log]",
            "y".repeat(cap),
            102_400 - cap
        )
    );
    assert_eq!(
        got[1],
        format!(
            "{}… [{} more bytes in the log]",
            "é".repeat(cap / 2),
            80_000 - cap
        )
    );
    assert_eq!(got[2], "after");
}

#[test]
fn a_line_over_max_line_is_left_out_of_the_lines_around_it() {
    let case = Case::new();
    let script = "echo before; head -c 40000 /dev/zero | tr '\\0' z; echo; echo after";
    let done = exec(&case, &["--max-line", "32KiB"], script);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let (code, events, stderr) = report_events(&done.run_dir);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(texts(&events, "text"), ["before", "after"]);
    let kinds: Vec<&str> = events
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .filter(|k| ["text", "oversized_line"].contains(k))
        .collect();
    assert_eq!(kinds, ["text", "oversized_line", "text"]);
}

#[test]
fn invalid_utf8_is_replaced_as_in_the_live_events() {
    let case = Case::new();
    let done = exec(
        &case,
        &[],
        "printf 'bad-\\377-byte\\n'; printf 'err-\\376\\n' >&2",
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(done.log("stdout.log"), b"bad-\xff-byte\n");
    let (code, events, stderr) = report_events(&done.run_dir);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(texts(&events, "text"), ["bad-\u{FFFD}-byte"]);
    assert_eq!(texts(&events, "stderr"), ["err-\u{FFFD}"]);
}

#[test]
fn output_tag_still_reads_the_lines_of_an_exec_run() {
    let case = Case::new();
    let script = "i=0; while [ $i -lt 200 ]; do echo \"work $i\"; i=$((i+1)); done; \
                  echo '<out>{\"answer\": 42}</out>'";
    let done = exec(&case, &["--output-tag", "out"], script);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let report = done.report();
    assert_eq!(report["output"], r#"{"answer": 42}"#, "{report}");
    assert!(!raw_file(&done).contains("work 1"));
    assert_eq!(lines_pointed_at(&done, "stdout"), 201);
}

#[test]
fn a_flood_of_lines_is_counted_and_read_back_whole() {
    let case = Case::new();
    // 200,000 lines and 20,000 blank ones, faster than any view takes
    // them: the reads' lines are taken as runs.
    let script = "awk 'BEGIN { for (i = 0; i < 200000; i++) { print \"flood line \" i; \
                  if (i % 10 == 0) print \"\" } }'";
    let done = case.run(&["run", "exec", "-q", "--", "sh", "-c", script]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let report = done.report();
    assert_eq!(report["event_counts"]["text"], 200_000, "{report}");
    assert_eq!(report["activity_lines"], 200_000, "{report}");
    assert_eq!(lines_pointed_at(&done, "stdout"), 200_000);
    assert!(!raw_file(&done).contains("flood line"));
    let (code, events, stderr) = report_events(&done.run_dir);
    assert_eq!(code, 0, "{stderr}");
    let got = texts(&events, "text");
    assert_eq!(got.len(), 200_000);
    assert!(
        got.iter()
            .enumerate()
            .all(|(i, t)| *t == format!("flood line {i}")),
        "the lines read back are the lines printed, in order"
    );
}
