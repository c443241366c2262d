//! The spans of a run, made from its events (pure: no I/O, no clock of
//! its own): a span for the run, a child per tool call and per model
//! request the stream shows, and span events for stall warnings, orphans
//! and retries. Times come from the events' own stamps, so a span is made
//! when its end is known, with its start in the past.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use warden_events::{Agent, Event};

use crate::Stamped;

use super::TraceIds;
use crate::Report;

/// A value of an attribute.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.to_string())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(s)
    }
}
impl From<u64> for Value {
    fn from(n: u64) -> Self {
        Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}
impl From<u32> for Value {
    fn from(n: u32) -> Self {
        Value::Int(i64::from(n))
    }
}
impl From<i32> for Value {
    fn from(n: i32) -> Self {
        Value::Int(i64::from(n))
    }
}
impl From<f64> for Value {
    fn from(n: f64) -> Self {
        Value::Float(n)
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

pub(crate) type Attributes = Vec<(&'static str, Value)>;

/// What a span is to its caller, as OpenTelemetry's span kinds say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Internal,
    Client,
}

/// One span, as warden made it; turned into the exporter's type on the
/// export thread.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SpanRecord {
    pub trace_id: u128,
    pub span_id: u64,
    pub parent_span_id: Option<u64>,
    /// The parent came from outside this process (`TRACEPARENT`).
    pub parent_is_remote: bool,
    pub name: String,
    pub kind: Kind,
    pub start: SystemTime,
    pub end: SystemTime,
    pub attributes: Attributes,
    pub events: Vec<SpanEvent>,
    /// `Some(message)`: the span ended in error.
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SpanEvent {
    pub name: &'static str,
    pub at: SystemTime,
    pub attributes: Attributes,
}

/// The most tool-call and model-request spans one run exports: a run of
/// thousands of calls gets its first ones and a count of the rest.
pub(crate) const MAX_CHILD_SPANS: usize = 2000;
/// The most span events on one span.
const MAX_SPAN_EVENTS: usize = 128;
/// How much of a tool's input an attribute carries.
const INPUT_CHARS: usize = 256;

/// A tool call seen starting.
struct OpenTool {
    name: String,
    input: Option<String>,
    at_ms: u64,
}

/// The spans of one run, built as its events come.
pub(crate) struct RunSpans {
    ids: TraceIds,
    started: SystemTime,
    agent: Agent,
    model: Option<String>,
    open: BTreeMap<String, OpenTool>,
    children: Vec<SpanRecord>,
    /// Child spans left out past [`MAX_CHILD_SPANS`].
    children_dropped: u64,
    events: Vec<SpanEvent>,
    /// Since when the agent has had the turn: the start of the next model
    /// request span (the first activity, the last usage or tool result).
    turn_since_ms: Option<u64>,
    requests: u32,
}

impl RunSpans {
    pub(crate) fn new(ids: TraceIds, agent: Agent, started: SystemTime) -> Self {
        Self {
            ids,
            started,
            agent,
            model: None,
            open: BTreeMap::new(),
            children: Vec::new(),
            children_dropped: 0,
            events: Vec::new(),
            turn_since_ms: None,
            requests: 0,
        }
    }

    fn at(&self, t_ms: u64) -> SystemTime {
        self.started + Duration::from_millis(t_ms)
    }

    fn child(&mut self, span: SpanRecord) {
        if self.children.len() < MAX_CHILD_SPANS {
            self.children.push(span);
        } else {
            self.children_dropped += 1;
        }
    }

    fn event(&mut self, name: &'static str, t_ms: u64, attributes: Attributes) {
        if self.events.len() < MAX_SPAN_EVENTS {
            let at = self.at(t_ms);
            self.events.push(SpanEvent {
                name,
                at,
                attributes,
            });
        }
    }

    /// Takes in one event of the run.
    pub(crate) fn observe(&mut self, e: &Stamped) {
        let t = e.t_ms;
        match &e.event {
            Event::SessionStarted { model, .. } => {
                if model.is_some() {
                    self.model.clone_from(model);
                }
                self.turn_since_ms.get_or_insert(t);
            }
            Event::ToolStarted {
                id, name, input, ..
            } => {
                self.open.insert(
                    id.clone(),
                    OpenTool {
                        name: name.clone(),
                        input: input.clone(),
                        at_ms: t,
                    },
                );
            }
            Event::ToolFinished {
                id,
                name,
                is_error,
                duration_ms,
                ..
            } => {
                let open = self.open.remove(id);
                let start_ms = match (&open, duration_ms) {
                    (Some(o), _) => o.at_ms,
                    (None, Some(d)) => t.saturating_sub(*d),
                    (None, None) => t,
                };
                let mut attributes: Attributes = vec![
                    ("gen_ai.operation.name", "execute_tool".into()),
                    ("gen_ai.tool.name", name.as_str().into()),
                    ("gen_ai.tool.call.id", id.as_str().into()),
                ];
                if let Some(input) = open.as_ref().and_then(|o| o.input.as_deref()) {
                    attributes.push((
                        "warden.tool.input",
                        input.chars().take(INPUT_CHARS).collect::<String>().into(),
                    ));
                }
                let span = SpanRecord {
                    trace_id: self.ids.trace(),
                    span_id: TraceIds::new_span_id(),
                    parent_span_id: Some(self.ids.span()),
                    parent_is_remote: false,
                    name: format!("execute_tool {name}"),
                    kind: Kind::Internal,
                    start: self.at(start_ms),
                    end: self.at(t),
                    attributes,
                    events: Vec::new(),
                    error: is_error.then(|| format!("the tool {name} failed")),
                };
                self.child(span);
                self.turn_since_ms = Some(t);
            }
            Event::Usage {
                tokens,
                cost_usd,
                cumulative: false,
            } => {
                let model = self.model.clone();
                let start_ms = self.turn_since_ms.unwrap_or(t).min(t);
                let mut attributes: Attributes = vec![
                    ("gen_ai.operation.name", "chat".into()),
                    ("gen_ai.provider.name", provider(self.agent).into()),
                    ("gen_ai.usage.input_tokens", tokens.input.into()),
                    ("gen_ai.usage.output_tokens", tokens.output.into()),
                    (
                        "gen_ai.usage.cache_read.input_tokens",
                        tokens.cache_read.into(),
                    ),
                    (
                        "gen_ai.usage.cache_creation.input_tokens",
                        tokens.cache_write.into(),
                    ),
                ];
                if let Some(m) = &model {
                    attributes.push(("gen_ai.request.model", m.as_str().into()));
                }
                if let Some(c) = cost_usd {
                    attributes.push(("warden.cost_usd", (*c).into()));
                }
                self.requests += 1;
                let span = SpanRecord {
                    trace_id: self.ids.trace(),
                    span_id: TraceIds::new_span_id(),
                    parent_span_id: Some(self.ids.span()),
                    parent_is_remote: false,
                    name: match &model {
                        Some(m) => format!("chat {m}"),
                        None => "chat".into(),
                    },
                    kind: Kind::Client,
                    start: self.at(start_ms),
                    end: self.at(t),
                    attributes,
                    events: Vec::new(),
                    error: None,
                };
                self.child(span);
                self.turn_since_ms = Some(t);
            }
            Event::StallWarning {
                silent_ms,
                stall_timeout_ms,
            } => self.event(
                "warden.stall_warning",
                t,
                vec![
                    ("warden.silent_ms", (*silent_ms).into()),
                    ("warden.stall_timeout_ms", (*stall_timeout_ms).into()),
                ],
            ),
            Event::Orphan {
                pid,
                cmdline,
                held_pipe,
            } => self.event(
                "warden.orphan",
                t,
                vec![
                    ("process.pid", (*pid).into()),
                    ("process.command_line", cmdline.as_str().into()),
                    ("warden.held_pipe", (*held_pipe).into()),
                ],
            ),
            Event::Retry {
                attempt, reason, ..
            } => {
                let mut attributes: Attributes = vec![("warden.reason", reason.as_str().into())];
                if let Some(a) = attempt {
                    attributes.push(("warden.attempt", (*a).into()));
                }
                self.event("warden.agent_retry", t, attributes);
            }
            Event::Text { .. } | Event::Thinking { .. } | Event::Stderr { .. } => {
                // The first output gives the agent its first turn.
                self.turn_since_ms.get_or_insert(t);
            }
            _ => {}
        }
    }

    /// The run's span and its children, from its report. A tool call
    /// still open at the end is a span that ends with the run, in error.
    pub(crate) fn finish(mut self, r: &Report) -> Vec<SpanRecord> {
        let end_ms = r.duration_ms;
        let open = std::mem::take(&mut self.open);
        for (id, o) in open {
            let span = SpanRecord {
                trace_id: self.ids.trace(),
                span_id: TraceIds::new_span_id(),
                parent_span_id: Some(self.ids.span()),
                parent_is_remote: false,
                name: format!("execute_tool {}", o.name),
                kind: Kind::Internal,
                start: self.at(o.at_ms),
                end: self.at(end_ms.max(o.at_ms)),
                attributes: vec![
                    ("gen_ai.operation.name", "execute_tool".into()),
                    ("gen_ai.tool.name", o.name.as_str().into()),
                    ("gen_ai.tool.call.id", id.as_str().into()),
                ],
                events: Vec::new(),
                error: Some("the run ended while the tool was running".into()),
            };
            self.child(span);
        }
        let verdict = r.verdict.map_or("unknown", |v| v.as_str());
        let mut attributes: Attributes = vec![
            ("gen_ai.operation.name", "invoke_agent".into()),
            ("gen_ai.agent.name", r.agent.as_str().into()),
            ("gen_ai.provider.name", provider(self.agent).into()),
            ("warden.run_id", r.run_id.as_str().into()),
            ("warden.verdict", verdict.into()),
            ("warden.reason", r.reason.as_str().into()),
            ("warden.orphans_killed", r.orphans_killed.into()),
            ("warden.stall_warnings", r.stall_warnings.into()),
            ("warden.forced_completion", r.forced_completion.into()),
            ("warden.tool_calls", r.tool_calls.into()),
            ("warden.turns", r.turns.into()),
            ("gen_ai.usage.input_tokens", r.tokens.input.into()),
            ("gen_ai.usage.output_tokens", r.tokens.output.into()),
            (
                "gen_ai.usage.cache_read.input_tokens",
                r.tokens.cache_read.into(),
            ),
            (
                "gen_ai.usage.cache_creation.input_tokens",
                r.tokens.cache_write.into(),
            ),
            ("warden.run_dir", r.run_dir.display().to_string().into()),
        ];
        if let Some(m) = r.model.as_ref().or(self.model.as_ref()) {
            attributes.push(("gen_ai.request.model", m.as_str().into()));
        }
        if let Some(id) = &r.session_id {
            attributes.push(("gen_ai.conversation.id", id.as_str().into()));
        }
        if let Some(c) = r.cost_usd {
            attributes.push(("warden.cost_usd", c.into()));
        }
        if let Some(code) = r.exit_code {
            attributes.push(("process.exit.code", code.into()));
        }
        if let Some(ms) = r.time_to_first_activity_ms {
            attributes.push(("warden.time_to_first_activity_ms", ms.into()));
        }
        if self.children_dropped > 0 {
            attributes.push(("warden.child_spans_dropped", self.children_dropped.into()));
        }
        let run = SpanRecord {
            trace_id: self.ids.trace(),
            span_id: self.ids.span(),
            parent_span_id: self.ids.parent(),
            parent_is_remote: self.ids.parent_is_remote,
            name: format!("invoke_agent {}", r.agent),
            kind: Kind::Internal,
            start: self.started,
            end: self.at(end_ms),
            attributes,
            events: std::mem::take(&mut self.events),
            error: (verdict != "succeeded").then(|| format!("{verdict}: {}", r.reason)),
        };
        let mut all = vec![run];
        all.append(&mut self.children);
        all
    }
}

/// `gen_ai.provider.name` of an agent CLI: whose models it talks to by
/// default (`exec`: none known).
fn provider(agent: Agent) -> &'static str {
    match agent {
        Agent::Claude => "anthropic",
        Agent::Codex => "openai",
        Agent::Gemini => "gcp.gemini",
        Agent::OpenCode | Agent::Pi | Agent::Exec => "unknown",
    }
}
