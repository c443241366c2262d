//! What a person (or CI log) sees, and the `--json` event stream.
//!
//! Human output goes to stderr: one line when the run starts, the agent's
//! lines as they arrive (unless `--quiet`), warnings, and one summary line
//! at the end. Under GitHub Actions, warnings are `::warning::` lines so
//! they show on the job page. `--json` writes each event as one JSON line
//! on stdout.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use warden_events::{Agent, Event};
use warden_run::{Limits, Report, Stamped};

use crate::settings::Resolved;

pub struct Renderer {
    json: bool,
    quiet: bool,
    github: bool,
    agent: Agent,
    run_dir: PathBuf,
}

fn ms(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else {
        format!("{:.1}s", ms as f64 / 1000.0)
    }
}

fn dur(d: Option<Duration>) -> String {
    d.map_or("off".into(), |d| humantime::format_duration(d).to_string())
}

impl Renderer {
    pub fn new(settings: &Resolved, agent: Agent, run_dir: &Path) -> Self {
        Self {
            json: settings.json,
            quiet: settings.quiet,
            github: std::env::var_os("GITHUB_ACTIONS").is_some_and(|v| v == "true"),
            agent,
            run_dir: shown_path(run_dir),
        }
    }

    fn info(&self, msg: &str) {
        if !self.quiet {
            eprintln!("warden: {msg}");
        }
    }

    fn warn(&self, msg: &str) {
        if self.github {
            eprintln!("::warning title=warden::{msg}");
        } else {
            eprintln!("warden: warning: {msg}");
        }
    }

    pub fn started_note(&self, limits: &Limits) {
        if limits.stall_timeout.is_some() && limits.armed_stall_timeout().is_none() {
            self.info(&format!(
                "the stall watchdog is off: its timeout ({}) is not shorter than the run timeout ({})",
                dur(limits.stall_timeout),
                dur(limits.timeout)
            ));
        }
    }

    pub fn event(&mut self, ev: &Stamped) {
        if self.json {
            let mut out = std::io::stdout().lock();
            if serde_json::to_writer(&mut out, ev).is_ok() {
                let _ = out.write_all(b"\n");
                let _ = out.flush();
            }
        }
        match &ev.event {
            Event::Spawned {
                pid,
                command,
                containment,
            } => self.info(&format!(
                "{} started: {} (pid {pid}, containment: {containment}); logs in {}",
                self.agent,
                shell_words(command),
                self.run_dir.display()
            )),
            Event::Text { text } if !self.quiet => {
                let tag = if self.agent == Agent::Exec {
                    "out"
                } else {
                    "say"
                };
                for line in text.lines() {
                    eprintln!("  {tag}| {line}");
                }
            }
            Event::Stderr { text } if !self.quiet => eprintln!("  err| {text}"),
            Event::Text { .. } | Event::Stderr { .. } => {}
            Event::Thinking { .. } | Event::ToolStarted { .. } | Event::ToolFinished { .. }
                if self.quiet => {}
            other => self.agent_event(other),
        }
    }

    /// Agent events and warden's own, as lines for a person.
    fn agent_event(&self, event: &Event) {
        match event {
            Event::SessionStarted {
                session_id,
                model,
                agent_version,
            } => self.info(&format!(
                "session {}{}{}",
                session_id.as_deref().unwrap_or("(no id)"),
                model
                    .as_ref()
                    .map(|m| format!(", model {m}"))
                    .unwrap_or_default(),
                agent_version
                    .as_ref()
                    .map(|v| format!(", {} {v}", self.agent))
                    .unwrap_or_default()
            )),
            Event::Thinking { text } => {
                let first = text.lines().next().unwrap_or_default();
                eprintln!("  think| {first}");
            }
            Event::ToolStarted {
                name,
                input,
                timeout_ms,
                ..
            } => eprintln!(
                "  tool| {name}: {}{}",
                input.as_deref().unwrap_or(""),
                timeout_ms
                    .map(|t| format!(" (limit {})", ms(t)))
                    .unwrap_or_default()
            ),
            Event::ToolFinished {
                name,
                is_error: true,
                output,
                ..
            } => eprintln!(
                "  tool| {name} failed: {}",
                output
                    .as_deref()
                    .and_then(|o| o.lines().next())
                    .unwrap_or("")
            ),
            Event::Retry {
                attempt,
                max_attempts,
                reason,
                ..
            } => self.warn(&format!(
                "the agent is retrying{}: {reason}",
                match (attempt, max_attempts) {
                    (Some(a), Some(m)) => format!(" ({a}/{m})"),
                    (Some(a), None) => format!(" (attempt {a})"),
                    _ => String::new(),
                }
            )),
            Event::Error {
                message,
                class,
                fatal,
            } => self.warn(&format!(
                "the agent reported {}{} error: {message}",
                if *fatal { "a fatal " } else { "an " },
                serde_json::to_value(class)
                    .ok()
                    .and_then(|v| v.as_str().map(|s| s.replace('_', " ")))
                    .unwrap_or_default()
            )),
            Event::Result { success, .. } => self.info(if *success {
                "the agent says it is done"
            } else {
                "the agent says it failed"
            }),
            _ => self.warden_event(event),
        }
    }

    fn warden_event(&self, event: &Event) {
        match event {
            Event::OversizedLine { stream, bytes } => self.warn(&format!(
                "a line of {bytes} bytes on {} is longer than max_line: it is in the log, not decoded",
                stream.as_str()
            )),
            Event::StallWarning {
                silent_ms,
                stall_timeout_ms,
            } => self.warn(&format!(
                "no activity for {}; the run is ended as stalled after {}",
                ms(*silent_ms),
                ms(*stall_timeout_ms)
            )),
            Event::CompletionSignal => {
                self.info("completion signal seen; waiting for the process to exit")
            }
            Event::Orphan {
                pid,
                cmdline,
                held_pipe,
            } => self.info(&format!(
                "orphan left running by the agent: pid {pid} `{cmdline}`{}; terminating it",
                if *held_pipe {
                    ", holding its output pipe"
                } else {
                    ""
                }
            )),
            Event::Terminating { reason } => self.info(&format!("ending the run: {reason}")),
            Event::OutputTruncated { bytes, holders } => self.warn(&format!(
                "output was still held open after the drain grace; kept the {bytes} bytes read; held by: {}",
                holders
                    .iter()
                    .map(|h| format!("pid {} `{}`", h.pid, h.cmdline))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            _ => {}
        }
    }

    pub fn finished(&self, report: &Report) {
        if report.forced_completion {
            let hanging = report
                .hanging
                .iter()
                .map(|h| format!("pid {} `{}`", h.pid, h.cmdline))
                .collect::<Vec<_>>()
                .join(", ");
            self.warn(&format!(
                "the agent signalled completion but did not exit; killed what was still running: {}",
                if hanging.is_empty() { "nothing left" } else { &hanging }
            ));
        }
        if report.live_events_dropped > 0 {
            self.warn(&format!(
                "{} lines were not shown live because the output could not keep up; all are in the logs and events.jsonl",
                report.live_events_dropped
            ));
        }
        let verdict = report.verdict.map_or("unknown", |v| v.as_str());
        let mut line = format!("{verdict} in {}: {}", ms(report.duration_ms), report.reason);
        if self.agent != Agent::Exec {
            let t = &report.tokens;
            line.push_str(&format!(
                "; {} turn(s), {} tool call(s), tokens {} in / {} out / {} cached",
                report.turns, report.tool_calls, t.input, t.output, t.cache_read
            ));
            if let Some(c) = report.cost_usd {
                line.push_str(&format!(", ${c:.4}"));
            }
        }
        if report.orphans_killed > 0 {
            line.push_str(&format!("; {} orphan(s) killed", report.orphans_killed));
        }
        eprintln!("warden: {line}");
        if let Some(e) = &report.error {
            eprintln!("warden: error: {e}");
        }
        if !self.quiet {
            eprintln!(
                "warden: report: {}",
                self.run_dir.join("run.json").display()
            );
        }
    }
}

/// The path relative to the current directory when it is inside it.
fn shown_path(p: &Path) -> PathBuf {
    std::env::current_dir()
        .ok()
        .and_then(|cwd| p.strip_prefix(cwd).ok().map(Path::to_path_buf))
        .unwrap_or_else(|| p.to_path_buf())
}

/// A command line as a person would type it.
fn shell_words(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
