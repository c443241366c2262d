//! The agent's stderr: plain lines, plus the retries some agents announce
//! only there.
//!
//! A retry is a model request the agent sends again because the previous
//! attempt of the same request failed (an HTTP error, a broken stream).
//! It is counted once per repeated request; the failure that ends the run
//! is an error, not a retry. Claude Code, Codex and pi say so on stdout
//! (their decoders count it); Gemini CLI and OpenCode say so only in their
//! logs on stderr, which this decoder reads:
//!
//! - Gemini CLI: `Attempt 2 failed with status 500. Retrying with
//!   backoff...` or `Attempt 1 failed: <why>. Retrying after 5123ms...`
//!   (not `... Max attempts reached`: that one is the end).
//! - OpenCode (`--print-logs`, logfmt): a `level=ERROR message="stream
//!   error"` line, then a new `message=stream` line for the same session:
//!   the request is being sent again. A `stream error` that nothing
//!   follows is the failure, not a retry. Title requests (`small=true`)
//!   are side requests and are not counted.
//!
//! Every non-blank line is still a `stderr` line and activity, except
//! OpenCode's own INFO and DEBUG log lines: they stay in `stderr.log` but
//! are neither events (there are many, and they say nothing a reader of
//! the run needs) nor activity (the CLI writes its log, not the work: a
//! model that stalls must still look silent).

use std::collections::BTreeMap;

use crate::agent::Agent;
use crate::decoder::Decode;
use crate::summary::{Out, PREVIEW, preview};

/// The decoder for an agent's stderr.
#[derive(Debug)]
pub struct Stderr {
    agent: Agent,
    opencode: OpenCodeLog,
}

impl Stderr {
    pub fn new(agent: Agent) -> Self {
        Self {
            agent,
            opencode: OpenCodeLog::default(),
        }
    }
}

impl Decode for Stderr {
    fn line(&mut self, line: &[u8], out: &mut Out<'_>) -> bool {
        if line.iter().all(u8::is_ascii_whitespace) {
            return false;
        }
        let text = String::from_utf8_lossy(line).into_owned();
        let mut chatter = false;
        match self.agent {
            Agent::Gemini => {
                if let Some(r) = gemini_retry(&text) {
                    out.retry(Some(r.attempt), None, r.delay_ms, r.reason);
                }
            }
            Agent::OpenCode => {
                let seen = self.opencode.line(&text);
                if let Some(r) = seen.retry {
                    out.retry(Some(r.attempt), None, None, r.reason);
                }
                chatter = seen.chatter;
            }
            _ => {}
        }
        if chatter {
            return false;
        }
        out.text(text);
        true
    }
}

/// One retry as a stderr line announces it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryNotice {
    /// Which attempt failed (1 for the first request).
    pub attempt: u32,
    pub delay_ms: Option<u64>,
    pub reason: String,
}

/// Gemini CLI's `Attempt N failed ... Retrying ...` warning.
pub fn gemini_retry(line: &str) -> Option<RetryNotice> {
    let at = line.find("Attempt ")?;
    let rest = &line[at + "Attempt ".len()..];
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let attempt: u32 = rest[..digits].parse().ok()?;
    if !rest[digits..].starts_with(" failed") {
        return None;
    }
    let retrying = rest.find(". Retrying")?;
    let reason = rest[digits + " failed".len()..retrying]
        .trim_start_matches(':')
        .trim();
    let after = &rest[retrying + ". Retrying".len()..];
    let delay_ms = after
        .strip_prefix(" after ")
        .and_then(|d| d.split("ms").next())
        .and_then(|d| d.trim().parse().ok());
    Some(RetryNotice {
        attempt,
        delay_ms,
        reason: preview(
            if reason.is_empty() {
                "request failed"
            } else {
                reason
            },
            PREVIEW,
        ),
    })
}

/// What one line of OpenCode's log said.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct OpenCodeLine {
    pub retry: Option<RetryNotice>,
    /// An INFO or DEBUG line of the log: not worth an event.
    pub chatter: bool,
}

/// OpenCode's log, per session: the last model request that failed, and
/// how many times in a row it was sent again.
#[derive(Debug, Default)]
pub struct OpenCodeLog {
    sessions: BTreeMap<String, Pending>,
}

#[derive(Debug, Default)]
struct Pending {
    failed: Option<String>,
    attempt: u32,
}

/// Sessions remembered at most (subagents each have one).
const MAX_SESSIONS: usize = 256;

impl OpenCodeLog {
    pub fn line(&mut self, line: &str) -> OpenCodeLine {
        let (Some(level), Some(message)) = (logfmt(line, "level"), logfmt(line, "message")) else {
            return OpenCodeLine::default();
        };
        let chatter = matches!(level, "INFO" | "DEBUG");
        let main = logfmt(line, "small") == Some("false");
        let session = logfmt(line, "session.id");
        let mut retry = None;
        if let (true, Some(session)) = (main, session) {
            match message {
                "stream error" => {
                    if self.sessions.len() >= MAX_SESSIONS && !self.sessions.contains_key(session) {
                        self.sessions.pop_first();
                    }
                    let error = logfmt(line, "error.error").unwrap_or("request failed");
                    self.sessions.entry(session.to_string()).or_default().failed =
                        Some(preview(error, PREVIEW));
                }
                "stream" => {
                    let p = self.sessions.entry(session.to_string()).or_default();
                    match p.failed.take() {
                        Some(reason) => {
                            p.attempt += 1;
                            retry = Some(RetryNotice {
                                attempt: p.attempt,
                                delay_ms: None,
                                reason,
                            });
                        }
                        None => p.attempt = 0,
                    }
                }
                _ => {}
            }
        }
        OpenCodeLine { retry, chatter }
    }
}

/// The value of `key` in a logfmt line (`key=value` or `key="a value"`).
fn logfmt<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let mut rest = line;
    loop {
        let at = rest.find(key)?;
        let before_ok = at == 0 || rest.as_bytes()[at - 1] == b' ';
        let after = &rest[at + key.len()..];
        if before_ok && let Some(v) = after.strip_prefix('=') {
            return Some(match v.strip_prefix('"') {
                Some(q) => {
                    let mut end = q.len();
                    let mut escaped = false;
                    for (i, c) in q.char_indices() {
                        match c {
                            '\\' if !escaped => escaped = true,
                            '"' if !escaped => {
                                end = i;
                                break;
                            }
                            _ => escaped = false,
                        }
                    }
                    &q[..end]
                }
                None => v.split(' ').next().unwrap_or_default(),
            });
        }
        rest = &rest[at + key.len()..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decoder::AgentDecoder;
    use crate::event::Event;

    #[test]
    fn gemini_retries_with_backoff_are_retries() {
        let r = gemini_retry(
            r#"Attempt 2 failed with status 500. Retrying with backoff... _ApiError: {"error":{"code":500}}"#,
        )
        .unwrap();
        assert_eq!(r.attempt, 2);
        assert_eq!(r.reason, "with status 500");
        assert_eq!(r.delay_ms, None);
        let r = gemini_retry("Attempt 1 failed: quota exceeded. Retrying after 5234ms...").unwrap();
        assert_eq!((r.attempt, r.delay_ms), (1, Some(5234)));
        assert_eq!(r.reason, "quota exceeded");
        let r = gemini_retry(
            "Attempt 3 failed with 429 error (no Retry-After header). Retrying with backoff...",
        )
        .unwrap();
        assert_eq!(r.attempt, 3);
    }

    #[test]
    fn gemini_last_attempt_and_other_lines_are_not_retries() {
        for line in [
            "Attempt 10 failed: fake model: HTTP 500. Max attempts reached",
            "    at async retryWithBackoff (file:///x/chunk.js:308039:23)",
            "Attempt failed. Retrying",
            "Attempts 3 failed. Retrying",
            "YOLO mode is enabled. All tool calls will be automatically approved.",
            "",
        ] {
            assert_eq!(gemini_retry(line), None, "{line}");
        }
    }

    fn oc(session: &str, message: &str, extra: &str) -> String {
        let level = if message == "stream error" {
            "ERROR"
        } else {
            "INFO"
        };
        format!(
            r#"timestamp=2026-11-30T18:26:32.255Z level={level} run=1be4c554 message="{message}" providerID=fake modelID=fake-model session.id={session} {extra}"#
        )
    }

    #[test]
    fn opencode_a_failed_request_sent_again_is_a_retry() {
        let mut log = OpenCodeLog::default();
        let stream = oc("ses_a", "stream", "small=false agent=build mode=primary");
        let failed = oc(
            "ses_a",
            "stream error",
            r#"small=false agent=build mode=primary error.error="AI_APICallError: fake model: HTTP 429""#,
        );
        assert_eq!(
            log.line(&stream),
            OpenCodeLine {
                retry: None,
                chatter: true
            }
        );
        let seen = log.line(&failed);
        assert_eq!(seen.retry, None);
        assert!(!seen.chatter);
        let retry = log.line(&stream).retry.unwrap();
        assert_eq!(retry.attempt, 1);
        assert_eq!(retry.reason, "AI_APICallError: fake model: HTTP 429");
        log.line(&failed);
        assert_eq!(log.line(&stream).retry.unwrap().attempt, 2);
        // A request that succeeds starts the count again.
        assert_eq!(log.line(&stream).retry, None);
        log.line(&failed);
        assert_eq!(log.line(&stream).retry.unwrap().attempt, 1);
    }

    #[test]
    fn opencode_final_errors_titles_and_other_sessions_are_not_retries() {
        let mut log = OpenCodeLog::default();
        // The last failure: nothing follows.
        let failed = oc("ses_a", "stream error", "small=false error.error=boom");
        assert_eq!(log.line(&failed).retry, None);
        // Another session's request (a subagent) is not this one again.
        assert_eq!(log.line(&oc("ses_b", "stream", "small=false")).retry, None);
        // A title request is a side request.
        assert_eq!(log.line(&oc("ses_a", "stream", "small=true")).retry, None);
        // Not a log line at all.
        assert_eq!(log.line("Error: something plain"), OpenCodeLine::default());
    }

    #[test]
    fn logfmt_values() {
        let l = r#"level=ERROR message="stream error" session.id=ses_1 small=false error.error="a \"b\" c""#;
        assert_eq!(logfmt(l, "level"), Some("ERROR"));
        assert_eq!(logfmt(l, "message"), Some("stream error"));
        assert_eq!(logfmt(l, "session.id"), Some("ses_1"));
        assert_eq!(logfmt(l, "id"), None);
        assert_eq!(logfmt(l, "error.error"), Some(r#"a \"b\" c"#));
        assert_eq!(logfmt("message=x", "message"), Some("x"));
    }

    #[test]
    fn stderr_decoder_counts_retries_and_keeps_lines() {
        let mut d = AgentDecoder::stderr(Agent::Gemini);
        let mut events = Vec::new();
        assert!(d.line(
            b"Attempt 1 failed with status 429. Retrying with backoff...",
            &mut events
        ));
        assert!(d.line(b"    at throwErrorIfNotOK (file:///x.js:1:2)", &mut events));
        assert!(!d.line(b"  ", &mut events));
        assert_eq!(d.summary().reported.retries, 1);
        assert!(matches!(
            events[0],
            Event::Retry {
                attempt: Some(1),
                ..
            }
        ));
        assert!(matches!(events[1], Event::Text { .. }));
        assert_eq!(events.len(), 3);

        let mut d = AgentDecoder::stderr(Agent::OpenCode);
        let mut events = Vec::new();
        // INFO lines are not activity; the ERROR line is.
        let stream = oc("s", "stream", "small=false");
        let failed = oc("s", "stream error", "small=false");
        assert!(!d.line(stream.as_bytes(), &mut events));
        assert!(d.line(failed.as_bytes(), &mut events));
        assert!(!d.line(stream.as_bytes(), &mut events));
        assert_eq!(d.summary().reported.retries, 1);
        // The ERROR line is shown, the INFO lines are not.
        let texts = events
            .iter()
            .filter(|e| matches!(e, Event::Text { .. }))
            .count();
        assert_eq!(texts, 1);

        // Other agents' stderr is plain lines, never a retry.
        let mut d = AgentDecoder::stderr(Agent::Claude);
        let mut events = Vec::new();
        d.line(
            b"Attempt 1 failed with status 429. Retrying with backoff...",
            &mut events,
        );
        assert_eq!(d.summary().reported.retries, 0);
    }
}
