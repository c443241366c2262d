//! The supervisor: one run, one task, one select loop.
//!
//! The task owns every piece of the run's state and waits on all of its
//! inputs at once: the next chunk of stdout, the next chunk of stderr, the
//! shim's reports (the agent's exit, "nothing left"), the next deadline
//! from [`crate::clocks`], and a control request (cancel, kill). Nothing is
//! shared between threads, so "stop" and "fire" cannot race.
//!
//! The run's phase is a value ([`phase::Phase`]), whose variants carry
//! what only exists in them (the completion window's last line, the exit
//! status, when SIGTERM went out and why). Every input the loop receives
//! (a line, the agent's terminal event, the shim's report of the exit, a
//! deadline, a cancel) goes through one pure function,
//! [`phase::Phase::on`], which returns the next phase and the actions to
//! perform (send a signal, say why the run ends, cut the output); the loop
//! performs them (`Supervisor::step`) and asks [`crate::clocks`] for the
//! deadline the new phase waits on. See [`phase`] for the diagram.
//!
//! What the supervisor decides about activity, the stall clock, tokens and
//! the open tool call goes into the event stream as `status` snapshots
//! (`status`), so that no view has to re-derive it.
//!
//! Invariants:
//! - every byte read is written to the tee before it is decoded;
//! - the run finalizes only when the agent's exit is known (or it was
//!   SIGKILLed and the wait for it ran out), its output is closed or
//!   abandoned, and no process of the run is left (or all were SIGKILLed);
//! - every path ends in `Supervisor::finish`, which writes `run.json`.

use std::collections::BTreeMap;
use std::future::Future;
use std::ops::Range;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::mpsc::{Sender, UnboundedReceiver};
use warden_events::event::Stamped;
use warden_events::{Agent, Event, Holder, LineKind, SignalMatcher, Stream, Summary};
use warden_process::{RunTree, ShimMessage, Signal};

use crate::artifacts::RunDir;

pub(crate) mod phase;
mod report;
mod status;
use crate::clocks::{Clock, ClockState};
use crate::defaults;
use crate::limits::Limits;
use crate::live::LiveFeed;
use crate::pipe::{Line, Pipe, Reader, read};
use crate::report::{Orphan, Report, StallExtension, Truncation};
use crate::verdict::Cause;
use phase::{Action, Exit, Graces, Input, Phase};

/// A request to the running supervisor.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// End the run gracefully (SIGTERM, grace, SIGKILL): `cancelled`.
    Cancel,
    /// End it now (SIGKILL).
    Kill,
}

/// What the supervisor is started with.
pub(crate) struct Setup {
    pub run_id: String,
    pub agent: Agent,
    pub command: Vec<String>,
    pub cwd: PathBuf,
    pub limits: Limits,
    pub dir: RunDir,
    pub started: Instant,
    pub started_at: SystemTime,
    /// Secret values to hide in events, the report and the terminal.
    pub redactor: warden_events::Redactor,
    pub sandbox: warden_sandbox::Sandbox,
    /// What the sandbox adds to the containment (`pid_namespace`).
    pub containment_extra: Option<&'static str>,
    /// Removes what the sandbox left (a container); run when warden ends
    /// the run, and at the end of every run.
    pub on_kill: Option<Vec<std::ffi::OsString>>,
    /// In a git work tree: where, and the commit HEAD was at the start.
    pub git: Option<GitStart>,
    /// `--output-tag`: the structured output to take from the final text.
    pub output: Option<OutputSpec>,
    /// What the agent's set-up refers to that does not reach it (see
    /// [`crate::report::Report::env_dropped`]).
    pub env_dropped: Vec<String>,
    /// The budgets the run shares with the runs before it (its session's,
    /// its batch's), with what those spent.
    pub budgets: Vec<crate::budget::SharedBudget>,
    /// What the earlier attempts at this step spent (`RunSpec`'s).
    pub run_spent_before: crate::budget::Spent,
    /// The resumed session's running total of tokens (`RunSpec`'s).
    pub usage_baseline: warden_events::Tokens,
    /// A batch's budget held with the runs running beside this one.
    pub pool: Option<std::sync::Arc<crate::budget::BudgetPool>>,
    /// OpenTelemetry export: the exporter and the run span's ids.
    pub telemetry: Option<crate::RunTelemetry>,
}

/// Where a run's commits are collected from.
#[derive(Debug, Clone)]
pub(crate) struct GitStart {
    pub dir: PathBuf,
    pub base: Option<String>,
}

/// The structured output a run must produce.
pub(crate) struct OutputSpec {
    pub tag: String,
    pub schema: Option<crate::output::Schema>,
}

pub(crate) struct Supervisor {
    setup: Setup,
    live: LiveFeed,
    clocks: ClockState,
    signal: SignalMatcher,
    event_counts: BTreeMap<&'static str, u64>,
    first_activity: Option<Instant>,
    longest_silence: Duration,
    activity_lines: u64,
    stall_warnings: u32,
    /// Where the run is, with the data only that phase has (the exit
    /// status and the cause among them, once known).
    phase: Phase,
    /// When the completion signal came (for the report: the phase moves on).
    completion_seen: Option<Instant>,
    /// The shim said no process of the run is left.
    empty: bool,
    /// The shim's channel is open (its reports can still come).
    shim_open: bool,
    orphans: Vec<Orphan>,
    hanging: Vec<Holder>,
    truncated: Option<Truncation>,
    pid: Option<i32>,
    containment: Option<String>,
    errors: Vec<String>,
    /// The first failure to keep the output (see `Report::output_lost`).
    output_lost: Option<String>,
    spawn_error: Option<String>,
    stdout_bytes: u64,
    stderr_bytes: u64,
    /// What the agent's decoder learned (kept current for the report),
    /// with the retries its stderr announced added.
    summary: Summary,
    /// Retries the agent announced on stderr.
    stderr_retries: u32,
    /// When the last terminal event came.
    terminal_seen: Option<Instant>,
    /// How many terminal events the supervisor has acted on.
    terminal_events: u32,
    stall_extensions: Vec<StallExtension>,
    sandbox_kill_started: bool,
    commits: Option<Vec<crate::git::Commit>>,
    branch: Option<String>,
    output: Option<serde_json::Value>,
    /// The last text of an `exec` run, for `--output-tag` (bounded).
    recent_text: String,
    /// Processes the sandbox runs next to the agent (bwrap's init), as
    /// seen so far: never the agent's orphans, also once they are gone.
    sandbox_helpers: Vec<i32>,
    /// Processes found outside the run's cgroup (they moved themselves):
    /// killed all the same, as descendants of the shim, and named.
    escaped: Vec<String>,
    /// The processes still there when the wait after SIGKILL ran out.
    final_left: Vec<(i32, String)>,
    /// The snapshots of what the supervisor decided (see `status`).
    status: status::StatusFeed,
    /// Plain lines not yet written to `events.jsonl` (see `emit_plain`).
    pending_lines: Option<PendingLines>,
    /// Whether a write to `stdout.log` / `stderr.log` failed: from then on
    /// that stream's lines are copied into `events.jsonl` again, since
    /// the log no longer holds them.
    tee_failed: [bool; 2],
    /// The resource limits in force and, at the end, what happened at
    /// them (see [`crate::resources`]).
    resources: Option<crate::report::ResourcesReport>,
    /// The budgets the run enforces (its own and those it shares).
    budget: crate::budget::Watch,
    /// The first budget exceeded, as it stood then.
    budget_hit: Option<crate::budget::BudgetLine>,
    /// What the run had spent at the last look at its budgets.
    budget_seen: Option<crate::budget::Spent>,
    /// The run's spans as its events make them (OpenTelemetry export on).
    spans: Option<crate::telemetry::RunSpans>,
}

/// Consecutive plain lines of one stream, to be written as one `lines`
/// event that points at their bytes in the log.
struct PendingLines {
    stream: Stream,
    t_ms: u64,
    at: Range<u64>,
    lines: u64,
}

/// How much of an `exec` run's last output is kept for `--output-tag`.
const RECENT_TEXT: usize = 1 << 20;

/// A command with no stdin and its output discarded.
fn quiet(cmd: &[std::ffi::OsString]) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(&cmd[0]);
    c.args(&cmd[1..])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    c
}

impl Supervisor {
    pub(crate) fn new(setup: Setup, events: Option<Sender<Stamped>>) -> Self {
        let l = &setup.limits;
        let clocks = ClockState {
            started: Some(setup.started),
            timeout: l.timeout,
            startup_timeout: l.startup_timeout,
            stall_timeout: l.armed_stall_timeout(),
            completion_timeout: l.completion_timeout,
            fatal_error_grace: l.fatal_error_grace(),
            kill_grace: l.kill_grace,
            drain_grace: l.drain_grace,
            final_kill_wait: defaults::FINAL_KILL_WAIT,
            ..ClockState::default()
        };
        let signal = SignalMatcher::new(&l.completion_signal);
        let pooled = setup
            .pool
            .as_ref()
            .map(|p| (p.budget(), p.others(&setup.run_id)));
        let budget =
            crate::budget::Watch::new(&l.budget, setup.run_spent_before, &setup.budgets, pooled);
        let spans = setup
            .telemetry
            .as_ref()
            .filter(|t| t.exporter.traces())
            .map(|t| crate::telemetry::RunSpans::new(t.ids, setup.agent, setup.started_at));
        Self {
            setup,
            live: LiveFeed::new(events),
            clocks,
            signal,
            event_counts: BTreeMap::new(),
            first_activity: None,
            longest_silence: Duration::ZERO,
            activity_lines: 0,
            stall_warnings: 0,
            phase: Phase::Starting,
            completion_seen: None,
            empty: false,
            shim_open: true,
            orphans: Vec::new(),
            hanging: Vec::new(),
            truncated: None,
            pid: None,
            containment: None,
            errors: Vec::new(),
            output_lost: None,
            spawn_error: None,
            stdout_bytes: 0,
            stderr_bytes: 0,
            summary: Summary::default(),
            stderr_retries: 0,
            terminal_seen: None,
            terminal_events: 0,
            stall_extensions: Vec::new(),
            sandbox_kill_started: false,
            commits: Some(Vec::new()),
            branch: None,
            output: None,
            recent_text: String::new(),
            sandbox_helpers: Vec::new(),
            escaped: Vec::new(),
            final_left: Vec::new(),
            status: status::StatusFeed::default(),
            pending_lines: None,
            tee_failed: [false; 2],
            resources: None,
            budget,
            budget_hit: None,
            budget_seen: None,
            spans,
        }
    }

    fn ms(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.setup.started).as_millis() as u64
    }

    fn emit(&mut self, mut event: Event) {
        // Masked before it is cut: a secret across the cut would otherwise
        // keep its first bytes.
        if !self.setup.redactor.is_empty() {
            let r = &self.setup.redactor;
            event.for_each_string(&mut |s| r.redact_in_place(s));
        }
        // A line can be megabytes; the event carries its start, the log all.
        event.cap_text(defaults::EVENT_TEXT);
        *self.event_counts.entry(event.kind()).or_default() += 1;
        let stamped = Stamped {
            schema_version: warden_events::SchemaVersion,
            t_ms: self.ms(Instant::now()),
            event,
        };
        self.write_pending_lines();
        self.write_event(&stamped);
        self.status.observe(&stamped);
        if let Some(s) = &mut self.spans {
            s.observe(&stamped);
        }
        self.live.deliver(stamped);
    }

    fn write_event(&mut self, stamped: &Stamped) {
        if let Err(e) = self.setup.dir.event(stamped) {
            self.note_lost(format!("could not write events.jsonl: {e}"));
        }
    }

    /// A plain output line of an `exec` run (non-blank; `raw` is its
    /// bytes, at `at` in the log): the live feed gets its `text` or
    /// `stderr` event as any other line, but `events.jsonl` only the place
    /// of its bytes in the log, which already holds them. The text is made
    /// only when something needs it: the live feed has room for it (a full
    /// feed drops line events anyway), `--output-tag` reads it, or it must
    /// be checked. A line the redactor would change is not plain (its
    /// masked text is written as an event), and neither is any line once
    /// its log could not be written.
    fn on_plain_line(&mut self, stream: Stream, raw: &[u8], at: Range<u64>, now: Instant) {
        let room = self.live.line_has_room();
        let recent = stream == Stream::Stdout && self.setup.output.is_some();
        let tee_failed = self.tee_failed[stream as usize];
        if !room && !recent && !tee_failed && self.setup.redactor.is_empty() {
            self.extend_pending_lines(stream, at, 1, now);
            return;
        }
        let text = warden_events::exec::text(raw);
        if recent {
            self.keep_recent_text(&text);
        }
        let mut event = match stream {
            Stream::Stdout => Event::Text { text },
            Stream::Stderr => Event::Stderr { text },
        };
        let mut masked = false;
        if !self.setup.redactor.is_empty() {
            let r = &self.setup.redactor;
            event.for_each_string(&mut |s| {
                if let std::borrow::Cow::Owned(m) = r.redact(s) {
                    *s = m;
                    masked = true;
                }
            });
        }
        event.cap_text(defaults::EVENT_TEXT);
        let t_ms = self.ms(now);
        if masked || tee_failed {
            *self.event_counts.entry(event.kind()).or_default() += 1;
            self.write_pending_lines();
            self.write_event(&Stamped {
                schema_version: warden_events::SchemaVersion,
                t_ms,
                event: event.clone(),
            });
        } else {
            self.extend_pending_lines(stream, at, 1, now);
        }
        if room {
            self.live.deliver(Stamped {
                schema_version: warden_events::SchemaVersion,
                t_ms,
                event,
            });
        }
    }

    /// Whether an `exec` run's lines on `stream` need no text until the
    /// next turn of the loop: the live feed takes none now, and neither
    /// the redactor, `--output-tag` nor a failed log needs to see them.
    /// Then a read's lines are taken as one run (`on_plain_run`).
    fn wants_no_line_text(&mut self, stream: Stream) -> bool {
        self.setup.agent == Agent::Exec
            && self.setup.redactor.is_empty()
            && !self.tee_failed[stream as usize]
            && !(stream == Stream::Stdout && self.setup.output.is_some())
            && self.live.takes_no_lines()
    }

    /// `lines` non-blank plain lines (and blank ones) at `at`, read at
    /// `now`, none of whose text is needed: what `on_line` and
    /// `on_plain_line` do for each, done once.
    fn on_plain_run(&mut self, stream: Stream, at: Range<u64>, lines: u64, now: Instant) {
        self.advance_quietly(
            Input::Line {
                activity: lines > 0,
            },
            now,
        );
        if lines > 0 {
            self.on_activity(now);
            self.activity_lines += lines - 1;
            self.live.skip_lines(lines);
        }
        self.extend_pending_lines(stream, at, lines, now);
    }

    /// Keeps the end of an `exec` run's text for `--output-tag`.
    fn keep_recent_text(&mut self, text: &str) {
        self.recent_text.push_str(text);
        self.recent_text.push('\n');
        let excess = self.recent_text.len().saturating_sub(RECENT_TEXT);
        if excess > 0 {
            let cut = (excess..self.recent_text.len())
                .find(|i| self.recent_text.is_char_boundary(*i))
                .unwrap_or(self.recent_text.len());
            self.recent_text.drain(..cut);
        }
    }

    /// Adds `lines` plain lines at `at` to the pending `lines` event, or
    /// starts a new one where they do not follow it. A blank line adds
    /// none but keeps the range whole.
    fn extend_pending_lines(&mut self, stream: Stream, at: Range<u64>, lines: u64, now: Instant) {
        if let Some(p) = &mut self.pending_lines
            && p.stream == stream
            && p.at.end == at.start
        {
            p.at.end = at.end;
            p.lines += lines;
            return;
        }
        if lines == 0 {
            return;
        }
        self.write_pending_lines();
        self.pending_lines = Some(PendingLines {
            stream,
            t_ms: self.ms(now),
            at,
            lines,
        });
    }

    /// Writes the pending `lines` event, if any, and counts its lines as
    /// the `text` or `stderr` events they stand for.
    fn write_pending_lines(&mut self) {
        if let Some(p) = self.pending_lines.take() {
            let kind = match p.stream {
                Stream::Stdout => "text",
                Stream::Stderr => "stderr",
            };
            *self.event_counts.entry(kind).or_default() += p.lines;
            self.write_event(&Stamped {
                schema_version: warden_events::SchemaVersion,
                t_ms: p.t_ms,
                event: Event::Lines {
                    stream: p.stream,
                    offset: p.at.start,
                    bytes: p.at.end - p.at.start,
                    lines: p.lines,
                },
            });
        }
    }

    fn note_error(&mut self, e: String) {
        if !self.errors.contains(&e) {
            self.errors.push(e);
        }
    }

    /// The graces the phases' transitions need.
    fn graces(&self) -> Graces {
        Graces {
            kill: self.clocks.kill_grace,
            drain: self.clocks.drain_grace,
        }
    }

    /// Moves the run to its next phase for `input` and performs what the
    /// transition asks for.
    fn step(&mut self, tree: &RunTree, out: &mut Pipe, err: &mut Pipe, input: Input) {
        let now = Instant::now();
        let (phase, actions) = self.phase.on(input, now, self.graces());
        self.phase = phase;
        for action in actions {
            match action {
                Action::Announce(cause) => {
                    let reason = match (cause, &self.budget_hit) {
                        (Cause::BudgetExceeded, Some(hit)) => hit.exceeded(),
                        _ => cause_reason(cause).into(),
                    };
                    self.emit(Event::Terminating { reason });
                }
                Action::SandboxKill => self.start_sandbox_kill(),
                Action::Term => {
                    self.signal_all(tree, Signal::Term);
                }
                Action::KillAll => self.kill_rest(tree),
                Action::Reaped { exit, orphans } => self.on_reaped(tree, exit, orphans),
                Action::ShimLost => {
                    self.note_error("the run's shim exited before the agent did".into());
                }
                Action::CutOutput => self.cut_output(tree, out, err, now),
                Action::GiveUp => self.give_up(tree, out, err, now),
            }
        }
    }

    /// Moves the run to its next phase for an input whose transitions ask
    /// for nothing to be done (a line, the agent's own word that it is done).
    fn advance_quietly(&mut self, input: Input, now: Instant) {
        let (phase, actions) = self.phase.on(input, now, self.graces());
        debug_assert!(actions.is_empty(), "{input:?} asked for {actions:?}");
        self.phase = phase;
    }

    /// Supervises `tree` to the end and returns the final report.
    pub(crate) async fn run(
        mut self,
        tree: RunTree,
        mut control: UnboundedReceiver<Control>,
    ) -> Report {
        let mut tree = tree;
        self.pid = Some(tree.agent_pid());
        let containment = match self.setup.containment_extra {
            Some(extra) => format!("{}+{extra}", tree.containment().as_str()),
            None => tree.containment().as_str().to_string(),
        };
        self.containment = Some(containment.clone());
        self.resources = crate::resources::report(
            &self.setup.limits.resources,
            self.setup.sandbox,
            tree.limits_applied(),
        );
        self.emit(Event::Spawned {
            pid: tree.agent_pid(),
            command: self.setup.command.clone(),
            containment,
            limits: crate::resources::described(self.resources.as_ref()),
        });
        let initial = self.report(None, "running".into());
        if let Err(e) = self.setup.dir.write_report(&initial) {
            self.note_lost(format!("could not write run.json: {e}"));
        }
        self.flush_events();

        let max_line = self.setup.limits.max_line;
        let agent = self.setup.agent;
        let mut out = Pipe::new(
            Stream::Stdout,
            agent,
            tree.stdout.take().map(|r| Box::pin(r) as Reader),
            max_line,
        );
        out.decoder.set_usage_baseline(self.setup.usage_baseline);
        let mut err = Pipe::new(
            Stream::Stderr,
            agent,
            tree.stderr.take().map(|r| Box::pin(r) as Reader),
            max_line,
        );
        let mut control_open = true;
        // Woken when a run beside this one spends against the batch's
        // budget.
        let mut pool = self.setup.pool.as_ref().map(|p| p.subscribe());

        loop {
            let left = Input::Left {
                output_open: out.open() || err.open(),
                tree_empty: self.empty,
                shim_open: self.shim_open,
            };
            self.advance_quietly(left, Instant::now());
            if self.phase.is_finalized() {
                break;
            }
            let next = self.clocks.next(&self.phase);
            // A status snapshot may be due before the next clock.
            let wake = match (next.map(|(at, _)| at), self.status.due(Instant::now())) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let sleep = async {
                match wake {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            // Not biased: a flooding agent must not starve the clocks or a
            // cancel. The race the other way (a deadline winning over an
            // exit already reported) is settled in `on_clock`.
            tokio::select! {
                r = read(&mut out.reader, &mut out.buf) => self.on_read(&mut out, r),
                r = read(&mut err.reader, &mut err.buf) => self.on_read(&mut err, r),
                m = tree.next_message(), if self.shim_open => {
                    self.on_message(&tree, &mut out, &mut err, m);
                }
                c = control.recv(), if control_open => match c {
                    Some(c) => self.on_control(&tree, &mut out, &mut err, c),
                    None => control_open = false,
                },
                changed = pool_changed(&mut pool) => match changed {
                    // Another run's spending ends only a run still at
                    // work: one that is done has spent what it spent.
                    true if matches!(self.phase, Phase::Starting | Phase::Running) => {
                        self.check_budget();
                    }
                    true => {}
                    false => pool = None,
                },
                () = sleep => {
                    if let Some((_, clock)) = next.filter(|(at, _)| *at <= Instant::now()) {
                        // An exit reported in the same instant wins: the
                        // agent ended by itself before the clock could act.
                        if self.shim_open && self.phase.exit().is_none() {
                            let ready = {
                                let mut message = std::pin::pin!(tree.next_message());
                                let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
                                match message.as_mut().poll(&mut cx) {
                                    std::task::Poll::Ready(m) => Some(m),
                                    std::task::Poll::Pending => None,
                                }
                            };
                            if let Some(m) = ready {
                                self.on_message(&tree, &mut out, &mut err, m);
                            }
                        }
                        self.on_clock(&tree, &mut out, &mut err, clock);
                    }
                }
            }
            // A budget exceeded ends the run once it is working (again:
            // an agent that said it was done and went on).
            if self.budget_hit.is_some() && matches!(self.phase, Phase::Starting | Phase::Running) {
                self.step(&tree, &mut out, &mut err, Input::BudgetExceeded);
            }
            self.status_tick(Instant::now(), false);
            self.flush_events();
            self.live.flush();
        }
        self.status_tick(Instant::now(), true);
        // Whatever is still alive (a process that ignores SIGTERM and left
        // the pipes alone, say) is killed now; the shim makes sure of it.
        if !self.empty {
            self.kill_rest(&tree);
        }
        self.remove_sandbox_leftovers().await;
        let swept = tree.close().await;
        crate::resources::count(&mut self.resources, tree.resource_events());
        self.after_close(swept);
        self.collect_commits(&mut control).await;
        self.finish().await
    }

    fn on_read(&mut self, pipe: &mut Pipe, r: std::io::Result<usize>) {
        let n = match r {
            Ok(n) => n,
            Err(e) => {
                self.note_error(format!("reading the agent's {}: {e}", pipe.stream.as_str()));
                0
            }
        };
        let now = Instant::now();
        if n == 0 {
            pipe.close(|line| self.on_line(line, now));
            self.after_lines(pipe, now);
            return;
        }
        pipe.bytes += n as u64;
        let chunk = &pipe.buf[..n];
        let tee = match pipe.stream {
            Stream::Stdout => {
                self.stdout_bytes += n as u64;
                &mut self.setup.dir.stdout
            }
            Stream::Stderr => {
                self.stderr_bytes += n as u64;
                &mut self.setup.dir.stderr
            }
        };
        if let Err(e) = std::io::Write::write_all(tee, chunk) {
            self.tee_failed[pipe.stream as usize] = true;
            let name = format!("{}.log", pipe.stream.as_str());
            self.note_lost(format!("could not write {name}: {e}"));
        }
        // For `exec` the signal is matched on the raw stream (so it is found
        // even without a newline); for agents, on their decoded text.
        if pipe.stream == Stream::Stdout && !self.setup.agent.is_json() && self.signal.push(chunk) {
            self.on_completion_signal(now);
        }
        if self.wants_no_line_text(pipe.stream) {
            if let Some((at, lines)) = pipe.decode_counting(n, |line| self.on_line(line, now)) {
                self.on_plain_run(pipe.stream, at, lines, now);
            }
        } else {
            pipe.decode(n, |line| self.on_line(line, now));
        }
        pipe.after_read(n);
        self.after_lines(pipe, now);
    }

    fn on_line(&mut self, line: Line<'_>, now: Instant) {
        let Line {
            stream,
            kind,
            at,
            events,
            plain,
        } = line;
        if kind != LineKind::EndOfStream {
            let activity = matches!(kind, LineKind::WellFormed | LineKind::Oversized { .. });
            self.advance_quietly(Input::Line { activity }, now);
        }
        match kind {
            LineKind::WellFormed => self.on_activity(now),
            LineKind::Oversized { len } => {
                self.on_activity(now);
                self.emit(Event::OversizedLine { stream, bytes: len });
            }
            LineKind::Malformed | LineKind::EndOfStream => {}
        }
        // `exec` writes plain lines (see `Pipe`): a blank one (no event)
        // between two others is still part of their range in the log.
        if let Some(raw) = plain {
            self.on_plain_line(stream, raw, at, now);
            return;
        }
        if self.setup.agent == Agent::Exec && kind == LineKind::Malformed {
            self.extend_pending_lines(stream, at, 0, now);
            return;
        }
        for event in events.drain(..) {
            let event = match (stream, event) {
                (Stream::Stderr, Event::Text { text }) => Event::Stderr { text },
                (Stream::Stdout, Event::Text { text }) if !self.setup.agent.is_json() => {
                    if self.setup.output.is_some() {
                        self.keep_recent_text(&text);
                    }
                    Event::Text { text }
                }
                (Stream::Stdout, Event::Text { text }) if self.setup.agent.is_json() => {
                    if self.signal.push(text.as_bytes()) {
                        self.on_completion_signal(now);
                    }
                    Event::Text { text }
                }
                (
                    _,
                    Event::ToolStarted {
                        id,
                        name,
                        input,
                        timeout_ms,
                    },
                ) => {
                    if let (Some(t), Some(stall)) = (timeout_ms, self.clocks.stall_timeout)
                        && Duration::from_millis(t) + defaults::TOOL_TIMEOUT_MARGIN > stall
                    {
                        self.stall_extensions.push(StallExtension {
                            at_ms: self.ms(now),
                            tool_id: id.clone(),
                            tool: name.clone(),
                            timeout_ms: t,
                        });
                    }
                    Event::ToolStarted {
                        id,
                        name,
                        input,
                        timeout_ms,
                    }
                }
                (_, e) => e,
            };
            self.emit(event);
        }
    }

    /// After a chunk of stdout: what the decoder learned, the terminal
    /// event, and open tool calls' declared limits. After a chunk of
    /// stderr: the retries announced there.
    fn after_lines(&mut self, pipe: &Pipe, now: Instant) {
        if pipe.stream != Stream::Stdout {
            let before = self.stderr_retries;
            self.stderr_retries = pipe.summary().reported.retries;
            self.summary.reported.retries += self.stderr_retries - before;
            return;
        }
        self.summary.clone_from(pipe.summary());
        self.summary.reported.retries += self.stderr_retries;
        self.check_budget();
        self.clocks.stall_floor = self
            .summary
            .open_tool_timeout_ms()
            .map(|t| Duration::from_millis(t) + defaults::TOOL_TIMEOUT_MARGIN);
        let s = &self.summary;
        // The last terminal event decides, and only while the agent has not
        // gone on working after it.
        let terminal_in_force = s.terminal_in_force().is_some();
        if s.terminal_events != self.terminal_events {
            self.terminal_events = s.terminal_events;
            self.terminal_seen = Some(now);
        }
        let working_again = s.working_after_terminal;
        // A fatal error that is still the agent's last word: it has the
        // fatal-error grace to end by itself. A terminal event takes over.
        self.clocks.fatal_error_at = match s.fatal_pending {
            Some(_) if !terminal_in_force => Some(self.clocks.fatal_error_at.unwrap_or(now)),
            _ => None,
        };
        if terminal_in_force {
            // Done by its own word: from now on silence means it will not
            // exit, not that it is thinking.
            self.advance_quietly(Input::TerminalEvent, now);
        } else if working_again {
            // It reported an end, then went on (pi retries by itself after
            // an `agent_end` with an error): silence is the stall clock's
            // again, until the next terminal event. A completion signal is
            // never taken back.
            self.advance_quietly(Input::WorkingAgain, now);
        }
    }

    /// Looks at what the run has spent: a warning for each budget 80%
    /// spent, and the first one exceeded is kept (the loop ends the run).
    fn check_budget(&mut self) {
        if self.budget.is_empty() {
            return;
        }
        let mine = crate::budget::Spent::of_summary(&self.summary);
        let mine_changed = self.budget_seen.replace(mine) != Some(mine);
        if let Some(pool) = &self.setup.pool {
            pool.publish(&self.setup.run_id, mine);
            // Another run's spending ends only a run still at work (as
            // when it wakes this one): a line from a run that is done
            // (the agent's last words while it exits) must not turn it
            // `budget_exceeded` for what the others spent. Its own new
            // spending is judged against everything, whatever the phase.
            if mine_changed || matches!(self.phase, Phase::Starting | Phase::Running) {
                self.budget.others_spent(&pool.others(&self.setup.run_id));
            }
        }
        let found = self.budget.check(&mine);
        for w in found.warnings {
            // A batch's budget held with the runs beside this one: one of
            // them may have warned of it already.
            if w.scope == crate::budget::BudgetScope::Batch
                && let Some(pool) = &self.setup.pool
                && !pool.first_warning(w.budget)
            {
                continue;
            }
            self.emit(Event::BudgetWarning {
                scope: w.scope,
                budget: w.budget,
                limit: w.limit,
                reached: w.reached,
            });
        }
        if self.budget_hit.is_none() {
            self.budget_hit = found.exceeded;
        }
    }

    fn on_activity(&mut self, now: Instant) {
        if self.phase.cause().is_some() {
            // warden is ending the run: what the agent prints while it is
            // being stopped is not work, and must not move the last
            // activity that explains why it was stopped (a snapshot still
            // says a line came).
            self.status.on_activity(Duration::ZERO);
            self.activity_lines += 1;
            return;
        }
        if self.clocks.last_activity == Some(now) {
            // Another line of the same read: no silence ended.
            self.status.on_activity(Duration::ZERO);
            self.clocks.warned = false;
            self.activity_lines += 1;
            return;
        }
        let since = self.clocks.last_activity.unwrap_or(self.setup.started);
        self.longest_silence = self
            .longest_silence
            .max(now.saturating_duration_since(since));
        self.status
            .on_activity(now.saturating_duration_since(since));
        self.first_activity.get_or_insert(now);
        self.clocks.last_activity = Some(now);
        self.clocks.warned = false;
        self.activity_lines += 1;
    }

    fn on_completion_signal(&mut self, now: Instant) {
        if self.completion_seen.is_some() {
            return;
        }
        self.completion_seen = Some(now);
        self.advance_quietly(Input::CompletionSignal, now);
        self.emit(Event::CompletionSignal);
    }

    fn on_message(
        &mut self,
        tree: &RunTree,
        out: &mut Pipe,
        err: &mut Pipe,
        m: Option<ShimMessage>,
    ) {
        match m {
            Some(ShimMessage::Exited { code, signal }) => {
                self.step(tree, out, err, Input::Exited { code, signal });
            }
            Some(ShimMessage::Empty) => self.empty = true,
            Some(ShimMessage::Killed {
                pid,
                escaped,
                cmdline,
            }) => self.on_swept(pid, cmdline, escaped),
            // What happened at the limits: the tree keeps the count.
            Some(
                ShimMessage::Spawned { .. }
                | ShimMessage::SpawnFailed { .. }
                | ShimMessage::Resources { .. },
            ) => {}
            None => {
                self.shim_open = false;
                self.step(tree, out, err, Input::ShimGone);
            }
        }
    }

    /// The agent was reaped: everything still alive now is an orphan. Name
    /// it, then send it `signal` at once while the pipes are still read.
    /// The sandbox's own helpers are not the agent's.
    fn on_reaped(&mut self, tree: &RunTree, exit: Exit, signal: Option<Signal>) {
        self.emit(Event::Exited {
            exit_code: exit.code,
            signal: exit.signal,
        });
        let found = self.agents_processes(tree);
        self.note_escapes(tree, &found);
        for p in found {
            let held_pipe = tree.holds_output(p.pid);
            self.emit(Event::Orphan {
                pid: p.pid,
                cmdline: p.cmdline.clone(),
                held_pipe,
            });
            self.orphans.push(Orphan {
                pid: p.pid,
                cmdline: p.cmdline,
                held_pipe,
            });
        }
        if let Some(signal) = signal
            && !self.orphans.is_empty()
        {
            self.signal_all(tree, signal);
        }
    }

    fn on_control(&mut self, tree: &RunTree, out: &mut Pipe, err: &mut Pipe, c: Control) {
        let input = match c {
            Control::Cancel => Input::Cancel,
            Control::Kill => Input::Kill,
        };
        self.step(tree, out, err, input);
    }

    fn on_clock(&mut self, tree: &RunTree, out: &mut Pipe, err: &mut Pipe, clock: Clock) {
        match clock {
            Clock::StallWarning => {
                self.clocks.warned = true;
                self.stall_warnings += 1;
                let since = self.clocks.last_activity.unwrap_or(self.setup.started);
                self.emit(Event::StallWarning {
                    silent_ms: Instant::now().saturating_duration_since(since).as_millis() as u64,
                    stall_timeout_ms: self
                        .clocks
                        .stall_timeout
                        .map_or(0, |d| d.as_millis() as u64),
                });
            }
            Clock::Completion => {
                self.hanging = tree
                    .processes()
                    .into_iter()
                    .map(|p| Holder {
                        pid: p.pid,
                        cmdline: p.cmdline,
                    })
                    .collect();
                self.step(tree, out, err, Input::Deadline(clock));
            }
            Clock::Run
            | Clock::Startup
            | Clock::Stall
            | Clock::FatalError
            | Clock::KillGrace
            | Clock::Drain
            | Clock::FinalKill => self.step(tree, out, err, Input::Deadline(clock)),
        }
    }

    /// The drain window ran out with output still open: keep what was
    /// read, name who holds the pipes, and stop reading.
    fn cut_output(&mut self, tree: &RunTree, out: &mut Pipe, err: &mut Pipe, now: Instant) {
        if !(out.open() || err.open()) {
            return;
        }
        let holders = tree
            .pipe_holders()
            .into_iter()
            .map(|p| Holder {
                pid: p.pid,
                cmdline: p.cmdline,
            })
            .collect::<Vec<_>>();
        let bytes = out.bytes + err.bytes;
        for pipe in [&mut *out, &mut *err] {
            // Keep a last line that had no newline.
            pipe.close(|line| self.on_line(line, now));
            self.after_lines(pipe, now);
        }
        self.emit(Event::OutputTruncated {
            bytes,
            holders: holders.clone(),
        });
        self.truncated = Some(Truncation { bytes, holders });
    }

    /// The wait after SIGKILL ran out: what is left is named, and the
    /// shim, the tree and the output are no longer waited for.
    fn give_up(&mut self, tree: &RunTree, out: &mut Pipe, err: &mut Pipe, now: Instant) {
        if !self.empty {
            // Judged after the shim's last sweep (in `after_close`): most
            // of these are a chain still being stopped.
            self.final_left = tree
                .processes()
                .into_iter()
                .map(|p| (p.pid, p.cmdline))
                .collect();
        }
        self.shim_open = false;
        self.empty = true;
        if self.phase.exit().is_none() {
            self.note_error("the agent's exit status was never reported".into());
        }
        for pipe in [&mut *out, &mut *err] {
            pipe.close(|line| self.on_line(line, now));
            self.after_lines(pipe, now);
        }
    }

    /// Starts the sandbox's own kill (`docker rm -f`) without waiting.
    fn start_sandbox_kill(&mut self) {
        if let Some(cmd) = &self.setup.on_kill
            && !self.sandbox_kill_started
        {
            self.sandbox_kill_started = true;
            if let Err(e) = quiet(cmd).spawn() {
                self.note_error(format!("could not run `{}`: {e}", cmd[0].to_string_lossy()));
            }
        }
    }

    /// At the end of every run: make sure the sandbox left nothing (a
    /// container that outlived its client), waiting at most 10 s.
    async fn remove_sandbox_leftovers(&mut self) {
        let Some(cmd) = self.setup.on_kill.clone() else {
            return;
        };
        match quiet(&cmd).spawn() {
            Ok(mut child) => {
                if tokio::time::timeout(Duration::from_secs(10), child.wait())
                    .await
                    .is_err()
                {
                    let _ = child.start_kill();
                    self.note_error(format!(
                        "`{}` did not finish within 10s",
                        cmd[0].to_string_lossy()
                    ));
                }
            }
            Err(e) => self.note_error(format!("could not run `{}`: {e}", cmd[0].to_string_lossy())),
        }
    }

    /// SIGKILLs every process of the run (the final, bounded wait for the
    /// kernel to confirm is the `Killing` phase's).
    fn kill_rest(&mut self, tree: &RunTree) {
        self.start_sandbox_kill();
        // Processes that appeared after the exit (forked by orphans) are
        // orphans too.
        let found = self.agents_processes(tree);
        self.note_escapes(tree, &found);
        let note_orphans = |this: &mut Self, found: Vec<warden_process::ProcessInfo>| {
            if this.phase.exit().is_some() {
                for p in found {
                    if !this.orphans.iter().any(|o| o.pid == p.pid)
                        && !this.sandbox_helpers.contains(&p.pid)
                    {
                        let held_pipe = tree.holds_output(p.pid);
                        this.orphans.push(Orphan {
                            pid: p.pid,
                            cmdline: p.cmdline,
                            held_pipe,
                        });
                    }
                }
            }
        };
        note_orphans(self, found);
        // The kill's own scan can see what the one above missed (a chain
        // moves on between scans).
        let signalled = self.signal_all(tree, Signal::Kill);
        note_orphans(self, signalled);
    }

    /// Names the processes that moved themselves out of the run's cgroup:
    /// `cgroup.kill` misses them, the shim's sweep does not.
    fn note_escapes(&mut self, tree: &RunTree, found: &[warden_process::ProcessInfo]) {
        for p in found {
            if let Some(dir) = tree.outside_cgroup(p.pid) {
                let line = format!("{} `{}` (moved to {})", p.pid, p.cmdline, dir.display());
                if !self.escaped.contains(&line) && self.escaped.len() < 16 {
                    self.escaped.push(line);
                }
            }
        }
    }

    /// The processes of the run but the sandbox's own helpers. The helpers
    /// are picked out before the listing: one that exits in between (its
    /// status gone, not yet reaped) is then never mistaken for the agent's.
    /// Every helper seen is remembered, so that a list made later (of what
    /// a kill found) can leave it out by pid.
    fn agents_processes(&mut self, tree: &RunTree) -> Vec<warden_process::ProcessInfo> {
        let sandbox = self.setup.sandbox;
        for pid in tree.pids() {
            if !self.sandbox_helpers.contains(&pid) && sandbox.is_own_helper(pid) {
                self.sandbox_helpers.push(pid);
            }
        }
        tree.processes()
            .into_iter()
            .filter(|p| !self.sandbox_helpers.contains(&p.pid))
            .collect()
    }

    /// A process the shim's sweep killed after the agent had exited: an
    /// orphan, perhaps one that forked too fast for warden's scans.
    fn on_swept(&mut self, pid: i32, cmdline: String, escaped: bool) {
        if escaped {
            let line = format!("{pid} `{cmdline}`");
            if !self.escaped.contains(&line) && self.escaped.len() < 16 {
                self.escaped.push(line);
            }
        }
        if self.orphans.iter().any(|o| o.pid == pid) || self.sandbox_helpers.contains(&pid) {
            return;
        }
        self.emit(Event::Orphan {
            pid,
            cmdline: cmdline.clone(),
            held_pipe: false,
        });
        self.orphans.push(Orphan {
            pid,
            cmdline,
            held_pipe: false,
        });
    }

    /// After the shim's last sweep: the orphans it reported, what left the
    /// cgroup, and what (if anything) truly survived SIGKILL.
    fn after_close(&mut self, swept: Vec<(warden_process::ProcessInfo, bool)>) {
        for (p, escaped) in swept {
            self.on_swept(p.pid, p.cmdline, escaped);
        }
        if !self.escaped.is_empty() {
            self.note_error(format!(
                "processes moved themselves out of the run's cgroup, out of reach of \
                 cgroup.kill; they were stopped and killed as descendants of the run's shim: {}",
                self.escaped.join(", ")
            ));
        }
        let alive: Vec<String> = self
            .final_left
            .iter()
            .filter_map(|(pid, cmdline)| {
                let e = warden_process::os::procfs::entry(*pid)?;
                (!e.is_dead()).then(|| {
                    let why = match e.state {
                        b'D' => "in uninterruptible sleep in the kernel (state D)".to_string(),
                        s => format!("state {}", s as char),
                    };
                    format!("{pid} `{cmdline}` ({why})")
                })
            })
            .collect();
        if !alive.is_empty() {
            self.note_error(format!(
                "processes survived SIGKILL and the shim's stop-and-kill sweep: {}",
                alive.join(", ")
            ));
        }
    }

    fn signal_all(&mut self, tree: &RunTree, signal: Signal) -> Vec<warden_process::ProcessInfo> {
        let signalled = tree.signal_all(signal);
        let pids: Vec<i32> = signalled.iter().map(|p| p.pid).collect();
        if !pids.is_empty() {
            self.emit(Event::Signalled {
                signal: signal.name().into(),
                pids,
            });
        }
        signalled
    }
}

/// Whether the batch's pool changed (`false` once it is gone); never
/// returns without one.
async fn pool_changed(pool: &mut Option<tokio::sync::watch::Receiver<u64>>) -> bool {
    match pool {
        Some(rx) => rx.changed().await.is_ok(),
        None => std::future::pending().await,
    }
}

fn cause_reason(cause: Cause) -> &'static str {
    match cause {
        Cause::Stalled => "stall timeout",
        Cause::StartupTimeout => "startup timeout",
        Cause::TimedOut => "run timeout",
        Cause::Cancelled => "cancelled",
        Cause::ForcedCompletion => "completion timeout after the agent said it was done",
        Cause::FatalError => {
            "the agent reported an error that retrying will not fix (--on-fatal-error end)"
        }
        Cause::BudgetExceeded => "a budget was exceeded",
    }
}
