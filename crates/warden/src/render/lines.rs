//! The one formatter of a run's events as lines for a person: the live
//! view (terminal, plain, GitHub Actions) and `warden replay` show the
//! same line for the same event.

use warden_events::{Agent, Event};
use warden_run::Report;

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

/// The warnings a finished run's report calls for.
pub(crate) fn report_warnings(report: &Report) -> Vec<String> {
    let mut out = Vec::new();
    if report.live_events_dropped > 0 {
        out.push(format!(
            "{} lines were not shown live because the output could not keep up; all are in the logs and events.jsonl",
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

/// The one line that says how a run ended.
pub(crate) fn summary_line(report: &Report, agent: Agent) -> String {
    let verdict = report.verdict.map_or("unknown", |v| v.as_str());
    let mut line = format!("{verdict} in {}: {}", ms(report.duration_ms), report.reason);
    if agent != Agent::Exec {
        let t = &report.reported.tokens;
        line.push_str(&format!(
            "; {} turn(s), {} tool call(s), tokens {} in / {} out / {} cached",
            report.reported.turns, report.reported.tool_calls, t.input, t.output, t.cache_read
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
