//! A run's timeline folded from its stamped events, one event at a time:
//! tool calls from their start to their end, model requests, activity and
//! silences as the supervisor's status snapshots wrote them down, the
//! token count over time, and the notable moments (warnings, errors, the
//! exit). Pure: no I/O, no clock of its own; every time is an event's
//! stamp, in ms since the run's start.
//!
//! Every view of a run reads it from here, so that they agree: the status
//! snapshot (the open tool call), the spans (tool calls and model
//! requests), and `warden report`'s text and timeline (all of it). A live
//! caller feeds each event as it is written and reads the open calls at
//! any time; what an event closes is handed to the caller at once, never
//! kept, so a long run costs the fold only what is still open.

use warden_events::{Event, Tokens};

use crate::Stamped;

/// A tool call started and not finished yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenTool {
    pub id: String,
    pub name: String,
    pub input: Option<String>,
    /// When it started.
    pub since_ms: u64,
}

/// A tool call from its start to its end (the run's end for one that
/// never finished).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub input: Option<String>,
    pub start_ms: u64,
    pub end_ms: u64,
    /// The agent said the call failed.
    pub failed: bool,
    /// `false`: the run ended with the call still open.
    pub finished: bool,
}

/// One model request: from when the agent got the turn (its first output,
/// or the last tool result) to its last usage report, with the usage it
/// reported on the way (Claude Code reports a request's usage in two
/// parts, at its first token and at its end). It ends where the model's
/// tool calls begin, or with the run.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    pub start_ms: u64,
    pub end_ms: u64,
    pub tokens: Tokens,
    pub cost_usd: Option<f64>,
}

/// How grave a [`Mark`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Info,
    Warning,
    Error,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Info => "info",
            Level::Warning => "warning",
            Level::Error => "error",
        }
    }
}

/// What a [`Mark`] is, for a view that draws each kind its own way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MarkKind {
    /// Half the stall timeout passed with no activity (`stall_warning`).
    StallWarning,
    /// The agent retried an API call (`retry`).
    Retry,
    /// 80% of a budget was spent (`budget_warning`).
    BudgetWarning,
    /// A process of the run outlived the agent; warden killed it (`orphan`).
    Orphan,
    /// The agent reported an error (`error`).
    Error,
    /// warden began to end the run (`terminating`).
    Ending,
    /// The agent process exited (`exited`).
    Exit,
    /// The completion signal, or the agent's own terminal event.
    Done,
    /// The drain was cut short (`output_truncated`).
    Truncated,
}

impl MarkKind {
    /// Every kind, in the order a legend lists them.
    pub const ALL: [MarkKind; 9] = [
        MarkKind::StallWarning,
        MarkKind::Retry,
        MarkKind::BudgetWarning,
        MarkKind::Orphan,
        MarkKind::Error,
        MarkKind::Ending,
        MarkKind::Exit,
        MarkKind::Done,
        MarkKind::Truncated,
    ];

    /// For people, as a legend names it.
    pub fn words(self) -> &'static str {
        match self {
            MarkKind::StallWarning => "stall warning",
            MarkKind::Retry => "API retry by the agent",
            MarkKind::BudgetWarning => "budget warning",
            MarkKind::Orphan => "orphan killed",
            MarkKind::Error => "error",
            MarkKind::Ending => "warden ending the run",
            MarkKind::Exit => "exit",
            MarkKind::Done => "agent done / completion signal",
            MarkKind::Truncated => "output truncated",
        }
    }
}

/// A notable moment: a warning, an error, the exit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    pub at_ms: u64,
    pub level: Level,
    pub kind: MarkKind,
    pub text: String,
}

/// What one event added to the timeline.
#[derive(Debug, Clone, PartialEq)]
pub enum Folded {
    /// A tool call ended (or, from [`Fold::finish`], was still open).
    Tool(ToolCall),
    /// A model request ended.
    Request(ModelRequest),
    Mark(Mark),
    /// The supervisor wrote down activity that came at `at_ms`.
    Activity {
        at_ms: u64,
    },
    /// A silence at least [`Fold::noting_silences`]' threshold long ended.
    Silence {
        from_ms: u64,
        to_ms: u64,
    },
    /// The supervisor's token count changed (or was first written).
    Tokens {
        at_ms: u64,
        total: u64,
    },
}

/// How much of the agent's text the fold keeps: a stream that starts calls
/// and never ends them, or names them with megabytes, cannot grow a live
/// fold without bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// The most calls kept open at once; later ones are not folded.
    pub open_tools: usize,
    /// Characters kept of a call's id and name.
    pub name_chars: usize,
    /// Characters kept of a call's input.
    pub input_chars: usize,
}

impl Bounds {
    /// Everything kept.
    pub const NONE: Bounds = Bounds {
        open_tools: usize::MAX,
        name_chars: usize::MAX,
        input_chars: usize::MAX,
    };
}

/// `s` cut to at most `n` characters.
pub(crate) fn cap(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((at, _)) => s[..at].to_string(),
        None => s.to_string(),
    }
}

/// The fold itself: feed it every event of a run, in order, with
/// [`Fold::push`], then [`Fold::finish`] once.
#[derive(Debug, Clone)]
pub struct Fold {
    bounds: Bounds,
    /// Silences at least this long are [`Folded::Silence`]; 0: none.
    silence_ms: u64,
    /// Oldest first.
    open: Vec<OpenTool>,
    /// Since when the agent has had the turn: the start of the next
    /// model request.
    turn_since_ms: Option<u64>,
    request: Option<ModelRequest>,
    last_activity_ms: Option<u64>,
    longest_silence_ms: u64,
    tokens: Option<u64>,
}

impl Default for Fold {
    fn default() -> Self {
        Self::new()
    }
}

impl Fold {
    pub fn new() -> Self {
        Self {
            bounds: Bounds::NONE,
            silence_ms: 0,
            open: Vec::new(),
            turn_since_ms: None,
            request: None,
            last_activity_ms: None,
            longest_silence_ms: 0,
            tokens: None,
        }
    }

    /// The fold keeping at most `bounds` of the agent's text.
    pub fn bounded(mut self, bounds: Bounds) -> Self {
        self.bounds = bounds;
        self
    }

    /// The fold reporting each silence of at least `ms` (0: none).
    pub fn noting_silences(mut self, ms: u64) -> Self {
        self.silence_ms = ms;
        self
    }

    /// Tool calls started and not finished yet, oldest first.
    pub fn open_tools(&self) -> &[OpenTool] {
        &self.open
    }

    /// The last activity the supervisor wrote down.
    pub fn last_activity_ms(&self) -> Option<u64> {
        self.last_activity_ms
    }

    /// The longest silence the supervisor wrote down so far.
    pub fn longest_silence_ms(&self) -> u64 {
        self.longest_silence_ms
    }

    /// Takes in one event; what it added goes to `out`.
    pub fn push(&mut self, e: &Stamped, mut out: impl FnMut(Folded)) {
        let t = e.t_ms;
        match &e.event {
            Event::SessionStarted { .. }
            | Event::Text { .. }
            | Event::Thinking { .. }
            | Event::Stderr { .. } => {
                // The first output gives the agent its first turn.
                self.turn_since_ms.get_or_insert(t);
            }
            Event::ToolStarted {
                id, name, input, ..
            } => {
                // The model's request ended where its tool calls begin.
                self.end_request(&mut out);
                let b = self.bounds;
                let id = cap(id, b.name_chars);
                // The same id again is the same call, started anew.
                self.open.retain(|o| o.id != id);
                if self.open.len() < b.open_tools {
                    self.open.push(OpenTool {
                        id,
                        name: cap(name, b.name_chars),
                        input: input.as_deref().map(|i| cap(i, b.input_chars)),
                        since_ms: t,
                    });
                }
            }
            Event::ToolFinished {
                id,
                name,
                is_error,
                duration_ms,
                ..
            } => self.tool_finished(t, id, name, *is_error, *duration_ms, &mut out),
            Event::Usage {
                tokens,
                cost_usd,
                cumulative: false,
            } => {
                let start_ms = self.turn_since_ms.unwrap_or(t).min(t);
                let r = self.request.get_or_insert(ModelRequest {
                    start_ms,
                    end_ms: t,
                    tokens: Tokens::default(),
                    cost_usd: None,
                });
                r.end_ms = t;
                r.tokens.add(tokens);
                if let Some(c) = cost_usd {
                    *r.cost_usd.get_or_insert(0.0) += c;
                }
            }
            Event::Status {
                last_activity_ms,
                silence_before_ms,
                longest_silence_ms,
                tokens,
                ..
            } => self.status(
                t,
                *last_activity_ms,
                *silence_before_ms,
                *longest_silence_ms,
                tokens,
                &mut out,
            ),
            event => {
                if let Some((kind, level, text)) = mark_of(event) {
                    out(Folded::Mark(Mark {
                        at_ms: t,
                        level,
                        kind,
                        text,
                    }));
                }
            }
        }
    }

    /// A tool call ended (see [`Fold::push`]).
    fn tool_finished(
        &mut self,
        t: u64,
        id: &str,
        name: &str,
        is_error: bool,
        duration_ms: Option<u64>,
        out: &mut impl FnMut(Folded),
    ) {
        let b = self.bounds;
        let id = cap(id, b.name_chars);
        let open = self
            .open
            .iter()
            .position(|o| o.id == id)
            .map(|p| self.open.remove(p));
        // An agent that prints a tool only when done (OpenCode)
        // says how long it ran: that, not the events' 0 ms.
        let start_ms = match (duration_ms, &open) {
            (Some(d), _) => t.saturating_sub(d),
            (None, Some(o)) => o.since_ms,
            (None, None) => t,
        };
        out(Folded::Tool(ToolCall {
            id,
            name: cap(name, b.name_chars),
            input: open.and_then(|o| o.input),
            start_ms,
            end_ms: t,
            failed: is_error,
            finished: true,
        }));
        self.turn_since_ms = Some(t);
    }

    /// A status snapshot: activity, silences, tokens (see [`Fold::push`]).
    fn status(
        &mut self,
        t: u64,
        last_activity_ms: Option<u64>,
        silence_before_ms: u64,
        longest_silence_ms: u64,
        tokens: &Tokens,
        out: &mut impl FnMut(Folded),
    ) {
        if let Some(last) = last_activity_ms {
            if self.last_activity_ms != Some(last) {
                out(Folded::Activity { at_ms: last });
                let before = silence_before_ms;
                if self.silence_ms > 0 && before >= self.silence_ms {
                    out(Folded::Silence {
                        from_ms: last.saturating_sub(before),
                        to_ms: last,
                    });
                }
            }
            self.last_activity_ms = Some(last);
        }
        self.longest_silence_ms = self.longest_silence_ms.max(longest_silence_ms);
        // No point on the curve while no count is known.
        if let Some(total) = tokens.total()
            && self.tokens != Some(total)
        {
            self.tokens = Some(total);
            out(Folded::Tokens { at_ms: t, total });
        }
    }

    fn end_request(&mut self, out: &mut impl FnMut(Folded)) {
        if let Some(r) = self.request.take() {
            out(Folded::Request(r));
        }
    }

    /// Ends the fold at `end_ms`, the run's end: the model request going
    /// on, then each call still open (oldest first), as a call that never
    /// finished and ends with the run.
    pub fn finish(&mut self, end_ms: u64, mut out: impl FnMut(Folded)) {
        self.end_request(&mut out);
        for o in std::mem::take(&mut self.open) {
            out(Folded::Tool(ToolCall {
                id: o.id,
                name: o.name,
                input: o.input,
                start_ms: o.since_ms,
                end_ms: end_ms.max(o.since_ms),
                failed: false,
                finished: false,
            }));
        }
    }
}

/// An optional number as `run.json` writes it: the number, or `null`.
fn or_null(n: Option<i32>) -> String {
    n.map_or_else(|| "null".into(), |n| n.to_string())
}

/// The mark an event puts on the timeline, if any: its kind, level and
/// text.
fn mark_of(event: &Event) -> Option<(MarkKind, Level, String)> {
    Some(match event {
        Event::StallWarning { silent_ms, .. } => (
            MarkKind::StallWarning,
            Level::Warning,
            format!("no activity for {silent_ms} ms"),
        ),
        Event::Retry { reason, .. } => {
            (MarkKind::Retry, Level::Warning, format!("retry: {reason}"))
        }
        Event::BudgetWarning {
            scope,
            budget,
            limit,
            reached,
        } => (
            MarkKind::BudgetWarning,
            Level::Warning,
            crate::budget::warning(*scope, *budget, *limit, *reached),
        ),
        Event::Orphan {
            pid,
            cmdline,
            held_pipe,
        } => (
            MarkKind::Orphan,
            Level::Warning,
            format!(
                "orphan killed: pid {pid} `{cmdline}`{}",
                if *held_pipe {
                    ", holding the output pipe"
                } else {
                    ""
                }
            ),
        ),
        Event::Error { message, .. } => (MarkKind::Error, Level::Error, message.clone()),
        Event::CompletionSignal => (MarkKind::Done, Level::Info, "completion signal".into()),
        Event::Result { success, .. } => (
            MarkKind::Done,
            Level::Info,
            if *success {
                "agent: done".into()
            } else {
                "agent: failed".into()
            },
        ),
        Event::Exited { exit_code, signal } => (
            MarkKind::Exit,
            // Killed, or failed by its own exit: not a good sign.
            if signal.is_none() && *exit_code == Some(0) {
                Level::Info
            } else {
                Level::Error
            },
            format!(
                "exited (code {}, signal {})",
                or_null(*exit_code),
                or_null(*signal)
            ),
        ),
        Event::Terminating { reason } => {
            (MarkKind::Ending, Level::Error, format!("ending: {reason}"))
        }
        Event::OutputTruncated { .. } => (
            MarkKind::Truncated,
            Level::Warning,
            "output truncated".into(),
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use warden_events::SchemaVersion;

    fn at(t_ms: u64, event: Event) -> Stamped {
        Stamped {
            schema_version: SchemaVersion,
            t_ms,
            event,
        }
    }

    fn started(id: &str, name: &str) -> Event {
        Event::ToolStarted {
            id: id.into(),
            name: name.into(),
            input: Some(format!("{name} input")),
            timeout_ms: None,
        }
    }

    fn finished(id: &str, name: &str, duration_ms: Option<u64>) -> Event {
        Event::ToolFinished {
            id: id.into(),
            name: name.into(),
            is_error: false,
            output: None,
            output_bytes: 0,
            duration_ms,
        }
    }

    fn usage(input: u64, output: u64) -> Event {
        let mut tokens = Tokens::default();
        tokens.input = Some(input);
        tokens.output = Some(output);
        Event::Usage {
            tokens,
            cost_usd: Some(0.5),
            cumulative: false,
        }
    }

    fn status(last: u64, before: u64, tokens: u64) -> Event {
        let mut t = Tokens::default();
        t.input = Some(tokens);
        Event::Status {
            last_activity_ms: Some(last),
            activity_lines: 1,
            silence_before_ms: before,
            longest_silence_ms: before,
            stall_deadline_ms: None,
            tokens: t,
            cost_usd: None,
            tool_calls: 0,
            retries: 0,
            tool: None,
        }
    }

    /// Everything `events` fold into, the fold ended at `end_ms`.
    fn fold(f: &mut Fold, events: &[Stamped], end_ms: u64) -> Vec<Folded> {
        let mut all = Vec::new();
        for e in events {
            f.push(e, |x| all.push(x));
        }
        f.finish(end_ms, |x| all.push(x));
        all
    }

    fn tools(all: &[Folded]) -> Vec<(&str, u64, u64, bool)> {
        all.iter()
            .filter_map(|x| match x {
                Folded::Tool(c) => Some((c.id.as_str(), c.start_ms, c.end_ms, c.finished)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn open_calls_are_readable_at_any_time_and_the_newest_is_last() {
        let mut f = Fold::new();
        f.push(&at(10, started("a", "Bash")), |_| {});
        f.push(&at(20, started("b", "Read")), |_| {});
        let ids: Vec<&str> = f.open_tools().iter().map(|o| o.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(f.open_tools()[1].since_ms, 20);
        let mut closed = Vec::new();
        f.push(&at(30, finished("b", "Read", None)), |x| closed.push(x));
        assert_eq!(tools(&closed), [("b", 20, 30, true)]);
        assert_eq!(f.open_tools().len(), 1);
        assert_eq!(f.open_tools()[0].name, "Bash");
    }

    #[test]
    fn a_call_still_open_at_the_end_ends_with_the_run_unfinished() {
        let all = fold(
            &mut Fold::new(),
            &[
                at(10, started("a", "Bash")),
                at(20, started("b", "Read")),
                at(25, finished("a", "Bash", None)),
            ],
            100,
        );
        assert_eq!(tools(&all), [("a", 10, 25, true), ("b", 20, 100, false)]);
        let Some(Folded::Tool(b)) = all.last() else {
            panic!("{all:?}")
        };
        assert_eq!(b.input.as_deref(), Some("Read input"));
    }

    #[test]
    fn a_duration_the_agent_reports_wins_and_an_unknown_call_is_still_one() {
        let all = fold(
            &mut Fold::new(),
            &[
                // OpenCode: started and finished at once, with its duration.
                at(130_000, started("t1", "bash")),
                at(130_000, finished("t1", "bash", Some(127_000))),
                // A call never seen starting.
                at(140_000, finished("t2", "read", None)),
                at(150_000, finished("t3", "read", Some(u64::MAX))),
            ],
            200_000,
        );
        assert_eq!(
            tools(&all),
            [
                ("t1", 3_000, 130_000, true),
                ("t2", 140_000, 140_000, true),
                ("t3", 0, 150_000, true)
            ]
        );
    }

    #[test]
    fn the_same_id_started_again_is_one_open_call() {
        let mut f = Fold::new();
        f.push(&at(10, started("a", "Bash")), |_| {});
        f.push(&at(20, started("a", "Bash")), |_| {});
        assert_eq!(f.open_tools().len(), 1);
        assert_eq!(f.open_tools()[0].since_ms, 20);
    }

    #[test]
    fn a_model_request_runs_from_the_turn_to_its_last_usage_and_ends_at_a_tool() {
        let all = fold(
            &mut Fold::new(),
            &[
                at(5, Event::Text { text: "hi".into() }),
                at(20, usage(100, 1)),
                at(30, usage(0, 40)),
                at(35, started("t1", "Bash")),
                at(50, finished("t1", "Bash", None)),
                at(70, usage(140, 5)),
            ],
            80,
        );
        let requests: Vec<&ModelRequest> = all
            .iter()
            .filter_map(|x| match x {
                Folded::Request(r) => Some(r),
                _ => None,
            })
            .collect();
        assert_eq!(requests.len(), 2, "{all:?}");
        assert_eq!((requests[0].start_ms, requests[0].end_ms), (5, 30));
        assert_eq!(
            (requests[0].tokens.input, requests[0].tokens.output),
            (Some(100), Some(41))
        );
        assert_eq!(requests[0].cost_usd, Some(1.0));
        assert_eq!((requests[1].start_ms, requests[1].end_ms), (50, 70));
        // The first request ended before the tool began.
        assert!(matches!(all[0], Folded::Request(_)), "{all:?}");
    }

    #[test]
    fn silences_activity_and_tokens_come_from_the_status_snapshots() {
        let mut f = Fold::new().noting_silences(1500);
        let all = fold(
            &mut f,
            &[
                at(10, status(10, 10, 0)),
                at(2000, status(2000, 1990, 100)),
                // The same activity written again: nothing new.
                at(2500, status(2000, 0, 100)),
                at(4000, status(4000, 2000, 100)),
            ],
            9000,
        );
        assert_eq!(
            all,
            [
                Folded::Activity { at_ms: 10 },
                Folded::Tokens {
                    at_ms: 10,
                    total: 0
                },
                Folded::Activity { at_ms: 2000 },
                Folded::Silence {
                    from_ms: 10,
                    to_ms: 2000
                },
                Folded::Tokens {
                    at_ms: 2000,
                    total: 100
                },
                Folded::Activity { at_ms: 4000 },
                Folded::Silence {
                    from_ms: 2000,
                    to_ms: 4000
                },
            ]
        );
        assert_eq!(f.last_activity_ms(), Some(4000));
        assert_eq!(f.longest_silence_ms(), 2000);
    }

    #[test]
    fn marks_say_what_happened_and_how_grave_it_was() {
        let all = fold(
            &mut Fold::new(),
            &[
                at(1, Event::CompletionSignal),
                at(
                    2,
                    Event::Exited {
                        exit_code: Some(0),
                        signal: None,
                    },
                ),
                at(
                    3,
                    Event::Exited {
                        exit_code: None,
                        signal: Some(9),
                    },
                ),
                at(
                    4,
                    Event::StallWarning {
                        silent_ms: 700,
                        stall_timeout_ms: 1000,
                    },
                ),
            ],
            10,
        );
        let marks: Vec<(u64, &str, &str)> = all
            .iter()
            .filter_map(|x| match x {
                Folded::Mark(m) => Some((m.at_ms, m.level.as_str(), m.text.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(
            marks,
            [
                (1, "info", "completion signal"),
                (2, "info", "exited (code 0, signal null)"),
                (3, "error", "exited (code null, signal 9)"),
                (4, "warning", "no activity for 700 ms"),
            ]
        );
    }

    #[test]
    fn a_bounded_fold_cuts_names_and_keeps_at_most_so_many_open_calls() {
        let bounds = Bounds {
            open_tools: 3,
            name_chars: 4,
            input_chars: 2,
        };
        let mut f = Fold::new().bounded(bounds);
        for i in 0..5 {
            f.push(&at(i, started(&format!("{i}-long-id"), "LongName")), |_| {});
        }
        assert_eq!(f.open_tools().len(), 3);
        assert_eq!(f.open_tools()[0].id, "0-lo");
        assert_eq!(f.open_tools()[0].name, "Long");
        assert_eq!(f.open_tools()[0].input.as_deref(), Some("Lo"));
        // A finish names its call by the id as the fold cut it.
        let mut closed = Vec::new();
        f.push(&at(9, finished("1-long-id-too", "LongName", None)), |x| {
            closed.push(x)
        });
        assert_eq!(tools(&closed), [("1-lo", 1, 9, true)]);
    }
}
