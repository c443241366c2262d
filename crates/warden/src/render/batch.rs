//! The view of a batch: every run at once, on one of three surfaces.
//!
//! On a terminal, a status line per running run, redrawn in place, with
//! the runs' notable lines scrolling above. Elsewhere, prefixed plain
//! lines: each run's start, tool calls, warnings and end, a heartbeat for
//! each run that has been silent in the log for the heartbeat's period,
//! and for a run that did not succeed (and was not cancelled) its reason
//! and the tail of its `stderr.log`. Under GitHub Actions, each run's
//! lines (its whole transcript, the agent's text included) are held
//! until the run ends and printed as one `::group::` that the log folds
//! under the run's end line, since runs that go at once would interleave
//! any group printed live; starts and heartbeats stay outside the groups,
//! warnings and failed runs are annotations, and the batch ends with one
//! step summary (see `github`).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use warden_events::{Agent, Event};
use warden_run::Update;
use warden_run::Verdict;
use warden_run::{BatchReport, BatchRun};

use super::console::{self, Priority, Stream};
use super::lines::{self, Kind};
use super::{Reporter, ViewState, github, live, ms};

/// Lines kept for one run's group under GitHub Actions; past this the
/// oldest go (events.jsonl has every event).
const GROUP_LINES: usize = 1000;

/// A batch entry as the view names it: its name, agent and armed stall
/// timeout.
pub(crate) type Shown = (String, Agent, Option<Duration>);

/// A run being shown.
struct Running {
    state: ViewState,
    bar: Option<ProgressBar>,
    run_dir: PathBuf,
    /// When the log last said something of this run (its heartbeat's
    /// clock).
    last_said: Instant,
    /// Under GitHub Actions: its lines, printed as one group at its end.
    group: VecDeque<String>,
    /// Lines that did not fit in `group`.
    dropped: usize,
}

/// One view for every run of a batch. Owned by the batch's loop, which
/// feeds it updates and ticks.
pub(crate) struct BatchView {
    quiet: bool,
    multi: Option<MultiProgress>,
    github: Option<github::GitHub>,
    heartbeat: Option<Duration>,
    started: Instant,
    /// Each entry, by index.
    entries: Vec<Shown>,
    runs: BTreeMap<usize, Running>,
    /// Entries whose runs are seen live.
    watched: BTreeSet<usize>,
    /// The runs run on a cluster.
    remote: bool,
}

impl BatchView {
    /// `heartbeat`: how often a silent run is said to be alive off a
    /// terminal (`None`: never).
    pub(crate) fn new(
        quiet: bool,
        entries: Vec<Shown>,
        remote: bool,
        heartbeat: Option<Duration>,
    ) -> Self {
        // A terminal that says it has no size (a pseudo-terminal nobody
        // sized) cannot hold status lines: it gets the plain lines.
        let sized = rustix::termios::tcgetwinsize(std::io::stderr())
            .is_ok_and(|w| w.ws_col > 0 && w.ws_row > 0);
        let tty = console::can_redraw() && !quiet && sized;
        Self {
            quiet,
            multi: tty.then(|| MultiProgress::with_draw_target(console::QueuedTerm::target())),
            github: github::GitHub::from_env(),
            heartbeat,
            started: Instant::now(),
            entries,
            runs: BTreeMap::new(),
            watched: BTreeSet::new(),
            remote,
        }
    }

    pub(crate) fn clear(&self) {
        if let Some(m) = &self.multi {
            let _ = m.clear();
        }
    }

    /// Whether a run's lines wait for its end, to be printed as a group.
    fn grouped(&self) -> bool {
        self.github.is_some() && self.multi.is_none()
    }

    /// A line of the batch's own, shown at once.
    pub(crate) fn line(&self, text: &str) {
        if self.quiet {
            return;
        }
        match &self.multi {
            Some(m) => {
                let _ = m.println(github::neutralize(text));
            }
            None => eprintln!("{} {text}", self.clock()),
        }
    }

    fn clock(&self) -> String {
        let s = self.started.elapsed().as_secs();
        format!("[{:02}:{:02}]", s / 60, s % 60)
    }

    fn name(&self, i: usize) -> &str {
        &self.entries[i].0
    }

    /// A line of entry `i`'s run: into its group under GitHub Actions,
    /// else shown at once (and the run's heartbeat clock starts again).
    fn say(&mut self, i: usize, text: &str) {
        if self.quiet {
            return;
        }
        let line = format!("[{}] {text}", self.name(i));
        if self.grouped()
            && let Some(run) = self.runs.get_mut(&i)
        {
            run.group.push_back(line);
            if run.group.len() > GROUP_LINES {
                run.group.pop_front();
                run.dropped += 1;
            }
            return;
        }
        self.line(&line);
        if let Some(run) = self.runs.get_mut(&i) {
            run.last_said = Instant::now();
        }
    }

    /// A warning about entry `i`'s run: an annotation under GitHub
    /// Actions (and a line of its group), else a line.
    fn warn(&mut self, i: usize, msg: &str) {
        if let Some(g) = &self.github {
            g.warning_titled(&format!("warden: {}", self.name(i)), msg);
        }
        self.say(i, &format!("warning: {msg}"));
    }

    /// What the log shows of a run's event.
    fn event(&mut self, i: usize, e: &warden_run::Stamped) {
        // Grouped, a run's lines fold away: all of them go in. Shown live,
        // only what a reader of many runs at once needs.
        let all = self.grouped();
        let Some(run) = self.runs.get_mut(&i) else {
            return;
        };
        run.state.observe(e);
        let agent = self.entries[i].1;
        let mut shown: Vec<(Kind, String)> = Vec::new();
        lines::event_lines(&e.event, agent, &run.run_dir, !all, &mut |k, t| {
            shown.push((k, t.to_string()));
        });
        if !all && let Event::ToolStarted { name, input, .. } = &e.event {
            let input: String = input.as_deref().unwrap_or("").chars().take(80).collect();
            shown.push((Kind::Agent, format!("tool {name}: {input}")));
        }
        for (kind, text) in shown {
            match kind {
                Kind::Warn => self.warn(i, &text),
                Kind::Agent => self.say(i, text.trim_start()),
                // Live, of warden's own notices only what it does to the
                // run (the start line names the run already).
                Kind::Info
                    if !all
                        && !matches!(e.event, Event::Orphan { .. } | Event::Terminating { .. }) => {
                }
                Kind::Info => self.say(i, &text),
            }
        }
    }

    fn started(&mut self, i: usize, iteration: u32, attempt: u32, run_dir: &Path) {
        let (name, agent, stall) = &self.entries[i];
        let name = name.clone();
        let mut state = ViewState::new(*agent, &warden_run::Limits::default());
        state.stall_timeout = *stall;
        if iteration > 1 {
            state.iteration = Some((iteration, 0));
        }
        let bar = self.multi.as_ref().map(|m| {
            let b = m.add(ProgressBar::new_spinner());
            b.set_style(ProgressStyle::with_template("{spinner} {msg}").expect("template"));
            // No steady tick of its own: that is a thread per bar, each
            // redrawing every bar; the view's one tick turns every spinner.
            b
        });
        // On a cluster, the entry's start ("started on the cluster") is
        // its first run's start. Each attempt after a transient failure
        // says so: else the view would show the entry starting again and
        // again.
        let start = match (iteration, attempt) {
            (1, 1) if self.remote => None,
            (1, 1) => Some(format!("[{name}] started")),
            (1, k) => Some(format!("[{name}] started (attempt {k})")),
            (n, 1) => Some(format!("[{name}] started (iteration {n})")),
            (n, k) => Some(format!("[{name}] started (iteration {n}, attempt {k})")),
        };
        if let Some(l) = start {
            self.line(&l);
        }
        self.watched.insert(i);
        self.runs.insert(
            i,
            Running {
                state,
                bar,
                run_dir: run_dir.to_path_buf(),
                last_said: Instant::now(),
                group: VecDeque::new(),
                dropped: 0,
            },
        );
    }

    /// A run of entry `i` ended: its end line, its warnings, and for a
    /// failure the tail of its stderr and an annotation.
    fn finished(&mut self, i: usize, report: &warden_run::Report) {
        for w in lines::report_warnings(report, true) {
            self.warn(i, &w);
        }
        let end = format!(
            "{} in {}: {}",
            report.verdict.map_or("unknown", |v| v.as_str()),
            ms(report.duration_ms),
            lines::one_line(&report.reason)
        );
        self.ended(i, &end, report.verdict, Some(&report.run_dir));
    }

    /// Says how a run of entry `i` ended (`end`: its verdict, duration and
    /// reason); `run_dir`: where its `stderr.log` is, if it has one.
    fn ended(&mut self, i: usize, end: &str, verdict: Option<Verdict>, run_dir: Option<&Path>) {
        let failed = !matches!(verdict, Some(Verdict::Succeeded | Verdict::Cancelled));
        // Off a terminal, what a reader needs to see why without opening
        // the run's directory.
        let mut tail = Vec::new();
        if failed
            && self.multi.is_none()
            && let Some(text) = run_dir.and_then(warden_run::junit::stderr_tail)
        {
            tail.push(format!(
                "stderr.log, last {} line(s):",
                text.lines().count()
            ));
            tail.extend(text.lines().map(|l| format!("  | {l}")));
        }
        let run = self.runs.remove(&i);
        if let Some(Running { bar: Some(bar), .. }) = &run {
            bar.finish_and_clear();
            if let Some(m) = &self.multi {
                m.remove(bar);
            }
        }
        let name = self.name(i).to_string();
        let end_line = format!("[{name}] {end}");
        match run {
            Some(run) if self.grouped() => {
                if !self.quiet {
                    self.group(&end_line, &run, &name, &tail);
                }
            }
            _ => {
                self.line(&end_line);
                for l in &tail {
                    self.line(&format!("[{name}] {l}"));
                }
            }
        }
        if failed && let Some(g) = &self.github {
            g.error_titled(&format!("warden: {name}"), end);
        }
    }

    /// A run's lines as one group of the log, under its end line.
    fn group(&self, title: &str, run: &Running, name: &str, tail: &[String]) {
        let title = github::neutralize(title).replace(github::BREAKS, " ");
        console::line(
            Stream::Stderr,
            Priority::Droppable,
            &format!("::group::{} {title}", self.clock()),
        );
        if run.dropped > 0 {
            eprintln!(
                "[{name}] ({} earlier line(s) not shown here; events.jsonl has every event)",
                run.dropped
            );
        }
        for l in &run.group {
            eprintln!("{l}");
        }
        for l in tail {
            eprintln!("[{name}] {l}");
        }
        // Kept even when the reader is slow: a lost end would fold the
        // rest of the log into this run's group.
        console::line(Stream::Stderr, Priority::Important, "::endgroup::");
    }

    /// Says "still running" of every run the log has been silent about
    /// for the heartbeat's period (off a terminal only).
    fn heartbeats(&mut self) {
        let Some(every) = self.heartbeat else {
            return;
        };
        if self.quiet || self.multi.is_some() {
            return;
        }
        let due: Vec<usize> = self
            .runs
            .iter()
            .filter(|(_, r)| r.last_said.elapsed() >= every)
            .map(|(i, _)| *i)
            .collect();
        for i in due {
            let text = super::still_running(&self.runs[&i].state);
            self.line(&format!("[{}] {text}", self.name(i)));
            if let Some(r) = self.runs.get_mut(&i) {
                r.last_said = Instant::now();
            }
        }
    }

    /// The end of the batch: under GitHub Actions, its step summary.
    pub(crate) fn done(&self, report: &BatchReport, batch_dir: &Path) {
        if let Some(g) = &self.github {
            g.append_summary(&github::batch_summary_markdown(report, batch_dir));
        }
    }
}

impl Reporter for BatchView {
    /// A run's output lines are shown in its status line on a terminal,
    /// or in its group under GitHub Actions; a log of many runs at once
    /// shows none of them.
    fn wants_output_lines(&self) -> bool {
        !self.quiet && (self.multi.is_some() || self.grouped())
    }

    fn tick(&mut self) {
        if self.multi.is_some() {
            let width = cols();
            for (i, run) in &self.runs {
                if let Some(b) = &run.bar {
                    b.set_message(live::fit(
                        &format!(
                            "[{}] {}",
                            self.entries[*i].0,
                            live::status(&run.state, true)
                        ),
                        width.saturating_sub(3),
                    ));
                    b.tick();
                }
            }
        } else {
            self.heartbeats();
        }
    }

    fn update(&mut self, update: &Update) {
        match update {
            Update::IterationStarted {
                entry: Some(i),
                iteration,
                attempt,
                run_dir,
                ..
            } => self.started(*i, *iteration, *attempt, run_dir),
            Update::Event {
                entry: Some(i),
                event,
            } => self.event(*i, event),
            Update::IterationFinished {
                entry: Some(i),
                report,
                ..
            } => self.finished(*i, report),
            Update::RetryWaiting {
                entry: Some(i),
                attempt,
                attempts,
                delay,
                because,
                ..
            } => {
                let l = super::retry_line(*delay, *because, *attempt, *attempts);
                self.line(&format!("[{}] {l}", self.name(*i)));
            }
            Update::Worktree {
                entry: Some(i),
                worktree: wt,
            } => self.line(&format!(
                "[{}] worktree {} on {}",
                self.name(*i),
                wt.path.display(),
                wt.branch
            )),
            Update::EntryStarted { entry, .. } if self.remote => {
                self.line(&format!("[{}] started on the cluster", self.name(*entry)));
            }
            Update::StepStarted {
                entry: Some(i),
                kind,
                iteration,
                command,
                run_dir,
            } => {
                let l = lines::step_started_line(*kind, *iteration, command, run_dir);
                self.line(&github::neutralize(&format!("[{}] {l}", self.name(*i))));
            }
            Update::StepFinished {
                entry: Some(i),
                step,
            } => self.step_finished(*i, step),
            Update::EntryFinished { entry, run } => self.entry_finished(*entry, run),
            // A kind of update this view does not show.
            _ => {}
        }
    }

    fn notice(&mut self, msg: &str) {
        self.line(msg);
    }
}

impl BatchView {
    /// A check or hook of entry `i` ended: its line, and when it did not
    /// pass, an annotation naming it (a warning for a check, which the
    /// next iteration is told of; an error for a hook).
    fn step_finished(&mut self, i: usize, step: &warden_run::StepReport) {
        let l = lines::step_finished_line(step);
        self.line(&github::neutralize(&format!("[{}] {l}", self.name(i))));
        if !step.passed
            && let Some(g) = &self.github
        {
            let title = format!(
                "warden: {} {}",
                self.name(i),
                step.kind.flag().trim_start_matches('-')
            );
            match step.kind {
                warden_run::StepKind::Check => g.warning_titled(&title, &l),
                _ => g.error_titled(&title, &l),
            }
        }
    }

    fn entry_finished(&mut self, entry: usize, run: &BatchRun) {
        // A run whose end was never seen (not followed, or its job ended
        // before its report was written): the entry's end is said here,
        // from its report or from the engine.
        let unseen = self.runs.contains_key(&entry) || !self.watched.contains(&entry);
        if unseen {
            let last = run.session.as_ref().and_then(|s| s.runs.last());
            let reason = last
                .map(|r| lines::one_line(&r.reason))
                .or_else(|| run.error.as_deref().map(lines::one_line))
                .unwrap_or_default();
            let job = run
                .job
                .as_ref()
                .map(|j| format!(" [Slurm job {} {}]", j.id, j.described_state()))
                .unwrap_or_default();
            let end = format!(
                "{} in {}: {reason}{job}",
                run.verdict.map_or("not run", |v| v.as_str()),
                ms(run.duration_ms),
            );
            self.ended(entry, &end, run.verdict, last.map(|r| r.run_dir.as_path()));
        }
        let name = self.name(entry).to_string();
        match (&run.session, &run.error) {
            (Some(s), _) if s.iterations_requested > 1 || s.worktree.is_some() => {
                self.line(&format!(
                    "[{name}] session done: stopped by {}",
                    s.stopped_because.as_str().replace('_', " ")
                ));
            }
            (None, Some(e)) if run.verdict.is_none() => {
                self.line(&format!("[{name}] could not start: {e}"));
            }
            _ => {}
        }
        // Its check's result, the hooks that failed, its merge; and a
        // verdict of the session's own, which no run's end said.
        if let Some(s) = &run.session {
            for l in lines::session_step_lines(s) {
                self.line(&github::neutralize(&format!("[{name}] {l}")));
            }
            // (An end not seen was said, and annotated, above.)
            if !unseen
                && let (Some(g), Some(msg)) = (&self.github, github::session_verdict_message(s))
            {
                g.error_titled(&format!("warden: {name}"), &msg);
            }
        }
    }
}

fn cols() -> usize {
    usize::from(console::terminal_size().0)
}

/// The table at a batch's end, on stderr.
pub(crate) fn print_table(r: &BatchReport) {
    let rows: Vec<[String; 6]> = r
        .runs
        .iter()
        .map(|run| {
            let s = run.session.as_ref();
            [
                run.name.clone(),
                run.verdict
                    .map_or_else(|| "not run".into(), |v| v.as_str().to_string()),
                ms(run.duration_ms),
                s.map_or("-".into(), |s| {
                    format!(
                        "{}/{}",
                        warden_events::Tokens::shown(s.tokens.input),
                        warden_events::Tokens::shown(s.tokens.output)
                    )
                }),
                s.and_then(|s| s.cost_usd)
                    .map_or("-".into(), |c| format!("${c:.4}")),
                s.map_or("-".into(), |s| {
                    warden_run::git::count_shown(s.commits.as_deref())
                }),
            ]
        })
        .collect();
    let head = [
        "run",
        "verdict",
        "duration",
        "tokens in/out",
        "cost",
        "commits",
    ];
    let mut widths: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let parts: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        eprintln!("  {}", parts.join("  ").trim_end());
    };
    eprintln!();
    line(head.to_vec());
    for row in &rows {
        line(row.iter().map(String::as_str).collect());
    }
    eprintln!(
        "\nwarden: batch {}: {} succeeded, {} failed, {} cancelled, in {}",
        r.batch_id,
        r.succeeded,
        r.failed,
        r.cancelled,
        ms(r.duration_ms)
    );
}
