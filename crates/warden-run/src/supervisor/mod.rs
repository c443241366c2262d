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
//! The loop owns only the phase, the clocks, the pipes and the process
//! tree. Every stamped event goes to the sinks of [`sinks`] (the events
//! file, the live feed, the spans, the status snapshot, the budget watch),
//! which ask the loop for what they need through what they return. The
//! process tree is a [`tree::Tree`], so the loop runs as well on a tree a
//! test makes up.
//!
//! Invariants:
//! - every byte read is written to the tee before it is decoded;
//! - the run finalizes only when the agent's exit is known (or it was
//!   SIGKILLed and the wait for it ran out), its output is closed or
//!   abandoned, and no process of the run is left (or all were SIGKILLed);
//! - every path ends in `Supervisor::finish`, which writes `run.json`.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::mpsc::{Sender, UnboundedReceiver};
use warden_events::event::Stamped;
use warden_events::{Agent, Event, Holder, SignalMatcher, Stream, Summary};
use warden_process::{ShimMessage, Signal};

use crate::artifacts::RunDir;

mod engine_gate;
mod lines;
pub(crate) mod phase;
mod procs;
mod report;
mod sinks;
mod status;
#[cfg(test)]
mod tests;
pub(crate) mod tree;
use crate::clocks::{Clock, ClockState, now};
use crate::defaults;
use crate::limits::Limits;
use crate::live::LiveFeed;
use crate::pipe::{Pipe, read};
use crate::report::{Orphan, Report, StallExtension, Truncation};
use crate::verdict::Cause;
use phase::{Action, Graces, Input, Phase};
use sinks::{Ask, BudgetWatch, RunFiles, Sinks};
use tree::Tree;

/// A request to the running supervisor.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// End the run gracefully (SIGTERM, grace, SIGKILL): `cancelled`.
    Cancel,
    /// [`Control::Cancel`], saying why (the reason in the report).
    CancelBecause(String),
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
    /// What the run shares with the runs around it: budgets, the batch's
    /// pool, telemetry (the plan's, as one value).
    pub shared: crate::plan::Shared,
    /// Under Docker or Podman: what tells the engine's failures and lines
    /// from the agent's.
    pub container: Option<ContainerRun>,
    /// Codex: where it keeps its state (its session files), to read a
    /// thread's usage the stream did not report (see
    /// [`crate::codex_thread`]).
    pub codex_home: Option<PathBuf>,
}

/// A run in a container, as the supervisor needs to know it.
pub(crate) struct ContainerRun {
    pub sandbox: warden_sandbox::Sandbox,
    pub image: String,
    /// Where the engine's client writes the container's id once the
    /// container exists (`--cidfile`); taken when the run is judged.
    pub cid: Option<crate::container_sweep::CidDir>,
    /// The removal of dead wardens' containers this run started, waited
    /// for at its end.
    pub sweep: Option<tokio::task::JoinHandle<()>>,
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
    /// Where the stamped events go.
    sinks: Sinks,
    clocks: ClockState,
    /// Where the run is, with the data only that phase has (the exit
    /// status and the cause among them, once known).
    phase: Phase,
    activity: Activity,
    streams: Streams,
    procs: Procs,
    errors: Errors,
    outcome: Outcome,
    /// The write of the first `run.json` ("running"), on a blocking
    /// thread; the final report waits for it (see `finish`).
    initial_report: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

/// What the agent's activity was, for the report and the snapshots.
#[derive(Default)]
struct Activity {
    first: Option<Instant>,
    longest_silence: Duration,
    lines: u64,
    stall_warnings: u32,
    /// When the completion signal came (for the report: the phase moves on).
    completion_seen: Option<Instant>,
    /// When the last terminal event came.
    terminal_seen: Option<Instant>,
    /// How many terminal events the supervisor has acted on.
    terminal_events: u32,
    stall_extensions: Vec<StallExtension>,
    /// Why the caller cancelled the run, when it said.
    cancelled_because: Option<String>,
}

/// The agent's output as it was read.
struct Streams {
    /// Finds the completion signal.
    signal: SignalMatcher,
    stdout_bytes: u64,
    stderr_bytes: u64,
    /// The last text of an `exec` run, for `--output-tag` (bounded).
    recent_text: String,
    /// The output cut when the drain window ran out.
    truncated: Option<Truncation>,
    /// In a container: the engine's own lines at the start of stderr,
    /// held back from the log (see [`engine_gate::EngineGate`]).
    gate: Option<engine_gate::EngineGate>,
    /// In a container: the start of stderr as read, where the engine's
    /// error is when it could not create the container.
    stderr_head: Vec<u8>,
}

/// The run's processes, as the supervisor has found them.
struct Procs {
    pid: Option<i32>,
    containment: Option<String>,
    /// The shim said no process of the run is left.
    empty: bool,
    /// The shim's channel is open (its reports can still come).
    shim_open: bool,
    orphans: Vec<Orphan>,
    hanging: Vec<Holder>,
    /// Processes the sandbox runs next to the agent (bwrap's init), as
    /// seen so far: never the agent's orphans, also once they are gone.
    sandbox_helpers: Vec<i32>,
    /// Processes found outside the run's cgroup (they moved themselves):
    /// killed all the same, as descendants of the shim, and named.
    escaped: Vec<String>,
    /// The processes still there when the wait after SIGKILL ran out.
    final_left: Vec<(i32, String)>,
    sandbox_kill_started: bool,
    /// The resource limits in force and, at the end, what happened at
    /// them (see [`crate::resources`]).
    resources: Option<crate::report::ResourcesReport>,
    /// In a container with a memory or process limit: the count of what
    /// happens at them, read from the engine's cgroups.
    limits_watch: Option<crate::resources::ContainerWatch>,
}

/// What went wrong on warden's side.
#[derive(Default)]
struct Errors {
    list: Vec<String>,
    /// The first failure to keep the output (see `Report::output_lost`).
    output_lost: Option<String>,
    spawn: Option<String>,
}

/// What the run leaves behind, known at its end.
struct Outcome {
    /// What the agent's decoder learned, with the retries its stderr
    /// announced added: read from the decoder while the output is read,
    /// taken from it once, at the end.
    summary: Summary,
    commits: Option<Vec<crate::git::Commit>>,
    branch: Option<String>,
    output: Option<serde_json::Value>,
}

/// The agent's two pipes, read by the loop.
struct Pipes {
    out: Pipe,
    err: Pipe,
}

impl Pipes {
    fn open(&self) -> bool {
        self.out.open() || self.err.open()
    }

    fn get(&mut self, stream: Stream) -> &mut Pipe {
        match stream {
            Stream::Stdout => &mut self.out,
            Stream::Stderr => &mut self.err,
        }
    }

    /// The retries announced on both streams.
    fn retries(&self) -> u32 {
        self.out.summary().reported.retries + self.err.summary().reported.retries
    }

    /// The decoders' summary, with the retries stderr announced: what the
    /// report keeps (made once, at the end).
    fn summary(&self) -> Summary {
        let mut summary = self.out.summary().clone();
        summary.reported.retries = self.retries();
        summary
    }
}

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
    /// What turns the output's lines off in the live feed (see
    /// [`RunHandle::without_output_lines`](crate::RunHandle::without_output_lines)).
    pub(crate) fn output_lines(&self) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
        self.sinks.live.output_lines()
    }

    pub(crate) fn new(setup: Setup, dir: RunDir, events: Option<Sender<Stamped>>) -> Self {
        let l = &setup.limits;
        let clocks = ClockState {
            started: Some(setup.started),
            timeout: l.timeout,
            startup_timeout: l.startup_timeout,
            stall_timeout: l.armed_stall_timeout(),
            stall_before_first_line: l.armed_stall_timeout().and_then(|s| {
                s.checked_add(warden_agents::profile(setup.agent).first_line_allowance)
            }),
            completion_timeout: l.completion_timeout,
            fatal_error_grace: l.fatal_error_grace(),
            kill_grace: l.kill_grace,
            drain_grace: l.drain_grace,
            final_kill_wait: defaults::FINAL_KILL_WAIT,
            ..ClockState::default()
        };
        let pooled = setup
            .shared
            .pool
            .as_ref()
            .map(|p| (p.budget(), p.others(&setup.run_id)));
        let watch = crate::budget::Watch::new(
            &l.budget,
            setup.shared.spent_before,
            &setup.shared.budgets,
            pooled,
        );
        let sinks = Sinks {
            files: RunFiles::new(dir),
            spans: setup
                .shared
                .telemetry
                .as_ref()
                .filter(|t| t.exporter.traces())
                .map(|t| {
                    crate::telemetry::RunSpans::new(t.ids, setup.agent, setup.started_at)
                        .for_step(t.step.clone())
                }),
            status: status::StatusFeed::default(),
            budget: BudgetWatch::new(watch, setup.shared.pool.clone(), setup.run_id.clone()),
            live: LiveFeed::new(events, !setup.shared.lines_off),
        };
        let streams = Streams {
            signal: SignalMatcher::new(&l.completion_signal),
            stdout_bytes: 0,
            stderr_bytes: 0,
            recent_text: String::new(),
            truncated: None,
            gate: setup
                .container
                .as_ref()
                .map(|c| engine_gate::EngineGate::new(c.sandbox)),
            stderr_head: Vec::new(),
        };
        let procs = Procs {
            pid: None,
            containment: None,
            empty: false,
            shim_open: true,
            orphans: Vec::new(),
            hanging: Vec::new(),
            sandbox_helpers: Vec::new(),
            escaped: Vec::new(),
            final_left: Vec::new(),
            sandbox_kill_started: false,
            resources: None,
            limits_watch: None,
        };
        let outcome = Outcome {
            summary: Summary::default(),
            commits: Some(Vec::new()),
            branch: None,
            output: None,
        };
        Self {
            setup,
            sinks,
            clocks,
            phase: Phase::Starting,
            activity: Activity::default(),
            streams,
            procs,
            errors: Errors::default(),
            outcome,
            initial_report: None,
        }
    }

    /// Writes the pending snapshot if it is due (or `now_anyway`), from
    /// what the decoder learned (`summary`, borrowed) and the `retries`
    /// announced on both streams.
    fn status_tick(&mut self, now: Instant, now_anyway: bool, summary: &Summary, retries: u32) {
        if !self.sinks.status.is_due(now, now_anyway) {
            return;
        }
        // Only while the stall clock is what ends a silence: not in the
        // completion window, nor once the agent exited or warden is ending
        // the run.
        let stall_deadline_ms = if self.phase.at_work() {
            self.clocks.effective_stall().and_then(|s| {
                let last = self.clocks.last_activity.unwrap_or(self.setup.started);
                last.checked_add(s).map(|at| self.ms(at))
            })
        } else {
            None
        };
        let decided = status::Decided {
            last_activity_ms: self.clocks.last_activity.map(|t| self.ms(t)),
            activity_lines: self.activity.lines,
            longest_silence_ms: self.activity.longest_silence.as_millis() as u64,
            stall_deadline_ms,
            summary,
            retries,
        };
        let event = self.sinks.status.snapshot(now, decided);
        self.emit(event);
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
        let stamped = Stamped {
            schema_version: warden_events::SchemaVersion,
            t_ms: self.ms(now()),
            event,
        };
        let ask = self.sinks.deliver(stamped);
        self.answer(ask);
    }

    /// Does what a sink asked for.
    fn answer(&mut self, ask: Ask) {
        if let Some(e) = ask.lost {
            self.note_lost(e);
        }
        for event in ask.say {
            self.emit(event);
        }
    }

    fn note_error(&mut self, e: String) {
        if !self.errors.list.contains(&e) {
            self.errors.list.push(e);
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
    fn step(&mut self, tree: &impl Tree, pipes: &mut Pipes, input: Input) {
        let now = now();
        let (phase, actions) = self.phase.on(input, now, self.graces());
        self.phase = phase;
        for action in actions {
            match action {
                Action::Announce(cause) => {
                    let reason = match (cause, self.sinks.budget.hit()) {
                        (Cause::BudgetExceeded, Some(hit)) => hit.exceeded(),
                        _ => cause_reason(cause).into(),
                    };
                    self.emit(Event::Terminating { reason });
                }
                Action::SandboxKill => self.start_sandbox_kill(),
                Action::Term => {
                    if self.setup.on_kill.is_some() {
                        self.signal_container(tree);
                    } else {
                        self.signal_all(tree, Signal::Term);
                    }
                }
                Action::KillAll => self.kill_rest(tree),
                Action::Reaped { exit, orphans } => self.on_reaped(tree, exit, orphans),
                Action::ShimLost => {
                    self.note_error("the run's shim exited before the agent did".into());
                }
                Action::CutOutput => self.cut_output(tree, pipes, now),
                Action::GiveUp => self.give_up(tree, pipes, now),
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
        mut tree: impl Tree,
        mut control: UnboundedReceiver<Control>,
    ) -> Report {
        let mut pipes = self.start(&mut tree);
        let mut control_open = true;
        // Woken when a run beside this one spends against the batch's
        // budget.
        let mut pool = self.sinks.budget.subscribe();
        loop {
            let left = Input::Left {
                output_open: pipes.open(),
                tree_empty: self.procs.empty,
                shim_open: self.procs.shim_open,
            };
            self.advance_quietly(left, now());
            if self.phase.is_finalized() {
                break;
            }
            let next = self.clocks.next(self.phase.waits());
            // A status snapshot may be due before the next clock.
            let wake = match (next.map(|(at, _)| at), self.sinks.status.due(now())) {
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
            // exit already reported) is settled in `on_deadline`.
            tokio::select! {
                r = read(&mut pipes.out.reader, &mut pipes.out.buf) => {
                    self.on_read(&mut pipes, Stream::Stdout, r);
                }
                r = read(&mut pipes.err.reader, &mut pipes.err.buf) => {
                    self.on_read(&mut pipes, Stream::Stderr, r);
                }
                m = tree.next_message(), if self.procs.shim_open => {
                    self.on_message(&tree, &mut pipes, m);
                }
                c = control.recv(), if control_open => match c {
                    Some(c) => self.on_control(&tree, &mut pipes, c),
                    None => control_open = false,
                },
                changed = pool_changed(&mut pool) => match changed {
                    // Another run's spending ends only a run still at
                    // work: one that is done has spent what it spent.
                    true if self.phase.at_work() => {
                        let ask = self.sinks.learned(pipes.out.summary(), true);
                        self.answer(ask);
                    }
                    true => {}
                    false => pool = None,
                },
                () = sleep => {
                    if let Some((_, clock)) = next.filter(|(at, _)| *at <= now()) {
                        self.on_deadline(&mut tree, &mut pipes, clock);
                    }
                }
            }
            // A budget exceeded ends the run once it is working (again:
            // an agent that said it was done and went on).
            if self.sinks.budget.hit().is_some() && self.phase.at_work() {
                self.step(&tree, &mut pipes, Input::BudgetExceeded);
            }
            self.status_tick(now(), false, pipes.out.summary(), pipes.retries());
            self.flush_events();
            self.sinks.live.flush();
        }
        self.outcome.summary = pipes.summary();
        self.end(tree, pipes, control).await
    }

    /// Before the loop: what the tree says of the spawn, the first report,
    /// and the pipes.
    fn start(&mut self, tree: &mut impl Tree) -> Pipes {
        self.procs.pid = Some(tree.agent_pid());
        let containment = match self.setup.containment_extra {
            Some(extra) => format!("{}+{extra}", tree.containment().as_str()),
            None => tree.containment().as_str().to_string(),
        };
        self.procs.containment = Some(containment.clone());
        self.procs.resources = crate::resources::report(
            &self.setup.limits.resources,
            self.setup.sandbox,
            tree.limits_applied(),
        );
        self.procs.limits_watch = crate::resources::watch_container(
            &self.setup.limits.resources,
            self.setup.sandbox,
            crate::resources::container_name(&self.setup.run_id),
        );
        self.emit(Event::Spawned {
            pid: tree.agent_pid(),
            command: self.setup.command.clone(),
            containment,
            limits: crate::resources::described(self.procs.resources.as_ref()),
        });
        let initial = self.report(None, "running".into());
        // Written on a blocking thread: creating a file can take
        // milliseconds (ext4 without a journal searches for an inode not
        // deleted lately), while the runtime's one thread reads this
        // run's pipes and, in a batch, starts the other runs.
        let dir = self.sinks.files.dir.handle();
        self.initial_report = Some(tokio::task::spawn_blocking(move || {
            crate::artifacts::write_first_report(&dir, &initial)
        }));
        self.flush_events();

        let max_line = self.setup.limits.max_line;
        let agent = self.setup.agent;
        let (stdout, stderr) = tree.take_output();
        let mut out = Pipe::new(Stream::Stdout, agent, stdout, max_line);
        out.decoder
            .set_usage_baseline(self.setup.shared.usage_baseline);
        let err = Pipe::new(Stream::Stderr, agent, stderr, max_line);
        Pipes { out, err }
    }

    /// After the loop: the last snapshot, what is left killed, the tree
    /// closed, the commits, and the report. The pipes are held to the end,
    /// as the tree is: what still writes to one is being killed, not
    /// stopped by a closed pipe.
    async fn end(
        mut self,
        mut tree: impl Tree,
        pipes: Pipes,
        mut control: UnboundedReceiver<Control>,
    ) -> Report {
        self.usage_codex_recorded().await;
        let summary = std::mem::take(&mut self.outcome.summary);
        self.status_tick(now(), true, &summary, summary.reported.retries);
        self.outcome.summary = summary;
        // Read before the container is removed, which takes its cgroups.
        let container_counts = match self.procs.limits_watch.take() {
            Some(w) => Some(w.finish().await),
            None => None,
        };
        // Whatever is still alive (a process that ignores SIGTERM and left
        // the pipes alone, say) is killed now; the shim makes sure of it.
        if !self.procs.empty {
            self.kill_rest(&tree);
        }
        self.remove_sandbox_leftovers().await;
        self.judge_engine().await;
        let swept = tree.close().await;
        crate::resources::count(&mut self.procs.resources, tree.resource_events());
        if let Some(counted) = container_counts {
            crate::resources::count_container(&mut self.procs.resources, counted);
        }
        self.after_close(swept);
        self.collect_commits(&mut control).await;
        let report = self.finish().await;
        drop(pipes);
        report
    }

    /// A Codex run whose stream reported no usage (it failed, or was ended
    /// before `turn.completed`): the thread's running total as Codex
    /// recorded it in its session file, less what the thread had before
    /// this run (a resumed thread), counted as the run's usage, with a
    /// `usage` event. Nothing when there is no record.
    async fn usage_codex_recorded(&mut self) {
        let reported = &self.outcome.summary.reported;
        let (Some(home), Some(thread)) = (&self.setup.codex_home, &reported.session_id) else {
            return;
        };
        if reported.tokens.total().is_some() {
            return;
        }
        let (home, thread) = (home.clone(), thread.clone());
        let recorded = tokio::task::spawn_blocking(move || {
            crate::codex_thread::recorded_total(&home, &thread)
        })
        .await
        .ok()
        .flatten();
        let Some(total) = recorded else {
            return;
        };
        let tokens = total.beyond(&self.setup.shared.usage_baseline);
        self.outcome.summary.reported.tokens = tokens;
        self.emit(Event::Usage {
            tokens,
            cost_usd: None,
            cumulative: true,
        });
    }

    /// A deadline is due. An exit the shim reported in the same instant
    /// wins: the agent ended by itself before the clock could act.
    fn on_deadline(&mut self, tree: &mut impl Tree, pipes: &mut Pipes, clock: Clock) {
        if self.procs.shim_open && self.phase.exit().is_none() {
            let ready = {
                let mut message = std::pin::pin!(tree.next_message());
                let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
                match message.as_mut().poll(&mut cx) {
                    std::task::Poll::Ready(m) => Some(m),
                    std::task::Poll::Pending => None,
                }
            };
            if let Some(m) = ready {
                self.on_message(tree, pipes, m);
            }
        }
        self.on_clock(tree, pipes, clock);
    }

    fn on_message(&mut self, tree: &impl Tree, pipes: &mut Pipes, m: Option<ShimMessage>) {
        match m {
            Some(ShimMessage::Exited { code, signal }) => {
                self.step(tree, pipes, Input::Exited { code, signal });
            }
            Some(ShimMessage::Empty) => self.procs.empty = true,
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
                self.procs.shim_open = false;
                self.step(tree, pipes, Input::ShimGone);
            }
        }
    }

    fn on_control(&mut self, tree: &impl Tree, pipes: &mut Pipes, c: Control) {
        let input = match c {
            Control::Cancel => Input::Cancel,
            Control::CancelBecause(why) => {
                self.activity.cancelled_because.get_or_insert(why);
                Input::Cancel
            }
            Control::Kill => Input::Kill,
        };
        self.step(tree, pipes, input);
    }

    fn on_clock(&mut self, tree: &impl Tree, pipes: &mut Pipes, clock: Clock) {
        match clock {
            Clock::StallWarning => {
                self.clocks.warned = true;
                self.activity.stall_warnings += 1;
                let since = self.clocks.last_activity.unwrap_or(self.setup.started);
                self.emit(Event::StallWarning {
                    silent_ms: now().saturating_duration_since(since).as_millis() as u64,
                    stall_timeout_ms: self
                        .clocks
                        .stall_timeout
                        .map_or(0, |d| d.as_millis() as u64),
                });
            }
            Clock::Completion => {
                self.procs.hanging = tree
                    .processes()
                    .into_iter()
                    .map(|p| Holder {
                        pid: p.pid,
                        cmdline: p.cmdline,
                    })
                    .collect();
                self.step(tree, pipes, Input::Deadline(clock));
            }
            Clock::Run
            | Clock::Startup
            | Clock::Stall
            | Clock::FatalError
            | Clock::KillGrace
            | Clock::Drain
            | Clock::FinalKill => self.step(tree, pipes, Input::Deadline(clock)),
        }
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
