//! The report of a batch, written as `batch.json`.

use std::path::PathBuf;

use serde::Serialize;
use warden_events::SchemaVersion;

use crate::session::SessionReport;

/// One entry of the batch file and how it ended.
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Clone, Serialize)]
pub struct BatchRun {
    pub name: String,
    pub agent: String,
    /// Its session's verdict; `cancelled` for an entry cancelled before
    /// it started; none when it could not start.
    pub verdict: Option<crate::Verdict>,
    pub duration_ms: u64,
    /// Its session's report, when the session started.
    pub session: Option<SessionReport>,
    /// Why the entry could not run, if it could not.
    pub error: Option<String>,
}

/// `batch.json`.
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Clone, Serialize)]
pub struct BatchReport {
    pub schema_version: SchemaVersion,
    pub batch_id: String,
    pub file: PathBuf,
    pub jobs: usize,
    pub duration_ms: u64,
    pub runs: Vec<BatchRun>,
    pub succeeded: usize,
    pub failed: usize,
    pub cancelled: usize,
}
