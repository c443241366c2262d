//! What a batch directory keeps so that the batch can be resumed: its
//! `plan.json` (the id, the file, the executor and its options, the
//! entries' names), each entry's request in `requests/N.json`, and the
//! earlier attempts of an entry that ran again under `attempts/`.

use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use warden_events::{Agent, SchemaVersion};

use crate::RunRequest;
use crate::batch_report::BatchRun;
use crate::executor::Executor;
use crate::session::{SessionReport, StopReason};

pub(crate) const PLAN_FILE: &str = "plan.json";
pub(crate) const REQUESTS_DIR: &str = "requests";
pub(crate) const ATTEMPTS_DIR: &str = "attempts";

/// The most a plan, a request or a `session.json` read back may be.
const MAX_READ: u64 = 64 << 20;

/// `plan.json`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Plan {
    pub schema_version: SchemaVersion,
    pub batch_id: String,
    pub file: PathBuf,
    pub executor: String,
    pub executor_options: Option<serde_json::Value>,
    pub jobs: usize,
    pub entries: Vec<String>,
}

impl Plan {
    pub(crate) fn new(id: &str, file: &Path, executor: &dyn Executor, jobs: usize) -> Self {
        Self {
            schema_version: SchemaVersion,
            batch_id: id.into(),
            file: file.into(),
            executor: executor.name().into(),
            executor_options: executor.options(),
            jobs,
            entries: Vec::new(),
        }
    }

    /// Writes the plan and every request (owner only: a request can hold
    /// `--env NAME=VALUE` secrets).
    pub(crate) fn write(
        mut self,
        dir: &Path,
        named: &[(String, RunRequest)],
    ) -> std::io::Result<()> {
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(dir.join(REQUESTS_DIR))?;
        for (i, (_, request)) in named.iter().enumerate() {
            let bytes = serde_json::to_vec_pretty(request).map_err(std::io::Error::from)?;
            crate::regular_file::create_new(
                &dir.join(REQUESTS_DIR).join(format!("{i}.json")),
                0o600,
            )?
            .write_all(&bytes)?;
        }
        self.entries = named.iter().map(|(n, _)| n.clone()).collect();
        let bytes = serde_json::to_vec_pretty(&self).map_err(std::io::Error::from)?;
        crate::regular_file::create_new(&dir.join(PLAN_FILE), 0o644)?.write_all(&bytes)
    }

    pub(crate) fn read(dir: &Path) -> Result<Plan, String> {
        let path = dir.join(PLAN_FILE);
        let bytes = crate::regular_file::read(&path, MAX_READ)
            .map_err(|e| format!("could not read {}: {e}", path.display()))?;
        serde_json::from_slice(&bytes).map_err(|e| {
            format!(
                "{} is not a batch plan this warden reads: {e}",
                path.display()
            )
        })
    }
}

/// The `n` requests of the plan, in order.
pub(crate) fn read_requests(dir: &Path, n: usize) -> Result<Vec<RunRequest>, String> {
    (0..n)
        .map(|i| {
            let path = dir.join(REQUESTS_DIR).join(format!("{i}.json"));
            let bytes = crate::regular_file::read(&path, MAX_READ)
                .map_err(|e| format!("could not read {}: {e}", path.display()))?;
            serde_json::from_slice(&bytes)
                .map_err(|e| format!("{} is not a request this warden reads: {e}", path.display()))
        })
        .collect()
}

/// The line of an entry whose session ended (its last `session.json`
/// says so), or `None` when it must run again.
pub(crate) fn ended(entry_dir: &Path, name: &str, agent: Agent) -> Option<BatchRun> {
    let bytes = crate::regular_file::read(&entry_dir.join("session.json"), MAX_READ).ok()?;
    let s: SessionReport = serde_json::from_slice(&bytes).ok()?;
    // A session writes session.json after every run: one that stopped
    // early says why; one that ran all its iterations has them all.
    let finished = s.verdict.is_some()
        && (s.stopped_because != StopReason::IterationsExhausted
            || s.iterations_run >= s.iterations_requested);
    if !finished {
        return None;
    }
    let mut run = BatchRun::new(name, agent, s.verdict, None);
    run.duration_ms = s.duration_ms;
    run.session = Some(s);
    Some(run)
}

/// What a run's `run.json` says it spent (only those fields are read).
#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct RunSpending {
    cost_usd: Option<f64>,
    tokens: Option<warden_events::Tokens>,
    turns: u32,
}

/// What the earlier attempts of entries, moved under `attempts/`, spent:
/// each of their runs' `run.json` (not `session.json`, which lacks a run
/// the session was cut short in). That money was spent: a batch budget
/// counts it, else every `--resume --rerun-failed` would grant the whole
/// budget again. A run with no readable `run.json` counts nothing.
pub(crate) fn attempts_spent(dir: &Path) -> crate::budget::Spent {
    let mut spent = crate::budget::Spent::default();
    let real_dirs = |p: &Path| -> Vec<PathBuf> {
        let Ok(rd) = std::fs::read_dir(p) else {
            return Vec::new();
        };
        rd.flatten()
            // Not through a symbolic link: only what warden made.
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect()
    };
    for attempt in real_dirs(&dir.join(ATTEMPTS_DIR)) {
        for run_dir in real_dirs(&attempt) {
            let Ok(bytes) = crate::regular_file::read(&run_dir.join("run.json"), MAX_READ) else {
                continue;
            };
            let Ok(run) = serde_json::from_slice::<RunSpending>(&bytes) else {
                continue;
            };
            spent.add(&crate::budget::Spent {
                cost_usd: run.cost_usd.unwrap_or(0.0),
                tokens: run.tokens.unwrap_or_default().total(),
                turns: u64::from(run.turns),
            });
        }
    }
    spent
}

/// Moves an earlier attempt's directory to `attempts/<dir>.<n>`, so the
/// entry runs again in a fresh one; nothing to do when there is none.
pub(crate) fn move_aside(dir: &Path, entry_dir: &Path) -> Result<(), String> {
    if std::fs::symlink_metadata(entry_dir).is_err() {
        return Ok(());
    }
    let attempts = dir.join(ATTEMPTS_DIR);
    match std::fs::DirBuilder::new().mode(0o755).create(&attempts) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("could not make {}: {e}", attempts.display())),
    }
    let base = entry_dir.file_name().unwrap_or_default().to_string_lossy();
    for n in 1..10_000 {
        let to = attempts.join(format!("{base}.{n}"));
        if std::fs::symlink_metadata(&to).is_ok() {
            continue;
        }
        return std::fs::rename(entry_dir, &to).map_err(|e| {
            format!(
                "could not move {} to {}: {e}",
                entry_dir.display(),
                to.display()
            )
        });
    }
    Err(format!("too many attempts of {}", entry_dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::SessionRun;

    /// A `session.json` with every field the report has now.
    fn session_json() -> serde_json::Value {
        let run = SessionRun {
            iteration: 1,
            output_retry: false,
            attempt: 1,
            resumed: false,
            retried_because: None,
            retry_delay_ms: None,
            run_id: "01RUN".into(),
            run_dir: "/tmp/x/iteration-1".into(),
            verdict: Some(crate::Verdict::Succeeded),
            reason: "exited 0".into(),
            duration_ms: 10,
            completion_signal_seen: false,
            tokens: warden_events::Tokens::default(),
            cost_usd: Some(0.25),
            turns: 1,
            commits: Some(Vec::new()),
            exit_code: Some(0),
            signal: None,
            ended_by_warden: false,
        };
        let report = SessionReport {
            schema_version: SchemaVersion,
            session_id: "01SESSION".into(),
            name: "a".into(),
            session_dir: "/tmp/x".into(),
            workdir: "/tmp".into(),
            worktree: None,
            started_at: "2026-01-01T00:00:00.000Z".into(),
            duration_ms: 10,
            iterations_requested: 1,
            iterations_run: 1,
            stopped_because: StopReason::IterationsExhausted,
            verdict: Some(crate::Verdict::Succeeded),
            runs: vec![run],
            tokens: warden_events::Tokens::default(),
            cost_usd: Some(0.25),
            turns: 1,
            budgets: Vec::new(),
            budget_exceeded: None,
            commits: Some(Vec::new()),
            otel: None,
            output: None,
            error: None,
            output_lost: None,
            written: true,
        };
        serde_json::to_value(&report).unwrap()
    }

    #[test]
    fn an_entry_that_an_older_warden_finished_is_kept_on_resume() {
        // What a warden before retries and budgets wrote: none of the
        // fields they added. Not reading it would run the entry again.
        let mut old = session_json();
        for key in ["turns", "budgets", "budget_exceeded"] {
            old.as_object_mut().unwrap().remove(key).expect(key);
        }
        let run = old["runs"][0].as_object_mut().unwrap();
        for key in [
            "attempt",
            "resumed",
            "retried_because",
            "retry_delay_ms",
            "turns",
        ] {
            run.remove(key).expect(key);
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("session.json"),
            serde_json::to_vec(&old).unwrap(),
        )
        .unwrap();
        let kept = ended(dir.path(), "a", Agent::Pi).expect("the entry ended");
        let s = kept.session.expect("its session");
        assert_eq!(s.verdict, Some(crate::Verdict::Succeeded));
        assert_eq!(s.runs[0].attempt, 1);
        assert!(!s.runs[0].resumed);
        assert_eq!(s.cost_usd, Some(0.25));
    }
}
