//! A session's checks, hooks and merge everywhere it shows up: the lines
//! on stderr and the session's last words, `--json`, the GitHub Actions
//! log (annotations, the step summary, `$GITHUB_OUTPUT`), JUnit, the
//! telemetry spans and `warden report`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use warden_telemetry_backends::otlp::{Receiver, SpanTree};

use crate::support::{Case, Finished, WARDEN, git, repo};

/// An `exec` agent that counts its iterations in `n`, and a check that
/// passes from the second on.
const COUNTER: &str = "n=$(cat n 2>/dev/null || echo 0); echo $((n+1)) > n; echo counted";
const CHECK: &str = "echo n is $(cat n); test $(cat n) -ge 2";

/// The session's directory, as its last words name its report.
fn session_dir(done: &Finished) -> PathBuf {
    done.stderr
        .lines()
        .find_map(|l| l.split_once("warden: session report: ").map(|(_, p)| p))
        .map(|p| Path::new(p).parent().unwrap().to_path_buf())
        .unwrap_or_else(|| panic!("no session report named:\n{}", done.stderr))
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `$GITHUB_OUTPUT` as the runner reads it (no heredocs here).
fn outputs(file: &Path) -> BTreeMap<String, String> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.split_once('=').expect("name=value");
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn has_line(text: &str, parts: &[&str]) -> bool {
    text.lines().any(|l| parts.iter().all(|p| l.contains(p)))
}

#[test]
fn lines_and_json_show_each_check_and_hook_as_it_starts_and_ends() {
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--json",
        "--iterations",
        "3",
        "--check",
        CHECK,
        "--setup",
        "echo setting up",
        "--finally",
        "echo bye",
        "--",
        "sh",
        "-c",
        COUNTER,
    ]);
    let err = &done.stderr;
    assert_eq!(done.code, 0, "{err}");
    let check = format!("check `{CHECK}`");
    for parts in [
        &[
            "warden: setup hook `echo setting up` started; its output goes to",
            "setup",
        ][..],
        &["warden: setup hook `echo setting up` passed in "],
        &["warden: iteration 1/3"],
        &[
            &check,
            "after iteration 1 started; its output goes to",
            "iteration-1-check",
        ],
        &[
            &check,
            "after iteration 1 exited with status 1 after ",
            "; its output: ",
            "iteration-1-check (stdout.log, stderr.log)",
        ],
        &[&check, "after iteration 2 passed in "],
        &["warden: finally hook `echo bye` passed in "],
        // The session's last words: the check's result.
        &[
            "warden: ",
            &check,
            "after iteration 2 passed in ",
            "(the last of 2 checks)",
        ],
        &[
            "warden: session ",
            "succeeded after 2 of 3 iteration(s), stopped by check passed",
        ],
    ] {
        assert!(has_line(err, parts), "no line with {parts:?}:\n{err}");
    }
    assert!(!err.contains("iteration 3/3"), "{err}");
    // In order: the setup, each iteration and its check, the finally hook.
    let at = |needle: &str| {
        err.find(needle)
            .unwrap_or_else(|| panic!("{needle:?} not in:\n{err}"))
    };
    assert!(at("setup hook") < at("iteration 1/3"));
    assert!(at("iteration 1/3") < at("after iteration 1 started"));
    assert!(at("after iteration 1 exited") < at("iteration 2/3"));
    assert!(at("after iteration 2 passed") < at("finally hook `echo bye` started"));

    // --json: a line when each starts and when it ends, beside the events.
    let lines: Vec<Value> = done
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("each --json line is JSON"))
        .collect();
    let steps: Vec<&Value> = lines
        .iter()
        .filter(|l| l["kind"] == "step_started" || l["kind"] == "step_finished")
        .collect();
    let seen: Vec<(String, String, Value)> = steps
        .iter()
        .map(|l| {
            (
                l["kind"].as_str().unwrap().to_string(),
                l["step"]["kind"].as_str().unwrap().to_string(),
                l["step"]["iteration"].clone(),
            )
        })
        .collect();
    let expected: Vec<(String, String, Value)> = [
        ("step_started", "setup", Value::Null),
        ("step_finished", "setup", Value::Null),
        ("step_started", "check", 1.into()),
        ("step_finished", "check", 1.into()),
        ("step_started", "check", 2.into()),
        ("step_finished", "check", 2.into()),
        ("step_started", "finally", Value::Null),
        ("step_finished", "finally", Value::Null),
    ]
    .into_iter()
    .map(|(a, b, c)| (a.to_string(), b.to_string(), c))
    .collect();
    assert_eq!(seen, expected, "{}", done.stdout);
    let s = json(&session_dir(&done).join("session.json"));
    let first_check = steps[3];
    assert_eq!(first_check["schema_version"], 1);
    assert_eq!(
        first_check["step"], s["checks"][0],
        "as session.json has it"
    );
    assert_eq!(first_check["run_id"], s["checks"][0]["run_id"]);
    assert_eq!(first_check["step"]["exit_code"], 1);
    assert_eq!(steps[2]["step"]["command"], CHECK);
    assert_eq!(steps[2]["step"]["run_dir"], s["checks"][0]["run_dir"]);
    // The agent's own events are still there, each naming its run.
    assert!(
        lines
            .iter()
            .any(|l| l["kind"] == "text" && l["text"] == "counted"),
        "{}",
        done.stdout
    );
}

#[test]
fn a_failing_setup_hook_is_said_even_with_quiet_and_no_agent_runs() {
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--quiet",
        "--setup",
        "echo no deps >&2; exit 5",
        "--",
        "sh",
        "-c",
        "touch ran",
    ]);
    let err = &done.stderr;
    assert_eq!(done.code, 9, "setup_failed: {err}");
    assert!(!case.path().join("ran").exists());
    assert!(
        has_line(
            err,
            &[
                "warden: warning: setup hook `echo no deps >&2; exit 5` exited with status 5 after ",
                "; its output: "
            ]
        ),
        "{err}"
    );
    // --quiet hides the starts, not the failure.
    assert!(!err.contains("started; its output goes to"), "{err}");
    assert!(
        has_line(
            err,
            &[
                "warden: session ",
                "setup_failed",
                "stopped by setup failed"
            ]
        ),
        "{err}"
    );
}

#[test]
fn under_github_actions_a_failing_check_is_annotated_and_the_outputs_and_summary_carry_it() {
    let case = Case::new();
    let out = case.path().join("gh_output");
    let summary = case.path().join("gh_summary");
    let junit = case.path().join("junit.xml");
    let junit_arg = format!("--junit={}", junit.display());
    let mut cmd = case.command(&[
        "run",
        "exec",
        &junit_arg,
        "--iterations",
        "2",
        "--check",
        "echo still broken; echo the end >&2; exit 3",
        "--finally",
        "exit 4",
        "--",
        "sh",
        "-c",
        "echo working",
    ]);
    cmd.env("GITHUB_ACTIONS", "true")
        .env("GITHUB_OUTPUT", &out)
        .env("GITHUB_STEP_SUMMARY", &summary);
    let done = case.finished(cmd.output().unwrap(), Instant::now());
    let err = &done.stderr;
    assert_eq!(done.code, 8, "check_failed: {err}");
    let check = "check `echo still broken; echo the end >&2; exit 3`";
    // Each check that failed is a warning naming it, how it ended and
    // where its output is; the hook that failed an error; the session's
    // verdict an error of its own.
    for n in 1..=2 {
        assert!(
            has_line(
                err,
                &[
                    "::warning title=warden check::",
                    check,
                    &format!("after iteration {n} exited with status 3 after "),
                    &format!("iteration-{n}-check (stdout.log, stderr.log)"),
                ]
            ),
            "{err}"
        );
    }
    assert!(
        has_line(
            err,
            &["::error title=warden finally::finally hook `exit 4` exited with status 4"]
        ),
        "{err}"
    );
    assert!(
        has_line(
            err,
            &[
                "::error title=warden::check_failed: ",
                check,
                "after iteration 2 exited with status 3"
            ]
        ),
        "{err}"
    );
    // The check's lines in the log too, as every step's.
    assert!(
        has_line(
            err,
            &[check, "after iteration 2 started; its output goes to"]
        ),
        "{err}"
    );

    let o = outputs(&out);
    assert_eq!(o["verdict"], "check_failed");
    assert_eq!(o["exit_code"], "8");
    assert_eq!(o["check"], "failed");
    assert_eq!(o["merged_into"], "");
    assert_eq!(o["merge_commit"], "");

    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(md.contains("warden session"), "{md}");
    assert!(md.contains("check_failed"), "{md}");
    assert!(
        md.contains(
            "| check | ❌ echo still broken; echo the end &gt;&amp;2; exit 3: exited with status 3 after "
        ),
        "{md}"
    );
    assert!(
        md.contains("| step | iteration | command | result | duration | output |"),
        "{md}"
    );
    assert!(
        md.contains("| finally | - | exit 4 | ❌ exited with status 4 |"),
        "{md}"
    );

    // JUnit: a `check` case that fails naming the check, with the end of
    // its output, and a case for the hook.
    let xml = valid_junit(&junit);
    assert!(
        xml.contains(r#"<testcase name="check" classname="warden.exec""#),
        "{xml}"
    );
    assert!(
        xml.contains(r#"<failure type="check_failed" message="the check `echo still broken; echo the end &gt;&amp;2; exit 3` after iteration 2 exited with status 3 (2 check(s) run; its output: "#),
        "{xml}"
    );
    assert!(
        xml.contains(
            "stdout.log (its end):\nstill broken\n\nstderr.log (its end):\nthe end</failure>"
        ),
        "{xml}"
    );
    assert!(
        xml.contains(r#"<testcase name="hook/finally""#)
            && xml.contains(r#"<failure type="hook_failed" message="the finally hook `exit 4` exited with status 4""#),
        "{xml}"
    );
    // The agent's runs passed: the check is what failed.
    assert_eq!(xml.matches("<testcase ").count(), 4, "{xml}");
    assert_eq!(xml.matches("<failure ").count(), 2, "{xml}");
}

/// `file` validated against junit-10.xsd as the JUnit tests validate
/// theirs; read as it is where the validator is missing (off CI, said).
fn valid_junit(file: &Path) -> String {
    match crate::junit::validator() {
        Some(xsd) => crate::junit::valid(file, &xsd),
        None => std::fs::read_to_string(file).unwrap(),
    }
}

#[test]
fn junit_of_a_batch_has_each_entrys_check() {
    let case = Case::new();
    let file = case.path().join("runs.toml");
    std::fs::write(
        &file,
        format!(
            r#"
[[run]]
name = "good"
agent = "exec"
command = ["sh", "-c", "{COUNTER}"]
iterations = 3
check = "{CHECK}"

[[run]]
name = "bad"
agent = "exec"
command = ["true"]
check = "echo nope; exit 1"
"#
        ),
    )
    .unwrap();
    let junit = case.path().join("junit.xml");
    let done = case.run(&[
        "batch",
        file.to_str().unwrap(),
        "--dir",
        case.path().join("batch").to_str().unwrap(),
        &format!("--junit={}", junit.display()),
    ]);
    assert_eq!(done.code, 1, "{}\n{}", done.stdout, done.stderr);
    let xml = valid_junit(&junit);
    assert!(xml.contains(r#"<testcase name="good/check""#), "{xml}");
    assert!(xml.contains(r#"<testcase name="bad/check""#), "{xml}");
    assert!(
        xml.contains(r#"<failure type="check_failed" message="the check `echo nope; exit 1` after iteration 1 exited with status 1"#),
        "{xml}"
    );
    assert!(
        xml.contains("stdout.log (its end):\nnope</failure>"),
        "{xml}"
    );
    // The passing entry's check passes: one failure in all.
    assert_eq!(xml.matches("<failure ").count(), 1, "{xml}");
}

#[test]
fn the_batch_view_shows_each_entrys_checks_and_annotates_a_failed_one() {
    let case = Case::new();
    let file = case.path().join("runs.toml");
    std::fs::write(
        &file,
        r#"
[[run]]
name = "bad"
agent = "exec"
command = ["true"]
check = "echo nope; exit 1"
"#,
    )
    .unwrap();
    let summary = case.path().join("gh_summary");
    let mut cmd = case.command(&[
        "batch",
        file.to_str().unwrap(),
        "--dir",
        case.path().join("batch").to_str().unwrap(),
    ]);
    cmd.env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", &summary);
    let done = case.finished(cmd.output().unwrap(), Instant::now());
    let err = &done.stderr;
    assert_eq!(done.code, 1, "{err}");
    let check = "check `echo nope; exit 1` after iteration 1";
    for parts in [
        &["[bad] ", check, " started; its output goes to "][..],
        &[
            "[bad] ",
            check,
            " exited with status 1 after ",
            "iteration-1-check (stdout.log, stderr.log)",
        ],
        &[
            "::warning title=warden%3A bad check::",
            check,
            " exited with status 1",
        ],
        &[
            "::error title=warden%3A bad::check_failed: ",
            check,
            " exited with status 1",
        ],
    ] {
        assert!(has_line(err, parts), "no line with {parts:?}:\n{err}");
    }
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(
        md.contains("| ❌ check_failed | check\\_failed: check \\`echo nope; exit 1\\` after iteration 1 exited with status 1"),
        "{md}"
    );
}

#[test]
fn a_check_and_a_hook_are_spans_of_their_own_under_the_session() {
    let case = Case::new();
    let rx = Receiver::start_http();
    let endpoint = rx.endpoint();
    let mut cmd = case.command(&[
        "run",
        "--otel",
        &endpoint,
        "exec",
        "--iterations",
        "2",
        "--check",
        CHECK,
        "--setup",
        "true",
        "--",
        "sh",
        "-c",
        COUNTER,
    ]);
    crate::support::without_own_telemetry(&mut cmd);
    let done = case.finished(cmd.output().unwrap(), Instant::now());
    assert_eq!(done.code, 0, "{}", done.stderr);
    // The session, 2 iterations, 2 agent runs, 2 checks, the setup hook.
    let spans = rx.wait_for_spans(8, Duration::from_secs(10));
    let tree = spans.render();
    let session = spans.one("session exec");
    let checks: Vec<_> = spans.iter().filter(|s| s.name == "check").collect();
    assert_eq!(checks.len(), 2, "{tree}");
    for c in &checks {
        spans.assert_child_of(c, session);
        assert_eq!(c.str_attr("warden.step.kind"), Some("check"), "{tree}");
        assert_eq!(c.str_attr("warden.step.command"), Some(CHECK), "{tree}");
        assert!(c.str_attr("gen_ai.operation.name").is_none(), "{tree}");
    }
    let iterations: Vec<i64> = checks
        .iter()
        .map(|c| c.int_attr("warden.iteration").unwrap())
        .collect();
    assert!(iterations.contains(&1) && iterations.contains(&2), "{tree}");
    let setup = spans.one("hook setup");
    spans.assert_child_of(setup, session);
    assert_eq!(setup.str_attr("warden.step.kind"), Some("setup"));
    // The agent's runs keep their names.
    assert_eq!(
        spans
            .iter()
            .filter(|s| s.name == "invoke_agent exec")
            .count(),
        2,
        "{tree}"
    );
}

#[test]
fn report_lists_the_checks_hooks_and_merge_and_the_outputs_name_the_merge() {
    let case = Case::new();
    repo(&case);
    let out = case.path().join("gh_output");
    let mut cmd = case.command(&[
        "run",
        "exec",
        "--worktree",
        "--merge",
        "--iterations",
        "3",
        "--check",
        CHECK,
        "--on-success",
        "echo all good",
        "--",
        "sh",
        "-c",
        &format!("{COUNTER}; git add n; git commit -qm count"),
    ]);
    cmd.env("GITHUB_ACTIONS", "true")
        .env("GITHUB_OUTPUT", &out)
        .env("GITHUB_STEP_SUMMARY", case.path().join("gh_summary"));
    let done = case.finished(cmd.output().unwrap(), Instant::now());
    let err = &done.stderr;
    assert_eq!(done.code, 0, "{err}");
    let head = git(case.path(), &["rev-parse", "main"]);
    assert!(
        has_line(err, &["warden: merged into main at ", &head[..12]]),
        "{err}"
    );
    let o = outputs(&out);
    assert_eq!(o["check"], "passed");
    assert_eq!(o["merged_into"], "main");
    assert_eq!(o["merge_commit"], head);
    let md = std::fs::read_to_string(case.path().join("gh_summary")).unwrap();
    assert!(md.contains("| merged into | `main` at `"), "{md}");

    let dir = session_dir(&done);
    let report = Command::new(WARDEN)
        .arg("report")
        .arg(&dir)
        .arg("--html")
        .arg(case.path().join("page.html"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&report.stdout);
    assert_eq!(report.status.code(), Some(0), "{text}");
    for parts in [
        &["  checks and hooks:"][..],
        &[
            &format!("    check `{CHECK}` after iteration 1 exited with status 1 after "),
            "iteration-1-check",
        ],
        &[&format!("    check `{CHECK}` after iteration 2 passed in ")],
        &["    on-success hook `echo all good` passed in "],
        &[&format!("  merged into main at {head}")],
    ] {
        assert!(has_line(&text, parts), "no line with {parts:?}:\n{text}");
    }
    let page = std::fs::read_to_string(case.path().join("page.html")).unwrap();
    assert!(page.contains("<td>checks and hooks</td>"), "{page}");
    assert!(
        page.contains("on-success hook `echo all good` passed in"),
        "{page}"
    );
    assert!(
        page.contains(&format!("merged into main at {head}")),
        "{page}"
    );
}

#[test]
fn a_merge_conflict_is_said_at_the_end_in_the_summary_and_by_report() {
    let case = Case::new();
    repo(&case);
    // The agent changes README one way; meanwhile (before the merge) the
    // starting branch changes it another, from the on-success hook,
    // which runs on the host's checkout only through git -C.
    let main_dir = case.path().to_str().unwrap().to_string();
    let clash = format!(
        "printf 'theirs\\n' > '{main_dir}/README'; git -C '{main_dir}' -c user.name=T -c user.email=t@e commit -qam theirs"
    );
    let done = case.run(&[
        "run",
        "exec",
        "--worktree",
        "--merge",
        "--on-success",
        &clash,
        "--",
        "sh",
        "-c",
        "printf 'ours\\n' > README; git add README; git commit -qm ours",
    ]);
    let err = &done.stderr;
    assert_eq!(done.code, 11, "merge_conflict: {err}");
    assert!(
        has_line(
            err,
            &["warden: merge conflict in README: both branches are as they were"]
        ),
        "{err}"
    );
    let report = Command::new(WARDEN)
        .arg("report")
        .arg(session_dir(&done))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(
        has_line(
            &text,
            &["  merge conflict in README: both branches are as they were"]
        ),
        "{text}"
    );
}

#[test]
fn a_check_ended_by_its_own_clock_is_named_as_such() {
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--check-timeout",
        "300ms",
        "--kill-grace",
        "200ms",
        "--check",
        "sleep 30",
        "--",
        "true",
    ]);
    let err = &done.stderr;
    assert_eq!(done.code, 8, "check_failed: {err}");
    let line = "check `sleep 30` after iteration 1 timed out: its own clock (--check-timeout) ran out after ";
    assert!(
        has_line(err, &["warden: ", line, "; its output: "]),
        "{err}"
    );
    // The session's end says it too (the agent's run is not blamed).
    assert_eq!(err.lines().filter(|l| l.contains(line)).count(), 2, "{err}");
    assert!(
        has_line(err, &["warden: session ", "check_failed"]),
        "{err}"
    );
    case.assert_nothing_left();
}
