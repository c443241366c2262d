//! A batch: many sessions, `jobs` at a time, one update stream, one
//! `batch.json`. One entry failing never stops the others; cancelling
//! the batch cancels every run (again: kills them) and still writes every
//! report.
//!
//! ```no_run
//! # async fn demo() -> Result<(), warden_run::batch::BatchError> {
//! use warden_run::{Batch, RunRequest, Update};
//! let mut batch = Batch::new(".warden/batches/demo", 2);
//! for n in 1..=4 {
//!     batch.add(format!("job-{n}"), RunRequest::exec(["sh", "-c", "sleep 0.1"]))?;
//! }
//! let mut running = batch.start().await?;
//! while let Some(update) = running.next_update().await {
//!     if let Update::EntryFinished { run, .. } = update {
//!         println!("{}: {:?}", run.name, run.verdict);
//!     }
//! }
//! let done = running.wait().await;
//! println!("{}: {} succeeded; written: {:?}", done.verdict, done.report.succeeded, done.written);
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use tokio::sync::mpsc;

use crate::batch_key::{BatchKey, ReportSigner};
use crate::batch_plan as plan;
use crate::batch_report::BatchReport;
use crate::batch_report::BatchRun;
use crate::executor;
// Declared with what an executor is given, which obeys it.
pub use crate::executor::BatchControl;
use crate::held_dir::{DirError, HeldDir};
use crate::update::Update;
use crate::{RunRequest, Verdict};

/// What warden itself keeps in a batch directory, so no entry is named so.
const BATCH_FILES: &[&str] = &[
    "batch.json",
    plan::PLAN_FILE,
    plan::REQUESTS_DIR,
    plan::ATTEMPTS_DIR,
    executor::slurm::SLURM_DIR,
];

/// The longest name an entry's directory may have, in bytes.
const MAX_DIR_NAME: usize = 200;

/// What stops a batch before it starts.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    #[error(
        "the name `{0}` cannot name a directory: use letters, digits, `-`, `_` or `.`, not only dots"
    )]
    NoDirectory(String),
    #[error("the name `{name}` is taken by warden's own `{file}`: pick another")]
    Reserved { name: String, file: String },
    #[error("the name `{0}` is too long for a directory name (at most 200 bytes)")]
    TooLong(String),
    #[error("two runs are named `{0}`: names must be unique")]
    Duplicate(String),
    #[error(
        "the runs `{first}` and `{second}` would share the directory `{dir}` (a name keeps letters, digits, `-`, `_` and `.`; anything else becomes `-`): give them names that differ there"
    )]
    SameDirectory {
        first: String,
        second: String,
        dir: String,
    },
    #[error("a batch needs at least one run and at least one job")]
    Empty,
    #[error("-j: {0}")]
    Jobs(String),
    #[error("could not keep the batch's key: {0}")]
    Key(String),
    #[error("could not write the batch's plan: {0}")]
    Plan(String),
    #[error("cannot resume the batch in {}: {why}", .dir.display())]
    Resume { dir: PathBuf, why: String },
    #[error(transparent)]
    Dir(#[from] DirError),
}

impl BatchError {
    /// [`crate::ErrorKind::Storage`] when the file system cannot hold the batch
    /// directory (full); the rest is the batch's to fix.
    pub fn kind(&self) -> crate::ErrorKind {
        match self {
            BatchError::Dir(e)
                if e.io()
                    .and_then(std::io::Error::raw_os_error)
                    .is_some_and(|c| c == rustix::io::Errno::NOSPC.raw_os_error()) =>
            {
                crate::ErrorKind::Storage
            }
            _ => crate::ErrorKind::Invalid,
        }
    }
}

/// The directory of the entry `name` in its batch: one plain component,
/// so it can never be outside the batch directory, nor the batch
/// directory itself.
pub fn entry_dir_name(name: &str) -> Result<String, BatchError> {
    let dir = crate::git::dir_name(name);
    if dir.is_empty() || dir == "." || dir == ".." {
        return Err(BatchError::NoDirectory(name.into()));
    }
    if BATCH_FILES.contains(&dir.as_str()) {
        return Err(BatchError::Reserved {
            name: name.into(),
            file: dir,
        });
    }
    if dir.len() > MAX_DIR_NAME {
        return Err(BatchError::TooLong(name.into()));
    }
    Ok(dir)
}

struct Entry {
    name: String,
    request: RunRequest,
    /// On a resumed batch: how it ended before (it does not run again).
    kept: Option<BatchRun>,
}

/// A batch being put together.
pub struct Batch {
    id: String,
    executor: Arc<dyn executor::Executor>,
    dir: PathBuf,
    jobs: usize,
    source: PathBuf,
    entries: Vec<Entry>,
    control: BatchControl,
    /// Continues a batch whose directory is already there.
    resumed: bool,
    /// A resumed batch's directory and its lock, taken by
    /// [`Batch::resume`] before it read (or moved) anything there.
    held: Option<(HeldDir, std::os::fd::OwnedFd)>,
    /// The most all its entries may spend together.
    budget: crate::budget::Budget,
    /// What the earlier attempts of a resumed batch's entries (under
    /// `attempts/`) spent: counted against its budget.
    earlier_spent: crate::budget::Spent,
    telemetry: Option<crate::telemetry::Telemetry>,
    /// The batch's key: made by [`Batch::start`], or a resumed batch's.
    key: Option<Arc<BatchKey>>,
    /// What [`Batch::resume`] did not believe.
    warnings: Vec<String>,
    /// Directories of warden's besides the batch's own, hidden from every
    /// sandboxed agent of it: the one it was made in ([`Batch::under`]),
    /// a cluster's shared directory ([`Batch::hide`]).
    hidden: Vec<PathBuf>,
}

impl Batch {
    /// A batch whose reports go under `dir` (which must not exist or be
    /// empty), running at most `jobs` entries at a time.
    pub fn new(dir: impl Into<PathBuf>, jobs: usize) -> Self {
        Self {
            id: crate::held_dir::new_run_id(SystemTime::now()),
            executor: Arc::new(executor::Local),
            dir: dir.into(),
            jobs,
            source: PathBuf::new(),
            entries: Vec::new(),
            control: BatchControl::default(),
            resumed: false,
            held: None,
            budget: crate::budget::Budget::default(),
            earlier_spent: crate::budget::Spent::default(),
            telemetry: None,
            key: None,
            warnings: Vec::new(),
            hidden: Vec::new(),
        }
    }

    /// Exports a span for the batch, with its entries' sessions and runs
    /// under it, through `telemetry`.
    pub fn telemetry(mut self, telemetry: crate::telemetry::Telemetry) -> Self {
        self.telemetry = Some(telemetry);
        self
    }

    /// The most all the entries may spend together (the batch file's
    /// `[budget]`). On this machine (the local executor) the runs hold it
    /// together, live ([`crate::budget::BudgetPool`]): the one whose
    /// spending passes it and every other then running end
    /// `budget_exceeded`, and an entry starts only while something is left.
    /// On a cluster each entry is held to the whole budget on its own.
    pub fn budget(mut self, budget: crate::budget::Budget) -> Self {
        self.budget = budget;
        self
    }

    /// A batch in `<cwd>/.warden/batches/<its id>`.
    pub fn in_default_dir(cwd: &Path, jobs: usize) -> Self {
        Self::under(&cwd.join(crate::defaults::BATCHES_DIR), jobs)
    }

    /// A batch in `<parent>/<its id>` (a directory the nodes of a cluster
    /// share, say).
    pub fn under(parent: &Path, jobs: usize) -> Self {
        let mut b = Self::new(PathBuf::new(), jobs);
        b.dir = parent.join(&b.id);
        b.hidden.push(parent.to_path_buf());
        b
    }

    /// Hides `dir` too from every sandboxed agent of the batch (a
    /// cluster's shared directory, with other batches in it), as its own
    /// directory is.
    pub fn hide(mut self, dir: PathBuf) -> Self {
        if !self.hidden.contains(&dir) {
            self.hidden.push(dir);
        }
        self
    }

    /// The batch's id (`batch.json`'s `batch_id`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Where its reports go.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How many entries it has.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Where the entries run ([`executor::Local`] unless set).
    pub fn executor(mut self, executor: Arc<dyn executor::Executor>) -> Self {
        self.executor = executor;
        self
    }

    /// The file the batch was read from, for `batch.json`.
    pub fn source(mut self, file: impl Into<PathBuf>) -> Self {
        self.source = file.into();
        self
    }

    /// Continues the batch in `dir` from its `plan.json` and `requests/`:
    /// an entry whose session ended keeps its report (with
    /// `rerun_failed`, only one that succeeded); every other entry runs
    /// again, its earlier directory moved under `attempts/`. Jobs of the
    /// batch still queued or running on a cluster are waited for first.
    /// The executor is the plan's (`local` or `slurm` with its options);
    /// `jobs` replaces the plan's when given.
    ///
    /// Nothing is believed unchecked (see [`crate::batch_key`]): the
    /// batch's key is read from where [`Batch::start`] kept it (an error
    /// naming the file when it is not there), `plan.json` must carry its
    /// MAC (else an error), a request that does not is never run (its
    /// entry ends `internal_error`, kept as such), and a `session.json` that
    /// does not is not believed (the entry runs again); each is said in
    /// [`Batch::warnings`].
    pub async fn resume(
        dir: &Path,
        jobs: Option<usize>,
        rerun_failed: bool,
    ) -> Result<Batch, BatchError> {
        let bad = |why: String| BatchError::Resume {
            dir: dir.to_path_buf(),
            why,
        };
        // The lock first: a batch still going is neither read half-written
        // nor has its entries moved aside under it.
        let held = match crate::held_dir::off_clock(dir, HeldDir::open_existing).await? {
            Some(held) => held,
            None => return Err(bad("no such directory".into())),
        };
        let in_use = held.try_lock().map_err(|source| {
            BatchError::from(DirError::Io {
                path: dir.to_path_buf(),
                source,
            })
        })?;
        let Some(in_use) = in_use else {
            return Err(bad(
                "another warden is running it (it holds the directory's lock)".into(),
            ));
        };
        // The key first (from the id `plan.json` names): nothing of the
        // plan is believed before its MAC is checked.
        let id = plan::Plan::batch_id(dir).map_err(&bad)?;
        let key = Arc::new(BatchKey::load(&id).map_err(&bad)?);
        let plan = plan::Plan::read(dir, &key).map_err(&bad)?;
        if plan.batch_id != id {
            return Err(bad(format!(
                "{} names two batch ids",
                dir.join(plan::PLAN_FILE).display()
            )));
        }
        if let Some(j) = jobs {
            plan::check_jobs(j).map_err(|e| bad(format!("-j: {e}")))?;
        }
        let executor: Arc<dyn executor::Executor> = match plan.executor.as_str() {
            "local" => Arc::new(executor::Local),
            "slurm" => {
                let opts: executor::slurm::SlurmOptions = plan
                    .executor_options
                    .clone()
                    .map(serde_json::from_value)
                    .transpose()
                    .map_err(|e| bad(format!("its Slurm options: {e}")))?
                    .unwrap_or_default();
                opts.check()
                    .and_then(|()| opts.check_paths())
                    .map_err(|e| {
                        bad(format!(
                            "{}: `executor_options`: {e}",
                            dir.join(plan::PLAN_FILE).display()
                        ))
                    })?;
                executor::slurm::wait_for_earlier(&opts, dir)
                    .await
                    .map_err(&bad)?;
                Arc::new(executor::slurm::Slurm::new(opts))
            }
            other => return Err(bad(format!("unknown executor `{other}`"))),
        };
        let requests = plan::read_requests(dir, plan.entries.len(), &key);
        let mut batch = Batch::new(dir, jobs.unwrap_or(plan.jobs)).executor(executor);
        if let Some(b) = requests
            .iter()
            .find_map(|r| r.as_ref().ok().and_then(|r| r.batch_budget))
        {
            batch.budget = b.budget;
        }
        batch.id = plan.batch_id.clone();
        batch.source = plan.file.clone();
        batch.resumed = true;
        batch.held = Some((held, in_use));
        let mut dir_names = Vec::new();
        for (index, (name, request)) in plan.entries.iter().zip(requests).enumerate() {
            let dir_name = entry_dir_name(name)?;
            let entry_dir = dir.join(&dir_name);
            dir_names.push(dir_name);
            let mut request = match request {
                Ok(r) => r,
                Err(refused) => {
                    // Never run: what is there is not what warden saved.
                    let run = BatchRun::new(
                        name,
                        warden_events::Agent::Exec,
                        Some(Verdict::InternalError),
                        Some(format!("not run: {}", refused.why)),
                    );
                    batch
                        .warnings
                        .push(format!("run `{name}`: {}", refused.why));
                    batch.entries.push(Entry {
                        name: name.clone(),
                        request: RunRequest::exec(Vec::<String>::new()),
                        kept: Some(run),
                    });
                    continue;
                }
            };
            // Where this batch directory is now (it may have moved), and
            // never anywhere else.
            request.dir = Some(entry_dir.clone());
            request.session.name = Some(name.clone());
            let kept = match plan::ended(&entry_dir, index, name, request.agent, &key) {
                plan::Earlier::Ended(run) => Some(*run),
                plan::Earlier::Again => None,
                plan::Earlier::Refused(why) => {
                    batch
                        .warnings
                        .push(format!("run `{name}`: {why}; it runs again"));
                    None
                }
            }
            .filter(|run| !rerun_failed || run.verdict == Some(Verdict::Succeeded));
            if kept.is_none() {
                plan::move_aside(dir, &entry_dir).map_err(&bad)?;
            }
            batch.entries.push(Entry {
                name: name.clone(),
                request,
                kept,
            });
        }
        let (spent, warnings) = plan::attempts_spent(dir, &dir_names, &key);
        batch.earlier_spent = spent;
        batch.warnings.extend(warnings);
        batch.key = Some(key);
        Ok(batch)
    }

    /// What a resumed batch found that it did not believe (a report that
    /// could not be authenticated, say), one line each.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Each entry's name and request, in order.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &RunRequest)> {
        self.entries.iter().map(|e| (e.name.as_str(), &e.request))
    }

    /// How many entries run at once.
    pub fn jobs(&self) -> usize {
        self.jobs
    }

    /// The executor's name (`local`, `slurm`).
    pub fn executor_name(&self) -> &'static str {
        self.executor.name()
    }

    /// How many entries will run (on a resumed batch, those not kept).
    pub fn to_run(&self) -> usize {
        self.entries.iter().filter(|e| e.kept.is_none()).count()
    }

    /// Adds an entry: a session of `request` in `<dir>/<name>`. Names
    /// must be unique as directory names.
    pub fn add(
        &mut self,
        name: impl Into<String>,
        mut request: RunRequest,
    ) -> Result<(), BatchError> {
        let name = name.into();
        let dir = entry_dir_name(&name)?;
        if let Some(other) = self
            .entries
            .iter()
            .find(|e| entry_dir_name(&e.name).is_ok_and(|d| d == dir))
        {
            return Err(if other.name == name {
                BatchError::Duplicate(name)
            } else {
                BatchError::SameDirectory {
                    first: other.name.clone(),
                    second: name,
                    dir,
                }
            });
        }
        request.session.name = Some(name.clone());
        request.dir = Some(self.dir.join(&dir));
        self.entries.push(Entry {
            name,
            request,
            kept: None,
        });
        Ok(())
    }

    /// Cancels every entry from elsewhere (a signal handler, say).
    pub fn control(&self) -> BatchControl {
        self.control.clone()
    }

    /// The batch directory, held and claimed (`warden gc` never removes a
    /// directory whose lock it cannot take), with `plan.json` written for
    /// a new batch; a resumed batch's own, already held.
    async fn claim_and_plan(
        &mut self,
        key: &Arc<BatchKey>,
    ) -> Result<(HeldDir, std::os::fd::OwnedFd), BatchError> {
        Ok(if let Some(held) = self.held.take() {
            held
        } else {
            let held = crate::held_dir::off_clock(&self.dir, HeldDir::create_empty).await?;
            // Locked before the plan is written: until then `warden gc`
            // could take the new directory for an old one.
            let in_use = held.claim()?;
            let plan = plan::Plan::new(&self.id, &self.source, self.executor.as_ref(), self.jobs);
            let named: Vec<(String, RunRequest)> = self
                .entries
                .iter()
                .map(|e| (e.name.clone(), e.request.clone()))
                .collect();
            let dir = self.dir.clone();
            let plan_key = key.clone();
            let written = tokio::task::spawn_blocking(move || plan.write(&dir, &named, &plan_key))
                .await
                .map_err(|e| std::io::Error::other(e.to_string()))
                .and_then(|r| r);
            written.map_err(|e| BatchError::Plan(e.to_string()))?;
            (held, in_use)
        })
    }

    /// Makes the batch directory and starts the entries on the current
    /// tokio runtime. A new batch's key is made first and kept outside its
    /// directory ([`crate::batch_key::key_path`]).
    pub async fn start(mut self) -> Result<BatchHandle, BatchError> {
        if self.entries.is_empty() || self.jobs == 0 {
            return Err(BatchError::Empty);
        }
        plan::check_jobs(self.jobs).map_err(BatchError::Jobs)?;
        // The key the batch's files are signed with (and its secrets
        // sealed): a resumed batch's own, else a new one, kept outside the
        // batch directory before anything is written there.
        let key = match self.key.take() {
            Some(k) => k,
            None => {
                let id = self.id.clone();
                let made = tokio::task::spawn_blocking(move || BatchKey::create(&id))
                    .await
                    .map_err(|e| BatchError::Key(e.to_string()))?;
                Arc::new(made.map_err(BatchError::Key)?.0)
            }
        };
        for (index, e) in self.entries.iter_mut().enumerate() {
            e.request.report_signer = Some(ReportSigner {
                key: key.clone(),
                index,
            });
        }
        // What the entries kept from before spent, and the earlier
        // attempts of those that run again, counts against the budget;
        // every request carries it (a cluster's nodes read it from there).
        let earlier = self.earlier_spent;
        let budget = (!self.budget.is_empty()).then(|| {
            let mut spent = earlier;
            for e in &self.entries {
                if let Some(s) = e.kept.as_ref().and_then(|k| k.session.as_ref()) {
                    spent.add(&crate::budget::Spent::of_session(s));
                }
            }
            crate::budget::SharedBudget::new(crate::budget::BudgetScope::Batch, self.budget, spent)
        });
        // The batch's span: the parent of every entry's session, here or
        // (through the request) on a cluster's node.
        let batch_span = self.telemetry.as_ref().map(|t| (t.clone(), t.top_span()));
        // The batch's directory (every entry's request, report and logs)
        // and the directory it was made in (a cluster's shared directory,
        // with other batches) are warden's: hidden from every sandboxed
        // agent, wherever they lie. Carried by each request, so an entry
        // run on a cluster's node hides them too.
        let records: Vec<PathBuf> = std::iter::once(&self.dir)
            .chain(&self.hidden)
            .map(|d| std::path::absolute(d).unwrap_or_else(|_| d.clone()))
            .collect();
        for e in &mut self.entries {
            for r in &records {
                if !e.request.sandbox.records.contains(r) {
                    e.request.sandbox.records.push(r.clone());
                }
            }
            e.request.batch_budget = budget;
            e.request.otel = batch_span
                .as_ref()
                .and_then(|(t, ids)| crate::telemetry::OtelRequest::new(t, ids));
        }
        let (held, in_use) = self.claim_and_plan(&key).await?;
        // `in_use` is held until batch.json is written: `warden gc` never
        // removes a batch directory whose lock it cannot take, and a batch
        // still going is not resumed by a second warden.
        let batch_id = self.id;
        let (tx, rx) = mpsc::channel(crate::update::UPDATES_QUEUED);
        let started = Instant::now();
        let started_at = SystemTime::now();
        // A resumed batch's entries that ended before are finished.
        let status = BatchStatus {
            entries: self
                .entries
                .iter()
                .map(|e| {
                    let state = match &e.kept {
                        Some(run) => EntryState::Finished {
                            verdict: run.verdict,
                        },
                        None => EntryState::Queued,
                    };
                    (e.name.clone(), state)
                })
                .collect(),
        };
        if let Some(t) = &self.telemetry {
            t.batch_runs(status.queued(), status.running(), status.finished());
        }
        // What ended before stays; the rest runs.
        let mut kept: Vec<Option<BatchRun>> = Vec::new();
        let mut entries = Vec::new();
        for (index, e) in self.entries.into_iter().enumerate() {
            match e.kept {
                Some(run) => kept.push(Some(run)),
                None => {
                    kept.push(None);
                    entries.push(executor::Entry {
                        index,
                        name: e.name,
                        request: e.request,
                    });
                }
            }
        }
        let (jobs, file, dir) = (self.jobs, self.source, self.dir);
        let work = executor::Work::new(
            batch_id.clone(),
            dir.clone(),
            jobs,
            entries,
            self.control.clone(),
            tx,
        )
        .with_budget(budget)
        .with_key(key)
        .with_telemetry(
            batch_span
                .as_ref()
                .map(|(t, ids)| t.with_parent(*ids, false)),
        );
        let finish = Finish {
            batch_id,
            file,
            dir,
            jobs,
            kept,
            budget,
            earlier,
            batch_span,
            started,
            started_at,
            held,
            in_use,
        };
        let task = tokio::spawn(finish.run(self.executor, work));
        Ok(BatchHandle {
            updates: Some(rx),
            task,
            control: self.control,
            status,
            telemetry: self.telemetry,
        })
    }
}

/// What a batch's task needs to end it: its runs' reports in order (those
/// kept from before where they were), its budget counted once more, and
/// `batch.json` written while its directory is still claimed.
struct Finish {
    batch_id: String,
    file: PathBuf,
    dir: PathBuf,
    jobs: usize,
    kept: Vec<Option<BatchRun>>,
    budget: Option<crate::budget::SharedBudget>,
    earlier: crate::budget::Spent,
    batch_span: Option<(crate::telemetry::Telemetry, crate::telemetry::TraceIds)>,
    started: Instant,
    started_at: SystemTime,
    held: HeldDir,
    /// The batch directory's lock, let go once `batch.json` is written.
    in_use: std::os::fd::OwnedFd,
}

impl Finish {
    /// Runs what is left through `executor`, then writes `batch.json`.
    async fn run(
        self,
        executor: Arc<dyn executor::Executor>,
        work: executor::Work,
    ) -> BatchOutcome {
        let Finish {
            batch_id,
            file,
            dir,
            jobs,
            kept,
            budget,
            earlier,
            batch_span,
            started,
            started_at,
            held,
            in_use,
        } = self;
        let mut ran = if work.entries.is_empty() {
            Vec::new()
        } else {
            executor.run(work).await
        }
        .into_iter();
        // In the entries' order: each kept one where it was.
        let runs: Vec<BatchRun> = kept
            .into_iter()
            .filter_map(|k| k.or_else(|| ran.next()))
            .collect();
        let budgets = match budget {
            Some(b) => {
                let mut spent = earlier;
                for s in runs.iter().filter_map(|r| r.session.as_ref()) {
                    spent.add(&crate::budget::Spent::of_session(s));
                }
                crate::budget::SharedBudget::new(b.scope, b.budget, spent).lines()
            }
            None => Vec::new(),
        };
        let count = |v: Verdict| runs.iter().filter(|r| r.verdict == Some(v)).count();
        let (succeeded, cancelled) = (count(Verdict::Succeeded), count(Verdict::Cancelled));
        let report = BatchReport {
            schema_version: warden_events::SchemaVersion,
            batch_id,
            file,
            executor: executor.name().into(),
            jobs,
            duration_ms: started.elapsed().as_millis() as u64,
            succeeded,
            cancelled,
            failed: runs.len() - succeeded - cancelled,
            never_ran: runs
                .iter()
                .filter(|r| !r.ran())
                .map(|r| r.name.clone())
                .collect(),
            budgets,
            runs,
            otel: None,
        };
        let mut report = report;
        if let Some((t, ids)) = batch_span.as_ref().filter(|(t, _)| t.traces()) {
            report.otel = Some(crate::telemetry::batch_span(t, ids, started_at, &report));
        }
        let path = dir.join("batch.json");
        let written = serde_json::to_vec_pretty(&report)
            .map_err(std::io::Error::from)
            .and_then(|mut bytes| {
                bytes.push(b'\n');
                held.write_atomic("batch.json", &bytes)
            })
            .map(|()| path);
        drop(in_use);
        BatchOutcome::new(report, written)
    }
}

/// A running batch.
pub struct BatchHandle {
    updates: Option<mpsc::Receiver<Update>>,
    task: tokio::task::JoinHandle<BatchOutcome>,
    control: BatchControl,
    status: BatchStatus,
    /// Told where the entries are, for the `warden.batch.runs` gauge.
    telemetry: Option<crate::telemetry::Telemetry>,
}

/// Where an entry of a batch is.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryState {
    /// Waiting for a place among the `jobs` running.
    Queued,
    /// Its session is on its `iteration`th run (0 before the first).
    Running { iteration: u32 },
    /// Ended, with its verdict (none when it could not start).
    Finished { verdict: Option<Verdict> },
}

/// Where every entry of a batch is, as the updates read so far say: what
/// a view shows without working it out itself.
#[non_exhaustive]
#[derive(Debug, Clone, Default)]
pub struct BatchStatus {
    /// By entry index: its name and state.
    pub entries: Vec<(String, EntryState)>,
}

impl BatchStatus {
    /// How many entries are in `state`'s kind (the data inside is not
    /// compared).
    pub fn count(&self, kind: fn(&EntryState) -> bool) -> usize {
        self.entries.iter().filter(|(_, s)| kind(s)).count()
    }

    pub fn queued(&self) -> usize {
        self.count(|s| matches!(s, EntryState::Queued))
    }

    pub fn running(&self) -> usize {
        self.count(|s| matches!(s, EntryState::Running { .. }))
    }

    pub fn finished(&self) -> usize {
        self.count(|s| matches!(s, EntryState::Finished { .. }))
    }

    /// Takes in `update`; `true` when an entry changed its state.
    fn apply(&mut self, update: &Update) -> bool {
        let (entry, state) = match update {
            Update::EntryStarted { entry, .. } => (*entry, EntryState::Running { iteration: 0 }),
            Update::IterationStarted {
                entry: Some(entry),
                iteration,
                ..
            } => (
                *entry,
                EntryState::Running {
                    iteration: *iteration,
                },
            ),
            Update::EntryFinished { entry, run } => (
                *entry,
                EntryState::Finished {
                    verdict: run.verdict,
                },
            ),
            _ => return false,
        };
        match self.entries.get_mut(entry) {
            Some((_, s)) if *s != state => {
                *s = state;
                true
            }
            _ => false,
        }
    }
}

/// How a batch ended: its final verdict, its report, and where
/// `batch.json` was written (or why it could not be).
#[non_exhaustive]
#[derive(Debug)]
pub struct BatchOutcome {
    /// The batch's verdict, from its entries': `cancelled` if any was
    /// cancelled, else `budget_exceeded` if any crossed a budget, else
    /// `agent_failed` if any did not succeed (or never ran), else
    /// `succeeded`.
    pub verdict: Verdict,
    pub report: BatchReport,
    pub written: std::io::Result<PathBuf>,
}

impl BatchOutcome {
    fn new(report: BatchReport, written: std::io::Result<PathBuf>) -> Self {
        let verdict = report.verdict();
        Self {
            verdict,
            report,
            written,
        }
    }

    /// warden's exit code for the batch: output lost (a report that could
    /// not be written) first, then its verdict's: 130 if any run was
    /// cancelled, 7 if any exceeded a budget, 1 if any failed, else 0.
    pub fn exit_code(&self) -> u8 {
        if self.written.is_err() {
            crate::report::OUTPUT_LOST_EXIT
        } else {
            self.report.warden_exit_code()
        }
    }
}

impl BatchHandle {
    /// The next update of any entry; `None` once every entry has ended.
    pub async fn next_update(&mut self) -> Option<Update> {
        let update = self.updates.as_mut()?.recv().await?;
        if self.status.apply(&update)
            && let Some(t) = &self.telemetry
        {
            t.batch_runs(
                self.status.queued(),
                self.status.running(),
                self.status.finished(),
            );
        }
        Some(update)
    }

    /// Where every entry is, as of the last update read.
    pub fn status(&self) -> &BatchStatus {
        &self.status
    }

    /// Leaves the output lines of the entries' `exec` runs started after
    /// this call out of the updates, for a caller that shows none of them (see
    /// [`SessionHandle::without_output_lines`](crate::SessionHandle::without_output_lines)).
    /// An entry run on a cluster is followed through its `events.jsonl`,
    /// where an `exec` run's lines are not events at all.
    pub fn without_output_lines(&self) {
        self.control.without_output_lines();
    }

    /// Cancels every entry from elsewhere (a signal handler, say): no
    /// queued entry starts, the running ones are cancelled; a second
    /// cancel kills them.
    pub fn canceller(&self) -> crate::Canceller {
        crate::Canceller(Arc::new(self.control.clone()))
    }

    /// Waits for every entry and writes `batch.json`. The updates need
    /// not be read first: those not yet read are dropped.
    pub async fn wait(mut self) -> BatchOutcome {
        self.updates = None;
        let outcome = match self.task.await {
            Ok(o) => o,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        };
        // Every entry has ended, whichever updates were read.
        if let Some(t) = &self.telemetry {
            for ((_, state), run) in self.status.entries.iter_mut().zip(&outcome.report.runs) {
                *state = EntryState::Finished {
                    verdict: run.verdict,
                };
            }
            t.batch_runs(
                self.status.queued(),
                self.status.running(),
                self.status.finished(),
            );
        }
        outcome
    }
}
