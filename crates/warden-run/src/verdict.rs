//! Why a run ended: a closed set, each with its exit code (DESIGN §6).

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
}

impl Verdict {
    /// The process exit code of `warden run` for this verdict.
    pub fn exit_code(self) -> i32 {
        match self {
            Verdict::Succeeded => 0,
            Verdict::AgentFailed => 1,
            Verdict::Stalled => 3,
            Verdict::StartupTimeout => 4,
            Verdict::TimedOut => 5,
            Verdict::SpawnFailed => 6,
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        ] {
            assert_eq!(serde_json::to_value(v).unwrap(), v.as_str());
        }
    }
}
