//! Why a run ended: a closed set, each with its exit code.

use serde::Serialize;

#[non_exhaustive]
#[derive(
    serde::Deserialize, schemars::JsonSchema, Debug, Clone, Copy, PartialEq, Eq, Serialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Exit 0 (and, for an agent, it reported success).
    Succeeded,
    /// Non-zero exit, killed by a signal it was not sent by warden, or an
    /// agent that reported an error.
    AgentFailed,
    /// No activity for the stall timeout.
    Stalled,
    /// No activity at all within the startup timeout.
    StartupTimeout,
    /// The run clock ran out.
    TimedOut,
    /// warden was asked to stop (SIGINT/SIGTERM or the library's cancel).
    Cancelled,
    /// The agent could not be started.
    SpawnFailed,
    /// warden itself failed; the report says how.
    InternalError,
    /// A budget (cost, tokens, turns; the run's, its session's or its
    /// batch's) was exceeded: `budget_exceeded` in `run.json` says which.
    BudgetExceeded,
    /// A session's: the iterations ran out with its check (`--check`)
    /// still failing. Never a run's.
    CheckFailed,
    /// A session's: a setup hook (`--host-setup`, `--setup`) or a
    /// command of the prompt (`{{$ CMD}}`) failed, so no agent started
    /// after it. Never a run's.
    SetupFailed,
    /// A session's: the work succeeded, then `--on-success` or
    /// `--finally` failed. Never a run's.
    HookFailed,
    /// A session's: the work succeeded and `--merge` found a conflict;
    /// both branches are as they were. Never a run's.
    MergeConflict,
}

impl std::fmt::Display for Verdict {
    /// As run.json spells it: `succeeded`, `stalled`, ...
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Verdict {
    /// Every verdict, in the order of their exit codes.
    pub const ALL: [Verdict; 13] = [
        Verdict::Succeeded,
        Verdict::AgentFailed,
        Verdict::Stalled,
        Verdict::StartupTimeout,
        Verdict::TimedOut,
        Verdict::SpawnFailed,
        Verdict::BudgetExceeded,
        Verdict::CheckFailed,
        Verdict::SetupFailed,
        Verdict::HookFailed,
        Verdict::MergeConflict,
        Verdict::InternalError,
        Verdict::Cancelled,
    ];

    /// What it means, in a few words (a manual's line).
    pub fn meaning(self) -> &'static str {
        match self {
            Verdict::Succeeded => "the command exited 0 (an agent also reported success)",
            Verdict::AgentFailed => {
                "a non-zero exit, a signal warden did not send, or an error the agent reported"
            }
            Verdict::Stalled => "no activity for the stall timeout",
            Verdict::StartupTimeout => "no activity at all within the startup timeout",
            Verdict::TimedOut => "the run clock ran out",
            Verdict::SpawnFailed => "the command or the agent's CLI could not be started",
            Verdict::BudgetExceeded => "a cost, token or turn budget was passed",
            Verdict::CheckFailed => "a session's iterations ran out with its check failing",
            Verdict::SetupFailed => "a session's setup hook or prompt command failed",
            Verdict::HookFailed => "a session succeeded, then its --on-success or --finally failed",
            Verdict::MergeConflict => "a session succeeded and --merge found a conflict",
            Verdict::InternalError => "warden itself failed",
            Verdict::Cancelled => "warden was asked to stop (SIGINT, SIGTERM, SIGHUP)",
        }
    }

    /// The process exit code of `warden run` for this verdict.
    pub fn exit_code(self) -> i32 {
        match self {
            Verdict::Succeeded => 0,
            Verdict::AgentFailed => 1,
            Verdict::Stalled => 3,
            Verdict::StartupTimeout => 4,
            Verdict::TimedOut => 5,
            Verdict::SpawnFailed => 6,
            Verdict::BudgetExceeded => 7,
            Verdict::CheckFailed => 8,
            Verdict::SetupFailed => 9,
            Verdict::HookFailed => 10,
            Verdict::MergeConflict => 11,
            Verdict::InternalError => 70,
            Verdict::Cancelled => 130,
        }
    }

    /// The snake_case name used in every artifact.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Succeeded => "succeeded",
            Verdict::AgentFailed => "agent_failed",
            Verdict::Stalled => "stalled",
            Verdict::StartupTimeout => "startup_timeout",
            Verdict::TimedOut => "timed_out",
            Verdict::Cancelled => "cancelled",
            Verdict::SpawnFailed => "spawn_failed",
            Verdict::InternalError => "internal_error",
            Verdict::BudgetExceeded => "budget_exceeded",
            Verdict::CheckFailed => "check_failed",
            Verdict::SetupFailed => "setup_failed",
            Verdict::HookFailed => "hook_failed",
            Verdict::MergeConflict => "merge_conflict",
        }
    }
}

/// Why warden began to end the run before the agent exited on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    Stalled,
    StartupTimeout,
    TimedOut,
    Cancelled,
    /// The completion window ran out; the run keeps the verdict it earned.
    ForcedCompletion,
    /// The agent reported an error no retry fixes and did not end by
    /// itself (`--on-fatal-error end`).
    FatalError,
    /// A budget was exceeded.
    BudgetExceeded,
}

/// Everything the verdict depends on.
#[derive(Debug, Clone, Default)]
pub(crate) struct Facts {
    /// A JSON agent, which must end with a terminal event; `exec` need not.
    pub json_agent: bool,
    pub spawn_error: Option<String>,
    pub cause: Option<Cause>,
    /// `(exit code, signal)`.
    pub exit: Option<(Option<i32>, Option<i32>)>,
    /// The terminal event's word: success, failure, or none came.
    pub terminal: Option<bool>,
    pub agent_error: Option<String>,
    /// The agent's error is about credentials: the reason says so.
    pub authentication_error: bool,
    pub completion_signal_seen: bool,
    /// Why the caller cancelled the run, when it said.
    pub cancelled_because: Option<String>,
    /// A budget exceeded during the run, said in full (`run cost budget
    /// $0.50 exceeded: $0.53 spent`).
    pub budget_exceeded: Option<String>,
    /// The clocks, written for people (`15m`), for the reasons.
    pub stall_timeout: String,
    pub startup_timeout: String,
    pub timeout: String,
    pub completion_timeout: String,
}

/// Decides the verdict and says why, in one sentence.
pub(crate) fn decide(f: &Facts) -> (Verdict, String) {
    if let Some(e) = &f.spawn_error {
        return (Verdict::SpawnFailed, e.clone());
    }
    let agent_failed = |what: &str| {
        let detail = f.agent_error.as_deref().unwrap_or("no message");
        let what = if f.authentication_error {
            format!("{what} (authentication)")
        } else {
            what.to_string()
        };
        (Verdict::AgentFailed, format!("{what}: {detail}"))
    };
    // Over budget is the verdict whether warden ended the run for it or
    // the crossing came with the agent's own end (a cost reported only in
    // the last line): not when another limit had ended the run first.
    if let Some(why) = &f.budget_exceeded
        && matches!(
            f.cause,
            None | Some(Cause::BudgetExceeded | Cause::ForcedCompletion)
        )
    {
        let why = if f.cause == Some(Cause::BudgetExceeded) {
            format!("{why}; the run was ended")
        } else {
            format!("{why}, counted as the agent ended (it was not cut short)")
        };
        return (Verdict::BudgetExceeded, why);
    }
    match f.cause {
        Some(Cause::BudgetExceeded) => {
            return (Verdict::BudgetExceeded, "a budget was exceeded".into());
        }
        Some(Cause::Stalled) => {
            return (
                Verdict::Stalled,
                format!("no activity for {} (stall timeout)", f.stall_timeout),
            );
        }
        Some(Cause::StartupTimeout) => {
            return (
                Verdict::StartupTimeout,
                format!(
                    "no output at all within {} of the start (startup timeout)",
                    f.startup_timeout
                ),
            );
        }
        Some(Cause::TimedOut) => {
            return (
                Verdict::TimedOut,
                format!("the run clock of {} ran out", f.timeout),
            );
        }
        Some(Cause::Cancelled) => {
            let why = f.cancelled_because.as_deref();
            return (
                Verdict::Cancelled,
                format!("cancelled {}", why.unwrap_or("by a signal to warden")),
            );
        }
        Some(Cause::FatalError) => {
            let class = if f.authentication_error {
                " (authentication)"
            } else {
                ""
            };
            return (
                Verdict::AgentFailed,
                format!(
                    "the agent reported an error that retrying will not fix{class}: {}; \
                     the run was ended rather than left to the agent's own retries \
                     (--on-fatal-error wait lets it retry)",
                    f.agent_error.as_deref().unwrap_or("no message")
                ),
            );
        }
        Some(Cause::ForcedCompletion) => {
            let what = if f.terminal.is_some() {
                "the agent's terminal event"
            } else {
                "the completion signal"
            };
            if f.terminal == Some(false) {
                return agent_failed("the agent reported an error, then did not exit");
            }
            return (
                Verdict::Succeeded,
                format!(
                    "{what} was seen, then {} of silence without exit; the process tree was killed",
                    f.completion_timeout
                ),
            );
        }
        None => {}
    }
    if f.terminal == Some(false) {
        return agent_failed("the agent reported an error");
    }
    match f.exit {
        Some((Some(0), _)) => {
            if !f.json_agent || f.terminal == Some(true) {
                (Verdict::Succeeded, "exited with code 0".into())
            } else if f.completion_signal_seen {
                (
                    Verdict::Succeeded,
                    "exited with code 0 after the completion signal (no terminal event)".into(),
                )
            } else {
                (
                    Verdict::AgentFailed,
                    "exited with code 0 but no terminal event: the agent never said it was done"
                        .into(),
                )
            }
        }
        Some((Some(code), _)) => match &f.agent_error {
            Some(_) => agent_failed(&format!("exited with code {code}")),
            None => (Verdict::AgentFailed, format!("exited with code {code}")),
        },
        Some((None, Some(sig))) => (
            Verdict::AgentFailed,
            format!(
                "killed by signal {sig} ({}), not sent by warden",
                signal_name(sig)
            ),
        ),
        _ => (
            Verdict::InternalError,
            "the agent's exit status is unknown".into(),
        ),
    }
}

/// The usual name of a signal number, for messages.
pub(crate) fn signal_name(sig: i32) -> &'static str {
    match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        6 => "SIGABRT",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        _ => "signal",
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn all_lists_each_verdict_once() {
        let names: std::collections::BTreeSet<&str> =
            Verdict::ALL.iter().map(|v| v.as_str()).collect();
        assert_eq!(names.len(), Verdict::ALL.len());
        for v in Verdict::ALL {
            // Every verdict is one of ALL: a new one must be added there
            // (this match fails to compile without it).
            let i = match v {
                Verdict::Succeeded => 0,
                Verdict::AgentFailed => 1,
                Verdict::Stalled => 2,
                Verdict::StartupTimeout => 3,
                Verdict::TimedOut => 4,
                Verdict::SpawnFailed => 5,
                Verdict::BudgetExceeded => 6,
                Verdict::CheckFailed => 7,
                Verdict::SetupFailed => 8,
                Verdict::HookFailed => 9,
                Verdict::MergeConflict => 10,
                Verdict::InternalError => 11,
                Verdict::Cancelled => 12,
            };
            assert_eq!(Verdict::ALL[i], v);
            assert!(!v.meaning().is_empty());
        }
    }

    use super::*;

    fn json(exit: i32, terminal: Option<bool>) -> Facts {
        Facts {
            json_agent: true,
            exit: Some((Some(exit), None)),
            terminal,
            ..Facts::default()
        }
    }

    #[test]
    fn a_terminal_error_fails_the_run_even_with_exit_zero() {
        let mut f = json(0, Some(false));
        f.agent_error = Some("API Error: 500".into());
        let (v, why) = decide(&f);
        assert_eq!(v, Verdict::AgentFailed);
        assert!(why.contains("API Error: 500"), "{why}");
    }

    #[test]
    fn an_authentication_error_is_named_in_the_reason() {
        let mut f = json(1, None);
        f.agent_error = Some("HTTP 401".into());
        f.authentication_error = true;
        let (v, why) = decide(&f);
        assert_eq!(v, Verdict::AgentFailed);
        assert_eq!(why, "exited with code 1 (authentication): HTTP 401");
    }

    #[test]
    fn a_json_agent_without_terminal_event_fails() {
        let (v, why) = decide(&json(0, None));
        assert_eq!(v, Verdict::AgentFailed);
        assert!(why.contains("no terminal event"), "{why}");
        let mut f = json(0, None);
        f.completion_signal_seen = true;
        assert_eq!(
            decide(&f).0,
            Verdict::Succeeded,
            "the signal counts as done"
        );
        assert_eq!(decide(&json(0, Some(true))).0, Verdict::Succeeded);
        assert_eq!(decide(&json(2, Some(true))).0, Verdict::AgentFailed);
    }

    #[test]
    fn exec_needs_no_terminal_event() {
        let f = Facts {
            exit: Some((Some(0), None)),
            ..Facts::default()
        };
        assert_eq!(decide(&f).0, Verdict::Succeeded);
    }

    #[test]
    fn forced_completion_keeps_the_earned_verdict() {
        let mut f = json(0, Some(true));
        f.exit = Some((None, Some(15)));
        f.cause = Some(Cause::ForcedCompletion);
        assert_eq!(decide(&f).0, Verdict::Succeeded);
        f.terminal = Some(false);
        assert_eq!(decide(&f).0, Verdict::AgentFailed);
        f.terminal = None;
        f.completion_signal_seen = true;
        assert_eq!(decide(&f).0, Verdict::Succeeded);
    }

    #[test]
    fn a_fatal_error_ends_as_agent_failed_naming_the_error() {
        let mut f = json(0, None);
        f.exit = Some((None, Some(15)));
        f.cause = Some(Cause::FatalError);
        f.agent_error = Some("authentication failed: authentication_failed".into());
        f.authentication_error = true;
        let (v, why) = decide(&f);
        assert_eq!(v, Verdict::AgentFailed);
        assert!(why.contains("(authentication)"), "{why}");
        assert!(why.contains("authentication_failed"), "{why}");
        assert!(why.contains("--on-fatal-error wait"), "{why}");
    }

    #[test]
    fn an_exceeded_budget_is_the_verdict_unless_another_limit_ended_the_run_first() {
        let mut f = json(0, Some(true));
        f.budget_exceeded = Some("run cost budget $0.50 exceeded: $0.53 spent".into());
        let (v, why) = decide(&f);
        assert_eq!(v, Verdict::BudgetExceeded);
        assert!(why.contains("not cut short"), "{why}");
        f.cause = Some(Cause::BudgetExceeded);
        f.exit = Some((None, Some(15)));
        let (v, why) = decide(&f);
        assert_eq!(v, Verdict::BudgetExceeded);
        assert_eq!(
            why,
            "run cost budget $0.50 exceeded: $0.53 spent; the run was ended"
        );
        assert_eq!(v.exit_code(), 7);
        f.cause = Some(Cause::Stalled);
        assert_eq!(decide(&f).0, Verdict::Stalled);
    }

    #[test]
    fn serialized_name_matches_as_str() {
        for v in [
            Verdict::Succeeded,
            Verdict::AgentFailed,
            Verdict::Stalled,
            Verdict::StartupTimeout,
            Verdict::TimedOut,
            Verdict::Cancelled,
            Verdict::SpawnFailed,
            Verdict::InternalError,
            Verdict::BudgetExceeded,
        ] {
            assert_eq!(serde_json::to_value(v).unwrap(), v.as_str());
        }
    }
}
