//! What a person (or a CI log) sees, and the `--json` event stream.
//!
//! Human output goes to stderr. On a terminal: a live status line, redrawn
//! in place ([`live`]), with the agent's lines and warden's notices
//! scrolling above it. Elsewhere: plain lines, each with the time since the
//! start, and a heartbeat every 30 s that says how long the agent has been
//! quiet. Under GitHub Actions, warnings and a failed verdict are workflow
//! annotations, and a Markdown summary goes to `$GITHUB_STEP_SUMMARY`
//! ([`github`]). `--json` writes each event as one JSON line on stdout.

pub(crate) mod console;
pub(crate) mod github;
pub(crate) mod live;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use warden_events::event::FeedLine;
use warden_events::{Agent, Event, Tokens};
use warden_run::{Limits, Report, Stamped};

use crate::settings::Resolved;
use console::{Priority, Stream};

/// What the view knows about the run. Activity, the stall clock, tokens
/// and the open tool call are what the supervisor decided, read from its
/// status snapshots ([`Event::Status`]): a view never re-derives them
/// from the other events (many activity lines carry no event).
#[derive(Debug, Clone)]
pub(crate) struct ViewState {
    pub agent: Agent,
    pub model: Option<String>,
    /// The run's start, as near as the view can tell: re-anchored on the
    /// first event from the event's own time.
    pub started: Instant,
    anchored: bool,
    /// The last activity the supervisor saw (the start before any).
    pub last_activity: Instant,
    pub stall_timeout: Option<Duration>,
    /// When the supervisor will end the run as stalled, if it will.
    pub stall_deadline: Option<Instant>,
    /// The tool call open now: name, input and since when.
    pub tool: Option<(String, Option<String>, Instant)>,
    pub tool_calls: u32,
    pub tokens: Tokens,
    pub cost: Option<f64>,
    pub iteration: Option<(u32, u32)>,
    pub last_text: Option<String>,
    /// Retry events so far: one per model request sent again, as the
    /// report counts them.
    pub retries: u32,
}

impl ViewState {
    pub(crate) fn new(agent: Agent, limits: &Limits) -> Self {
        let now = Instant::now();
        Self {
            agent,
            model: None,
            started: now,
            anchored: false,
            last_activity: now,
            stall_timeout: limits.armed_stall_timeout(),
            stall_deadline: None,
            tool: None,
            tool_calls: 0,
            tokens: Tokens::default(),
            cost: None,
            iteration: None,
            last_text: None,
            retries: 0,
        }
    }

    /// The instant `t_ms` after the run's start.
    fn at(&self, t_ms: u64) -> Instant {
        self.started
            .checked_add(Duration::from_millis(t_ms))
            .unwrap_or(self.started)
    }

    pub(crate) fn observe(&mut self, e: &Stamped) {
        if !self.anchored {
            self.anchored = true;
            if let Some(start) = Instant::now().checked_sub(Duration::from_millis(e.t_ms)) {
                self.started = start;
                self.last_activity = start;
            }
        }
        match &e.event {
            Event::SessionStarted { model, .. } if model.is_some() => {
                self.model.clone_from(model);
            }
            Event::Text { text } => {
                if let Some(line) = text.lines().rev().find(|l| !l.trim().is_empty()) {
                    self.last_text = Some(line.trim().to_string());
                }
            }
            Event::Status {
                last_activity_ms,
                stall_deadline_ms,
                tokens,
                cost_usd,
                tool_calls,
                retries,
                tool,
                ..
            } => {
                self.last_activity = self.at(last_activity_ms.unwrap_or(0));
                self.stall_deadline = stall_deadline_ms.map(|t| self.at(t));
                self.tokens = *tokens;
                self.cost = *cost_usd;
                self.tool_calls = *tool_calls;
                self.retries = *retries;
                self.tool = tool
                    .as_ref()
                    .map(|c| (c.name.clone(), c.input.clone(), self.at(c.since_ms)));
            }
            _ => {}
        }
    }
}

pub(crate) fn ms(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else {
        short(Duration::from_millis(ms))
    }
}

/// `850ms`, `12.3s`, `4m05s`, `1h02m`.
pub(crate) fn short(d: Duration) -> String {
    let s = d.as_secs();
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else if s < 60 {
        format!("{:.1}s", d.as_secs_f64())
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    }
}

fn dur(d: Option<Duration>) -> String {
    d.map_or("off".into(), |d| humantime::format_duration(d).to_string())
}

struct Inner {
    json: bool,
    quiet: bool,
    github: Option<github::GitHub>,
    state: ViewState,
    live: Option<live::Live>,
    last_heartbeat: Instant,
    heartbeat: Option<Duration>,
    run_dir: PathBuf,
    /// Named on each `--json` line: a session's runs share one stdout.
    run_id: String,
}

/// The view of one run, owned by the loop that feeds it events and ticks.
pub(crate) struct Renderer {
    inner: Inner,
}

impl Renderer {
    pub(crate) fn new(settings: &Resolved, agent: Agent, run_dir: &Path, run_id: &str) -> Self {
        // A job in the background of its terminal gets plain lines, not a
        // status line drawn over the foreground's.
        let tty = std::io::stderr().is_terminal() && crate::signals::in_foreground();
        let state = ViewState::new(agent, &settings.limits);
        let live = (tty && !settings.quiet).then(live::Live::new);
        Self {
            inner: Inner {
                json: settings.json,
                quiet: settings.quiet,
                github: github::GitHub::from_env(),
                state,
                live,
                last_heartbeat: Instant::now(),
                heartbeat: settings.heartbeat,
                run_dir: shown_path(run_dir),
                run_id: run_id.to_owned(),
            },
        }
    }

    fn with<R>(&mut self, f: impl FnOnce(&mut Inner) -> R) -> R {
        f(&mut self.inner)
    }

    pub(crate) fn set_iteration(&mut self, i: u32, n: u32) {
        self.with(|r| r.state.iteration = Some((i, n)));
    }

    /// Redraws the status line, or prints a heartbeat when one is due.
    pub(crate) fn tick(&mut self) {
        self.with(|r| r.tick());
    }

    pub(crate) fn started_note(&mut self, limits: &Limits) {
        if limits.stall_timeout.is_some() && limits.armed_stall_timeout().is_none() {
            let msg = format!(
                "the stall watchdog is off: its timeout ({}) is not shorter than the run timeout ({})",
                dur(limits.stall_timeout),
                dur(limits.timeout)
            );
            self.with(|r| r.info(&msg));
        }
    }

    /// A notice from warden itself (a signal received, say).
    pub(crate) fn notice(&mut self, msg: &str) {
        self.with(|r| r.line(&format!("warden: {msg}")));
    }

    pub(crate) fn event(&mut self, ev: &Stamped) {
        self.with(|r| r.event(ev));
    }

    pub(crate) fn finished(&mut self, report: &Report) {
        self.with(|r| r.finished(report));
    }
}

impl Inner {
    fn elapsed(&self) -> String {
        let s = self.state.started.elapsed().as_secs();
        if s >= 3600 {
            format!("{}:{:02}:{:02}", s / 3600, (s % 3600) / 60, s % 60)
        } else {
            format!("{:02}:{:02}", s / 60, s % 60)
        }
    }

    /// One line of output: above the status line on a terminal, with the
    /// elapsed time elsewhere.
    fn line(&self, text: &str) {
        // Always neutralized: see `github` for why not only under Actions.
        let text = github::neutralize(text);
        match &self.live {
            Some(l) => l.println(&text),
            None => eprintln!("[{}] {text}", self.elapsed()),
        }
    }

    fn info(&self, msg: &str) {
        if !self.quiet {
            self.line(&format!("warden: {msg}"));
        }
    }

    fn warn(&self, msg: &str) {
        match &self.github {
            Some(g) if self.live.is_none() => g.warning(msg),
            _ => self.line(&format!("warden: warning: {msg}")),
        }
    }

    fn tick(&mut self) {
        if let Some(l) = &self.live {
            l.update(&self.state);
            return;
        }
        match self.heartbeat {
            Some(every) if !self.quiet && self.last_heartbeat.elapsed() >= every => {}
            _ => return,
        }
        self.last_heartbeat = Instant::now();
        let quiet = short(self.state.last_activity.elapsed());
        let mut msg = format!("still running; last activity {quiet} ago");
        // The supervisor's own deadline (stretched while a tool with a
        // declared limit runs), not the setting.
        match self.state.stall_deadline {
            Some(at) => msg.push_str(&format!(
                " (ended as stalled in {} if it stays quiet)",
                short(at.saturating_duration_since(Instant::now()))
            )),
            None => {
                if let Some(s) = self.state.stall_timeout {
                    msg.push_str(&format!(" (stall timeout {})", dur(Some(s))));
                }
            }
        }
        if let Some((name, _, since)) = &self.state.tool {
            msg.push_str(&format!(
                "; tool {name} running for {}",
                short(since.elapsed())
            ));
        }
        self.info(&msg);
    }

    fn event(&mut self, ev: &Stamped) {
        if self.json
            && let Ok(mut line) = serde_json::to_vec(&FeedLine {
                run_id: Some(&self.run_id),
                stamped: ev,
            })
        {
            line.push(b'\n');
            // The last event gets the reserve: a slow reader still sees
            // how the run ended.
            let priority = match ev.event {
                Event::Finished { .. } => Priority::Important,
                _ => Priority::Droppable,
            };
            console::raw(Stream::Stdout, priority, github::json_line(line));
        }
        self.state.observe(ev);
        let agent = self.state.agent;
        match &ev.event {
            Event::Spawned {
                pid,
                command,
                containment,
            } => {
                let msg = format!(
                    "{agent} started: {} (pid {pid}, containment: {containment}); logs in {}",
                    shell_words(command),
                    self.run_dir.display()
                );
                self.info(&msg);
            }
            Event::Text { text } if !self.quiet => {
                let tag = if agent == Agent::Exec { "out" } else { "say" };
                for l in text.lines() {
                    self.line(&format!("  {tag}| {l}"));
                }
            }
            Event::Stderr { text } if !self.quiet => self.line(&format!("  err| {text}")),
            Event::Text { .. } | Event::Stderr { .. } => {}
            Event::Thinking { .. } | Event::ToolStarted { .. } | Event::ToolFinished { .. }
                if self.quiet => {}
            other => self.notice(other),
        }
        if let Some(l) = &self.live {
            l.update(&self.state);
        }
    }

    /// Agent events and warden's own, as lines for a person.
    fn notice(&self, event: &Event) {
        match event {
            Event::SessionStarted {
                session_id,
                model,
                agent_version,
            } => self.info(&format!(
                "session {}{}{}",
                session_id.as_deref().unwrap_or("(no id)"),
                model.as_ref().map(|m| format!(", model {m}")).unwrap_or_default(),
                agent_version
                    .as_ref()
                    .map(|v| format!(", {} {v}", self.state.agent))
                    .unwrap_or_default()
            )),
            Event::Thinking { text } => {
                self.line(&format!("  think| {}", text.lines().next().unwrap_or_default()));
            }
            Event::ToolStarted {
                name,
                input,
                timeout_ms,
                ..
            } => self.line(&format!(
                "  tool| {name}: {}{}",
                input.as_deref().unwrap_or(""),
                timeout_ms.map(|t| format!(" (limit {})", ms(t))).unwrap_or_default()
            )),
            Event::ToolFinished {
                name,
                is_error: true,
                output,
                ..
            } => self.line(&format!(
                "  tool| {name} failed: {}",
                output.as_deref().and_then(|o| o.lines().next()).unwrap_or("")
            )),
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
            Event::Error { message, class, fatal } => self.warn(&format!(
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
            Event::CompletionSignal => self.info("completion signal seen; waiting for the process to exit"),
            Event::Orphan {
                pid,
                cmdline,
                held_pipe,
            } => self.info(&format!(
                "orphan left running by the agent: pid {pid} `{cmdline}`{}; terminating it",
                if *held_pipe { ", holding its output pipe" } else { "" }
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

    fn finished(&mut self, report: &Report) {
        if let Some(l) = self.live.take() {
            l.clear();
        }
        if report.live_events_dropped > 0 {
            self.warn(&format!(
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
            self.warn(&format!(
                "the agent signalled completion but did not exit; killed what was still running: {}",
                if hanging.is_empty() { "nothing left" } else { &hanging }
            ));
        }
        let verdict = report.verdict.map_or("unknown", |v| v.as_str());
        let mut line = format!("{verdict} in {}: {}", ms(report.duration_ms), report.reason);
        if self.state.agent != Agent::Exec {
            let t = &report.tokens;
            line.push_str(&format!(
                "; {} turn(s), {} tool call(s), tokens {} in / {} out / {} cached",
                report.turns, report.tool_calls, t.input, t.output, t.cache_read
            ));
            if let Some(c) = report.cost_usd {
                line.push_str(&format!(", ${c:.4}"));
            }
            match report.retries {
                0 => {}
                1 => line.push_str("; 1 retry"),
                n => line.push_str(&format!("; {n} retries")),
            }
        }
        if report.orphans_killed > 0 {
            line.push_str(&format!("; {} orphan(s) killed", report.orphans_killed));
        }
        if !report.commits.is_empty() {
            line.push_str(&format!("; {} commit(s)", report.commits.len()));
        }
        // The summary line is shown even with --quiet, and it, the
        // error and the report's path get the queue's reserve.
        let important = console::important;
        match &self.github {
            Some(_) => important(&format!("[{}] warden: {line}", self.elapsed())),
            None => important(&format!("warden: {line}")),
        }
        if let Some(g) = &self.github {
            if report.verdict != Some(warden_run::Verdict::Succeeded) {
                g.error(&format!("{verdict}: {}", report.reason));
            }
            g.step_summary(report);
        }
        if let Some(e) = &report.error {
            important(&format!("warden: error: {e}"));
        }
        // Only a report that was written is named.
        if !self.quiet && report.written {
            important(&format!(
                "warden: report: {}",
                self.run_dir.join("run.json").display()
            ));
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
pub(crate) fn shell_words(args: &[String]) -> String {
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
