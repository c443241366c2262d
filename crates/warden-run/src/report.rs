//! The report of one run, written as `run.json`.
//!
//! Field names are stable and snake_case; the book (`docs/src/run-directory.md`) documents each one.
//! Durations are in milliseconds, times in RFC 3339 UTC.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;
use warden_events::{AgentReport, Holder};

use crate::verdict::Verdict;

/// A process that was still alive when the agent exited.
#[non_exhaustive]
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Orphan {
    pub pid: i32,
    pub cmdline: String,
    /// Whether it held the agent's stdout or stderr pipe open.
    pub held_pipe: bool,
}

/// The drain was cut short with the output pipes still open.
#[non_exhaustive]
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Truncation {
    /// Bytes read from stdout and stderr together when reading stopped.
    pub bytes: u64,
    /// The processes that still held the pipes then.
    pub holders: Vec<Holder>,
}

/// A tool call whose declared time limit pushed the stall deadline out.
#[non_exhaustive]
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StallExtension {
    pub at_ms: u64,
    pub tool_id: String,
    pub tool: String,
    pub timeout_ms: u64,
}

/// The effective limits, as milliseconds (`null` for a disabled clock).
#[non_exhaustive]
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LimitsReport {
    pub timeout_ms: Option<u64>,
    pub stall_timeout_ms: Option<u64>,
    pub startup_timeout_ms: Option<u64>,
    pub completion_timeout_ms: Option<u64>,
    pub drain_grace_ms: u64,
    pub kill_grace_ms: u64,
    pub completion_signal: String,
    pub max_line: usize,
    /// `end` or `wait`: what a fatal error of the agent did to the run.
    pub on_fatal_error: crate::limits::OnFatalError,
}

/// The resource limits of a run (`--memory`, `--pids`, `--cpus`), where
/// each was enforced, and what the kernel did at them.
#[non_exhaustive]
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Clone, PartialEq, Serialize)]
pub struct ResourcesReport {
    /// The memory limit in bytes, for all the run's processes together,
    /// with swap off.
    pub memory_bytes: Option<u64>,
    /// The most processes (and threads) alive at once.
    pub pids: Option<u64>,
    /// The CPU quota, in CPUs.
    pub cpus: Option<f64>,
    /// Each limit in force and what enforces it.
    pub enforced: Vec<EnforcedLimit>,
    /// Processes the kernel's OOM killer killed in the cgroups of the
    /// run's memory limit, for any OOM (0 without `--memory`). In a
    /// container, read from the cgroup its engine made while it lived;
    /// `null` when it was never read (the container ended before warden
    /// found it) or, in a report written while the run goes, not yet.
    pub oom_kills: Option<u64>,
    /// Of those, the kills at the run's own memory limit; the rest were
    /// for an OOM elsewhere (a parent cgroup's limit, the machine's
    /// memory). `null` when `oom_kills` is.
    #[serde(default)]
    pub oom_kills_at_limit: Option<u64>,
    /// Forks refused because the run was at its process limit (0 without
    /// `--pids`; `null` as `oom_kills` is, in a container).
    pub pids_limit_hits: Option<u64>,
}

/// One resource limit in force.
#[non_exhaustive]
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EnforcedLimit {
    /// `memory`, `pids` or `cpu`.
    pub controller: String,
    /// `cgroup_v2`, `cgroup_v1`, `docker` or `podman`.
    pub by: String,
    /// The cgroup the limit was written to (a cgroup the run's processes
    /// are in); `null` in a container.
    pub cgroup: Option<PathBuf>,
    /// For memory: how swap was kept out (`swap.max` or `memsw`: charged
    /// to the limit; `swappiness`: set to 0, where the kernel does not
    /// account swap; `none`: no swap accounting in a v2 kernel; `engine`:
    /// `--memory-swap` equal to `--memory`).
    pub swap: Option<String>,
}

#[non_exhaustive]
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub schema_version: warden_events::SchemaVersion,
    pub run_id: String,
    pub agent: String,
    pub command: Vec<String>,
    pub cwd: PathBuf,
    pub run_dir: PathBuf,
    pub warden_version: String,
    /// `null` while the run is still going (the first `run.json`).
    pub verdict: Option<Verdict>,
    /// One sentence on why the run ended.
    pub reason: String,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub pid: Option<i32>,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub duration_ms: u64,
    pub time_to_first_activity_ms: Option<u64>,
    /// When the last activity came (the start of the final silence);
    /// output while warden ends the run does not count.
    pub last_activity_ms: Option<u64>,
    pub longest_silence_ms: u64,
    pub activity_lines: u64,
    pub event_counts: BTreeMap<String, u64>,
    pub stall_warnings: u32,
    pub stall_watchdog_armed: bool,
    pub completion_signal_seen_ms: Option<u64>,
    pub forced_completion: bool,
    /// Warden ended the run (SIGTERM or SIGKILL to its processes) before
    /// the agent exited: a forced completion, a fatal error with
    /// `on_fatal_error = "end"`, a limit, a budget, a cancel. The exit
    /// status is then the command's answer to warden's signal, not its own.
    #[serde(default)]
    pub ended_by_warden: bool,
    /// With a forced completion: what was still running.
    pub hanging: Vec<Holder>,
    pub output_truncated: Option<Truncation>,
    pub orphans: Vec<Orphan>,
    pub orphans_killed: u32,
    pub containment: Option<String>,
    /// Where the agent ran: `host`, `bwrap`, `docker` or `podman`.
    pub sandbox: String,
    /// What the agent's output said: its version, model, session,
    /// turns, tool calls, tokens, cost, retries, last answer and error
    /// (written as fields of the report itself).
    #[serde(flatten)]
    pub reported: AgentReport,
    /// When the agent's terminal event came.
    pub terminal_event_ms: Option<u64>,
    /// Tool calls that declared a time limit longer than the stall timeout.
    pub stall_extensions: Vec<StallExtension>,
    /// The commit HEAD pointed at when the run started, in a git work tree.
    pub base_commit: Option<String>,
    /// The branch HEAD was on when the run ended.
    pub branch: Option<String>,
    /// Commits made during the run (base..HEAD), oldest first, collected
    /// on every path: success, failure, stall, forced completion, cancel.
    /// `null` when they are unknown: git could not say (it failed or was
    /// killed at its time limit; `error` says why). Empty outside git.
    #[serde(deserialize_with = "required_commits")]
    pub commits: Option<Vec<Commit>>,
    /// The structured output (`--output-tag`), when one was asked for and
    /// found: JSON with `--output-schema`, else the text.
    pub output: Option<serde_json::Value>,
    /// Why the structured output was refused (missing, not JSON, not
    /// valid against the schema): the run then failed, whatever the agent
    /// said. A session resumes such a run with a correction.
    pub output_error: Option<String>,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    /// Every budget the run enforced (its own, its session's, its
    /// batch's): the limit, what runs before it spent against a shared
    /// one, and what was reached by the end of this run.
    #[serde(default)]
    pub budgets: Vec<crate::budget::BudgetLine>,
    /// The budget whose limit was passed (verdict `budget_exceeded`), with
    /// what was reached by the end of the run; `null` when none was.
    pub budget_exceeded: Option<crate::budget::BudgetLine>,
    pub limits: LimitsReport,
    /// Events left out of the live feed (terminal, `--json`) because its
    /// reader fell behind: line events at once, others once a backlog is
    /// full (never the run's start, exit, ending, end or result); the logs
    /// and `events.jsonl` have them all.
    pub live_events_dropped: u64,
    /// warden's own peak resident memory, KiB.
    pub warden_peak_rss_kib: Option<u64>,
    /// CPU time warden's process has used so far (all its runs), ms.
    pub warden_cpu_ms: Option<u64>,
    /// What went wrong inside warden or at spawn, if anything (every
    /// error, the first one first).
    pub error: Option<String>,
    /// The first failure to keep the run's output (a write to a log or to
    /// `run.json` that failed: a full disk, say); `null` when all of it
    /// was kept. Then warden exits with [`OUTPUT_LOST_EXIT`] whatever the
    /// verdict, which is still the agent's.
    pub output_lost: Option<String>,
    /// At the end of the run: the byte count and SHA-256 of what warden
    /// wrote to each log (`stdout.log`, `stderr.log`, `events.jsonl`), for
    /// `warden report` to check that none was changed since; `null` while
    /// the run is going.
    pub logs: Option<BTreeMap<String, LogDigest>>,
    /// The resource limits (`--memory`, `--pids`, `--cpus`) and what
    /// happened at them; `null` when none was asked for.
    #[serde(default)]
    pub resources: Option<ResourcesReport>,
    /// The kernel's OOM killer killed a process in the cgroup of the
    /// run's memory limit (`--memory`): at that limit, or for an OOM
    /// elsewhere (`resources.oom_kills_at_limit` tells which). `None`
    /// when it cannot be known: a container's cgroups never read (it
    /// ended before warden found them).
    #[serde(default)]
    pub oom_killed: Option<bool>,
    /// A fork was refused because the run was at its process limit
    /// (`--pids`); `None` when that cannot be known, as for `oom_killed`.
    #[serde(default)]
    pub pids_limit_hit: Option<bool>,
    /// What the agent's set-up refers to that does not reach it, one line
    /// each, naming the variable first: a `--env NAME` warden's
    /// environment lacks; in a sandbox, a provider variable of a switch
    /// that is on (`AWS_*` with `CLAUDE_CODE_USE_BEDROCK`) or one its
    /// settings files name, left out; a cloud credential passed only
    /// with `--env` (OpenCode, pi); a credentials file that is missing.
    #[serde(default)]
    pub env_dropped: Vec<String>,
    /// The run's span when OpenTelemetry export is on (`--otel`): its
    /// trace and span ids (the agent got them as `TRACEPARENT`), and how
    /// many of its spans were handed to the exporter or dropped; `null`
    /// when export is off.
    #[serde(default)]
    pub otel: Option<OtelReport>,
    /// Whether this report reached `run.json` (not part of the file).
    #[serde(skip)]
    pub written: bool,
}

/// The model a command line names with `--model M`, `--model=M` or
/// `-m M` (the last one, as the CLIs read it), for agents that do not say
/// in their output which model they use.
pub fn model_in_command(command: &[String]) -> Option<String> {
    let mut found = None;
    let mut args = command.iter().skip(1);
    while let Some(a) = args.next() {
        if a == "--" {
            break;
        }
        if a == "--model" || a == "-m" {
            found = args.next().cloned();
        } else if let Some(m) = a.strip_prefix("--model=") {
            found = Some(m.to_string());
        }
    }
    found.filter(|m| !m.is_empty())
}

/// warden's exit code when it could not keep a run's output.
pub const OUTPUT_LOST_EXIT: u8 = 74;

impl Report {
    /// The exit code of `warden run` for this report: the verdict's, or
    /// [`OUTPUT_LOST_EXIT`] when output was lost (a record with a hole in
    /// it must not pass for a complete one), or 70 with no verdict.
    pub fn warden_exit_code(&self) -> u8 {
        if self.output_lost.is_some() {
            return OUTPUT_LOST_EXIT;
        }
        self.verdict
            .map_or(70, |v| u8::try_from(v.exit_code()).unwrap_or(70))
    }

    /// The exit code with `--preserve-status` (as `timeout(1)`): when the
    /// verdict is `succeeded` or `agent_failed` and the command ended by
    /// itself, the command's own (128 + the signal that killed it);
    /// otherwise, and when output was lost, [`Self::warden_exit_code`].
    pub fn exit_code_preserving_status(&self) -> u8 {
        preserved_status(
            self.verdict,
            self.exit_code,
            self.signal,
            self.ended_by_warden,
            self.output_lost.is_some(),
        )
        .unwrap_or_else(|| self.warden_exit_code())
    }
}

/// The command's own exit status, for `--preserve-status`: only when the
/// verdict is the command's to decide (`succeeded`, `agent_failed`), the
/// command ended by itself and the record is whole. A signal gives 128 +
/// its number, as a shell does. When warden ended the run (a forced
/// completion keeps `succeeded`, a fatal error gives `agent_failed`) the
/// status is warden's SIGTERM or SIGKILL, or the command's answer to it:
/// nothing the command decided, so warden's code applies.
pub(crate) fn preserved_status(
    verdict: Option<Verdict>,
    exit_code: Option<i32>,
    signal: Option<i32>,
    ended_by_warden: bool,
    output_lost: bool,
) -> Option<u8> {
    if output_lost
        || ended_by_warden
        || !matches!(verdict, Some(Verdict::Succeeded | Verdict::AgentFailed))
    {
        return None;
    }
    match (exit_code, signal) {
        (Some(code), _) => u8::try_from(code).ok(),
        (None, Some(sig)) => u8::try_from(128 + sig).ok(),
        (None, None) => None,
    }
}

// Beside the report rather than in `budget`, which the report's budget
// lines come from.
impl crate::budget::Spent {
    /// What a run's report says it spent.
    pub fn of_report(r: &Report) -> Self {
        Self::new(
            r.reported.cost_usd,
            r.reported.tokens.spent(),
            u64::from(r.reported.turns),
        )
    }
}

/// What warden wrote to one log.
#[derive(schemars::JsonSchema, Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct LogDigest {
    pub bytes: u64,
    /// BLAKE3 of the bytes, lowercase hex: what warden records; `null`
    /// only if the log's hashing failed (then the log cannot be checked).
    #[serde(default)]
    pub blake3: Option<String>,
    /// SHA-256 of the bytes, lowercase hex: what earlier versions of
    /// warden recorded instead of `blake3`; checked when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// A commit made during a run.
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Commit {
    pub sha: String,
    pub subject: String,
    pub author: String,
    pub files_changed: u32,
}

/// Reads a `commits` field that must be there, as a list or `null`
/// (unknown): a report that lost the field is not taken for one whose
/// commits are unknown.
pub(crate) fn required_commits<'de, D>(d: D) -> Result<Option<Vec<Commit>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    <Option<Vec<Commit>> as serde::Deserialize>::deserialize(d)
}

/// What a report says of its span: in `run.json`, `session.json` and
/// `batch.json` as `otel` when telemetry is on.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct OtelReport {
    /// The trace, as 32 lower-case hex digits.
    pub trace_id: String,
    /// This report's own span (the run's, the session's, the batch's).
    pub span_id: String,
    pub parent_span_id: Option<String>,
    /// Spans handed to the exporter for this report's span and its
    /// children (tool calls, model requests; a session's iterations).
    pub spans: u64,
    /// Spans of those that were dropped because the exporter's queue was
    /// full (the collector slow or down).
    pub spans_dropped: u64,
}

/// A finished report with every field at its zero value (a claude run of
/// id `01RUN` in `/runs/01RUN`), for the unit tests of what reads reports.
#[cfg(test)]
pub(crate) fn sample() -> Report {
    const REPORT: &str = r#"{
        "schema_version": 1, "run_id": "01RUN", "agent": "claude", "command": [],
        "cwd": "/", "run_dir": "/runs/01RUN", "warden_version": "0",
        "verdict": null, "reason": "", "exit_code": null, "signal": null,
        "pid": null, "started_at": "2026-01-01T00:00:00.000Z", "ended_at": null,
        "duration_ms": 0,
        "time_to_first_activity_ms": null, "last_activity_ms": null,
        "longest_silence_ms": 0, "activity_lines": 0, "event_counts": {},
        "stall_warnings": 0, "stall_watchdog_armed": false,
        "completion_signal_seen_ms": null, "forced_completion": false,
        "hanging": [], "output_truncated": null, "orphans": [],
        "orphans_killed": 0, "containment": null, "sandbox": "host",
        "agent_version": null, "model": null, "session_id": null, "turns": 0,
        "tool_calls": 0,
        "tokens": {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0, "reasoning": 0},
        "cost_usd": null, "retries": 0, "final_text": null, "error_message": null,
        "error_class": null, "terminal_event_ms": null, "stall_extensions": [],
        "base_commit": null, "branch": null, "commits": [], "output": null,
        "output_error": null, "stdout_bytes": 0, "stderr_bytes": 0,
        "limits": {"timeout_ms": null, "stall_timeout_ms": null,
            "startup_timeout_ms": null, "completion_timeout_ms": null,
            "drain_grace_ms": 0, "kill_grace_ms": 0, "completion_signal": "",
            "max_line": 0, "on_fatal_error": "end"},
        "live_events_dropped": 0, "warden_peak_rss_kib": null,
        "warden_cpu_ms": null, "error": null, "output_lost": null, "logs": null
    }"#;
    serde_json::from_str(REPORT).expect("a report")
}

#[cfg(test)]
mod tests {
    use super::model_in_command;

    fn cmd(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_model_comes_from_the_command_line() {
        let m = |a: &[&str]| model_in_command(&cmd(a));
        assert_eq!(
            m(&["opencode", "run", "--model", "fake/m1"]).as_deref(),
            Some("fake/m1")
        );
        assert_eq!(m(&["gemini", "-m", "g-2"]).as_deref(), Some("g-2"));
        assert_eq!(m(&["x", "--model=a", "--model", "b"]).as_deref(), Some("b"));
        assert_eq!(m(&["x", "--model"]), None);
        assert_eq!(m(&["x", "--model="]), None);
        assert_eq!(m(&["--model", "the-program-is-not-an-option"]), None);
        assert_eq!(m(&["x", "--", "--model", "after-the-end"]), None);
    }
}
