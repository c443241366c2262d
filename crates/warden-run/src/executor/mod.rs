//! Where a batch's entries run. An [`Executor`] gets the entries, each a
//! serializable [`RunRequest`](crate::RunRequest) with its own directory
//! under the batch directory, and gives back how each ended; it says what
//! happens through the batch's update stream and stops when the batch is
//! cancelled.
//!
//! [`Local`] runs them on this machine, `jobs` at a time.
//! [`slurm::Slurm`] submits them as one Slurm array job whose tasks run
//! `warden run-request` on the nodes, tracks the jobs, and turns every way a
//! job can end into a verdict. Another engine (Kubernetes) is another
//! implementation of the same trait (see `docs/executors.md`).

mod follow;
pub mod slurm;
mod work;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::Semaphore;

use crate::Verdict;
use crate::batch_report::BatchRun;
use crate::session::{SessionControl, run_request_pooled};
use crate::update::{Outbox, Update};
pub use work::{BatchControl, Entry, Executor, Work, cancelled_before_start};

/// On this machine: `jobs` sessions at a time, in the entries' order.
#[derive(Debug, Clone, Copy, Default)]
pub struct Local;

impl Executor for Local {
    fn name(&self) -> &'static str {
        "local"
    }

    fn run(&self, work: Work) -> Pin<Box<dyn Future<Output = Vec<BatchRun>> + Send + 'static>> {
        Box::pin(run_local(work))
    }
}

async fn run_local(mut work: Work) -> Vec<BatchRun> {
    let sem = Arc::new(Semaphore::new(work.jobs.max(1)));
    // What the entries spend, live: an entry starts against what is left,
    // and the runs running at once are held to the budget together.
    let pool = work
        .budget
        .map(|b| crate::budget::BudgetPool::new(b.budget, b.spent));
    // Every entry can be cancelled from now on, started or not.
    let entries: Vec<(Entry, SessionControl)> = std::mem::take(&mut work.entries)
        .into_iter()
        .map(|e| (e, work.control.new_session()))
        .collect();
    // Entries start in their order, each when a place is free.
    let mut tasks = Vec::new();
    for (entry, control) in entries {
        let permit = sem
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        let mut out = work.outbox(entry.index);
        // Said here, so entries are said to start in their order.
        if work.control.cancels() == 0 {
            out.send(Update::EntryStarted {
                entry: entry.index,
                name: entry.name.clone(),
            })
            .await;
        }
        let stop = work.control.clone();
        let pool = pool.clone();
        let telemetry = work.telemetry.clone();
        tasks.push(tokio::spawn(async move {
            let _permit = permit;
            let run = run_local_entry(&entry, control, &stop, pool, telemetry, out.clone()).await;
            out.send(Update::EntryFinished {
                entry: entry.index,
                run: Box::new(run.clone()),
            })
            .await;
            run
        }));
    }
    drop(work);
    let mut runs = Vec::new();
    for t in tasks {
        runs.push(match t.await {
            Ok(r) => r,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        });
    }
    runs
}

async fn run_local_entry(
    entry: &Entry,
    control: SessionControl,
    stop: &BatchControl,
    pool: Option<Arc<crate::budget::BudgetPool>>,
    telemetry: Option<crate::telemetry::Telemetry>,
    out: Outbox,
) -> BatchRun {
    if stop.cancels() > 0 {
        return cancelled_before_start(entry);
    }
    if let Some(line) = pool.as_ref().and_then(|p| p.shared().used_up()) {
        return BatchRun::new(
            entry.name.clone(),
            entry.request.agent,
            Some(Verdict::BudgetExceeded),
            Some(format!("not started: {}", line.used_up())),
        );
    }
    let t0 = Instant::now();
    let result = run_request_pooled(entry.request.clone(), control, out, pool, telemetry).await;
    let mut run = match result {
        Ok(s) => {
            let mut run = BatchRun::new(entry.name.clone(), entry.request.agent, s.verdict, None);
            run.session = Some(s);
            run
        }
        Err(e) => BatchRun::new(
            entry.name.clone(),
            entry.request.agent,
            None,
            Some(e.to_string()),
        ),
    };
    run.duration_ms = t0.elapsed().as_millis() as u64;
    run
}
