//! The clocks and bounds of one run, resolved and validated.

use std::time::Duration;

use crate::defaults;

/// The limits a run is supervised with. A clock of `None` never fires
/// (the user wrote `0`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    pub timeout: Option<Duration>,
    pub stall_timeout: Option<Duration>,
    pub startup_timeout: Option<Duration>,
    pub completion_timeout: Option<Duration>,
    pub drain_grace: Duration,
    pub kill_grace: Duration,
    pub completion_signal: String,
    pub max_line: usize,
    /// What a fatal error of the agent does to the run.
    pub on_fatal_error: OnFatalError,
    /// Memory, process and CPU limits for the run's processes: through
    /// cgroups on the host, the engine's flags in a container; a limit
    /// nothing here can enforce is refused before the run starts.
    pub resources: warden_process::ResourceLimits,
    /// The most the run may spend (`--max-cost`, `--max-tokens`,
    /// `--max-turns`).
    pub budget: crate::budget::Budget,
}

/// What warden does when the agent reports an error that no retry will
/// fix (bad credentials, an unknown model, an exhausted quota) and goes on
/// without ending.
#[derive(
    serde::Deserialize,
    schemars::JsonSchema,
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    serde::Serialize,
)]
#[serde(rename_all = "snake_case")]
pub enum OnFatalError {
    /// End the run within seconds: `agent_failed`, with the error (the
    /// default: such an error is not worth minutes of the CLI's retries).
    #[default]
    End,
    /// Let the CLI retry, under the stall and run clocks as usual.
    Wait,
}

impl OnFatalError {
    pub fn as_str(self) -> &'static str {
        match self {
            OnFatalError::End => "end",
            OnFatalError::Wait => "wait",
        }
    }
}

impl std::str::FromStr for OnFatalError {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "end" => Ok(OnFatalError::End),
            "wait" => Ok(OnFatalError::Wait),
            _ => Err(()),
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            timeout: Some(defaults::TIMEOUT),
            stall_timeout: Some(defaults::STALL_TIMEOUT),
            startup_timeout: Some(defaults::STARTUP_TIMEOUT),
            completion_timeout: Some(defaults::COMPLETION_TIMEOUT),
            drain_grace: defaults::DRAIN_GRACE,
            kill_grace: defaults::KILL_GRACE,
            completion_signal: defaults::COMPLETION_SIGNAL.to_string(),
            max_line: defaults::MAX_LINE,
            on_fatal_error: OnFatalError::default(),
            resources: warden_process::ResourceLimits::default(),
            budget: crate::budget::Budget::default(),
        }
    }
}

impl Limits {
    /// How long after a fatal error the agent has to end by itself; `None`
    /// when the CLI is left to retry.
    pub fn fatal_error_grace(&self) -> Option<Duration> {
        match self.on_fatal_error {
            OnFatalError::End => Some(defaults::FATAL_ERROR_GRACE),
            OnFatalError::Wait => None,
        }
    }

    /// The stall timeout that will actually be armed: none when it could
    /// never fire before the run clock does.
    pub fn armed_stall_timeout(&self) -> Option<Duration> {
        match (self.stall_timeout, self.timeout) {
            (Some(stall), Some(run)) if stall >= run => None,
            (stall, _) => stall,
        }
    }
}

/// Turns `0` into "disabled".
pub fn clock(d: Duration) -> Option<Duration> {
    (!d.is_zero()).then_some(d)
}
