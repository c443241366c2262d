//! The status snapshot: what the supervisor decided about activity, the
//! stall clock, tokens and the open tool call, written into the event
//! stream ([`Event::Status`]) so that every view (the live line, the plain
//! heartbeat, `warden report`) shows the supervisor's decision instead of
//! re-deriving it from the other events. Activity is a line, not an event:
//! only the supervisor sees the lines.
//!
//! A snapshot is due when activity came. It is written at once when that
//! activity ended a silence of [`SILENCE_NOTED`] or more (so every silence
//! a view can draw is exact), else at most once per [`STATUS_EVERY`] (so a
//! chatty agent does not double `events.jsonl`), and once more before the
//! run ends.

use std::time::{Duration, Instant};

use warden_events::{Event, OpenCall, Summary};

use crate::Stamped;
use crate::timeline::Fold;

/// The most often a snapshot is written while the agent is busy.
pub(super) const STATUS_EVERY: Duration = Duration::from_secs(1);
/// A silence at least this long is written down as soon as it ends.
pub(super) const SILENCE_NOTED: Duration = Duration::from_millis(250);

#[derive(Debug, Default)]
pub(super) struct StatusFeed {
    /// When the last snapshot was written.
    sent: Option<Instant>,
    /// Activity came since the last snapshot.
    pending: bool,
    /// That activity ended a silence worth writing down at once.
    urgent: bool,
    /// The longest silence ended since the last snapshot.
    pub(super) silence_before: Duration,
    /// The run's events folded: the tool calls still open.
    timeline: Fold,
}

impl StatusFeed {
    /// Takes in an event as it is written.
    pub(super) fn observe(&mut self, e: &Stamped) {
        self.timeline.push(e, |_| {});
    }

    /// The call started last of those still open.
    fn open_call(&self) -> Option<OpenCall> {
        self.timeline.open_tools().last().map(|o| OpenCall {
            name: o.name.clone(),
            input: o.input.clone(),
            since_ms: o.since_ms,
        })
    }

    /// Activity came after `silence`.
    pub(super) fn on_activity(&mut self, silence: Duration) {
        self.pending = true;
        // Lines of one read share its instant: only the first of them
        // ends a silence, and the ones after must not hide it.
        self.silence_before = self.silence_before.max(silence);
        if silence >= SILENCE_NOTED {
            self.urgent = true;
        }
    }

    /// When the pending snapshot is due, if one is: `now` when it is due
    /// at once.
    pub(super) fn due(&self, now: Instant) -> Option<Instant> {
        if !self.pending {
            return None;
        }
        match self.sent {
            Some(sent) if !self.urgent => Some(sent.checked_add(STATUS_EVERY).unwrap_or(now)),
            _ => Some(now),
        }
    }
}

/// What the supervisor decided, for a snapshot: the feed adds the silence
/// that just ended and the open tool call.
pub(super) struct Decided<'a> {
    pub last_activity_ms: Option<u64>,
    pub activity_lines: u64,
    pub longest_silence_ms: u64,
    /// When the stall clock would fire, while it is what ends a silence.
    pub stall_deadline_ms: Option<u64>,
    /// What the decoder learned (borrowed).
    pub summary: &'a Summary,
    /// The retries announced on both streams.
    pub retries: u32,
}

impl StatusFeed {
    /// Whether a snapshot is to be written at `now` (or `now_anyway`, when
    /// one is pending).
    pub(super) fn is_due(&self, now: Instant, now_anyway: bool) -> bool {
        match self.due(now) {
            Some(at) => now_anyway || at <= now,
            None => false,
        }
    }

    /// The snapshot of what the supervisor `decided`, written at `now`.
    pub(super) fn snapshot(&mut self, now: Instant, decided: Decided<'_>) -> Event {
        self.pending = false;
        self.urgent = false;
        self.sent = Some(now);
        let silence_before = std::mem::take(&mut self.silence_before);
        Event::Status {
            last_activity_ms: decided.last_activity_ms,
            activity_lines: decided.activity_lines,
            silence_before_ms: silence_before.as_millis() as u64,
            longest_silence_ms: decided.longest_silence_ms,
            stall_deadline_ms: decided.stall_deadline_ms,
            tokens: decided.summary.reported.tokens,
            cost_usd: decided.summary.reported.cost_usd,
            tool_calls: decided.summary.reported.tool_calls,
            retries: decided.retries,
            tool: self.open_call(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_is_due_at_once_after_a_silence_else_once_a_second() {
        let now = Instant::now();
        let mut feed = StatusFeed::default();
        assert_eq!(feed.due(now), None, "nothing came: nothing to write");
        // The first activity is written at once.
        feed.on_activity(Duration::from_millis(10));
        assert_eq!(feed.due(now), Some(now));
        feed.sent = Some(now);
        feed.pending = false;
        feed.urgent = false;
        feed.silence_before = Duration::ZERO;
        // A busy agent: once a second.
        feed.on_activity(Duration::from_millis(20));
        assert_eq!(feed.due(now), Some(now + STATUS_EVERY));
        // A line that ended a silence: at once, and the silence is kept
        // through the lines of the same read that follow it.
        feed.on_activity(SILENCE_NOTED);
        feed.on_activity(Duration::ZERO);
        assert_eq!(feed.due(now), Some(now));
        assert_eq!(feed.silence_before, SILENCE_NOTED);
    }
}
