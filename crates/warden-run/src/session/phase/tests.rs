//! The session's decisions, fed what its loop would see.

use std::path::PathBuf;
use std::time::Duration;

use super::*;
use crate::budget::{BudgetKind, BudgetScope};

fn rules(iterations: u32) -> Rules {
    Rules {
        iterations,
        output_retries: 0,
        can_resume: true,
        retry: RetryPolicy {
            retries: 0,
            ..RetryPolicy::default()
        },
        check: false,
        check_first: false,
    }
}

fn line(scope: BudgetScope) -> BudgetLine {
    BudgetLine {
        scope,
        budget: BudgetKind::Cost,
        limit: 1.0,
        spent_before: 0.0,
        reached: 1.02,
    }
}

/// A run that ended with `verdict`, nothing else to say.
fn ended(verdict: Verdict) -> RunEnd {
    RunEnd {
        verdict: Some(verdict),
        signalled: false,
        budget_exceeded: None,
        transient: None,
        retry_after: None,
        output_refused: false,
        agent_session: Some("thread-1".into()),
        reason: "the output did not match its schema".into(),
        progressed: true,
        used_up: UsedUp::default(),
        jitter: 0.5,
    }
}

/// A run that failed on HTTP 429.
fn rate_limited() -> RunEnd {
    RunEnd {
        transient: Some(RetryOn::RateLimited),
        ..ended(Verdict::AgentFailed)
    }
}

/// A run whose structured output was refused.
fn refused() -> RunEnd {
    RunEnd {
        output_refused: true,
        ..ended(Verdict::AgentFailed)
    }
}

fn look() -> Input {
    Input::Look {
        cancelled: false,
        used_up: UsedUp::default(),
    }
}

fn cancel() -> Input {
    Input::Look {
        cancelled: true,
        used_up: UsedUp::default(),
    }
}

/// Drives the machine as the session loop does, keeping every step that
/// ran.
struct Session {
    rules: Rules,
    phase: Phase,
    ran: Vec<Step>,
}

impl Session {
    fn new(rules: Rules) -> Self {
        let phase = Phase::start(&rules);
        Session {
            rules,
            phase,
            ran: Vec::new(),
        }
    }

    fn feed(&mut self, input: Input) -> &Phase {
        let phase = std::mem::replace(&mut self.phase, Phase::Stopped(Stop::SetupFailed));
        self.phase = phase.on(input, &self.rules);
        if let Phase::Running(step) = &self.phase {
            self.ran.push(step.clone());
        }
        &self.phase
    }

    /// Looks (nothing cancelled or used up), runs the step, and ends it so.
    fn run(&mut self, end: RunEnd) -> &Phase {
        self.feed(look());
        assert!(
            matches!(self.phase, Phase::Running(_)),
            "no run started: {:?}",
            self.phase
        );
        self.feed(Input::Ended(end))
    }

    fn stopped(&self) -> Stop {
        match &self.phase {
            Phase::Stopped(stop) => *stop,
            other => panic!("the session did not stop: {other:?}"),
        }
    }

    fn last(&self) -> &Step {
        self.ran.last().expect("a run")
    }
}

fn empty_report() -> SessionReport {
    SessionReport {
        schema_version: warden_events::SchemaVersion,
        session_id: "s".into(),
        name: "n".into(),
        session_dir: PathBuf::from("/s"),
        workdir: PathBuf::from("/w"),
        worktree: None,
        branch: None,
        started_at: String::new(),
        duration_ms: 0,
        iterations_requested: 1,
        iterations_run: 1,
        stopped_because: StopReason::IterationsExhausted,
        verdict: Some(Verdict::AgentFailed),
        runs: Vec::new(),
        tokens: Default::default(),
        cost_usd: None,
        turns: 0,
        budgets: Vec::new(),
        budget_exceeded: None,
        commits: Some(Vec::new()),
        otel: None,
        output: None,
        error: None,
        output_lost: None,
        checks: Vec::new(),
        hooks: Vec::new(),
        merged_into: None,
        merge_commit: None,
        merge_conflicts: Vec::new(),
        written: false,
    }
}

#[test]
fn every_iteration_runs_then_the_session_stops_as_iterations_exhausted() {
    let mut s = Session::new(rules(3));
    for _ in 0..3 {
        s.run(ended(Verdict::Succeeded));
    }
    assert_eq!(s.feed(look()), &Phase::Stopped(Stop::IterationsExhausted));
    let names: Vec<String> = s.ran.iter().map(Step::run_name).collect();
    assert_eq!(names, ["iteration-1", "iteration-2", "iteration-3"]);
    assert!(s.ran.iter().all(Step::starts_iteration));
}

#[test]
fn the_completion_signal_stops_the_session_only_after_a_succeeded_run() {
    let mut s = Session::new(rules(5));
    s.run(ended(Verdict::Succeeded));
    s.run(RunEnd {
        signalled: true,
        ..ended(Verdict::Succeeded)
    });
    assert_eq!(s.stopped(), Stop::CompletionSignal);
    assert_eq!(s.ran.len(), 2);

    // A failed run that printed the signal failed all the same.
    let mut s = Session::new(rules(5));
    s.run(RunEnd {
        signalled: true,
        ..ended(Verdict::AgentFailed)
    });
    assert_eq!(s.stopped(), Stop::IterationFailed);
}

#[test]
fn a_run_that_did_not_succeed_stops_the_session_as_iteration_failed() {
    for verdict in [
        Verdict::AgentFailed,
        Verdict::Stalled,
        Verdict::TimedOut,
        Verdict::SpawnFailed,
        Verdict::StartupTimeout,
    ] {
        let mut s = Session::new(rules(3));
        s.run(ended(verdict));
        assert_eq!(s.stopped(), Stop::IterationFailed, "{verdict:?}");
    }
    // A run with no verdict at all too.
    let mut s = Session::new(rules(3));
    s.run(RunEnd {
        verdict: None,
        ..ended(Verdict::AgentFailed)
    });
    assert_eq!(s.stopped(), Stop::IterationFailed);
}

#[test]
fn a_cancelled_run_stops_the_session_with_that_runs_verdict() {
    let mut s = Session::new(rules(3));
    s.run(ended(Verdict::Cancelled));
    assert_eq!(
        s.stopped(),
        Stop::Cancelled {
            between_attempts: false
        }
    );
    let mut report = empty_report();
    report.verdict = Some(Verdict::Cancelled);
    s.stopped().record(&mut report);
    assert_eq!(report.stopped_because, StopReason::Cancelled);
    assert_eq!(report.verdict, Some(Verdict::Cancelled));
}

#[test]
fn a_cancel_before_the_next_iteration_stops_the_session_keeping_the_last_verdict() {
    let mut s = Session::new(rules(3));
    s.run(ended(Verdict::Succeeded));
    assert_eq!(
        s.feed(cancel()),
        &Phase::Stopped(Stop::Cancelled {
            between_attempts: false
        })
    );
    let mut report = empty_report();
    report.verdict = Some(Verdict::Succeeded);
    s.stopped().record(&mut report);
    assert_eq!(report.stopped_because, StopReason::Cancelled);
    assert_eq!(report.verdict, Some(Verdict::Succeeded));

    // Before the first run: no verdict is made up.
    let mut s = Session::new(rules(3));
    s.feed(cancel());
    assert!(s.ran.is_empty());
    let mut report = empty_report();
    report.verdict = None;
    s.stopped().record(&mut report);
    assert_eq!(report.verdict, None);
}

#[test]
fn a_run_over_a_budget_stops_the_session_naming_the_line_it_gave() {
    let mut s = Session::new(rules(3));
    let exceeded = line(BudgetScope::Run);
    s.run(RunEnd {
        budget_exceeded: Some(exceeded),
        ..ended(Verdict::BudgetExceeded)
    });
    assert_eq!(s.stopped(), Stop::BudgetExceeded(Some(exceeded)));
    let mut report = empty_report();
    report.verdict = Some(Verdict::BudgetExceeded);
    s.stopped().record(&mut report);
    assert_eq!(report.stopped_because, StopReason::BudgetExceeded);
    assert_eq!(report.budget_exceeded, Some(exceeded));
    assert_eq!(report.error, None, "the run's report says why");

    // Even over a budget, a transient failure is not retried.
    let mut s = Session::new(Rules {
        retry: RetryPolicy {
            retries: 3,
            ..RetryPolicy::default()
        },
        ..rules(3)
    });
    s.run(RunEnd {
        transient: Some(RetryOn::RateLimited),
        ..ended(Verdict::BudgetExceeded)
    });
    assert_eq!(s.stopped(), Stop::BudgetExceeded(None));
}

#[test]
fn a_run_that_could_not_be_set_up_stops_the_session_as_setup_failed() {
    let mut s = Session::new(rules(3));
    s.feed(look());
    assert_eq!(
        s.feed(Input::SetupFailed),
        &Phase::Stopped(Stop::SetupFailed)
    );
    let mut report = empty_report();
    s.stopped().record(&mut report);
    assert_eq!(report.stopped_because, StopReason::SetupFailed);
}

#[test]
fn a_refused_output_is_resumed_with_the_correction_while_output_retries_last() {
    let mut s = Session::new(Rules {
        output_retries: 2,
        ..rules(2)
    });
    s.run(refused());
    s.run(refused());
    let retry = s.last();
    assert_eq!(retry.run_name(), "iteration-1-retry-1");
    assert_eq!(
        retry.correction,
        Some((
            "thread-1".to_string(),
            "the output did not match its schema".to_string()
        ))
    );
    assert_eq!(retry.resuming(), Some("thread-1"));
    assert!(!retry.resumed(), "`resumed` is for retries of failures");
    assert!(!retry.starts_iteration());
    // The second retry of the session, on the same iteration; the last.
    s.run(ended(Verdict::Succeeded));
    assert_eq!(s.last().run_name(), "iteration-1-retry-2");
    assert_eq!(s.last().output_retries_left, 0);
    // The next iteration starts afresh, with none left for it.
    s.run(refused());
    assert_eq!(s.last().run_name(), "iteration-2");
    assert_eq!(s.last().correction, None);
    assert_eq!(s.stopped(), Stop::IterationFailed);
}

#[test]
fn a_refused_output_is_not_retried_without_a_session_to_resume() {
    let rules = Rules {
        output_retries: 2,
        ..rules(2)
    };
    // The agent's CLI cannot resume.
    let mut s = Session::new(Rules {
        can_resume: false,
        ..rules.clone()
    });
    s.run(refused());
    assert_eq!(s.stopped(), Stop::IterationFailed);
    // The run named no session.
    let mut s = Session::new(rules);
    s.run(RunEnd {
        agent_session: None,
        ..refused()
    });
    assert_eq!(s.stopped(), Stop::IterationFailed);
}

fn retrying(retries: u32) -> Rules {
    Rules {
        retry: RetryPolicy {
            retries,
            backoff: Duration::from_secs(10),
            ..RetryPolicy::default()
        },
        ..rules(2)
    }
}

#[test]
fn a_transient_failure_is_tried_again_after_a_backoff_resuming_the_agents_session() {
    let mut s = Session::new(retrying(2));
    let phase = s.run(rate_limited()).clone();
    let Phase::Backoff {
        step,
        failure,
        delay,
    } = phase
    else {
        panic!("no backoff: {phase:?}");
    };
    assert_eq!(failure, RetryOn::RateLimited);
    // Half (the jitter) of the first backoff.
    assert_eq!(delay, Duration::from_secs(5));
    assert_eq!(step.run_name(), "iteration-1-attempt-2");
    assert_eq!(
        step.retry_of,
        Some(RetryOf {
            failure: RetryOn::RateLimited,
            resume: Some("thread-1".into()),
        })
    );
    assert!(step.resumed());
    assert_eq!(step.resuming(), Some("thread-1"));

    s.feed(Input::Waited { cancelled: false });
    assert_eq!(s.phase, Phase::Between(Next::Again(step.clone())));
    s.feed(look());
    assert_eq!(s.last(), &step);
    assert!(!step.starts_iteration());
    // The second retry's backoff doubles, and honours a longer
    // retry-after.
    let phase = s
        .feed(Input::Ended(RunEnd {
            retry_after: Some(Duration::from_secs(30)),
            ..rate_limited()
        }))
        .clone();
    assert!(
        matches!(phase, Phase::Backoff { delay, ref step, .. }
            if delay == Duration::from_secs(30) && step.attempt == 3),
        "{phase:?}"
    );
    s.feed(Input::Waited { cancelled: false });
    // No retry is left.
    s.run(rate_limited());
    assert_eq!(s.last().run_name(), "iteration-1-attempt-3");
    assert_eq!(s.stopped(), Stop::IterationFailed);
}

#[test]
fn a_retry_starts_afresh_when_nothing_can_be_resumed() {
    for (can_resume, progressed) in [(false, true), (true, false)] {
        let mut s = Session::new(Rules {
            can_resume,
            ..retrying(1)
        });
        let phase = s
            .run(RunEnd {
                progressed,
                ..rate_limited()
            })
            .clone();
        let Phase::Backoff { step, .. } = phase else {
            panic!("no backoff: {phase:?}");
        };
        assert_eq!(
            step.retry_of,
            Some(RetryOf {
                failure: RetryOn::RateLimited,
                resume: None,
            })
        );
        assert!(!step.resumed());
        assert_eq!(step.resuming(), None);
    }
}

#[test]
fn only_the_failures_the_policy_names_are_retried() {
    // Stalls are not retried unless asked.
    let mut s = Session::new(retrying(2));
    s.run(RunEnd {
        transient: Some(RetryOn::Stalled),
        ..ended(Verdict::Stalled)
    });
    assert_eq!(s.stopped(), Stop::IterationFailed);
    // No retries: a transient failure ends the session too.
    let mut s = Session::new(retrying(0));
    s.run(rate_limited());
    assert_eq!(s.stopped(), Stop::IterationFailed);
}

#[test]
fn a_retry_of_an_output_retry_keeps_its_correction_and_its_number() {
    let mut s = Session::new(Rules {
        output_retries: 1,
        ..retrying(1)
    });
    s.run(refused());
    // The output retry failed on a rate limit: tried again, as the same
    // output retry.
    let phase = s.run(rate_limited()).clone();
    let Phase::Backoff { step, .. } = phase else {
        panic!("no backoff: {phase:?}");
    };
    assert_eq!(step.run_name(), "iteration-1-retry-1-attempt-2");
    assert!(step.correction.is_some());
    // Resuming the failed attempt's session wins over the correction's.
    let step = Step {
        retry_of: Some(RetryOf {
            failure: RetryOn::RateLimited,
            resume: Some("thread-2".into()),
        }),
        ..step
    };
    assert_eq!(step.resuming(), Some("thread-2"));
}

#[test]
fn an_output_retry_starts_the_attempts_over() {
    let mut s = Session::new(Rules {
        output_retries: 1,
        ..retrying(1)
    });
    s.run(rate_limited());
    s.feed(Input::Waited { cancelled: false });
    // The retry's output was refused: an output retry, whose own transient
    // failure may be retried again.
    s.run(refused());
    assert_eq!(s.last().run_name(), "iteration-1-attempt-2");
    s.run(rate_limited());
    assert_eq!(s.last().run_name(), "iteration-1-retry-1");
    assert!(matches!(s.phase, Phase::Backoff { ref step, .. } if step.attempt == 2));
}

#[test]
fn a_cancel_during_the_backoff_makes_the_session_cancelled() {
    let mut s = Session::new(retrying(1));
    s.run(rate_limited());
    assert_eq!(
        s.feed(Input::Waited { cancelled: true }),
        &Phase::Stopped(Stop::Cancelled {
            between_attempts: true
        })
    );
    let mut report = empty_report();
    s.stopped().record(&mut report);
    assert_eq!(report.stopped_because, StopReason::Cancelled);
    assert_eq!(
        report.verdict,
        Some(Verdict::Cancelled),
        "the failed run is not the session's verdict"
    );
}

#[test]
fn a_cancel_just_as_the_backoff_ends_makes_the_session_cancelled_too() {
    let mut s = Session::new(retrying(1));
    s.run(rate_limited());
    s.feed(Input::Waited { cancelled: false });
    assert_eq!(
        s.feed(cancel()),
        &Phase::Stopped(Stop::Cancelled {
            between_attempts: true
        })
    );
    // Before an output retry the last run's verdict stays.
    let mut s = Session::new(Rules {
        output_retries: 1,
        ..rules(1)
    });
    s.run(refused());
    assert_eq!(
        s.feed(cancel()),
        &Phase::Stopped(Stop::Cancelled {
            between_attempts: false
        })
    );
}

#[test]
fn no_iteration_starts_with_a_shared_budget_used_up_and_the_runs_own_is_per_iteration() {
    let session = line(BudgetScope::Session);
    let own = line(BudgetScope::Run);
    let mut s = Session::new(rules(3));
    s.run(ended(Verdict::Succeeded));
    // What the last iteration spent of the run's own budget does not
    // hold for the next.
    s.feed(Input::Look {
        cancelled: false,
        used_up: UsedUp {
            step: Some(own),
            shared: None,
        },
    });
    assert_eq!(s.last().run_name(), "iteration-2");
    s.feed(Input::Ended(ended(Verdict::Succeeded)));
    assert_eq!(
        s.feed(Input::Look {
            cancelled: false,
            used_up: UsedUp {
                step: None,
                shared: Some(session),
            },
        }),
        &Phase::Stopped(Stop::UsedUp(session))
    );
    let mut report = empty_report();
    report.verdict = Some(Verdict::Succeeded);
    s.stopped().record(&mut report);
    assert_eq!(report.stopped_because, StopReason::BudgetExceeded);
    assert_eq!(report.verdict, Some(Verdict::BudgetExceeded));
    assert_eq!(report.budget_exceeded, Some(session));
    assert_eq!(
        report.error.as_deref(),
        Some("no further run started: session cost budget $1.00 used up: $1.02 spent")
    );
    // The cancel is looked at first, the iterations next.
    let mut s = Session::new(rules(1));
    s.run(ended(Verdict::Succeeded));
    let used_up = UsedUp {
        step: None,
        shared: Some(session),
    };
    let done = s.phase.clone().on(
        Input::Look {
            cancelled: false,
            used_up,
        },
        &s.rules,
    );
    assert_eq!(done, Phase::Stopped(Stop::IterationsExhausted));
    let cancelled = s.phase.clone().on(
        Input::Look {
            cancelled: true,
            used_up,
        },
        &s.rules,
    );
    assert_eq!(
        cancelled,
        Phase::Stopped(Stop::Cancelled {
            between_attempts: false
        })
    );
}

#[test]
fn no_retry_is_announced_or_waited_for_with_a_budget_used_up() {
    for used_up in [
        UsedUp {
            step: Some(line(BudgetScope::Run)),
            shared: None,
        },
        UsedUp {
            step: None,
            shared: Some(line(BudgetScope::Batch)),
        },
    ] {
        let mut s = Session::new(retrying(2));
        s.run(RunEnd {
            used_up,
            ..rate_limited()
        });
        let line = used_up.step.or(used_up.shared).expect("a line");
        assert_eq!(s.stopped(), Stop::UsedUp(line));
    }
    // A budget used up during the backoff (a batch's, spent by the runs
    // beside this one): the retry does not start.
    let mut s = Session::new(retrying(2));
    s.run(rate_limited());
    s.feed(Input::Waited { cancelled: false });
    let own = line(BudgetScope::Run);
    assert_eq!(
        s.feed(Input::Look {
            cancelled: false,
            used_up: UsedUp {
                step: Some(own),
                shared: None,
            },
        }),
        &Phase::Stopped(Stop::UsedUp(own))
    );
    assert_eq!(s.ran.len(), 1);
}

#[test]
fn an_output_retry_counts_against_the_runs_own_budget_for_the_iteration() {
    let own = line(BudgetScope::Run);
    let mut s = Session::new(Rules {
        output_retries: 1,
        ..rules(2)
    });
    s.run(refused());
    assert_eq!(
        s.feed(Input::Look {
            cancelled: false,
            used_up: UsedUp {
                step: Some(own),
                shared: None,
            },
        }),
        &Phase::Stopped(Stop::UsedUp(own))
    );
}

#[test]
fn every_stop_names_its_reason() {
    let l = line(BudgetScope::Session);
    for (stop, reason) in [
        (Stop::CompletionSignal, StopReason::CompletionSignal),
        (Stop::IterationsExhausted, StopReason::IterationsExhausted),
        (Stop::IterationFailed, StopReason::IterationFailed),
        (
            Stop::Cancelled {
                between_attempts: true,
            },
            StopReason::Cancelled,
        ),
        (Stop::BudgetExceeded(None), StopReason::BudgetExceeded),
        (Stop::UsedUp(l), StopReason::BudgetExceeded),
        (Stop::SetupFailed, StopReason::SetupFailed),
        (Stop::CancelledUnconfirmed, StopReason::Cancelled),
    ] {
        let mut report = empty_report();
        stop.record(&mut report);
        assert_eq!(report.stopped_because, reason, "{stop:?}");
    }
}

#[test]
fn inputs_that_do_not_belong_to_a_phase_change_nothing() {
    let r = rules(2);
    let stopped = Phase::Stopped(Stop::IterationFailed);
    for input in [
        look(),
        Input::SetupFailed,
        Input::Ended(ended(Verdict::Succeeded)),
        Input::Waited { cancelled: true },
    ] {
        assert_eq!(stopped.clone().on(input, &r), stopped);
    }
    let between = Phase::start(&r);
    assert_eq!(between.clone().on(Input::SetupFailed, &r), between);
    assert_eq!(
        between
            .clone()
            .on(Input::Ended(ended(Verdict::Succeeded)), &r),
        between
    );
}

fn checking(iterations: u32, first: bool) -> Rules {
    Rules {
        check: true,
        check_first: first,
        ..rules(iterations)
    }
}

fn signalled() -> RunEnd {
    RunEnd {
        signalled: true,
        ..ended(Verdict::Succeeded)
    }
}

#[test]
fn with_a_check_the_check_not_the_completion_signal_ends_the_session() {
    let mut s = Session::new(checking(3, false));
    s.run(signalled());
    assert_eq!(
        s.phase,
        Phase::Checking {
            done: 1,
            output_retries_left: 0
        },
        "the signal alone does not end it"
    );
    s.feed(Input::Checked(CheckEnd::Failed));
    s.run(ended(Verdict::Succeeded));
    assert!(matches!(s.phase, Phase::Checking { done: 2, .. }));
    s.feed(Input::Checked(CheckEnd::Passed));
    assert_eq!(s.stopped(), Stop::CheckPassed);
    assert_eq!(s.ran.len(), 2);
    let mut report = empty_report();
    report.verdict = Some(Verdict::Succeeded);
    s.stopped().record(&mut report);
    assert_eq!(report.stopped_because, StopReason::CheckPassed);
    assert_eq!(report.verdict, Some(Verdict::Succeeded));
}

#[test]
fn iterations_that_run_out_with_the_check_failing_end_check_failed() {
    let mut s = Session::new(checking(2, false));
    for _ in 0..2 {
        s.run(ended(Verdict::Succeeded));
        s.feed(Input::Checked(CheckEnd::Failed));
    }
    s.feed(look());
    assert_eq!(s.stopped(), Stop::CheckFailed);
    let mut report = empty_report();
    report.verdict = Some(Verdict::Succeeded);
    s.stopped().record(&mut report);
    assert_eq!(report.stopped_because, StopReason::IterationsExhausted);
    assert_eq!(report.verdict, Some(Verdict::CheckFailed));
}

#[test]
fn a_check_that_passes_first_leaves_nothing_to_do() {
    let mut s = Session::new(checking(3, true));
    assert!(matches!(s.phase, Phase::Checking { done: 0, .. }));
    s.feed(Input::Checked(CheckEnd::Passed));
    assert_eq!(s.stopped(), Stop::CheckPassed);
    assert!(s.ran.is_empty(), "no agent ran");
    let mut report = empty_report();
    report.verdict = None;
    s.stopped().record(&mut report);
    assert_eq!(report.verdict, Some(Verdict::Succeeded));

    // Failing first, it is the first iteration's to fix.
    let mut s = Session::new(checking(3, true));
    s.feed(Input::Checked(CheckEnd::Failed));
    s.feed(look());
    assert_eq!(s.last().iteration, 1);
}

#[test]
fn a_check_that_cannot_run_or_is_cancelled_stops_the_session_and_a_failed_run_is_not_checked() {
    let mut s = Session::new(checking(3, false));
    s.run(ended(Verdict::Succeeded));
    s.feed(Input::Checked(CheckEnd::Broken));
    assert_eq!(s.stopped(), Stop::CheckBroken);
    let mut report = empty_report();
    s.stopped().record(&mut report);
    assert_eq!(report.stopped_because, StopReason::SetupFailed);
    assert_eq!(report.verdict, Some(Verdict::CheckFailed));

    let mut s = Session::new(checking(3, false));
    s.run(ended(Verdict::Succeeded));
    s.feed(Input::Checked(CheckEnd::Cancelled));
    assert_eq!(s.stopped(), Stop::CancelledUnconfirmed);
    // The run before succeeded, but the check never said so.
    let mut report = empty_report();
    report.verdict = Some(Verdict::Succeeded);
    s.stopped().record(&mut report);
    assert_eq!(report.stopped_because, StopReason::Cancelled);
    assert_eq!(report.verdict, Some(Verdict::Cancelled));

    // Nor while the next iteration's prompt commands ran.
    let mut s = Session::new(rules(3));
    s.feed(look());
    s.feed(Input::CancelledBeforeStart);
    assert_eq!(s.stopped(), Stop::CancelledUnconfirmed);

    // Nor after a check that failed.
    let mut s = Session::new(checking(3, false));
    s.run(ended(Verdict::Succeeded));
    s.feed(Input::Checked(CheckEnd::Failed));
    s.feed(cancel());
    assert_eq!(s.stopped(), Stop::CancelledUnconfirmed);

    let mut s = Session::new(checking(3, false));
    s.run(ended(Verdict::AgentFailed));
    assert_eq!(s.stopped(), Stop::IterationFailed);
}
