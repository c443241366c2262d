//! The report of a batch, written as `batch.json`.

use std::path::PathBuf;

use serde::Serialize;
use warden_events::{Agent, SchemaVersion};

use crate::Verdict;
use crate::session::SessionReport;

/// One entry of the batch file and how it ended.
#[non_exhaustive]
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Clone, Serialize)]
pub struct BatchRun {
    pub name: String,
    pub agent: String,
    /// Its session's verdict; for an entry whose session wrote no report
    /// (cancelled before it started, a cluster job lost), the verdict the
    /// executor gave it; none when it could not start.
    pub verdict: Option<Verdict>,
    pub duration_ms: u64,
    /// Its session's report, when the session started.
    pub session: Option<SessionReport>,
    /// Why the entry could not run, or why it has no report of its own.
    pub error: Option<String>,
    /// The cluster job that ran it, as the engine last saw it (`null` on
    /// this machine).
    pub job: Option<JobReport>,
}

impl BatchRun {
    pub fn new(
        name: impl Into<String>,
        agent: Agent,
        verdict: Option<Verdict>,
        error: Option<String>,
    ) -> Self {
        Self {
            name: name.into(),
            agent: agent.name().into(),
            verdict,
            duration_ms: 0,
            session: None,
            error,
            job: None,
        }
    }

    /// Whether the entry's session started at all.
    pub fn ran(&self) -> bool {
        self.session.is_some() || self.job.as_ref().is_some_and(|j| j.started)
    }
}

/// A cluster job, as its engine reported it last.
#[non_exhaustive]
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Clone, Serialize, PartialEq, Eq)]
pub struct JobReport {
    /// `slurm`.
    pub engine: String,
    /// The engine's id of the job (`123_4`: task 4 of array job 123).
    pub id: String,
    /// The engine's last state (`COMPLETED`, `NODE_FAIL`, ...), as the
    /// engine wrote it.
    pub state: String,
    /// Why warden stopped waiting for the engine before it said the job
    /// ended (`no longer known to Slurm`); `null` when it did.
    #[serde(default)]
    pub state_reason: Option<String>,
    /// The engine's exit code (`0:0`, `3:0`, `0:9`).
    pub exit_code: Option<String>,
    /// Where it ran.
    pub node: Option<String>,
    /// Whether it started on a node.
    pub started: bool,
}

impl JobReport {
    pub fn new(engine: &str, id: impl Into<String>, state: impl Into<String>) -> Self {
        Self {
            engine: engine.into(),
            id: id.into(),
            state: state.into(),
            state_reason: None,
            exit_code: None,
            node: None,
            started: false,
        }
    }

    /// The state with warden's reason, if any, for people:
    /// `RUNNING (no longer known to Slurm)`.
    pub fn described_state(&self) -> String {
        match &self.state_reason {
            Some(why) => format!("{} ({why})", self.state),
            None => self.state.clone(),
        }
    }
}

/// `batch.json`.
#[non_exhaustive]
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Clone, Serialize)]
pub struct BatchReport {
    pub schema_version: SchemaVersion,
    pub batch_id: String,
    pub file: PathBuf,
    /// Where the entries ran: `local` or `slurm`.
    pub executor: String,
    pub jobs: usize,
    pub duration_ms: u64,
    pub runs: Vec<BatchRun>,
    pub succeeded: usize,
    pub failed: usize,
    pub cancelled: usize,
    /// The entries whose session never started.
    pub never_ran: Vec<String>,
    /// The batch's budget (`[budget]` in its file), with what all its
    /// entries spent.
    #[serde(default)]
    pub budgets: Vec<crate::budget::BudgetLine>,
    /// The batch's span when OpenTelemetry export is on (see `run.json`'s
    /// `otel`): its entries' sessions are its children.
    #[serde(default)]
    pub otel: Option<crate::telemetry::OtelReport>,
}

impl BatchReport {
    /// The batch's verdict, from its entries': `cancelled` if any was
    /// cancelled, else `budget_exceeded` if any crossed a budget, else
    /// `agent_failed` if any did not succeed (or never ran), else
    /// `succeeded`.
    pub fn verdict(&self) -> Verdict {
        if self.cancelled > 0 {
            Verdict::Cancelled
        } else if self
            .runs
            .iter()
            .any(|r| r.verdict == Some(Verdict::BudgetExceeded))
        {
            Verdict::BudgetExceeded
        } else if self.failed > 0 {
            Verdict::AgentFailed
        } else {
            Verdict::Succeeded
        }
    }

    /// warden's exit code for the batch, as `batch.json` has it: output
    /// lost by an entry first ([`crate::report::OUTPUT_LOST_EXIT`]), then
    /// its verdict's: 130 if any run was cancelled, 7 if any exceeded a
    /// budget, 1 if any failed, else 0.
    pub fn warden_exit_code(&self) -> u8 {
        let lost = self
            .runs
            .iter()
            .any(|r| r.session.as_ref().is_some_and(|s| s.output_lost.is_some()));
        if lost {
            crate::report::OUTPUT_LOST_EXIT
        } else {
            u8::try_from(self.verdict().exit_code()).unwrap_or(1)
        }
    }
}
