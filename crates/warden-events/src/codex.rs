//! Codex: `codex exec --json`.
//!
//! `thread.started`, `turn.started`, `item.started|updated|completed` with
//! typed items, and the terminal `turn.completed` (usage: the thread's
//! running total) or `turn.failed`. A top-level `error` line is emitted for
//! every error notice: the ones that announce a request sent again
//! (`Reconnecting... 2/5 (why)`) are retries; the others, such as the
//! error that `turn.failed` then repeats, are errors. Only `turn.failed`
//! fails the run.
//!
//! Codex's `input_tokens` include the cached ones; warden's `input` does
//! not. Codex reports no model calls: one is counted when the model's
//! output (a message, reasoning, a tool call) follows the start or a tool
//! call's end.

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
use crate::summary::ToolOutput;

#[derive(Debug, Default)]
pub struct Codex {
    last_message: Option<String>,
    last_error: Option<String>,
    /// Whether the model's next output is a new model call: at the start,
    /// and after a tool call ended (its result goes back to the model).
    awaiting_model: bool,
}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", borrow)]
    ty: Cow<'a, str>,
    #[serde(default)]
    thread_id: Option<String>,
    #[serde(default, borrow)]
    item: Option<Item<'a>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<ErrorBody>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    input_tokens: Option<Figure>,
    #[serde(default)]
    cached_input_tokens: Option<Figure>,
    #[serde(default)]
    cache_write_input_tokens: Option<Figure>,
    #[serde(default)]
    output_tokens: Option<Figure>,
    #[serde(default)]
    reasoning_output_tokens: Option<Figure>,
}

#[derive(Deserialize)]
struct Item<'a> {
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(rename = "type", borrow)]
    ty: Cow<'a, str>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    command: Option<String>,
    #[serde(default, borrow)]
    aggregated_output: Option<&'a RawValue>,
    #[serde(default)]
    exit_code: Option<i64>,
    #[serde(default, borrow)]
    status: Option<Cow<'a, str>>,
    #[serde(default)]
    server: Option<String>,
    #[serde(default)]
    tool: Option<String>,
    #[serde(default, borrow)]
    arguments: Option<&'a RawValue>,
    #[serde(default, borrow)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<ErrorBody>,
    #[serde(default)]
    query: Option<String>,
    #[serde(default, borrow)]
    changes: Option<&'a RawValue>,
}

impl Item<'_> {
    fn tool_name(&self) -> Option<String> {
        match self.ty.as_ref() {
            "command_execution" => Some("shell".into()),
            "mcp_tool_call" => Some(format!(
                "mcp:{}/{}",
                self.server.as_deref().unwrap_or("?"),
                self.tool.as_deref().unwrap_or("?")
            )),
            "collab_tool_call" => Some(format!("agent:{}", self.tool.as_deref().unwrap_or("?"))),
            "web_search" => Some("web_search".into()),
            "file_change" => Some("file_change".into()),
            _ => None,
        }
    }

    fn input(&self) -> Option<String> {
        match self.ty.as_ref() {
            "command_execution" => self.command.clone(),
            "web_search" => self.query.clone(),
            "file_change" => self.changes.map(|c| c.get().to_string()),
            _ => input_view(self.arguments),
        }
    }

    fn failed(&self) -> bool {
        matches!(self.status.as_deref(), Some("failed" | "declined"))
            || self.exit_code.is_some_and(|c| c != 0)
            || self.error.as_ref().is_some_and(|e| e.message.is_some())
    }

    fn output(&self, cut: &Cut<'_>) -> Option<ToolOutput> {
        match self.ty.as_ref() {
            "command_execution" => self.aggregated_output.map(|o| cut.output_of(o)),
            _ => self
                .error
                .as_ref()
                .and_then(|e| e.message.as_deref())
                .map(ToolOutput::text)
                .or_else(|| self.result.map(|r| cut.output_of(r))),
        }
    }
}

/// Where big tool outputs are: read only through [`Cut::output_of`].
pub(crate) const BIG: &[&[Step]] = &[
    &[Step::Key("item"), Step::Key("aggregated_output")],
    &[Step::Key("item"), Step::Key("result")],
];

impl Decode for Codex {
    fn line(&mut self, line: &[u8], out: &mut Out<'_>) -> bool {
        let cut = Cut::new(line, BIG);
        let Some(l) = parse::<Line<'_>>(cut.line()) else {
            return false;
        };
        match l.ty.as_ref() {
            "thread.started" => out.session(l.thread_id, None, None),
            "turn.started" => self.awaiting_model = true,
            "item.started" | "item.updated" | "item.completed" => {
                if let Some(item) = l.item {
                    self.item(l.ty.as_ref(), item, &cut, out);
                }
            }
            "turn.completed" => {
                if let Some(u) = l.usage {
                    let cached = out.count("usage.cached_input_tokens", u.cached_input_tokens);
                    let tokens = Tokens {
                        input: out
                            .count("usage.input_tokens", u.input_tokens)
                            .map(|i| i.saturating_sub(cached.unwrap_or(0))),
                        output: out.count("usage.output_tokens", u.output_tokens),
                        cache_read: cached,
                        cache_write: out
                            .count("usage.cache_write_input_tokens", u.cache_write_input_tokens),
                        reasoning: out
                            .count("usage.reasoning_output_tokens", u.reasoning_output_tokens),
                    };
                    out.usage_total(tokens, None);
                }
                out.result(true, self.last_message.clone(), None);
            }
            "turn.failed" => {
                let message = l
                    .error
                    .and_then(|e| e.message)
                    .or_else(|| self.last_error.clone())
                    .unwrap_or_else(|| "turn failed".into());
                let class = ErrorClass::classify(&message, None);
                // Fatal as for every agent: only an error no retry fixes
                // (a 500 or 529 that ends the turn is one a retry may).
                out.error(message.clone(), class, class.no_retry_fixes());
                out.result(false, None, Some(message));
            }
            "error" => {
                let message = l.message.unwrap_or_else(|| "error".into());
                match reconnecting(&message) {
                    Some((attempt, max)) => out.retry(attempt, max, None, message.clone()),
                    None => {
                        // The error that ends the turn (`turn.failed`
                        // follows) or a notice: not a request sent again.
                        let class = ErrorClass::classify(&message, None);
                        out.error(message.clone(), class, false);
                    }
                }
                self.last_error = Some(message);
            }
            _ => {}
        }
        true
    }
}

/// `Reconnecting... N/M (why)`: Codex is sending a failed request again,
/// for the Nth time of at most M. `None` when the notice is not that.
fn reconnecting(message: &str) -> Option<(Option<u32>, Option<u32>)> {
    let rest = message
        .get(..12)
        .filter(|p| p.eq_ignore_ascii_case("reconnecting"))
        .map(|_| &message[12..])?;
    let count = rest.trim_start_matches('.').trim_start();
    let count = count.split_whitespace().next().unwrap_or_default();
    let (n, m) = count.split_once('/').unwrap_or((count, ""));
    Some((n.parse().ok(), m.parse().ok()))
}

impl Codex {
    /// Counts a model call at the first output of the model after the
    /// start or after a tool call ended.
    fn count_model_call(&mut self, phase: &str, item: &Item<'_>, id: &str, out: &mut Out<'_>) {
        let is_tool = item.tool_name().is_some();
        let open = out.summary.open_tools().any(|(o, _)| o == id);
        // What the model produced: its messages and reasoning, and tool
        // calls as they start (or, for tools reported only when done, as
        // they are reported).
        let from_model = match item.ty.as_ref() {
            "agent_message" | "reasoning" | "plan" => phase == "item.completed",
            _ if is_tool => phase == "item.started" || (phase == "item.completed" && !open),
            _ => false,
        };
        if from_model && self.awaiting_model {
            self.awaiting_model = false;
            out.turn();
        }
        if is_tool && phase == "item.completed" {
            self.awaiting_model = true;
        }
    }

    fn item(&mut self, phase: &str, item: Item<'_>, cut: &Cut<'_>, out: &mut Out<'_>) {
        let id = item.id.as_deref().unwrap_or_default().to_string();
        self.count_model_call(phase, &item, &id, out);
        match (phase, item.ty.as_ref()) {
            ("item.completed", "agent_message") => {
                let text = item.text.unwrap_or_default();
                self.last_message = Some(text.clone());
                out.text(text);
            }
            ("item.completed", "reasoning") => out.thinking(item.text.unwrap_or_default()),
            ("item.completed", "plan") if self.last_message.is_none() => {
                self.last_message = item.text;
            }
            ("item.completed", "error") => {
                let message = item.message.unwrap_or_else(|| "error".into());
                out.error(message.clone(), ErrorClass::classify(&message, None), false);
            }
            (_, "todo_list" | "agent_message" | "reasoning" | "plan" | "error") => {}
            ("item.started", _) => {
                if let Some(name) = item.tool_name() {
                    out.tool_started(id, name, item.input(), None);
                }
            }
            ("item.updated", _) if out.summary.open_tools().any(|(open, _)| open == id) => {
                let so_far = item.aggregated_output.map(|o| cut.output_of(o));
                out.tool_progress(id, None, so_far.as_ref().map(|o| o.preview.as_str()));
            }
            ("item.completed", _) => {
                if let Some(name) = item.tool_name() {
                    if !out.summary.open_tools().any(|(open, _)| open == id) {
                        // Tools reported only when done (file changes).
                        out.tool_started(id.clone(), name.clone(), item.input(), None);
                    }
                    let output = item.output(cut);
                    out.tool_finished(id, Some(name), item.failed(), output);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::Agent;
    use crate::decoder::AgentDecoder;
    use crate::event::Event;

    #[test]
    fn reconnect_notices_are_retries() {
        assert_eq!(
            reconnecting("Reconnecting... 2/5 (stream disconnected before completion)"),
            Some((Some(2), Some(5)))
        );
        assert_eq!(reconnecting("Reconnecting..."), Some((None, None)));
        assert_eq!(reconnecting("exceeded retry limit, last status: 429"), None);
        assert_eq!(reconnecting("Reconn"), None);
        assert_eq!(reconnecting("é"), None);
    }

    /// As Codex 0.171.0 printed them: two request retries, then success;
    /// and a 429 it does not retry, whose error `turn.failed` repeats.
    #[test]
    fn only_reconnects_count_not_the_final_error() {
        let run = |lines: &[&str]| {
            let mut d = AgentDecoder::new(Agent::Codex);
            let mut events = Vec::new();
            for l in lines {
                d.line(l.as_bytes(), &mut events);
            }
            (d.summary().clone(), events)
        };
        let (s, events) = run(&[
            r#"{"type":"turn.started"}"#,
            r#"{"type":"error","message":"Reconnecting... 1/5 (We’re currently experiencing high demand, which may cause temporary errors.)"}"#,
            r#"{"type":"error","message":"Reconnecting... 2/5 (We’re currently experiencing high demand, which may cause temporary errors.)"}"#,
            r#"{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"recovered"}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":21,"output_tokens":8}}"#,
        ]);
        assert_eq!(s.reported.retries, 2);
        assert!(matches!(
            events[0],
            Event::Retry {
                attempt: Some(1),
                max_attempts: Some(5),
                ..
            }
        ));
        let (s, events) = run(&[
            r#"{"type":"turn.started"}"#,
            r#"{"type":"error","message":"exceeded retry limit, last status: 429 Too Many Requests"}"#,
            r#"{"type":"turn.failed","error":{"message":"exceeded retry limit, last status: 429 Too Many Requests"}}"#,
        ]);
        assert_eq!(s.reported.retries, 0);
        assert!(!events.iter().any(|e| matches!(e, Event::Retry { .. })));
        assert_eq!(s.terminal, Some(false));
    }
}
