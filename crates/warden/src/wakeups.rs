//! What a command's one loop waits on besides its updates: the view's
//! tick, and signals to warden. Nothing here runs on a task of its own.

use std::time::Duration;

use crate::signals::Signals;

/// How often the view redraws its status lines (and checks for a
/// heartbeat due).
const TICK: Duration = Duration::from_millis(250);

/// Why the loop woke.
pub(crate) enum Wake {
    Tick,
    /// The `nth` signal to warden (1: cancel, more: kill), named.
    Signal {
        nth: u32,
        name: &'static str,
    },
}

pub(crate) struct Wakeups {
    signals: Signals,
    /// Signals already handed to the loop.
    acted: u32,
    open: bool,
    tick: tokio::time::Interval,
}

impl Wakeups {
    pub(crate) fn new(signals: Signals) -> Self {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Self {
            signals,
            acted: 0,
            open: true,
            tick,
        }
    }

    /// The next wake: a signal that came (also before the loop began)
    /// first, else whichever of a tick and a signal comes first.
    pub(crate) async fn next(&mut self) -> Wake {
        loop {
            let now = self.signals.received();
            if self.acted < now.count {
                self.acted += 1;
                return Wake::Signal {
                    nth: self.acted,
                    name: now.last,
                };
            }
            tokio::select! {
                _ = self.tick.tick() => return Wake::Tick,
                changed = self.signals.changed(), if self.open => {
                    if changed.is_none() {
                        self.open = false;
                    }
                }
            }
        }
    }

    /// Waits for `work`, handing every wake that comes meanwhile to
    /// `on_wake` (a signal while a run finishes still acts).
    pub(crate) async fn while_waiting<T>(
        &mut self,
        work: impl std::future::Future<Output = T>,
        mut on_wake: impl FnMut(Wake),
    ) -> T {
        tokio::pin!(work);
        loop {
            tokio::select! {
                out = &mut work => return out,
                w = self.next() => on_wake(w),
            }
        }
    }
}
