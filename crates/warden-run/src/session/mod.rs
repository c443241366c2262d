//! A session: runs of the same task, one fresh agent process each, in the
//! same directory (a new git worktree on its own branch, if asked), until
//! the agent prints the completion signal (with a check: until the check
//! passes), an iteration fails, or the iterations run out. Around the
//! runs, the commands the request names (`steps`): setup hooks before
//! the first, the check after each, the prompt's commands before each,
//! the wrap-up hooks at the end; then the worktree's end and the merge.
//! A run that ended by a transient failure is tried again (`--retries`),
//! each attempt in its own directory (`iteration-N-attempt-K`). Writes
//! `session.json` with every run and the totals.
//!
//! [`Session`] runs one [`RunRequest`] so; each iteration's spec is built
//! from the request (the prompt may use `{{ITERATION}}`), and everything
//! that happens comes out of its handle as [`Update`]s.
//!
//! What the session decides after each run (another iteration, an output
//! retry, a retry after a backoff, or the end and why) is the `phase`
//! module's pure transition; the loop here only does what each phase
//! says: `place` makes the directory and the worktree (and collects the
//! commits and merges at the end), `runs` starts and counts the runs,
//! `steps` runs the checks, hooks and prompt commands, `report` is
//! `session.json`.

use std::time::{Instant, SystemTime};

use crate::outcome::Outcome;
use crate::update::{Outbox, Update};
use crate::{Canceller, RunRequest, SetupError};

mod control;
mod phase;
mod place;
mod report;
mod runs;
mod steps;

pub use control::SessionControl;
pub use report::{SessionReport, SessionRun, StepKind, StepReport, StopReason, WorktreeReport};

use phase::{Input, Phase, Rules};
use place::Place;
use runs::Runs;

/// Runs the session to its end, saying what happens through `out`.
/// Errors only when nothing could start.
pub(crate) async fn run_session(
    request: &RunRequest,
    pool: Option<std::sync::Arc<crate::budget::BudgetPool>>,
    telemetry: Option<crate::telemetry::Telemetry>,
    control: SessionControl,
    out: &mut Outbox,
) -> Result<SessionReport, SetupError> {
    let name = request
        .session
        .name
        .clone()
        .unwrap_or_else(|| request.agent.name().to_string());
    let started = Instant::now();
    let started_at = SystemTime::now();
    let session_id = crate::held_dir::new_run_id(started_at);
    let place = Place::make(request, &name, &session_id, out).await?;
    let mut report = SessionReport::begin(
        session_id,
        name,
        &place,
        started_at,
        request.session.iterations,
    );
    let mut runs = Runs::new(
        request,
        &place,
        pool,
        telemetry.as_ref(),
        started_at,
        out.entry(),
    );
    report.budgets = runs.shared().iter().flat_map(|b| b.lines()).collect();
    let rules = Rules {
        iterations: request.session.iterations,
        output_retries: request.output.as_ref().map_or(0, |o| o.retries),
        can_resume: warden_agents::profile(request.agent).can_resume,
        retry: request.retry.clone(),
        check: request.session.check.is_some(),
        check_first: request.session.check.as_ref().is_some_and(|c| c.first),
    };
    if runs.setup(&control, out, &mut report).await {
        let stop = work(&mut runs, &rules, &control, out, &mut report).await;
        stop.record(&mut report);
        // The check, not the agent, is named for how the session ended
        // (a check that could not run says so itself, and the last one in
        // the list may be an earlier iteration's).
        if stop == phase::Stop::CheckFailed
            && let Some(last) = report.checks.last()
        {
            let e = format!(
                "the check `{}` still failed after iteration {}: it {} (its output: {})",
                last.command,
                last.iteration.unwrap_or(0),
                last.how(),
                last.run_dir.display()
            );
            report.note_error(e);
        }
    }
    runs.wrap_up(&control, out, &mut report).await;

    let home = place.finish(request, &control, &mut report).await;
    if request.session.merge && report.verdict == Some(crate::Verdict::Succeeded) {
        // A cancel before the merge began: nothing is merged.
        let home = if control.stopped() {
            place::Home::Cancelled
        } else {
            home
        };
        place
            .merge(request, &control, &mut report, home, runs.checked.as_ref())
            .await;
    }
    report.duration_ms = started.elapsed().as_millis() as u64;
    if let Some(s) = &mut runs.spans {
        report.otel = s.finish(&report);
    }
    runs.write(&mut report);
    Ok(report)
}

/// The session's iterations (and its checks), each decided by the
/// `phase` machine; why they stopped.
async fn work(
    runs: &mut Runs<'_>,
    rules: &Rules,
    control: &SessionControl,
    out: &mut Outbox,
    report: &mut SessionReport,
) -> phase::Stop {
    let mut phase = Phase::start(rules);
    loop {
        let input = match &phase {
            Phase::Between(_) => Input::Look {
                cancelled: control.stopped(),
                used_up: runs.used_up(),
            },
            Phase::Running(step) => runs.run(step, control, out, report).await,
            Phase::Backoff {
                step,
                failure,
                delay,
            } => Input::Waited {
                cancelled: runs
                    .back_off(step, *failure, *delay, control, out, report)
                    .await,
            },
            Phase::Checking { done, .. } => {
                Input::Checked(runs.check(*done, control, out, report).await)
            }
            Phase::Stopped(stop) => return *stop,
        };
        phase = phase.on(input, rules);
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
/// use warden_run::{RunRequest, Session, Update};
/// let mut request = RunRequest::exec(["sh", "-c", "echo step $WARDEN_RUN_ID"]);
/// request.session.iterations = 3;
/// let mut session = Session::new(request).start().await?;
/// while let Some(update) = session.next_update().await {
///     if let Update::IterationFinished { iteration, report, .. } = update {
///         println!("{iteration}: {:?}", report.verdict);
///     }
/// }
/// let outcome = session.wait().await?;
/// let report = &outcome.report;
/// println!("{}: {} run(s), stopped by {}", outcome.verdict, report.iterations_run, report.stopped_because);
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

    /// Starts the session on the current tokio runtime. A request that
    /// cannot run is an error here (checked as [`RunRequest::check`]
    /// does); what stops the session once started (a worktree that cannot
    /// be made) comes from [`SessionHandle::wait`].
    pub async fn start(self) -> Result<SessionHandle, SetupError> {
        self.request.check()?;
        let (tx, rx) = tokio::sync::mpsc::channel(crate::update::UPDATES_QUEUED);
        let control = self.control.clone();
        let task = tokio::spawn(run_request_pooled(
            self.request,
            self.control,
            Outbox::new(tx, None),
            None,
            self.telemetry,
        ));
        Ok(SessionHandle {
            updates: Some(rx),
            task,
            control,
        })
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
    run_session(&request, pool, telemetry, control, &mut out).await
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

    /// Stops the session from elsewhere (a signal handler, say): the
    /// current run is cancelled and no further one starts; a second
    /// cancel kills the run.
    pub fn canceller(&self) -> Canceller {
        Canceller(std::sync::Arc::new(self.control.clone()))
    }

    /// Leaves the output lines of the session's `exec` runs started after
    /// this call out of its updates, for a caller that shows none of them (see
    /// [`RunHandle::without_output_lines`](crate::RunHandle::without_output_lines)).
    /// An agent's runs keep their `text` events: the session reads them to
    /// learn that the model answered after a failure it announced a wait
    /// for.
    pub fn without_output_lines(&self) {
        self.control.without_output_lines();
    }

    /// Waits for the end of the session. The updates need not be read
    /// first: those not yet read are dropped. Errors only when nothing
    /// could start (the session's directory, its worktree).
    pub async fn wait(mut self) -> Result<Outcome<SessionReport>, SetupError> {
        self.updates = None;
        match self.task.await {
            Ok(r) => r.map(Outcome::of_session),
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
}
