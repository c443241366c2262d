//! pi: `pi --mode json`.
//!
//! A `session` header, then the session's events. Assistant text, thinking
//! and usage are taken from `message_end` (the `message_update` lines repeat
//! the whole partial message on every delta and are only activity). Usage
//! is per assistant message and summed. pi exits 0 even when the model
//! failed, so success is decided by the last assistant message's
//! `stopReason` when `agent_end` arrives. A model call is an assistant
//! `message_end` that did not fail (a failed one is retried as a new
//! turn).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::cut::Cut;
use crate::decoder::Decode;
use crate::event::{ErrorClass, Tokens};
use crate::figure::Figure;
use crate::json::{input_view, parse};
use crate::skim::Step;
use crate::summary::Out;

#[derive(Debug, Default)]
pub struct Pi {
    last_stop: Option<String>,
    last_error: Option<String>,
    last_text: Option<String>,
}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", borrow)]
    ty: Cow<'a, str>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default, borrow)]
    message: Option<Message<'a>>,
    #[serde(default, rename = "toolCallId")]
    tool_call_id: Option<String>,
    #[serde(default, rename = "toolName")]
    tool_name: Option<String>,
    #[serde(default, borrow)]
    args: Option<&'a RawValue>,
    #[serde(default, rename = "partialResult", borrow)]
    partial_result: Option<ToolResult<'a>>,
    #[serde(default, borrow)]
    result: Option<ToolResult<'a>>,
    #[serde(default, rename = "isError")]
    is_error: Option<bool>,
    #[serde(default)]
    attempt: Option<u32>,
    #[serde(default, rename = "maxAttempts")]
    max_attempts: Option<u32>,
    #[serde(default, rename = "delayMs")]
    delay_ms: Option<f64>,
    #[serde(default, rename = "errorMessage")]
    error_message: Option<String>,
    #[serde(default)]
    success: Option<bool>,
    #[serde(default, rename = "finalError")]
    final_error: Option<String>,
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(default, borrow)]
    role: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    content: Option<Vec<Block<'a>>>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default, rename = "stopReason")]
    stop_reason: Option<String>,
    #[serde(default, rename = "errorMessage")]
    error_message: Option<String>,
}

#[derive(Deserialize)]
struct Block<'a> {
    #[serde(rename = "type", borrow)]
    ty: Cow<'a, str>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    thinking: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ToolResult<'a> {
    #[serde(default, borrow)]
    content: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    input: Option<Figure>,
    #[serde(default)]
    output: Option<Figure>,
    #[serde(default, rename = "cacheRead")]
    cache_read: Option<Figure>,
    #[serde(default, rename = "cacheWrite")]
    cache_write: Option<Figure>,
    #[serde(default)]
    cost: Option<Cost>,
}

#[derive(Deserialize)]
struct Cost {
    #[serde(default)]
    total: Option<Figure>,
}

#[derive(Deserialize)]
struct ToolArgs {
    #[serde(default)]
    timeout: Option<f64>,
}

/// Where big tool outputs are: read only through [`Cut::output_of`].
pub(crate) const BIG: &[&[Step]] = &[
    &[Step::Key("result"), Step::Key("content")],
    &[
        Step::Key("result"),
        Step::Key("content"),
        Step::Element,
        Step::Key("text"),
    ],
    &[Step::Key("partialResult"), Step::Key("content")],
    &[
        Step::Key("partialResult"),
        Step::Key("content"),
        Step::Element,
        Step::Key("text"),
    ],
];

impl Decode for Pi {
    fn line(&mut self, line: &[u8], out: &mut Out<'_>) -> bool {
        let cut = Cut::new(line, BIG);
        let Some(l) = parse::<Line<'_>>(cut.line()) else {
            return false;
        };
        match l.ty.as_ref() {
            "session" => out.session(l.id, None, None),
            // After an `agent_end` with an error, pi retries by itself:
            // a new `agent_start` means that `agent_end` was not the end.
            "agent_start" => out.working(),
            "message_end" => {
                if let Some(m) = l.message
                    && m.role.as_deref() == Some("assistant")
                {
                    self.assistant(m, out);
                }
            }
            "tool_execution_start" => {
                // pi's bash tool takes `timeout` in seconds.
                let timeout_ms = l
                    .args
                    .and_then(|a| serde_json::from_str::<ToolArgs>(a.get()).ok())
                    .and_then(|a| a.timeout)
                    .filter(|t| *t > 0.0)
                    .map(|t| (t * 1000.0) as u64);
                out.tool_started(
                    l.tool_call_id.unwrap_or_default(),
                    l.tool_name.unwrap_or_else(|| "unknown".into()),
                    input_view(l.args),
                    timeout_ms,
                );
            }
            "tool_execution_update" => {
                let partial = l
                    .partial_result
                    .and_then(|r| r.content)
                    .map(|c| cut.output_of(c));
                out.tool_progress(
                    l.tool_call_id.unwrap_or_default(),
                    None,
                    partial.as_ref().map(|o| o.preview.as_str()),
                );
            }
            "tool_execution_end" => {
                let output = l.result.and_then(|r| r.content).map(|c| cut.output_of(c));
                out.tool_finished(
                    l.tool_call_id.unwrap_or_default(),
                    l.tool_name,
                    l.is_error.unwrap_or(false),
                    output,
                );
            }
            "auto_retry_start" => {
                // pi retries after its `agent_end`: that end was not the end.
                out.working();
                out.retry(
                    l.attempt,
                    l.max_attempts,
                    l.delay_ms.map(|d| d as u64),
                    l.error_message.unwrap_or_else(|| "retry".into()),
                );
            }
            "auto_retry_end" if l.success == Some(false) => {
                let message = l
                    .final_error
                    .or_else(|| self.last_error.clone())
                    .unwrap_or_else(|| "retries exhausted".into());
                out.error(message.clone(), ErrorClass::classify(&message, None), true);
            }
            "agent_end" => {
                let failed = matches!(self.last_stop.as_deref(), Some("error" | "aborted"));
                if failed {
                    let message = self.last_error.clone().unwrap_or_else(|| {
                        format!("stopped: {}", self.last_stop.as_deref().unwrap_or("?"))
                    });
                    out.result(false, None, Some(message));
                } else {
                    out.result(true, self.last_text.clone(), None);
                }
            }
            _ => {}
        }
        true
    }
}

impl Pi {
    fn assistant(&mut self, m: Message<'_>, out: &mut Out<'_>) {
        if let Some(model) = m.model {
            out.summary.reported.model = Some(model);
        }
        let mut text = String::new();
        for b in m.content.unwrap_or_default() {
            match b.ty.as_ref() {
                "text" => text.push_str(b.text.as_deref().unwrap_or_default()),
                "thinking" => out.thinking(b.thinking.map(Cow::into_owned).unwrap_or_default()),
                _ => {}
            }
        }
        if let Some(u) = m.usage {
            // pi's terms are warden's: `input` leaves out the cached
            // tokens, and reasoning is part of `output`.
            let tokens = Tokens {
                input: out.count("message.usage.input", u.input),
                output: out.count("message.usage.output", u.output),
                cache_read: out.count("message.usage.cacheRead", u.cache_read),
                cache_write: out.count("message.usage.cacheWrite", u.cache_write),
                // pi reports no reasoning count: not known.
                reasoning: None,
            };
            let cost = out.cost("message.usage.cost.total", u.cost.and_then(|c| c.total));
            out.usage_step(tokens, cost);
        }
        // A model call that answered; pi starts a new turn for each retry
        // of a failed one, so its turns are not counted.
        if m.stop_reason.as_deref() != Some("error") {
            out.turn();
        }
        self.last_stop.clone_from(&m.stop_reason);
        if m.stop_reason.as_deref() == Some("error") {
            let message = m
                .error_message
                .unwrap_or_else(|| "the model call failed".into());
            let class = ErrorClass::classify(&message, None);
            self.last_error = Some(message.clone());
            // Fatal only if no retry follows; authentication never recovers.
            out.error(message, class, class == ErrorClass::Authentication);
        }
        if !text.is_empty() {
            self.last_text = Some(text.clone());
            out.text(text);
        }
    }
}
