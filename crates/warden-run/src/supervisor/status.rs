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

use super::Supervisor;

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

impl Supervisor {
    /// Writes the pending snapshot if it is due (or `now_anyway`), from
    /// what the decoder learned (`summary`, borrowed) and the `retries`
    /// announced on both streams.
    pub(super) fn status_tick(
        &mut self,
        now: Instant,
        now_anyway: bool,
        summary: &Summary,
        retries: u32,
    ) {
        let due = match self.sinks.status.due(now) {
            Some(at) => now_anyway || at <= now,
            None => false,
        };
        if !due {
            return;
        }
        let status = &mut self.sinks.status;
        status.pending = false;
        status.urgent = false;
        status.sent = Some(now);
        // Only while the stall clock is what ends a silence: not in the
        // completion window, nor once the agent exited or warden is ending
        // the run.
        let stall_clock_runs = self.phase.at_work();
        let stall_deadline_ms = if !stall_clock_runs {
            None
        } else {
            self.clocks.effective_stall().and_then(|s| {
                let last = self.clocks.last_activity.unwrap_or(self.setup.started);
                last.checked_add(s).map(|at| self.ms(at))
            })
        };
        let event = Event::Status {
            last_activity_ms: self.clocks.last_activity.map(|t| self.ms(t)),
            activity_lines: self.activity.lines,
            silence_before_ms: self.sinks.status.silence_before.as_millis() as u64,
            longest_silence_ms: self.activity.longest_silence.as_millis() as u64,
            stall_deadline_ms,
            tokens: summary.reported.tokens,
            cost_usd: summary.reported.cost_usd,
            tool_calls: summary.reported.tool_calls,
            retries,
            tool: self.sinks.status.open_call(),
        };
        self.sinks.status.silence_before = Duration::ZERO;
        self.emit(event);
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
