//! A session: runs of the same task, one fresh agent process each, in the
//! same directory (a new git worktree on its own branch, if asked), until
//! the agent prints the completion signal, an iteration fails, or the
//! iterations run out. A run that ended by a transient failure is tried
//! again (`--retries`), each attempt in its own directory
//! (`iteration-N-attempt-K`). Writes `session.json` with every run and the
//! totals.
//!
//! [`Session`] runs one [`RunRequest`] so; each iteration's spec is built
//! from the request (the prompt may use `{{ITERATION}}`), and everything
//! that happens comes out of its handle as [`Update`]s.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use serde::Serialize;
use warden_events::Tokens;

use crate::batch_key::{ReportSigner, Role};
use crate::git::{self, Commit, Worktree};
use crate::held_dir::HeldDir;
use crate::retry::{RetryOn, RetryPolicy};
use crate::update::{Outbox, Update};
use crate::{Canceller, Run, RunRequest, RunSpec, SetupError, Verdict};

/// `--worktree`: where the session works.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorktreeRequest {
    /// The branch to create; `warden/<name>/<stamp>-<random>` if `None`.
    pub branch: Option<String>,
    /// The commit or ref to start from; HEAD if `None`.
    pub base: Option<String>,
    /// Keep a clean worktree at the end (a dirty one is always kept).
    pub keep: bool,
}

#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Used in branch names and the session id.
    pub name: String,
    pub iterations: u32,
    /// The directory to work in (or to make the worktree from).
    pub cwd: PathBuf,
    pub worktree: Option<WorktreeRequest>,
    /// Whether the agent runs in a sandbox: its worktree is then a
    /// repository of its own (see `git::Worktree::create`), whose objects
    /// the sandbox shows read-only.
    pub sandboxed: bool,
    /// Where the session's directory goes; `<cwd>/.warden/sessions/<id>`
    /// if `None`.
    pub session_dir: Option<PathBuf>,
    /// `--output-retries`: how many times a run whose structured output
    /// was wrong is resumed with a correction.
    pub output_retries: u32,
    /// Whether the agent can resume a session (for output retries and
    /// retries of transient failures).
    pub can_resume: bool,
    /// `--retries`, `--retry-on`, `--retry-backoff`: how a run that ended
    /// by a transient failure is tried again.
    pub retry: RetryPolicy,
    /// The most the session's runs may spend together.
    pub budget: crate::budget::Budget,
    /// The batch's budget, with what its entries before this one spent.
    pub batch_budget: Option<crate::budget::SharedBudget>,
    /// The batch's budget held live with the entries running beside this
    /// one (on this machine): it replaces `batch_budget`.
    pub budget_pool: Option<std::sync::Arc<crate::budget::BudgetPool>>,
    /// OpenTelemetry export: a span for the session, one per iteration,
    /// and the runs' under them.
    pub telemetry: Option<crate::telemetry::Telemetry>,
    /// A batch's entry: signs `session.json` and each run's `run.json`.
    pub report_signer: Option<crate::batch_key::ReportSigner>,
}

/// What `make_run` is told about the run to build.
#[derive(Debug, Clone)]
pub struct IterationContext {
    pub iteration: u32,
    pub iterations: u32,
    pub workdir: PathBuf,
    pub run_dir: PathBuf,
    pub branch: Option<String>,
    pub base: Option<String>,
    /// For an output retry: the agent's session to resume and the
    /// correction to send instead of the task's prompt.
    pub correction: Option<(String, String)>,
    /// For a retry of a transient failure: the failure, and the agent's
    /// session to resume, if any.
    pub retry_of: Option<RetryOf>,
}

/// What a retry of a transient failure is told about the attempt before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryOf {
    pub failure: RetryOn,
    /// The agent's session to resume: the CLI can, and the failed attempt
    /// got at least one answer from the model (else there is nothing to
    /// resume, and the run starts afresh).
    pub resume: Option<String>,
}

/// One run of the session, as `session.json` lists it.
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Clone, Serialize)]
pub struct SessionRun {
    pub iteration: u32,
    pub output_retry: bool,
    /// Which attempt at this run it was: 1, then one more for each retry
    /// of a transient failure (`--retries`). Defaults (like every field
    /// added since) so that a `session.json` of an older warden still
    /// reads: a resumed batch takes an entry whose file does not read for
    /// one that never ended, and runs it (and pays for it) again.
    #[serde(default = "first_attempt")]
    pub attempt: u32,
    /// Whether this attempt resumed the agent's session of the attempt
    /// before (else it started afresh).
    #[serde(default)]
    pub resumed: bool,
    /// The transient failure this run ended by, when it was tried again.
    #[serde(default)]
    pub retried_because: Option<RetryOn>,
    /// How long warden waited before the next attempt, ms.
    #[serde(default)]
    pub retry_delay_ms: Option<u64>,
    pub run_id: String,
    pub run_dir: PathBuf,
    pub verdict: Option<Verdict>,
    pub reason: String,
    pub duration_ms: u64,
    pub completion_signal_seen: bool,
    pub tokens: Tokens,
    pub cost_usd: Option<f64>,
    #[serde(default)]
    pub turns: u32,
    /// The run's commits; `null` when they are unknown (see `run.json`).
    #[serde(deserialize_with = "git::required_commits")]
    pub commits: Option<Vec<Commit>>,
    /// The command's own exit code and the signal that killed it, as the
    /// run's `run.json` has them (for `--preserve-status`).
    #[serde(default)]
    pub exit_code: Option<i32>,
    #[serde(default)]
    pub signal: Option<i32>,
    /// Warden ended the run before the command exited (see
    /// `Report::ended_by_warden`): its status is then not the command's own.
    #[serde(default)]
    pub ended_by_warden: bool,
}

/// Ends a session because nothing is left of a budget for another run.
fn stop_used_up(report: &mut SessionReport, line: crate::budget::BudgetLine) {
    report.stopped_because = StopReason::BudgetExceeded;
    report.verdict = Some(Verdict::BudgetExceeded);
    report.budget_exceeded = Some(line);
    report.error = Some(format!("no further run started: {}", line.used_up()));
}

/// A run written before warden retried runs was its step's only attempt.
fn first_attempt() -> u32 {
    1
}

#[non_exhaustive]
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Clone, Serialize)]
pub struct WorktreeReport {
    pub path: PathBuf,
    pub branch: String,
    pub base: Option<String>,
    /// Removed at the end (clean and not kept) or still there.
    pub removed: bool,
    pub dirty: bool,
    /// A repository of the session's own (a sandboxed session), whose
    /// branch was fetched into the repository at the end, rather than a
    /// worktree of it.
    #[serde(default)]
    pub own_repository: bool,
}

/// Why a session stopped.
#[non_exhaustive]
#[derive(
    serde::Deserialize, schemars::JsonSchema, Debug, Clone, Copy, PartialEq, Eq, Serialize,
)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The agent printed the completion signal.
    CompletionSignal,
    /// Every iteration ran.
    IterationsExhausted,
    /// A run did not succeed (and no output retry was left).
    IterationFailed,
    Cancelled,
    /// A run could not be set up (its spec, its directory, its sandbox).
    SetupFailed,
    /// A budget of the session or its batch was exceeded by a run, or
    /// nothing was left of it for another run.
    BudgetExceeded,
}

impl StopReason {
    /// The name in `session.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::CompletionSignal => "completion_signal",
            StopReason::IterationsExhausted => "iterations_exhausted",
            StopReason::IterationFailed => "iteration_failed",
            StopReason::Cancelled => "cancelled",
            StopReason::SetupFailed => "setup_failed",
            StopReason::BudgetExceeded => "budget_exceeded",
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `session.json`.
#[non_exhaustive]
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Clone, Serialize)]
pub struct SessionReport {
    pub schema_version: warden_events::SchemaVersion,
    pub session_id: String,
    pub name: String,
    pub session_dir: PathBuf,
    pub workdir: PathBuf,
    pub worktree: Option<WorktreeReport>,
    pub started_at: String,
    pub duration_ms: u64,
    pub iterations_requested: u32,
    pub iterations_run: u32,
    pub stopped_because: StopReason,
    /// The verdict of the session: its last run's.
    pub verdict: Option<Verdict>,
    pub runs: Vec<SessionRun>,
    pub tokens: Tokens,
    pub cost_usd: Option<f64>,
    /// Model calls of every run.
    #[serde(default)]
    pub turns: u64,
    /// The session's budget (and its batch's), with what was reached by
    /// every run of the session (for the batch's: and by the entries
    /// before it).
    #[serde(default)]
    pub budgets: Vec<crate::budget::BudgetLine>,
    /// The budget that stopped the session: exceeded by its last run, or
    /// with nothing left for another (verdict `budget_exceeded`).
    #[serde(default)]
    pub budget_exceeded: Option<crate::budget::BudgetLine>,
    /// The session's commits, from its base; `null` when they are unknown
    /// (git failed or was killed at its time limit; `error` says why).
    #[serde(deserialize_with = "git::required_commits")]
    pub commits: Option<Vec<Commit>>,
    /// The session's span when OpenTelemetry export is on (see
    /// `run.json`'s `otel`): its spans are the session's and its
    /// iterations'.
    #[serde(default)]
    pub otel: Option<crate::telemetry::OtelReport>,
    pub output: Option<serde_json::Value>,
    pub error: Option<String>,
    /// The first failure to keep output: a run's (`Report::output_lost`)
    /// or a `session.json` that could not be written.
    pub output_lost: Option<String>,
    /// Whether the last `session.json` was written (not part of the file).
    #[serde(skip)]
    pub written: bool,
}

impl SessionReport {
    /// The exit code of a session: its verdict's, or
    /// [`crate::report::OUTPUT_LOST_EXIT`] when output was lost, or 2
    /// when no run started.
    pub fn warden_exit_code(&self) -> u8 {
        if self.output_lost.is_some() {
            return crate::report::OUTPUT_LOST_EXIT;
        }
        self.verdict
            .map_or(2, |v| u8::try_from(v.exit_code()).unwrap_or(70))
    }

    /// The exit code with `--preserve-status`: the last run's command's
    /// own when the session's verdict is `succeeded` or `agent_failed`
    /// (see [`crate::report::Report::exit_code_preserving_status`]);
    /// otherwise [`Self::warden_exit_code`].
    pub fn exit_code_preserving_status(&self) -> u8 {
        let last = self.runs.last();
        crate::report::preserved_status(
            self.verdict,
            last.and_then(|r| r.exit_code),
            last.and_then(|r| r.signal),
            last.is_some_and(|r| r.ended_by_warden),
            self.output_lost.is_some(),
        )
        .unwrap_or_else(|| self.warden_exit_code())
    }
}

// Beside the session's report rather than in `budget`, which stands
// below every session.
impl crate::budget::Spent {
    /// What a session's runs spent, as its report sums them.
    pub fn of_session(s: &SessionReport) -> Self {
        Self::new(s.cost_usd, s.tokens.total(), s.turns)
    }
}

/// Stops a session from another task: the current run is cancelled, and
/// no further one starts.
#[derive(Clone, Default)]
pub struct SessionControl {
    inner: Arc<Mutex<ControlState>>,
    /// Wakes whoever waits for the next cancel (the git work at the end).
    cancelled: Arc<tokio::sync::Notify>,
}

#[derive(Default)]
struct ControlState {
    stopped: bool,
    /// How many times `cancel` was called.
    cancels: u32,
    current: Option<Canceller>,
}

impl SessionControl {
    /// First call: cancel gracefully; second: kill at once.
    pub fn cancel(&self) {
        let mut s = self.inner.lock().expect("lock");
        let again = s.stopped;
        s.stopped = true;
        s.cancels += 1;
        if let Some(c) = &s.current {
            if again { c.kill() } else { c.cancel() }
        }
        drop(s);
        self.cancelled.notify_waiters();
    }

    fn cancels(&self) -> u32 {
        self.inner.lock().expect("lock").cancels
    }

    /// Returns once `cancel` has been called more than `seen` times.
    async fn cancelled_after(&self, seen: u32) {
        loop {
            let notified = self.cancelled.notified();
            if self.cancels() > seen {
                return;
            }
            notified.await;
        }
    }

    fn stopped(&self) -> bool {
        self.inner.lock().expect("lock").stopped
    }

    fn set_current(&self, c: Option<Canceller>) {
        let mut s = self.inner.lock().expect("lock");
        if s.stopped
            && let Some(c) = &c
        {
            c.cancel();
        }
        s.current = c;
    }
}

/// Runs the session to its end, saying what happens through `out`.
/// Errors only when nothing could start.
pub(crate) async fn run_session(
    opts: SessionOptions,
    control: SessionControl,
    mut make_run: impl FnMut(&IterationContext) -> Result<RunSpec, String>,
    out: &mut Outbox,
) -> Result<SessionReport, SetupError> {
    let entry = out.entry();
    let started = Instant::now();
    let started_at = SystemTime::now();
    let session_id = crate::new_run_id(started_at);
    // Before anything else is made: a session directory that cannot be
    // used (not empty, a planted link) leaves nothing behind. The top of
    // the repository is asked for only when it names the directory (a
    // batch names every run's).
    let session_dir = match opts.session_dir.clone() {
        Some(dir) => dir,
        None => git::repo_root(&opts.cwd)
            .await
            .unwrap_or_else(|| opts.cwd.clone())
            .join(".warden/sessions")
            .join(&session_id),
    };
    // File system work (slow on a busy disk), kept off the thread that
    // drives the clocks of the runs already going.
    let held = crate::off_clock(&session_dir, HeldDir::create_empty).await?;
    // Held for the session's lifetime: `warden gc` never removes a
    // directory (or a worktree) whose lock it cannot take.
    let _session_in_use = held.claim().map_err(SetupError::RunDir)?;

    let mut _worktree_in_use = None;
    let worktree = match &opts.worktree {
        Some(req) => {
            let branch = req.branch.clone().unwrap_or_else(|| {
                format!(
                    "warden/{}/{}",
                    git::dir_name(&opts.name),
                    session_id.to_ascii_lowercase()
                )
            });
            let (wt, lock) = Worktree::create(
                &opts.cwd,
                &branch,
                req.base.as_deref(),
                Some(&session_dir),
                opts.sandboxed,
            )
            .await
            .map_err(|e| {
                // Nothing was started: the (still empty) directory goes too.
                let _ = std::fs::remove_dir(&session_dir);
                SetupError::Git(e)
            })?;
            out.send(Update::Worktree {
                entry,
                worktree: wt.clone(),
            })
            .await;
            // Held for the session's lifetime: `warden gc` leaves a locked
            // worktree alone (no `session.json` names it until the end).
            _worktree_in_use = Some(lock);
            Some(wt)
        }
        None => None,
    };
    let workdir = worktree
        .as_ref()
        .map_or_else(|| opts.cwd.clone(), |w| w.path.clone());
    // What an own repository borrows, shown read-only to the agent (a
    // container sees nothing of the host but what it is given).
    let borrowed = match worktree.as_ref().and_then(|w| w.home.as_deref()) {
        Some(root) => git::objects_dir(root).await.ok(),
        None => None,
    };
    let branch = match &worktree {
        Some(w) => Some(w.branch.clone()),
        None => git::branch(&workdir).await,
    };
    let base = match worktree.as_ref().and_then(|w| w.base.clone()) {
        Some(b) => Some(b),
        None => git::head(&workdir).await,
    };

    let mut report = SessionReport {
        schema_version: warden_events::SchemaVersion,
        session_id: session_id.clone(),
        name: opts.name.clone(),
        session_dir: session_dir.clone(),
        workdir: workdir.clone(),
        worktree: None,
        started_at: humantime::format_rfc3339_millis(started_at).to_string(),
        duration_ms: 0,
        iterations_requested: opts.iterations,
        iterations_run: 0,
        stopped_because: StopReason::IterationsExhausted,
        verdict: None,
        runs: Vec::new(),
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
        written: false,
    };

    let mut spans = opts
        .telemetry
        .as_ref()
        .map(|t| crate::telemetry::SessionSpans::new(t, started_at));
    let mut iteration = 0;
    let mut correction: Option<(String, String)> = None;
    let mut retries_left = opts.output_retries;
    // The output retry this step is (`iteration-N-retry-M`), if it is one.
    let mut output_retry: Option<u32> = None;
    // The attempt at this step: one more for each transient failure.
    let mut attempt: u32 = 1;
    let mut retry_of: Option<RetryOf> = None;
    // What the session's runs spent, against its budget and its batch's.
    let mut spent = crate::budget::Spent::default();
    // What the attempts at this step spent (its retries, output retries
    // included): the run's own budget holds for them together, else
    // `--max-cost 0.50 --retries 3` could spend $2 on one iteration.
    let mut step_spent = crate::budget::Spent::default();
    // Each agent session's running total of tokens as its CLI last
    // reported it, for CLIs whose usage counts the whole thread (Codex):
    // a run that resumes one counts only what it adds.
    let mut thread_totals: std::collections::HashMap<String, Tokens> =
        std::collections::HashMap::new();
    // The run's own budget, as the last run's spec had it.
    let mut run_budget = crate::budget::Budget::default();
    let step_used_up = |run_budget: crate::budget::Budget, step: &crate::budget::Spent| {
        crate::budget::SharedBudget::new(crate::budget::BudgetScope::Run, run_budget, *step)
            .used_up()
    };
    let shared = |spent: &crate::budget::Spent| {
        let mut all = Vec::new();
        if !opts.budget.is_empty() {
            all.push(crate::budget::SharedBudget::new(
                crate::budget::BudgetScope::Session,
                opts.budget,
                *spent,
            ));
        }
        match (&opts.budget_pool, opts.batch_budget) {
            // Its lines; the runs hold it live, not from this.
            (Some(pool), _) => all.push(pool.shared()),
            (None, Some(b)) => {
                let mut before = b.spent;
                before.add(spent);
                all.push(crate::budget::SharedBudget::new(b.scope, b.budget, before));
            }
            (None, None) => {}
        }
        all
    };
    report.budgets = shared(&spent).iter().flat_map(|b| b.lines()).collect();
    loop {
        if control.stopped() {
            if retry_of.is_some() {
                // Cancelled just as the wait before a retry ended: as if
                // during the wait, the session is cancelled.
                report.verdict = Some(Verdict::Cancelled);
            }
            report.stopped_because = StopReason::Cancelled;
            break;
        }
        let next_step = correction.is_none() && retry_of.is_none();
        if next_step && iteration >= opts.iterations {
            break;
        }
        // A run with nothing left of a budget would exceed it at its first
        // model call: none starts (a retry included).
        let budgets = shared(&spent);
        let step_left = (!next_step)
            .then(|| step_used_up(run_budget, &step_spent))
            .flatten();
        if let Some(line) = step_left.or_else(|| budgets.iter().find_map(|b| b.used_up())) {
            stop_used_up(&mut report, line);
            break;
        }
        if next_step {
            iteration += 1;
            output_retry = None;
            attempt = 1;
            step_spent = crate::budget::Spent::default();
        }
        let mut name = match output_retry {
            Some(m) => format!("iteration-{iteration}-retry-{m}"),
            None => format!("iteration-{iteration}"),
        };
        if attempt > 1 {
            name.push_str(&format!("-attempt-{attempt}"));
        }
        let run_dir = session_dir.join(name);
        let resumed = retry_of.as_ref().is_some_and(|r| r.resume.is_some());
        // The agent session this run resumes, if any (as `make_run` picks).
        let resuming: Option<String> = retry_of
            .as_ref()
            .and_then(|r| r.resume.clone())
            .or_else(|| correction.as_ref().map(|(s, _)| s.clone()));
        let ctx = IterationContext {
            iteration,
            iterations: opts.iterations,
            workdir: workdir.clone(),
            run_dir: run_dir.clone(),
            branch: branch.clone(),
            base: base.clone(),
            // Kept for an attempt that starts afresh: it is sent again.
            correction: correction.clone(),
            retry_of: retry_of.take(),
        };
        let mut spec = match make_run(&ctx) {
            Ok(s) => s,
            Err(e) => {
                report.error = Some(e);
                report.stopped_because = StopReason::SetupFailed;
                break;
            }
        };
        spec.cwd = workdir.clone();
        spec.run_dir = Some(run_dir.clone());
        if let Some(objects) = &borrowed
            && !spec.sandbox.ro.contains(objects)
        {
            spec.sandbox.ro.push(objects.clone());
        }
        // The session's directory (its report, every run's logs, maybe
        // its worktree) is warden's: hidden from a sandboxed agent
        // wherever `--dir` put it.
        let record = std::path::absolute(&session_dir).unwrap_or_else(|_| session_dir.clone());
        if !spec.sandbox.records.contains(&record) {
            spec.sandbox.records.push(record);
        }
        spec.budgets = budgets
            .into_iter()
            .filter(|b| opts.budget_pool.is_none() || b.scope != crate::budget::BudgetScope::Batch)
            .collect();
        spec.budget_pool.clone_from(&opts.budget_pool);
        spec.run_spent_before = step_spent;
        let thread_wide = spec.agent == warden_events::Agent::Codex;
        if thread_wide && let Some(total) = resuming.as_ref().and_then(|s| thread_totals.get(s)) {
            spec.usage_baseline = *total;
        }
        let baseline = spec.usage_baseline;
        run_budget = spec.limits.budget;
        if let Some(s) = &mut spans {
            spec.telemetry = Some(s.run(iteration));
        }
        let mut handle = match Run::new(spec).spawn().await {
            Ok(h) => h,
            Err(e) => {
                if e.exit_code() == crate::report::OUTPUT_LOST_EXIT {
                    report.output_lost.get_or_insert_with(|| e.to_string());
                }
                report.error = Some(e.to_string());
                report.stopped_because = StopReason::SetupFailed;
                break;
            }
        };
        control.set_current(Some(handle.canceller()));
        out.send(Update::IterationStarted {
            entry,
            iteration,
            attempt,
            run_dir: run_dir.clone(),
            run_id: handle.run_id().to_string(),
        })
        .await;
        // The wait the agent itself announced last (a CLI that computes
        // it from the server's retry-after): the least a retry waits. Only
        // one after the model's last answer: a retry the model answered
        // got through, and its wait says nothing of the failure that
        // ended the run.
        let mut announced_wait: Option<u64> = None;
        while let Some(event) = handle.next_event().await {
            match &event.event {
                crate::Event::Retry {
                    delay_ms: Some(d), ..
                } => announced_wait = Some(*d),
                // What the model wrote (not usage: a CLI reports it for
                // a failed request too, Claude Code in its last line).
                crate::Event::Text { .. }
                | crate::Event::Thinking { .. }
                | crate::Event::ToolStarted { .. } => announced_wait = None,
                _ => {}
            }
            out.send(Update::Event { entry, event }).await;
        }
        let run = handle.wait().await;
        control.set_current(None);
        if let Some(signer) = &opts.report_signer {
            sign_run_report(signer, &run);
        }
        if let Some(s) = &mut spans {
            s.run_ended(&run);
        }
        out.send(Update::IterationFinished {
            entry,
            iteration,
            report: Box::new(run.clone()),
        })
        .await;
        report.iterations_run = iteration;
        if thread_wide && let Some(id) = &run.session_id {
            let mut total = baseline;
            total.add(&run.tokens);
            thread_totals.insert(id.clone(), total);
        }
        report.tokens.add(&run.tokens);
        if let Some(c) = run.cost_usd {
            let sum = report.cost_usd.get_or_insert(0.0);
            *sum = crate::budget::add_spent(*sum, c);
        }
        report.turns += u64::from(run.turns);
        spent.add(&crate::budget::Spent::of_report(&run));
        step_spent.add(&crate::budget::Spent::of_report(&run));
        report.budgets = shared(&spent).iter().flat_map(|b| b.lines()).collect();
        report.verdict = run.verdict;
        if run.output.is_some() {
            report.output.clone_from(&run.output);
        }
        if let Some(lost) = &run.output_lost
            && report.output_lost.is_none()
        {
            report.output_lost = Some(format!("iteration {iteration}: {lost}"));
        }
        let signalled = run.completion_signal_seen_ms.is_some();
        report.runs.push(SessionRun {
            iteration,
            output_retry: output_retry.is_some(),
            attempt,
            resumed,
            retried_because: None,
            retry_delay_ms: None,
            run_id: run.run_id.clone(),
            run_dir: run.run_dir.clone(),
            verdict: run.verdict,
            reason: run.reason.clone(),
            duration_ms: run.duration_ms,
            completion_signal_seen: signalled,
            tokens: run.tokens,
            cost_usd: run.cost_usd,
            turns: run.turns,
            commits: run.commits.clone(),
            exit_code: run.exit_code,
            signal: run.signal,
            ended_by_warden: run.ended_by_warden,
        });
        write_json(&held, &mut report, opts.report_signer.as_ref());

        match run.verdict {
            Some(Verdict::Cancelled) => {
                report.stopped_because = StopReason::Cancelled;
                break;
            }
            Some(Verdict::BudgetExceeded) => {
                report.stopped_because = StopReason::BudgetExceeded;
                report.budget_exceeded = run.budget_exceeded;
                break;
            }
            Some(Verdict::Succeeded) => {
                correction = None;
                if signalled {
                    report.stopped_because = StopReason::CompletionSignal;
                    break;
                }
            }
            _ => {
                if let Some(failure) = opts.retry.should_retry(&run, attempt - 1) {
                    // Nothing left of a budget: no retry would start, so
                    // none is announced or waited for (the wait can be
                    // minutes).
                    if let Some(line) = step_used_up(run_budget, &step_spent)
                        .or_else(|| shared(&spent).iter().find_map(|b| b.used_up()))
                    {
                        stop_used_up(&mut report, line);
                        break;
                    }
                    let hint = [
                        announced_wait.map(std::time::Duration::from_millis),
                        run.error_message
                            .as_deref()
                            .and_then(crate::retry::retry_after_in),
                    ]
                    .into_iter()
                    .flatten()
                    .max();
                    let delay = opts.retry.delay(attempt, crate::retry::jitter(), hint);
                    out.send(Update::RetryWaiting {
                        entry,
                        iteration,
                        attempt: attempt + 1,
                        attempts: opts.retry.retries + 1,
                        delay,
                        because: failure,
                    })
                    .await;
                    if !backoff(&control, delay).await {
                        // Cancelled while waiting: the session ends now.
                        report.verdict = Some(Verdict::Cancelled);
                        report.stopped_because = StopReason::Cancelled;
                        break;
                    }
                    // Only now is the run one that was tried again (a
                    // cancel during the wait leaves it the last).
                    if let Some(last) = report.runs.last_mut() {
                        last.retried_because = Some(failure);
                        last.retry_delay_ms = Some(delay.as_millis() as u64);
                    }
                    write_json(&held, &mut report, opts.report_signer.as_ref());
                    attempt += 1;
                    let progressed = run.turns > 0 || run.tool_calls > 0;
                    retry_of = Some(RetryOf {
                        failure,
                        resume: run
                            .session_id
                            .clone()
                            .filter(|_| opts.can_resume && progressed),
                    });
                    continue;
                }
                if run.output_error.is_some()
                    && retries_left > 0
                    && opts.can_resume
                    && let Some(session) = run.session_id.clone()
                {
                    retries_left -= 1;
                    output_retry = Some(opts.output_retries - retries_left);
                    attempt = 1;
                    correction = Some((session, run.reason.clone()));
                    continue;
                }
                report.stopped_because = StopReason::IterationFailed;
                break;
            }
        }
    }

    // Commits of the whole session, from where it started, and the
    // worktree's end. Each git is bounded in time; a cancel from now on
    // (a second Ctrl-C after a cancelled session, say) stops them at once,
    // since dropping the work kills the git it waits for.
    let seen = control.cancels();
    let end = async {
        let commits = git::commits_since(&workdir, base.as_deref()).await;
        let head = git::head(&workdir).await;
        let mut worktree_report = None;
        let mut not_home = None;
        if let Some(wt) = &worktree {
            let keep = opts.worktree.as_ref().is_some_and(|w| w.keep);
            let home = wt.bring_home().await;
            let dirty = git::is_dirty(&wt.path).await;
            let removed = wt.finish(keep, home.is_ok()).await;
            not_home = home.err().map(|e| {
                format!(
                    "the session's commits were not fetched into branch {} (the repository {} is kept): {e}",
                    wt.branch,
                    wt.path.display()
                )
            });
            worktree_report = Some(WorktreeReport {
                path: wt.path.clone(),
                branch: wt.branch.clone(),
                base: wt.base.clone(),
                removed,
                dirty,
                own_repository: wt.home.is_some(),
            });
        }
        (commits, head, worktree_report, not_home)
    };
    let mut end_error;
    tokio::select! {
        // Work that has finished wins over a cancel in the same instant.
        biased;
        (commits, head, worktree_report, not_home) = end => {
            end_error = not_home;
            match commits {
                Ok(c) if base.is_some() || head.is_some() => report.commits = Some(c),
                Ok(_) => {}
                Err(e) if git::in_work_tree(&workdir) => {
                    report.commits = None;
                    let e = format!("could not collect the session's commits: {e}");
                    end_error = Some(match end_error.take() {
                        Some(first) => format!("{first}; {e}"),
                        None => e,
                    });
                }
                Err(_) => {}
            }
            report.worktree = worktree_report;
        }
        () = control.cancelled_after(seen) => {
            report.commits = None;
            end_error = Some(
                "cancelled while git was reading the session's commits; the worktree, if any, is kept"
                    .into(),
            );
            report.worktree = worktree.as_ref().map(|wt| WorktreeReport {
                path: wt.path.clone(),
                branch: wt.branch.clone(),
                base: wt.base.clone(),
                removed: false,
                dirty: false,
                own_repository: wt.home.is_some(),
            });
        }
    }
    if let Some(e) = end_error {
        report.error = Some(match report.error.take() {
            Some(prev) => format!("{prev}; {e}"),
            None => e,
        });
    }
    report.duration_ms = started.elapsed().as_millis() as u64;
    if let Some(s) = &mut spans {
        report.otel = s.finish(&report);
    }
    write_json(&held, &mut report, opts.report_signer.as_ref());
    Ok(report)
}

/// Signs the final `run.json` of a batch entry's run, as the run wrote
/// it (the same bytes, from the same report): `run.json.mac`, beside it.
/// A report that could not be signed is counted, when read back, as one
/// that was not (see `batch_plan::attempts_spent`).
fn sign_run_report(signer: &ReportSigner, run: &crate::Report) {
    use std::io::Write;
    let Some(name) = run.run_dir.file_name().and_then(|n| n.to_str()) else {
        return;
    };
    let Ok(mut bytes) = serde_json::to_vec_pretty(run) else {
        return;
    };
    bytes.push(b'\n');
    let mac = signer.key.sign(Role::Run(signer.index, name), &bytes);
    // Through the run directory reached without following a link on the
    // way (as every write of warden's): a directory swapped for a link
    // must not take the sidecar elsewhere.
    let Ok(Some(dir)) = HeldDir::open_existing(&run.run_dir) else {
        return;
    };
    let _ = dir
        .create_file("run.json.mac")
        .and_then(|mut f| f.write_all(mac.as_bytes()));
}

/// Waits `delay` before a retry; `false` when the session was cancelled
/// before or during the wait (it ends at once, with no further run).
async fn backoff(control: &SessionControl, delay: std::time::Duration) -> bool {
    let seen = control.cancels();
    if control.stopped() {
        return false;
    }
    tokio::select! {
        () = tokio::time::sleep(delay) => !control.stopped(),
        () = control.cancelled_after(seen) => false,
    }
}

/// Writes `session.json` atomically through the session directory's
/// handle; a failure is kept in the report (after any error before it).
/// A batch's entry signs it too (`session.json.mac`).
fn write_json(dir: &HeldDir, report: &mut SessionReport, signer: Option<&ReportSigner>) {
    let written = serde_json::to_vec_pretty(&*report)
        .map_err(std::io::Error::from)
        .and_then(|mut bytes| {
            bytes.push(b'\n');
            dir.write_atomic("session.json", &bytes)?;
            match signer {
                Some(s) => dir.write_atomic(
                    "session.json.mac",
                    s.key.sign(Role::Session(s.index), &bytes).as_bytes(),
                ),
                None => Ok(()),
            }
        });
    report.written = written.is_ok();
    if let Err(e) = written {
        let e = format!("could not write session.json: {e}");
        report.error = Some(match report.error.take() {
            Some(first) if !first.contains(&e) => format!("{first}; {e}"),
            Some(first) => first,
            None => e.clone(),
        });
        report.output_lost.get_or_insert(e);
    }
}

/// A session of runs of one [`RunRequest`]: `session.iterations` runs
/// (until the completion signal or a failed run), in a new worktree if
/// asked, each wrong structured output resumed with a correction up to
/// `output.retries` times, each run that ended by a transient failure
/// tried again up to `retry.retries` times (after a backoff that a cancel
/// cuts short; see [`crate::retry`]). Writes `session.json`.
///
/// ```no_run
/// # async fn demo() -> Result<(), warden_run::SetupError> {
/// use warden_run::{RunRequest, session::Session, update::Update};
/// let mut request = RunRequest::exec(["sh", "-c", "echo step $WARDEN_RUN_ID"]);
/// request.session.iterations = 3;
/// let mut session = Session::new(request).start();
/// while let Some(update) = session.next_update().await {
///     if let Update::IterationFinished { iteration, report, .. } = update {
///         println!("{iteration}: {:?}", report.verdict);
///     }
/// }
/// let report = session.wait().await?;
/// println!("{} run(s), stopped by {}", report.iterations_run, report.stopped_because);
/// # Ok(()) }
/// ```
pub struct Session {
    request: RunRequest,
    control: SessionControl,
    telemetry: Option<crate::telemetry::Telemetry>,
}

impl Session {
    pub fn new(request: RunRequest) -> Self {
        Self {
            request,
            control: SessionControl::default(),
            telemetry: None,
        }
    }

    /// Exports the session's spans (and its runs') through `telemetry`.
    pub fn telemetry(mut self, telemetry: crate::telemetry::Telemetry) -> Self {
        self.telemetry = Some(telemetry);
        self
    }

    /// Stops the session from elsewhere (a signal handler, say).
    pub fn control(&self) -> SessionControl {
        self.control.clone()
    }

    /// Starts the session on the current tokio runtime.
    pub fn start(self) -> SessionHandle {
        let (tx, rx) = tokio::sync::mpsc::channel(crate::update::UPDATES_QUEUED);
        let control = self.control.clone();
        let task = tokio::spawn(run_request_pooled(
            self.request,
            self.control,
            Outbox::new(tx, None),
            None,
            self.telemetry,
        ));
        SessionHandle {
            updates: Some(rx),
            task,
            control,
        }
    }
}

/// Runs `request` as a session, saying what happens through `out`; with
/// the batch's budget held live in `pool`.
pub(crate) async fn run_request_pooled(
    request: RunRequest,
    control: SessionControl,
    mut out: Outbox,
    pool: Option<std::sync::Arc<crate::budget::BudgetPool>>,
    telemetry: Option<crate::telemetry::Telemetry>,
) -> Result<SessionReport, SetupError> {
    let mut opts = request.session_options();
    opts.budget_pool = pool;
    opts.telemetry = telemetry;
    run_session(
        opts,
        control,
        |ctx| request.spec(ctx).map_err(|e| e.to_string()),
        &mut out,
    )
    .await
}

/// A running session.
pub struct SessionHandle {
    updates: Option<tokio::sync::mpsc::Receiver<Update>>,
    task: tokio::task::JoinHandle<Result<SessionReport, SetupError>>,
    control: SessionControl,
}

impl SessionHandle {
    /// The next update; `None` once the session has ended.
    pub async fn next_update(&mut self) -> Option<Update> {
        self.updates.as_mut()?.recv().await
    }

    pub fn control(&self) -> SessionControl {
        self.control.clone()
    }

    /// Waits for the end of the session. The updates need not be read
    /// first: those not yet read are dropped.
    pub async fn wait(mut self) -> Result<SessionReport, SetupError> {
        self.updates = None;
        match self.task.await {
            Ok(r) => r,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
}
