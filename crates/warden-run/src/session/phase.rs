//! The decisions of a session, as a type, and the pure function that moves
//! a session from one phase to the next.
//!
//! ```text
//! Between ─look: not cancelled, an iteration and the budgets left──▶ Running
//! Running ─ended: succeeded, no completion signal──────────────────▶ Between (the next iteration)
//!         ─ended: succeeded, with a check (signal or not)──────────▶ Checking
//!         ─ended: output refused, output retries left──────────────▶ Between (the same, corrected)
//!         ─ended: transient failure, retries and budgets left──────▶ Backoff
//! Backoff ─waited, not cancelled───────────────────────────────────▶ Between (the next attempt)
//! Checking ─checked: failed (its output goes to the next)──────────▶ Between (the next iteration)
//! ```
//!
//! With a check, the check decides: the completion signal alone does not
//! end the session (the agent may believe it is done and be wrong), and
//! a session whose iterations run out with the check failing ends
//! `check_failed`. `--check-first` starts in `Checking`: a check that
//! already passes ends the session before any agent runs. A cancel before
//! the check passed ends it `cancelled`, whatever the last run's verdict.
//!
//! Anything else ends in `Stopped`, with the reason the report gives: a
//! cancel (at a look, of the run, its prompt's commands or the check,
//! during the wait), the iterations run out, a budget used up (at a
//! look, before a retry) or exceeded by the run, the completion signal,
//! a run that failed or could not be set up.
//!
//! Each phase carries the step it is at: which iteration, which output
//! retry, which attempt, and what the run is told of the run before it (a
//! correction to send, an agent session to resume). [`Phase::on`] takes
//! the phase, an [`Input`] and the session's [`Rules`], and returns the
//! next phase; the session loop (in `mod.rs`) does what the phase says
//! (look at the cancel and the budgets, start the run, wait the backoff)
//! and feeds back what it saw. Neither the directory, the runs nor the
//! clock are touched here, so each decision is tested with plain values.

use std::time::Duration;

use super::report::{SessionReport, StopReason};
use crate::Verdict;
use crate::budget::BudgetLine;
use crate::request::RetryOf;
use crate::retry::{RetryOn, RetryPolicy};

/// What holds for the whole session.
#[derive(Debug, Clone)]
pub(super) struct Rules {
    pub(super) iterations: u32,
    /// How many output retries the session may make, over all its
    /// iterations.
    pub(super) output_retries: u32,
    /// The agent's CLI can resume a session of its own (an output retry
    /// needs it; a retry of a transient failure resumes only with it).
    pub(super) can_resume: bool,
    pub(super) retry: RetryPolicy,
    /// A check runs after each iteration that succeeded.
    pub(super) check: bool,
    /// The check runs once before the first iteration too.
    pub(super) check_first: bool,
}

/// One run of the session, as decided before it starts.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Step {
    pub(super) iteration: u32,
    /// The output retry this step is (`iteration-N-retry-M`), if it is
    /// one; numbered over the whole session.
    pub(super) output_retry: Option<u32>,
    /// The attempt at this step: one more for each transient failure.
    pub(super) attempt: u32,
    /// For an output retry: the agent's session to resume and the
    /// correction to send. Kept for an attempt that starts afresh: it is
    /// sent again.
    pub(super) correction: Option<(String, String)>,
    /// For a retry of a transient failure: the failure, and the agent's
    /// session to resume, if any.
    pub(super) retry_of: Option<RetryOf>,
    /// What is left of the session's output retries.
    pub(super) output_retries_left: u32,
}

impl Step {
    fn first(iteration: u32, output_retries_left: u32) -> Step {
        Step {
            iteration,
            output_retry: None,
            attempt: 1,
            correction: None,
            retry_of: None,
            output_retries_left,
        }
    }

    /// The first run of its iteration: what the attempts at the iteration
    /// spent (against the run's own budget) starts from nothing.
    pub(super) fn starts_iteration(&self) -> bool {
        self.output_retry.is_none() && self.attempt == 1
    }

    /// The name of the run's directory in the session's:
    /// `iteration-N`, `-retry-M` for an output retry, `-attempt-K` for a
    /// retry of a transient failure.
    pub(super) fn run_name(&self) -> String {
        let mut name = match self.output_retry {
            Some(m) => format!("iteration-{}-retry-{m}", self.iteration),
            None => format!("iteration-{}", self.iteration),
        };
        if self.attempt > 1 {
            name.push_str(&format!("-attempt-{}", self.attempt));
        }
        name
    }

    /// Whether this attempt resumes the agent's session of the attempt
    /// before (else it starts afresh).
    pub(super) fn resumed(&self) -> bool {
        self.retry_of.as_ref().is_some_and(|r| r.resume.is_some())
    }

    /// The agent's session this run resumes, if any (as the plan picks).
    pub(super) fn resuming(&self) -> Option<&str> {
        self.retry_of
            .as_ref()
            .and_then(|r| r.resume.as_deref())
            .or_else(|| self.correction.as_ref().map(|(s, _)| s.as_str()))
    }
}

/// What runs after the last run, if the session goes on.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Next {
    /// The iteration after `done` (0 before the first); `check_failed`:
    /// the check of `done` failed.
    Iteration {
        done: u32,
        output_retries_left: u32,
        check_failed: bool,
    },
    /// The same iteration once more: an output retry, or another attempt
    /// after a transient failure.
    Again(Step),
}

/// Where a session is.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Phase {
    /// No run going; the session looks at the cancel and the budgets
    /// before it starts the next.
    Between(Next),
    /// The run of this step is being started, or is running.
    Running(Step),
    /// A run ended by a transient `failure`: waiting `delay` before
    /// `step`, its next attempt (a cancel cuts the wait short).
    Backoff {
        step: Step,
        failure: RetryOn,
        delay: Duration,
    },
    /// The check of iteration `done` (0: `--check-first`) is running.
    Checking { done: u32, output_retries_left: u32 },
    /// No further run starts.
    Stopped(Stop),
}

/// How a check ended, as far as the session's decisions go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CheckEnd {
    /// Exit 0.
    Passed,
    /// Any other end of a check that ran: a non-zero exit, its own clock
    /// (a hanging test is the work's to fix, and is told as such).
    Failed,
    Cancelled,
    /// It could not be run (its directory, its sandbox, its program).
    Broken,
}

/// What is used up of the budgets, with what every run so far spent.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct UsedUp {
    /// The run's own budget, over the attempts at the current iteration
    /// (its retries and output retries).
    pub(super) step: Option<BudgetLine>,
    /// The session's, or its batch's.
    pub(super) shared: Option<BudgetLine>,
}

/// How a run ended, as far as the session's decisions go.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct RunEnd {
    pub(super) verdict: Option<Verdict>,
    pub(super) signalled: bool,
    /// The budget the run exceeded, if it named one.
    pub(super) budget_exceeded: Option<BudgetLine>,
    /// The transient failure the run ended by, if it did
    /// ([`crate::retry::transient_failure`]).
    pub(super) transient: Option<RetryOn>,
    /// The least a retry waits: the wait the agent announced, or the
    /// retry-after in its error.
    pub(super) retry_after: Option<Duration>,
    /// The run's structured output was refused.
    pub(super) output_refused: bool,
    /// The agent's own session, which a later run may resume.
    pub(super) agent_session: Option<String>,
    /// Why the run ended: what an output retry tells the agent to fix.
    pub(super) reason: String,
    /// The model answered at least once (a turn, a tool call): there is
    /// something to resume.
    pub(super) progressed: bool,
    /// The budgets once the run's spending is counted.
    pub(super) used_up: UsedUp,
    /// A uniform draw in `[0, 1)`: the backoff's jitter.
    pub(super) jitter: f64,
}

/// Something the session loop saw.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Input {
    /// A look before the next run: whether the session was cancelled, and
    /// what of its budgets is used up.
    Look { cancelled: bool, used_up: UsedUp },
    /// The run could not be set up (its plan, its directory, its sandbox).
    SetupFailed,
    /// A cancel came while the run was being set up (its prompt's
    /// commands running): it never started.
    CancelledBeforeStart,
    /// The run ended.
    Ended(RunEnd),
    /// The backoff is over; `cancelled`: a cancel came before or during
    /// it.
    Waited { cancelled: bool },
    /// The check ended.
    Checked(CheckEnd),
}

/// Why no further run starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Stop {
    CompletionSignal,
    CheckPassed,
    /// The iterations ran out with the check failing.
    CheckFailed,
    /// The check could not be run.
    CheckBroken,
    IterationsExhausted,
    IterationFailed,
    /// `between_attempts`: after a run that was to be tried again, so the
    /// session's verdict is `cancelled`, not that run's.
    Cancelled {
        between_attempts: bool,
    },
    /// A cancel that leaves no run whose verdict stands for the
    /// session's: before the check passed (while it ran, or after it
    /// failed: the last run's `succeeded` is not confirmed), or while an
    /// iteration's prompt commands ran (its agent never started). The
    /// session's verdict is `cancelled` (nor may `--on-success` or
    /// `--merge` take it as succeeded).
    CancelledUnconfirmed,
    /// A run exceeded a budget (the line it names, if any).
    BudgetExceeded(Option<BudgetLine>),
    /// Nothing was left of a budget for another run.
    UsedUp(BudgetLine),
    SetupFailed,
}

impl Stop {
    pub(super) fn reason(self) -> StopReason {
        match self {
            Stop::CompletionSignal => StopReason::CompletionSignal,
            Stop::CheckPassed => StopReason::CheckPassed,
            Stop::CheckFailed | Stop::IterationsExhausted => StopReason::IterationsExhausted,
            Stop::CheckBroken => StopReason::SetupFailed,
            Stop::IterationFailed => StopReason::IterationFailed,
            Stop::Cancelled { .. } | Stop::CancelledUnconfirmed => StopReason::Cancelled,
            Stop::BudgetExceeded(_) | Stop::UsedUp(_) => StopReason::BudgetExceeded,
            Stop::SetupFailed => StopReason::SetupFailed,
        }
    }

    /// Writes why the session stopped into its report (the verdict stays
    /// its last run's, unless the stop says otherwise).
    pub(super) fn record(self, report: &mut SessionReport) {
        report.stopped_because = self.reason();
        match self {
            Stop::Cancelled {
                between_attempts: true,
            }
            | Stop::CancelledUnconfirmed => report.verdict = Some(Verdict::Cancelled),
            Stop::BudgetExceeded(line) => report.budget_exceeded = line,
            // The check decides (with `--check-first`, before any run).
            Stop::CheckPassed => report.verdict = Some(Verdict::Succeeded),
            Stop::CheckFailed | Stop::CheckBroken => report.verdict = Some(Verdict::CheckFailed),
            Stop::UsedUp(line) => {
                report.verdict = Some(Verdict::BudgetExceeded);
                report.budget_exceeded = Some(line);
                report.error = Some(format!("no further run started: {}", line.used_up()));
            }
            _ => {}
        }
    }
}

impl Phase {
    /// Before the first run.
    pub(super) fn start(rules: &Rules) -> Phase {
        if rules.check && rules.check_first {
            return Phase::Checking {
                done: 0,
                output_retries_left: rules.output_retries,
            };
        }
        Phase::Between(Next::Iteration {
            done: 0,
            output_retries_left: rules.output_retries,
            check_failed: false,
        })
    }

    /// The phase after `input`. An input that does not belong to the
    /// phase changes nothing.
    pub(super) fn on(self, input: Input, rules: &Rules) -> Phase {
        match (self, input) {
            (Phase::Between(next), Input::Look { cancelled, used_up }) => {
                next.look(cancelled, used_up, rules)
            }
            (Phase::Running(_), Input::SetupFailed) => Phase::Stopped(Stop::SetupFailed),
            (Phase::Running(_), Input::CancelledBeforeStart) => {
                Phase::Stopped(Stop::CancelledUnconfirmed)
            }
            (Phase::Running(step), Input::Ended(end)) => step.ended(end, rules),
            (Phase::Backoff { .. }, Input::Waited { cancelled: true }) => {
                Phase::Stopped(Stop::Cancelled {
                    between_attempts: true,
                })
            }
            (Phase::Backoff { step, .. }, Input::Waited { cancelled: false }) => {
                Phase::Between(Next::Again(step))
            }
            (
                Phase::Checking {
                    done,
                    output_retries_left,
                },
                Input::Checked(end),
            ) => match end {
                CheckEnd::Passed => Phase::Stopped(Stop::CheckPassed),
                CheckEnd::Failed => Phase::Between(Next::Iteration {
                    done,
                    output_retries_left,
                    check_failed: true,
                }),
                CheckEnd::Cancelled => Phase::Stopped(Stop::CancelledUnconfirmed),
                CheckEnd::Broken => Phase::Stopped(Stop::CheckBroken),
            },
            (phase, _) => phase,
        }
    }
}

impl Next {
    /// Whether the next run starts. A run with nothing left of a budget
    /// would exceed it at its first model call: none starts (a retry
    /// included). The run's own budget holds for the attempts at an
    /// iteration together, so it counts only for one more of them.
    fn look(self, cancelled: bool, used_up: UsedUp, rules: &Rules) -> Phase {
        if cancelled {
            if matches!(
                self,
                Next::Iteration {
                    check_failed: true,
                    ..
                }
            ) {
                return Phase::Stopped(Stop::CancelledUnconfirmed);
            }
            let between_attempts = matches!(&self, Next::Again(s) if s.retry_of.is_some());
            return Phase::Stopped(Stop::Cancelled { between_attempts });
        }
        match self {
            Next::Iteration {
                done, check_failed, ..
            } if done >= rules.iterations => Phase::Stopped(if check_failed {
                Stop::CheckFailed
            } else {
                Stop::IterationsExhausted
            }),
            Next::Iteration {
                done,
                output_retries_left,
                ..
            } => match used_up.shared {
                Some(line) => Phase::Stopped(Stop::UsedUp(line)),
                None => Phase::Running(Step::first(done + 1, output_retries_left)),
            },
            Next::Again(step) => match used_up.step.or(used_up.shared) {
                Some(line) => Phase::Stopped(Stop::UsedUp(line)),
                None => Phase::Running(step),
            },
        }
    }
}

impl Step {
    fn ended(self, end: RunEnd, rules: &Rules) -> Phase {
        match end.verdict {
            Some(Verdict::Cancelled) => Phase::Stopped(Stop::Cancelled {
                between_attempts: false,
            }),
            Some(Verdict::BudgetExceeded) => {
                Phase::Stopped(Stop::BudgetExceeded(end.budget_exceeded))
            }
            Some(Verdict::Succeeded) if rules.check => Phase::Checking {
                done: self.iteration,
                output_retries_left: self.output_retries_left,
            },
            Some(Verdict::Succeeded) if end.signalled => Phase::Stopped(Stop::CompletionSignal),
            Some(Verdict::Succeeded) => Phase::Between(Next::Iteration {
                done: self.iteration,
                output_retries_left: self.output_retries_left,
                check_failed: false,
            }),
            _ => self.failed(end, rules),
        }
    }

    /// After a run that did not succeed: another attempt after a transient
    /// failure (retries first), an output retry, or the end.
    fn failed(self, end: RunEnd, rules: &Rules) -> Phase {
        let retried = end
            .transient
            .filter(|&f| rules.retry.retries_again(f, self.attempt - 1));
        if let Some(failure) = retried {
            // Nothing left of a budget: no retry would start, so none is
            // announced or waited for (the wait can be minutes).
            if let Some(line) = end.used_up.step.or(end.used_up.shared) {
                return Phase::Stopped(Stop::UsedUp(line));
            }
            let delay = rules.retry.delay(self.attempt, end.jitter, end.retry_after);
            let resume = end
                .agent_session
                .filter(|_| rules.can_resume && end.progressed);
            let step = Step {
                attempt: self.attempt + 1,
                retry_of: Some(RetryOf { failure, resume }),
                ..self
            };
            return Phase::Backoff {
                step,
                failure,
                delay,
            };
        }
        if end.output_refused
            && self.output_retries_left > 0
            && rules.can_resume
            && let Some(session) = end.agent_session
        {
            let left = self.output_retries_left - 1;
            return Phase::Between(Next::Again(Step {
                iteration: self.iteration,
                output_retry: Some(rules.output_retries - left),
                attempt: 1,
                correction: Some((session, end.reason)),
                retry_of: None,
                output_retries_left: left,
            }));
        }
        Phase::Stopped(Stop::IterationFailed)
    }
}

#[cfg(test)]
mod tests;
