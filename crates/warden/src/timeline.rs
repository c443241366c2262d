//! A run as a timeline: the facts `warden report` prints and draws, read
//! from `run.json` and `events.jsonl`. Pure: values in, text out.
//!
//! Activity, silences and tokens are the supervisor's, from its `status`
//! snapshots (activity is a line, and many lines carry no event), and the
//! finished run's numbers are `run.json`'s: nothing here re-derives them.

use serde_json::Value;

/// A tool call with its span, in ms since the start.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolSpan {
    pub name: String,
    pub input: String,
    pub start: u64,
    pub end: u64,
    pub failed: bool,
    pub finished: bool,
}

/// A notable moment: a warning, an error, the end.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Mark {
    pub at: u64,
    pub kind: String,
    pub text: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Timeline {
    /// Whether `run.json` has a verdict. An unfinished run (still going,
    /// or its warden was killed) is drawn up to its last event.
    pub finished: bool,
    /// The run's length: `duration_ms` of a finished run (never shorter
    /// than its events), else the time of its last event.
    pub duration: u64,
    /// When the first activity came, from the report or else the events.
    pub first_activity: Option<u64>,
    /// The longest stretch without activity, from the report of a
    /// finished run, else from the events.
    pub longest_silence: u64,
    pub activity: Vec<u64>,
    /// `(start, end)` of each silence at least the threshold long.
    pub silences: Vec<(u64, u64)>,
    pub tools: Vec<ToolSpan>,
    pub marks: Vec<Mark>,
    /// `(t, tokens so far)`: the supervisor's count each time it changed.
    pub tokens: Vec<(u64, u64)>,
}

/// All the tokens of a `tokens` object: its `total` where it has one,
/// else the sum of its parts.
pub(crate) fn tokens_total(t: &Value) -> u64 {
    if let Some(total) = t["total"].as_u64() {
        return total;
    }
    ["input", "cache_read", "cache_write", "output"]
        .iter()
        .fold(0u64, |n, k| n.saturating_add(t[*k].as_u64().unwrap_or(0)))
}

pub(crate) fn build(report: &Value, events: &[Value], silence_ms: u64) -> Timeline {
    let finished = !report["verdict"].is_null();
    let last_event = events
        .iter()
        .filter_map(|e| e["t_ms"].as_u64())
        .max()
        .unwrap_or(0);
    // The first run.json of a run says 0 ms: only a finished run's length
    // is the report's, and never shorter than its own events.
    let duration = match report["duration_ms"].as_u64() {
        Some(d) if finished => d.max(last_event),
        _ => last_event,
    };
    let mut t = Timeline {
        finished,
        duration,
        ..Timeline::default()
    };
    let mut open: Vec<(String, ToolSpan)> = Vec::new();
    let mut last_activity: Option<u64> = None;
    let mut longest = 0;
    for e in events {
        let at = e["t_ms"].as_u64().unwrap_or(0);
        let kind = e["kind"].as_str().unwrap_or("");
        let text = |k: &str| e[k].as_str().unwrap_or("").to_string();
        match kind {
            "tool_started" => open.push((
                text("id"),
                ToolSpan {
                    name: text("name"),
                    input: text("input"),
                    start: at,
                    end: duration,
                    failed: false,
                    finished: false,
                },
            )),
            "tool_finished" => {
                let id = text("id");
                let span = match open.iter().position(|(i, _)| *i == id) {
                    Some(p) => Some(open.remove(p).1),
                    None => Some(ToolSpan {
                        name: text("name"),
                        input: String::new(),
                        start: at,
                        end: at,
                        failed: false,
                        finished: true,
                    }),
                };
                if let Some(mut s) = span {
                    // An agent that prints a tool only when done (OpenCode)
                    // says how long it ran: that, not the events' 0 ms.
                    if let Some(d) = e["duration_ms"].as_u64() {
                        s.start = at.saturating_sub(d);
                    }
                    s.end = at;
                    s.finished = true;
                    s.failed = e["is_error"].as_bool().unwrap_or(false);
                    t.tools.push(s);
                }
            }
            "status" => {
                if let Some(last) = e["last_activity_ms"].as_u64() {
                    if last_activity != Some(last) {
                        t.activity.push(last);
                        let before = e["silence_before_ms"].as_u64().unwrap_or(0);
                        if silence_ms > 0 && before >= silence_ms {
                            t.silences.push((last.saturating_sub(before), last));
                        }
                    }
                    last_activity = Some(last);
                }
                longest = longest.max(e["longest_silence_ms"].as_u64().unwrap_or(0));
                let n = tokens_total(&e["tokens"]);
                if t.tokens.last().map(|p| p.1) != Some(n) {
                    t.tokens.push((at, n));
                }
            }
            "stall_warning" => t.marks.push(Mark {
                at,
                kind: "warning".into(),
                text: format!("no activity for {} ms", e["silent_ms"]),
            }),
            "retry" => t.marks.push(Mark {
                at,
                kind: "warning".into(),
                text: format!("retry: {}", text("reason")),
            }),
            "error" => t.marks.push(Mark {
                at,
                kind: "error".into(),
                text: text("message"),
            }),
            "completion_signal" => t.marks.push(Mark {
                at,
                kind: "info".into(),
                text: "completion signal".into(),
            }),
            "result" => t.marks.push(Mark {
                at,
                kind: "info".into(),
                text: if e["success"].as_bool().unwrap_or(false) {
                    "agent: done".into()
                } else {
                    "agent: failed".into()
                },
            }),
            "exited" => t.marks.push(Mark {
                at,
                // Killed, or failed by its own exit: not a green dot.
                kind: if e["signal"].is_null() && e["exit_code"].as_i64() == Some(0) {
                    "info".into()
                } else {
                    "error".into()
                },
                text: format!("exited (code {}, signal {})", e["exit_code"], e["signal"]),
            }),
            "terminating" => t.marks.push(Mark {
                at,
                kind: "error".into(),
                text: format!("ending: {}", text("reason")),
            }),
            "output_truncated" => t.marks.push(Mark {
                at,
                kind: "warning".into(),
                text: "output truncated".into(),
            }),
            _ => {}
        }
    }
    for (_, s) in open {
        t.tools.push(s);
    }
    t.tools.sort_by_key(|s| s.start);
    // The silence still going at the end (or at the last event): from the
    // last activity the supervisor wrote down, else run.json's, else the
    // start when there was none. A run recorded with no status snapshots
    // but with activity has no silence to draw.
    let last = last_activity.or(report["last_activity_ms"].as_u64());
    let no_activity = report["activity_lines"].as_u64().unwrap_or(0) == 0;
    if let Some(from) = last.or(no_activity.then_some(0)) {
        let tail = duration.saturating_sub(from);
        longest = longest.max(tail);
        if silence_ms > 0 && tail >= silence_ms {
            t.silences.push((from, duration));
        }
    }
    let reported = |k: &str| report[k].as_u64().filter(|_| finished);
    t.first_activity = reported("time_to_first_activity_ms").or(t.activity.first().copied());
    t.longest_silence = reported("longest_silence_ms").unwrap_or(longest);
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status(t: u64, last: u64, before: u64, tokens: u64) -> Value {
        json!({"t_ms": t, "kind": "status", "last_activity_ms": last,
               "silence_before_ms": before, "longest_silence_ms": before,
               "tokens": {"input": tokens, "output": 0}})
    }

    #[test]
    fn an_unfinished_run_is_drawn_up_to_its_last_event() {
        // The first run.json: no verdict, 0 ms; the events went on.
        let report = json!({"verdict": null, "duration_ms": 0, "time_to_first_activity_ms": null});
        let events = [
            status(40, 40, 40, 0),
            json!({"t_ms": 5000, "kind": "tool_started", "id": "t1", "name": "Bash"}),
            status(5000, 5000, 4960, 0),
            json!({"t_ms": 9000, "kind": "text", "text": "still here"}),
            status(9000, 9000, 4000, 0),
        ];
        let t = build(&report, &events, 1000);
        assert!(!t.finished);
        assert_eq!(t.duration, 9000);
        assert_eq!(t.first_activity, Some(40));
        assert_eq!(t.longest_silence, 4960);
        assert_eq!(t.tools.len(), 1);
        assert!(t.tools[0].end >= t.tools[0].start);
    }

    #[test]
    fn back_to_back_silences_are_two_and_come_from_the_supervisor() {
        // Lines with no event (no `text`) are activity all the same: the
        // status snapshots say so.
        let report = json!({"verdict": "stalled", "duration_ms": 9000, "longest_silence_ms": 5000});
        let events = [
            status(10, 10, 10, 0),
            status(2000, 2000, 1990, 100),
            status(4000, 4000, 2000, 100),
            json!({"t_ms": 8000, "kind": "text", "text": "an event is not activity here"}),
        ];
        let t = build(&report, &events, 1500);
        assert_eq!(
            t.silences,
            vec![(10, 2000), (2000, 4000), (4000, 9000)],
            "each silence its own band, the last up to the end"
        );
        assert_eq!(t.activity, vec![10, 2000, 4000]);
        assert_eq!(t.longest_silence, 5000, "run.json's number");
        assert_eq!(t.tokens, vec![(10, 0), (2000, 100)]);
    }

    #[test]
    fn a_tool_printed_when_done_spans_its_own_duration() {
        let report = json!({"verdict": "succeeded", "duration_ms": 200_000});
        let events = [
            json!({"t_ms": 130_000, "kind": "tool_started", "id": "t1", "name": "bash"}),
            json!({"t_ms": 130_000, "kind": "tool_finished", "id": "t1", "name": "bash", "duration_ms": 127_000}),
        ];
        let t = build(&report, &events, 1000);
        assert_eq!((t.tools[0].start, t.tools[0].end), (3_000, 130_000));
    }

    #[test]
    fn forged_numbers_do_not_overflow() {
        let report = json!({"verdict": "succeeded", "duration_ms": u64::MAX});
        let events = [
            json!({"t_ms": u64::MAX, "kind": "status", "last_activity_ms": u64::MAX,
                   "silence_before_ms": u64::MAX, "tokens": {"input": u64::MAX, "output": u64::MAX}}),
            json!({"t_ms": 3, "kind": "usage", "input": u64::MAX, "output": 1}),
        ];
        let t = build(&report, &events, 1);
        assert_eq!(t.duration, u64::MAX);
    }
}
