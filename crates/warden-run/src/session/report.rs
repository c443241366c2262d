//! What a session writes: `session.json` (its runs, its totals, why it
//! stopped), signed for a batch's entry, and the signature of each run's
//! `run.json` beside it.

use std::path::PathBuf;

use serde::Serialize;
use warden_events::Tokens;

use crate::Verdict;
use crate::batch_key::{ReportSigner, Role};
use crate::git::{self, Commit};
use crate::held_dir::HeldDir;
use crate::retry::RetryOn;

/// One run of the session, as `session.json` lists it.
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Clone, Serialize)]
pub struct SessionRun {
    pub iteration: u32,
    pub output_retry: bool,
    /// Which attempt at this run it was: 1, then one more for each retry
    /// of a transient failure (`--retries`). Defaults (like every field
    /// added since) so that a `session.json` of an older warden still
    /// reads: a resumed batch takes an entry whose file does not read for
    /// one that never ended, and runs it (and pays for it) again.
    #[serde(default = "first_attempt")]
    pub attempt: u32,
    /// How many attempts this run was allowed: 1 and one for each retry
    /// (`--retries`); 0 in a `session.json` of a warden before this field
    /// (not known).
    #[serde(default)]
    pub attempts: u32,
    /// Whether this attempt resumed the agent's session of the attempt
    /// before (else it started afresh).
    #[serde(default)]
    pub resumed: bool,
    /// The transient failure this run ended by, when it was tried again.
    #[serde(default)]
    pub retried_because: Option<RetryOn>,
    /// How long warden waited before the next attempt, ms.
    #[serde(default)]
    pub retry_delay_ms: Option<u64>,
    pub run_id: String,
    pub run_dir: PathBuf,
    pub verdict: Option<Verdict>,
    pub reason: String,
    pub duration_ms: u64,
    pub completion_signal_seen: bool,
    pub tokens: Tokens,
    pub cost_usd: Option<f64>,
    #[serde(default)]
    pub turns: u32,
    /// The run's commits; `null` when they are unknown (see `run.json`).
    #[serde(deserialize_with = "git::required_commits")]
    pub commits: Option<Vec<Commit>>,
    /// The command's own exit code and the signal that killed it, as the
    /// run's `run.json` has them (for `--preserve-status`).
    #[serde(default)]
    pub exit_code: Option<i32>,
    #[serde(default)]
    pub signal: Option<i32>,
    /// Warden ended the run before the command exited (see
    /// `Report::ended_by_warden`): its status is then not the command's own.
    #[serde(default)]
    pub ended_by_warden: bool,
}

/// A run written before warden retried runs was its step's only attempt.
fn first_attempt() -> u32 {
    1
}

#[non_exhaustive]
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Clone, Serialize)]
pub struct WorktreeReport {
    pub path: PathBuf,
    pub branch: String,
    pub base: Option<String>,
    /// Removed at the end (clean and not kept) or still there.
    pub removed: bool,
    pub dirty: bool,
    /// A repository of the session's own (a sandboxed session), whose
    /// branch was fetched into the repository at the end, rather than a
    /// worktree of it.
    #[serde(default)]
    pub own_repository: bool,
}

/// What a command run around the agent's runs is for.
#[non_exhaustive]
#[derive(
    serde::Deserialize, schemars::JsonSchema, Debug, Clone, Copy, PartialEq, Eq, Serialize,
)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// `--check`: verifies an iteration's work (or, with
    /// `--check-first`, the work before any).
    Check,
    /// `--host-setup`: on the host, before anything runs in the sandbox.
    HostSetup,
    /// `--setup`: in the sandbox, before the first iteration.
    Setup,
    /// A `{{$ CMD}}` of the prompt, before its iteration's agent.
    PromptCommand,
    /// `--on-success`: after a session that succeeded.
    OnSuccess,
    /// `--finally`: at the end, whatever the verdict.
    Finally,
}

impl StepKind {
    /// The name in `session.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            StepKind::Check => "check",
            StepKind::HostSetup => "host_setup",
            StepKind::Setup => "setup",
            StepKind::PromptCommand => "prompt_command",
            StepKind::OnSuccess => "on_success",
            StepKind::Finally => "finally",
        }
    }

    /// Its flag, as people know it (`--check`, `--host-setup`).
    pub fn flag(self) -> &'static str {
        match self {
            StepKind::Check => "--check",
            StepKind::HostSetup => "--host-setup",
            StepKind::Setup => "--setup",
            StepKind::PromptCommand => "{{$ CMD}}",
            StepKind::OnSuccess => "--on-success",
            StepKind::Finally => "--finally",
        }
    }
}

impl std::fmt::Display for StepKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One check, hook or prompt command of the session: a run of `sh -c
/// COMMAND` with its own directory (`stdout.log`, `stderr.log`,
/// `run.json`), clocks and report.
#[non_exhaustive]
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Clone, Serialize)]
pub struct StepReport {
    pub kind: StepKind,
    /// The iteration it belongs to: a check's is the iteration it
    /// checked (0 for `--check-first`), a prompt command's the iteration
    /// whose prompt it filled; `null` for the hooks.
    pub iteration: Option<u32>,
    pub command: String,
    /// Exit 0 (verdict `succeeded`).
    pub passed: bool,
    /// Its run's verdict: `timed_out` or `stalled` when its own clock
    /// ended it (the agent's runs are not blamed for it).
    pub verdict: Option<Verdict>,
    pub reason: String,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub duration_ms: u64,
    pub run_id: String,
    /// Its run directory: its output is in `stdout.log` and
    /// `stderr.log` there.
    pub run_dir: PathBuf,
}

impl StepReport {
    /// How it ended, said for people: "passed", "exited with status 1",
    /// "timed out: its own clock (--check-timeout) ran out after 10m".
    pub fn how(&self) -> String {
        let clock = match self.kind {
            StepKind::Check => "--check-timeout",
            StepKind::PromptCommand => "--prompt-command-timeout",
            _ => "--hook-timeout",
        };
        let after = humantime::format_duration(std::time::Duration::from_millis(
            self.duration_ms - self.duration_ms % 100,
        ));
        match (self.verdict, self.exit_code, self.signal) {
            (Some(Verdict::Succeeded), _, _) => "passed".into(),
            (Some(Verdict::TimedOut), _, _) => {
                format!("timed out: its own clock ({clock}) ran out after {after}")
            }
            (Some(Verdict::Stalled), _, _) => match self.kind {
                StepKind::Check => format!(
                    "stalled: it printed nothing for its stall clock (--check-stall-timeout), after {after}"
                ),
                _ => format!("stalled: it printed nothing for {clock}, after {after}"),
            },
            (Some(Verdict::AgentFailed), Some(code), _) => format!("exited with status {code}"),
            (Some(Verdict::AgentFailed), None, Some(sig)) => format!("was killed by signal {sig}"),
            _ => self.reason.clone(),
        }
    }
}

/// Why a session stopped.
#[non_exhaustive]
#[derive(
    serde::Deserialize, schemars::JsonSchema, Debug, Clone, Copy, PartialEq, Eq, Serialize,
)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The agent printed the completion signal.
    CompletionSignal,
    /// The check (`--check`) passed.
    CheckPassed,
    /// Every iteration ran.
    IterationsExhausted,
    /// A run did not succeed (and no output retry was left).
    IterationFailed,
    Cancelled,
    /// A run could not be set up (its spec, its directory, its sandbox).
    SetupFailed,
    /// A budget of the session or its batch was exceeded by a run, or
    /// nothing was left of it for another run.
    BudgetExceeded,
}

impl StopReason {
    /// The name in `session.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::CompletionSignal => "completion_signal",
            StopReason::CheckPassed => "check_passed",
            StopReason::IterationsExhausted => "iterations_exhausted",
            StopReason::IterationFailed => "iteration_failed",
            StopReason::Cancelled => "cancelled",
            StopReason::SetupFailed => "setup_failed",
            StopReason::BudgetExceeded => "budget_exceeded",
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `session.json`.
#[non_exhaustive]
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Clone, Serialize)]
pub struct SessionReport {
    pub schema_version: warden_events::SchemaVersion,
    pub session_id: String,
    pub name: String,
    pub session_dir: PathBuf,
    pub workdir: PathBuf,
    pub worktree: Option<WorktreeReport>,
    /// The branch the session's commits are on: its worktree's branch,
    /// else the branch HEAD was on when its last run ended (`branch` of
    /// that run's `run.json`); `null` on a detached HEAD or outside a
    /// repository.
    #[serde(default)]
    pub branch: Option<String>,
    pub started_at: String,
    pub duration_ms: u64,
    pub iterations_requested: u32,
    pub iterations_run: u32,
    pub stopped_because: StopReason,
    /// The verdict of the session: its last run's.
    pub verdict: Option<Verdict>,
    pub runs: Vec<SessionRun>,
    pub tokens: Tokens,
    pub cost_usd: Option<f64>,
    /// Model calls of every run.
    #[serde(default)]
    pub turns: u64,
    /// The session's budget (and its batch's), with what was reached by
    /// every run of the session (for the batch's: and by the entries
    /// before it).
    #[serde(default)]
    pub budgets: Vec<crate::budget::BudgetLine>,
    /// The budget that stopped the session: exceeded by its last run, or
    /// with nothing left for another (verdict `budget_exceeded`).
    #[serde(default)]
    pub budget_exceeded: Option<crate::budget::BudgetLine>,
    /// The session's commits, from its base; `null` when they are unknown
    /// (git failed or was killed at its time limit; `error` says why).
    #[serde(deserialize_with = "git::required_commits")]
    pub commits: Option<Vec<Commit>>,
    /// The session's span when OpenTelemetry export is on (see
    /// `run.json`'s `otel`): its spans are the session's and its
    /// iterations'.
    #[serde(default)]
    pub otel: Option<crate::telemetry::OtelReport>,
    pub output: Option<serde_json::Value>,
    pub error: Option<String>,
    /// The first failure to keep output: a run's (`Report::output_lost`)
    /// or a `session.json` that could not be written.
    pub output_lost: Option<String>,
    /// Each check, in order (`--check`).
    #[serde(default)]
    pub checks: Vec<StepReport>,
    /// Each hook and prompt command, in order.
    #[serde(default)]
    pub hooks: Vec<StepReport>,
    /// `--merge`: the branch the session's branch was merged into, once
    /// it was.
    #[serde(default)]
    pub merged_into: Option<String>,
    /// `--merge`: the commit that branch points at after the merge (the
    /// session's last commit for a fast-forward, else the merge commit).
    #[serde(default)]
    pub merge_commit: Option<String>,
    /// `--merge`: the files in conflict (verdict `merge_conflict`); both
    /// branches are as they were.
    #[serde(default)]
    pub merge_conflicts: Vec<String>,
    /// Whether the last `session.json` was written (not part of the file).
    #[serde(skip)]
    pub written: bool,
}

// Beside the session's report rather than in `budget`, which stands
// below every session.
impl crate::budget::Spent {
    /// What a session's runs spent, as its report sums them.
    pub fn of_session(s: &SessionReport) -> Self {
        Self::new(s.cost_usd, s.tokens.spent(), s.turns)
    }
}

impl SessionReport {
    /// Adds `e` to `error`, after what is there.
    pub(crate) fn note_error(&mut self, e: String) {
        self.error = Some(match self.error.take() {
            Some(prev) => format!("{prev}; {e}"),
            None => e,
        });
    }

    /// The exit code of a session: its verdict's, or
    /// [`crate::report::OUTPUT_LOST_EXIT`] when output was lost, or 2
    /// when no run started.
    pub fn warden_exit_code(&self) -> u8 {
        if self.output_lost.is_some() {
            return crate::report::OUTPUT_LOST_EXIT;
        }
        self.verdict
            .map_or(2, |v| u8::try_from(v.exit_code()).unwrap_or(70))
    }

    /// The exit code with `--preserve-status`: the last run's command's
    /// own when the session's verdict is `succeeded` or `agent_failed`
    /// (see [`crate::report::Report::exit_code_preserving_status`]);
    /// otherwise [`Self::warden_exit_code`].
    pub fn exit_code_preserving_status(&self) -> u8 {
        let last = self.runs.last();
        crate::report::preserved_status(
            self.verdict,
            last.and_then(|r| r.exit_code),
            last.and_then(|r| r.signal),
            last.is_some_and(|r| r.ended_by_warden),
            self.output_lost.is_some(),
        )
        .unwrap_or_else(|| self.warden_exit_code())
    }
}

/// Signs the final `run.json` of a batch entry's run, as the run wrote
/// it (the same bytes, from the same report): `run.json.mac`, beside it.
/// A report that could not be signed is counted, when read back, as one
/// that was not (see `batch_plan::attempts_spent`).
pub(super) fn sign_run_report(signer: &ReportSigner, run: &crate::Report) {
    use std::io::Write;
    let Some(name) = run.run_dir.file_name().and_then(|n| n.to_str()) else {
        return;
    };
    let Ok(mut bytes) = serde_json::to_vec_pretty(run) else {
        return;
    };
    bytes.push(b'\n');
    let mac = signer.key.sign(Role::Run(signer.index, name), &bytes);
    // Through the run directory reached without following a link on the
    // way (as every write of warden's): a directory swapped for a link
    // must not take the sidecar elsewhere.
    let Ok(Some(dir)) = HeldDir::open_existing(&run.run_dir) else {
        return;
    };
    let _ = dir
        .create_file("run.json.mac")
        .and_then(|mut f| f.write_all(mac.as_bytes()));
}

/// Writes `session.json` atomically through the session directory's
/// handle; a failure is kept in the report (after any error before it).
/// A batch's entry signs it too (`session.json.mac`).
pub(super) fn write_json(dir: &HeldDir, report: &mut SessionReport, signer: Option<&ReportSigner>) {
    let written = serde_json::to_vec_pretty(&*report)
        .map_err(std::io::Error::from)
        .and_then(|mut bytes| {
            bytes.push(b'\n');
            dir.write_atomic("session.json", &bytes)?;
            match signer {
                Some(s) => dir.write_atomic(
                    "session.json.mac",
                    s.key.sign(Role::Session(s.index), &bytes).as_bytes(),
                ),
                None => Ok(()),
            }
        });
    report.written = written.is_ok();
    if let Err(e) = written {
        let e = format!("could not write session.json: {e}");
        report.error = Some(match report.error.take() {
            Some(first) if !first.contains(&e) => format!("{first}; {e}"),
            Some(first) => first,
            None => e.clone(),
        });
        report.output_lost.get_or_insert(e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_says_how_it_ended_naming_its_own_clock() {
        let step = |kind, verdict, exit_code| StepReport {
            kind,
            iteration: Some(1),
            command: "npm test".into(),
            passed: verdict == Some(Verdict::Succeeded),
            verdict,
            reason: "the run clock of 300ms ran out".into(),
            exit_code,
            signal: None,
            duration_ms: 312,
            run_id: "r".into(),
            run_dir: "/s/iteration-1-check".into(),
        };
        let how = |kind, verdict, code| step(kind, Some(verdict), code).how();
        assert_eq!(how(StepKind::Check, Verdict::Succeeded, Some(0)), "passed");
        assert_eq!(
            how(StepKind::Check, Verdict::AgentFailed, Some(2)),
            "exited with status 2"
        );
        assert_eq!(
            how(StepKind::Check, Verdict::TimedOut, None),
            "timed out: its own clock (--check-timeout) ran out after 300ms"
        );
        assert_eq!(
            how(StepKind::Setup, Verdict::TimedOut, None),
            "timed out: its own clock (--hook-timeout) ran out after 300ms"
        );
        assert!(
            how(StepKind::Check, Verdict::Stalled, None).contains("--check-stall-timeout"),
            "a stalled check names its stall clock"
        );
    }
}
