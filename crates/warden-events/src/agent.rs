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

    pub fn names() -> String {
        Self::ALL.map(Agent::name).join(", ")
    }
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
