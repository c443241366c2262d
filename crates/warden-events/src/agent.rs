//! The agents warden knows, by name.

use std::fmt;
use std::str::FromStr;

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Agent {
    Claude,
    Codex,
    OpenCode,
    Pi,
    Gemini,
    /// Any command; output treated as plain lines.
    Exec,
}

impl Agent {
    pub const ALL: [Agent; 6] = [
        Agent::Claude,
        Agent::Codex,
        Agent::OpenCode,
        Agent::Pi,
        Agent::Gemini,
        Agent::Exec,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
            Agent::OpenCode => "opencode",
            Agent::Pi => "pi",
            Agent::Gemini => "gemini",
            Agent::Exec => "exec",
        }
    }

    /// Whether the agent writes JSON lines and ends with a terminal event.
    pub fn is_json(self) -> bool {
        self != Agent::Exec
    }

    /// Whether and when the agent's CLI reports what a run cost (in its
    /// stream, as its decoder reads it). The figure is always the CLI's
    /// own, computed by it from token counts and its price list; warden
    /// estimates none.
    pub fn cost_reporting(self) -> UsageReporting {
        match self {
            // `total_cost_usd` of the final `result` line.
            Agent::Claude => UsageReporting::AtEnd,
            // `usage.cost.total` of each assistant message, before its
            // tools run (pi); `cost` of each `step_finish` (OpenCode), which
            // comes once the step's tools have run.
            Agent::OpenCode | Agent::Pi => UsageReporting::PerStep,
            Agent::Codex | Agent::Gemini | Agent::Exec => UsageReporting::None,
        }
    }

    /// Whether and when the agent's CLI reports its token counts (in its
    /// stream, as its decoder reads it).
    pub fn token_reporting(self) -> UsageReporting {
        match self {
            // The usage of each assistant message (Claude Code), each
            // `message_end` (pi), each `step_finish` (OpenCode).
            Agent::Claude | Agent::OpenCode | Agent::Pi => UsageReporting::PerStep,
            // Codex: only `turn.completed` (one turn is the whole `codex
            // exec` run); Gemini CLI: only the `stats` of its final
            // `result`. A run ended before then reported none.
            Agent::Codex | Agent::Gemini => UsageReporting::AtEnd,
            Agent::Exec => UsageReporting::None,
        }
    }

    pub fn names() -> String {
        Self::ALL.map(Agent::name).join(", ")
    }
}

/// When an agent's CLI reports a figure of its usage (its cost, its
/// tokens).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageReporting {
    /// With each model call (pi: as it answers; OpenCode: when the step's
    /// tools have run): a budget of it can end the run mid-way.
    PerStep,
    /// Only in its last line, when the run is over: a budget of it is
    /// judged then (and a session stops on it), but cannot cut the run
    /// short.
    AtEnd,
    /// Never: a budget of it could never fire.
    None,
}

impl fmt::Display for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An agent name that is not one of [`Agent::ALL`].
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownAgent(pub String);

impl fmt::Display for UnknownAgent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown agent `{}`; known agents: {}",
            self.0,
            Agent::names()
        )
    }
}

impl std::error::Error for UnknownAgent {}

impl FromStr for Agent {
    type Err = UnknownAgent;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Agent::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| UnknownAgent(s.to_string()))
    }
}
