//! How a run, a session or a batch ended: the one shape their handles'
//! `wait` gives.

use crate::report::Report;
use crate::session::SessionReport;
use crate::verdict::Verdict;

/// The end of a run or a session: its final verdict, never unknown, and
/// its report (what `run.json` or `session.json` holds).
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct Outcome<R> {
    /// How it ended. A report's own `verdict` is `null` while it runs
    /// (the file is written as it goes); an outcome is only had at the
    /// end, so it always has one.
    pub verdict: Verdict,
    pub report: R,
}

impl Outcome<Report> {
    /// The supervisor gives every run it ends a verdict; a report without
    /// one can only come from a supervisor that failed.
    pub(crate) fn of_run(report: Report) -> Self {
        Self {
            verdict: report.verdict.unwrap_or(Verdict::InternalError),
            report,
        }
    }
}

impl Outcome<SessionReport> {
    /// A session whose first run could not be set up has no run's
    /// verdict: no agent was started, which is `spawn_failed`.
    pub(crate) fn of_session(report: SessionReport) -> Self {
        Self {
            verdict: report.verdict.unwrap_or(Verdict::SpawnFailed),
            report,
        }
    }
}
