//! The normalized event vocabulary.
//!
//! Every event is written to `events.jsonl` and to `--json` as one object
//! with a snake_case `kind`, so the names here are part of warden's stable
//! interface. Decoders produce the agent's events; the supervisor adds its
//! own (spawned, stall warning, exit, kills, truncation, finished).

use serde::Serialize;

use crate::schema_version::SchemaVersion;

/// Which output stream of the agent a line came from.
#[derive(
    serde::Deserialize, schemars::JsonSchema, Debug, Clone, Copy, PartialEq, Eq, Serialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// What a budget counts (see `warden_run::budget`).
#[derive(
    serde::Deserialize, schemars::JsonSchema, Debug, Clone, Copy, PartialEq, Eq, Serialize,
)]
#[serde(rename_all = "snake_case")]
pub enum BudgetKind {
    /// US dollars, as the agent reports its cost.
    Cost,
    /// `tokens.total`: every token the model read or wrote.
    Tokens,
    /// Model calls (`turns`).
    Turns,
}

/// Whose budget it is: the run's own, its session's (summed over the
/// session's runs) or its batch's (summed over the batch's entries).
#[derive(
    serde::Deserialize, schemars::JsonSchema, Debug, Clone, Copy, PartialEq, Eq, Serialize,
)]
#[serde(rename_all = "snake_case")]
pub enum BudgetScope {
    Run,
    Session,
    Batch,
}

/// Why a figure of the agent's usage was not counted.
#[derive(
    serde::Deserialize, schemars::JsonSchema, Debug, Clone, Copy, PartialEq, Eq, Serialize,
)]
#[serde(rename_all = "snake_case")]
pub enum FigureProblem {
    /// Below zero: spending is never paid back.
    Negative,
    /// A string, `true`, an object: no number.
    NotANumber,
    /// Beyond any float (`1e999`).
    Infinite,
    /// A running total below the agent's previous one.
    WentDown,
}

impl FigureProblem {
    /// `is negative`, `went down`.
    pub fn as_words(self) -> &'static str {
        match self {
            FigureProblem::Negative => "is negative",
            FigureProblem::NotANumber => "is not a number",
            FigureProblem::Infinite => "is infinite",
            FigureProblem::WentDown => "went down",
        }
    }
}

/// Token counts, one meaning for every agent (each decoder converts its
/// CLI's own terms to these). A count the CLI does not report (pi's and
/// Claude Code's reasoning, Gemini CLI's cache writes), or that no usage
/// came for (a run ended before the CLI reported any), is `None`: not
/// known, written `null`, never 0.
///
/// - `input`: prompt tokens neither read from nor written to the cache;
/// - `cache_read`: prompt tokens read from the cache;
/// - `cache_write`: prompt tokens written to the cache;
/// - `output`: every generated token, reasoning included;
/// - `reasoning`: the part of `output` that was reasoning (not added on
///   top of it);
/// - `total` (serialized, not stored): `input + cache_read + cache_write +
///   output`, every token the model read or wrote.
///
/// A sum (of steps, of a session's runs, of a batch's entries) adds the
/// counts that are known: it is `None` only when none of its parts is
/// known, and otherwise counts what the CLIs reported (an unknown part
/// adds nothing, so it is what is known to have been spent, at least).
#[non_exhaustive]
#[derive(serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tokens {
    #[serde(default)]
    pub input: Option<u64>,
    #[serde(default)]
    pub output: Option<u64>,
    #[serde(default)]
    pub cache_read: Option<u64>,
    #[serde(default)]
    pub cache_write: Option<u64>,
    #[serde(default)]
    pub reasoning: Option<u64>,
}

/// Two counts added: unknown only when both are.
fn plus(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.saturating_add(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

impl Tokens {
    /// Every count known, with these values.
    pub fn known(
        input: u64,
        output: u64,
        cache_read: u64,
        cache_write: u64,
        reasoning: u64,
    ) -> Self {
        Tokens {
            input: Some(input),
            output: Some(output),
            cache_read: Some(cache_read),
            cache_write: Some(cache_write),
            reasoning: Some(reasoning),
        }
    }

    /// Adds `other`, count by count (see [`Tokens`] for a sum with unknown
    /// parts); a count that would overflow (numbers from a stream anyone
    /// could write) stops at the maximum.
    pub fn add(&mut self, other: &Tokens) {
        self.input = plus(self.input, other.input);
        self.output = plus(self.output, other.output);
        self.cache_read = plus(self.cache_read, other.cache_read);
        self.cache_write = plus(self.cache_write, other.cache_write);
        self.reasoning = plus(self.reasoning, other.reasoning);
    }

    /// Every token the model read or wrote, of the counts known; `None`
    /// when none of them is.
    pub fn total(&self) -> Option<u64> {
        [self.input, self.cache_read, self.cache_write, self.output]
            .into_iter()
            .fold(None, plus)
    }

    /// [`Self::total`], with nothing known counted as nothing spent (for a
    /// budget, a sum).
    pub fn spent(&self) -> u64 {
        self.total().unwrap_or(0)
    }

    /// What `self` has beyond `earlier`, count by count (never below
    /// zero; unknown where `self` does not know it).
    pub fn beyond(&self, earlier: &Tokens) -> Tokens {
        let less = |a: Option<u64>, b: Option<u64>| a.map(|a| a.saturating_sub(b.unwrap_or(0)));
        Tokens {
            input: less(self.input, earlier.input),
            output: less(self.output, earlier.output),
            cache_read: less(self.cache_read, earlier.cache_read),
            cache_write: less(self.cache_write, earlier.cache_write),
            reasoning: less(self.reasoning, earlier.reasoning),
        }
    }

    /// The larger of each count (unknown only where both are).
    pub fn max(&self, other: &Tokens) -> Tokens {
        let most = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, None) => a,
            (None, b) => b,
        };
        Tokens {
            input: most(self.input, other.input),
            output: most(self.output, other.output),
            cache_read: most(self.cache_read, other.cache_read),
            cache_write: most(self.cache_write, other.cache_write),
            reasoning: most(self.reasoning, other.reasoning),
        }
    }

    /// Whether no count is above zero (unknown ones included).
    pub fn is_zero(&self) -> bool {
        [
            self.input,
            self.output,
            self.cache_read,
            self.cache_write,
            self.reasoning,
        ]
        .iter()
        .all(|c| c.unwrap_or(0) == 0)
    }

    /// A count as a person reads it: the number, or `?` when not known.
    pub fn shown(count: Option<u64>) -> String {
        count.map_or_else(|| "?".to_string(), |c| c.to_string())
    }
}

/// `Tokens` as written: the counts and their `total`, each `null` when
/// not known.
#[derive(schemars::JsonSchema)]
#[allow(dead_code)] // only its schema is used
struct TokensJson {
    input: Option<u64>,
    output: Option<u64>,
    cache_read: Option<u64>,
    cache_write: Option<u64>,
    /// The part of `output` that was reasoning; `null` for a CLI that
    /// does not report it.
    reasoning: Option<u64>,
    /// `input + cache_read + cache_write + output`, of the counts known;
    /// `null` when none is.
    total: Option<u64>,
}

impl schemars::JsonSchema for Tokens {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Tokens".into()
    }

    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        TokensJson::json_schema(g)
    }
}

impl Serialize for Tokens {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Tokens", 6)?;
        st.serialize_field("input", &self.input)?;
        st.serialize_field("output", &self.output)?;
        st.serialize_field("cache_read", &self.cache_read)?;
        st.serialize_field("cache_write", &self.cache_write)?;
        st.serialize_field("reasoning", &self.reasoning)?;
        st.serialize_field("total", &self.total())?;
        st.end()
    }
}

/// What kind of error an agent reported.
#[non_exhaustive]
#[derive(
    serde::Deserialize, schemars::JsonSchema, Debug, Clone, Copy, PartialEq, Eq, Serialize,
)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// Bad or missing credentials: retrying will not help.
    Authentication,
    /// Too many requests (HTTP 429): the account's rate limit.
    RateLimit,
    /// Other errors from the model's API: server errors (HTTP 5xx) and
    /// those of no other class.
    Api,
    /// A tool failed in a way the agent treats as an error.
    Tool,
    Other,
    /// The API is overloaded (HTTP 529, 503, `overloaded_error`): the
    /// service's load, not the account's rate.
    Overloaded,
    /// The model's API could not be reached or the connection broke
    /// (refused, reset, timed out, DNS).
    Network,
    /// The account's quota or credit is used up (`insufficient_quota`,
    /// billing): retrying will not help until someone pays.
    Quota,
    /// The API refused the request itself (HTTP 400, 404, 413, 422: an
    /// unknown model, a prompt too long): retrying will not help.
    InvalidRequest,
}

impl ErrorClass {
    /// Whether the error is one no retry fixes: credentials, a used-up
    /// quota or credit, a request the API refuses.
    pub fn no_retry_fixes(self) -> bool {
        matches!(
            self,
            ErrorClass::Authentication | ErrorClass::Quota | ErrorClass::InvalidRequest
        )
    }

    /// Guesses the class from an error message and an HTTP status.
    pub fn classify(message: &str, status: Option<i64>) -> Self {
        // A URL in the message names the server, not the error: the port of
        // `http://127.0.0.1:40403/` must not read as an HTTP 403.
        let m = message
            .split_whitespace()
            .filter(|w| !w.contains("://"))
            .collect::<Vec<_>>()
            .join(" ")
            .to_ascii_lowercase();
        let has = |words: &[&str]| words.iter().any(|w| contains_word(&m, w));
        // Used-up quota first: its 429 is no rate limit that passes.
        if has(&[
            "insufficient_quota",
            "exceeded your current quota",
            "credit balance",
            "billing",
        ]) {
            return ErrorClass::Quota;
        }
        match status {
            Some(401 | 403) => return ErrorClass::Authentication,
            Some(429) => return ErrorClass::RateLimit,
            Some(503 | 529) => return ErrorClass::Overloaded,
            Some(400 | 404 | 413 | 422) => return ErrorClass::InvalidRequest,
            _ => {}
        }
        if has(&[
            "401",
            "403",
            "unauthorized",
            "authentication",
            "api key",
            "api_key",
            "/login",
            "forbidden",
            "credential",
        ]) {
            ErrorClass::Authentication
        } else if has(&[
            "429",
            "rate limit",
            "rate_limit",
            "too many requests",
            "quota",
        ]) {
            ErrorClass::RateLimit
        } else if has(&["overloaded", "529", "503", "service unavailable"]) {
            ErrorClass::Overloaded
        } else if has(&[
            "model not found",
            "unknown model",
            "model_not_found",
            "not_found_error",
            "invalid_request",
            "does not exist",
            "prompt is too long",
            "context length",
        ]) {
            ErrorClass::InvalidRequest
        } else if status.is_none()
            && has(&[
                "econnrefused",
                "econnreset",
                "etimedout",
                "enotfound",
                "connection refused",
                "connection reset",
                "connection error",
                "fetch failed",
                "network",
                "socket hang up",
                "error sending request",
                "stream disconnected",
                "timed out",
            ])
        {
            ErrorClass::Network
        } else if status.is_some()
            // Codex's words for an HTTP 5xx, said with no status.
            || has(&["api error", "500", "502", "504", "server", "experiencing high demand"])
        {
            ErrorClass::Api
        } else {
            ErrorClass::Other
        }
    }
}

/// Whether `word` is in `text`; a number counts only as a whole number, so
/// "429" is not found in "14290 tokens".
fn contains_word(text: &str, word: &str) -> bool {
    if !word.bytes().all(|b| b.is_ascii_digit()) {
        return text.contains(word);
    }
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].bytes().next_back();
        let after = text[at + word.len()..].bytes().next();
        !before.is_some_and(|b| b.is_ascii_digit()) && !after.is_some_and(|b| b.is_ascii_digit())
    })
}

/// A process of the run, as found in /proc.
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Holder {
    pub pid: i32,
    pub cmdline: String,
}

/// The tool call a [`Event::Status`] says is open.
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpenCall {
    pub name: String,
    /// Its one-line input (a shell command, say), if the agent gave one.
    pub input: Option<String>,
    /// When it started, in ms since the run began.
    pub since_ms: u64,
}

/// One thing that happened during a run.
#[non_exhaustive]
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// The agent said which session this is.
    SessionStarted {
        session_id: Option<String>,
        model: Option<String>,
        agent_version: Option<String>,
    },
    /// Reasoning text the agent showed.
    Thinking { text: String },
    /// The agent started a tool call.
    ToolStarted {
        id: String,
        name: String,
        /// A short, one-line view of the input (a shell command, say).
        input: Option<String>,
        /// The time limit the call declared for itself, if any.
        timeout_ms: Option<u64>,
    },
    /// A running tool call showed progress.
    ToolProgress {
        id: String,
        elapsed_ms: Option<u64>,
        output: Option<String>,
    },
    /// A tool call ended.
    ToolFinished {
        id: String,
        name: String,
        is_error: bool,
        /// The start of the output (the whole output is in `stdout.log`).
        output: Option<String>,
        output_bytes: u64,
        /// How long the call ran by the agent's own clock, when the agent
        /// says (OpenCode does); else the time between the started and
        /// finished events is the measure.
        #[serde(skip_serializing_if = "Option::is_none")]
        duration_ms: Option<u64>,
    },
    /// Tokens (and cost, where the agent reports it). `cumulative` usage
    /// is a running total for the run; otherwise it adds to what came
    /// before.
    Usage {
        #[serde(flatten)]
        tokens: Tokens,
        cost_usd: Option<f64>,
        cumulative: bool,
    },
    /// A figure of the agent's usage that was not counted: a token count
    /// or cost that is negative, infinite or no number, or a running
    /// total below the agent's previous one. `line` is the line of
    /// `stdout.log` it is on (1 for the first), `field` where in that
    /// line, `value` what it said.
    UsageIgnored {
        line: u64,
        field: String,
        value: String,
        problem: FigureProblem,
    },
    /// The agent is retrying an API call.
    Retry {
        attempt: Option<u32>,
        max_attempts: Option<u32>,
        delay_ms: Option<u64>,
        reason: String,
    },
    /// The agent reported an error.
    Error {
        message: String,
        class: ErrorClass,
        fatal: bool,
    },
    /// The agent's terminal event: it says it is done.
    Result {
        success: bool,
        text: Option<String>,
        error: Option<String>,
    },
    /// The agent process was started.
    Spawned {
        pid: i32,
        command: Vec<String>,
        containment: String,
        /// The resource limits in force, each with what enforces it
        /// (`memory 32MiB by cgroup_v1`); left out when there are none.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        limits: Vec<String>,
    },
    /// Text from the agent (for `exec`: a stdout line).
    Text { text: String },
    /// A line the agent wrote on stderr.
    Stderr { text: String },
    /// A line a container engine's client wrote itself at the start of
    /// the run's stderr (Docker's `WARNING: ...`, Podman's logged warnings
    /// and errors), shown on warden's stderr and left out of
    /// `stderr.log`. Told by its shape only, so an agent that prints such
    /// a line first has it taken for the engine's.
    EngineLine { text: String },
    /// Plain output lines that `events.jsonl` does not copy: they are
    /// `bytes` bytes at `offset` in `stdout.log` or `stderr.log`, and stand
    /// for `lines` `text` (stdout) or `stderr` events, one per non-blank
    /// line, read back as the `exec` decoder reads them (invalid UTF-8
    /// replaced, a `\r` before the newline dropped, blank lines skipped,
    /// each cut at the event text cap). Written only to the file, in place
    /// of the `text` and `stderr` events of an `exec` run whose text the
    /// redactor left as it was; the live feed and `--json` carry the
    /// per-line events.
    Lines {
        stream: Stream,
        offset: u64,
        bytes: u64,
        lines: u64,
    },
    /// A line longer than `max_line`: kept in the log, not decoded.
    OversizedLine { stream: Stream, bytes: u64 },
    /// Half the stall timeout passed with no activity.
    StallWarning {
        silent_ms: u64,
        stall_timeout_ms: u64,
    },
    /// 80% of a budget is spent (once per budget and run). `reached` and
    /// `limit` are in the budget's unit (USD, tokens, turns); for a
    /// session's or batch's budget, `reached` counts what its earlier runs
    /// spent too.
    BudgetWarning {
        scope: BudgetScope,
        budget: BudgetKind,
        limit: f64,
        reached: f64,
    },
    /// The completion signal was seen in the agent's output.
    CompletionSignal,
    /// The agent process exited (by itself or because it was killed).
    Exited {
        exit_code: Option<i32>,
        signal: Option<i32>,
    },
    /// A process of the run still alive when the agent exited.
    Orphan {
        pid: i32,
        cmdline: String,
        held_pipe: bool,
    },
    /// warden began to end the run, and why.
    Terminating { reason: String },
    /// Signals sent to the processes of the run.
    Signalled { signal: String, pids: Vec<i32> },
    /// The drain was cut short: processes still held the output pipes.
    OutputTruncated { bytes: u64, holders: Vec<Holder> },
    /// What the supervisor decided so far: the one source every view
    /// reads for activity, the stall clock, tokens and the open tool call
    /// (a view never re-derives these from the other events). Written when
    /// activity comes, at most once a second, at once when the activity
    /// ends a silence, and once more before the run ends.
    Status {
        /// The last activity (ms since the start); none before the first.
        /// Activity is any well-formed line, with or without an event.
        last_activity_ms: Option<u64>,
        /// Activity lines so far.
        activity_lines: u64,
        /// The longest silence that ended since the previous snapshot, in
        /// ms. One of 250 ms or more ended at `last_activity_ms` (such a
        /// snapshot is written at once), so every silence can be drawn.
        silence_before_ms: u64,
        /// The longest silence that has ended so far, in ms.
        longest_silence_ms: u64,
        /// When the run is ended as stalled if no activity comes (ms since
        /// the start); none while the stall clock is off or the completion
        /// window has replaced it.
        stall_deadline_ms: Option<u64>,
        /// Tokens so far, as the run's report counts them.
        tokens: Tokens,
        cost_usd: Option<f64>,
        tool_calls: u32,
        retries: u32,
        /// The tool call open now (the latest started), if any.
        tool: Option<OpenCall>,
    },
    /// The run is over; the report is in `run.json`.
    Finished {
        verdict: String,
        reason: String,
        exit_code: Option<i32>,
        signal: Option<i32>,
        duration_ms: u64,
    },
}

impl Event {
    /// The snake_case name of the event's kind, as written in JSON.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::SessionStarted { .. } => "session_started",
            Event::Thinking { .. } => "thinking",
            Event::ToolStarted { .. } => "tool_started",
            Event::ToolProgress { .. } => "tool_progress",
            Event::ToolFinished { .. } => "tool_finished",
            Event::Usage { .. } => "usage",
            Event::UsageIgnored { .. } => "usage_ignored",
            Event::Retry { .. } => "retry",
            Event::Error { .. } => "error",
            Event::Result { .. } => "result",
            Event::Spawned { .. } => "spawned",
            Event::Text { .. } => "text",
            Event::Stderr { .. } => "stderr",
            Event::EngineLine { .. } => "engine_line",
            Event::Lines { .. } => "lines",
            Event::OversizedLine { .. } => "oversized_line",
            Event::StallWarning { .. } => "stall_warning",
            Event::BudgetWarning { .. } => "budget_warning",
            Event::CompletionSignal => "completion_signal",
            Event::Exited { .. } => "exited",
            Event::Orphan { .. } => "orphan",
            Event::Terminating { .. } => "terminating",
            Event::Signalled { .. } => "signalled",
            Event::OutputTruncated { .. } => "output_truncated",
            Event::Status { .. } => "status",
            Event::Finished { .. } => "finished",
        }
    }
}

impl Event {
    /// Cuts the text of a `text`, `stderr` or `thinking` event to `max`
    /// bytes (at a character boundary), saying how much was left out: the
    /// whole of it is in the logs.
    pub fn cap_text(&mut self, max: usize) {
        if let Event::Text { text } | Event::Stderr { text } | Event::Thinking { text } = self
            && text.len() > max
        {
            let mut end = max;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            let left = text.len() - end;
            text.truncate(end);
            text.push_str(&format!("… [{left} more bytes in the log]"));
        }
    }

    /// Calls `f` on every text field of the event (for redaction).
    pub fn for_each_string(&mut self, f: &mut dyn FnMut(&mut String)) {
        let opt = |o: &mut Option<String>, f: &mut dyn FnMut(&mut String)| {
            if let Some(s) = o {
                f(s);
            }
        };
        match self {
            Event::SessionStarted {
                session_id,
                model,
                agent_version,
            } => {
                opt(session_id, f);
                opt(model, f);
                opt(agent_version, f);
            }
            Event::Thinking { text }
            | Event::Text { text }
            | Event::Stderr { text }
            | Event::EngineLine { text } => f(text),
            Event::ToolStarted {
                id, name, input, ..
            } => {
                f(id);
                f(name);
                opt(input, f);
            }
            Event::ToolProgress { id, output, .. } => {
                f(id);
                opt(output, f);
            }
            Event::ToolFinished {
                id, name, output, ..
            } => {
                f(id);
                f(name);
                opt(output, f);
            }
            Event::Retry { reason, .. } => f(reason),
            Event::Error { message, .. } => f(message),
            Event::Result { text, error, .. } => {
                opt(text, f);
                opt(error, f);
            }
            Event::Spawned {
                command,
                containment,
                ..
            } => {
                command.iter_mut().for_each(&mut *f);
                f(containment);
            }
            Event::Orphan { cmdline, .. } => f(cmdline),
            Event::Terminating { reason } => f(reason),
            Event::Signalled { signal, .. } => f(signal),
            Event::OutputTruncated { holders, .. } => {
                holders.iter_mut().for_each(|h| f(&mut h.cmdline))
            }
            Event::Finished {
                verdict, reason, ..
            } => {
                f(verdict);
                f(reason);
            }
            Event::Status { tool, .. } => {
                if let Some(t) = tool {
                    f(&mut t.name);
                    opt(&mut t.input, f);
                }
            }
            Event::Usage { .. }
            | Event::UsageIgnored { .. }
            | Event::OversizedLine { .. }
            | Event::Lines { .. }
            | Event::StallWarning { .. }
            | Event::BudgetWarning { .. }
            | Event::CompletionSignal
            | Event::Exited { .. } => {}
        }
    }
}

/// An event with the time it happened, in milliseconds since the run began.
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Clone, PartialEq, Serialize)]
pub struct Stamped {
    pub schema_version: SchemaVersion,
    pub t_ms: u64,
    #[serde(flatten)]
    pub event: Event,
}

/// One line of `warden run --json`: an event and the run it belongs to.
/// Several runs print to one stdout (a session's iterations, one after
/// another), so each line names its run. An `events.jsonl` line has no
/// `run_id`: the file sits in its run's own directory. Both kinds of
/// line are described by one schema, where `run_id` is optional.
#[derive(schemars::JsonSchema, Debug, Clone, Serialize)]
pub struct FeedLine<'a> {
    /// The run's id (the name `warden` gives its run directory by default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<&'a str>,
    #[serde(flatten)]
    pub stamped: &'a Stamped,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialize_with_snake_case_kind_and_time() {
        let line = serde_json::to_string(&Stamped {
            schema_version: SchemaVersion,
            t_ms: 12,
            event: Event::OversizedLine {
                stream: Stream::Stdout,
                bytes: 9,
            },
        })
        .unwrap();
        assert_eq!(
            line,
            r#"{"schema_version":1,"t_ms":12,"kind":"oversized_line","stream":"stdout","bytes":9}"#
        );
        let unit = serde_json::to_string(&Stamped {
            schema_version: SchemaVersion,
            t_ms: 0,
            event: Event::CompletionSignal,
        })
        .unwrap();
        assert_eq!(
            unit,
            r#"{"schema_version":1,"t_ms":0,"kind":"completion_signal"}"#
        );
    }

    #[test]
    fn long_text_is_capped_with_a_note() {
        let mut e = Event::Text {
            text: "é".repeat(10),
        };
        e.cap_text(5);
        assert_eq!(
            e,
            Event::Text {
                text: "éé… [16 more bytes in the log]".into()
            }
        );
        let mut short = Event::Stderr { text: "ok".into() };
        short.cap_text(5);
        assert_eq!(short, Event::Stderr { text: "ok".into() });
    }

    #[test]
    fn errors_are_classed_one_meaning_each() {
        let c = ErrorClass::classify;
        assert_eq!(c("429 Too Many Requests", None), ErrorClass::RateLimit);
        assert_eq!(c("x", Some(429)), ErrorClass::RateLimit);
        assert_eq!(c("Overloaded", None), ErrorClass::Overloaded);
        assert_eq!(c("x", Some(529)), ErrorClass::Overloaded);
        assert_eq!(c("503 Service Unavailable", None), ErrorClass::Overloaded);
        assert_eq!(c("API Error: 500 internal", None), ErrorClass::Api);
        assert_eq!(c("x", Some(502)), ErrorClass::Api);
        assert_eq!(
            c(
                "We\u{2019}re currently experiencing high demand, which may cause temporary errors.",
                None
            ),
            ErrorClass::Api
        );
        assert_eq!(c("fetch failed", None), ErrorClass::Network);
        assert_eq!(c("API Error: Connection error.", None), ErrorClass::Network);
        assert_eq!(
            c("stream disconnected before completion", None),
            ErrorClass::Network
        );
        assert_eq!(c("Invalid API key", None), ErrorClass::Authentication);
        // A port or a count that holds a status's digits is no status.
        assert_eq!(
            c(
                "unexpected status 529: HTTP 529, url: http://127.0.0.1:40403/v1/responses",
                None
            ),
            ErrorClass::Overloaded
        );
        assert_eq!(
            c("used 14290 tokens, then 529", None),
            ErrorClass::Overloaded
        );
        assert_eq!(c("port 40401 refused", None), ErrorClass::Other);
        assert_eq!(c("x", Some(401)), ErrorClass::Authentication);
        assert_eq!(
            c("429 You exceeded your current quota", Some(429)),
            ErrorClass::Quota
        );
        assert_eq!(c("insufficient_quota", None), ErrorClass::Quota);
        assert_eq!(
            c("model not found: gpt-9", None),
            ErrorClass::InvalidRequest
        );
        assert_eq!(c("x", Some(404)), ErrorClass::InvalidRequest);
        assert_eq!(c("something odd", None), ErrorClass::Other);
    }

    #[test]
    fn kind_matches_serialized_name() {
        let e = Event::StallWarning {
            silent_ms: 1,
            stall_timeout_ms: 2,
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["kind"], e.kind());
    }
}
