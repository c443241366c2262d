//! What a person (or a CI log) sees, and the `--json` event stream: the
//! [`Reporter`]s, fed by each command's one loop.
//!
//! Human output goes to stderr ([`human`]), its lines written by one
//! formatter ([`lines`], also `warden replay`'s). On a terminal: a live
//! status line, redrawn in place ([`live`]), with the agent's lines and
//! warden's notices scrolling above it. Elsewhere: plain lines, each with
//! the time since the start, and a heartbeat every 30 s that says how long
//! the agent has been quiet. Under GitHub Actions, warnings and a failed
//! verdict are workflow annotations, and a Markdown summary goes to
//! `$GITHUB_STEP_SUMMARY` ([`github`]). `--json` writes each event as one
//! JSON line on stdout ([`json`]). A batch has a view of its own, of every
//! run at once ([`batch`]).

pub(crate) mod batch;
pub(crate) mod console;
pub(crate) mod forward;
pub(crate) mod github;
mod human;
mod json;
pub(crate) mod lines;
pub(crate) mod live;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use warden_events::{Agent, Event, Tokens};
use warden_run::Update;
use warden_run::{Limits, Stamped};

use crate::settings::Resolved;

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

/// `retrying in 4.2s (rate limited, attempt 2 of 3)`: what a view says
/// while a session waits to try a run again.
pub(crate) fn retry_line(
    delay: Duration,
    because: warden_run::retry::RetryOn,
    attempt: u32,
    attempts: u32,
) -> String {
    format!(
        "retrying in {} ({}, attempt {attempt} of {attempts})",
        short(delay),
        because.words()
    )
}

/// `still running; last activity 40s ago (ended as stalled in 1m20s if it
/// stays quiet); tool Bash running for 35s`: a heartbeat off a terminal.
pub(crate) fn still_running(s: &ViewState) -> String {
    let mut msg = format!(
        "still running; last activity {} ago",
        short(s.last_activity.elapsed())
    );
    // The supervisor's own deadline (stretched while a tool with a
    // declared limit runs), not the setting.
    match s.stall_deadline {
        Some(at) => msg.push_str(&format!(
            " (ended as stalled in {} if it stays quiet)",
            short(at.saturating_duration_since(Instant::now()))
        )),
        None => {
            if let Some(t) = s.stall_timeout {
                msg.push_str(&format!(" (stall timeout {})", dur(Some(t))));
            }
        }
    }
    if let Some((name, _, since)) = &s.tool {
        msg.push_str(&format!(
            "; tool {name} running for {}",
            short(since.elapsed())
        ));
    }
    msg
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

/// A view of what happens, fed by the one loop of a command: every
/// update in order, a tick every so often, and warden's own notices.
/// The terminal, plain and GitHub Actions views ([`human`]), the `--json`
/// stream ([`json`]) and the batch view each implement it.
pub(crate) trait Reporter {
    fn update(&mut self, update: &Update);
    /// Whether it shows the output's lines (`text`, `stderr` and
    /// `thinking` events);
    /// when no view does, the run is asked to leave them out of its feed.
    fn wants_output_lines(&self) -> bool {
        true
    }
    /// Redraws what is live; says "still running" when it is time.
    fn tick(&mut self) {}
    /// A notice from warden itself (a signal received, say).
    fn notice(&mut self, msg: &str);
}

/// Every view of a run (or of a session's runs) the settings ask for.
pub(crate) struct Reporters(Vec<Box<dyn Reporter>>);

impl Reporters {
    /// `--json` lines (if asked) and the view for a person on stderr:
    /// a terminal's status line, GitHub Actions' annotations, or plain
    /// lines. `iterations`: `Some(n)` for a session of `n` runs; `pass`:
    /// what of the command's output is passed on as it is (the view then
    /// leaves it out).
    pub(crate) fn for_runs(
        settings: &Resolved,
        agent: Agent,
        iterations: Option<u32>,
        pass: forward::Passthrough,
    ) -> Self {
        let mut all: Vec<Box<dyn Reporter>> = Vec::new();
        if settings.json {
            all.push(Box::new(json::JsonLines::default()));
        }
        let github = github::GitHub::from_env();
        all.push(match github {
            _ if live_view(settings) => Box::new(human::Human::new(
                human::Tty::new(github),
                agent,
                settings,
                iterations,
                pass,
            )),
            Some(g) => Box::new(human::Human::new(
                human::GitHubLog(g),
                agent,
                settings,
                iterations,
                pass,
            )),
            None => Box::new(human::Human::new(
                human::Plain,
                agent,
                settings,
                iterations,
                pass,
            )),
        });
        Self(all)
    }
}

/// Whether a run's view is the live status line on a terminal. A job in
/// the background of its terminal gets plain lines, not a status line
/// drawn over the foreground's.
pub(crate) fn live_view(settings: &Resolved) -> bool {
    console::can_redraw() && !settings.quiet
}

impl Reporter for Reporters {
    fn wants_output_lines(&self) -> bool {
        self.0.iter().any(|r| r.wants_output_lines())
    }

    fn update(&mut self, update: &Update) {
        for r in &mut self.0 {
            r.update(update);
        }
    }

    fn tick(&mut self) {
        for r in &mut self.0 {
            r.tick();
        }
    }

    fn notice(&mut self, msg: &str) {
        for r in &mut self.0 {
            r.notice(msg);
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
