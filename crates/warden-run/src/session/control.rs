//! Stopping a session from another task, and the waits a cancel cuts
//! short.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::Canceller;

/// Stops a session from another task: the current run is cancelled, and
/// no further one starts.
#[derive(Clone, Default)]
pub struct SessionControl {
    inner: Arc<Mutex<ControlState>>,
    /// Wakes whoever waits for the next cancel (the git work at the end).
    cancelled: Arc<tokio::sync::Notify>,
    /// Set when the caller shows no `exec` run's output lines (see
    /// [`SessionHandle::without_output_lines`](super::SessionHandle::without_output_lines));
    /// one switch for every session of a batch.
    lines_off: Arc<AtomicBool>,
}

#[derive(Default)]
struct ControlState {
    stopped: bool,
    /// How many times `cancel` was called.
    cancels: u32,
    /// Why, when the first cancel said.
    why: Option<String>,
    current: Option<Canceller>,
}

impl SessionControl {
    /// A control whose output lines are turned off with `lines_off` (a
    /// batch's, for all its sessions).
    pub(crate) fn sharing_lines_switch(lines_off: Arc<AtomicBool>) -> Self {
        Self {
            lines_off,
            ..Self::default()
        }
    }

    /// Turns the output lines of the `exec` runs started after this call
    /// out of the live feed.
    pub(crate) fn without_output_lines(&self) {
        self.lines_off.store(true, Ordering::Relaxed);
    }

    /// Whether the caller takes the output lines of an `exec` run.
    pub(super) fn takes_output_lines(&self) -> bool {
        !self.lines_off.load(Ordering::Relaxed)
    }

    /// First call: cancel gracefully; second: kill at once.
    pub fn cancel(&self) {
        self.cancel_saying(None);
    }

    /// [`cancel`](Self::cancel), saying why (see
    /// [`Canceller::cancel_because`]).
    pub fn cancel_because(&self, why: &str) {
        self.cancel_saying(Some(why));
    }

    fn cancel_saying(&self, why: Option<&str>) {
        let mut s = self.inner.lock().expect("lock");
        let again = s.stopped;
        s.stopped = true;
        s.cancels += 1;
        if !again {
            s.why = why.map(str::to_string);
        }
        if let Some(c) = &s.current {
            match (again, &s.why) {
                (true, _) => c.kill(),
                (false, Some(why)) => c.cancel_because(why),
                (false, None) => c.cancel(),
            }
        }
        drop(s);
        self.cancelled.notify_waiters();
    }

    pub(super) fn cancels(&self) -> u32 {
        self.inner.lock().expect("lock").cancels
    }

    /// Returns once `cancel` has been called more than `seen` times.
    pub(super) async fn cancelled_after(&self, seen: u32) {
        loop {
            let notified = self.cancelled.notified();
            if self.cancels() > seen {
                return;
            }
            notified.await;
        }
    }

    pub(super) fn stopped(&self) -> bool {
        self.inner.lock().expect("lock").stopped
    }

    pub(super) fn set_current(&self, c: Option<Canceller>) {
        let mut s = self.inner.lock().expect("lock");
        if s.stopped
            && let Some(c) = &c
        {
            match &s.why {
                Some(why) => c.cancel_because(why),
                None => c.cancel(),
            }
        }
        s.current = c;
    }
}

/// Waits `delay` before a retry; `false` when the session was cancelled
/// before or during the wait (it ends at once, with no further run).
pub(super) async fn backoff(control: &SessionControl, delay: std::time::Duration) -> bool {
    let seen = control.cancels();
    if control.stopped() {
        return false;
    }
    tokio::select! {
        () = tokio::time::sleep(delay) => !control.stopped(),
        () = control.cancelled_after(seen) => false,
    }
}

/// A session's canceller: the first cancel ends the current run
/// gracefully and starts no other, the next kills it.
impl crate::run::Cancel for SessionControl {
    fn cancel(&self) {
        SessionControl::cancel(self);
    }

    fn cancel_because(&self, why: &str) {
        SessionControl::cancel_because(self, why);
    }

    fn kill(&self) {
        SessionControl::cancel(self);
        SessionControl::cancel(self);
    }

    fn what(&self) -> &'static str {
        "session"
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::Instant;

    use super::*;

    const DELAY: Duration = Duration::from_secs(60);

    #[tokio::test(start_paused = true)]
    async fn a_backoff_with_no_cancel_waits_its_whole_delay() {
        let control = SessionControl::default();
        let started = Instant::now();
        assert!(backoff(&control, DELAY).await, "the retry was called off");
        assert_eq!(started.elapsed(), DELAY);
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancel_during_the_backoff_ends_it_at_once() {
        let control = SessionControl::default();
        let canceller = control.clone();
        let started = Instant::now();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            canceller.cancel();
        });
        assert!(!backoff(&control, DELAY).await, "the retry went ahead");
        assert_eq!(started.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_session_cancelled_before_the_backoff_does_not_wait() {
        let control = SessionControl::default();
        control.cancel();
        let started = Instant::now();
        assert!(!backoff(&control, DELAY).await, "the retry went ahead");
        assert_eq!(started.elapsed(), Duration::ZERO);
    }
}
