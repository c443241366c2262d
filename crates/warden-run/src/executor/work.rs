//! What an executor is given and what it gives back: the entries of a
//! batch, the batch's settings and stream, and the [`Executor`] trait that
//! each engine implements.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use tokio::sync::mpsc;

use crate::batch_report::BatchRun;
use crate::session::SessionControl;
use crate::update::{Outbox, Update};
use crate::{RunRequest, Verdict};

/// One entry of a batch, ready to run: its request's `dir` is the entry's
/// directory (where its `session.json` goes).
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct Entry {
    pub index: usize,
    pub name: String,
    pub request: RunRequest,
}

impl Entry {
    /// The entry's directory.
    pub fn dir(&self) -> PathBuf {
        self.request.dir.clone().unwrap_or_default()
    }
}

/// What an executor is given to run.
#[non_exhaustive]
pub struct Work {
    pub batch_id: String,
    /// The batch directory (on storage the nodes share, for a cluster).
    pub dir: PathBuf,
    /// At most this many entries at once.
    pub jobs: usize,
    pub entries: Vec<Entry>,
    /// Cancelled by the batch's owner (a signal): first gracefully, then
    /// at once.
    pub control: BatchControl,
    /// The batch's budget, with what entries that ended before spent (each
    /// entry's request carries it too).
    pub budget: Option<crate::budget::SharedBudget>,
    /// OpenTelemetry export, with the batch's span as the parent of the
    /// entries' sessions.
    pub telemetry: Option<crate::telemetry::Telemetry>,
    /// The batch's key: what the files an executor writes for its entries
    /// are signed with (and their secrets sealed), and what the reports
    /// it reads back must be signed with.
    pub key: Option<Arc<crate::batch_key::BatchKey>>,
    updates: mpsc::Sender<Update>,
}

impl Work {
    pub(crate) fn new(
        batch_id: String,
        dir: PathBuf,
        jobs: usize,
        entries: Vec<Entry>,
        control: BatchControl,
        updates: mpsc::Sender<Update>,
    ) -> Self {
        Self {
            batch_id,
            dir,
            jobs,
            entries,
            control,
            budget: None,
            telemetry: None,
            key: None,
            updates,
        }
    }

    pub(crate) fn with_telemetry(mut self, t: Option<crate::telemetry::Telemetry>) -> Self {
        self.telemetry = t;
        self
    }

    pub(crate) fn with_key(mut self, key: Arc<crate::batch_key::BatchKey>) -> Self {
        self.key = Some(key);
        self
    }

    pub(crate) fn with_budget(mut self, budget: Option<crate::budget::SharedBudget>) -> Self {
        self.budget = budget;
        self
    }

    /// Says `update` on the batch's stream (waits while the reader is
    /// behind; nothing when the reader is gone).
    pub async fn send(&self, update: Update) {
        let _ = self.updates.send(update).await;
    }

    pub(crate) fn outbox(&self, entry: usize) -> Outbox {
        Outbox::new(self.updates.clone(), Some(entry))
    }
}

/// How the entries of each batch are run.
pub trait Executor: Send + Sync {
    /// Its name, as `--executor` takes it.
    fn name(&self) -> &'static str;

    /// Its options, as a resumed batch needs them again (`plan.json`).
    fn options(&self) -> Option<serde_json::Value> {
        None
    }

    /// Runs every entry of `work` to its end and gives each one's line of
    /// `batch.json`, in the entries' order. It never fails as a whole: an
    /// entry that could not run has a verdict or an error of its own.
    fn run(&self, work: Work) -> Pin<Box<dyn Future<Output = Vec<BatchRun>> + Send + 'static>>;
}

/// The line of an entry that never started because the batch was
/// cancelled first.
pub fn cancelled_before_start(entry: &Entry) -> BatchRun {
    BatchRun::new(
        entry.name.clone(),
        entry.request.agent,
        Some(Verdict::Cancelled),
        Some("cancelled before it started".into()),
    )
}

/// Cancels every entry of a batch: the first call cancels gracefully,
/// the next kills; entries not started yet never start.
#[derive(Clone, Default)]
pub struct BatchControl {
    sessions: Arc<std::sync::Mutex<Vec<SessionControl>>>,
    cancels: Arc<AtomicU32>,
    /// Wakes whoever waits for the next cancel (a cluster executor).
    cancelled: Arc<tokio::sync::Notify>,
    /// Set when the caller shows no `exec` run's output lines: shared by
    /// every session started here.
    lines_off: Arc<AtomicBool>,
}

impl BatchControl {
    /// The control of an entry's session run in this process: cancelled
    /// with the batch, and its output lines turned off with the batch's.
    pub(crate) fn new_session(&self) -> SessionControl {
        let s = SessionControl::sharing_lines_switch(self.lines_off.clone());
        self.add(s.clone());
        s
    }

    /// See [`BatchHandle::without_output_lines`](crate::BatchHandle::without_output_lines).
    pub(crate) fn without_output_lines(&self) {
        self.lines_off.store(true, Ordering::Relaxed);
    }

    pub(crate) fn add(&self, s: SessionControl) {
        let mut all = self.sessions.lock().expect("lock");
        for _ in 0..self.cancels.load(Ordering::SeqCst) {
            s.cancel();
        }
        all.push(s);
    }

    /// How many times `cancel` was called.
    pub fn cancels(&self) -> u32 {
        self.cancels.load(Ordering::SeqCst)
    }

    pub fn cancel(&self) {
        let all = self.sessions.lock().expect("lock");
        self.cancels.fetch_add(1, Ordering::SeqCst);
        for s in all.iter() {
            s.cancel();
        }
        drop(all);
        self.cancelled.notify_waiters();
    }

    /// Returns once `cancel` has been called more than `seen` times.
    pub async fn cancelled_after(&self, seen: u32) {
        loop {
            let notified = self.cancelled.notified();
            if self.cancels() > seen {
                return;
            }
            notified.await;
        }
    }
}

/// A batch's canceller: the first cancel stops every entry gracefully
/// (no queued one starts), the next kills the running ones.
impl crate::run::Cancel for BatchControl {
    fn cancel(&self) {
        BatchControl::cancel(self);
    }

    fn kill(&self) {
        BatchControl::cancel(self);
        BatchControl::cancel(self);
    }

    fn what(&self) -> &'static str {
        "batch"
    }
}
