//! Gemini CLI: `gemini --output-format stream-json`.
//!
//! `init`, `message` (the user prompt once, then assistant chunks with
//! `delta: true`), `tool_use`, `tool_result`, non-fatal `error`, and the
//! terminal `result` whose `status` decides and whose `stats` carry the
//! usage (no cost).
//!
//! Gemini's `input_tokens` include the cached ones (`input` leaves them
//! out), and its `output_tokens` leave out the thoughts, which only its
//! `total_tokens` count: warden's `output` adds them back, and they are
//! its `reasoning`. Gemini reports no model calls: one is counted when
//! the model's output (text, a tool call) follows the prompt or a tool
//! result.

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
pub struct Gemini {
    /// Assistant text since the last prompt or tool result.
    turn_text: String,
    in_assistant: bool,
    /// Whether the model's next output is a new model call: at the start,
    /// and after a tool result (it goes back to the model).
    answered: bool,
}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", borrow)]
    ty: Cow<'a, str>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default, borrow)]
    role: Option<Cow<'a, str>>,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_name: Option<String>,
    #[serde(default)]
    tool_id: Option<String>,
    #[serde(default, borrow)]
    parameters: Option<&'a RawValue>,
    #[serde(default, borrow)]
    status: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    output: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<ErrorBody>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    stats: Option<Stats>,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default, rename = "type")]
    ty: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
struct Stats {
    #[serde(default)]
    input_tokens: Option<Figure>,
    #[serde(default)]
    output_tokens: Option<Figure>,
    #[serde(default)]
    cached: Option<Figure>,
    #[serde(default)]
    input: Option<Figure>,
    #[serde(default)]
    total_tokens: Option<Figure>,
}

impl Stats {
    fn tokens(&self, out: &mut Out<'_>) -> Tokens {
        let prompt = out.count("stats.input_tokens", self.input_tokens);
        let cached = out.count("stats.cached", self.cached);
        let candidates = out.count("stats.output_tokens", self.output_tokens);
        // The thoughts are what the total has beyond prompt and answer.
        let total = self
            .total_tokens
            .and_then(|t| out.count("stats.total_tokens", Some(t)));
        let thoughts = match (total, prompt, candidates) {
            (Some(t), Some(p), Some(c)) => Some(t.saturating_sub(p.saturating_add(c))),
            _ => None,
        };
        Tokens {
            input: match self.input {
                Some(i) => out.count("stats.input", Some(i)),
                None => prompt.map(|p| p.saturating_sub(cached.unwrap_or(0))),
            },
            output: candidates.map(|c| c.saturating_add(thoughts.unwrap_or(0))),
            cache_read: cached,
            // Gemini CLI reports no cache writes: not known.
            cache_write: None,
            reasoning: thoughts,
        }
    }
}

impl Gemini {
    /// Counts a model call at the model's first output after the prompt
    /// or a tool result.
    fn model_output(&mut self, out: &mut Out<'_>) {
        if !self.answered {
            self.answered = true;
            out.turn();
        }
    }
}

/// Where big tool outputs are: read only through [`Cut::output_of`].
pub(crate) const BIG: &[&[Step]] = &[&[Step::Key("output")]];

impl Decode for Gemini {
    fn line(&mut self, line: &[u8], out: &mut Out<'_>) -> bool {
        let cut = Cut::new(line, BIG);
        let Some(l) = parse::<Line<'_>>(cut.line()) else {
            return false;
        };
        match l.ty.as_ref() {
            "init" => out.session(l.session_id, l.model, None),
            "message" => {
                if l.role.as_deref() == Some("assistant") {
                    self.model_output(out);
                    if !self.in_assistant {
                        self.in_assistant = true;
                        self.turn_text.clear();
                    }
                    let text = l.content.unwrap_or_default();
                    self.turn_text.push_str(&text);
                    out.text(text);
                } else {
                    self.in_assistant = false;
                }
            }
            "tool_use" => {
                self.model_output(out);
                self.in_assistant = false;
                out.tool_started(
                    l.tool_id.unwrap_or_default(),
                    l.tool_name.unwrap_or_else(|| "unknown".into()),
                    input_view(l.parameters),
                    None,
                );
            }
            "tool_result" => {
                self.answered = false;
                let failed = l.status.as_deref() == Some("error");
                let output = match l.error.and_then(|e| e.message) {
                    Some(m) => Some(ToolOutput::text(&m)),
                    None => l.output.map(|o| cut.output_of(o)),
                };
                out.tool_finished(l.tool_id.unwrap_or_default(), None, failed, output);
            }
            "error" => {
                let message = l.message.unwrap_or_else(|| "error".into());
                out.error(message.clone(), ErrorClass::classify(&message, None), false);
            }
            "result" => {
                if let Some(s) = l.stats {
                    let tokens = s.tokens(out);
                    out.usage_total(tokens, None);
                }
                if l.status.as_deref() == Some("success") {
                    let text = (!self.turn_text.is_empty()).then(|| self.turn_text.clone());
                    out.result(true, text, None);
                } else {
                    let (kind, message) =
                        l.error.map(|e| (e.ty, e.message)).unwrap_or((None, None));
                    let message = message.unwrap_or_else(|| "the run ended with an error".into());
                    let class = match kind.as_deref() {
                        Some(k) if k.contains("Auth") => ErrorClass::Authentication,
                        _ => ErrorClass::classify(&message, None),
                    };
                    let full = match kind {
                        Some(k) => format!("{k}: {message}"),
                        None => message,
                    };
                    out.error(full.clone(), class, true);
                    out.result(false, None, Some(full));
                }
            }
            _ => {}
        }
        true
    }
}
