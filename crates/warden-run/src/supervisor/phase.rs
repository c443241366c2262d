//! The phases of a run, as a type, and the pure function that moves a run
//! from one phase to the next.
//!
//! ```text
//! Starting ──line──▶ Running ──terminal event or completion signal──▶ Completing
//!    │                  ▲                                                 │
//!    │                  └───────── works again (no signal seen) ──────────┘
//!    │ from Starting, Running or Completing:
//!    ├─ agent exited ──────────────────────────────▶ Draining ─┐ output closed,
//!    └─ limit ran out, cancel ─▶ Terminating ─exited─▶ Draining ─┴▶ Finalized
//!                                (SIGTERM)                       no process left
//! kill grace over, drain over, second cancel, kill; the shim gone before the exit:
//!    ──▶ Killing (SIGKILL) ── the shim gone, or the wait for it over ──▶ Finalized
//! ```
//!
//! Each variant carries what only exists in it: the completion window's
//! last line, the exit status, when SIGTERM went out and why. The exit
//! status and the cause, once known, are carried on to `Finalized`, so the
//! verdict reads them from the phase. Facts that outlive every phase and
//! only feed the report (when the completion signal or the last terminal
//! event came) stay with the supervisor.
//!
//! [`Phase::on`] is pure: it takes the phase, an [`Input`] and the time, and
//! returns the next phase with the [`Action`]s the supervisor must perform
//! (signal the tree, say why the run ends, cut the output). The deadlines
//! that come with each phase are computed by
//! [`crate::clocks::ClockState::next`] from what the phase says it waits
//! on ([`Phase::waits`]). Neither touches a process, so both
//! are tested here with inputs that stand for what a process tree does.

use std::time::{Duration, Instant};

use warden_process::Signal;

use crate::clocks::{Clock, Waits};
use crate::verdict::Cause;

/// How the agent's own process ended, and when the shim reaped it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Exit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub at: Instant,
}

/// Warden ending the run: why, and when SIGTERM went to every process of
/// it (SIGKILL follows after `kill_grace`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ending {
    pub cause: Cause,
    pub sigterm_at: Instant,
}

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Spawned; no line of output yet. The startup clock runs.
    Starting,
    /// Output is coming. The stall clock runs.
    Running,
    /// The agent said it is done (its terminal event is in force, or its
    /// output carried the completion signal): silence now means it will not
    /// exit, not that it is thinking. The completion window runs from
    /// `since_line`, the last complete line. `signal`: the completion
    /// signal was seen, which (unlike a terminal event) is never taken back.
    Completing { since_line: Instant, signal: bool },
    /// Warden is ending the run before the agent exited: SIGTERM went out.
    Terminating(Ending),
    /// The agent was reaped: its output and anything it left get until
    /// `exit.at + drain_grace`. `ending`: warden was already ending the
    /// run, so its SIGKILL is still due.
    Draining { exit: Exit, ending: Option<Ending> },
    /// SIGKILL went to every process of the run at `since`; the kernel and
    /// the shim get `final_kill_wait` to confirm. `cause` is `None` when
    /// warden did not end the run (the agent exited and left processes, or
    /// the shim went away).
    Killing {
        since: Instant,
        cause: Option<Cause>,
        exit: Option<Exit>,
    },
    /// Nothing is left to wait for: the report can be written.
    Finalized {
        cause: Option<Cause>,
        exit: Option<Exit>,
    },
}

/// Something that happened to the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Input {
    /// A complete line of output; `activity`: it counts as activity (a
    /// well-formed or oversized line, not a malformed one).
    Line { activity: bool },
    /// The agent's last terminal event is in force.
    TerminalEvent,
    /// The agent went on working after its terminal event (pi retries by
    /// itself after an `agent_end` that reported an error).
    WorkingAgain,
    /// The completion signal came (first time only).
    CompletionSignal,
    /// The shim reaped the agent.
    Exited {
        code: Option<i32>,
        signal: Option<i32>,
    },
    /// The shim's channel closed.
    ShimGone,
    /// A cancel: SIGTERM first, SIGKILL if warden is already ending the run.
    Cancel,
    /// A kill: SIGKILL now.
    Kill,
    /// A deadline of [`crate::clocks`] fired.
    Deadline(Clock),
    /// A budget was exceeded. Ends a run that is working; one that has
    /// said it is done is spending nothing more, and keeps the completion
    /// window to exit by itself.
    BudgetExceeded,
    /// What is left of the run, looked at before every wait.
    Left {
        output_open: bool,
        tree_empty: bool,
        shim_open: bool,
    },
}

/// What the supervisor must do for a transition, in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Say why warden ends the run (a `terminating` event).
    Announce(Cause),
    /// Start the sandbox's own kill (a container's removal), not waiting.
    SandboxKill,
    /// SIGTERM to every process of the run.
    Term,
    /// SIGKILL to every process of the run (and the sandbox's kill).
    KillAll,
    /// The agent was reaped: say so, name what is still alive as orphans,
    /// and send them `orphans` (none when all was SIGKILLed already).
    Reaped { exit: Exit, orphans: Option<Signal> },
    /// The shim went away before reporting the agent's exit.
    ShimLost,
    /// The drain window ran out: cut the output that is still open.
    CutOutput,
    /// The wait after SIGKILL ran out: stop waiting for the shim, the tree
    /// and the output.
    GiveUp,
}

/// The graces a transition needs to know (zero means "at once").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Graces {
    pub kill: Duration,
    pub drain: Duration,
}

impl Phase {
    /// The agent's exit, once it is known.
    pub(crate) fn exit(&self) -> Option<Exit> {
        match *self {
            Phase::Draining { exit, .. } => Some(exit),
            Phase::Killing { exit, .. } | Phase::Finalized { exit, .. } => exit,
            Phase::Starting | Phase::Running | Phase::Completing { .. } | Phase::Terminating(_) => {
                None
            }
        }
    }

    /// Why warden ended the run, if it did.
    pub(crate) fn cause(&self) -> Option<Cause> {
        match *self {
            Phase::Terminating(e) => Some(e.cause),
            Phase::Draining { ending, .. } => ending.map(|e| e.cause),
            Phase::Killing { cause, .. } | Phase::Finalized { cause, .. } => cause,
            Phase::Starting | Phase::Running | Phase::Completing { .. } => None,
        }
    }

    pub(crate) fn is_finalized(&self) -> bool {
        matches!(self, Phase::Finalized { .. })
    }

    /// Whether the agent is at work: it has not said it is done, has not
    /// exited, and warden is not ending the run.
    pub(crate) fn at_work(&self) -> bool {
        matches!(self, Phase::Starting | Phase::Running)
    }

    /// The deadlines this phase waits on, and since when.
    pub(crate) fn waits(&self) -> Waits {
        match *self {
            Phase::Starting => Waits::Limits {
                starting: true,
                completing: None,
            },
            Phase::Running => Waits::Limits {
                starting: false,
                completing: None,
            },
            Phase::Completing { since_line, .. } => Waits::Limits {
                starting: false,
                completing: Some(since_line),
            },
            Phase::Terminating(e) => Waits::KillGrace {
                sigterm_at: e.sigterm_at,
            },
            Phase::Draining { exit, ending } => Waits::Drain {
                exit_at: exit.at,
                sigterm_at: ending.map(|e| e.sigterm_at),
            },
            Phase::Killing { since, .. } => Waits::FinalKill { since },
            Phase::Finalized { .. } => Waits::Nothing,
        }
    }

    /// The next phase after `input` at `now`, and what to do for it.
    pub(crate) fn on(self, input: Input, now: Instant, graces: Graces) -> (Phase, Vec<Action>) {
        // Nothing moves a finalized run.
        if self.is_finalized() {
            return (self, Vec::new());
        }
        match input {
            Input::Line { .. }
            | Input::TerminalEvent
            | Input::WorkingAgain
            | Input::CompletionSignal => (self.on_word(input, now), Vec::new()),
            Input::Exited { code, signal } => self.on_exit(
                Exit {
                    code,
                    signal,
                    at: now,
                },
                graces,
            ),
            Input::ShimGone | Input::Cancel | Input::Kill | Input::BudgetExceeded => {
                self.on_stop(input, now, graces)
            }
            Input::Deadline(clock) => self.on_deadline(clock, now, graces),
            Input::Left {
                output_open,
                tree_empty,
                shim_open,
            } => (self.on_left(output_open, tree_empty, shim_open), Vec::new()),
        }
    }

    /// What the agent's output says: a line, that it is done, that it
    /// works again.
    fn on_word(self, input: Input, now: Instant) -> Phase {
        use Phase::*;
        match (self, input) {
            (Starting, Input::Line { activity: true }) => Running,
            (Completing { signal, .. }, Input::Line { .. }) => Completing {
                since_line: now,
                signal,
            },
            (Starting | Running, Input::TerminalEvent) => Completing {
                since_line: now,
                signal: false,
            },
            (Completing { signal: false, .. }, Input::WorkingAgain) => Running,
            (Starting | Running | Completing { .. }, Input::CompletionSignal) => Completing {
                since_line: now,
                signal: true,
            },
            _ => self,
        }
    }

    /// The shim reaped the agent.
    fn on_exit(self, exit: Exit, graces: Graces) -> (Phase, Vec<Action>) {
        use Phase::*;
        let reaped = |orphans| vec![Action::Reaped { exit, orphans }];
        match self {
            Starting | Running | Completing { .. } => (
                Draining { exit, ending: None },
                reaped(Some(orphan_signal(graces))),
            ),
            Terminating(ending) => (
                Draining {
                    exit,
                    ending: Some(ending),
                },
                reaped(Some(orphan_signal(graces))),
            ),
            Killing {
                since,
                cause,
                exit: None,
            } => (
                Killing {
                    since,
                    cause,
                    exit: Some(exit),
                },
                reaped(None),
            ),
            Draining { .. } | Killing { .. } | Finalized { .. } => (self, Vec::new()),
        }
    }

    /// The shim went away, or someone asks the run to end (a cancel, a
    /// kill, a budget exceeded).
    fn on_stop(self, input: Input, now: Instant, graces: Graces) -> (Phase, Vec<Action>) {
        use Phase::*;
        match (self, input) {
            // Without its shim the run cannot be watched to its end (nor
            // its exit status learned): kill what is left now.
            (Starting | Running | Completing { .. } | Terminating(_), Input::ShimGone)
            | (Killing { exit: None, .. }, Input::ShimGone) => {
                (self.killing(now), vec![Action::ShimLost, Action::KillAll])
            }
            (Starting | Running | Completing { .. }, Input::Cancel) => {
                begin_ending(Cause::Cancelled, now, graces)
            }
            (Starting | Running | Completing { .. }, Input::Kill) => (
                Killing {
                    since: now,
                    cause: Some(Cause::Cancelled),
                    exit: None,
                },
                vec![Action::Announce(Cause::Cancelled), Action::KillAll],
            ),
            // Asked again, or asked to kill, while warden is ending the run
            // already or the agent has exited: SIGKILL.
            (Terminating(_) | Draining { .. } | Killing { .. }, Input::Cancel | Input::Kill) => {
                (self.killing(now), vec![Action::KillAll])
            }
            (Starting | Running, Input::BudgetExceeded) => {
                begin_ending(Cause::BudgetExceeded, now, graces)
            }
            _ => (self, Vec::new()),
        }
    }

    /// A deadline of the clocks fired.
    fn on_deadline(self, clock: Clock, now: Instant, graces: Graces) -> (Phase, Vec<Action>) {
        use Phase::*;
        match (self, clock) {
            (Starting | Running | Completing { .. }, clock) => match limit_cause(clock) {
                Some(cause) => begin_ending(cause, now, graces),
                None => (self, Vec::new()),
            },
            (
                Terminating(_)
                | Draining {
                    ending: Some(_), ..
                },
                Clock::KillGrace,
            ) => (self.killing(now), vec![Action::KillAll]),
            (Draining { .. }, Clock::Drain) => {
                (self.killing(now), vec![Action::CutOutput, Action::KillAll])
            }
            (Killing { cause, exit, .. }, Clock::FinalKill) => {
                (Finalized { cause, exit }, vec![Action::GiveUp])
            }
            _ => (self, Vec::new()),
        }
    }

    /// What is left of the run, looked at before every wait: the run is
    /// over once nothing is left to wait for.
    fn on_left(self, output_open: bool, tree_empty: bool, shim_open: bool) -> Phase {
        use Phase::*;
        match self {
            Killing { cause, exit, .. } if !shim_open => Finalized { cause, exit },
            Draining { .. } | Killing { exit: Some(_), .. }
                if !output_open && (tree_empty || !shim_open) =>
            {
                Finalized {
                    cause: self.cause(),
                    exit: self.exit(),
                }
            }
            _ => self,
        }
    }

    /// The phase once SIGKILL went to every process, keeping the cause,
    /// the exit and the time of a SIGKILL sent before.
    fn killing(self, now: Instant) -> Phase {
        let since = match self {
            Phase::Killing { since, .. } => since,
            _ => now,
        };
        Phase::Killing {
            since,
            cause: self.cause(),
            exit: self.exit(),
        }
    }
}

/// Starts ending the run for `cause`: SIGTERM to every process of the run,
/// or SIGKILL at once if the kill grace is zero.
fn begin_ending(cause: Cause, now: Instant, graces: Graces) -> (Phase, Vec<Action>) {
    if graces.kill.is_zero() {
        (
            Phase::Killing {
                since: now,
                cause: Some(cause),
                exit: None,
            },
            vec![
                Action::Announce(cause),
                Action::SandboxKill,
                Action::KillAll,
            ],
        )
    } else {
        (
            Phase::Terminating(Ending {
                cause,
                sigterm_at: now,
            }),
            // Not the sandbox's kill yet: a container's engine removes it
            // with a kill of its own (Docker's at once, Podman's after a
            // second SIGTERM), which would cut the grace short. The
            // engine's client passes the SIGTERM on; the removal comes
            // with the SIGKILL.
            vec![Action::Announce(cause), Action::Term],
        )
    }
}

/// What the agent's orphans get at its exit: SIGTERM while the pipes are
/// still drained, SIGKILL when there is no drain window.
fn orphan_signal(graces: Graces) -> Signal {
    if graces.drain.is_zero() {
        Signal::Kill
    } else {
        Signal::Term
    }
}

/// The limit a clock enforces before the agent exits, if it ends the run.
fn limit_cause(clock: Clock) -> Option<Cause> {
    match clock {
        Clock::Run => Some(Cause::TimedOut),
        Clock::Startup => Some(Cause::StartupTimeout),
        Clock::Stall => Some(Cause::Stalled),
        Clock::FatalError => Some(Cause::FatalError),
        Clock::Completion => Some(Cause::ForcedCompletion),
        Clock::StallWarning | Clock::KillGrace | Clock::Drain | Clock::FinalKill => None,
    }
}

#[cfg(test)]
mod tests {
    //! The phases driven by a fake run: inputs stand for what the agent,
    //! its shim and its process tree do, time is plain `Instant`
    //! arithmetic, and the deadlines come from the real clocks.

    use super::*;
    use crate::clocks::ClockState;

    const KILL_GRACE: Duration = Duration::from_secs(3);
    const DRAIN_GRACE: Duration = Duration::from_secs(2);
    const FINAL_KILL_WAIT: Duration = Duration::from_secs(1);

    /// A run without processes: what its tree looks like is set by the
    /// test, and every action asked for is recorded instead of performed.
    struct FakeRun {
        t0: Instant,
        now: Instant,
        phase: Phase,
        clocks: ClockState,
        graces: Graces,
        output_open: bool,
        tree_empty: bool,
        shim_open: bool,
        actions: Vec<Action>,
    }

    impl FakeRun {
        fn new() -> Self {
            let t0 = Instant::now();
            FakeRun {
                t0,
                now: t0,
                phase: Phase::Starting,
                clocks: ClockState {
                    started: Some(t0),
                    timeout: Some(Duration::from_secs(100)),
                    startup_timeout: Some(Duration::from_secs(10)),
                    stall_timeout: Some(Duration::from_secs(20)),
                    completion_timeout: Some(Duration::from_secs(5)),
                    kill_grace: KILL_GRACE,
                    drain_grace: DRAIN_GRACE,
                    final_kill_wait: FINAL_KILL_WAIT,
                    ..ClockState::default()
                },
                graces: Graces {
                    kill: KILL_GRACE,
                    drain: DRAIN_GRACE,
                },
                output_open: true,
                tree_empty: false,
                shim_open: true,
                actions: Vec::new(),
            }
        }

        fn at(&mut self, secs: u64) -> &mut Self {
            self.now = self.t0 + Duration::from_secs(secs);
            self
        }

        /// Feeds `input` and returns what the transition asked for.
        fn feed(&mut self, input: Input) -> Vec<Action> {
            if let Input::Line { activity: true } = input {
                self.clocks.last_activity = Some(self.now);
            }
            let (phase, actions) = self.phase.on(input, self.now, self.graces);
            self.phase = phase;
            self.actions.extend(actions.iter().copied());
            actions
        }

        /// Sleeps until the next deadline, fires it, and says which it was.
        fn wait(&mut self) -> Clock {
            let (at, clock) = self
                .clocks
                .next(self.phase.waits())
                .unwrap_or_else(|| panic!("nothing to wait for in {:?}", self.phase));
            assert!(at >= self.now, "{clock:?} is due in the past");
            self.now = at;
            // The warning is the supervisor's, beside the phase.
            self.clocks.warned |= clock == Clock::StallWarning;
            self.feed(Input::Deadline(clock));
            clock
        }

        /// What the supervisor looks at before every wait.
        fn settle(&mut self) -> Phase {
            self.feed(Input::Left {
                output_open: self.output_open,
                tree_empty: self.tree_empty,
                shim_open: self.shim_open,
            });
            self.phase
        }

        fn secs(&self, at: Instant) -> u64 {
            at.duration_since(self.t0).as_secs()
        }
    }

    fn exited(code: i32) -> Input {
        Input::Exited {
            code: Some(code),
            signal: None,
        }
    }

    #[test]
    fn a_run_that_ends_by_itself_goes_through_every_phase_to_finalized() {
        let mut run = FakeRun::new();
        assert_eq!(run.settle(), Phase::Starting, "no output yet");
        run.at(1).feed(Input::Line { activity: false });
        assert_eq!(
            run.phase,
            Phase::Starting,
            "a malformed line is no activity"
        );
        run.at(2).feed(Input::Line { activity: true });
        assert_eq!(run.phase, Phase::Running);
        run.at(3).feed(Input::TerminalEvent);
        assert_eq!(
            run.phase,
            Phase::Completing {
                since_line: run.t0 + Duration::from_secs(3),
                signal: false
            }
        );
        let actions = run.at(4).feed(exited(0));
        let exit = Exit {
            code: Some(0),
            signal: None,
            at: run.now,
        };
        assert_eq!(
            actions,
            vec![Action::Reaped {
                exit,
                orphans: Some(Signal::Term)
            }],
            "orphans get SIGTERM while the pipes are still read"
        );
        assert_eq!(run.phase, Phase::Draining { exit, ending: None });
        assert_eq!(run.settle(), run.phase, "output still open: keep draining");
        run.output_open = false;
        assert_eq!(run.settle(), run.phase, "a process is left: keep waiting");
        run.tree_empty = true;
        assert_eq!(
            run.settle(),
            Phase::Finalized {
                cause: None,
                exit: Some(exit)
            }
        );
        assert_eq!(run.actions.len(), 1, "{:?}", run.actions);
    }

    #[test]
    fn work_after_a_terminal_event_goes_back_to_running_but_not_after_the_signal() {
        let mut run = FakeRun::new();
        run.at(1).feed(Input::Line { activity: true });
        run.at(2).feed(Input::TerminalEvent);
        run.at(3).feed(Input::Line { activity: true });
        assert_eq!(
            run.phase,
            Phase::Completing {
                since_line: run.t0 + Duration::from_secs(3),
                signal: false
            },
            "every line moves the completion window"
        );
        run.at(4).feed(Input::WorkingAgain);
        assert_eq!(run.phase, Phase::Running, "pi retries after its agent_end");
        assert_eq!(
            run.wait(),
            Clock::StallWarning,
            "silence is the stall clock's again"
        );
        run.at(15).feed(Input::TerminalEvent);
        assert!(matches!(run.phase, Phase::Completing { .. }));
        run.at(16).feed(Input::CompletionSignal);
        run.at(17).feed(Input::WorkingAgain);
        assert_eq!(
            run.phase,
            Phase::Completing {
                since_line: run.t0 + Duration::from_secs(16),
                signal: true
            },
            "the completion signal is never taken back"
        );
    }

    #[test]
    fn every_phase_before_the_exit_can_be_ended_by_cancel_stall_or_timeout() {
        let t = |s: u64, run: &FakeRun| run.t0 + Duration::from_secs(s);
        for input in [
            Input::Cancel,
            Input::Deadline(Clock::Stall),
            Input::Deadline(Clock::Run),
            Input::Deadline(Clock::Startup),
            Input::Deadline(Clock::FatalError),
        ] {
            let mut run = FakeRun::new();
            let since_line = t(1, &run);
            for phase in [
                Phase::Starting,
                Phase::Running,
                Phase::Completing {
                    since_line,
                    signal: false,
                },
            ] {
                run.phase = phase;
                let actions = run.at(7).feed(input);
                let cause = run.phase.cause().expect("a cause");
                assert_eq!(
                    run.phase,
                    Phase::Terminating(Ending {
                        cause,
                        sigterm_at: t(7, &run)
                    }),
                    "{input:?} in {phase:?}"
                );
                assert_eq!(
                    actions,
                    vec![Action::Announce(cause), Action::Term],
                    "{input:?} in {phase:?}"
                );
            }
        }
        let mut run = FakeRun::new();
        run.feed(Input::Deadline(Clock::Completion));
        assert_eq!(run.phase.cause(), Some(Cause::ForcedCompletion));
        let mut run = FakeRun::new();
        run.feed(Input::Deadline(Clock::StallWarning));
        assert_eq!(run.phase, Phase::Starting, "a warning ends nothing");
    }

    #[test]
    fn sigterm_then_sigkill_after_the_kill_grace_then_the_bounded_wait() {
        let mut run = FakeRun::new();
        run.at(1).feed(Input::Line { activity: true });
        assert_eq!(run.wait(), Clock::StallWarning);
        assert_eq!(run.wait(), Clock::Stall);
        assert_eq!(run.secs(run.now), 21);
        assert_eq!(run.phase.cause(), Some(Cause::Stalled));
        assert_eq!(run.actions.last(), Some(&Action::Term));
        assert_eq!(run.wait(), Clock::KillGrace);
        assert_eq!(run.secs(run.now), 21 + KILL_GRACE.as_secs());
        assert_eq!(run.actions.last(), Some(&Action::KillAll));
        let Phase::Killing { since, cause, exit } = run.phase else {
            panic!("{:?}", run.phase)
        };
        assert_eq!(
            (run.secs(since), cause, exit),
            (24, Some(Cause::Stalled), None)
        );
        // A process that survives SIGKILL (state D) keeps the tree busy:
        // the wait for it is bounded.
        assert_eq!(run.settle(), run.phase);
        assert_eq!(run.wait(), Clock::FinalKill);
        assert_eq!(run.secs(run.now), 24 + FINAL_KILL_WAIT.as_secs());
        assert_eq!(
            run.phase,
            Phase::Finalized {
                cause: Some(Cause::Stalled),
                exit: None
            }
        );
        assert_eq!(run.actions.last(), Some(&Action::GiveUp));
    }

    #[test]
    fn an_agent_that_exits_on_sigterm_keeps_its_cause_and_its_sigkill_due() {
        let mut run = FakeRun::new();
        run.at(1).feed(Input::Cancel);
        let actions = run.at(3).feed(exited(143));
        assert!(matches!(
            actions[..],
            [Action::Reaped {
                orphans: Some(Signal::Term),
                ..
            }]
        ));
        assert_eq!(run.phase.cause(), Some(Cause::Cancelled));
        assert_eq!(run.phase.exit().and_then(|e| e.code), Some(143));
        // The drain window (exit + 2 s = 5 s) and SIGKILL (SIGTERM + 3 s =
        // 4 s) both run; the earlier fires.
        assert_eq!(run.wait(), Clock::KillGrace);
        assert_eq!(run.secs(run.now), 4);
        assert_eq!(run.actions.last(), Some(&Action::KillAll));
        run.shim_open = false;
        assert_eq!(
            run.settle(),
            Phase::Finalized {
                cause: Some(Cause::Cancelled),
                exit: run.phase.exit()
            }
        );
    }

    #[test]
    fn a_drain_that_runs_out_cuts_the_output_and_kills_what_holds_it() {
        let mut run = FakeRun::new();
        run.at(1).feed(Input::Line { activity: true });
        run.at(2).feed(exited(0));
        // An orphan holds stdout open and ignores SIGTERM.
        assert_eq!(run.settle(), run.phase);
        assert_eq!(run.wait(), Clock::Drain);
        assert_eq!(run.secs(run.now), 2 + DRAIN_GRACE.as_secs());
        assert_eq!(
            run.actions[run.actions.len() - 2..],
            [Action::CutOutput, Action::KillAll]
        );
        assert!(
            matches!(
                run.phase,
                Phase::Killing {
                    cause: None,
                    exit: Some(_),
                    ..
                }
            ),
            "{:?}",
            run.phase
        );
        // The kill closed the pipes; the shim reports the tree empty.
        run.output_open = false;
        run.tree_empty = true;
        assert!(matches!(
            run.settle(),
            Phase::Finalized {
                cause: None,
                exit: Some(Exit { code: Some(0), .. })
            }
        ));
    }

    #[test]
    fn no_limit_fires_once_the_agent_has_exited() {
        let mut run = FakeRun::new();
        run.at(1).feed(exited(0));
        let draining = run.phase;
        for clock in [
            Clock::Run,
            Clock::Startup,
            Clock::Stall,
            Clock::Completion,
            Clock::FatalError,
            Clock::KillGrace,
        ] {
            assert!(run.feed(Input::Deadline(clock)).is_empty(), "{clock:?}");
            assert_eq!(run.phase, draining, "{clock:?}");
        }
        assert_eq!(run.wait(), Clock::Drain, "only the drain window is left");
    }

    #[test]
    fn a_second_cancel_or_a_kill_sends_sigkill_at_once() {
        let mut run = FakeRun::new();
        run.at(1).feed(Input::Cancel);
        assert_eq!(run.at(2).feed(Input::Cancel), vec![Action::KillAll]);
        assert!(matches!(
            run.phase,
            Phase::Killing {
                cause: Some(Cause::Cancelled),
                ..
            }
        ));
        // Asked again: SIGKILL again, but the wait keeps its start.
        assert_eq!(run.at(3).feed(Input::Kill), vec![Action::KillAll]);
        let Phase::Killing { since, .. } = run.phase else {
            panic!("{:?}", run.phase)
        };
        assert_eq!(run.secs(since), 2);

        let mut run = FakeRun::new();
        assert_eq!(
            run.feed(Input::Kill),
            vec![Action::Announce(Cause::Cancelled), Action::KillAll]
        );
        assert!(matches!(run.phase, Phase::Killing { .. }));
    }

    #[test]
    fn with_no_kill_grace_the_run_is_sigkilled_at_once() {
        let mut run = FakeRun::new();
        run.graces.kill = Duration::ZERO;
        run.graces.drain = Duration::ZERO;
        let actions = run.at(5).feed(Input::Deadline(Clock::Startup));
        assert_eq!(
            actions,
            vec![
                Action::Announce(Cause::StartupTimeout),
                Action::SandboxKill,
                Action::KillAll
            ]
        );
        assert!(matches!(run.phase, Phase::Killing { .. }));
        // The exit that comes after SIGKILL sends nothing more.
        let actions = run.feed(exited(137));
        assert!(matches!(
            actions[..],
            [Action::Reaped { orphans: None, .. }]
        ));

        let mut run = FakeRun::new();
        run.graces.drain = Duration::ZERO;
        let actions = run.feed(exited(0));
        assert!(
            matches!(
                actions[..],
                [Action::Reaped {
                    orphans: Some(Signal::Kill),
                    ..
                }]
            ),
            "no drain window: orphans are SIGKILLed at once"
        );
    }

    #[test]
    fn a_shim_that_goes_away_before_the_exit_ends_the_run_without_one() {
        let mut run = FakeRun::new();
        run.at(1).feed(Input::Line { activity: true });
        run.shim_open = false;
        assert_eq!(
            run.feed(Input::ShimGone),
            vec![Action::ShimLost, Action::KillAll]
        );
        assert_eq!(
            run.settle(),
            Phase::Finalized {
                cause: None,
                exit: None
            }
        );
        // After the exit, the shim going away is its normal end.
        let mut run = FakeRun::new();
        run.feed(exited(0));
        run.shim_open = false;
        assert!(run.feed(Input::ShimGone).is_empty());
        run.output_open = false;
        assert!(run.settle().is_finalized(), "{:?}", run.phase);
    }

    #[test]
    fn a_budget_exceeded_ends_a_working_run_but_not_one_that_said_it_is_done() {
        let mut run = FakeRun::new();
        run.at(1).feed(Input::Line { activity: true });
        let actions = run.at(2).feed(Input::BudgetExceeded);
        assert_eq!(
            actions,
            [Action::Announce(Cause::BudgetExceeded), Action::Term]
        );
        assert_eq!(run.phase.cause(), Some(Cause::BudgetExceeded));
        // Asked again while ending: nothing more.
        assert!(run.at(3).feed(Input::BudgetExceeded).is_empty());

        let mut done = FakeRun::new();
        done.at(1).feed(Input::TerminalEvent);
        assert!(done.at(2).feed(Input::BudgetExceeded).is_empty());
        assert!(matches!(done.phase, Phase::Completing { .. }));
    }

    #[test]
    fn nothing_moves_a_finalized_run() {
        let mut run = FakeRun::new();
        run.feed(Input::Kill);
        run.shim_open = false;
        let done = run.settle();
        assert!(done.is_finalized());
        for input in [
            Input::Line { activity: true },
            Input::TerminalEvent,
            Input::CompletionSignal,
            exited(0),
            Input::ShimGone,
            Input::Cancel,
            Input::Kill,
            Input::Deadline(Clock::FinalKill),
        ] {
            assert!(run.feed(input).is_empty(), "{input:?}");
            assert_eq!(run.phase, done, "{input:?}");
        }
        assert_eq!(run.clocks.next(run.phase.waits()), None);
    }
}
