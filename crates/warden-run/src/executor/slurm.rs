//! `slurm`: every entry of a batch is a task of one Slurm array job whose
//! command is warden itself (`warden run-request FILE`), supervising the
//! run on the node exactly as `warden run` would, and writing the entry's
//! directory on storage the submitting host shares.
//!
//! The submitting side only submits (`sbatch --parsable`), tracks
//! (`scontrol show job -o`, every call bounded in time), cancels
//! (`scancel`), and reads each entry's `session.json` when its task ends.
//! A task that ends without one (node failure, preemption, cancelled by an
//! admin, out of memory, Slurm's time limit, never started) gets a verdict
//! from Slurm's state, and its `job` in `batch.json` says what Slurm said.
//!
//! Slurm's time limits are whole minutes, checked about every 30 s: each
//! run's own timeout is set inside the job's limit with a margin, so
//! warden, not Slurm, ends a run that overruns, with its report.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::{Duration, Instant};

use tokio::process::Command;

use super::follow::{Follow, LOOKS_AT_THE_END};
use super::{Entry, Executor, Work};
use crate::Verdict;
use crate::batch_key::{BatchKey, KEY_FILE_ENV, Role};
use crate::batch_report::{BatchRun, JobReport};
use crate::session::SessionReport;
use crate::update::Update;

/// Where the batch keeps what Slurm needs (requests, the job script, the
/// jobs' own output), inside the batch directory.
pub const SLURM_DIR: &str = "slurm";

/// The most a `session.json` read back from the shared directory may be.
const MAX_SESSION_JSON: u64 = 64 << 20;

/// A job's state, as Slurm names it (`JobState=` of `scontrol show job`).
/// The states warden tells apart are named; any other is kept as Slurm
/// wrote it and taken for an ending (a state added by a newer Slurm must
/// not keep a batch waiting for ever).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlurmState {
    // Slurm is not done with the job.
    Pending,
    Running,
    Configuring,
    Completing,
    Suspended,
    Requeued,
    RequeueHold,
    RequeueFed,
    Resizing,
    Signaling,
    StageOut,
    Stopped,
    // The job ended.
    Completed,
    Failed,
    Cancelled,
    Preempted,
    Timeout,
    Deadline,
    OutOfMemory,
    NodeFail,
    BootFail,
    /// A state not named above, as Slurm wrote it.
    Other(String),
}

impl SlurmState {
    /// Every named state, for parsing.
    const NAMED: [SlurmState; 21] = [
        Self::Pending,
        Self::Running,
        Self::Configuring,
        Self::Completing,
        Self::Suspended,
        Self::Requeued,
        Self::RequeueHold,
        Self::RequeueFed,
        Self::Resizing,
        Self::Signaling,
        Self::StageOut,
        Self::Stopped,
        Self::Completed,
        Self::Failed,
        Self::Cancelled,
        Self::Preempted,
        Self::Timeout,
        Self::Deadline,
        Self::OutOfMemory,
        Self::NodeFail,
        Self::BootFail,
    ];

    /// The state in Slurm's words (`NODE_FAIL`); only the first word
    /// counts (`sacct` writes `CANCELLED by 1000`).
    pub fn parse(text: &str) -> Self {
        let word = text.split_whitespace().next().unwrap_or("");
        Self::NAMED
            .into_iter()
            .find(|s| s.as_str() == word)
            .unwrap_or_else(|| Self::Other(word.to_string()))
    }

    /// Slurm's word for it.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Pending => "PENDING",
            Self::Running => "RUNNING",
            Self::Configuring => "CONFIGURING",
            Self::Completing => "COMPLETING",
            Self::Suspended => "SUSPENDED",
            Self::Requeued => "REQUEUED",
            Self::RequeueHold => "REQUEUE_HOLD",
            Self::RequeueFed => "REQUEUE_FED",
            Self::Resizing => "RESIZING",
            Self::Signaling => "SIGNALING",
            Self::StageOut => "STAGE_OUT",
            Self::Stopped => "STOPPED",
            Self::Completed => "COMPLETED",
            Self::Failed => "FAILED",
            Self::Cancelled => "CANCELLED",
            Self::Preempted => "PREEMPTED",
            Self::Timeout => "TIMEOUT",
            Self::Deadline => "DEADLINE",
            Self::OutOfMemory => "OUT_OF_MEMORY",
            Self::NodeFail => "NODE_FAIL",
            Self::BootFail => "BOOT_FAIL",
            Self::Other(word) => word,
        }
    }

    /// Whether Slurm is done with a job in this state.
    pub fn is_terminal(&self) -> bool {
        !matches!(
            self,
            Self::Pending
                | Self::Running
                | Self::Configuring
                | Self::Completing
                | Self::Suspended
                | Self::Requeued
                | Self::RequeueHold
                | Self::RequeueFed
                | Self::Resizing
                | Self::Signaling
                | Self::StageOut
                | Self::Stopped
        )
    }

    /// The state of a job as its report says it.
    fn of(job: &JobReport) -> Self {
        Self::parse(&job.state)
    }
}

impl std::fmt::Display for SlurmState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a batch is submitted to Slurm.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SlurmOptions {
    pub partition: Option<String>,
    pub account: Option<String>,
    pub qos: Option<String>,
    /// The job's time limit (Slurm rounds up to whole minutes); each run's
    /// timeout is set inside it. `None`: from the runs' own timeouts.
    #[serde(with = "humantime_serde_opt")]
    pub time_limit: Option<Duration>,
    pub cpus_per_run: Option<u32>,
    /// `--mem` of each task (`4G`).
    pub mem_per_run: Option<String>,
    /// More `sbatch` arguments, as they are.
    pub sbatch_args: Vec<String>,
    /// The warden executable the nodes run (the submitting one if `None`;
    /// it must be at the same path on the nodes).
    pub warden: Option<PathBuf>,
    /// How often the jobs are looked at.
    #[serde(with = "humantime_serde")]
    pub poll: Duration,
    /// The bound on each call to a Slurm command.
    #[serde(with = "humantime_serde")]
    pub call_timeout: Duration,
    /// After a cancel, how long to wait for the jobs to end and write
    /// their reports.
    #[serde(with = "humantime_serde")]
    pub settle: Duration,
    /// How long Slurm may fail to answer before the batch gives up on the
    /// entries still out (they keep running; their directories fill in).
    #[serde(with = "humantime_serde")]
    pub give_up_after: Duration,
}

impl Default for SlurmOptions {
    fn default() -> Self {
        Self {
            partition: None,
            account: None,
            qos: None,
            time_limit: None,
            cpus_per_run: None,
            mem_per_run: None,
            sbatch_args: Vec::new(),
            warden: None,
            poll: Duration::from_millis(500),
            call_timeout: Duration::from_secs(30),
            settle: Duration::from_secs(60),
            give_up_after: Duration::from_secs(600),
        }
    }
}

/// `sbatch` options warden sets itself, which `sbatch_args` may not
/// change, and why.
const OWN_SBATCH_OPTIONS: [(&str, &str); 7] = [
    ("--array", "each run is a task of the batch's one array job"),
    ("--parsable", "warden reads the job id from it"),
    ("--output", "each task's output goes under <batch>/slurm/"),
    ("--chdir", "the tasks start in the batch directory"),
    ("--job-name", "the job is named for the batch"),
    (
        "--requeue",
        "a requeued task would start its run again in the directory the first attempt wrote; a task that ends without a report gets a verdict, and `warden batch --resume DIR --rerun-failed` submits it again",
    ),
    ("--wrap", "the job's script is warden's"),
];

impl SlurmOptions {
    /// Refuses options that cannot work, naming what to change.
    pub fn check(&self) -> Result<(), String> {
        for arg in &self.sbatch_args {
            let flag = arg.split('=').next().unwrap_or(arg);
            // sbatch (getopt_long) takes any unambiguous prefix of a long
            // option (`--requ` is `--requeue`), and a short option's value
            // attached to it (`-a0-3`, `-o/x`, `-Jname`).
            let long = flag.len() > 2 && flag.starts_with("--");
            if let Some((own, why)) = OWN_SBATCH_OPTIONS
                .iter()
                .find(|(o, _)| *o == flag || (long && o.starts_with(flag)))
            {
                return Err(format!(
                    "`{arg}` in sbatch_args: warden sets {own} itself ({why}); remove it"
                ));
            }
            let short = (!flag.starts_with("--"))
                .then(|| flag.strip_prefix('-'))
                .flatten()
                .and_then(|rest| rest.chars().next());
            if matches!(short, Some('a' | 'o' | 'D' | 'J')) {
                return Err(format!(
                    "`{arg}` in sbatch_args: warden sets --array, --output, --chdir and --job-name itself; remove it"
                ));
            }
        }
        if self.poll.is_zero() || self.call_timeout.is_zero() {
            return Err("`poll` and `call_timeout` must be longer than zero".into());
        }
        Ok(())
    }
}

impl SlurmOptions {
    /// Paths the options name must be absolute (`warden`: the program
    /// every job runs).
    pub fn check_paths(&self) -> Result<(), String> {
        match &self.warden {
            Some(w) if !w.is_absolute() => Err(format!(
                "`warden` = {}: the program the jobs run must be an absolute path",
                w.display()
            )),
            _ => Ok(()),
        }
    }
}

/// Durations as `humantime` text (`5m`, `500ms`).
mod humantime_serde {
    use std::time::Duration;

    pub(super) fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }

    pub(super) fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Duration, D::Error> {
        let text: String = serde::Deserialize::deserialize(d)?;
        humantime::parse_duration(&text).map_err(serde::de::Error::custom)
    }
}

mod humantime_serde_opt {
    use std::time::Duration;

    pub(super) fn serialize<S: serde::Serializer>(
        d: &Option<Duration>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => super::humantime_serde::serialize(d, s),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        let text: Option<String> = serde::Deserialize::deserialize(d)?;
        text.map(|t| humantime::parse_duration(&t).map_err(serde::de::Error::custom))
            .transpose()
    }
}

/// The Slurm executor.
#[derive(Debug, Clone, Default)]
pub struct Slurm {
    pub options: SlurmOptions,
}

impl Slurm {
    pub fn new(options: SlurmOptions) -> Self {
        Self { options }
    }
}

impl Executor for Slurm {
    fn name(&self) -> &'static str {
        "slurm"
    }

    fn options(&self) -> Option<serde_json::Value> {
        serde_json::to_value(&self.options).ok()
    }

    fn run(&self, work: Work) -> Pin<Box<dyn Future<Output = Vec<BatchRun>> + Send + 'static>> {
        Box::pin(run_slurm(self.options.clone(), work))
    }
}

/// What the submitting side keeps of each task.
#[derive(Debug, Default)]
struct Task {
    job: Option<JobReport>,
    announced: bool,
    /// What has been read of its runs in the shared directory.
    follow: Follow,
    done: Option<BatchRun>,
}

/// One look at what the task's runs wrote in the shared directory, said
/// on the batch's stream; whether there was anything new.
async fn follow(work: &Work, entry: &Entry, task: &mut Task) -> bool {
    let mut follow = std::mem::take(&mut task.follow);
    let dir = entry.dir();
    let index = entry.index;
    let (follow, updates) = tokio::task::spawn_blocking(move || {
        let updates = follow.look(&dir, index);
        (follow, updates)
    })
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    task.follow = follow;
    let new = !updates.is_empty();
    for update in updates {
        work.send(update).await;
    }
    new
}

async fn run_slurm(opts: SlurmOptions, mut work: Work) -> Vec<BatchRun> {
    let t0 = Instant::now();
    // Slurm resolves `--output` inside `--chdir`, and the job starts in
    // the batch directory: a relative path would name another place there.
    let submitted = match absolute_dirs(&mut work) {
        Ok(()) => submit(&opts, &work).await,
        Err(e) => Err(e),
    };
    let (job_id, submission) = match submitted {
        Ok(x) => x,
        Err(e) => {
            return work
                .entries
                .iter()
                .map(|entry| {
                    BatchRun::new(
                        entry.name.clone(),
                        entry.request.agent,
                        None,
                        Some(format!("could not submit the batch to Slurm: {e}")),
                    )
                })
                .collect();
        }
    };
    // By the entry's index, which is also its task's index in the array.
    let mut tasks: BTreeMap<usize, Task> = work
        .entries
        .iter()
        .map(|e| (e.index, Task::default()))
        .collect();
    let entry_of = |index: usize| work.entries.iter().find(|e| e.index == index);
    let mut seen_cancels = 0;
    let mut settle_until: Option<Instant> = None;
    let mut failing: Option<(Instant, String)> = None;
    // Soon after a change, then less and less often, up to `poll`: a
    // short job is seen ending at once, a long batch does not load the
    // controller.
    let first = opts.poll.min(Duration::from_millis(100));
    let mut interval = first;
    loop {
        let poll = tokio::time::sleep(interval);
        interval = (interval * 2).min(opts.poll);
        tokio::select! {
            () = poll => {}
            () = work.control.cancelled_after(seen_cancels) => {
                seen_cancels = work.control.cancels();
                // Again: at once, SIGKILL; else SIGTERM to every process
                // of the jobs, which warden inside takes as a cancel.
                let signal = if seen_cancels > 1 { Some("KILL") } else { None };
                let _ = scancel(&opts, &job_id, signal).await;
                settle_until.get_or_insert(Instant::now() + opts.settle);
            }
        }
        match scontrol(&opts, &job_id).await {
            Ok(states) => {
                failing = None;
                for (index, job) in states {
                    let (Some(task), Some(entry)) = (tasks.get_mut(&index), entry_of(index)) else {
                        continue;
                    };
                    if task.done.is_some() {
                        continue;
                    }
                    if job.started && !task.announced {
                        task.announced = true;
                        work.send(Update::EntryStarted {
                            entry: index,
                            name: entry.name.clone(),
                        })
                        .await;
                    }
                    let terminal = SlurmState::of(&job).is_terminal();
                    if task.job.as_ref().is_none_or(|j| j.state != job.state) {
                        interval = first;
                    }
                    let started = job.started;
                    task.job = Some(job);
                    if terminal {
                        finish(&work, entry, task, &submission, true, t0).await;
                    } else if started {
                        follow(&work, entry, task).await;
                    }
                }
            }
            Err(Scontrol::Gone) => {
                // Finished jobs are forgotten after MinJobAge: what is
                // left is read from the shared directory.
                finish_rest(
                    &work,
                    &mut tasks,
                    (&job_id, &submission),
                    "no longer known to Slurm",
                    t0,
                )
                .await;
            }
            // A call that failed or took too long: the next poll tries
            // again, for as long as `give_up_after`.
            Err(Scontrol::Failed(e)) => {
                let since = failing.get_or_insert_with(|| (Instant::now(), String::new()));
                since.1 = e;
                if since.0.elapsed() >= opts.give_up_after {
                    let why = format!(
                        "Slurm did not answer for {}: {}",
                        humantime::format_duration(opts.give_up_after),
                        since.1
                    );
                    finish_rest(&work, &mut tasks, (&job_id, &submission), &why, t0).await;
                }
            }
        }
        if tasks.values().all(|t| t.done.is_some()) {
            break;
        }
        if settle_until.is_some_and(|u| Instant::now() >= u) {
            finish_rest(
                &work,
                &mut tasks,
                (&job_id, &submission),
                "still there after the cancel",
                t0,
            )
            .await;
            break;
        }
    }
    // In the entries' order.
    work.entries
        .iter()
        .filter_map(|e| tasks.get_mut(&e.index).and_then(|t| t.done.take()))
        .collect()
}

/// Ends every task not ended yet: from its `session.json` if there is
/// one, else with a verdict from its last state, which says `why` Slurm
/// is not waited for any longer.
async fn finish_rest(
    work: &Work,
    tasks: &mut BTreeMap<usize, Task>,
    (job_id, submission): (&str, &Path),
    why: &str,
    t0: Instant,
) {
    for (&index, task) in tasks.iter_mut() {
        let Some(entry) = work.entries.iter().find(|e| e.index == index) else {
            continue;
        };
        if task.done.is_none() {
            let job = task.job.get_or_insert_with(|| {
                JobReport::new("slurm", format!("{job_id}_{index}"), "UNKNOWN")
            });
            job.state_reason = Some(why.to_string());
            finish(work, entry, task, submission, false, t0).await;
        }
    }
}

/// The entry's line, from its `session.json` and what Slurm said; and
/// the update that says so. `final_word`: Slurm said how the job ended
/// (else it stopped answering, or forgot the job, and the report is all
/// there is).
async fn finish(
    work: &Work,
    entry: &Entry,
    task: &mut Task,
    submission: &Path,
    final_word: bool,
    t0: Instant,
) {
    // What the runs wrote that was not read yet, to the end.
    for _ in 0..LOOKS_AT_THE_END {
        if !follow(work, entry, task).await {
            break;
        }
    }
    let job = task.job.clone();
    let path = entry.dir().join("session.json");
    let request = submission
        .join("requests")
        .join(format!("{}.json", entry.index));
    let key = work.key.clone();
    let index = entry.index;
    let (report, request_refused) = tokio::task::spawn_blocking(move || {
        let report = read_session(&path, key.as_deref(), index);
        // No report: was it because the job refused its request?
        let refused = match (&report, &key) {
            (Returned::Missing, Some(k)) => k
                .read_signed(&request, Role::Request(index), MAX_SESSION_JSON)
                .err()
                .map(|e| e.to_string()),
            _ => None,
        };
        (report, refused)
    })
    .await
    .unwrap_or((Returned::Missing, None));
    let mut run = combine(entry, job.as_ref(), final_word, report, request_refused);
    if run.session.is_none() {
        run.duration_ms = t0.elapsed().as_millis() as u64;
    }
    run.job = job;
    work.send(Update::EntryFinished {
        entry: entry.index,
        run: Box::new(run.clone()),
    })
    .await;
    task.done = Some(run);
}

/// What a job left as its entry's report.
#[derive(Debug)]
enum Returned {
    /// No `session.json`.
    Missing,
    /// A `session.json` signed by warden in the job for this entry.
    Good(Box<SessionReport>),
    /// A `session.json` that could not be authenticated or read: why.
    Bad(String),
}

/// The entry `index`'s `session.json` at `path`, believed only when
/// signed with `key`.
fn read_session(path: &Path, key: Option<&BatchKey>, index: usize) -> Returned {
    let Some(key) = key else {
        return Returned::Bad("the batch has no key to authenticate its reports with".into());
    };
    let bytes = match key.read_signed(path, Role::Session(index), MAX_SESSION_JSON) {
        Ok(b) => b,
        Err(e) if e.is_missing() => return Returned::Missing,
        Err(e) => return Returned::Bad(e.to_string()),
    };
    match serde_json::from_slice(&bytes) {
        Ok(s) => Returned::Good(Box::new(s)),
        Err(e) => Returned::Bad(format!(
            "{} is not a session report this warden reads: {e}",
            path.display()
        )),
    }
}

/// The entry's line from what Slurm said of its job and the report the
/// job left. Slurm's word wins over the report: a job that never ran, or
/// that Slurm says failed, was cancelled, preempted, timed out or ran out
/// of memory, is never `succeeded` because of a file in its directory (a
/// report is written in the job, where the run's agent may reach).
fn combine(
    entry: &Entry,
    job: Option<&JobReport>,
    final_word: bool,
    report: Returned,
    request_refused: Option<String>,
) -> BatchRun {
    let new = |verdict: Option<Verdict>, error: String| {
        BatchRun::new(
            entry.name.clone(),
            entry.request.agent,
            verdict,
            Some(error),
        )
    };
    let state = job.map(SlurmState::of);
    let without_report = || match job {
        Some(job) => verdict_without_report(job),
        None => (
            Some(Verdict::InternalError),
            "Slurm never reported the job".to_string(),
        ),
    };
    // Slurm says the job never started: nothing in its directory is its.
    if final_word && job.is_some_and(|j| !j.started) {
        let (verdict, why) = without_report();
        return match report {
            Returned::Missing => new(verdict, why),
            _ => new(
                verdict,
                format!(
                    "{why}; a session.json in its directory is not believed: the job never ran"
                ),
            ),
        };
    }
    match report {
        Returned::Good(s) => {
            let mut run = BatchRun::new(entry.name.clone(), entry.request.agent, s.verdict, None);
            run.duration_ms = s.duration_ms;
            if final_word
                && s.verdict == Some(Verdict::Succeeded)
                && state != Some(SlurmState::Completed)
            {
                // The job did not end as a run that succeeded ends: Slurm's
                // verdict (cancelled, timed out, ...), and a job that
                // failed is warden's error.
                let verdict = match state {
                    Some(SlurmState::Failed) => Some(Verdict::InternalError),
                    _ => without_report().0,
                };
                let slurm = job.map_or_else(String::new, |j| {
                    format!(
                        "{}{}",
                        j.described_state(),
                        j.exit_code
                            .as_deref()
                            .map(|c| format!(", exit {c}"))
                            .unwrap_or_default()
                    )
                });
                run.verdict = verdict;
                run.error = Some(format!(
                    "Slurm says the job ended {slurm}, yet its report says succeeded: not believed, Slurm's word wins"
                ));
            } else if let Some(job) = job
                && !matches!(state, Some(SlurmState::Completed | SlurmState::Failed))
            {
                run.error = Some(format!("Slurm says {}", job.described_state()));
            }
            run.session = Some(*s);
            run
        }
        Returned::Bad(why) => {
            let (verdict, slurm) = without_report();
            // Slurm's own verdict when it has one of its own (cancelled,
            // timed out); else warden's report was needed: an error.
            let verdict = match state {
                Some(
                    SlurmState::Cancelled
                    | SlurmState::Preempted
                    | SlurmState::Timeout
                    | SlurmState::Deadline
                    | SlurmState::OutOfMemory,
                ) => verdict,
                _ => Some(Verdict::InternalError),
            };
            new(verdict, format!("{why}; not believed ({slurm})"))
        }
        Returned::Missing => {
            let (verdict, why) = without_report();
            match request_refused {
                Some(refused) => new(
                    Some(Verdict::InternalError),
                    format!("not run: {refused}; warden in the job refused it ({why})"),
                ),
                None => new(verdict, why),
            }
        }
    }
}

/// The verdict of a task that ended without warden's report, and why.
pub fn verdict_without_report(job: &JobReport) -> (Option<Verdict>, String) {
    let state = SlurmState::of(job);
    let exit = job
        .exit_code
        .as_deref()
        .map(|c| format!(", exit {c}"))
        .unwrap_or_default();
    let (verdict, why) = match state {
        SlurmState::Cancelled if !job.started => (
            Verdict::Cancelled,
            "cancelled before it started (Slurm: CANCELLED)".to_string(),
        ),
        SlurmState::Cancelled => (
            Verdict::Cancelled,
            format!("the job was cancelled (Slurm: CANCELLED{exit}) before warden wrote a report"),
        ),
        SlurmState::Preempted => (
            Verdict::Cancelled,
            format!("the job was preempted (Slurm: PREEMPTED{exit})"),
        ),
        SlurmState::Timeout | SlurmState::Deadline => (
            Verdict::TimedOut,
            format!(
                "Slurm's time limit ended the job (Slurm: {state}{exit}) before warden's own timeout"
            ),
        ),
        SlurmState::OutOfMemory => (
            Verdict::AgentFailed,
            format!("the job ran out of memory (Slurm: OUT_OF_MEMORY{exit})"),
        ),
        SlurmState::NodeFail | SlurmState::BootFail => (
            Verdict::InternalError,
            format!("the node failed (Slurm: {state}{exit}) before warden wrote the run's report"),
        ),
        other => (
            Verdict::InternalError,
            format!(
                "the job ended without warden's report (Slurm: {}{exit}); see its output in {SLURM_DIR}/out/",
                if other.as_str().is_empty() {
                    "unknown".to_string()
                } else {
                    job.described_state()
                }
            ),
        ),
    };
    (Some(verdict), why)
}

/// Slurm's minutes for `d` (rounded up; at least one).
fn minutes(d: Duration) -> u64 {
    d.as_secs().div_ceil(60).max(1)
}

/// The part of a job's time limit kept for warden to end the run and
/// write its report after its own timeout (Slurm checks its limit about
/// every 30 s, then SIGTERM, SIGKILL after KillWait).
fn margin(limit: Duration) -> Duration {
    (limit / 10)
        .clamp(Duration::from_secs(30), Duration::from_secs(120))
        .min(limit / 2)
}

/// The job's time limit, and each run's timeout set inside it.
fn time_limit(opts: &SlurmOptions, entries: &mut [Entry]) -> Option<u64> {
    match opts.time_limit {
        Some(limit) => {
            let limit = Duration::from_secs(minutes(limit) * 60);
            let inside = limit - margin(limit);
            for e in entries.iter_mut() {
                let t = &mut e.request.limits.timeout;
                if t.is_none_or(|t| t > inside) {
                    *t = Some(inside);
                }
            }
            Some(minutes(limit))
        }
        None => {
            let longest = entries
                .iter()
                .map(|e| e.request.limits.timeout)
                .try_fold(Duration::ZERO, |m, t| t.map(|t| m.max(t)))?;
            // The limit that leaves the margin after the longest timeout.
            let mut limit = Duration::from_secs(minutes(longest) * 60);
            while limit.saturating_sub(margin(limit)) < longest {
                limit += Duration::from_secs(60);
            }
            Some(minutes(limit))
        }
    }
}

/// The batch directory and each entry's, made absolute (from the current
/// directory).
fn absolute_dirs(work: &mut Work) -> Result<(), String> {
    let abs = |p: &Path| {
        std::path::absolute(p)
            .map_err(|e| format!("could not make {} an absolute path: {e}", p.display()))
    };
    work.dir = abs(&work.dir)?;
    for e in &mut work.entries {
        if let Some(d) = &e.request.dir {
            e.request.dir = Some(abs(d)?);
        }
    }
    Ok(())
}

/// Writes the requests and the job script, and submits the array job: its
/// id, and the submission's directory.
async fn submit(opts: &SlurmOptions, work: &Work) -> Result<(String, PathBuf), String> {
    opts.check()?;
    let key = work
        .key
        .clone()
        .ok_or("the batch has no key to sign its requests with")?;
    // One directory per submission (a resumed batch submits again).
    let top = work.dir.join(SLURM_DIR);
    let n = (1..)
        .find(|n| std::fs::symlink_metadata(top.join(n.to_string())).is_err())
        .unwrap_or(1);
    let dir = top.join(n.to_string());
    let mut entries = work.entries.clone();
    let limit = time_limit(opts, &mut entries);
    let warden = match &opts.warden {
        Some(w) => w.clone(),
        None => std::env::current_exe()
            .map_err(|e| format!("could not find warden's own executable: {e}"))?,
    };
    // The job reads the key from the batch's key file (the same user, the
    // same path on the node): never through sbatch's environment, which
    // slurmctld keeps on disk with the job, nor on a command line, nor in
    // the shared directory.
    let key_file = crate::batch_key::key_path(&work.batch_id)?;
    match BatchKey::load_file(&key_file) {
        Ok(k) if k.to_hex() == key.to_hex() => {}
        Ok(_) => {
            return Err(format!(
                "{} holds another key than the batch's: the jobs could not check its requests",
                key_file.display()
            ));
        }
        Err(e) => {
            return Err(format!(
                "the jobs read the batch's key from its key file: {e}"
            ));
        }
    }
    let script = job_script(&warden, &dir, &key_file);
    let written = {
        let dir = dir.clone();
        let key = key.clone();
        tokio::task::spawn_blocking(move || write_job_files(&dir, &entries, &script, &key))
            .await
            .map_err(|e| e.to_string())?
    };
    written.map_err(|e| format!("could not write {}: {e}", dir.display()))?;
    let args = sbatch_args(opts, work, &dir, limit);
    let out = call(opts, "sbatch", &args).await?;
    // `--parsable`: `ID` or `ID;CLUSTER`.
    let id = out.trim().split(';').next().unwrap_or("").to_string();
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("sbatch printed no job id: {out:?}"));
    }
    // For a resume: the jobs to wait for before anything runs again.
    let _ = std::fs::write(dir.join(JOB_FILE), format!("{id}\n"));
    Ok((id, dir))
}

fn write_job_files(
    dir: &Path,
    entries: &[Entry],
    script: &str,
    key: &BatchKey,
) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(dir.parent().unwrap_or(dir))?;
    std::fs::DirBuilder::new().mode(0o700).create(dir)?;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(dir.join("requests"))?;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(dir.join("out"))?;
    // Each request signed, its `--env NAME=VALUE` values sealed: the job
    // runs only what warden wrote; owner only, and never through a link
    // planted in its place.
    for e in entries {
        let bytes = crate::batch_key::seal_request(key, e.index, &e.request)
            .map_err(std::io::Error::other)?;
        key.write_signed(
            &dir.join("requests").join(format!("{}.json", e.index)),
            0o600,
            Role::Request(e.index),
            &bytes,
        )?;
    }
    crate::regular_file::create_new(&dir.join("job.sh"), 0o700)?.write_all(script.as_bytes())?;
    Ok(())
}

/// The file of a submission's directory that names its job.
const JOB_FILE: &str = "job";

/// `0-19`, or `1,4,7-9`: the indices as Slurm's `--array` takes them.
fn array_spec(indices: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < indices.len() {
        let start = indices[i];
        let mut end = start;
        while i + 1 < indices.len() && indices[i + 1] == end + 1 {
            i += 1;
            end = indices[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

/// Waits until no job an earlier submission of the batch in `dir` made is
/// still queued or running (their tasks write their entries' directories
/// meanwhile), so that a resume runs again only what really ended without
/// a report.
pub async fn wait_for_earlier(opts: &SlurmOptions, dir: &Path) -> Result<(), String> {
    let top = dir.join(SLURM_DIR);
    let Ok(submissions) = std::fs::read_dir(&top) else {
        return Ok(());
    };
    let mut ids = Vec::new();
    for s in submissions.flatten() {
        if let Ok(bytes) = crate::regular_file::read(&s.path().join(JOB_FILE), 64) {
            let id = String::from_utf8_lossy(&bytes).trim().to_string();
            if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) {
                ids.push(id);
            }
        }
    }
    for id in ids {
        let mut failing: Option<Instant> = None;
        loop {
            match scontrol(opts, &id).await {
                Ok(states) if states.values().all(|j| SlurmState::of(j).is_terminal()) => break,
                Ok(_) => failing = None,
                Err(Scontrol::Gone) => break,
                Err(Scontrol::Failed(e)) => {
                    let since = *failing.get_or_insert_with(Instant::now);
                    if since.elapsed() >= opts.give_up_after {
                        return Err(format!("Slurm did not answer about job {id}: {e}"));
                    }
                }
            }
            tokio::time::sleep(opts.poll).await;
        }
    }
    Ok(())
}

/// `'text'` for a POSIX shell.
fn quoted(text: &Path) -> String {
    format!("'{}'", text.to_string_lossy().replace('\'', r"'\''"))
}

fn job_script(warden: &Path, dir: &Path, key_file: &Path) -> String {
    format!(
        "#!/bin/sh\n# One entry of a warden batch: warden supervises the run inside the job.\n{KEY_FILE_ENV}={}\nexport {KEY_FILE_ENV}\nexec {} run-request {}/\"$SLURM_ARRAY_TASK_ID.json\"\n",
        quoted(key_file),
        quoted(warden),
        quoted(&dir.join("requests"))
    )
}

fn sbatch_args(opts: &SlurmOptions, work: &Work, dir: &Path, limit: Option<u64>) -> Vec<OsString> {
    let indices: Vec<usize> = work.entries.iter().map(|e| e.index).collect();
    let mut a: Vec<OsString> = vec![
        "--parsable".into(),
        format!("--array={}%{}", array_spec(&indices), work.jobs.max(1)).into(),
        format!("--job-name=warden-{}", work.batch_id).into(),
        format!("--output={}", dir.join("out/%a.out").display()).into(),
        format!("--chdir={}", work.dir.display()).into(),
        // A task that ends without a report (its node failed, say) gets
        // a verdict, and is submitted again only when asked
        // (`--resume --rerun-failed`): requeued, it would start again in
        // the directory its first attempt wrote.
        "--no-requeue".into(),
    ];
    for (flag, value) in [
        ("--partition", &opts.partition),
        ("--account", &opts.account),
        ("--qos", &opts.qos),
        ("--mem", &opts.mem_per_run),
    ] {
        if let Some(v) = value {
            a.push(format!("{flag}={v}").into());
        }
    }
    if let Some(c) = opts.cpus_per_run {
        a.push(format!("--cpus-per-task={c}").into());
    }
    if let Some(m) = limit {
        a.push(format!("--time={m}").into());
    }
    a.extend(opts.sbatch_args.iter().map(OsString::from));
    a.push(dir.join("job.sh").into());
    a
}

/// Runs a Slurm command, bounded by `call_timeout`; its stdout, or why not.
async fn call(opts: &SlurmOptions, program: &str, args: &[OsString]) -> Result<String, String> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let out = match tokio::time::timeout(opts.call_timeout, cmd.output()).await {
        Ok(Ok(out)) => out,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "`{program}` is not on PATH: install Slurm's client commands (Debian: slurm-client), or run the batch where they are"
            ));
        }
        Ok(Err(e)) => return Err(format!("could not run `{program}`: {e}")),
        Err(_) => {
            return Err(format!(
                "`{program}` did not answer within {}",
                humantime::format_duration(opts.call_timeout)
            ));
        }
    };
    if !out.status.success() {
        return Err(format!(
            "`{program}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

async fn scancel(opts: &SlurmOptions, job: &str, signal: Option<&str>) -> Result<String, String> {
    let mut args: Vec<OsString> = Vec::new();
    if let Some(s) = signal {
        args.push(format!("--signal={s}").into());
        args.push("--full".into());
    }
    args.push(job.into());
    call(opts, "scancel", &args).await
}

enum Scontrol {
    /// Slurm no longer knows the job (finished long enough ago).
    Gone,
    Failed(String),
}

/// Every task of the array job as Slurm sees it now, by index.
async fn scontrol(opts: &SlurmOptions, job: &str) -> Result<BTreeMap<usize, JobReport>, Scontrol> {
    let args: Vec<OsString> = vec!["show".into(), "job".into(), "-o".into(), job.into()];
    match call(opts, "scontrol", &args).await {
        Ok(text) => Ok(parse_scontrol(&text)),
        Err(e) if e.contains("Invalid job id") => Err(Scontrol::Gone),
        Err(e) => Err(Scontrol::Failed(e)),
    }
}

/// Parses `scontrol show job -o`: one line per job record, `Key=Value`
/// fields. A record of pending tasks names them all (`ArrayTaskId=3-9%2`).
pub fn parse_scontrol(text: &str) -> BTreeMap<usize, JobReport> {
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let fields: BTreeMap<&str, &str> = line
            .split_whitespace()
            .filter_map(|f| f.split_once('='))
            .collect();
        let (Some(array), Some(tasks), Some(state)) = (
            fields.get("ArrayJobId"),
            fields.get("ArrayTaskId"),
            fields.get("JobState"),
        ) else {
            continue;
        };
        // A node given: `BatchHost` is set when the job's script was
        // launched (a pending job cancelled has a StartTime, not a host).
        let host = |k: &str| {
            fields
                .get(k)
                .filter(|h| !h.is_empty() && **h != "(null)")
                .map(|h| (*h).to_string())
        };
        let batch_host = host("BatchHost");
        let started = batch_host.is_some();
        for index in task_indices(tasks) {
            let state = SlurmState::parse(state);
            let mut job = JobReport::new("slurm", format!("{array}_{index}"), state.as_str());
            job.exit_code = fields.get("ExitCode").map(|c| (*c).to_string());
            job.node = batch_host.clone().or_else(|| host("NodeList"));
            job.started = started;
            out.insert(index, job);
        }
    }
    out
}

/// `4`, `3-9%2`, `1,3,5-7`: the indices named.
fn task_indices(spec: &str) -> Vec<usize> {
    let spec = spec.split('%').next().unwrap_or("");
    let mut out = Vec::new();
    for part in spec.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    out.extend(a..=b.min(a + 1_000_000));
                }
            }
            None => {
                if let Ok(i) = part.parse() {
                    out.push(i);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scontrol_lines_give_every_task_pending_ones_included() {
        let text = "JobId=12 ArrayJobId=10 ArrayTaskId=2 JobName=w JobState=RUNNING Reason=None StartTime=2026-11-30T10:00:00 NodeList=vm BatchHost=vm ExitCode=0:0\n\
                    JobId=10 ArrayJobId=10 ArrayTaskId=3-5%2 JobName=w JobState=PENDING Reason=JobArrayTaskLimit StartTime=Unknown NodeList=(null) ExitCode=0:0\n\
                    JobId=11 ArrayJobId=10 ArrayTaskId=1 JobState=FAILED StartTime=2026-11-30T10:00:00 NodeList=vm BatchHost=vm ExitCode=3:0\n\
                    JobId=13 ArrayJobId=10 ArrayTaskId=6 JobState=CANCELLED StartTime=2026-11-30T10:00:01 EndTime=2026-11-30T10:00:01 NodeList= ExitCode=0:0\n";
        let m = parse_scontrol(text);
        assert_eq!(m.keys().copied().collect::<Vec<_>>(), [1, 2, 3, 4, 5, 6]);
        // Cancelled while pending: a start time, but it never ran.
        assert!(!m[&6].started);
        assert_eq!(m[&6].node, None);
        assert_eq!(m[&2].state, "RUNNING");
        assert!(m[&2].started);
        assert_eq!(m[&1].exit_code.as_deref(), Some("3:0"));
        assert_eq!(m[&4].state, "PENDING");
        assert!(!m[&4].started);
        assert_eq!(m[&4].id, "10_4");
        assert_eq!(task_indices("1,3,5-7"), [1, 3, 5, 6, 7]);
    }

    #[test]
    fn slurm_states_read_back_as_slurm_writes_them() {
        for state in SlurmState::NAMED {
            assert_eq!(SlurmState::parse(state.as_str()), state);
        }
        assert_eq!(
            SlurmState::parse("CANCELLED by 1000"),
            SlurmState::Cancelled
        );
        assert_eq!(SlurmState::parse("NODE_FAIL"), SlurmState::NodeFail);
        // A state this version does not name is kept, and ends the wait.
        let new = SlurmState::parse("SPECIAL_EXIT");
        assert_eq!(new, SlurmState::Other("SPECIAL_EXIT".into()));
        assert_eq!(new.as_str(), "SPECIAL_EXIT");
        assert!(new.is_terminal());
        assert!(!SlurmState::Pending.is_terminal());
        assert!(!SlurmState::Completing.is_terminal());
        assert!(SlurmState::Completed.is_terminal());
        assert!(SlurmState::OutOfMemory.is_terminal());
    }

    #[test]
    fn why_warden_stopped_waiting_is_apart_from_slurm_s_state() {
        let mut job = JobReport::new("slurm", "1_0", "RUNNING");
        job.started = true;
        job.state_reason = Some("no longer known to Slurm".into());
        assert_eq!(SlurmState::of(&job), SlurmState::Running);
        let (v, why) = verdict_without_report(&job);
        assert_eq!(v, Some(Verdict::InternalError));
        assert!(
            why.contains("(Slurm: RUNNING (no longer known to Slurm))"),
            "{why}"
        );
        let json = serde_json::to_value(&job).unwrap();
        assert_eq!(json["state"], "RUNNING");
        assert_eq!(json["state_reason"], "no longer known to Slurm");
    }

    #[test]
    fn every_way_a_job_ends_without_a_report_has_a_verdict() {
        let job = |state: &str, started: bool| {
            let mut j = JobReport::new("slurm", "1_0", state);
            j.started = started;
            j
        };
        for (state, started, verdict, says) in [
            ("CANCELLED", false, Verdict::Cancelled, "before it started"),
            ("CANCELLED", true, Verdict::Cancelled, "cancelled"),
            ("PREEMPTED", true, Verdict::Cancelled, "preempted"),
            ("TIMEOUT", true, Verdict::TimedOut, "time limit"),
            ("OUT_OF_MEMORY", true, Verdict::AgentFailed, "out of memory"),
            ("NODE_FAIL", true, Verdict::InternalError, "node failed"),
            (
                "COMPLETED",
                true,
                Verdict::InternalError,
                "without warden's report",
            ),
        ] {
            let (v, why) = verdict_without_report(&job(state, started));
            assert_eq!(v, Some(verdict), "{state}");
            assert!(why.contains(says), "{state}: {why}");
        }
    }

    #[test]
    fn slurm_s_word_wins_over_a_report_in_the_job_s_directory() {
        let entry = Entry {
            index: 0,
            name: "x".into(),
            request: crate::RunRequest::exec(["true"]),
        };
        let job = |state: &str, started: bool| {
            let mut j = JobReport::new("slurm", "1_0", state);
            j.started = started;
            j.exit_code = Some("2:0".into());
            j
        };
        let succeeded = || {
            Returned::Good(Box::new(
                serde_json::from_value(crate::batch_plan::tests::session_json()).unwrap(),
            ))
        };
        let verdict_of = |state: &str, started: bool, final_word: bool, r: Returned| {
            let run = combine(&entry, Some(&job(state, started)), final_word, r, None);
            (run.verdict, run.error.unwrap_or_default())
        };
        assert_eq!(
            verdict_of("COMPLETED", true, true, succeeded()).0,
            Some(Verdict::Succeeded)
        );
        let (v, e) = verdict_of("FAILED", true, true, succeeded());
        assert_eq!(v, Some(Verdict::InternalError));
        assert!(e.contains("FAILED") && e.contains("not believed"), "{e}");
        // Cancelled from outside in the instant the agent exited 0.
        let (v, e) = verdict_of("CANCELLED", true, true, succeeded());
        assert_eq!(v, Some(Verdict::Cancelled), "{e}");
        // A job that never ran has no report, whatever its directory holds.
        let (v, e) = verdict_of("CANCELLED", false, true, succeeded());
        assert_eq!(v, Some(Verdict::Cancelled));
        assert!(e.contains("never ran"), "{e}");
        let (v, e) = verdict_of("FAILED", false, true, succeeded());
        assert_eq!(v, Some(Verdict::InternalError));
        assert!(e.contains("never ran"), "{e}");
        // A report that could not be authenticated is named.
        let (v, e) = verdict_of(
            "COMPLETED",
            true,
            true,
            Returned::Bad("/d/session.json is bad".into()),
        );
        assert_eq!(v, Some(Verdict::InternalError));
        assert!(e.contains("/d/session.json is bad"), "{e}");
        // Slurm forgot the job: the signed report is all there is.
        assert_eq!(
            verdict_of(
                "RUNNING (no longer known to Slurm)",
                true,
                false,
                succeeded()
            )
            .0,
            Some(Verdict::Succeeded)
        );
    }

    #[test]
    fn the_batch_key_is_never_in_sbatch_s_arguments() {
        let (tx, _rx) = tokio::sync::mpsc::channel(1);
        let work = Work::new(
            "01B".into(),
            "/b".into(),
            1,
            Vec::new(),
            crate::batch::BatchControl::default(),
            tx,
        );
        let o = SlurmOptions {
            sbatch_args: vec!["--export".into(), "NONE".into()],
            ..SlurmOptions::default()
        };
        assert_eq!(o.check(), Ok(()));
        let args: Vec<String> = sbatch_args(&o, &work, Path::new("/b/slurm/1"), None)
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        // The user's options pass as given; nothing of the key is added.
        assert!(
            args.windows(2).any(|w| w == ["--export", "NONE"]),
            "{args:?}"
        );
        assert!(!args.iter().any(|a| a.contains("KEY")), "{args:?}");
    }

    #[test]
    fn run_timeouts_sit_inside_the_job_limit() {
        let entry = |t: Option<u64>| {
            let mut r = crate::RunRequest::exec(["true"]);
            r.limits.timeout = t.map(Duration::from_secs);
            Entry {
                index: 0,
                name: "x".into(),
                request: r,
            }
        };
        let mut opts = SlurmOptions::default();
        // From the runs: one hour leaves the margin within 62 minutes.
        let mut es = vec![entry(Some(3600)), entry(Some(60))];
        let m = time_limit(&opts, &mut es).unwrap();
        assert!(m * 60 >= 3600 + 30 && m <= 63, "{m}");
        // A run with no timeout: no limit of warden's choosing.
        assert_eq!(time_limit(&opts, &mut [entry(None)]), None);
        // A given limit: each run ends inside it, by itself.
        opts.time_limit = Some(Duration::from_secs(10 * 60));
        let mut es = vec![entry(Some(3600)), entry(None), entry(Some(60))];
        assert_eq!(time_limit(&opts, &mut es), Some(10));
        assert_eq!(es[0].request.limits.timeout, Some(Duration::from_secs(540)));
        assert_eq!(es[1].request.limits.timeout, Some(Duration::from_secs(540)));
        assert_eq!(es[2].request.limits.timeout, Some(Duration::from_secs(60)));
    }

    #[test]
    fn array_specs_name_exactly_the_indices() {
        assert_eq!(array_spec(&[0, 1, 2, 3]), "0-3");
        assert_eq!(array_spec(&[1, 4, 5, 6, 9]), "1,4-6,9");
        assert_eq!(array_spec(&[7]), "7");
    }

    #[test]
    fn options_warden_sets_itself_are_refused_by_name() {
        let mut o = SlurmOptions::default();
        assert_eq!(o.check(), Ok(()));
        o.sbatch_args = vec!["--exclude=n1".into(), "--requeue".into()];
        let e = o.check().unwrap_err();
        assert!(
            e.contains("`--requeue`") && e.contains("--rerun-failed"),
            "{e}"
        );
        o.sbatch_args = vec!["--array=0-3".into()];
        assert!(o.check().unwrap_err().contains("--array"));
        o.sbatch_args = vec!["-o".into(), "x".into()];
        assert!(o.check().unwrap_err().contains("`-o`"));
        // Attached values and abbreviations are the same options.
        for arg in ["-a0-3", "-o/x", "-Jname", "-D/tmp"] {
            o.sbatch_args = vec![arg.into()];
            let e = o.check().unwrap_err();
            assert!(e.contains(&format!("`{arg}`")), "{arg}: {e}");
        }
        for (arg, own) in [
            ("--requ", "--requeue"),
            ("--arr=0-3", "--array"),
            ("--job", "--job-name"),
        ] {
            o.sbatch_args = vec![arg.into()];
            let e = o.check().unwrap_err();
            assert!(e.contains(own), "{arg}: {e}");
        }
        // Others pass, attached values included.
        o.sbatch_args = vec![
            "-pgpu".into(),
            "--exclude=n1".into(),
            "--no-requeue".into(),
            "-N1".into(),
        ];
        assert_eq!(o.check(), Ok(()));
        o.sbatch_args.clear();
        o.poll = Duration::ZERO;
        assert!(o.check().unwrap_err().contains("poll"));
    }

    #[test]
    fn the_job_script_quotes_its_paths() {
        let s = job_script(
            Path::new("/opt/it's/warden"),
            Path::new("/shared/b 1/slurm"),
            Path::new("/home/a b/.local/state/warden/keys/01B"),
        );
        assert!(
            s.contains("WARDEN_BATCH_KEY_FILE='/home/a b/.local/state/warden/keys/01B'\nexport WARDEN_BATCH_KEY_FILE\n"),
            "{s}"
        );
        assert!(s.contains(r"exec '/opt/it'\''s/warden' run-request"), "{s}");
        assert!(
            s.contains("'/shared/b 1/slurm/requests'/\"$SLURM_ARRAY_TASK_ID.json\""),
            "{s}"
        );
    }
}
