//! JUnit XML from the reports of a run, a session and a batch, so a CI
//! system shows each run as a test case: `succeeded` passes, `cancelled`
//! is skipped, every other verdict is a failure whose type is the verdict,
//! whose message is the reason and whose text is the tail of the run's
//! stderr; `system-out` names the run's directory.
//!
//! A session with a check (`--check`) has a case `check` too (`ENTRY/check`
//! in a batch): it fails when the last check did (verdict `check_failed`),
//! with a message naming the check and how it ended, and the last lines
//! of its output; `system-out` lists every check. Each hook has a case
//! (`hook/setup`, ...), and so has a prompt command that failed.
//!
//! The rendering is pure: the tail of a log comes from the `tail`
//! function the caller passes ([`log_tail`] reads it from the file of
//! that name in the run's directory), so the XML can be tested without a
//! run.

use std::borrow::Cow;
use std::path::Path;

use quick_xml::Writer;
use quick_xml::events::{BytesDecl, BytesText, Event};

use crate::Report;
use crate::Verdict;
use crate::batch_report::BatchReport;
use crate::session::{SessionReport, SessionRun, StepKind, StepReport};

/// At most this much of a run's stderr goes into its failure: enough to
/// show the error, not so much that the CI page drowns in it.
pub const TAIL_BYTES: u64 = 4096;
/// And at most this many lines of it.
pub const TAIL_LINES: usize = 50;

/// The last [`TAIL_LINES`] lines (within [`TAIL_BYTES`]) of the run's
/// `stderr.log`, read with the bounded reader: the file is the agent's
/// output and may be anything; `None` when there is none to show.
pub fn stderr_tail(run_dir: &Path) -> Option<String> {
    log_tail(run_dir, "stderr.log")
}

/// The last [`TAIL_LINES`] lines (within [`TAIL_BYTES`]) of the log
/// `file` (`stdout.log`, `stderr.log`) in `run_dir`, as [`stderr_tail`]
/// reads it.
pub fn log_tail(run_dir: &Path, file: &str) -> Option<String> {
    let path = run_dir.join(file);
    let bytes = crate::regular_file::read_tail(&path, TAIL_BYTES).ok()?;
    let full = std::fs::metadata(&path)
        .map(|m| m.len() <= TAIL_BYTES)
        .unwrap_or(true);
    let text = String::from_utf8_lossy(&bytes);
    let mut lines: Vec<&str> = text.lines().collect();
    // The first line of a cut file is a piece of a line: drop it.
    if !full && lines.len() > 1 {
        lines.remove(0);
    }
    let keep = lines.len().saturating_sub(TAIL_LINES);
    let tail = lines[keep..].join("\n");
    (!tail.trim().is_empty()).then_some(tail)
}

/// The reader of a log's tail the rendering is given: the run's
/// directory and the log's name in it.
pub type Tail<'a> = &'a dyn Fn(&Path, &str) -> Option<String>;

/// How one test case ended.
enum Outcome<'a> {
    Passed,
    Skipped {
        message: Cow<'a, str>,
    },
    Failure {
        kind: &'a str,
        message: Cow<'a, str>,
    },
    /// No verdict at all (the run never ended, or never started).
    Error {
        message: Cow<'a, str>,
    },
}

impl<'a> Outcome<'a> {
    fn of(verdict: Option<Verdict>, reason: &'a str) -> Self {
        let message = Cow::Borrowed(reason);
        match verdict {
            Some(Verdict::Succeeded) => Outcome::Passed,
            Some(Verdict::Cancelled) => Outcome::Skipped { message },
            Some(v) => Outcome::Failure {
                kind: v.as_str(),
                message,
            },
            None => Outcome::Error { message },
        }
    }
}

/// Which logs of its run a case's failure shows the end of.
const RUN_LOGS: &[&str] = &["stderr.log"];
/// A check's or hook's: what it printed on either stream.
const STEP_LOGS: &[&str] = &["stdout.log", "stderr.log"];

/// One test case, as the suite lists it.
struct Case<'a> {
    classname: String,
    name: String,
    duration_ms: u64,
    outcome: Outcome<'a>,
    run_dir: Option<&'a Path>,
    /// The logs of `run_dir` whose end a failure shows.
    logs: &'static [&'static str],
    /// More for `system-out`, after the run's directory.
    out: Option<String>,
}

impl<'a> Case<'a> {
    fn new(
        classname: &str,
        name: String,
        duration_ms: u64,
        outcome: Outcome<'a>,
        run_dir: Option<&'a Path>,
    ) -> Self {
        Self {
            classname: classname.to_string(),
            name,
            duration_ms,
            outcome,
            run_dir,
            logs: RUN_LOGS,
            out: None,
        }
    }
}

/// One test suite.
struct Suite<'a> {
    name: String,
    timestamp: Option<&'a str>,
    duration_ms: u64,
    cases: Vec<Case<'a>>,
}

/// The JUnit XML of one run: one suite, one case.
pub fn run(report: &Report, tail: Tail<'_>) -> String {
    let suite = Suite {
        name: format!("warden run {}", report.agent),
        timestamp: Some(&report.started_at),
        duration_ms: report.duration_ms,
        cases: vec![Case::new(
            &format!("warden.{}", report.agent),
            report.run_id.clone(),
            report.duration_ms,
            Outcome::of(report.verdict, &report.reason),
            Some(&report.run_dir),
        )],
    };
    render(&[suite], tail)
}

/// The JUnit XML of a session: one suite, one case per run (each
/// iteration, each attempt).
pub fn session(report: &SessionReport, tail: Tail<'_>) -> String {
    let classname = format!("warden.{}", report.name);
    let mut cases: Vec<Case<'_>> = report
        .runs
        .iter()
        .map(|r| session_case(&classname, None, r))
        .collect();
    cases.extend(step_cases(&classname, None, report));
    let suite = Suite {
        name: format!("warden session {}", report.name),
        timestamp: Some(&report.started_at),
        duration_ms: report.duration_ms,
        cases,
    };
    render(&[suite], tail)
}

/// The JUnit XML of a batch: one suite, one case per entry; an entry
/// that ran as a session of more than one run has one case per run,
/// named `entry/iteration-N`.
pub fn batch(report: &BatchReport, tail: Tail<'_>) -> String {
    let classname = format!("warden.batch.{}", suite_name_of(&report.file));
    let mut cases = Vec::new();
    for entry in &report.runs {
        match &entry.session {
            // A session that ran (an entry stopped before its first run,
            // by a used-up budget say, falls to the last arm, so it still
            // has its case).
            Some(s) if !s.runs.is_empty() && (s.runs.len() > 1 || s.iterations_requested > 1) => {
                cases.extend(
                    s.runs
                        .iter()
                        .map(|r| session_case(&classname, Some(&entry.name), r)),
                );
            }
            Some(s) if s.runs.len() == 1 => {
                let r = &s.runs[0];
                cases.push(Case::new(
                    &classname,
                    entry.name.clone(),
                    r.duration_ms,
                    Outcome::of(r.verdict, &r.reason),
                    Some(&r.run_dir),
                ));
            }
            // No run of its own: the entry's verdict, and why it has none.
            _ => {
                let why = entry
                    .error
                    .as_deref()
                    .or(entry.session.as_ref().and_then(|s| s.error.as_deref()))
                    .unwrap_or("the entry never ran");
                cases.push(Case::new(
                    &classname,
                    entry.name.clone(),
                    entry.duration_ms,
                    Outcome::of(entry.verdict, why),
                    None,
                ));
            }
        }
        if let Some(s) = &entry.session {
            cases.extend(step_cases(&classname, Some(&entry.name), s));
        }
    }
    // The batch report has no start time of its own: its first session's.
    let timestamp = report
        .runs
        .iter()
        .filter_map(|r| r.session.as_ref().map(|s| s.started_at.as_str()))
        .min();
    let suite = Suite {
        name: format!("warden batch {}", suite_name_of(&report.file)),
        timestamp,
        duration_ms: report.duration_ms,
        cases,
    };
    render(&[suite], tail)
}

/// The batch file's name without its directory and extension.
fn suite_name_of(file: &Path) -> String {
    file.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| file.display().to_string())
}

/// A session's run: `iteration-N`, with the attempt when it was retried
/// and a mark when it was the correction of a missing output.
fn session_case<'a>(classname: &str, entry: Option<&str>, r: &'a SessionRun) -> Case<'a> {
    let mut name = format!("iteration-{}", r.iteration);
    if r.attempt > 1 {
        name.push_str(&format!("/attempt-{}", r.attempt));
    }
    if r.output_retry {
        name.push_str("/output-retry");
    }
    if let Some(entry) = entry {
        name = format!("{entry}/{name}");
    }
    Case::new(
        classname,
        name,
        r.duration_ms,
        Outcome::of(r.verdict, &r.reason),
        Some(&r.run_dir),
    )
}

/// What a check or hook is, in a message: "the check `cargo test` after
/// iteration 2".
fn step_words(step: &StepReport) -> String {
    let what = match step.kind {
        StepKind::Check => "the check",
        StepKind::PromptCommand => "the prompt's command",
        StepKind::HostSetup => "the host setup hook",
        StepKind::Setup => "the setup hook",
        StepKind::OnSuccess => "the on-success hook",
        StepKind::Finally => "the finally hook",
    };
    let when = match (step.kind, step.iteration) {
        (StepKind::Check, Some(0)) => " before the first iteration".to_string(),
        (StepKind::Check, Some(n)) => format!(" after iteration {n}"),
        (StepKind::PromptCommand, Some(n)) => format!(" for iteration {n}"),
        _ => String::new(),
    };
    format!("{what} `{}`{when}", step.command)
}

/// A session's checks and hooks as cases: one `check` case for all its
/// checks (the last decides: a check that failed before one that passed
/// is the loop at work), one per hook (`hook/setup`, ...), and one per
/// prompt command that failed. In a batch each is named after its entry
/// (`ENTRY/check`).
fn step_cases<'a>(classname: &str, entry: Option<&str>, s: &'a SessionReport) -> Vec<Case<'a>> {
    let named = |name: &str| match entry {
        Some(e) => format!("{e}/{name}"),
        None => name.to_string(),
    };
    let mut cases = Vec::new();
    if let Some(last) = s.checks.last() {
        let outcome = match last.verdict {
            _ if last.passed => Outcome::Passed,
            Some(Verdict::Cancelled) => Outcome::Skipped {
                message: Cow::Borrowed(&last.reason),
            },
            _ => Outcome::Failure {
                kind: Verdict::CheckFailed.as_str(),
                message: Cow::Owned(format!(
                    "{} {} ({} check(s) run; its output: {})",
                    step_words(last),
                    last.how(),
                    s.checks.len(),
                    last.run_dir.display()
                )),
            },
        };
        let every = s
            .checks
            .iter()
            .map(|c| format!("{}: {} ({})", step_words(c), c.how(), c.run_dir.display()))
            .collect::<Vec<_>>()
            .join("\n");
        let mut case = Case::new(
            classname,
            named("check"),
            s.checks.iter().map(|c| c.duration_ms).sum(),
            outcome,
            Some(&last.run_dir),
        );
        case.logs = STEP_LOGS;
        case.out = Some(every);
        cases.push(case);
    }
    for hook in &s.hooks {
        if hook.kind == StepKind::PromptCommand && hook.passed {
            continue;
        }
        let outcome = match hook.verdict {
            _ if hook.passed => Outcome::Passed,
            Some(Verdict::Cancelled) => Outcome::Skipped {
                message: Cow::Borrowed(&hook.reason),
            },
            _ => Outcome::Failure {
                kind: match hook.kind {
                    StepKind::HostSetup | StepKind::Setup | StepKind::PromptCommand => {
                        Verdict::SetupFailed.as_str()
                    }
                    _ => Verdict::HookFailed.as_str(),
                },
                message: Cow::Owned(format!("{} {}", step_words(hook), hook.how())),
            },
        };
        let name = match hook.kind {
            // Named after its directory (`iteration-2-prompt-1`): an
            // iteration may have several.
            StepKind::PromptCommand => hook
                .run_dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "prompt-command".into()),
            kind => format!("hook/{}", kind.as_str().replace('_', "-")),
        };
        let mut case = Case::new(
            classname,
            named(&name),
            hook.duration_ms,
            outcome,
            Some(&hook.run_dir),
        );
        case.logs = STEP_LOGS;
        cases.push(case);
    }
    cases
}

/// Seconds with milliseconds, as JUnit's `time` has them.
fn seconds(ms: u64) -> String {
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

/// `s` without the characters XML 1.0 cannot carry at all, escaped or
/// not (control characters an agent's output may hold: ESC of a colour,
/// NUL), which would make the whole file unreadable.
pub fn xml_safe(s: &str) -> String {
    s.chars()
        .filter(|&c| {
            matches!(c, '\t' | '\n' | '\r')
                || ('\u{20}'..='\u{D7FF}').contains(&c)
                || ('\u{E000}'..='\u{FFFD}').contains(&c)
                || c >= '\u{10000}'
        })
        .collect()
}

fn render(suites: &[Suite<'_>], tail: Tail<'_>) -> String {
    let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
    // Writing into a Vec cannot fail; the results are unwrapped for that.
    let ok = "writing XML into memory does not fail";
    w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))
        .expect(ok);
    let count = |f: fn(&Outcome<'_>) -> bool| -> usize {
        suites
            .iter()
            .flat_map(|s| &s.cases)
            .filter(|c| f(&c.outcome))
            .count()
    };
    let total: usize = suites.iter().map(|s| s.cases.len()).sum();
    let failures = count(|o| matches!(o, Outcome::Failure { .. }));
    let errors = count(|o| matches!(o, Outcome::Error { .. }));
    let time: u64 = suites.iter().map(|s| s.duration_ms).sum();
    w.create_element("testsuites")
        .with_attributes([
            ("name", "warden"),
            ("tests", &total.to_string()),
            ("failures", &failures.to_string()),
            ("errors", &errors.to_string()),
            // No `skipped` here: junit-10.xsd allows it only on a
            // testsuite (each suite has its own).
            ("time", &seconds(time)),
        ])
        .write_inner_content(|w| {
            for suite in suites {
                write_suite(w, suite, tail)?;
            }
            Ok::<(), std::io::Error>(())
        })
        .expect(ok);
    let mut out = String::from_utf8(w.into_inner()).expect("the XML is made of UTF-8 strings");
    out.push('\n');
    out
}

fn write_suite(w: &mut Writer<Vec<u8>>, suite: &Suite<'_>, tail: Tail<'_>) -> std::io::Result<()> {
    let n = |f: fn(&Outcome<'_>) -> bool| suite.cases.iter().filter(|c| f(&c.outcome)).count();
    let mut attrs = vec![
        ("name", xml_safe(&suite.name)),
        ("tests", suite.cases.len().to_string()),
        (
            "failures",
            n(|o| matches!(o, Outcome::Failure { .. })).to_string(),
        ),
        (
            "errors",
            n(|o| matches!(o, Outcome::Error { .. })).to_string(),
        ),
        (
            "skipped",
            n(|o| matches!(o, Outcome::Skipped { .. })).to_string(),
        ),
        ("time", seconds(suite.duration_ms)),
    ];
    if let Some(t) = suite.timestamp {
        attrs.push(("timestamp", xml_safe(t)));
    }
    w.create_element("testsuite")
        .with_attributes(attrs.iter().map(|(k, v)| (*k, v.as_str())))
        .write_inner_content(|w| {
            for case in &suite.cases {
                write_case(w, case, tail)?;
            }
            Ok::<(), std::io::Error>(())
        })?;
    Ok(())
}

fn write_case(w: &mut Writer<Vec<u8>>, case: &Case<'_>, tail: Tail<'_>) -> std::io::Result<()> {
    let attrs = [
        ("name", xml_safe(&case.name)),
        ("classname", xml_safe(&case.classname)),
        ("time", seconds(case.duration_ms)),
    ];
    let element = w
        .create_element("testcase")
        .with_attributes(attrs.iter().map(|(k, v)| (*k, v.as_str())));
    let log = || {
        let Some(dir) = case.run_dir else {
            return String::new();
        };
        let tails: Vec<(&str, String)> = case
            .logs
            .iter()
            .filter_map(|file| tail(dir, file).map(|t| (*file, t)))
            .collect();
        let text = match tails.as_slice() {
            // A run's stderr, as it is.
            [(_, t)] if case.logs.len() == 1 => t.clone(),
            _ => tails
                .iter()
                .map(|(file, t)| format!("{file} (its end):\n{t}"))
                .collect::<Vec<_>>()
                .join("\n\n"),
        };
        xml_safe(&text)
    };
    element.write_inner_content(|w| {
        match &case.outcome {
            Outcome::Passed => {}
            Outcome::Skipped { message } => {
                w.create_element("skipped")
                    .with_attribute(("message", xml_safe(message).as_str()))
                    .write_empty()?;
            }
            Outcome::Failure { kind, message } => {
                w.create_element("failure")
                    .with_attributes([("type", *kind), ("message", &xml_safe(message))])
                    .write_text_content(BytesText::new(&log()))?;
            }
            Outcome::Error { message } => {
                w.create_element("error")
                    .with_attributes([("type", "none"), ("message", &xml_safe(message))])
                    .write_text_content(BytesText::new(&log()))?;
            }
        }
        let out = match (case.run_dir, &case.out) {
            (Some(dir), Some(more)) => Some(format!("{}\n{more}", dir.display())),
            (Some(dir), None) => Some(dir.display().to_string()),
            (None, Some(more)) => Some(more.clone()),
            (None, None) => None,
        };
        if let Some(out) = out {
            w.create_element("system-out")
                .write_text_content(BytesText::new(&xml_safe(&out)))?;
        }
        Ok::<(), std::io::Error>(())
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch_report::BatchRun;
    use crate::session::StopReason;
    use warden_events::{Agent, SchemaVersion, Tokens};

    fn report(verdict: Option<Verdict>, reason: &str) -> Report {
        let mut r = crate::report::sample();
        r.duration_ms = 1500;
        r.verdict = verdict;
        r.reason = reason.into();
        r
    }

    fn run(iteration: u32, attempt: u32, verdict: Option<Verdict>, reason: &str) -> SessionRun {
        SessionRun {
            iteration,
            output_retry: false,
            attempt,
            attempts: 3,
            resumed: false,
            retried_because: None,
            retry_delay_ms: None,
            run_id: format!("R{iteration}{attempt}"),
            run_dir: format!("/s/iteration-{iteration}-{attempt}").into(),
            verdict,
            reason: reason.into(),
            duration_ms: 2345,
            completion_signal_seen: false,
            tokens: Tokens::default(),
            cost_usd: None,
            turns: 0,
            commits: Some(Vec::new()),
            exit_code: None,
            signal: None,
            ended_by_warden: false,
        }
    }

    fn session(name: &str, requested: u32, runs: Vec<SessionRun>) -> SessionReport {
        SessionReport {
            schema_version: SchemaVersion,
            session_id: "01SESSION".into(),
            name: name.into(),
            session_dir: "/s".into(),
            workdir: "/".into(),
            worktree: None,
            branch: None,
            started_at: format!("2026-01-01T00:00:0{}.000Z", name.len() % 10),
            duration_ms: 5000,
            iterations_requested: requested,
            iterations_run: runs.len() as u32,
            stopped_because: StopReason::IterationsExhausted,
            verdict: runs.last().and_then(|r| r.verdict),
            runs,
            tokens: Tokens::default(),
            cost_usd: None,
            turns: 0,
            budgets: Vec::new(),
            budget_exceeded: None,
            commits: Some(Vec::new()),
            otel: None,
            output: None,
            error: None,
            output_lost: None,
            checks: Vec::new(),
            hooks: Vec::new(),
            merged_into: None,
            merge_commit: None,
            merge_conflicts: Vec::new(),
            written: true,
        }
    }

    fn no_tail(_: &Path, _: &str) -> Option<String> {
        None
    }

    /// Every element of the document, in order, with its attributes (a
    /// parse of the whole, so a malformed file fails here).
    fn elements(xml: &str) -> Vec<(String, Vec<(String, String)>)> {
        let mut reader = quick_xml::Reader::from_str(xml);
        let mut out = Vec::new();
        loop {
            match reader.read_event().expect("well-formed XML") {
                Event::Eof => break,
                Event::Start(e) | Event::Empty(e) => {
                    let attrs = e
                        .attributes()
                        .map(|a| {
                            let a = a.expect("an attribute");
                            (
                                String::from_utf8(a.key.as_ref().to_vec()).unwrap(),
                                a.unescape_value().unwrap().into_owned(),
                            )
                        })
                        .collect();
                    out.push((
                        String::from_utf8(e.name().as_ref().to_vec()).unwrap(),
                        attrs,
                    ));
                }
                _ => {}
            }
        }
        out
    }

    fn attr<'a>(el: &'a (String, Vec<(String, String)>), key: &str) -> &'a str {
        el.1.iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("{} has no {key}", el.0))
    }

    #[test]
    fn a_failed_run_is_a_failure_with_its_reason_tail_and_directory() {
        let r = report(
            Some(Verdict::Stalled),
            "no output for 5m <\"quoted\" & 'odd'>\u{1b}[31m\u{0}",
        );
        let xml = super::run(&r, &|dir, file| {
            assert_eq!((dir, file), (Path::new("/runs/01RUN"), "stderr.log"));
            Some("error: <boom> & \u{7}bell\nlast line".into())
        });
        let els = elements(&xml);
        let suite = els.iter().find(|e| e.0 == "testsuite").unwrap();
        assert_eq!(attr(suite, "tests"), "1");
        assert_eq!(attr(suite, "failures"), "1");
        assert_eq!(attr(suite, "errors"), "0");
        assert_eq!(attr(suite, "skipped"), "0");
        assert_eq!(attr(suite, "time"), "1.500");
        assert_eq!(attr(suite, "timestamp"), "2026-01-01T00:00:00.000Z");
        let case = els.iter().find(|e| e.0 == "testcase").unwrap();
        assert_eq!(attr(case, "name"), "01RUN");
        assert_eq!(attr(case, "classname"), "warden.claude");
        let failure = els.iter().find(|e| e.0 == "failure").unwrap();
        assert_eq!(attr(failure, "type"), "stalled");
        // Escaped and read back whole; the control characters are gone.
        assert_eq!(
            attr(failure, "message"),
            "no output for 5m <\"quoted\" & 'odd'>[31m"
        );
        assert!(
            xml.contains("error: &lt;boom&gt; &amp; bell\nlast line</failure>"),
            "{xml}"
        );
        assert!(
            xml.contains("<system-out>/runs/01RUN</system-out>"),
            "{xml}"
        );
        assert!(!xml.contains('\u{1b}') && !xml.contains('\u{0}') && !xml.contains('\u{7}'));
    }

    #[test]
    fn succeeded_passes_cancelled_is_skipped_and_no_verdict_is_an_error() {
        let xml = super::run(&report(Some(Verdict::Succeeded), "exited 0"), &|_, _| {
            panic!("a passing run needs no log")
        });
        let els = elements(&xml);
        assert!(
            !els.iter()
                .any(|e| ["failure", "skipped", "error"].contains(&e.0.as_str()))
        );

        let xml = super::run(&report(Some(Verdict::Cancelled), "SIGINT"), &no_tail);
        let els = elements(&xml);
        let skipped = els.iter().find(|e| e.0 == "skipped").unwrap();
        assert_eq!(attr(skipped, "message"), "SIGINT");
        assert_eq!(attr(&els[1], "skipped"), "1");

        let xml = super::run(&report(None, "still running"), &no_tail);
        let els = elements(&xml);
        assert_eq!(
            attr(els.iter().find(|e| e.0 == "error").unwrap(), "message"),
            "still running"
        );
        assert_eq!(attr(&els[0], "errors"), "1");
    }

    fn step(kind: StepKind, iteration: Option<u32>, command: &str, exit: i32) -> StepReport {
        let verdict = if exit == 0 {
            Verdict::Succeeded
        } else {
            Verdict::AgentFailed
        };
        let dir = match iteration {
            Some(n) => format!("/s/iteration-{n}-{kind}"),
            None => format!("/s/{kind}"),
        };
        serde_json::from_value(serde_json::json!({
            "kind": kind, "iteration": iteration, "command": command,
            "passed": exit == 0, "verdict": verdict, "reason": format!("exited {exit}"),
            "exit_code": exit, "signal": null, "duration_ms": 1250,
            "run_id": "R", "run_dir": dir,
        }))
        .unwrap()
    }

    #[test]
    fn a_session_s_check_is_one_case_that_the_last_check_decides() {
        let mut s = session(
            "fix",
            3,
            vec![
                run(1, 1, Some(Verdict::Succeeded), "done"),
                run(2, 1, Some(Verdict::Succeeded), "done"),
            ],
        );
        s.checks = vec![
            step(StepKind::Check, Some(1), "cargo test", 101),
            step(StepKind::Check, Some(2), "cargo test", 101),
        ];
        s.hooks = vec![
            step(StepKind::Setup, None, "make deps", 0),
            step(StepKind::PromptCommand, Some(1), "git log -1", 0),
            step(StepKind::PromptCommand, Some(2), "cat notes", 1),
            step(StepKind::Finally, None, "cleanup", 2),
        ];
        s.verdict = Some(Verdict::CheckFailed);
        let tail = |dir: &Path, file: &str| {
            (dir == Path::new("/s/iteration-2-check")).then(|| format!("{file} says <no>"))
        };
        let xml = super::session(&s, &tail);
        let els = elements(&xml);
        let names: Vec<&str> = els
            .iter()
            .filter(|e| e.0 == "testcase")
            .map(|e| attr(e, "name"))
            .collect();
        // A prompt command that passed is no case of its own.
        assert_eq!(
            names,
            [
                "iteration-1",
                "iteration-2",
                "check",
                "hook/setup",
                "iteration-2-prompt_command",
                "hook/finally"
            ]
        );
        let failures: Vec<_> = els.iter().filter(|e| e.0 == "failure").collect();
        assert_eq!(failures.len(), 3, "{xml}");
        assert_eq!(attr(failures[1], "type"), "setup_failed");
        assert_eq!(
            attr(failures[1], "message"),
            "the prompt's command `cat notes` for iteration 2 exited with status 1"
        );
        assert_eq!(attr(failures[0], "type"), "check_failed");
        assert_eq!(
            attr(failures[0], "message"),
            "the check `cargo test` after iteration 2 exited with status 101 (2 check(s) run; its output: /s/iteration-2-check)"
        );
        assert!(
            xml.contains(
                "stdout.log (its end):\nstdout.log says &lt;no&gt;\n\nstderr.log (its end):\nstderr.log says &lt;no&gt;</failure>"
            ),
            "{xml}"
        );
        // Every check is listed, the last one's directory first.
        assert!(
            xml.contains(
                "<system-out>/s/iteration-2-check\nthe check `cargo test` after iteration 1: exited with status 101 (/s/iteration-1-check)\n"
            ),
            "{xml}"
        );
        assert_eq!(attr(failures[2], "type"), "hook_failed");
        assert_eq!(
            attr(failures[2], "message"),
            "the finally hook `cleanup` exited with status 2"
        );

        // A check that passed at the end passes, whatever came before.
        s.checks[1] = step(StepKind::Check, Some(2), "cargo test", 0);
        s.hooks.truncate(2);
        let els = elements(&super::session(&s, &no_tail));
        assert!(!els.iter().any(|e| e.0 == "failure"));
        let check = els
            .iter()
            .find(|e| e.0 == "testcase" && attr(e, "name") == "check")
            .unwrap();
        assert_eq!(attr(check, "time"), "2.500", "both checks' time");
    }

    #[test]
    fn a_session_has_one_case_per_attempt() {
        let s = session(
            "fix",
            3,
            vec![
                run(1, 1, Some(Verdict::Stalled), "quiet"),
                run(1, 2, Some(Verdict::Succeeded), "done"),
                run(2, 1, Some(Verdict::Cancelled), "SIGTERM"),
            ],
        );
        let els = elements(&super::session(&s, &no_tail));
        let names: Vec<&str> = els
            .iter()
            .filter(|e| e.0 == "testcase")
            .map(|e| attr(e, "name"))
            .collect();
        assert_eq!(
            names,
            ["iteration-1", "iteration-1/attempt-2", "iteration-2"]
        );
        let suite = els.iter().find(|e| e.0 == "testsuite").unwrap();
        assert_eq!(
            [
                attr(suite, "tests"),
                attr(suite, "failures"),
                attr(suite, "skipped"),
                attr(suite, "time")
            ],
            ["3", "1", "1", "5.000"]
        );
    }

    #[test]
    fn a_batch_has_one_case_per_entry_and_per_run_of_a_session() {
        let mut one = BatchRun::new("one", Agent::Claude, Some(Verdict::Succeeded), None);
        one.session = Some(session(
            "one",
            1,
            vec![run(1, 1, Some(Verdict::Succeeded), "ok")],
        ));
        let mut loop_ = BatchRun::new("loop", Agent::Claude, Some(Verdict::TimedOut), None);
        loop_.session = Some(session(
            "loop",
            2,
            vec![
                run(1, 1, Some(Verdict::Succeeded), "ok"),
                run(2, 1, Some(Verdict::TimedOut), "out of time"),
            ],
        ));
        let never = BatchRun::new(
            "never",
            Agent::Codex,
            Some(Verdict::Cancelled),
            Some("cancelled before it started".into()),
        );
        let mut unstarted = BatchRun::new("bad", Agent::Codex, None, Some("no such agent".into()));
        // A session with no run at all (a budget used up before it).
        unstarted.session = Some(session("bad", 2, Vec::new()));
        let b = BatchReport {
            schema_version: SchemaVersion,
            batch_id: "01BATCH".into(),
            file: "/work/nightly.toml".into(),
            executor: "local".into(),
            jobs: 2,
            duration_ms: 9000,
            runs: vec![one, loop_, never, unstarted],
            succeeded: 1,
            failed: 2,
            cancelled: 1,
            never_ran: vec!["never".into(), "bad".into()],
            budgets: Vec::new(),
            otel: None,
        };
        let els = elements(&super::batch(&b, &no_tail));
        let suites: Vec<_> = els.iter().filter(|e| e.0 == "testsuite").collect();
        assert_eq!(suites.len(), 1);
        assert_eq!(attr(suites[0], "name"), "warden batch nightly");
        assert_eq!(
            [
                attr(suites[0], "tests"),
                attr(suites[0], "failures"),
                attr(suites[0], "errors"),
                attr(suites[0], "skipped"),
                attr(suites[0], "time"),
            ],
            ["5", "1", "1", "1", "9.000"]
        );
        // The earliest session start ("loop" sorts before "one" here).
        assert_eq!(attr(suites[0], "timestamp"), "2026-01-01T00:00:03.000Z");
        let names: Vec<&str> = els
            .iter()
            .filter(|e| e.0 == "testcase")
            .map(|e| attr(e, "name"))
            .collect();
        assert_eq!(
            names,
            [
                "one",
                "loop/iteration-1",
                "loop/iteration-2",
                "never",
                "bad"
            ]
        );
        let error = els.iter().find(|e| e.0 == "error").unwrap();
        assert_eq!(attr(error, "message"), "no such agent");
    }

    #[test]
    fn the_tail_is_the_last_lines_of_stderr_within_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = String::new();
        for i in 0..2000 {
            log.push_str(&format!("line {i}\n"));
        }
        std::fs::write(dir.path().join("stderr.log"), &log).unwrap();
        let tail = stderr_tail(dir.path()).unwrap();
        let lines: Vec<&str> = tail.lines().collect();
        assert_eq!(lines.len(), TAIL_LINES);
        assert_eq!(lines.first(), Some(&"line 1950"));
        assert_eq!(lines.last(), Some(&"line 1999"));

        // One long line: cut to the bound, not read whole.
        std::fs::write(dir.path().join("stderr.log"), "x".repeat(1 << 20)).unwrap();
        assert_eq!(stderr_tail(dir.path()).unwrap().len() as u64, TAIL_BYTES);

        // Empty, missing, or a FIFO the agent planted: nothing, at once.
        std::fs::write(dir.path().join("stderr.log"), "").unwrap();
        assert_eq!(stderr_tail(dir.path()), None);
        std::fs::remove_file(dir.path().join("stderr.log")).unwrap();
        assert_eq!(stderr_tail(dir.path()), None);
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            dir.path().join("stderr.log"),
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        assert_eq!(stderr_tail(dir.path()), None);
    }
}
