//! What a batch directory keeps so that the batch can be resumed: its
//! `plan.json` (the id, the file, the executor and its options, the
//! entries' names), each entry's request in `requests/N.json`, and the
//! earlier attempts of an entry that ran again under `attempts/`.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use warden_events::{Agent, SchemaVersion};

use crate::RunRequest;
use crate::batch_key::{self, BatchKey, Role};
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

    /// Writes the plan and every request, each with its MAC (`key`), the
    /// requests' `--env NAME=VALUE` values sealed with it.
    pub(crate) fn write(
        mut self,
        dir: &Path,
        named: &[(String, RunRequest)],
        key: &BatchKey,
    ) -> std::io::Result<()> {
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(dir.join(REQUESTS_DIR))?;
        for (i, (_, request)) in named.iter().enumerate() {
            let bytes = batch_key::seal_request(key, i, request).map_err(std::io::Error::other)?;
            key.write_signed(
                &dir.join(REQUESTS_DIR).join(format!("{i}.json")),
                0o600,
                Role::Request(i),
                &bytes,
            )?;
        }
        self.entries = named.iter().map(|(n, _)| n.clone()).collect();
        let bytes = serde_json::to_vec_pretty(&self).map_err(std::io::Error::from)?;
        key.write_signed(&dir.join(PLAN_FILE), 0o644, Role::Plan, &bytes)
    }

    /// The batch id `plan.json` names, read before its key is known (to
    /// find the key); nothing else of it is believed until its MAC is
    /// checked.
    pub(crate) fn batch_id(dir: &Path) -> Result<String, String> {
        #[derive(serde::Deserialize)]
        struct Id {
            batch_id: String,
        }
        let path = dir.join(PLAN_FILE);
        let bytes = crate::regular_file::read(&path, MAX_READ)
            .map_err(|e| format!("could not read {}: {e}", path.display()))?;
        serde_json::from_slice::<Id>(&bytes)
            .map(|i| i.batch_id)
            .map_err(|e| {
                format!(
                    "{} is not a batch plan this warden reads: {e}",
                    path.display()
                )
            })
    }

    /// `plan.json`, only as warden wrote it (its MAC checked with `key`),
    /// its values checked.
    pub(crate) fn read(dir: &Path, key: &BatchKey) -> Result<Plan, String> {
        let path = dir.join(PLAN_FILE);
        let bytes = key
            .read_signed(&path, Role::Plan, MAX_READ)
            .map_err(|e| format!("{e}; nothing of the batch was run"))?;
        let plan: Plan = serde_json::from_slice(&bytes).map_err(|e| {
            format!(
                "{} is not a batch plan this warden reads: {e}",
                path.display()
            )
        })?;
        plan.check(&path)?;
        Ok(plan)
    }

    /// Values a plan must have, named with the file when wrong.
    fn check(&self, path: &Path) -> Result<(), String> {
        check_jobs(self.jobs).map_err(|e| format!("{}: `jobs`: {e}", path.display()))?;
        if self.entries.is_empty() {
            return Err(format!("{}: `entries` is empty", path.display()));
        }
        Ok(())
    }
}

/// The most entries of a batch that run at once.
pub(crate) const MAX_JOBS: usize = 1024;

/// `jobs` as a batch takes it: 1 to [`MAX_JOBS`].
pub(crate) fn check_jobs(jobs: usize) -> Result<(), String> {
    if (1..=MAX_JOBS).contains(&jobs) {
        Ok(())
    } else {
        Err(format!(
            "{jobs} is not a number of runs at once (1 to {MAX_JOBS})"
        ))
    }
}

/// Why a saved request is not run: it could not be authenticated or read.
pub(crate) struct Refused {
    pub why: String,
}

/// The `n` requests of the plan, in order: each only as warden wrote it
/// (its MAC checked with `key`, its sealed values opened), else why not.
pub(crate) fn read_requests(
    dir: &Path,
    n: usize,
    key: &BatchKey,
) -> Vec<Result<RunRequest, Refused>> {
    (0..n)
        .map(|i| {
            let path = dir.join(REQUESTS_DIR).join(format!("{i}.json"));
            let bytes = key
                .read_signed(&path, Role::Request(i), MAX_READ)
                .map_err(|e| Refused { why: e.to_string() })?;
            let request = batch_key::open_request(Some(key), i, &bytes, &path)
                .map_err(|why| Refused { why })?;
            check_request(&request, &path).map_err(|why| Refused { why })?;
            Ok(request)
        })
        .collect()
}

/// Values a saved request must have, named with the file when wrong.
fn check_request(r: &RunRequest, path: &Path) -> Result<(), String> {
    let bad = |field: &str, value: String, why: &str| {
        Err(format!("{}: `{field}` = {value}: {why}", path.display()))
    };
    if !r.cwd.is_absolute() {
        return bad("cwd", r.cwd.display().to_string(), "not an absolute path");
    }
    if r.session.iterations == 0 {
        return bad("session.iterations", "0".into(), "at least 1 is run");
    }
    if let Some(b) = &r.batch_budget {
        let c = b.spent.cost_usd;
        if !c.is_finite() || c < 0.0 {
            return bad(
                "batch_budget.spent.cost_usd",
                c.to_string(),
                "what was spent is a finite sum of at least 0",
            );
        }
    }
    Ok(())
}

/// How an entry's earlier attempt stands, from its `session.json`.
pub(crate) enum Earlier {
    /// Its session ended: its line.
    Ended(Box<BatchRun>),
    /// It must run again (no report, or one of a session cut short).
    Again,
    /// Its report is there but not believed (it could not be
    /// authenticated or read): it must run again, and this says why.
    Refused(String),
}

/// How the entry `index` named `name` stands: its line if its session
/// ended (its last `session.json`, authenticated with `key`, says so).
pub(crate) fn ended(
    entry_dir: &Path,
    index: usize,
    name: &str,
    agent: Agent,
    key: &BatchKey,
) -> Earlier {
    let bytes = match key.read_signed(
        &entry_dir.join("session.json"),
        Role::Session(index),
        MAX_READ,
    ) {
        Ok(b) => b,
        Err(e) if e.is_missing() => return Earlier::Again,
        Err(e) => return Earlier::Refused(e.to_string()),
    };
    let s: SessionReport = match serde_json::from_slice(&bytes) {
        Ok(s) => s,
        Err(e) => {
            return Earlier::Refused(format!(
                "{} is not a session report this warden reads: {e}",
                entry_dir.join("session.json").display()
            ));
        }
    };
    // A session writes session.json after every run: one that stopped
    // early says why; one that ran all its iterations has them all.
    let finished = s.verdict.is_some()
        && (s.stopped_because != StopReason::IterationsExhausted
            || s.iterations_run >= s.iterations_requested);
    if !finished {
        return Earlier::Again;
    }
    let mut run = BatchRun::new(name, agent, s.verdict, None);
    run.duration_ms = s.duration_ms;
    run.session = Some(s);
    Earlier::Ended(Box::new(run))
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
/// budget again. `entries` are the entries' directory names, by index.
///
/// Each is counted conservatively: what it says was spent, never less
/// than nothing, so a changed file can take budget away, never give it
/// back. One that cannot be authenticated with `key` (a run cut short
/// before its session signed it, or a file changed since) is named in the
/// warnings returned. A run with no readable `run.json` counts nothing.
pub(crate) fn attempts_spent(
    dir: &Path,
    entries: &[String],
    key: &BatchKey,
) -> (crate::budget::Spent, Vec<String>) {
    let mut spent = crate::budget::Spent::default();
    let mut warnings = Vec::new();
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
        // `<entry's directory>.<n>`: the entry it was an attempt of.
        let index = attempt
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.rsplit_once('.'))
            .and_then(|(base, _)| entries.iter().position(|e| e == base));
        for run_dir in real_dirs(&attempt) {
            let path = run_dir.join("run.json");
            let run_name = run_dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let authentic =
                index.map(|i| key.read_signed(&path, Role::Run(i, &run_name), MAX_READ));
            let bytes = match authentic {
                Some(Ok(bytes)) => bytes,
                Some(Err(e)) if e.is_missing() => continue,
                other => {
                    let Ok(bytes) = crate::regular_file::read(&path, MAX_READ) else {
                        continue;
                    };
                    let why = match other {
                        Some(Err(e)) => e.to_string(),
                        _ => format!("{} is under no entry's attempts", attempt.display()),
                    };
                    warnings.push(format!(
                        "{why}: what it says its run spent is counted against the batch's budget only where it is more than nothing"
                    ));
                    bytes
                }
            };
            let Ok(run) = serde_json::from_slice::<RunSpending>(&bytes) else {
                continue;
            };
            let cost = run.cost_usd.unwrap_or(0.0);
            // Never less than nothing, signed or not: money spent is
            // never given back.
            let counted = crate::budget::Spent {
                cost_usd: if cost.is_finite() && cost > 0.0 {
                    cost
                } else {
                    0.0
                },
                tokens: run.tokens.unwrap_or_default().spent(),
                turns: u64::from(run.turns),
            };
            spent.add(&counted);
        }
    }
    (spent, warnings)
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
pub(crate) mod tests {
    use super::*;
    use crate::session::SessionRun;

    /// A `session.json` with every field the report has now.
    pub(crate) fn session_json() -> serde_json::Value {
        let run = SessionRun {
            iteration: 1,
            output_retry: false,
            attempt: 1,
            attempts: 3,
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
            branch: None,
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
            checks: Vec::new(),
            hooks: Vec::new(),
            merged_into: None,
            merge_commit: None,
            merge_conflicts: Vec::new(),
            written: true,
        };
        serde_json::to_value(&report).unwrap()
    }

    #[test]
    fn an_entry_that_an_older_warden_finished_is_kept_on_resume() {
        // What a warden before retries and budgets wrote: none of the
        // fields they added. Not reading it would run the entry again.
        let mut old = session_json();
        for key in [
            "turns",
            "budgets",
            "budget_exceeded",
            "checks",
            "hooks",
            "merged_into",
            "merge_commit",
            "merge_conflicts",
        ] {
            old.as_object_mut().unwrap().remove(key).expect(key);
        }
        let run = old["runs"][0].as_object_mut().unwrap();
        for key in [
            "attempt",
            "attempts",
            "resumed",
            "retried_because",
            "retry_delay_ms",
            "turns",
        ] {
            run.remove(key).expect(key);
        }
        let dir = tempfile::tempdir().unwrap();
        let key = BatchKey::generate().unwrap();
        let bytes = serde_json::to_vec(&old).unwrap();
        key.write_signed(
            &dir.path().join("session.json"),
            0o600,
            Role::Session(2),
            &bytes,
        )
        .unwrap();
        let Earlier::Ended(kept) = ended(dir.path(), 2, "a", Agent::Pi, &key) else {
            panic!("the entry ended");
        };
        let s = kept.session.expect("its session");
        assert_eq!(s.verdict, Some(crate::Verdict::Succeeded));
        assert_eq!(s.runs[0].attempt, 1);
        assert!(!s.runs[0].resumed);
        assert_eq!(s.cost_usd, Some(0.25));
        // The same report for another entry, or changed: not believed.
        assert!(matches!(
            ended(dir.path(), 3, "a", Agent::Pi, &key),
            Earlier::Refused(why) if why.contains("session.json")
        ));
        std::fs::write(dir.path().join("session.json"), &bytes[1..]).unwrap();
        assert!(matches!(
            ended(dir.path(), 2, "a", Agent::Pi, &key),
            Earlier::Refused(why) if why.contains("tampered")
        ));
    }

    #[test]
    fn a_saved_request_s_values_are_checked_by_name() {
        let p = Path::new("/b/requests/0.json");
        let mut r = RunRequest::exec(["true"]);
        r.cwd = "/w".into();
        assert_eq!(check_request(&r, p), Ok(()));
        r.cwd = "w".into();
        let e = check_request(&r, p).unwrap_err();
        assert!(e.contains("0.json") && e.contains("`cwd` = w"), "{e}");
        r.cwd = "/w".into();
        // `SharedBudget::new` and reading one from JSON both refuse such a
        // sum; a library caller can still set the field itself.
        let mut shared = crate::budget::SharedBudget::new(
            crate::budget::BudgetScope::Batch,
            crate::budget::Budget::default(),
            crate::budget::Spent::default(),
        );
        shared.spent.cost_usd = f64::NAN;
        r.batch_budget = Some(shared);
        let e = check_request(&r, p).unwrap_err();
        assert!(e.contains("cost_usd") && e.contains("NaN"), "{e}");
    }

    #[test]
    fn a_plan_s_jobs_out_of_range_is_an_error_naming_the_file_and_value() {
        let dir = tempfile::tempdir().unwrap();
        let key = BatchKey::generate().unwrap();
        let mut plan = Plan::new("01ID", Path::new("b.toml"), &crate::executor::Local, 2);
        plan.jobs = 4611686018427387904;
        plan.write(
            dir.path(),
            &[("a".into(), RunRequest::exec(["true"]))],
            &key,
        )
        .unwrap();
        let e = Plan::read(dir.path(), &key).unwrap_err();
        assert!(
            e.contains("plan.json") && e.contains("`jobs`") && e.contains("4611686018427387904"),
            "{e}"
        );
    }
}
