//! OpenCode: `opencode run --format json`.
//!
//! Parts are printed only when finished: `step_start`, `text`,
//! `reasoning`, `tool_use` (a finished tool, so start and finish at once),
//! `step_finish` (per-step tokens and cost, summed), `error`, and in newer
//! versions `done`. The terminal event is the `step_finish` whose reason is
//! `stop`, or `done`; an `error` line fails the run.
//!
//! A step is one model call. OpenCode's `tokens.input` leaves out the
//! cached tokens, as warden's does; its `tokens.output` leaves out the
//! reasoning, which warden's counts. Since a tool is printed only when
//! done, its duration is OpenCode's own (`state.time`), not the time
//! between events. The model is not in the stream: the report takes it
//! from the command line.

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
pub struct OpenCode {
    step_text: String,
    failed: Option<String>,
    started: bool,
}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", borrow)]
    ty: Cow<'a, str>,
    #[serde(default, rename = "sessionID", borrow)]
    session_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    part: Option<Part<'a>>,
    #[serde(default, borrow)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Part<'a> {
    #[serde(default)]
    text: Option<String>,
    #[serde(default, rename = "callID", borrow)]
    call_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default)]
    tool: Option<String>,
    #[serde(default, borrow)]
    state: Option<State<'a>>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    cost: Option<Figure>,
    #[serde(default)]
    tokens: Option<PartTokens>,
}

#[derive(Deserialize)]
struct State<'a> {
    #[serde(default, borrow)]
    status: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    input: Option<&'a RawValue>,
    #[serde(default, borrow)]
    output: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    time: Option<Span>,
}

/// When a tool call ran, by OpenCode's clock (ms since the epoch).
#[derive(Deserialize)]
struct Span {
    #[serde(default)]
    start: Option<f64>,
    #[serde(default)]
    end: Option<f64>,
}

impl Span {
    fn duration_ms(&self) -> Option<u64> {
        let (start, end) = (self.start?, self.end?);
        (end >= start && start > 0.0).then_some((end - start) as u64)
    }
}

#[derive(Deserialize)]
struct PartTokens {
    #[serde(default)]
    input: Option<Figure>,
    #[serde(default)]
    output: Option<Figure>,
    #[serde(default)]
    reasoning: Option<Figure>,
    #[serde(default)]
    cache: Option<Cache>,
}

#[derive(Deserialize)]
struct Cache {
    #[serde(default)]
    read: Option<Figure>,
    #[serde(default)]
    write: Option<Figure>,
}

#[derive(Deserialize)]
struct ErrorObj {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    data: Option<ErrorData>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
struct ErrorData {
    #[serde(default)]
    message: Option<String>,
    #[serde(default, rename = "statusCode")]
    status_code: Option<i64>,
}

/// Where big tool outputs are: read only through [`Cut::output_of`].
pub(crate) const BIG: &[&[Step]] = &[&[Step::Key("part"), Step::Key("state"), Step::Key("output")]];

impl Decode for OpenCode {
    fn line(&mut self, line: &[u8], out: &mut Out<'_>) -> bool {
        let cut = Cut::new(line, BIG);
        let Some(l) = parse::<Line<'_>>(cut.line()) else {
            return false;
        };
        if !self.started {
            self.started = true;
            out.session(l.session_id.as_deref().map(str::to_string), None, None);
        } else if let Some(id) = &l.session_id {
            out.session_id(id);
        }
        match l.ty.as_ref() {
            "step_start" => {
                out.turn();
                self.step_text.clear();
            }
            "text" => {
                let text = l.part.and_then(|p| p.text).unwrap_or_default();
                self.step_text.push_str(&text);
                out.text(text);
            }
            "reasoning" => out.thinking(l.part.and_then(|p| p.text).unwrap_or_default()),
            "tool_use" => {
                let Some(p) = l.part else { return true };
                let id = p.call_id.or(p.id).map(Cow::into_owned).unwrap_or_default();
                let name = p.tool.unwrap_or_else(|| "unknown".into());
                let (input, is_error, output, took) = match p.state {
                    Some(s) => (
                        input_view(s.input),
                        s.status.as_deref() == Some("error"),
                        s.error
                            .as_deref()
                            .map(ToolOutput::text)
                            .or(s.output.map(|o| cut.output_of(o))),
                        s.time.as_ref().and_then(Span::duration_ms),
                    ),
                    None => (None, false, None, None),
                };
                out.tool_started(id.clone(), name.clone(), input, None);
                out.tool_finished_after(id, Some(name), is_error, output, took);
            }
            "step_finish" => {
                let Some(p) = l.part else { return true };
                if let Some(t) = p.tokens {
                    let cache = t.cache.unwrap_or(Cache {
                        read: None,
                        write: None,
                    });
                    // OpenCode's `output` leaves the reasoning out; warden's
                    // counts it.
                    let reasoning = out.count("part.tokens.reasoning", t.reasoning);
                    let tokens = Tokens {
                        input: out.count("part.tokens.input", t.input),
                        output: out
                            .count("part.tokens.output", t.output)
                            .map(|o| o.saturating_add(reasoning.unwrap_or(0))),
                        cache_read: out.count("part.tokens.cache.read", cache.read),
                        cache_write: out.count("part.tokens.cache.write", cache.write),
                        reasoning,
                    };
                    let cost = out.cost("part.cost", p.cost);
                    out.usage_step(tokens, cost);
                }
                if p.reason.as_deref() == Some("stop") {
                    self.finish(out);
                }
            }
            "done" if out.summary.terminal.is_none() => self.finish(out),
            "error" => {
                let (message, status) = l
                    .error
                    .and_then(|e| serde_json::from_str::<ErrorObj>(e.get()).ok())
                    .map(|e| {
                        let status = e.data.as_ref().and_then(|d| d.status_code);
                        let detail = e
                            .data
                            .and_then(|d| d.message)
                            .or(e.message)
                            .unwrap_or_default();
                        let name = e.name.unwrap_or_else(|| "Error".into());
                        (format!("{name}: {detail}"), status)
                    })
                    .unwrap_or_else(|| ("error".into(), None));
                let class = if message.starts_with("ProviderAuthError") {
                    ErrorClass::Authentication
                } else {
                    ErrorClass::classify(&message, status)
                };
                out.error(message.clone(), class, true);
                self.failed = Some(message.clone());
                out.result(false, None, Some(message));
            }
            _ => {}
        }
        true
    }
}

impl OpenCode {
    fn finish(&mut self, out: &mut Out<'_>) {
        let text = (!self.step_text.is_empty()).then(|| self.step_text.clone());
        match self.failed.clone() {
            Some(e) => out.result(false, None, Some(e)),
            None => out.result(true, text, None),
        }
    }
}
