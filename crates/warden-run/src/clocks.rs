//! Which deadline comes next: a pure function of the run's state.
//!
//! The supervisor never polls. After every input it asks this module for
//! the single earliest deadline and sleeps until exactly then (or until the
//! next input, which may move the deadline). Each clock is a value derived
//! from timestamps, so re-arming the stall clock on activity is just a new
//! `last_activity`. Which clocks run at all is said by the run's phase as
//! a [`Waits`]: each phase's own deadlines (the kill grace, the drain
//! window, the wait after SIGKILL) are computed from the time it began.
//!
//! This module knows nothing of the supervisor: the phase describes
//! itself in its terms (`Phase::waits`), so imports point one way.

use std::time::{Duration, Instant};

/// The time as the run's clocks read it: tokio's, so that a test that
/// pauses tokio's time moves every clock of a run (and the deadlines it
/// sleeps until) together. Unpaused, it is the monotonic clock.
pub(crate) fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// What a phase of the run waits on, and since when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waits {
    /// Before the agent's exit, with no end begun: the run clock, and the
    /// startup clock (`starting`, no line yet), the completion window
    /// (`completing`: since its last line) or the silence clocks.
    Limits {
        starting: bool,
        completing: Option<Instant>,
    },
    /// SIGTERM went out at this instant: SIGKILL after the kill grace.
    KillGrace { sigterm_at: Instant },
    /// The agent exited at `exit_at`: the drain window, and the SIGKILL
    /// still due if warden was ending the run (`sigterm_at`).
    Drain {
        exit_at: Instant,
        sigterm_at: Option<Instant>,
    },
    /// SIGKILL went out at `since`: the bounded wait for confirmation.
    FinalKill { since: Instant },
    /// Nothing: the run is over.
    Nothing,
}

/// The clocks a run can be waiting on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Clock {
    /// The run clock (`--timeout`).
    Run,
    /// No activity since spawn (`--startup-timeout`).
    Startup,
    /// Half the stall timeout with no activity: warn once.
    StallWarning,
    /// No activity for the stall timeout.
    Stall,
    /// Silence after the terminal event or completion signal.
    Completion,
    /// A fatal error was reported and the agent did not end by itself.
    FatalError,
    /// SIGTERM was sent this long ago: now SIGKILL.
    KillGrace,
    /// The agent exited this long ago and output is still open.
    Drain,
    /// The final SIGKILL was sent; stop waiting for confirmation.
    FinalKill,
}

/// What the clocks need to know about the run.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClockState {
    pub started: Option<Instant>,
    pub timeout: Option<Duration>,
    pub startup_timeout: Option<Duration>,
    pub stall_timeout: Option<Duration>,
    /// Before the first line: the stall timeout plus the time the agent's
    /// CLI may take to print its first line (none for a command of the
    /// user's). Whichever of this and the startup clock comes first ends a
    /// run that never printed: `--stall-timeout 2s` on a silent command
    /// stalls after 2 s, while the defaults (15 min of stall against 2 min
    /// of startup) leave the startup clock to govern as before.
    pub stall_before_first_line: Option<Duration>,
    /// While a tool call that declared its own time limit is open: that
    /// limit plus a margin. The stall clock is at least this long.
    pub stall_floor: Option<Duration>,
    pub completion_timeout: Option<Duration>,
    /// How long the agent has to end by itself after a fatal error; `None`
    /// leaves it to retry.
    pub fatal_error_grace: Option<Duration>,
    /// When the fatal error that is still the agent's last word came.
    pub fatal_error_at: Option<Instant>,
    pub kill_grace: Duration,
    pub drain_grace: Duration,
    pub final_kill_wait: Duration,
    /// The last activity; `None` while no line has come yet.
    pub last_activity: Option<Instant>,
    /// A stall warning was already given for the current silent stretch.
    pub warned: bool,
}

impl ClockState {
    /// The stall timeout in force: the configured one, stretched by an
    /// open tool call's declared limit.
    pub(crate) fn effective_stall(&self) -> Option<Duration> {
        self.stall_timeout
            .map(|s| self.stall_floor.map_or(s, |f| s.max(f)))
    }

    /// The earliest deadline that is still to fire while the run waits
    /// on `waits`.
    pub(crate) fn next(&self, waits: Waits) -> Option<(Instant, Clock)> {
        let started = self.started?;
        let mut candidates: Vec<(Instant, Clock)> = Vec::with_capacity(4);
        match waits {
            Waits::Nothing => {}
            Waits::FinalKill { since } => {
                return after(since, self.final_kill_wait).map(|at| (at, Clock::FinalKill));
            }
            Waits::KillGrace { sigterm_at } => {
                candidates.extend(self.kill_grace_over(sigterm_at));
            }
            Waits::Drain {
                exit_at,
                sigterm_at,
            } => {
                candidates.extend(after(exit_at, self.drain_grace).map(|at| (at, Clock::Drain)));
                candidates.extend(sigterm_at.and_then(|t| self.kill_grace_over(t)));
            }
            Waits::Limits {
                starting,
                completing,
            } => {
                if let Some(t) = self.timeout {
                    candidates.extend(after(started, t).map(|at| (at, Clock::Run)));
                }
                match (completing, self.completion_timeout, self.startup_timeout) {
                    // The completion window, stretched while a tool that
                    // declared a limit is open; with no window, the stall
                    // clock goes on.
                    (Some(since_line), Some(c), _) => {
                        let c = self.stall_floor.map_or(c, |f| c.max(f));
                        candidates.extend(after(since_line, c).map(|at| (at, Clock::Completion)));
                    }
                    (None, _, Some(s)) if starting => {
                        candidates.extend(after(started, s).map(|at| (at, Clock::Startup)));
                        if let Some(stall) = self.stall_before_first_line {
                            candidates.extend(after(started, stall).map(|at| (at, Clock::Stall)));
                        }
                    }
                    // With the startup clock off, the stall clock runs from
                    // the spawn: silence is silence.
                    _ => candidates.extend(self.silence_clocks(started)),
                }
            }
        }
        candidates.into_iter().min_by_key(|(at, _)| *at)
    }

    /// SIGKILL after SIGTERM and the kill grace.
    fn kill_grace_over(&self, sigterm_at: Instant) -> Option<(Instant, Clock)> {
        after(sigterm_at, self.kill_grace).map(|at| (at, Clock::KillGrace))
    }

    /// The stall clock (with its warning) and the fatal error's grace.
    fn silence_clocks(&self, started: Instant) -> Vec<(Instant, Clock)> {
        let mut candidates = Vec::with_capacity(3);
        let last = self.last_activity.unwrap_or(started);
        let fatal = self.fatal_error_at.zip(self.fatal_error_grace);
        if let Some((at, grace)) = fatal {
            candidates.extend(after(at, grace).map(|at| (at, Clock::FatalError)));
        }
        if let Some(s) = self.effective_stall() {
            // No warning of a stall that the fatal error's end will come
            // before.
            if !self.warned && fatal.is_none() {
                candidates.extend(after(last, s / 2).map(|at| (at, Clock::StallWarning)));
            }
            candidates.extend(after(last, s).map(|at| (at, Clock::Stall)));
        }
        candidates
    }
}

/// `at + d`, or `None` (never) when that is beyond what a clock can hold.
fn after(at: Instant, d: Duration) -> Option<Instant> {
    at.checked_add(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STARTING: Waits = Waits::Limits {
        starting: true,
        completing: None,
    };
    const RUNNING: Waits = Waits::Limits {
        starting: false,
        completing: None,
    };

    fn completing(since_line: Instant) -> Waits {
        Waits::Limits {
            starting: false,
            completing: Some(since_line),
        }
    }

    fn base() -> (Instant, ClockState) {
        let t0 = Instant::now();
        let s = ClockState {
            started: Some(t0),
            timeout: Some(Duration::from_secs(100)),
            startup_timeout: Some(Duration::from_secs(10)),
            stall_timeout: Some(Duration::from_secs(20)),
            completion_timeout: Some(Duration::from_secs(5)),
            kill_grace: Duration::from_secs(3),
            drain_grace: Duration::from_secs(2),
            final_kill_wait: Duration::from_secs(1),
            ..ClockState::default()
        };
        (t0, s)
    }

    #[test]
    fn startup_clock_until_first_activity_then_stall_warning_then_stall() {
        let (t0, mut s) = base();
        assert_eq!(
            s.next(STARTING),
            Some((t0 + Duration::from_secs(10), Clock::Startup))
        );
        let act = t0 + Duration::from_secs(1);
        s.last_activity = Some(act);
        assert_eq!(
            s.next(RUNNING),
            Some((act + Duration::from_secs(10), Clock::StallWarning))
        );
        s.warned = true;
        assert_eq!(
            s.next(RUNNING),
            Some((act + Duration::from_secs(20), Clock::Stall))
        );
    }

    #[test]
    fn before_the_first_line_a_stall_shorter_than_the_startup_clock_ends_the_run() {
        let (t0, mut s) = base();
        // 2 s of stall and no allowance (a command of the user's), against
        // 10 s of startup: the stall comes first.
        s.stall_timeout = Some(Duration::from_secs(2));
        s.stall_before_first_line = Some(Duration::from_secs(2));
        assert_eq!(
            s.next(STARTING),
            Some((t0 + Duration::from_secs(2), Clock::Stall))
        );
        // An agent's CLI gets its allowance on top: 2 + 15 s, so the
        // startup clock (10 s) governs.
        s.stall_before_first_line = Some(Duration::from_secs(17));
        assert_eq!(
            s.next(STARTING),
            Some((t0 + Duration::from_secs(10), Clock::Startup))
        );
    }

    #[test]
    fn without_a_startup_clock_the_stall_clock_runs_from_the_spawn() {
        let (t0, mut s) = base();
        s.startup_timeout = None;
        assert_eq!(
            s.next(STARTING),
            Some((t0 + Duration::from_secs(10), Clock::StallWarning))
        );
    }

    #[test]
    fn an_open_tool_with_a_long_declared_limit_stretches_the_stall_clock() {
        let (t0, mut s) = base();
        s.last_activity = Some(t0);
        s.warned = true;
        s.stall_floor = Some(Duration::from_secs(90));
        assert_eq!(
            s.next(RUNNING),
            Some((t0 + Duration::from_secs(90), Clock::Stall))
        );
        s.stall_floor = Some(Duration::from_secs(5));
        assert_eq!(
            s.next(RUNNING),
            Some((t0 + Duration::from_secs(20), Clock::Stall)),
            "never shorter"
        );
    }

    #[test]
    fn run_clock_wins_when_earlier_and_zero_disables() {
        let (t0, mut s) = base();
        s.timeout = Some(Duration::from_secs(5));
        assert_eq!(
            s.next(STARTING),
            Some((t0 + Duration::from_secs(5), Clock::Run))
        );
        s.timeout = None;
        s.startup_timeout = None;
        s.stall_timeout = None;
        assert_eq!(
            s.next(STARTING),
            None,
            "every clock disabled: nothing to wait for"
        );
    }

    #[test]
    fn completion_window_replaces_stall_clock() {
        let (t0, mut s) = base();
        s.last_activity = Some(t0);
        let line = t0 + Duration::from_secs(3);
        assert_eq!(
            s.next(completing(line)),
            Some((line + Duration::from_secs(5), Clock::Completion))
        );
    }

    #[test]
    fn without_a_completion_window_the_stall_clock_still_runs() {
        let (t0, mut s) = base();
        s.last_activity = Some(t0);
        s.warned = true;
        s.completion_timeout = None;
        let completing = completing(t0);
        assert_eq!(
            s.next(completing),
            Some((t0 + Duration::from_secs(20), Clock::Stall))
        );
        s.completion_timeout = Some(Duration::from_secs(5));
        s.stall_floor = Some(Duration::from_secs(90));
        assert_eq!(
            s.next(completing),
            Some((t0 + Duration::from_secs(90), Clock::Completion)),
            "an open tool stretches the window"
        );
    }

    #[test]
    fn a_fatal_error_ends_the_run_after_its_grace_with_no_stall_warning() {
        let (t0, mut s) = base();
        s.last_activity = Some(t0);
        s.fatal_error_grace = Some(Duration::from_secs(2));
        s.fatal_error_at = Some(t0);
        assert_eq!(
            s.next(RUNNING),
            Some((t0 + Duration::from_secs(2), Clock::FatalError))
        );
        s.stall_timeout = Some(Duration::from_secs(1));
        assert_eq!(
            s.next(RUNNING),
            Some((t0 + Duration::from_secs(1), Clock::Stall)),
            "a stall that comes first still ends the run, unannounced"
        );
        s.stall_timeout = Some(Duration::from_secs(20));
        s.fatal_error_grace = None;
        assert_eq!(
            s.next(RUNNING),
            Some((t0 + Duration::from_secs(10), Clock::StallWarning)),
            "--on-fatal-error wait: the stall clock as usual"
        );
    }

    #[test]
    fn a_clock_too_far_away_never_fires_instead_of_overflowing() {
        let (_, mut s) = base();
        s.timeout = Some(Duration::MAX);
        s.startup_timeout = Some(Duration::MAX);
        assert_eq!(s.next(STARTING), None);
    }

    #[test]
    fn after_exit_only_the_drain_and_kill_clocks_remain() {
        let (t0, s) = base();
        let exit = t0 + Duration::from_secs(1);
        let draining = Waits::Drain {
            exit_at: exit,
            sigterm_at: None,
        };
        assert_eq!(
            s.next(draining),
            Some((exit + Duration::from_secs(2), Clock::Drain))
        );
        assert_eq!(
            s.next(Waits::FinalKill { since: exit }),
            Some((exit + Duration::from_secs(1), Clock::FinalKill))
        );
        assert_eq!(s.next(Waits::Nothing), None);
    }

    #[test]
    fn terminating_waits_for_kill_grace_only() {
        let (t0, s) = base();
        assert_eq!(
            s.next(Waits::KillGrace { sigterm_at: t0 }),
            Some((t0 + Duration::from_secs(3), Clock::KillGrace))
        );
        // The agent exits within the kill grace: SIGKILL is still due, and
        // the drain window runs beside it.
        let late = t0 + Duration::from_secs(2);
        let draining = Waits::Drain {
            exit_at: late,
            sigterm_at: Some(t0),
        };
        assert_eq!(
            s.next(draining),
            Some((t0 + Duration::from_secs(3), Clock::KillGrace))
        );
        let early = Waits::Drain {
            exit_at: t0,
            sigterm_at: Some(t0),
        };
        assert_eq!(
            s.next(early),
            Some((t0 + Duration::from_secs(2), Clock::Drain))
        );
    }
}
