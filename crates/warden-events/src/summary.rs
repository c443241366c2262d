//! What a decoder has learned about a run so far, and the one place where
//! events and the summary are updated together.
//!
//! Every decoder reports through [`Out`], so the rules that must hold for
//! every agent hold in one place: a tool's finish closes its start, usage
//! adds up or is replaced by a running total, the first session id wins,
//! a fatal error is remembered for the verdict.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::event::{ErrorClass, Event, FigureProblem, Tokens};
use crate::figure::Figure;

/// How much of a tool's output or input an event carries; the whole of it
/// stays in `stdout.log`.
pub const PREVIEW: usize = 400;

/// A tool's output as events carry it: its start, and its whole size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub preview: String,
    pub bytes: u64,
}

impl ToolOutput {
    pub fn text(s: &str) -> Self {
        Self {
            preview: preview(s, PREVIEW),
            bytes: s.len() as u64,
        }
    }

    pub fn with_size(preview: String, bytes: u64) -> Self {
        Self { preview, bytes }
    }
}

/// The run as the agent's output describes it, as a run's report carries
/// it: `run.json` writes these fields among its own, and the decoder's
/// [`Summary`] keeps them up to date.
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Clone, Default, PartialEq, Serialize)]
// A report that carries these fields is described in its own words.
#[schemars(transform = no_description)]
pub struct AgentReport {
    pub agent_version: Option<String>,
    /// The model the agent says it used, else the one its command line
    /// named (`--model`, `-m`).
    pub model: Option<String>,
    pub session_id: Option<String>,
    /// Model calls the agent made in its own conversation (a subagent's
    /// are not counted), each counted once: a call that was retried is
    /// one turn.
    pub turns: u32,
    pub tool_calls: u32,
    /// Tokens, one meaning for every agent: see [`Tokens`].
    pub tokens: Tokens,
    pub cost_usd: Option<f64>,
    /// Model requests the agent sent again because the previous attempt
    /// failed, as it announced them (on stdout or stderr); the failure
    /// that ends a run is not one.
    pub retries: u32,
    /// The agent's last answer.
    pub final_text: Option<String>,
    /// The error the agent reported: one no retry fixes once any was
    /// reported, else a fatal one, else the last (the message: the
    /// terminal event's text, when it carried one).
    pub error_message: Option<String>,
    pub error_class: Option<ErrorClass>,
}

fn no_description(schema: &mut schemars::Schema) {
    schema.remove("description");
}

/// What a decoder has learned about a run so far.
///
/// Of the errors, `reported.error_message` names the one the run is
/// reported with, and its class: one no retry fixes (authentication,
/// quota, invalid request) once any was reported, else a fatal one, else
/// the last one (the terminal event's text replaces the message). The
/// last, not the first: the error that ended the run decides whether it
/// is retried, and a run that got over an `overloaded` and then failed
/// otherwise is no overloaded run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    /// What the run's report carries of it.
    #[serde(flatten)]
    pub reported: AgentReport,
    /// Whether `reported.error_message` came with a fatal error event (a
    /// later non-fatal one does not replace it).
    #[serde(skip)]
    error_fatal: bool,
    /// The last terminal event's word: `true` for success, `false` for
    /// failure, `None` while none came. An agent that recovers after
    /// reporting an error sends another one, which replaces it.
    pub terminal: Option<bool>,
    /// How many terminal events came.
    #[serde(skip)]
    pub terminal_events: u32,
    /// The agent went on working after its last terminal event (a retry,
    /// a new turn, a tool call, text): that event did not end the run, and
    /// silence is again the stall clock's to judge.
    #[serde(skip)]
    pub working_after_terminal: bool,
    /// The class of a fatal error (one no retry fixes) that is the last
    /// word so far: neither a terminal event nor any work came after it.
    #[serde(skip)]
    pub fatal_pending: Option<ErrorClass>,
    /// The classes of fatal errors already reported as events: a CLI that
    /// retries a bad credential ten times gets one fatal event, not ten.
    #[serde(skip)]
    fatal_reported: Vec<ErrorClass>,
    #[serde(skip)]
    pub(crate) open_tools: BTreeMap<String, OpenTool>,
    /// What a resumed session had already reported as its running total
    /// (Codex's `turn.completed` usage counts the whole thread, earlier
    /// `codex exec` runs of it included): taken off every running total,
    /// so that the run counts only its own tokens.
    #[serde(skip)]
    pub usage_baseline: Tokens,
    /// The line being decoded: its number in the stream (1 for the
    /// first), for the events that name it.
    #[serde(skip)]
    pub(crate) line: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OpenTool {
    pub name: String,
    pub timeout_ms: Option<u64>,
}

impl Summary {
    /// The word of the terminal event that ends the run as far as the
    /// stream tells: the last one, unless the agent went on working after
    /// it (then none, until the next).
    pub fn terminal_in_force(&self) -> Option<bool> {
        if self.working_after_terminal {
            None
        } else {
            self.terminal
        }
    }

    /// The longest time limit declared by a tool call that is still open.
    pub fn open_tool_timeout_ms(&self) -> Option<u64> {
        self.open_tools.values().filter_map(|t| t.timeout_ms).max()
    }

    /// Tool calls started and not finished yet, as `(id, name)`.
    pub fn open_tools(&self) -> impl Iterator<Item = (&str, &str)> {
        self.open_tools
            .iter()
            .map(|(id, t)| (id.as_str(), t.name.as_str()))
    }
}

/// Where a decoder puts what one line meant.
pub struct Out<'a> {
    pub summary: &'a mut Summary,
    pub events: &'a mut Vec<Event>,
}

/// The first `max` bytes of `s`, cut at a character boundary, with an
/// ellipsis when cut; newlines folded for one-line views.
pub fn preview(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut p = s[..end].to_string();
    if end < s.len() {
        p.push('…');
    }
    p
}

impl Out<'_> {
    pub fn session(&mut self, id: Option<String>, model: Option<String>, version: Option<String>) {
        let s = &mut *self.summary;
        if s.reported.session_id.is_none() {
            s.reported.session_id.clone_from(&id);
        }
        if model.is_some() {
            s.reported.model.clone_from(&model);
        }
        if version.is_some() {
            s.reported.agent_version.clone_from(&version);
        }
        self.events.push(Event::SessionStarted {
            session_id: id,
            model,
            agent_version: version,
        });
    }

    /// Notes a session id seen on any line, without an event.
    pub fn session_id(&mut self, id: &str) {
        if self.summary.reported.session_id.is_none() && !id.is_empty() {
            self.summary.reported.session_id = Some(id.to_string());
        }
    }

    pub fn text(&mut self, text: String) {
        if !text.is_empty() {
            self.working();
            self.events.push(Event::Text { text });
        }
    }

    pub fn thinking(&mut self, text: String) {
        if !text.is_empty() {
            self.working();
            self.events.push(Event::Thinking { text });
        }
    }

    /// The agent is at work (a new turn, a tool call, text): a
    /// terminal event before this did not end the run, and a fatal error
    /// before it was recovered from. Trailing output (usage, a tool
    /// closing) is not work.
    pub fn working(&mut self) {
        let s = &mut *self.summary;
        if s.terminal.is_some() {
            s.working_after_terminal = true;
        }
        s.fatal_pending = None;
    }

    pub fn final_text(&mut self, text: String) {
        self.summary.reported.final_text = Some(text);
    }

    pub fn tool_started(
        &mut self,
        id: String,
        name: String,
        input: Option<String>,
        timeout_ms: Option<u64>,
    ) {
        self.working();
        self.summary.reported.tool_calls += 1;
        self.summary.open_tools.insert(
            id.clone(),
            OpenTool {
                name: name.clone(),
                timeout_ms,
            },
        );
        self.events.push(Event::ToolStarted {
            id,
            name,
            input: input.map(|i| preview(&i, PREVIEW)),
            timeout_ms,
        });
    }

    pub fn tool_progress(&mut self, id: String, elapsed_ms: Option<u64>, output: Option<&str>) {
        self.events.push(Event::ToolProgress {
            id,
            elapsed_ms,
            output: output.map(|o| preview(o, PREVIEW)),
        });
    }

    /// Ends a tool call; one that never started (agents that report tools
    /// only when done) is counted here.
    pub fn tool_finished(
        &mut self,
        id: String,
        name: Option<String>,
        is_error: bool,
        output: Option<ToolOutput>,
    ) {
        self.tool_finished_after(id, name, is_error, output, None);
    }

    /// Ends a tool call whose duration the agent reported itself.
    pub fn tool_finished_after(
        &mut self,
        id: String,
        name: Option<String>,
        is_error: bool,
        output: Option<ToolOutput>,
        duration_ms: Option<u64>,
    ) {
        let open = self.summary.open_tools.remove(&id);
        if open.is_none() {
            self.summary.reported.tool_calls += 1;
        }
        let name = name
            .or(open.map(|t| t.name))
            .unwrap_or_else(|| "unknown".to_string());
        let (output, output_bytes) = match output {
            Some(o) => (Some(o.preview), o.bytes),
            None => (None, 0),
        };
        self.events.push(Event::ToolFinished {
            id,
            name,
            is_error,
            output,
            output_bytes,
            duration_ms,
        });
    }

    /// One more model call answered (see `turns` in the book's run directory chapter).
    pub fn turn(&mut self) {
        self.summary.reported.turns += 1;
    }

    /// A token count from the agent's output at `field` of the line: what
    /// counts; `None` (not known) when the line has none, or when it is
    /// negative, infinite or no number (then with a `usage_ignored`
    /// event). A count past `u64::MAX` stops there.
    pub fn count(&mut self, field: &str, figure: Option<Figure>) -> Option<u64> {
        self.believed(field, figure).map(|f| f as u64)
    }

    /// A cost in USD from the agent's output at `field` of the line: `None`
    /// when none is given, or when it is negative, infinite or no number
    /// (then with a `usage_ignored` event).
    pub fn cost(&mut self, field: &str, figure: Option<Figure>) -> Option<f64> {
        self.believed(field, figure)
    }

    fn believed(&mut self, field: &str, figure: Option<Figure>) -> Option<f64> {
        let figure = figure?;
        match figure.check() {
            Ok(f) => Some(f),
            Err(problem) => {
                self.ignored(field, figure.shown(), problem);
                None
            }
        }
    }

    fn ignored(&mut self, field: &str, value: String, problem: FigureProblem) {
        self.events.push(Event::UsageIgnored {
            line: self.summary.line,
            field: field.to_string(),
            value,
            problem,
        });
    }

    /// Usage for one step or message, added to the total. The figures are
    /// believed already ([`Out::count`], [`Out::cost`]); a cost that is
    /// not is left out all the same, so that no sum is ever paid back.
    pub fn usage_step(&mut self, tokens: Tokens, cost_usd: Option<f64>) {
        let cost_usd = cost_usd.filter(|c| c.is_finite() && *c >= 0.0);
        self.summary.reported.tokens.add(&tokens);
        if let Some(c) = cost_usd {
            let sum = self.summary.reported.cost_usd.get_or_insert(0.0);
            // A float sum of finite costs can still overflow: it stops at
            // the largest, and a report never says `null` for it.
            *sum = (*sum + c).min(f64::MAX);
        }
        self.events.push(Event::Usage {
            tokens,
            cost_usd,
            cumulative: false,
        });
    }

    /// The agent's own running total: it replaces what was added up, but
    /// never with less. A count or cost below what was counted so far (the
    /// agent's previous running total, or the steps added up since) is not
    /// believed: spending is never paid back, so a forged total of zero
    /// cannot wipe out the honest steps before it. The count stays where
    /// it was, with a `usage_ignored` event.
    pub fn usage_total(&mut self, tokens: Tokens, cost_usd: Option<f64>) {
        let given = tokens.beyond(&self.summary.usage_baseline);
        let mut cost_usd = cost_usd.filter(|c| c.is_finite() && *c >= 0.0);
        // What was counted so far: the last total and every step since.
        let had = self.summary.reported.tokens;
        let had_cost = self.summary.reported.cost_usd;
        let counts = [
            ("tokens.input", given.input, had.input),
            ("tokens.output", given.output, had.output),
            ("tokens.cache_read", given.cache_read, had.cache_read),
            ("tokens.cache_write", given.cache_write, had.cache_write),
            ("tokens.reasoning", given.reasoning, had.reasoning),
        ];
        for (field, now, before) in counts {
            if let (Some(now), Some(before)) = (now, before)
                && now < before
            {
                self.ignored(field, now.to_string(), FigureProblem::WentDown);
            }
        }
        let tokens = given.max(&had);
        if let (Some(now), Some(before)) = (cost_usd, had_cost)
            && now < before
        {
            self.ignored("cost_usd", now.to_string(), FigureProblem::WentDown);
            cost_usd = Some(before);
        }
        self.summary.reported.tokens = tokens;
        if cost_usd.is_some() {
            self.summary.reported.cost_usd = cost_usd;
        }
        self.events.push(Event::Usage {
            tokens,
            cost_usd,
            cumulative: true,
        });
    }

    pub fn retry(
        &mut self,
        attempt: Option<u32>,
        max_attempts: Option<u32>,
        delay_ms: Option<u64>,
        reason: String,
    ) {
        // Not work by itself (nor a recovery from a fatal error: that is
        // what a CLI that retries a bad key does); a decoder whose agent
        // retries after its terminal event says so with `working`.
        self.summary.reported.retries += 1;
        self.events.push(Event::Retry {
            attempt,
            max_attempts,
            delay_ms,
            reason,
        });
    }

    pub fn error(&mut self, message: String, class: ErrorClass, fatal: bool) {
        let s = &mut *self.summary;
        if fatal {
            s.fatal_pending = Some(class);
            if s.fatal_reported.contains(&class) {
                // The same fatal error again (the CLI retried it): no new
                // event, but its latest wording is often the most precise.
                s.reported.error_message = Some(message);
                return;
            }
            s.fatal_reported.push(class);
        }
        // See `Summary::error`: which error the report names.
        let keep = match s.reported.error_class {
            Some(c) if c.no_retry_fixes() => !class.no_retry_fixes(),
            Some(_) => s.error_fatal && !fatal && !class.no_retry_fixes(),
            None => false,
        };
        if !keep {
            s.reported.error_message = Some(message.clone());
            s.reported.error_class = Some(class);
            s.error_fatal = fatal;
        }
        self.events.push(Event::Error {
            message,
            class,
            fatal,
        });
    }

    /// The terminal event. The last one decides: an agent that reported
    /// an error and then recovered by itself sends another.
    pub fn result(&mut self, success: bool, text: Option<String>, error: Option<String>) {
        self.summary.terminal = Some(success);
        self.summary.terminal_events += 1;
        self.summary.working_after_terminal = false;
        // Decided by the agent itself: no fatal error is left to act on.
        self.summary.fatal_pending = None;
        if let Some(t) = &text {
            self.summary.reported.final_text = Some(t.clone());
        }
        if let Some(e) = &error {
            self.summary.reported.error_message = Some(e.clone());
            // The class of an error event before it stands (it had a
            // status to go by), unless the end's own text names one no
            // retry fixes.
            let class = ErrorClass::classify(e, None);
            let sticky = self
                .summary
                .reported
                .error_class
                .is_some_and(ErrorClass::no_retry_fixes);
            if self.summary.reported.error_class.is_none() || (class.no_retry_fixes() && !sticky) {
                self.summary.reported.error_class = Some(class);
            }
        }
        self.events.push(Event::Result {
            success,
            text,
            error,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Agent, AgentDecoder};

    fn decode(agent: Agent, lines: &[&str]) -> (Summary, Vec<Event>) {
        let mut d = AgentDecoder::new(agent);
        let mut events = Vec::new();
        for l in lines {
            assert!(d.line(l.as_bytes(), &mut events), "not well formed: {l}");
        }
        (d.summary().clone(), events)
    }

    const PI_ERROR_END: &[&str] = &[
        r#"{"type":"agent_start"}"#,
        r#"{"type":"turn_start"}"#,
        r#"{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"429 Too Many Requests"}}"#,
        r#"{"type":"agent_end","messages":[]}"#,
    ];

    #[test]
    fn work_after_a_terminal_event_takes_it_back_and_the_last_one_decides() {
        let (s, _) = decode(Agent::Pi, PI_ERROR_END);
        assert_eq!(s.terminal, Some(false));
        assert!(
            !s.working_after_terminal,
            "trailing nothing: still in force"
        );

        let mut lines = PI_ERROR_END.to_vec();
        lines.push(r#"{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":"429"}"#);
        let (s, _) = decode(Agent::Pi, &lines);
        assert!(s.working_after_terminal, "a retry after agent_end is work");

        lines.extend([
            r#"{"type":"agent_start"}"#,
            r#"{"type":"tool_execution_start","toolCallId":"c1","toolName":"bash","args":{"command":"sleep 90"}}"#,
        ]);
        let (s, _) = decode(Agent::Pi, &lines);
        assert!(s.working_after_terminal);
        assert_eq!(s.terminal, Some(false), "no new word yet");

        lines.extend([
            r#"{"type":"tool_execution_end","toolCallId":"c1","toolName":"bash","result":{"content":[]},"isError":false}"#,
            r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"done"}],"stopReason":"stop"}}"#,
            r#"{"type":"agent_end","messages":[]}"#,
        ]);
        let (s, _) = decode(Agent::Pi, &lines);
        assert_eq!(s.terminal, Some(true), "the last terminal event decides");
        assert_eq!(s.terminal_events, 2);
        assert!(!s.working_after_terminal);
    }

    #[test]
    fn usage_after_a_terminal_event_is_trailing_output_not_work() {
        let mut summary = Summary::default();
        let mut events = Vec::new();
        let mut out = Out {
            summary: &mut summary,
            events: &mut events,
        };
        out.result(true, Some("done".into()), None);
        out.usage_step(Tokens::default(), None);
        out.tool_finished("x".into(), None, false, None);
        out.error("late warning".into(), ErrorClass::Other, false);
        assert!(!summary.working_after_terminal);
    }

    fn classes(errors: &[(ErrorClass, bool)]) -> Option<ErrorClass> {
        let mut summary = Summary::default();
        let mut events = Vec::new();
        let mut out = Out {
            summary: &mut summary,
            events: &mut events,
        };
        for (class, fatal) in errors {
            out.error(format!("{class:?}"), *class, *fatal);
        }
        assert_eq!(
            summary.reported.error_message,
            Some(format!("{:?}", summary.reported.error_class.unwrap()))
        );
        summary.reported.error_class
    }

    #[test]
    fn the_error_named_is_the_last_unless_no_retry_fixes_an_earlier_one() {
        use ErrorClass::*;
        // Got over an overload, then the API refused the request: no
        // overloaded run (a retry would be refused the same).
        assert_eq!(
            classes(&[(Overloaded, false), (InvalidRequest, false)]),
            Some(InvalidRequest)
        );
        assert_eq!(
            classes(&[(InvalidRequest, false), (Overloaded, false)]),
            Some(InvalidRequest),
            "an error no retry fixes stays"
        );
        assert_eq!(
            classes(&[(Overloaded, false), (RateLimit, false)]),
            Some(RateLimit)
        );
        assert_eq!(
            classes(&[(Network, true), (Other, false)]),
            Some(Network),
            "a fatal one over a later non-fatal one"
        );
        let (s, _) = decode(
            Agent::Claude,
            &[
                r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"API Error: 529"}]},"error":"overloaded"}"#,
                r#"{"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":"prompt is too long"}]},"error":"invalid_request"}"#,
                r#"{"type":"result","subtype":"success","is_error":true,"result":"prompt is too long"}"#,
            ],
        );
        assert_eq!(s.reported.error_class, Some(InvalidRequest));
        assert_eq!(
            s.reported.error_message.as_deref(),
            Some("prompt is too long")
        );
    }

    const CLAUDE_401_RETRY: &str = r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":500,"error_status":401,"error":"authentication_failed"}"#;

    #[test]
    fn a_retried_fatal_error_is_one_event_and_stays_pending_until_a_terminal_event() {
        let (s, events) = decode(Agent::Claude, &[CLAUDE_401_RETRY; 11]);
        let fatal = events
            .iter()
            .filter(|e| matches!(e, Event::Error { fatal: true, .. }))
            .count();
        assert_eq!(fatal, 1, "{events:?}");
        assert_eq!(s.fatal_pending, Some(ErrorClass::Authentication));

        let mut lines = vec![CLAUDE_401_RETRY; 2];
        lines.push(r#"{"type":"result","subtype":"success","is_error":true,"result":"Failed to authenticate"}"#);
        let (s, _) = decode(Agent::Claude, &lines);
        assert_eq!(s.fatal_pending, None, "the agent ended by itself");
        assert_eq!(s.terminal, Some(false));
    }

    #[test]
    fn work_after_a_fatal_error_is_a_recovery() {
        let (s, _) = decode(
            Agent::Claude,
            &[
                CLAUDE_401_RETRY,
                r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"hi"}]}}"#,
            ],
        );
        assert_eq!(s.fatal_pending, None);
    }

    /// The `usage_ignored` events of `events`, as `(line, field, problem)`.
    fn ignored(events: &[Event]) -> Vec<(u64, String, FigureProblem)> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::UsageIgnored {
                    line,
                    field,
                    problem,
                    ..
                } => Some((*line, field.clone(), *problem)),
                _ => None,
            })
            .collect()
    }

    fn pi_call(usage: &str) -> String {
        format!(
            r#"{{"type":"message_end","message":{{"role":"assistant","content":[{{"type":"text","text":"ok"}}],"stopReason":"stop","usage":{usage}}}}}"#
        )
    }

    #[test]
    fn a_negative_cost_is_not_counted_and_its_line_is_named() {
        let honest = pi_call(r#"{"input":10,"output":5,"cost":{"total":1.0}}"#);
        let forged = pi_call(r#"{"input":10,"output":5,"cost":{"total":-100}}"#);
        let (s, events) = decode(Agent::Pi, &[r#"{"type":"agent_start"}"#, &honest, &forged]);
        assert_eq!(
            s.reported.cost_usd,
            Some(1.0),
            "the forged line paid nothing back"
        );
        assert_eq!(
            s.reported.tokens.input,
            Some(20),
            "the line's honest counts still count"
        );
        assert_eq!(
            ignored(&events),
            vec![(
                3,
                "message.usage.cost.total".into(),
                FigureProblem::Negative
            )]
        );
        let value = events.iter().find_map(|e| match e {
            Event::UsageIgnored { value, .. } => Some(value.clone()),
            _ => None,
        });
        assert_eq!(value.as_deref(), Some("-100"));
    }

    #[test]
    fn counts_that_are_negative_infinite_or_no_number_are_not_counted() {
        let (s, events) = decode(
            Agent::Pi,
            &[
                &pi_call(
                    r#"{"input":-5,"output":1e999,"cacheRead":"NaN","cacheWrite":7,"cost":{"total":1e999}}"#,
                ),
                &pi_call(r#"{"input":3,"output":4,"cost":{"total":"0.5"}}"#),
            ],
        );
        assert_eq!(
            (
                s.reported.tokens.input,
                s.reported.tokens.output,
                s.reported.tokens.cache_read,
                s.reported.tokens.cache_write
            ),
            (Some(3), Some(4), None, Some(7))
        );
        assert_eq!(s.reported.cost_usd, None);
        assert_eq!(s.reported.turns, 2, "the lines were decoded, not dropped");
        assert_eq!(
            ignored(&events),
            vec![
                (1, "message.usage.input".into(), FigureProblem::Negative),
                (1, "message.usage.output".into(), FigureProblem::Infinite),
                (
                    1,
                    "message.usage.cacheRead".into(),
                    FigureProblem::NotANumber
                ),
                (
                    1,
                    "message.usage.cost.total".into(),
                    FigureProblem::Infinite
                ),
                (
                    2,
                    "message.usage.cost.total".into(),
                    FigureProblem::NotANumber
                ),
            ]
        );
    }

    #[test]
    fn every_agent_checks_its_figures() {
        let (s, events) = decode(
            Agent::OpenCode,
            &[
                r#"{"type":"step_finish","part":{"reason":"tool-calls","cost":0.25,"tokens":{"input":10,"output":5,"reasoning":0,"cache":{"read":0,"write":0}}}}"#,
                r#"{"type":"step_finish","part":{"reason":"tool-calls","cost":-0.25,"tokens":{"input":-10,"output":5,"reasoning":0,"cache":{"read":0,"write":0}}}}"#,
            ],
        );
        assert_eq!(
            (s.reported.cost_usd, s.reported.tokens.input),
            (Some(0.25), Some(10))
        );
        assert_eq!(ignored(&events).len(), 2, "{events:?}");

        let (s, events) = decode(
            Agent::Gemini,
            &[
                r#"{"type":"result","status":"success","stats":{"input_tokens":-1,"output_tokens":5,"total_tokens":1e999}}"#,
            ],
        );
        assert_eq!(
            (s.reported.tokens.input, s.reported.tokens.output),
            (None, Some(5))
        );
        assert_eq!(ignored(&events).len(), 2, "{events:?}");

        let (s, events) = decode(
            Agent::Claude,
            &[
                r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","total_cost_usd":-3,"usage":{"input_tokens":10,"output_tokens":-1}}"#,
            ],
        );
        assert_eq!(
            (
                s.reported.cost_usd,
                s.reported.tokens.input,
                s.reported.tokens.output
            ),
            (None, Some(10), None)
        );
        assert_eq!(
            ignored(&events),
            vec![
                (1, "usage.output_tokens".into(), FigureProblem::Negative),
                (1, "total_cost_usd".into(), FigureProblem::Negative),
            ]
        );
    }

    #[test]
    fn a_running_total_that_goes_down_is_not_believed() {
        let turn = |input: u64, output: u64| {
            format!(
                r#"{{"type":"turn.completed","usage":{{"input_tokens":{input},"cached_input_tokens":0,"output_tokens":{output}}}}}"#
            )
        };
        let (s, events) = decode(
            Agent::Codex,
            &[&turn(1000, 100), &turn(10, 200), &turn(1500, 250)],
        );
        assert_eq!(
            (s.reported.tokens.input, s.reported.tokens.output),
            (Some(1500), Some(250))
        );
        assert_eq!(
            ignored(&events),
            vec![(2, "tokens.input".into(), FigureProblem::WentDown)]
        );
        let usage = events
            .iter()
            .filter_map(|e| match e {
                Event::Usage { tokens, .. } => Some(tokens.input),
                _ => None,
            })
            .collect::<Vec<_>>();
        assert_eq!(
            usage,
            vec![Some(1000), Some(1000), Some(1500)],
            "the usage events say what counts"
        );

        let result = |cost: f64| {
            format!(
                r#"{{"type":"result","subtype":"success","is_error":false,"result":"ok","total_cost_usd":{cost},"usage":{{"input_tokens":10,"output_tokens":1}}}}"#
            )
        };
        let (s, events) = decode(Agent::Claude, &[&result(2.0), &result(0.5)]);
        assert_eq!(s.reported.cost_usd, Some(2.0));
        assert_eq!(
            ignored(&events),
            vec![(2, "cost_usd".into(), FigureProblem::WentDown)]
        );
    }

    #[test]
    fn a_running_total_never_takes_back_the_steps_counted_before_it() {
        // A forged `result` of zero after honest messages: what the
        // messages spent stays counted, and each lower figure is named.
        let (s, events) = decode(
            Agent::Claude,
            &[
                r#"{"type":"assistant","message":{"id":"m1","model":"c","content":[],"usage":{"input_tokens":500,"output_tokens":50}}}"#,
                r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","total_cost_usd":0.1,"usage":{"input_tokens":400,"output_tokens":60}}"#,
            ],
        );
        assert_eq!(
            (s.reported.tokens.input, s.reported.tokens.output),
            (Some(500), Some(60))
        );
        assert_eq!(
            ignored(&events),
            vec![(2, "tokens.input".into(), FigureProblem::WentDown)]
        );
        let (s, _) = decode(
            Agent::Claude,
            &[
                r#"{"type":"assistant","message":{"id":"m1","model":"c","content":[],"usage":{"input_tokens":500000,"output_tokens":500000}}}"#,
                r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0}}"#,
                r#"{"type":"assistant","message":{"id":"m2","model":"c","content":[],"usage":{"input_tokens":500000,"output_tokens":500000}}}"#,
                r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0}}"#,
            ],
        );
        assert_eq!(s.reported.tokens.total(), Some(2_000_000));
    }

    #[test]
    fn an_honest_total_equal_to_its_steps_is_taken_without_a_warning() {
        let (s, events) = decode(
            Agent::Claude,
            &[
                r#"{"type":"assistant","message":{"id":"m1","model":"c","content":[],"usage":{"input_tokens":500,"output_tokens":50}}}"#,
                r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","total_cost_usd":0.1,"usage":{"input_tokens":500,"output_tokens":60}}"#,
            ],
        );
        assert_eq!(
            (s.reported.tokens.input, s.reported.tokens.output),
            (Some(500), Some(60))
        );
        assert_eq!(s.reported.cost_usd, Some(0.1));
        assert!(ignored(&events).is_empty(), "{events:?}");
    }

    #[test]
    fn a_sum_of_costs_too_large_for_a_float_stops_at_the_largest() {
        let huge = pi_call(r#"{"input":1,"output":1,"cost":{"total":1.7e308}}"#);
        let (s, _) = decode(Agent::Pi, &[&huge, &huge]);
        assert_eq!(s.reported.cost_usd, Some(f64::MAX));
    }

    #[test]
    fn lines_are_numbered_as_the_log_has_them_oversized_and_blank_ones_too() {
        let forged = pi_call(r#"{"input":1,"output":1,"cost":{"total":-1}}"#);
        let stream = format!("{}\n\n{forged}\n", "x".repeat(1000));
        let mut d = crate::StreamDecoder::new(Agent::Pi, 400);
        let mut seen = Vec::new();
        d.push(stream.as_bytes(), |_, events| seen.append(events));
        assert_eq!(
            ignored(&seen),
            vec![(
                3,
                "message.usage.cost.total".into(),
                FigureProblem::Negative
            )]
        );
    }
}
