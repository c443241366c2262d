//! The session's runs, one at a time: each started from the step the
//! [`super::phase`] machine chose, followed to its end, and counted (its
//! spending against the session's budgets, its line in `session.json`);
//! and the wait before a retry.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use warden_events::Tokens;

use super::control::{SessionControl, backoff};
use super::phase::{Input, RunEnd, Step, UsedUp};
use super::place::Place;
use super::report::{SessionReport, SessionRun, sign_run_report, write_json};
use crate::budget::{Budget, BudgetPool, BudgetScope, SharedBudget, Spent};
use crate::plan::RunPlan;
use crate::request::{CheckFailure, IterationContext, RequestError};
use crate::retry::RetryOn;
use crate::run::RunHandle;
use crate::telemetry::{SessionSpans, Telemetry};
use crate::update::{Outbox, Update};
use crate::{Report, RunRequest};

/// What the session keeps from run to run.
pub(super) struct Runs<'a> {
    pub(super) request: &'a RunRequest,
    pub(super) place: &'a Place,
    pool: Option<Arc<BudgetPool>>,
    pub(super) spans: Option<SessionSpans>,
    pub(super) entry: Option<usize>,
    /// What the last check said, when it failed: told to the iterations
    /// after it until a check passes.
    pub(super) check_failure: Option<CheckFailure>,
    /// With `--merge`: the commit the last check that passed ran on, or
    /// why what it ran on was no commit (changes never committed, or
    /// hidden from git by the index).
    pub(super) checked: Option<Result<String, String>>,
    /// What the session's runs spent, against its budget and its batch's.
    spent: Spent,
    /// What the attempts at this iteration spent (its retries, output
    /// retries included): the run's own budget holds for them together,
    /// else `--max-cost 0.50 --retries 3` could spend $2 on one iteration.
    step_spent: Spent,
    /// Each agent session's running total of tokens as its CLI last
    /// reported it, for CLIs whose usage counts the whole thread (Codex):
    /// a run that resumes one counts only what it adds.
    thread_totals: HashMap<String, Tokens>,
    /// The run's own budget, as the last run's plan had it.
    run_budget: Budget,
}

impl<'a> Runs<'a> {
    pub(super) fn new(
        request: &'a RunRequest,
        place: &'a Place,
        pool: Option<Arc<BudgetPool>>,
        telemetry: Option<&Telemetry>,
        started_at: SystemTime,
        entry: Option<usize>,
    ) -> Self {
        Runs {
            request,
            place,
            pool,
            spans: telemetry.map(|t| SessionSpans::new(t, started_at)),
            entry,
            check_failure: None,
            checked: None,
            spent: Spent::default(),
            step_spent: Spent::default(),
            thread_totals: HashMap::new(),
            run_budget: Budget::default(),
        }
    }

    /// The session's budget and its batch's, with what was spent against
    /// them.
    pub(super) fn shared(&self) -> Vec<SharedBudget> {
        let request = self.request;
        let mut all = Vec::new();
        if !request.session.budget.is_empty() {
            all.push(SharedBudget::new(
                BudgetScope::Session,
                request.session.budget,
                self.spent,
            ));
        }
        match (&self.pool, request.batch_budget) {
            // Its lines; the runs hold it live, not from this.
            (Some(pool), _) => all.push(pool.shared()),
            (None, Some(b)) => {
                let mut before = b.spent;
                before.add(&self.spent);
                all.push(SharedBudget::new(b.scope, b.budget, before));
            }
            (None, None) => {}
        }
        all
    }

    /// What of the budgets is used up by now.
    pub(super) fn used_up(&self) -> UsedUp {
        UsedUp {
            step: SharedBudget::new(BudgetScope::Run, self.run_budget, self.step_spent).used_up(),
            shared: self.shared().iter().find_map(SharedBudget::used_up),
        }
    }

    /// Starts the run of `step`, follows it to its end and counts it;
    /// what the session saw of it.
    pub(super) async fn run(
        &mut self,
        step: &Step,
        control: &SessionControl,
        out: &mut Outbox,
        report: &mut SessionReport,
    ) -> Input {
        if step.starts_iteration() {
            self.step_spent = Spent::default();
        }
        let run_dir = self.place.session_dir.join(step.run_name());
        // A resumed or corrected run is sent a note, not the template.
        let prompt_outputs = if step.retry_of.as_ref().is_some_and(|r| r.resume.is_some())
            || step.correction.is_some()
        {
            Default::default()
        } else {
            match self
                .prompt_commands(step.iteration, &step.run_name(), control, out, report)
                .await
            {
                Ok(o) => o,
                // A cancel ended the command: the session was cancelled,
                // its set-up did not fail.
                Err(_) if control.stopped() => return Input::CancelledBeforeStart,
                Err(e) => {
                    report.error = Some(e);
                    report.verdict = Some(crate::Verdict::SetupFailed);
                    return Input::SetupFailed;
                }
            }
        };
        let mut plan = match self.plan(step, &run_dir, prompt_outputs) {
            Ok(p) => p,
            Err(e) => {
                report.error = Some(e.to_string());
                return Input::SetupFailed;
            }
        };
        // For a CLI whose usage counts the whole thread: where this run's
        // own count starts.
        let thread_baseline =
            (plan.agent == warden_events::Agent::Codex).then_some(plan.shared.usage_baseline);
        // An agent's text is read below (`follow`), whatever the view.
        plan.shared.lines_off =
            plan.agent == warden_events::Agent::Exec && !control.takes_output_lines();
        let handle = match crate::run::start(plan).await {
            Ok(h) => h,
            Err(e) => {
                if e.is_storage() {
                    report.output_lost.get_or_insert_with(|| e.to_string());
                }
                report.error = Some(e.to_string());
                return Input::SetupFailed;
            }
        };
        control.set_current(Some(handle.canceller()));
        out.send(Update::IterationStarted {
            entry: self.entry,
            iteration: step.iteration,
            attempt: step.attempt,
            run_dir,
            run_id: handle.run_id().to_string(),
        })
        .await;
        let (run, announced_wait) = self.follow(handle, out).await;
        control.set_current(None);
        if let Some(signer) = &self.request.report_signer {
            sign_run_report(signer, &run);
        }
        if let Some(s) = &mut self.spans {
            s.run_ended(&run);
        }
        out.send(Update::IterationFinished {
            entry: self.entry,
            iteration: step.iteration,
            report: Box::new(run.clone()),
        })
        .await;
        self.count(step, &run, thread_baseline, report);
        Input::Ended(self.end_of(&run, announced_wait))
    }

    /// The plan of `step`'s run, in the session's place, holding its
    /// budgets.
    fn plan(
        &mut self,
        step: &Step,
        run_dir: &std::path::Path,
        prompt_outputs: std::collections::BTreeMap<String, String>,
    ) -> Result<RunPlan, RequestError> {
        let place = self.place;
        let ctx = IterationContext {
            iteration: step.iteration,
            iterations: self.request.session.iterations,
            workdir: place.workdir.clone(),
            run_dir: run_dir.to_path_buf(),
            branch: place.branch.clone(),
            base: place.base.clone(),
            correction: step.correction.clone(),
            retry_of: step.retry_of.clone(),
            check_failure: self.check_failure.clone(),
            prompt_outputs,
        };
        let mut plan = self.request.plan(&ctx)?;
        plan.run_dir = Some(run_dir.to_path_buf());
        place.fit(&mut plan);
        plan.shared.budgets = self
            .shared()
            .into_iter()
            .filter(|b| self.pool.is_none() || b.scope != BudgetScope::Batch)
            .collect();
        plan.shared.pool.clone_from(&self.pool);
        plan.shared.spent_before = self.step_spent;
        if plan.agent == warden_events::Agent::Codex
            && let Some(total) = step.resuming().and_then(|s| self.thread_totals.get(s))
        {
            plan.shared.usage_baseline = *total;
        }
        self.run_budget = plan.limits.budget;
        if let Some(s) = &mut self.spans {
            plan.shared.telemetry = Some(s.run(step.iteration));
        }
        Ok(plan)
    }

    /// Passes the run's events on until it ends; its report, and the wait
    /// the agent itself announced last (a CLI that computes it from the
    /// server's retry-after): the least a retry waits. Only one after the
    /// model's last answer: a retry the model answered got through, and
    /// its wait says nothing of the failure that ended the run.
    async fn follow(&self, mut handle: RunHandle, out: &mut Outbox) -> (Report, Option<u64>) {
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
            out.send(Update::Event {
                entry: self.entry,
                event,
            })
            .await;
        }
        (handle.report().await, announced_wait)
    }

    /// Counts the run into the session's totals and budgets, lists it in
    /// `session.json`, and writes that.
    fn count(
        &mut self,
        step: &Step,
        run: &Report,
        thread_baseline: Option<Tokens>,
        report: &mut SessionReport,
    ) {
        report.iterations_run = step.iteration;
        // In a worktree the session's branch stays its worktree's.
        if self.place.worktree.is_none() {
            report.branch.clone_from(&run.branch);
        }
        if let Some(baseline) = thread_baseline
            && let Some(id) = &run.reported.session_id
        {
            let mut total = baseline;
            total.add(&run.reported.tokens);
            self.thread_totals.insert(id.clone(), total);
        }
        report.tokens.add(&run.reported.tokens);
        if let Some(c) = run.reported.cost_usd {
            let sum = report.cost_usd.get_or_insert(0.0);
            *sum = crate::budget::add_spent(*sum, c);
        }
        report.turns += u64::from(run.reported.turns);
        self.spent.add(&Spent::of_report(run));
        self.step_spent.add(&Spent::of_report(run));
        report.budgets = self.shared().iter().flat_map(|b| b.lines()).collect();
        report.verdict = run.verdict;
        if run.output.is_some() {
            report.output.clone_from(&run.output);
        }
        if let Some(lost) = &run.output_lost
            && report.output_lost.is_none()
        {
            report.output_lost = Some(format!("iteration {}: {lost}", step.iteration));
        }
        report.runs.push(SessionRun {
            iteration: step.iteration,
            output_retry: step.output_retry.is_some(),
            attempt: step.attempt,
            attempts: self.request.retry.retries.saturating_add(1),
            resumed: step.resumed(),
            retried_because: None,
            retry_delay_ms: None,
            run_id: run.run_id.clone(),
            run_dir: run.run_dir.clone(),
            verdict: run.verdict,
            reason: run.reason.clone(),
            duration_ms: run.duration_ms,
            completion_signal_seen: run.completion_signal_seen_ms.is_some(),
            tokens: run.reported.tokens,
            cost_usd: run.reported.cost_usd,
            turns: run.reported.turns,
            commits: run.commits.clone(),
            exit_code: run.exit_code,
            signal: run.signal,
            ended_by_warden: run.ended_by_warden,
        });
        self.write(report);
    }

    /// How `run` ended, for the session's decision, with the budgets once
    /// it is counted.
    fn end_of(&self, run: &Report, announced_wait: Option<u64>) -> RunEnd {
        let retry_after = [
            announced_wait.map(Duration::from_millis),
            run.reported
                .error_message
                .as_deref()
                .and_then(crate::retry::retry_after_in),
        ]
        .into_iter()
        .flatten()
        .max();
        RunEnd {
            verdict: run.verdict,
            signalled: run.completion_signal_seen_ms.is_some(),
            budget_exceeded: run.budget_exceeded,
            transient: crate::retry::transient_failure(run),
            retry_after,
            output_refused: run.output_error.is_some(),
            agent_session: run.reported.session_id.clone(),
            reason: run.reason.clone(),
            progressed: run.reported.turns > 0 || run.reported.tool_calls > 0,
            used_up: self.used_up(),
            jitter: crate::retry::jitter(),
        }
    }

    /// Says a retry for `failure` is coming and waits `delay` before
    /// `step`, its next attempt; whether a cancel came before or during
    /// the wait. Only once the wait is over is the last run one that was
    /// tried again (a cancel during it leaves that run the session's
    /// last).
    pub(super) async fn back_off(
        &self,
        step: &Step,
        failure: RetryOn,
        delay: Duration,
        control: &SessionControl,
        out: &mut Outbox,
        report: &mut SessionReport,
    ) -> bool {
        out.send(Update::RetryWaiting {
            entry: self.entry,
            iteration: step.iteration,
            attempt: step.attempt,
            attempts: self.request.retry.retries + 1,
            delay,
            because: failure,
        })
        .await;
        if !backoff(control, delay).await {
            return true;
        }
        if let Some(last) = report.runs.last_mut() {
            last.retried_because = Some(failure);
            last.retry_delay_ms = Some(delay.as_millis() as u64);
        }
        self.write(report);
        false
    }

    /// Writes `session.json` (signed for a batch's entry).
    pub(super) fn write(&self, report: &mut SessionReport) {
        write_json(
            &self.place.held,
            report,
            self.request.report_signer.as_ref(),
        );
    }
}
