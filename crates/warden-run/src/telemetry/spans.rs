//! The spans of a run, made from its events (pure: no I/O, no clock of
//! its own): a span for the run, a child per tool call and per model
//! request the stream shows, and span events for stall warnings, orphans
//! and retries. Times come from the events' own stamps, so a span is made
//! when its end is known, with its start in the past.

use std::time::{Duration, SystemTime};

use warden_events::{Agent, Event};

use crate::Stamped;
use crate::timeline::{Bounds, Fold, Folded, ModelRequest, ToolCall};

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

/// The GenAI token attributes of `t`: a count not known is left out, not
/// written as 0.
pub(crate) fn usage_attributes(t: &warden_events::Tokens, attributes: &mut Attributes) {
    let counts = [
        ("gen_ai.usage.input_tokens", t.input),
        ("gen_ai.usage.output_tokens", t.output),
        ("gen_ai.usage.cache_read.input_tokens", t.cache_read),
        ("gen_ai.usage.cache_creation.input_tokens", t.cache_write),
    ];
    for (name, count) in counts {
        if let Some(c) = count {
            attributes.push((name, c.into()));
        }
    }
}

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
/// How much of a name from the agent (a model, a tool, a call id, a
/// session id) a span carries: the agent's stream is hostile input, and a
/// name of megabytes would be copied into every span and export.
const NAME_CHARS: usize = 128;
/// How much of a longer text (a reason, a command line) a span carries.
const TEXT_CHARS: usize = 1024;
/// The most tool calls kept open at once (a stream that starts calls and
/// never ends them cannot grow this without bound).
const MAX_OPEN_TOOLS: usize = 1024;

pub(crate) use crate::timeline::cap;

/// What a run's span says of the check, hook or prompt command it is.
#[derive(Debug, Clone)]
pub(crate) struct StepSpan {
    pub(crate) kind: crate::StepKind,
    pub(crate) iteration: Option<u32>,
    pub(crate) command: String,
}

impl StepSpan {
    /// The span's name: `check`, `hook setup`, `hook finally`,
    /// `prompt_command`.
    pub(crate) fn name(&self) -> String {
        use crate::StepKind;
        match self.kind {
            StepKind::Check | StepKind::PromptCommand => self.kind.as_str().to_string(),
            kind => format!("hook {kind}"),
        }
    }
}

/// The spans of one run, built as its events come.
pub(crate) struct RunSpans {
    ids: TraceIds,
    started: SystemTime,
    agent: Agent,
    model: Option<String>,
    /// Tool calls and model requests, as the events make them.
    fold: Fold,
    children: Vec<SpanRecord>,
    /// Child spans left out past [`MAX_CHILD_SPANS`].
    children_dropped: u64,
    events: Vec<SpanEvent>,
    /// The check, hook or prompt command this run is (`None`: an agent's
    /// run).
    step: Option<StepSpan>,
}

impl RunSpans {
    pub(crate) fn new(ids: TraceIds, agent: Agent, started: SystemTime) -> Self {
        Self {
            ids,
            started,
            agent,
            model: None,
            fold: Fold::new().bounded(Bounds {
                open_tools: MAX_OPEN_TOOLS,
                name_chars: NAME_CHARS,
                input_chars: INPUT_CHARS,
            }),
            children: Vec::new(),
            children_dropped: 0,
            events: Vec::new(),
            step: None,
        }
    }

    /// The spans of a session's check, hook or prompt command (`step`),
    /// rather than of an agent's run.
    pub(crate) fn for_step(mut self, step: Option<StepSpan>) -> Self {
        self.step = step;
        self
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
        let mut folded = Vec::new();
        self.fold.push(e, |f| folded.push(f));
        for f in folded {
            self.folded(f);
        }
        let t = e.t_ms;
        match &e.event {
            Event::SessionStarted { model: Some(m), .. } => self.model = Some(cap(m, NAME_CHARS)),
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
                    ("process.command_line", cap(cmdline, TEXT_CHARS).into()),
                    ("warden.held_pipe", (*held_pipe).into()),
                ],
            ),
            Event::Retry {
                attempt, reason, ..
            } => {
                let mut attributes: Attributes =
                    vec![("warden.reason", cap(reason, TEXT_CHARS).into())];
                if let Some(a) = attempt {
                    attributes.push(("warden.attempt", (*a).into()));
                }
                self.event("warden.agent_retry", t, attributes);
            }
            _ => {}
        }
    }

    /// A tool call or model request the fold closed, as a span.
    fn folded(&mut self, f: Folded) {
        match f {
            Folded::Tool(call) => self.tool_span(call),
            Folded::Request(r) => self.request_span(r),
            _ => {}
        }
    }

    /// A tool call's span; one still open when the run ended is in error.
    fn tool_span(&mut self, call: ToolCall) {
        let mut attributes: Attributes = vec![
            ("gen_ai.operation.name", "execute_tool".into()),
            ("gen_ai.tool.name", call.name.as_str().into()),
            ("gen_ai.tool.call.id", call.id.as_str().into()),
        ];
        if call.finished
            && let Some(input) = call.input
        {
            attributes.push(("warden.tool.input", input.into()));
        }
        let error = if !call.finished {
            Some("the run ended while the tool was running".into())
        } else {
            call.failed
                .then(|| format!("the tool {} failed", call.name))
        };
        let span = SpanRecord {
            trace_id: self.ids.trace(),
            span_id: TraceIds::new_span_id(),
            parent_span_id: Some(self.ids.span()),
            parent_is_remote: false,
            name: format!("execute_tool {}", call.name),
            kind: Kind::Internal,
            start: self.at(call.start_ms),
            end: self.at(call.end_ms),
            attributes,
            events: Vec::new(),
            error,
        };
        self.child(span);
    }

    /// A model request's `chat` span.
    fn request_span(&mut self, r: ModelRequest) {
        let model = self.model.clone();
        let mut attributes: Attributes = vec![
            ("gen_ai.operation.name", "chat".into()),
            ("gen_ai.provider.name", provider(self.agent).into()),
        ];
        usage_attributes(&r.tokens, &mut attributes);
        if let Some(m) = &model {
            attributes.push(("gen_ai.request.model", m.as_str().into()));
        }
        if let Some(c) = r.cost_usd {
            attributes.push(("warden.cost_usd", c.into()));
        }
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
            start: self.at(r.start_ms),
            end: self.at(r.end_ms),
            attributes,
            events: Vec::new(),
            error: None,
        };
        self.child(span);
    }

    /// The run's span and its children, from its report. A tool call
    /// still open at the end is a span that ends with the run, in error.
    pub(crate) fn finish(mut self, r: &Report) -> Vec<SpanRecord> {
        let end_ms = r.duration_ms;
        let mut folded = Vec::new();
        self.fold.finish(end_ms, |f| folded.push(f));
        for f in folded {
            self.folded(f);
        }
        let verdict = r.verdict.map_or("unknown", |v| v.as_str());
        let mut attributes: Attributes = vec![
            ("gen_ai.operation.name", "invoke_agent".into()),
            ("gen_ai.agent.name", r.agent.as_str().into()),
            ("gen_ai.provider.name", provider(self.agent).into()),
            ("warden.run_id", r.run_id.as_str().into()),
            ("warden.verdict", verdict.into()),
            ("warden.reason", cap(&r.reason, TEXT_CHARS).into()),
            ("warden.orphans_killed", r.orphans_killed.into()),
            ("warden.stall_warnings", r.stall_warnings.into()),
            ("warden.forced_completion", r.forced_completion.into()),
            ("warden.tool_calls", r.reported.tool_calls.into()),
            ("warden.turns", r.reported.turns.into()),
            ("warden.run_dir", r.run_dir.display().to_string().into()),
        ];
        usage_attributes(&r.reported.tokens, &mut attributes);
        if let Some(m) = r.reported.model.as_ref().or(self.model.as_ref()) {
            attributes.push(("gen_ai.request.model", cap(m, NAME_CHARS).into()));
        }
        if let Some(id) = &r.reported.session_id {
            attributes.push(("gen_ai.conversation.id", cap(id, NAME_CHARS).into()));
        }
        if let Some(c) = r.reported.cost_usd {
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
        let name = match &self.step {
            // A command of the session's, not an agent: no `gen_ai`
            // attributes, which would count it as one.
            Some(step) => {
                attributes.retain(|(k, _)| !k.starts_with("gen_ai."));
                attributes.push(("warden.step.kind", step.kind.as_str().into()));
                attributes.push(("warden.step.command", cap(&step.command, TEXT_CHARS).into()));
                if let Some(i) = step.iteration {
                    attributes.push(("warden.iteration", i.into()));
                }
                step.name()
            }
            None => format!("invoke_agent {}", r.agent),
        };
        let run = SpanRecord {
            trace_id: self.ids.trace(),
            span_id: self.ids.span(),
            parent_span_id: self.ids.parent(),
            parent_is_remote: self.ids.parent_is_remote,
            name,
            kind: Kind::Internal,
            start: self.started,
            end: self.at(end_ms),
            attributes,
            events: std::mem::take(&mut self.events),
            error: (verdict != "succeeded")
                .then(|| format!("{verdict}: {}", cap(&r.reason, TEXT_CHARS))),
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

#[cfg(test)]
mod tests {
    use super::*;
    use warden_events::{SchemaVersion, Tokens};

    fn at(t_ms: u64, event: Event) -> Stamped {
        Stamped {
            schema_version: SchemaVersion,
            t_ms,
            event,
        }
    }

    fn usage(input: u64, output: u64) -> Event {
        let mut tokens = Tokens::default();
        tokens.input = Some(input);
        tokens.output = Some(output);
        Event::Usage {
            tokens,
            cost_usd: None,
            cumulative: false,
        }
    }

    fn spans(events: Vec<Stamped>, duration_ms: u64) -> Vec<SpanRecord> {
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let mut s = RunSpans::new(TraceIds::root(), Agent::Claude, start);
        for e in &events {
            s.observe(e);
        }
        let mut r = crate::report::sample();
        r.duration_ms = duration_ms;
        r.verdict = Some(crate::Verdict::Succeeded);
        s.finish(&r)
    }

    #[test]
    fn a_check_or_hook_is_a_span_named_for_it_and_not_an_agent() {
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let named = |kind, iteration| {
            let s = RunSpans::new(TraceIds::root(), Agent::Exec, start).for_step(Some(
                super::StepSpan {
                    kind,
                    iteration,
                    command: "cargo test".into(),
                },
            ));
            let mut r = crate::report::sample();
            r.verdict = Some(crate::Verdict::AgentFailed);
            r.exit_code = Some(1);
            s.finish(&r).remove(0)
        };
        let check = named(crate::StepKind::Check, Some(2));
        assert_eq!(check.name, "check");
        let attr = |span: &SpanRecord, k: &str| {
            span.attributes
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(attr(&check, "warden.step.kind"), Some("check".into()));
        assert_eq!(
            attr(&check, "warden.step.command"),
            Some("cargo test".into())
        );
        assert_eq!(attr(&check, "warden.iteration"), Some(2u32.into()));
        assert_eq!(attr(&check, "process.exit.code"), Some(1i32.into()));
        assert!(
            !check
                .attributes
                .iter()
                .any(|(k, _)| k.starts_with("gen_ai.")),
            "{:?}",
            check.attributes
        );
        assert!(check.error.is_some(), "a failed check is a span in error");
        let setup = named(crate::StepKind::Setup, None);
        assert_eq!(setup.name, "hook setup");
        assert_eq!(attr(&setup, "warden.iteration"), None);
        assert_eq!(
            named(crate::StepKind::OnSuccess, None).name,
            "hook on_success"
        );
        // An agent's run keeps its name.
        let run = spans(Vec::new(), 10).remove(0);
        assert_eq!(run.name, "invoke_agent claude");
    }

    #[test]
    fn a_request_reported_in_parts_is_one_chat_span_ending_at_its_tool_call() {
        let all = spans(
            vec![
                at(
                    0,
                    Event::SessionStarted {
                        session_id: None,
                        model: Some("m1".into()),
                        agent_version: None,
                    },
                ),
                at(10, Event::Text { text: "hi".into() }),
                at(20, usage(100, 1)),
                at(30, usage(0, 40)),
                at(
                    35,
                    Event::ToolStarted {
                        id: "t1".into(),
                        name: "Bash".into(),
                        input: Some("ls".into()),
                        timeout_ms: None,
                    },
                ),
                at(
                    50,
                    Event::ToolFinished {
                        id: "t1".into(),
                        name: "Bash".into(),
                        is_error: false,
                        output: None,
                        output_bytes: 0,
                        duration_ms: None,
                    },
                ),
                at(70, usage(140, 5)),
            ],
            80,
        );
        let chats: Vec<&SpanRecord> = all.iter().filter(|s| s.name == "chat m1").collect();
        assert_eq!(chats.len(), 2, "{all:#?}");
        let tokens = |s: &SpanRecord, k: &str| {
            s.attributes
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.clone())
        };
        // The first: from the session's start to its last part, both
        // parts' tokens.
        assert_eq!(chats[0].start, all[0].start);
        assert_eq!(
            tokens(chats[0], "gen_ai.usage.input_tokens"),
            Some(Value::Int(100))
        );
        assert_eq!(
            tokens(chats[0], "gen_ai.usage.output_tokens"),
            Some(Value::Int(41))
        );
        // The second: from the tool's result to its usage.
        let ms = |t: SystemTime| t.duration_since(all[0].start).unwrap().as_millis();
        assert_eq!((ms(chats[1].start), ms(chats[1].end)), (50, 70));
        let tool = all.iter().find(|s| s.name == "execute_tool Bash").unwrap();
        assert_eq!((ms(tool.start), ms(tool.end)), (35, 50));
    }

    #[test]
    fn names_and_texts_from_the_agent_are_cut_and_open_calls_bounded() {
        let huge = "x".repeat(1 << 20);
        let mut events = vec![at(
            0,
            Event::SessionStarted {
                session_id: None,
                model: Some(huge.clone()),
                agent_version: None,
            },
        )];
        for i in 0..(MAX_OPEN_TOOLS as u64 + 500) {
            events.push(at(
                i,
                Event::ToolStarted {
                    id: format!("{i}{huge}"),
                    name: huge.clone(),
                    input: Some(huge.clone()),
                    timeout_ms: None,
                },
            ));
        }
        events.push(at(
            5,
            Event::Orphan {
                pid: 7,
                cmdline: huge.clone(),
                held_pipe: false,
            },
        ));
        let all = spans(events, 2000);
        // The run's span and the calls left open (as many as were kept).
        assert_eq!(all.len(), 1 + MAX_OPEN_TOOLS, "open calls are bounded");
        for s in &all {
            assert!(s.name.len() <= 16 + NAME_CHARS, "{}", s.name.len());
            for (k, v) in s
                .attributes
                .iter()
                .chain(s.events.iter().flat_map(|e| e.attributes.iter()))
            {
                if let Value::Str(text) = v {
                    assert!(text.chars().count() <= TEXT_CHARS, "{k}: {}", text.len());
                }
            }
        }
    }
}
