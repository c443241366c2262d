//! The view for a person, on stderr: the same lines everywhere (from
//! [`lines`]), shown on one of three surfaces. On a terminal ([`Tty`]): a
//! live status line redrawn in place, the lines scrolling above it.
//! Elsewhere ([`Plain`]): each line with the time since the start, and a
//! heartbeat that says how long the agent has been quiet. Under GitHub
//! Actions ([`GitHubLog`]): plain lines, warnings and a failed verdict as
//! workflow annotations, and a Markdown summary of the run.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use warden_events::Agent;
use warden_run::Update;
use warden_run::{Limits, Report, Stamped, StepKind, StepReport};

use super::console::important;
use super::lines::{self, Kind};
use super::{Reporter, ViewState, dur, github, live, shown_path};

/// Where a person's lines go.
pub(crate) trait Surface {
    /// Shows one line; `at` tells the time since the run started.
    fn line(&mut self, text: &str, at: Clock);
    /// Shows a warning.
    fn warn(&mut self, msg: &str, at: Clock) {
        self.line(&Kind::Warn.text(msg), at);
    }
    /// A run starts (a terminal draws its status line from now).
    fn begin_run(&mut self) {}
    /// The run's state changed: redraw what shows it live.
    fn redraw(&mut self, _state: &ViewState) {}
    /// Whether the surface says "still running" every so often (nothing
    /// shows the run live).
    fn heartbeats(&self) -> bool {
        true
    }
    /// Whether it shows the output's last line live (a status line), so
    /// it needs every line of the output, passed on or not.
    fn shows_last_line(&self) -> bool {
        false
    }
    /// The run ended: nothing live any more.
    fn end_run(&mut self) {}
    /// A check or hook runs: what shows a run live shows `text` (its
    /// name and how long it has run) instead.
    fn redraw_step(&mut self, _text: &str) {}
    /// A check, hook or prompt command ended: what the surface does with
    /// it beyond its line (an annotation when it did not pass).
    fn step_ended(&mut self, _step: &StepReport) {}
    /// The line that says how the run ended (kept even when the reader is
    /// slow).
    fn summary(&mut self, line: &str, _at: Clock) {
        important(&format!("warden: {line}"));
    }
    /// What the surface does with the verdict beyond the lines;
    /// `in_session`: the run is one of a session's (which has one
    /// summary of its own at its end).
    fn verdict(&mut self, _report: &Report, _in_session: bool) {}
}

/// A terminal: the status line, redrawn in place.
pub(crate) struct Tty {
    live: Option<live::Live>,
    /// Under GitHub Actions with a terminal (rare): the annotations and
    /// the summary still go to the run's page.
    github: Option<github::GitHub>,
}

impl Tty {
    pub(crate) fn new(github: Option<github::GitHub>) -> Self {
        Self { live: None, github }
    }
}

impl Surface for Tty {
    fn line(&mut self, text: &str, at: Clock) {
        match &self.live {
            Some(l) => l.println(text),
            None => eprintln!("[{at}] {text}"),
        }
    }

    fn begin_run(&mut self) {
        self.live = Some(live::Live::new());
    }

    fn redraw(&mut self, state: &ViewState) {
        if let Some(l) = &self.live {
            l.update(state);
        }
    }

    fn heartbeats(&self) -> bool {
        self.live.is_none()
    }

    fn shows_last_line(&self) -> bool {
        true
    }

    fn end_run(&mut self) {
        if let Some(l) = self.live.take() {
            l.clear();
        }
    }

    fn redraw_step(&mut self, text: &str) {
        if let Some(l) = &self.live {
            l.show(text);
        }
    }

    fn step_ended(&mut self, step: &StepReport) {
        if let Some(g) = &self.github {
            annotate_step(g, step);
        }
    }

    fn verdict(&mut self, report: &Report, in_session: bool) {
        if let Some(g) = &self.github {
            annotate(g, report, in_session);
        }
    }
}

/// Plain lines, each with the time since the start.
pub(crate) struct Plain;

impl Surface for Plain {
    fn line(&mut self, text: &str, at: Clock) {
        eprintln!("[{at}] {text}");
    }
}

/// A GitHub Actions log: plain lines, warnings as annotations, the
/// verdict on the run's page.
pub(crate) struct GitHubLog(pub(crate) github::GitHub);

impl Surface for GitHubLog {
    fn line(&mut self, text: &str, at: Clock) {
        eprintln!("[{at}] {text}");
    }

    fn warn(&mut self, msg: &str, _at: Clock) {
        self.0.warning(msg);
    }

    fn summary(&mut self, line: &str, at: Clock) {
        important(&format!("[{at}] warden: {line}"));
    }

    fn verdict(&mut self, report: &Report, in_session: bool) {
        annotate(&self.0, report, in_session);
    }

    fn step_ended(&mut self, step: &StepReport) {
        annotate_step(&self.0, step);
    }
}

/// A check or hook that did not pass, as an annotation that names it,
/// says how it ended and where its output is. A failed check is a
/// warning (the next iteration is told, and the session's verdict says
/// whether it was the last); a hook or prompt command that fails ends
/// the session or its success: an error.
fn annotate_step(g: &github::GitHub, step: &StepReport) {
    if step.passed {
        return;
    }
    let title = format!("warden {}", step.kind.flag().trim_start_matches('-'));
    let msg = lines::step_finished_line(step);
    match step.kind {
        StepKind::Check => g.warning_titled(&title, &msg),
        _ => g.error_titled(&title, &msg),
    }
}

/// A failed run's annotation, and a single run's step summary (a
/// session writes one for all its runs at its end).
fn annotate(g: &github::GitHub, report: &Report, in_session: bool) {
    if report.verdict != Some(warden_run::Verdict::Succeeded) {
        let verdict = report.verdict.map_or("unknown", |v| v.as_str());
        g.error(&format!("{verdict}: {}", report.reason));
    }
    if !in_session {
        g.step_summary(report);
    }
}

/// The time since a start, as a line's prefix shows it (`01:05`,
/// `1:02:03`): worked out only when a line is printed.
#[derive(Clone, Copy)]
pub(crate) struct Clock(Instant);

impl std::fmt::Display for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.0.elapsed().as_secs();
        if s >= 3600 {
            write!(f, "{}:{:02}:{:02}", s / 3600, (s % 3600) / 60, s % 60)
        } else {
            write!(f, "{:02}:{:02}", s / 60, s % 60)
        }
    }
}

/// The run being shown.
struct Current {
    state: ViewState,
    run_dir: PathBuf,
}

/// The view for a person of a run, or of each run of a session in turn.
pub(crate) struct Human<S> {
    surface: S,
    agent: Agent,
    limits: Limits,
    quiet: bool,
    heartbeat: Option<Duration>,
    last_heartbeat: Instant,
    /// `Some(n)` in a session of `n` iterations: each run says which it is.
    iterations: Option<u32>,
    started: Instant,
    current: Option<Current>,
    /// The check, hook or prompt command running now: its name and
    /// since when.
    step: Option<(String, Instant)>,
    /// The command's output passed on as it is, which the view leaves
    /// out (its `out|` and `err|` lines).
    pass: super::forward::Passthrough,
}

impl<S: Surface> Human<S> {
    pub(crate) fn new(
        surface: S,
        agent: Agent,
        settings: &crate::settings::Resolved,
        iterations: Option<u32>,
        pass: super::forward::Passthrough,
    ) -> Self {
        Self {
            pass,
            surface,
            agent,
            limits: settings.limits.clone(),
            quiet: settings.quiet,
            heartbeat: settings.heartbeat,
            last_heartbeat: Instant::now(),
            iterations,
            started: Instant::now(),
            current: None,
            step: None,
        }
    }

    fn elapsed(&self) -> Clock {
        Clock(
            self.current
                .as_ref()
                .map_or(self.started, |c| c.state.started),
        )
    }

    fn show(&mut self, kind: Kind, msg: &str) {
        let elapsed = self.elapsed();
        show_on(&mut self.surface, self.quiet, elapsed, kind, msg);
    }

    fn started(&mut self, iteration: u32, run_dir: &Path) {
        let mut state = ViewState::new(self.agent, &self.limits);
        if let Some(n) = self.iterations {
            state.iteration = Some((iteration, n));
            self.show(Kind::Info, &format!("iteration {iteration}/{n}"));
        }
        self.current = Some(Current {
            state,
            run_dir: shown_path(run_dir),
        });
        self.last_heartbeat = Instant::now();
        self.surface.begin_run();
        let l = &self.limits;
        if l.stall_timeout.is_some() && l.armed_stall_timeout().is_none() {
            let msg = format!(
                "the stall watchdog is off: its timeout ({}) is not shorter than the run timeout ({})",
                dur(l.stall_timeout),
                dur(l.timeout)
            );
            self.show(Kind::Info, &msg);
        }
    }

    fn event(&mut self, ev: &Stamped) {
        let elapsed = self.elapsed();
        let Self {
            surface,
            agent,
            quiet,
            current,
            pass,
            ..
        } = self;
        let Some(current) = current.as_mut() else {
            return;
        };
        current.state.observe(ev);
        let passed = match &ev.event {
            warden_events::Event::Text { .. } => pass.passes(super::console::Stream::Stdout),
            warden_events::Event::Stderr { .. } => pass.passes(super::console::Stream::Stderr),
            _ => false,
        };
        if passed {
            surface.redraw(&current.state);
            return;
        }
        lines::event_lines(&ev.event, *agent, &current.run_dir, *quiet, &mut |k, t| {
            show_on(surface, *quiet, elapsed, k, t);
        });
        surface.redraw(&current.state);
    }

    fn finished(&mut self, report: &Report) {
        self.surface.end_run();
        let shown_live = !(self.pass.passes(super::console::Stream::Stdout)
            && self.pass.passes(super::console::Stream::Stderr));
        for w in lines::report_warnings(report, shown_live) {
            self.show(Kind::Warn, &w);
        }
        let line = lines::summary_line(report, self.agent);
        let elapsed = self.elapsed();
        // The summary line is shown even with --quiet, and it, the error
        // and the report's path get the queue's reserve.
        self.surface.summary(&line, elapsed);
        self.surface.verdict(report, self.iterations.is_some());
        if let Some(e) = &report.error {
            important(&format!("warden: error: {e}"));
        }
        // Only a report that was written is named.
        if !self.quiet
            && report.written
            && let Some(c) = &self.current
        {
            important(&format!(
                "warden: report: {}",
                c.run_dir.join("run.json").display()
            ));
        }
        self.current = None;
    }

    fn heartbeat(&mut self) {
        let Some(every) = self.heartbeat else {
            return;
        };
        if self.quiet || self.last_heartbeat.elapsed() < every {
            return;
        }
        let msg = match (&self.current, &self.step) {
            (Some(c), _) => super::still_running(&c.state),
            (None, Some((name, since))) => {
                format!(
                    "{name} still running after {}",
                    super::short(since.elapsed())
                )
            }
            (None, None) => return,
        };
        self.last_heartbeat = Instant::now();
        self.show(Kind::Info, &msg);
    }

    fn step_started(&mut self, name: String, line: &str) {
        self.show(Kind::Info, line);
        self.step = Some((name, Instant::now()));
        self.last_heartbeat = Instant::now();
        if !self.quiet {
            self.surface.begin_run();
        }
    }

    fn step_finished(&mut self, step: &StepReport) {
        self.surface.end_run();
        self.step = None;
        // Its directory as the line at its start showed it.
        let mut shown = step.clone();
        shown.run_dir = shown_path(&step.run_dir);
        let line = lines::step_finished_line(&shown);
        // A hook that fails ends the session (or its success): said even
        // with --quiet. A failed check is the loop at work.
        let kind = match step.kind {
            _ if step.passed => Kind::Info,
            StepKind::Check => Kind::Info,
            _ => Kind::Warn,
        };
        if kind == Kind::Warn {
            // Its annotation, if any, says it on the run's page.
            let elapsed = self.elapsed();
            self.surface
                .line(&github::neutralize(&Kind::Warn.text(&line)), elapsed);
        } else {
            self.show(kind, &line);
        }
        self.surface.step_ended(step);
    }
}

/// One line on `surface`, made inert first (see `github` for why
/// always); what `--quiet` hides is not shown.
fn show_on<S: Surface>(surface: &mut S, quiet: bool, at: Clock, kind: Kind, msg: &str) {
    if quiet && kind != Kind::Warn {
        return;
    }
    match kind {
        Kind::Warn => surface.warn(&github::neutralize(msg), at),
        _ => surface.line(&github::neutralize(&kind.text(msg)), at),
    }
}

impl<S: Surface> Reporter for Human<S> {
    /// Lines passed on are not shown, nor any with `--quiet`, but for a
    /// status line's last line.
    fn wants_output_lines(&self) -> bool {
        let passed = self.pass.passes(super::console::Stream::Stdout)
            && self.pass.passes(super::console::Stream::Stderr);
        self.surface.shows_last_line() || !(passed || self.quiet)
    }

    fn update(&mut self, update: &Update) {
        match update {
            Update::Worktree { worktree: wt, .. } => {
                let what = if wt.home.is_some() {
                    "repository of its own (fetched back into the branch at the end)"
                } else {
                    "worktree"
                };
                let msg = format!(
                    "working in a new {what} {} on branch {}",
                    wt.path.display(),
                    wt.branch
                );
                self.show(Kind::Info, &msg);
            }
            Update::IterationStarted {
                iteration, run_dir, ..
            } => self.started(*iteration, run_dir),
            Update::Event { event, .. } => self.event(event),
            Update::IterationFinished { report, .. } => self.finished(report),
            Update::RetryWaiting {
                attempt,
                attempts,
                delay,
                because,
                ..
            } => {
                // Shown with --quiet too: the run failed, and warden acts.
                let msg = super::retry_line(*delay, *because, *attempt, *attempts);
                let elapsed = self.elapsed();
                self.surface
                    .line(&github::neutralize(&format!("warden: {msg}")), elapsed);
            }
            Update::StepStarted {
                kind,
                iteration,
                command,
                run_dir,
                ..
            } => {
                let name = lines::step_name(*kind, *iteration, command);
                let line =
                    lines::step_started_line(*kind, *iteration, command, &shown_path(run_dir));
                self.step_started(name, &line);
            }
            Update::StepFinished { step, .. } => self.step_finished(step),
            // Batch entries have their own view.
            _ => {}
        }
    }

    fn tick(&mut self) {
        match (&self.current, &self.step) {
            (Some(c), _) if !self.surface.heartbeats() => self.surface.redraw(&c.state),
            (None, Some((name, since))) if !self.surface.heartbeats() => {
                let text = format!(
                    "{} │ {}",
                    github::neutralize(name),
                    super::short(since.elapsed())
                );
                self.surface.redraw_step(&text);
            }
            _ => self.heartbeat(),
        }
    }

    fn notice(&mut self, msg: &str) {
        // Said even with --quiet: it is warden acting on the user's signal.
        let elapsed = self.elapsed();
        self.surface
            .line(&github::neutralize(&format!("warden: {msg}")), elapsed);
    }
}
