//! The one formatter of a run's events as lines for a person: the live
//! view (terminal, plain, GitHub Actions) and `warden replay` show the
//! same line for the same event.

use warden_events::{Agent, Event};
use warden_run::{Report, StepKind, StepReport, Verdict};

use super::{ms, shell_words};

/// What a line is, which decides where and whether it is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The agent's own output (what it says, prints, thinks, runs):
    /// hidden by `--quiet`.
    Agent,
    /// warden's own notice: hidden by `--quiet`.
    Info,
    /// Something the user should act on or know: always shown.
    Warn,
}

impl Kind {
    /// The line as printed where a line is plain text.
    pub(crate) fn text(self, msg: &str) -> std::borrow::Cow<'_, str> {
        match self {
            Kind::Agent => msg.into(),
            Kind::Info => format!("warden: {msg}").into(),
            Kind::Warn => format!("warden: warning: {msg}").into(),
        }
    }
}

/// The lines a person sees for `event` of a run of `agent` (the run's
/// directory named where it started), given one by one to `emit`; with
/// `quiet`, the agent's own output is not even formatted.
pub(crate) fn event_lines(
    event: &Event,
    agent: Agent,
    run_dir: &std::path::Path,
    quiet: bool,
    emit: &mut dyn FnMut(Kind, &str),
) {
    if quiet
        && matches!(
            event,
            Event::Text { .. }
                | Event::Stderr { .. }
                | Event::Thinking { .. }
                | Event::ToolStarted { .. }
                | Event::ToolFinished { .. }
        )
    {
        return;
    }
    match event {
        Event::Spawned {
            pid,
            command,
            containment,
            limits,
        } => {
            let limits = if limits.is_empty() {
                String::new()
            } else {
                format!(", limits: {}", limits.join(", "))
            };
            emit(
                Kind::Info,
                &format!(
                    "{agent} started: {} (pid {pid}, containment: {containment}{limits}); logs in {}",
                    shell_words(command),
                    run_dir.display()
                ),
            )
        }
        Event::Text { text } => {
            let tag = if agent == Agent::Exec { "out" } else { "say" };
            for l in text.lines() {
                emit(Kind::Agent, &format!("  {tag}| {l}"));
            }
        }
        Event::Stderr { text } => emit(Kind::Agent, &format!("  err| {text}")),
        // Shown as warden's own warning: the engine's, not the agent's.
        Event::EngineLine { text } => emit(Kind::Warn, &format!("container engine: {text}")),
        Event::SessionStarted {
            session_id,
            model,
            agent_version,
        } => emit(
            Kind::Info,
            &format!(
                "session {}{}{}",
                session_id.as_deref().unwrap_or("(no id)"),
                model
                    .as_ref()
                    .map(|m| format!(", model {m}"))
                    .unwrap_or_default(),
                agent_version
                    .as_ref()
                    .map(|v| format!(", {agent} {v}"))
                    .unwrap_or_default()
            ),
        ),
        Event::Thinking { text } => emit(
            Kind::Agent,
            &format!("  think| {}", text.lines().next().unwrap_or_default()),
        ),
        Event::ToolStarted {
            name,
            input,
            timeout_ms,
            ..
        } => emit(
            Kind::Agent,
            &format!(
                "  tool| {name}: {}{}",
                input.as_deref().unwrap_or(""),
                timeout_ms
                    .map(|t| format!(" (limit {})", ms(t)))
                    .unwrap_or_default()
            ),
        ),
        Event::ToolFinished {
            name,
            is_error: true,
            output,
            ..
        } => emit(
            Kind::Agent,
            &format!(
                "  tool| {name} failed: {}",
                output
                    .as_deref()
                    .and_then(|o| o.lines().next())
                    .unwrap_or("")
            ),
        ),
        Event::Retry {
            attempt,
            max_attempts,
            reason,
            ..
        } => emit(
            Kind::Warn,
            &format!(
                "the agent is retrying{}: {reason}",
                match (attempt, max_attempts) {
                    (Some(a), Some(m)) => format!(" ({a}/{m})"),
                    (Some(a), None) => format!(" (attempt {a})"),
                    _ => String::new(),
                }
            ),
        ),
        Event::Error {
            message,
            class,
            fatal,
        } => emit(
            Kind::Warn,
            &format!(
                "the agent reported {}{} error: {message}",
                if *fatal { "a fatal " } else { "an " },
                serde_json::to_value(class)
                    .ok()
                    .and_then(|v| v.as_str().map(|s| s.replace('_', " ")))
                    .unwrap_or_default()
            ),
        ),
        Event::Result { success, .. } => emit(
            Kind::Info,
            if *success {
                "the agent says it is done"
            } else {
                "the agent says it failed"
            },
        ),
        Event::UsageIgnored {
            line,
            field,
            value,
            problem,
        } => emit(
            Kind::Warn,
            &format!(
                "not counted: `{field}` {value} on line {line} of stdout.log {}",
                problem.as_words()
            ),
        ),
        Event::OversizedLine { stream, bytes } => emit(
            Kind::Warn,
            &format!(
                "a line of {bytes} bytes on {} is longer than max_line: it is in the log, not decoded",
                stream.as_str()
            ),
        ),
        Event::StallWarning {
            silent_ms,
            stall_timeout_ms,
        } => emit(
            Kind::Warn,
            &format!(
                "no activity for {}; the run is ended as stalled after {}",
                ms(*silent_ms),
                ms(*stall_timeout_ms)
            ),
        ),
        Event::BudgetWarning {
            scope,
            budget,
            limit,
            reached,
        } => emit(
            Kind::Warn,
            &warden_run::budget::warning(*scope, *budget, *limit, *reached),
        ),
        Event::CompletionSignal => emit(
            Kind::Info,
            "completion signal seen; waiting for the process to exit",
        ),
        Event::Orphan {
            pid,
            cmdline,
            held_pipe,
        } => emit(
            Kind::Info,
            &format!(
                "orphan left running by the agent: pid {pid} `{cmdline}`{}; terminating it",
                if *held_pipe {
                    ", holding its output pipe"
                } else {
                    ""
                }
            ),
        ),
        Event::Terminating { reason } => emit(Kind::Info, &format!("ending the run: {reason}")),
        Event::OutputTruncated { bytes, holders } => emit(
            Kind::Warn,
            &format!(
                "output was still held open after the drain grace; kept the {bytes} bytes read; held by: {}",
                holders
                    .iter()
                    .map(|h| format!("pid {} `{}`", h.pid, h.cmdline))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        // Shown another way (the status line, the summary), or not at all.
        _ => {}
    }
}

/// The warnings a finished run's report calls for; `shown_live`: the
/// view shows the run's output lines (not when they are passed on as they
/// are, and then none was missed).
pub(crate) fn report_warnings(report: &Report, shown_live: bool) -> Vec<String> {
    let mut out = Vec::new();
    if shown_live && report.live_events_dropped > 0 {
        out.push(format!(
            "{} events (output lines and others) were not shown live because the view could not keep up; all are in the logs and events.jsonl",
            report.live_events_dropped
        ));
    }
    if report.forced_completion {
        let hanging = report
            .hanging
            .iter()
            .map(|h| format!("pid {} `{}`", h.pid, h.cmdline))
            .collect::<Vec<_>>()
            .join(", ");
        out.push(format!(
            "the agent signalled completion but did not exit; killed what was still running: {}",
            if hanging.is_empty() {
                "nothing left"
            } else {
                &hanging
            }
        ));
    }
    out
}

/// `text` on one line: each line break (and a run of them, and the blank
/// lines between) as ` ⏎ `, none at either end. A reason can hold an
/// agent's multi-line error, and the line that says how a run ended
/// must stay one line for whoever reads the last line of warden's
/// output; the text as it was is in `run.json`.
pub(crate) fn one_line(text: &str) -> String {
    text.split([
        '\n', '\r', '\u{0b}', '\u{0c}', '\u{85}', '\u{2028}', '\u{2029}',
    ])
    .map(str::trim_end)
    .filter(|l| !l.trim_start().is_empty())
    .collect::<Vec<_>>()
    .join(" \u{23ce} ")
}

/// The one line that says how a run ended.
pub(crate) fn summary_line(report: &Report, agent: Agent) -> String {
    let verdict = report.verdict.map_or("unknown", |v| v.as_str());
    let mut line = format!(
        "{verdict} in {}: {}",
        ms(report.duration_ms),
        one_line(&report.reason)
    );
    if agent != Agent::Exec {
        let t = &report.reported.tokens;
        line.push_str(&format!(
            "; {} turn(s), {} tool call(s), tokens {} in / {} out / {} cached",
            report.reported.turns,
            report.reported.tool_calls,
            warden_events::Tokens::shown(t.input),
            warden_events::Tokens::shown(t.output),
            warden_events::Tokens::shown(t.cache_read)
        ));
        if let Some(c) = report.reported.cost_usd {
            line.push_str(&format!(", ${c:.4}"));
        }
        match report.reported.retries {
            0 => {}
            1 => line.push_str("; 1 retry"),
            n => line.push_str(&format!("; {n} retries")),
        }
    }
    if report.orphans_killed > 0 {
        line.push_str(&format!("; {} orphan(s) killed", report.orphans_killed));
    }
    match report.commits.as_deref() {
        None => line.push_str("; commits unknown"),
        Some([]) => {}
        Some(c) => line.push_str(&format!("; {} commit(s)", c.len())),
    }
    line
}

/// How much of a step's command a line shows: a command may be a whole
/// script.
const COMMAND_CHARS: usize = 80;

/// A step's command as a line shows it: its first line, shortened.
fn command_text(command: &str) -> String {
    let first = command.lines().next().unwrap_or_default();
    let cut = first.chars().count() > COMMAND_CHARS || command.trim_end().contains('\n');
    let mut text: String = first.chars().take(COMMAND_CHARS).collect();
    if cut {
        text.push('…');
    }
    text
}

/// What a check, hook or prompt command is, for people: "check `cargo
/// test` after iteration 2", "setup hook `make deps`".
pub(crate) fn step_name(kind: StepKind, iteration: Option<u32>, command: &str) -> String {
    let command = command_text(command);
    match (kind, iteration) {
        (StepKind::Check, Some(0)) => format!("check `{command}` before the first iteration"),
        (StepKind::Check, Some(n)) => format!("check `{command}` after iteration {n}"),
        (StepKind::Check, None) => format!("check `{command}`"),
        (StepKind::PromptCommand, Some(n)) => {
            format!("prompt command `{command}` for iteration {n}")
        }
        (StepKind::PromptCommand, None) => format!("prompt command `{command}`"),
        (StepKind::HostSetup, _) => format!("host setup hook `{command}` (on the host)"),
        (StepKind::Setup, _) => format!("setup hook `{command}`"),
        (StepKind::OnSuccess, _) => format!("on-success hook `{command}`"),
        (StepKind::Finally, _) => format!("finally hook `{command}`"),
        (_, _) => format!("{kind} `{command}`"),
    }
}

/// The line that says a step started, and where its output goes.
pub(crate) fn step_started_line(
    kind: StepKind,
    iteration: Option<u32>,
    command: &str,
    run_dir: &std::path::Path,
) -> String {
    format!(
        "{} started; its output goes to {}",
        step_name(kind, iteration, command),
        run_dir.display()
    )
}

/// How a step ended, with its duration: "passed in 1.2s", "exited with
/// status 1 after 3.4s", "timed out after 30s".
pub(crate) fn step_how(step: &StepReport) -> String {
    let how = step.how();
    let took = ms(step.duration_ms);
    match step.verdict {
        Some(Verdict::Succeeded) => format!("{how} in {took}"),
        // The reason of a clock says its own time.
        Some(Verdict::TimedOut | Verdict::Stalled) => how,
        _ => format!("{how} after {took}"),
    }
}

/// The line that says how a step ended, and where its output is when it
/// did not pass.
pub(crate) fn step_finished_line(step: &StepReport) -> String {
    let mut line = format!(
        "{} {}",
        step_name(step.kind, step.iteration, &step.command),
        step_how(step)
    );
    if !step.passed {
        line.push_str(&format!(
            "; its output: {} (stdout.log, stderr.log)",
            step.run_dir.display()
        ));
    }
    line
}

/// What a session's end says of its checks, hooks and merge, one line
/// each: the last check's result, each hook that did not pass (unless the
/// session's error says it), and the merge (or its conflict).
pub(crate) fn session_step_lines(s: &warden_run::SessionReport) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(last) = s.checks.last() {
        let runs = match s.checks.len() {
            1 => String::new(),
            n => format!(" (the last of {n} checks)"),
        };
        let mut line = format!(
            "{} {}{runs}",
            step_name(last.kind, last.iteration, &last.command),
            step_how(last)
        );
        if !last.passed {
            line.push_str(&format!("; its output: {}", last.run_dir.display()));
        }
        out.push(line);
    }
    // A hook the session's error names already (it says how the hook
    // ended and where its output is) is not said twice.
    let said = |h: &StepReport| {
        s.error
            .as_deref()
            .is_some_and(|e| e.contains(&h.run_dir.display().to_string()))
    };
    for hook in s.hooks.iter().filter(|h| !h.passed && !said(h)) {
        out.push(step_finished_line(hook));
    }
    if let (Some(into), Some(commit)) = (&s.merged_into, &s.merge_commit) {
        out.push(format!(
            "merged into {into} at {}",
            &commit[..commit.len().min(12)]
        ));
    }
    if !s.merge_conflicts.is_empty() {
        out.push(format!(
            "merge conflict in {}: both branches are as they were",
            s.merge_conflicts.join(", ")
        ));
    }
    out
}

/// A session's checks and hooks in the order they ran: the setup hooks,
/// then each iteration's prompt commands and its check, then the wrap-up
/// hooks (`session.json` lists the checks and the hooks apart).
pub(crate) fn steps_in_order(s: &warden_run::SessionReport) -> Vec<&StepReport> {
    let mut steps: Vec<&StepReport> = s.checks.iter().chain(&s.hooks).collect();
    steps.sort_by_key(|st| {
        let (phase, within) = match st.kind {
            StepKind::HostSetup => (0, 0),
            StepKind::Setup => (0, 1),
            StepKind::PromptCommand => (1, 0),
            StepKind::Check => (1, 1),
            StepKind::OnSuccess => (2, 0),
            StepKind::Finally => (2, 1),
            _ => (2, 2),
        };
        (phase, st.iteration.unwrap_or(0), within)
    });
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(kind: &str, iteration: Option<u32>, verdict: &str, exit: Option<i32>) -> StepReport {
        serde_json::from_value(serde_json::json!({
            "kind": kind, "iteration": iteration, "command": "cargo test",
            "passed": verdict == "succeeded", "verdict": verdict,
            "reason": "timed out after 30s", "exit_code": exit, "signal": null,
            "duration_ms": 1200, "run_id": "R", "run_dir": "/s/x",
        }))
        .unwrap()
    }

    #[test]
    fn a_multi_line_reason_is_shown_on_one_line() {
        assert_eq!(
            one_line("400 Bad Request\r\n\n  detail: no\nend\n"),
            "400 Bad Request \u{23ce}   detail: no \u{23ce} end"
        );
        assert_eq!(one_line("exited with code 1"), "exited with code 1");
        assert_eq!(one_line("a\u{2028}b"), "a \u{23ce} b");
    }

    #[test]
    fn a_step_says_what_it_is_how_it_ended_and_where_its_output_is() {
        assert_eq!(
            step_name(StepKind::Check, Some(0), "make test"),
            "check `make test` before the first iteration"
        );
        assert_eq!(
            step_name(StepKind::HostSetup, None, "npm ci"),
            "host setup hook `npm ci` (on the host)"
        );
        assert_eq!(
            step_name(StepKind::PromptCommand, Some(3), "git log"),
            "prompt command `git log` for iteration 3"
        );
        // A script shows its first line, marked as cut.
        assert_eq!(step_name(StepKind::Setup, None, "a\nb"), "setup hook `a…`");
        assert_eq!(
            step_finished_line(&step("check", Some(2), "succeeded", Some(0))),
            "check `cargo test` after iteration 2 passed in 1.2s"
        );
        assert_eq!(
            step_finished_line(&step("check", Some(2), "agent_failed", Some(101))),
            "check `cargo test` after iteration 2 exited with status 101 after 1.2s; its output: /s/x (stdout.log, stderr.log)"
        );
        // A clock's reason says its own time.
        assert_eq!(
            step_finished_line(&step("finally", None, "timed_out", None)),
            "finally hook `cargo test` timed out: its own clock (--hook-timeout) ran out after 1s 200ms; its output: /s/x (stdout.log, stderr.log)"
        );
    }

    #[test]
    fn a_session_ends_saying_its_last_check_failed_hooks_and_merge() {
        let mut s: warden_run::SessionReport = serde_json::from_value(serde_json::json!({
            "schema_version": 1, "session_id": "S", "name": "n", "session_dir": "/s",
            "workdir": "/", "worktree": null, "started_at": "t", "duration_ms": 1,
            "iterations_requested": 3, "iterations_run": 2,
            "stopped_because": "check_passed", "verdict": "succeeded",
            "runs": [], "cost_usd": null, "commits": [],
            "tokens": {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0, "reasoning": 0},
            "output": null, "error": null, "output_lost": null,
            "merged_into": "main", "merge_commit": "0123456789abcdef",
        }))
        .unwrap();
        s.checks = vec![
            step("check", Some(1), "agent_failed", Some(1)),
            step("check", Some(2), "succeeded", Some(0)),
        ];
        s.hooks = vec![
            step("finally", None, "agent_failed", Some(3)),
            step("setup", None, "succeeded", Some(0)),
        ];
        assert_eq!(
            session_step_lines(&s),
            [
                "check `cargo test` after iteration 2 passed in 1.2s (the last of 2 checks)",
                "finally hook `cargo test` exited with status 3 after 1.2s; its output: /s/x (stdout.log, stderr.log)",
                "merged into main at 0123456789ab",
            ]
        );
        let order: Vec<&str> = steps_in_order(&s)
            .iter()
            .map(|st| st.kind.as_str())
            .collect();
        assert_eq!(order, ["setup", "check", "check", "finally"]);
        // Said by the session's error already: not again.
        s.error = Some("--finally `cargo test` exited with status 3 (its output: /s/x)".into());
        assert_eq!(session_step_lines(&s).len(), 2);
        s.merged_into = None;
        s.merge_commit = None;
        s.merge_conflicts = vec!["a.rs".into(), "b.rs".into()];
        assert_eq!(
            session_step_lines(&s).last().unwrap(),
            "merge conflict in a.rs, b.rs: both branches are as they were"
        );
    }
}
