//! Step outputs for GitHub Actions (`$GITHUB_OUTPUT`): what a run, a
//! session or a batch ended with, as `name=value` lines a workflow reads
//! as `steps.<id>.outputs.<name>`.
//!
//! The values come from reports, some of them from the agent (a branch
//! name, a path): a value with a line break is written in the heredoc
//! form (`name<<DELIM`, the value, `DELIM`) with a delimiter that does not
//! occur in it, so no value can end its own entry and add another key.

use std::io;
use std::path::{Path, PathBuf};

use crate::Verdict;
use crate::batch_report::BatchReport;
use crate::report::Report;
use crate::session::SessionReport;

/// The name of the file in a run's (or session's) directory that holds
/// the agent's final text, for the `final_text_file` output.
pub const FINAL_TEXT_FILE: &str = "final_text.txt";

/// Outputs in the order they are written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outputs(pub Vec<(&'static str, String)>);

fn path_text(p: Option<&Path>) -> String {
    p.map(|p| p.display().to_string()).unwrap_or_default()
}

/// How many commits were made; empty when they are unknown.
fn count(commits: Option<&[crate::git::Commit]>) -> String {
    commits.map(|c| c.len().to_string()).unwrap_or_default()
}

/// A token count; empty when it is not known.
fn count_text(c: Option<u64>) -> String {
    c.map(|c| c.to_string()).unwrap_or_default()
}

fn cost_text(c: Option<f64>) -> String {
    c.map(|c| c.to_string()).unwrap_or_default()
}

/// The session's last check: `passed` or `failed` (its own verdict, in
/// `session.json`, may say `timed_out` or `stalled`); empty when no check
/// ran.
fn check_text(s: &SessionReport) -> &'static str {
    match s.checks.last() {
        Some(c) if c.passed => "passed",
        Some(_) => "failed",
        // A check that could not even start has no line of its own.
        None if s.verdict == Some(Verdict::CheckFailed) => "failed",
        None => "",
    }
}

impl Outputs {
    /// A single run's outputs. `final_text_file`: where its final text
    /// was written (see [`write_final_text`]), if it had one.
    pub fn for_run(r: &Report, exit_code: u8, final_text_file: Option<&Path>) -> Self {
        Self(vec![
            ("verdict", r.verdict.map_or("", |v| v.as_str()).to_string()),
            ("exit_code", exit_code.to_string()),
            ("run_dir", r.run_dir.display().to_string()),
            // The branch its commits are on, as `run.json` says.
            ("branch", r.branch.clone().unwrap_or_default()),
            ("commits", count(r.commits.as_deref())),
            ("cost_usd", cost_text(r.reported.cost_usd)),
            ("tokens", count_text(r.reported.tokens.total())),
            ("final_text_file", path_text(final_text_file)),
            // A single run has no check and merges nothing.
            ("check", String::new()),
            ("merged_into", String::new()),
            ("merge_commit", String::new()),
        ])
    }

    /// A session's outputs: `run_dir` is the session's directory, `branch`
    /// the branch its commits are on (`session.json`'s `branch`).
    pub fn for_session(s: &SessionReport, exit_code: u8, final_text_file: Option<&Path>) -> Self {
        Self(vec![
            ("verdict", s.verdict.map_or("", |v| v.as_str()).to_string()),
            ("exit_code", exit_code.to_string()),
            ("run_dir", s.session_dir.display().to_string()),
            ("branch", s.branch.clone().unwrap_or_default()),
            ("commits", count(s.commits.as_deref())),
            ("cost_usd", cost_text(s.cost_usd)),
            ("tokens", count_text(s.tokens.total())),
            ("final_text_file", path_text(final_text_file)),
            ("check", check_text(s).to_string()),
            ("merged_into", s.merged_into.clone().unwrap_or_default()),
            ("merge_commit", s.merge_commit.clone().unwrap_or_default()),
        ])
    }

    /// A batch's outputs: where it is, its exit code, and how many entries
    /// ended with each verdict (every verdict has its key, 0 when none),
    /// `failed` (every entry that neither succeeded nor was cancelled, as
    /// `batch.json` counts them) and `never_ran`. `batch_json`: where
    /// `batch.json` was written, `None` when it could not be.
    pub fn for_batch(
        b: &BatchReport,
        batch_dir: &Path,
        batch_json: Option<&Path>,
        exit_code: u8,
    ) -> Self {
        let mut out = vec![
            ("batch_dir", batch_dir.display().to_string()),
            ("batch_json", path_text(batch_json)),
            ("exit_code", exit_code.to_string()),
        ];
        for v in ALL_VERDICTS {
            let n = b.runs.iter().filter(|r| r.verdict == Some(v)).count();
            out.push((v.as_str(), n.to_string()));
        }
        out.push(("failed", b.failed.to_string()));
        out.push(("never_ran", b.never_ran.len().to_string()));
        Self(out)
    }

    /// The text to append to `$GITHUB_OUTPUT`, with random delimiters.
    pub fn render(&self) -> String {
        self.render_with(crate::held_dir::random_u64)
    }

    /// [`Outputs::render`] with the delimiters' randomness given (pure).
    pub fn render_with(&self, mut random: impl FnMut() -> u64) -> String {
        let mut out = String::new();
        for (name, value) in &self.0 {
            // The runner splits the file at `\n` (and takes a `\r` before
            // it as part of the line ending): either in a value needs the
            // heredoc form.
            if value.contains(['\n', '\r']) {
                let delim = loop {
                    let d = format!("ghadelimiter_{:016x}", random());
                    if !value.contains(&d) {
                        break d;
                    }
                };
                out.push_str(&format!("{name}<<{delim}\n{value}\n{delim}\n"));
            } else {
                out.push_str(&format!("{name}={value}\n"));
            }
        }
        out
    }
}

/// Every verdict, for the batch's counts; the match makes a new verdict
/// a compile error here until it is listed.
const ALL_VERDICTS: [Verdict; 13] = [
    Verdict::Succeeded,
    Verdict::AgentFailed,
    Verdict::Stalled,
    Verdict::StartupTimeout,
    Verdict::TimedOut,
    Verdict::Cancelled,
    Verdict::SpawnFailed,
    Verdict::InternalError,
    Verdict::BudgetExceeded,
    Verdict::CheckFailed,
    Verdict::SetupFailed,
    Verdict::HookFailed,
    Verdict::MergeConflict,
];

#[allow(dead_code)]
fn every_verdict_is_listed(v: Verdict) -> usize {
    match v {
        Verdict::Succeeded
        | Verdict::AgentFailed
        | Verdict::Stalled
        | Verdict::StartupTimeout
        | Verdict::TimedOut
        | Verdict::Cancelled
        | Verdict::SpawnFailed
        | Verdict::InternalError
        | Verdict::BudgetExceeded
        | Verdict::CheckFailed
        | Verdict::SetupFailed
        | Verdict::HookFailed
        | Verdict::MergeConflict => ALL_VERDICTS.len(),
    }
}

/// Writes `text` to [`FINAL_TEXT_FILE`] in `dir` (a run's or session's
/// directory) the way warden writes every file there: the directory is
/// opened without following a link on the way, and the file is replaced
/// at once, a link at its name replaced rather than followed.
pub fn write_final_text(dir: &Path, text: &str) -> io::Result<PathBuf> {
    let held = crate::held_dir::HeldDir::open_existing(dir)
        .map_err(|e| io::Error::other(e.to_string()))?
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "the directory is gone"))?;
    held.write_atomic(FINAL_TEXT_FILE, text.as_bytes())?;
    Ok(dir.join(FINAL_TEXT_FILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `$GITHUB_OUTPUT` as the runner does.
    fn parse(file: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut lines = file.split('\n');
        while let Some(line) = lines.next() {
            if line.is_empty() {
                continue;
            }
            if let Some((name, delim)) = line.split_once("<<") {
                let mut value = Vec::new();
                for l in lines.by_ref() {
                    if l == delim {
                        break;
                    }
                    value.push(l);
                }
                out.push((name.to_string(), value.join("\n")));
            } else {
                let (name, value) = line.split_once('=').expect("name=value");
                out.push((name.to_string(), value.to_string()));
            }
        }
        out
    }

    #[test]
    fn a_value_with_line_breaks_cannot_add_a_key() {
        let hostile = "done\nverdict=succeeded\nghadelimiter_0000000000000001\nexit_code=0";
        let o = Outputs(vec![
            ("branch", "warden/x".to_string()),
            ("final", hostile.to_string()),
            ("verdict", "agent_failed".to_string()),
        ]);
        // The first delimiter drawn occurs in the value: another is drawn.
        let mut n = 0;
        let text = o.render_with(|| {
            n += 1;
            n
        });
        assert_eq!(
            parse(&text),
            vec![
                ("branch".to_string(), "warden/x".to_string()),
                ("final".to_string(), hostile.to_string()),
                ("verdict".to_string(), "agent_failed".to_string()),
            ],
            "{text}"
        );
        assert!(
            text.contains("final<<ghadelimiter_0000000000000002\n"),
            "{text}"
        );
    }

    #[test]
    fn plain_values_are_name_value_lines_and_a_carriage_return_is_a_heredoc() {
        let o = Outputs(vec![
            ("a", "1".into()),
            ("b", String::new()),
            ("c", "x\ry".into()),
        ]);
        let text = o.render_with(|| 7);
        assert!(
            text.starts_with("a=1\nb=\nc<<ghadelimiter_0000000000000007\nx\ry\n"),
            "{text}"
        );
    }

    #[test]
    fn a_batch_counts_every_verdict_and_the_entries_that_never_ran() {
        use crate::batch_report::BatchRun;
        use warden_events::Agent;
        let runs = vec![
            BatchRun::new("a", Agent::Exec, Some(Verdict::Succeeded), None),
            BatchRun::new("b", Agent::Exec, Some(Verdict::Stalled), None),
            BatchRun::new("c", Agent::Exec, Some(Verdict::BudgetExceeded), None),
            BatchRun::new("d", Agent::Exec, Some(Verdict::BudgetExceeded), None),
            BatchRun::new("e", Agent::Exec, None, Some("never started".into())),
        ];
        let b = BatchReport {
            schema_version: warden_events::SchemaVersion,
            batch_id: "b1".into(),
            file: "runs.toml".into(),
            executor: "local".into(),
            jobs: 2,
            duration_ms: 1,
            runs,
            succeeded: 1,
            failed: 4,
            cancelled: 0,
            never_ran: vec!["e".into()],
            budgets: Vec::new(),
            otel: None,
        };
        let o = Outputs::for_batch(&b, Path::new("/b"), None, 7);
        let get = |k: &str| o.0.iter().find(|(n, _)| *n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("batch_dir"), Some("/b"));
        assert_eq!(get("batch_json"), Some(""), "not written");
        assert_eq!(get("exit_code"), Some("7"));
        assert_eq!(get("succeeded"), Some("1"));
        assert_eq!(get("stalled"), Some("1"));
        assert_eq!(get("budget_exceeded"), Some("2"));
        assert_eq!(get("timed_out"), Some("0"));
        assert_eq!(get("failed"), Some("4"));
        assert_eq!(get("never_ran"), Some("1"));
        assert_eq!(o.0.len(), 3 + ALL_VERDICTS.len() + 2);
    }

    #[test]
    fn a_session_says_its_last_check_and_its_merge() {
        let step = |passed: bool| -> crate::StepReport {
            serde_json::from_value(serde_json::json!({
                "kind": "check", "iteration": 1, "command": "make test",
                "passed": passed, "verdict": if passed { "succeeded" } else { "timed_out" },
                "reason": "r", "exit_code": null, "signal": null, "duration_ms": 1,
                "run_id": "R", "run_dir": "/s/iteration-1-check",
            }))
            .unwrap()
        };
        let mut s: SessionReport = serde_json::from_value(serde_json::json!({
            "schema_version": 1, "session_id": "S", "name": "n", "session_dir": "/s",
            "workdir": "/", "worktree": null, "started_at": "t", "duration_ms": 1,
            "iterations_requested": 2, "iterations_run": 2,
            "stopped_because": "iterations_exhausted", "verdict": "check_failed",
            "runs": [], "cost_usd": null, "commits": [],
            "tokens": {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0, "reasoning": 0},
            "output": null, "error": null, "output_lost": null,
        }))
        .unwrap();
        let get = |s: &SessionReport, k: &str| {
            let o = Outputs::for_session(s, 0, None);
            o.0.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.clone())
                .unwrap()
        };
        // A check that could not start has no line: still failed.
        assert_eq!(get(&s, "check"), "failed");
        s.checks = vec![step(true), step(false)];
        assert_eq!(get(&s, "check"), "failed", "timed out is failed");
        s.checks.push(step(true));
        s.verdict = Some(Verdict::Succeeded);
        s.merged_into = Some("main".into());
        s.merge_commit = Some("abc123".into());
        assert_eq!(get(&s, "check"), "passed");
        assert_eq!(get(&s, "merged_into"), "main");
        assert_eq!(get(&s, "merge_commit"), "abc123");
        s.checks.clear();
        assert_eq!(get(&s, "check"), "", "no check");
    }

    #[test]
    fn the_final_text_is_not_written_through_a_link() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("elsewhere");
        std::fs::write(&target, "keep").unwrap();
        std::os::unix::fs::symlink(&target, d.path().join(FINAL_TEXT_FILE)).unwrap();
        let p = write_final_text(d.path(), "the answer\nline two").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "the answer\nline two");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        let linked = d.path().join("linked");
        std::os::unix::fs::symlink(d.path(), &linked).unwrap();
        assert!(write_final_text(&linked, "x").is_err());
    }
}
