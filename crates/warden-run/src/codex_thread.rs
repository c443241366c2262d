//! Codex's own record of a thread's token usage.
//!
//! `codex exec --json` reports usage in one line only, `turn.completed`:
//! a run that fails (`turn.failed`) or is ended before then reports
//! none, though its model calls were made and paid for. Codex records
//! each call's usage in its session file as it comes
//! (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`,
//! a `token_count` event whose `total_token_usage` is the thread's
//! running total, the figure `turn.completed` gives). For such a run
//! warden reads that figure, so that its tokens are known, and a retry
//! that resumes the thread counts only what it added.
//!
//! The file is the agent's to write, as its output is: it is read as an
//! untrusted file (a regular file only, its last [`TAIL`] bytes), and a
//! figure that is not a count is not taken.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use warden_events::Tokens;

/// How much of the end of the session file is read: its last
/// `token_count` is near the end.
const TAIL: u64 = 1 << 20;

/// How many day directories are looked through, newest first.
const DAYS: usize = 31;

/// Where Codex keeps its state for a run with `env` (the agent's
/// variables, over warden's own): `CODEX_HOME`, else `~/.codex`.
pub(crate) fn home(env: &[(OsString, OsString)], home: Option<&Path>) -> Option<PathBuf> {
    let var = env
        .iter()
        .rev()
        .find(|(k, _)| k == "CODEX_HOME")
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var_os("CODEX_HOME"))
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    var.or_else(|| home.map(|h| h.join(".codex")))
        .filter(|p| p.is_absolute())
}

/// The thread's running total as Codex last recorded it; `None` when
/// there is no record (no session file, no `token_count` in its tail).
pub(crate) fn recorded_total(codex_home: &Path, thread_id: &str) -> Option<Tokens> {
    // A thread id is a UUID: anything else names no file of Codex's.
    if thread_id.is_empty()
        || thread_id.len() > 64
        || !thread_id
            .bytes()
            .all(|b| b.is_ascii_hexdigit() || b == b'-')
    {
        return None;
    }
    let file = session_file(&codex_home.join("sessions"), thread_id)?;
    let tail = crate::regular_file::read_tail(&file, TAIL).ok()?;
    last_total(&tail)
}

/// The newest entries of `dir` (by name, which is a number: a year, a
/// month, a day), at most `n`.
fn newest(dir: &Path, n: usize) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .take(4096)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    names.sort_unstable_by(|a, b| b.cmp(a));
    names.into_iter().take(n).map(|n| dir.join(n)).collect()
}

/// `rollout-…-<thread_id>.jsonl` in the newest day directories.
fn session_file(sessions: &Path, thread_id: &str) -> Option<PathBuf> {
    let suffix = format!("-{thread_id}.jsonl");
    let mut days = Vec::new();
    'years: for year in newest(sessions, 3) {
        for month in newest(&year, 12) {
            for day in newest(&month, 31) {
                days.push(day);
                if days.len() == DAYS {
                    break 'years;
                }
            }
        }
    }
    days.into_iter().find_map(|day| {
        let entries = std::fs::read_dir(&day).ok()?;
        entries
            .filter_map(Result::ok)
            .take(100_000)
            .find(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.starts_with("rollout-") && n.ends_with(&suffix))
            })
            .map(|e| e.path())
    })
}

#[derive(Deserialize)]
struct Line {
    #[serde(rename = "type")]
    ty: String,
    payload: Payload,
}

#[derive(Deserialize)]
struct Payload {
    #[serde(rename = "type")]
    ty: String,
    info: Option<Info>,
}

#[derive(Deserialize)]
struct Info {
    total_token_usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Usage {
    input_tokens: Option<u64>,
    cached_input_tokens: Option<u64>,
    cache_write_input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    reasoning_output_tokens: Option<u64>,
}

/// The `total_token_usage` of the last `token_count` in `text`, in
/// warden's terms (as the Codex decoder reads `turn.completed`: Codex's
/// input includes the cached tokens).
fn last_total(text: &[u8]) -> Option<Tokens> {
    text.split(|b| *b == b'\n')
        .rev()
        .filter(|l| l.windows(11).any(|w| w == b"token_count"))
        .filter_map(|l| serde_json::from_slice::<Line>(l).ok())
        .filter(|l| l.ty == "event_msg" && l.payload.ty == "token_count")
        .find_map(|l| l.payload.info?.total_token_usage)
        .map(|u| {
            let mut t = Tokens::default();
            t.input = u
                .input_tokens
                .map(|i| i.saturating_sub(u.cached_input_tokens.unwrap_or(0)));
            t.cache_read = u.cached_input_tokens;
            t.cache_write = u.cache_write_input_tokens;
            t.output = u.output_tokens;
            t.reasoning = u.reasoning_output_tokens;
            t
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const COUNT: &str = r#"{"timestamp":"t","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":42,"cached_input_tokens":2,"cache_write_input_tokens":0,"output_tokens":16,"reasoning_output_tokens":4,"total_tokens":58},"last_token_usage":{"input_tokens":21}}}}"#;

    #[test]
    fn the_last_token_count_is_the_threads_total() {
        let first = COUNT.replace("42", "21").replace("16", "8");
        let text = format!(
            "{{\"type\":\"session_meta\",\"payload\":{{\"type\":\"x\"}}}}\n{first}\n{{\"type\":\"event_msg\",\"payload\":{{\"type\":\"token_count\",\"info\":null}}}}\n{COUNT}\n{{\"type\":\"response_item\",\"payload\":{{\"type\":\"message\"}}}}\n"
        );
        let t = last_total(text.as_bytes()).unwrap();
        assert_eq!(
            (t.input, t.cache_read, t.output, t.reasoning),
            (Some(40), Some(2), Some(16), Some(4))
        );
        assert_eq!(t.total(), Some(58));
        assert_eq!(
            last_total(b"{\"type\":\"x\"}\nnot json token_count\n"),
            None
        );
        let negative = COUNT.replace("\"output_tokens\":16", "\"output_tokens\":-1");
        assert_eq!(last_total(negative.as_bytes()), None, "no count: not taken");
    }

    #[test]
    fn the_session_file_is_found_by_its_thread_in_the_newest_days() {
        let dir = tempfile::tempdir().unwrap();
        let id = "01a2363b-7e6f-7692-87fe-0b649fabd77f";
        let day = dir.path().join("sessions/2026/12/02");
        std::fs::create_dir_all(&day).unwrap();
        std::fs::create_dir_all(dir.path().join("sessions/2026/11/30")).unwrap();
        std::fs::write(
            day.join(format!("rollout-2026-12-02T10-09-58-{id}.jsonl")),
            format!("{COUNT}\n"),
        )
        .unwrap();
        assert_eq!(recorded_total(dir.path(), id).unwrap().total(), Some(58));
        assert_eq!(recorded_total(dir.path(), "01a2363b-0000"), None);
        assert_eq!(recorded_total(dir.path(), "../../etc/passwd"), None);
        assert_eq!(recorded_total(dir.path(), ""), None);
    }

    #[test]
    fn codex_home_is_its_variable_else_under_home() {
        let env = vec![(OsString::from("CODEX_HOME"), OsString::from("/x/codex"))];
        assert_eq!(home(&env, Some(Path::new("/h"))), Some("/x/codex".into()));
        if std::env::var_os("CODEX_HOME").is_none() {
            assert_eq!(home(&[], Some(Path::new("/h"))), Some("/h/.codex".into()));
        }
    }
}
