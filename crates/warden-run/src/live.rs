//! The live event feed to the caller, bounded.
//!
//! The supervisor must never wait on its caller: a slow terminal or a
//! library user who never reads events must not stop the clocks or grow
//! memory without bound. So the feed is a bounded channel that is only
//! ever tried, never awaited. When it is full, line events (`text`,
//! `stderr`, `thinking`, `oversized_line`) are dropped from the feed and
//! counted (they are in the logs and `events.jsonl` in any case); other
//! events wait in a bounded backlog, in order, and go out as soon as there
//! is room (past the bound they are dropped too, except the run's
//! milestones). Text in the feed is capped at `LIVE_EVENT_TEXT`.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::mpsc::{Sender, error::TrySendError};
use warden_events::Event;
use warden_events::event::Stamped;

/// Room for this many events between the supervisor and its caller. With
/// text capped at `LIVE_EVENT_TEXT`, the feed holds a few MiB at most.
pub(crate) const CAPACITY: usize = 1024;

/// Events other than lines that may wait for room; past this they are
/// dropped and counted too (the file has them all).
pub(crate) const BACKLOG: usize = 4096;

pub(crate) struct LiveFeed {
    tx: Option<Sender<Stamped>>,
    backlog: VecDeque<Stamped>,
    dropped: u64,
    /// Set when a line found the feed full: the lines after it in the same
    /// turn of the supervisor's loop are dropped without asking again (the
    /// caller, which runs on the same thread, cannot have made room in
    /// between). Cleared by [`flush`](Self::flush), once a turn.
    full: bool,
    /// Whether the caller takes the output's lines (`text`, `stderr` and
    /// `thinking` events); one that shows none of them turns this off (see
    /// [`RunHandle::without_output_lines`](crate::RunHandle::without_output_lines)):
    /// then none is made for the feed, and none counts as dropped.
    output_lines: Arc<AtomicBool>,
}

impl LiveFeed {
    /// A feed to `tx`, with the output's lines in it or not (the caller
    /// can still turn them off later).
    pub(crate) fn new(tx: Option<Sender<Stamped>>, output_lines: bool) -> Self {
        Self {
            tx,
            backlog: VecDeque::new(),
            dropped: 0,
            full: false,
            output_lines: Arc::new(AtomicBool::new(output_lines)),
        }
    }

    /// What turns the output's lines off for this feed's caller.
    pub(crate) fn output_lines(&self) -> Arc<AtomicBool> {
        self.output_lines.clone()
    }

    fn wants_output_lines(&self) -> bool {
        self.output_lines.load(Ordering::Relaxed)
    }

    /// Events left out of the feed because the caller fell behind.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }

    pub(crate) fn deliver(&mut self, mut ev: Stamped) {
        if matches!(
            ev.event,
            Event::Text { .. } | Event::Stderr { .. } | Event::Thinking { .. }
        ) && !self.wants_output_lines()
        {
            return;
        }
        ev.event.cap_text(crate::defaults::LIVE_EVENT_TEXT);
        self.send_backlog();
        if self.tx.is_none() {
            return;
        }
        let ev = if self.backlog.is_empty() {
            match self.try_send(ev) {
                None => return,
                Some(ev) => ev,
            }
        } else {
            ev
        };
        if self.tx.is_none() {
            return;
        }
        let line = matches!(
            ev.event,
            Event::Text { .. }
                | Event::Stderr { .. }
                | Event::OversizedLine { .. }
                | Event::Thinking { .. }
        );
        // The run's own milestones always wait for room.
        let milestone = matches!(
            ev.event,
            Event::Spawned { .. }
                | Event::Exited { .. }
                | Event::Terminating { .. }
                | Event::Finished { .. }
                | Event::Result { .. }
        );
        if line || (self.backlog.len() >= BACKLOG && !milestone) {
            self.dropped += 1;
        } else {
            self.backlog.push_back(ev);
        }
    }

    /// Whether a line event delivered now would be sent: `deliver` drops
    /// line events when the feed is full. When it would be dropped, it is
    /// counted as dropped here, so the caller can skip making it. `false`
    /// without counting when nobody listens.
    pub(crate) fn line_has_room(&mut self) -> bool {
        if !self.wants_output_lines() {
            return false;
        }
        if self.full {
            self.dropped += 1;
            return false;
        }
        self.send_backlog();
        let Some(tx) = &self.tx else { return false };
        if tx.is_closed() {
            self.tx = None;
            self.backlog.clear();
            return false;
        }
        if self.backlog.is_empty() && tx.capacity() > 0 {
            return true;
        }
        self.full = true;
        self.dropped += 1;
        false
    }

    /// Whether every line event delivered now, and until the next turn of
    /// the supervisor's loop, would be dropped (the feed is full, or
    /// nobody listens): then the caller need not make them, and counts
    /// them with [`skip_lines`](Self::skip_lines).
    pub(crate) fn takes_no_lines(&mut self) -> bool {
        if self.full || !self.wants_output_lines() {
            return true;
        }
        self.send_backlog();
        let Some(tx) = &self.tx else { return true };
        if tx.is_closed() {
            self.tx = None;
            self.backlog.clear();
            return true;
        }
        if self.backlog.is_empty() && tx.capacity() > 0 {
            return false;
        }
        self.full = true;
        true
    }

    /// `n` line events left out: dropped, if anyone listens.
    pub(crate) fn skip_lines(&mut self, n: u64) {
        if self.tx.is_some() && self.wants_output_lines() {
            self.dropped += n;
        }
    }

    /// Sends what the backlog holds, as far as there is room: once a turn
    /// of the supervisor's loop.
    pub(crate) fn flush(&mut self) {
        self.full = false;
        self.send_backlog();
    }

    fn send_backlog(&mut self) {
        while let Some(ev) = self.backlog.pop_front() {
            if let Some(ev) = self.try_send(ev) {
                self.backlog.push_front(ev);
                return;
            }
        }
    }

    /// Sends what is still waiting, allowing the reader `limit` in all to
    /// make room; what does not fit by then is counted as dropped.
    pub(crate) async fn drain(mut self, limit: std::time::Duration) {
        let Some(tx) = self.tx.take() else { return };
        let until = tokio::time::Instant::now() + limit;
        while let Some(ev) = self.backlog.pop_front() {
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            if tx.send_timeout(ev, left).await.is_err() {
                self.dropped += 1 + self.backlog.len() as u64;
                return;
            }
        }
    }

    /// `None` if sent (or nobody listens any more); the event back if full.
    fn try_send(&mut self, ev: Stamped) -> Option<Stamped> {
        let tx = self.tx.as_ref()?;
        match tx.try_send(ev) {
            Ok(()) => None,
            Err(TrySendError::Full(ev)) => Some(ev),
            Err(TrySendError::Closed(_)) => {
                self.tx = None;
                self.backlog.clear();
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamped(event: Event) -> Stamped {
        Stamped {
            schema_version: warden_events::SchemaVersion,
            t_ms: 0,
            event,
        }
    }

    #[tokio::test]
    async fn output_lines_turned_off_are_neither_sent_nor_counted_as_dropped() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(8);
        let mut feed = LiveFeed::new(Some(tx), true);
        assert!(feed.line_has_room());
        assert!(!feed.takes_no_lines());
        feed.output_lines().store(false, Ordering::Relaxed);
        assert!(!feed.line_has_room());
        assert!(feed.takes_no_lines());
        feed.deliver(stamped(Event::Text { text: "out".into() }));
        feed.deliver(stamped(Event::Stderr { text: "err".into() }));
        feed.deliver(stamped(Event::Thinking { text: "hmm".into() }));
        feed.skip_lines(5);
        // Other events, other lines (an oversized one) go on as before.
        feed.deliver(stamped(Event::OversizedLine {
            stream: warden_events::Stream::Stdout,
            bytes: 9,
        }));
        feed.deliver(stamped(Event::CompletionSignal));
        assert_eq!(feed.dropped(), 0);
        assert!(matches!(
            rx.recv().await.unwrap().event,
            Event::OversizedLine { .. }
        ));
        assert_eq!(rx.recv().await.unwrap().event, Event::CompletionSignal);
        assert!(rx.try_recv().is_err());
    }

    #[tokio::test]
    async fn a_full_feed_drops_lines_but_keeps_other_events_in_order() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(2);
        let mut feed = LiveFeed::new(Some(tx), true);
        feed.deliver(stamped(Event::Text { text: "1".into() }));
        feed.deliver(stamped(Event::Text { text: "2".into() }));
        feed.deliver(stamped(Event::Text {
            text: "dropped".into(),
        }));
        feed.deliver(stamped(Event::CompletionSignal));
        feed.deliver(stamped(Event::StallWarning {
            silent_ms: 1,
            stall_timeout_ms: 2,
        }));
        assert_eq!(feed.dropped(), 1);
        assert_eq!(
            rx.recv().await.unwrap().event,
            Event::Text { text: "1".into() }
        );
        assert_eq!(
            rx.recv().await.unwrap().event,
            Event::Text { text: "2".into() }
        );
        feed.deliver(stamped(Event::Text {
            text: "behind the backlog".into(),
        }));
        assert_eq!(feed.dropped(), 2, "a line never overtakes a waiting event");
        assert_eq!(rx.recv().await.unwrap().event, Event::CompletionSignal);
        feed.flush();
        assert!(matches!(
            rx.recv().await.unwrap().event,
            Event::StallWarning { .. }
        ));
    }

    #[tokio::test]
    async fn a_line_is_only_made_when_the_feed_has_room_for_it() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(1);
        let mut feed = LiveFeed::new(Some(tx), true);
        assert!(feed.line_has_room());
        feed.deliver(stamped(Event::Text { text: "1".into() }));
        assert!(!feed.line_has_room(), "full");
        assert!(!feed.line_has_room(), "still full in the same turn");
        assert_eq!(feed.dropped(), 2);
        assert_eq!(
            rx.recv().await.unwrap().event,
            Event::Text { text: "1".into() }
        );
        feed.flush();
        assert!(feed.line_has_room(), "room again after the reader took one");
        drop(rx);
        assert!(!feed.line_has_room(), "nobody listens");
        assert_eq!(feed.dropped(), 2, "a closed feed drops nothing it counts");
    }

    #[tokio::test]
    async fn a_closed_feed_is_forgotten() {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        drop(rx);
        let mut feed = LiveFeed::new(Some(tx), true);
        feed.deliver(stamped(Event::CompletionSignal));
        assert_eq!(feed.dropped(), 0);
    }
}
