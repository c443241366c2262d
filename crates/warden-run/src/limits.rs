//! The clocks and bounds of one run, resolved and validated.

use std::time::Duration;

use crate::defaults;

/// The limits a run is supervised with. A clock of `None` never fires
/// (the user wrote `0`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    pub timeout: Option<Duration>,
    pub stall_timeout: Option<Duration>,
    pub startup_timeout: Option<Duration>,
    pub completion_timeout: Option<Duration>,
    pub drain_grace: Duration,
    pub kill_grace: Duration,
    pub completion_signal: String,
    pub max_line: usize,
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
        }
    }
}

impl Limits {
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
