//! The one typed stream through which a session and a batch say what
//! happens: each run's events, and the steps around them. A view reads
//! only this stream (and the reports); it never re-derives what the
//! supervisor decided.

use std::path::PathBuf;

use tokio::sync::mpsc;

use crate::batch_report::BatchRun;
use crate::git::Worktree;
use crate::{Report, Stamped};

/// One step of a session or a batch. `entry` is the index of the batch
/// entry it belongs to (`None` outside a batch).
#[non_exhaustive]
#[derive(Debug, Clone)]
pub enum Update {
    /// A batch entry began: its session starts now.
    EntryStarted { entry: usize, name: String },
    /// The session's worktree was made.
    Worktree {
        entry: Option<usize>,
        worktree: Worktree,
    },
    /// A run of the session started.
    IterationStarted {
        entry: Option<usize>,
        iteration: u32,
        /// Which attempt at the run: 1, then one more for each retry of a
        /// transient failure.
        attempt: u32,
        run_dir: PathBuf,
        /// The run's id, as its `run.json` says.
        run_id: String,
    },
    /// One event of the current run (events may be left out when the
    /// reader falls behind, line events first; the run's `events.jsonl`
    /// has them all).
    Event {
        entry: Option<usize>,
        event: Stamped,
    },
    /// A run of the session ended, with its report.
    IterationFinished {
        entry: Option<usize>,
        iteration: u32,
        report: Box<Report>,
    },
    /// A run ended by a transient failure and will be tried again after
    /// `delay` (`--retries`); a cancel meanwhile ends the session at once.
    RetryWaiting {
        entry: Option<usize>,
        iteration: u32,
        /// The attempt that comes next (2 for the first retry).
        attempt: u32,
        /// The most attempts this run gets (`--retries` + 1).
        attempts: u32,
        delay: std::time::Duration,
        because: crate::retry::RetryOn,
    },
    /// A check, hook or prompt command started (see
    /// [`crate::StepReport`]).
    StepStarted {
        entry: Option<usize>,
        kind: crate::StepKind,
        /// The iteration it belongs to (see [`crate::StepReport`]).
        iteration: Option<u32>,
        command: String,
        run_dir: PathBuf,
    },
    /// A check, hook or prompt command ended.
    StepFinished {
        entry: Option<usize>,
        step: Box<crate::StepReport>,
    },
    /// A batch entry ended: its line of `batch.json`.
    EntryFinished { entry: usize, run: Box<BatchRun> },
}

/// How many updates wait for a slow reader before a session waits for it
/// (and its runs' live feeds drop line events meanwhile).
pub(crate) const UPDATES_QUEUED: usize = 1024;

/// Where a session sends its updates: nowhere once the reader is gone.
#[derive(Clone)]
pub(crate) struct Outbox {
    tx: Option<mpsc::Sender<Update>>,
    entry: Option<usize>,
}

impl Outbox {
    pub(crate) fn new(tx: mpsc::Sender<Update>, entry: Option<usize>) -> Self {
        Self {
            tx: Some(tx),
            entry,
        }
    }

    pub(crate) fn entry(&self) -> Option<usize> {
        self.entry
    }

    /// Sends `update`; a reader that is gone (or stopped reading for
    /// good) is not an error: the reports have everything.
    pub(crate) async fn send(&mut self, update: Update) {
        if let Some(tx) = &self.tx
            && tx.send(update).await.is_err()
        {
            self.tx = None;
        }
    }
}
