//! Claude Code: `claude -p --output-format stream-json --verbose`.
//!
//! One JSON object per line, `type` plus `subtype` for `system` and
//! `result`. What matters and is easy to get wrong:
//! - usage is repeated on every content line of one API message, and the
//!   output count grows as the message streams (the `assistant` lines say
//!   1 output token; the partial messages' `message_delta` has the true
//!   count): the last usage seen per `message.id` counts, and the
//!   `result` totals win;
//! - `turns` is the number of top-level message ids (one per model call);
//! - the terminal event is `result`, and `is_error` decides, not `subtype`
//!   (API errors can come as `subtype: "success"` with `is_error: true`,
//!   and exit 0);
//! - API errors also arrive as a synthetic assistant message with an
//!   `error` category; authentication categories are fatal;
//! - Bash tool calls declare their own `timeout` (ms), which the stall
//!   watchdog honours.

use std::borrow::Cow;
use std::collections::VecDeque;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::cut::Cut;
use crate::decoder::Decode;
use crate::event::{ErrorClass, Tokens};
use crate::figure::{Figure, RawFigure};
use crate::json::{input_view, parse};
use crate::skim::Step;
use crate::summary::Out;

mod content;
mod shape;
mod stream_line;
use content::Content;
use shape::Shapes;
use stream_line::StreamLine;

#[derive(Debug, Default)]
pub struct Claude {
    /// The latest message ids and the usage counted for each. The lines of
    /// one message come together, so a short memory is enough, and a long
    /// run does not grow it.
    counted: VecDeque<(String, Tokens)>,
    /// The message each stream of partial messages (top level, or one
    /// subagent's) is on, from its `message_start`.
    streaming: Vec<(Option<String>, String)>,
    /// Text of the last top-level assistant message, the fallback final text.
    last_text: Option<(String, String)>,
    /// The shapes of the last quiet partial-message lines.
    shapes: Shapes,
}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", borrow)]
    ty: Cow<'a, str>,
    #[serde(default, borrow)]
    subtype: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    session_id: Option<Cow<'a, str>>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    claude_code_version: Option<String>,
    #[serde(default, borrow)]
    message: Option<Message<'a>>,
    #[serde(default, borrow)]
    parent_tool_use_id: Option<Cow<'a, str>>,
    // assistant (synthetic API error): the error category
    #[serde(default, borrow)]
    error: Option<&'a RawValue>,
    // result
    #[serde(default)]
    is_error: Option<bool>,
    #[serde(default)]
    result: Option<String>,
    #[serde(default)]
    errors: Option<Vec<serde_json::Value>>,
    #[serde(default)]
    total_cost_usd: Option<Figure>,
    #[serde(default, borrow)]
    usage: Option<Usage<'a>>,
    #[serde(default)]
    terminal_reason: Option<String>,
    #[serde(default)]
    api_error_status: Option<i64>,
    // system/api_retry
    #[serde(default)]
    attempt: Option<u32>,
    #[serde(default)]
    max_retries: Option<u32>,
    #[serde(default)]
    retry_delay_ms: Option<f64>,
    #[serde(default)]
    error_status: Option<i64>,
    // tool_progress
    #[serde(default, borrow)]
    tool_use_id: Option<Cow<'a, str>>,
    #[serde(default)]
    elapsed_time_seconds: Option<f64>,
    // stream_event (with --include-partial-messages)
    #[serde(default, borrow)]
    event: Option<&'a RawValue>,
}

/// The raw API event of a partial message; only what carries usage.
#[derive(Deserialize)]
struct StreamEvent<'a> {
    #[serde(rename = "type", borrow)]
    ty: Cow<'a, str>,
    #[serde(default, borrow)]
    message: Option<Message<'a>>,
    #[serde(default, borrow)]
    usage: Option<Usage<'a>>,
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default, borrow)]
    content: Content<'a>,
    #[serde(default, borrow)]
    usage: Option<Usage<'a>>,
}

#[derive(Deserialize, Default, Clone, Copy)]
struct Usage<'a> {
    #[serde(default, borrow)]
    input_tokens: Option<RawFigure<'a>>,
    #[serde(default, borrow)]
    output_tokens: Option<RawFigure<'a>>,
    #[serde(default, borrow)]
    cache_read_input_tokens: Option<RawFigure<'a>>,
    #[serde(default, borrow)]
    cache_creation_input_tokens: Option<RawFigure<'a>>,
}

impl Usage<'_> {
    /// `earlier` with the counts this usage gives replaced (a count not
    /// believed is not known, as in [`Usage::tokens`]).
    fn over(self, earlier: Tokens, out: &mut Out<'_>) -> Tokens {
        let given = self.tokens(out);
        let or = |v: Option<RawFigure<'_>>, now: Option<u64>, e: Option<u64>| {
            if v.is_some() { now } else { e }
        };
        Tokens {
            input: or(self.input_tokens, given.input, earlier.input),
            output: or(self.output_tokens, given.output, earlier.output),
            cache_read: or(
                self.cache_read_input_tokens,
                given.cache_read,
                earlier.cache_read,
            ),
            cache_write: or(
                self.cache_creation_input_tokens,
                given.cache_write,
                earlier.cache_write,
            ),
            // Claude Code reports no reasoning count: not known.
            reasoning: None,
        }
    }

    /// Anthropic's terms are warden's: `input_tokens` leaves out the
    /// cached parts, and thinking is output.
    fn tokens(self, out: &mut Out<'_>) -> Tokens {
        Tokens {
            input: out.count(
                "usage.input_tokens",
                self.input_tokens.map(RawFigure::figure),
            ),
            output: out.count(
                "usage.output_tokens",
                self.output_tokens.map(RawFigure::figure),
            ),
            cache_read: out.count(
                "usage.cache_read_input_tokens",
                self.cache_read_input_tokens.map(RawFigure::figure),
            ),
            cache_write: out.count(
                "usage.cache_creation_input_tokens",
                self.cache_creation_input_tokens.map(RawFigure::figure),
            ),
            reasoning: None,
        }
    }
}

#[derive(Deserialize)]
struct ToolTimeout {
    #[serde(default)]
    timeout: Option<f64>,
}

/// How many message ids the usage dedupe remembers.
const COUNTED_IDS: usize = 64;

/// Error categories of synthetic messages that no retry will fix.
const FATAL_CATEGORIES: &[&str] = &[
    "authentication_failed",
    "oauth_org_not_allowed",
    "billing_error",
];

/// The class of a synthetic message's error `category`; for a category
/// that names no class (`server_error`, `unknown`), its `text` decides
/// (`API Error: 529 ...`: Claude Code calls a 529 whose body is not
/// Anthropic's `overloaded_error` a `server_error`).
fn class_of(category: &str, text: &str) -> ErrorClass {
    match category {
        // Used-up credit: `quota`, as for the other CLIs, not bad
        // credentials.
        "billing_error" => ErrorClass::Quota,
        c if FATAL_CATEGORIES.contains(&c) => ErrorClass::Authentication,
        "rate_limit" => ErrorClass::RateLimit,
        "overloaded" => ErrorClass::Overloaded,
        "invalid_request" => ErrorClass::InvalidRequest,
        "unknown" => ErrorClass::classify(text, None),
        _ => match ErrorClass::classify(text, None) {
            ErrorClass::Other => ErrorClass::Api,
            c => c,
        },
    }
}

/// Where big values are: the tool results, read only through
/// [`Cut::output_of`], and their second copy, which is not read.
pub(crate) const BIG: &[&[Step]] = &[
    &[
        Step::Key("message"),
        Step::Key("content"),
        Step::Element,
        Step::Key("content"),
    ],
    &[
        Step::Key("message"),
        Step::Key("content"),
        Step::Element,
        Step::Key("content"),
        Step::Element,
        Step::Key("text"),
    ],
    &[Step::Key("tool_use_result")],
];

impl Decode for Claude {
    fn line(&mut self, line: &[u8], out: &mut Out<'_>) -> bool {
        // Once the session is known, a quiet line of a shape seen before
        // is only compared with it (see `shape`).
        if out.summary.reported.session_id.is_some() && self.shapes.fit(line) {
            return true;
        }
        if let Some(s) = StreamLine::of(line) {
            // The text of the ids is needed only now and then: only then
            // is it made a `str` (`StreamLine` found it UTF-8, so nothing
            // is replaced).
            if let Some(id) = s.session_id
                && out.summary.reported.session_id.is_none()
            {
                out.session_id(&String::from_utf8_lossy(id));
            }
            match s.event {
                Some(event) => {
                    let parent = s.parent.map(String::from_utf8_lossy);
                    self.stream_event(event, parent.as_deref(), out);
                }
                None => self.shapes.learn(line),
            }
            return true;
        }
        self.parsed(line, out)
    }
}

impl Claude {
    /// [`Decode::line`] for a line read by serde: any line but the
    /// `stream_event`s that [`StreamLine`] reads.
    fn parsed(&mut self, line: &[u8], out: &mut Out<'_>) -> bool {
        let cut = Cut::new(line, BIG);
        let line = cut.line();
        let Some(l) = parse::<Line<'_>>(line) else {
            return false;
        };
        if l.message.is_some() && !content::two_step_accepts(line) {
            return false;
        }
        if let Some(id) = &l.session_id {
            out.session_id(id);
        }
        match (l.ty.as_ref(), l.subtype.as_deref()) {
            ("system", Some("init")) => out.session(
                l.session_id.map(Cow::into_owned),
                l.model,
                l.claude_code_version,
            ),
            ("system", Some("api_retry")) => {
                let category = l
                    .error
                    .and_then(|e| serde_json::from_str::<String>(e.get()).ok());
                let category = category.unwrap_or_else(|| "unknown".into());
                let reason = match l.error_status {
                    Some(s) => format!("{category} (HTTP {s})"),
                    None => category.clone(),
                };
                out.retry(
                    l.attempt,
                    l.max_retries,
                    l.retry_delay_ms.map(|d| d as u64),
                    reason,
                );
                if FATAL_CATEGORIES.contains(&category.as_str()) {
                    let class = class_of(&category, "");
                    let what = if class == ErrorClass::Quota {
                        "credit used up"
                    } else {
                        "authentication failed"
                    };
                    out.error(format!("{what}: {category}"), class, true);
                }
            }
            ("assistant", _) => self.assistant(&l, line, out),
            ("user", _) => {
                let content = l.message.as_ref().map(|m| m.content.blocks(line));
                for b in content.unwrap_or_default() {
                    if b.ty == "tool_result" {
                        out.tool_finished(
                            b.tool_use_id.map(Cow::into_owned).unwrap_or_default(),
                            None,
                            b.is_error.unwrap_or(false),
                            b.content.map(|c| cut.output_of(c)),
                        );
                    }
                }
            }
            ("stream_event", _) => {
                if let Some(e) = l.event {
                    self.stream_event(e.get().as_bytes(), l.parent_tool_use_id.as_deref(), out);
                }
            }
            ("tool_progress", _) => out.tool_progress(
                l.tool_use_id.map(Cow::into_owned).unwrap_or_default(),
                l.elapsed_time_seconds.map(|s| (s * 1000.0) as u64),
                None,
            ),
            ("result", _) => {
                if let Some(u) = l.usage {
                    let tokens = u.tokens(out);
                    let cost = out.cost("total_cost_usd", l.total_cost_usd);
                    out.usage_total(tokens, cost);
                }
                // `num_turns` is left alone: `turns` counts model calls the
                // same way for every agent, and Claude's count of its own
                // turns is not always that.
                let failed = l
                    .is_error
                    .unwrap_or(l.subtype.as_deref() != Some("success"));
                let text = l.result.or_else(|| self.last_text.take().map(|(_, t)| t));
                let error = failed.then(|| {
                    let listed: Vec<String> = l
                        .errors
                        .unwrap_or_default()
                        .into_iter()
                        .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_string))
                        .collect();
                    let mut msg = if !listed.is_empty() {
                        listed.join("; ")
                    } else if let Some(e) = out.summary.reported.error_message.clone() {
                        e
                    } else {
                        text.clone()
                            .unwrap_or_else(|| l.subtype.as_deref().unwrap_or("error").to_string())
                    };
                    if let Some(reason) = &l.terminal_reason {
                        msg.push_str(&format!(" ({reason}"));
                        if let Some(s) = l.api_error_status {
                            msg.push_str(&format!(", HTTP {s}"));
                        }
                        msg.push(')');
                    }
                    msg
                });
                out.result(!failed, if failed { None } else { text }, error);
            }
            // Everything else (hooks, status, compaction, rate limit
            // events, unknown kinds) is well formed and carries nothing
            // warden needs.
            _ => {}
        }
        true
    }
}

impl Claude {
    fn assistant<'a>(&mut self, l: &Line<'a>, line: &'a [u8], out: &mut Out<'_>) {
        let Some(m) = &l.message else { return };
        let top_level = l.parent_tool_use_id.is_none();
        let id = m.id.as_deref().unwrap_or_default();
        let synthetic = m.model.as_deref() == Some("<synthetic>");
        if let Some(u) = m.usage
            && !synthetic
        {
            self.usage_seen(id, u, top_level, out);
        }
        if let Some(model) = &m.model
            && model != "<synthetic>"
            && out.summary.reported.model.is_none()
        {
            out.summary.reported.model = Some(model.clone());
        }
        let mut texts = Vec::new();
        for b in m.content.blocks(line) {
            match b.ty.as_ref() {
                "text" => {
                    if let Some(t) = b.text {
                        texts.push(t.into_owned());
                    }
                }
                "thinking" => out.thinking(b.thinking.map(Cow::into_owned).unwrap_or_default()),
                "tool_use" => {
                    let name = b.name.map(Cow::into_owned).unwrap_or_default();
                    let timeout_ms = b
                        .input
                        .and_then(|i| serde_json::from_str::<ToolTimeout>(i.get()).ok())
                        .and_then(|t| t.timeout)
                        .filter(|t| *t > 0.0)
                        .map(|t| t as u64);
                    out.tool_started(
                        b.id.map(Cow::into_owned).unwrap_or_default(),
                        name,
                        input_view(b.input),
                        timeout_ms,
                    );
                }
                _ => {}
            }
        }
        let text = texts.join("");
        if let Some(category) = l
            .error
            .and_then(|e| serde_json::from_str::<String>(e.get()).ok())
        {
            let class = class_of(&category, &text);
            let message = if text.is_empty() {
                category.clone()
            } else {
                text.clone()
            };
            let fatal = matches!(class, ErrorClass::Authentication | ErrorClass::Quota);
            out.error(message, class, fatal);
            return;
        }
        if !text.is_empty() {
            if top_level {
                // Lines of one message carry one block each: join them.
                match &mut self.last_text {
                    Some((last_id, t)) if last_id == id => t.push_str(&text),
                    _ => self.last_text = Some((id.to_string(), text.clone())),
                }
            }
            out.text(text);
        }
    }
}

impl Claude {
    /// A usage seen for message `id`: the first counts in full (and is a
    /// model call), a later one adds only what it has beyond what was
    /// counted, so the last and largest usage of each message is what
    /// adds up.
    fn usage_seen(&mut self, id: &str, u: Usage<'_>, top_level: bool, out: &mut Out<'_>) {
        if id.is_empty() {
            return;
        }
        // From the newest: the lines of one message come together.
        match self.counted.iter_mut().rev().find(|(c, _)| c == id) {
            Some((_, counted)) => {
                let now = u.over(*counted, out).max(counted);
                let more = now.beyond(counted);
                *counted = now;
                if !more.is_zero() {
                    out.usage_step(more, None);
                }
            }
            None => {
                if self.counted.len() == COUNTED_IDS {
                    self.counted.pop_front();
                }
                let tokens = u.tokens(out);
                self.counted.push_back((id.to_string(), tokens));
                out.usage_step(tokens, None);
                if top_level {
                    out.turn();
                }
            }
        }
    }

    /// A partial message, whose API event is the raw JSON `event`, in the
    /// stream of subagent `parent` (`None` at the top level):
    /// `message_start` names the message a stream is on, and
    /// `message_delta` carries its final usage.
    fn stream_event(&mut self, event: &[u8], parent: Option<&str>, out: &mut Out<'_>) {
        let Ok(e) = serde_json::from_slice::<StreamEvent<'_>>(event) else {
            return;
        };
        let parent = parent.map(str::to_string);
        let top_level = parent.is_none();
        match e.ty.as_ref() {
            "message_start" => {
                let Some(m) = &e.message else { return };
                let Some(id) = m.id.as_deref() else { return };
                if m.model.as_deref() == Some("<synthetic>") {
                    return;
                }
                self.streaming.retain(|(p, _)| *p != parent);
                if self.streaming.len() == COUNTED_IDS {
                    self.streaming.remove(0);
                }
                self.streaming.push((parent, id.to_string()));
                if let Some(u) = m.usage {
                    self.usage_seen(id, u, top_level, out);
                }
            }
            "message_delta" => {
                let Some(u) = e.usage else { return };
                let Some(id) = self
                    .streaming
                    .iter()
                    .find(|(p, _)| *p == parent)
                    .map(|(_, id)| id.clone())
                else {
                    return;
                };
                self.usage_seen(&id, u, top_level, out);
            }
            _ => {}
        }
    }
}

/// Whether `key` names a field of [`Line`]: a line that repeats one, or
/// gives one a value of another type, is refused by the full parse.
fn line_field(key: &[u8]) -> bool {
    matches!(
        key,
        b"type"
            | b"subtype"
            | b"session_id"
            | b"model"
            | b"claude_code_version"
            | b"message"
            | b"parent_tool_use_id"
            | b"error"
            | b"is_error"
            | b"result"
            | b"errors"
            | b"total_cost_usd"
            | b"usage"
            | b"terminal_reason"
            | b"api_error_status"
            | b"attempt"
            | b"max_retries"
            | b"retry_delay_ms"
            | b"error_status"
            | b"tool_use_id"
            | b"elapsed_time_seconds"
            | b"event"
    )
}

#[cfg(test)]
mod class_tests {
    use super::*;

    fn decode(line: &str) -> crate::summary::Summary {
        let mut summary = crate::summary::Summary::default();
        let mut events = Vec::new();
        let mut out = Out {
            summary: &mut summary,
            events: &mut events,
        };
        assert!(Claude::default().line(line.as_bytes(), &mut out));
        summary
    }

    #[test]
    fn a_billing_error_is_used_up_credit_not_bad_credentials() {
        let s = decode(
            r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"Credit balance is too low"}]},"error":"billing_error"}"#,
        );
        assert_eq!(s.reported.error_class, Some(ErrorClass::Quota));
        assert_eq!(
            s.fatal_pending,
            Some(ErrorClass::Quota),
            "no retry fixes it"
        );
        let s = decode(
            r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":500,"error_status":402,"error":"billing_error"}"#,
        );
        assert_eq!(s.reported.error_class, Some(ErrorClass::Quota));
        assert_eq!(
            s.reported.error_message.as_deref(),
            Some("credit used up: billing_error")
        );
        let s = decode(
            r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":500,"error_status":401,"error":"authentication_failed"}"#,
        );
        assert_eq!(s.reported.error_class, Some(ErrorClass::Authentication));
    }
}

#[cfg(test)]
mod utf8_tests {
    use super::*;

    #[test]
    fn invalid_utf8_in_a_skipped_block_field_is_still_malformed() {
        let mut line =
            br#"{"type":"user","message":{"content":[{"type":"text","x":"?"}]}}"#.to_vec();
        let at = line.iter().position(|b| *b == b'?').unwrap();
        line[at] = 0xff;
        let mut summary = crate::summary::Summary::default();
        let mut events = Vec::new();
        let mut out = Out {
            summary: &mut summary,
            events: &mut events,
        };
        assert!(!Claude::default().line(&line, &mut out));
        // Outside the content, as before, it is skipped without a check.
        let mut line = br#"{"type":"user","message":{"content":[]},"x":"?"}"#.to_vec();
        let at = line.iter().position(|b| *b == b'?').unwrap();
        line[at] = 0xff;
        assert!(Claude::default().line(&line, &mut out));
    }
}
