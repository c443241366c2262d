//! A run as a timeline: the facts `warden report` prints and draws, read
//! from `run.json` and `events.jsonl`. Pure: values in, text out.

use serde_json::Value;

/// A tool call with its span, in ms since the start.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpan {
    pub name: String,
    pub input: String,
    pub start: u64,
    pub end: u64,
    pub failed: bool,
    pub finished: bool,
}

/// A notable moment: a warning, an error, the end.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    pub at: u64,
    pub kind: String,
    pub text: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
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
    /// `(t, input + output tokens so far)`.
    pub tokens: Vec<(u64, u64)>,
}

const ACTIVITY: &[&str] = &[
    "text",
    "stderr",
    "thinking",
    "tool_started",
    "tool_progress",
    "tool_finished",
    "usage",
    "session_started",
    "result",
    "error",
    "retry",
    "oversized_line",
];

pub fn build(report: &Value, events: &[Value], silence_ms: u64) -> Timeline {
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
    let (mut tokens_step, mut tokens_total): (u64, Option<u64>) = (0, None);
    for e in events {
        let at = e["t_ms"].as_u64().unwrap_or(0);
        let kind = e["kind"].as_str().unwrap_or("");
        if ACTIVITY.contains(&kind) {
            t.activity.push(at);
        }
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
            "usage" => {
                // Saturating: the numbers come from a file anyone could edit.
                let n = e["input"]
                    .as_u64()
                    .unwrap_or(0)
                    .saturating_add(e["output"].as_u64().unwrap_or(0));
                if e["cumulative"].as_bool().unwrap_or(false) {
                    tokens_total = Some(n);
                } else {
                    tokens_step = tokens_step.saturating_add(n);
                }
                t.tokens
                    .push((at, tokens_total.unwrap_or(tokens_step).max(tokens_step)));
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
                kind: "info".into(),
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
    // Silences: between activities, from the start, and to the end.
    let mut prev = 0;
    let mut longest = 0;
    for &a in t.activity.iter().chain(std::iter::once(&duration)) {
        let gap = a.saturating_sub(prev);
        longest = longest.max(gap);
        if silence_ms > 0 && gap >= silence_ms {
            t.silences.push((prev, a));
        }
        prev = prev.max(a);
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

    #[test]
    fn an_unfinished_run_is_drawn_up_to_its_last_event() {
        // The first run.json: no verdict, 0 ms; the events went on.
        let report = json!({"verdict": null, "duration_ms": 0, "time_to_first_activity_ms": null});
        let events = [
            json!({"t_ms": 40, "kind": "session_started"}),
            json!({"t_ms": 5000, "kind": "tool_started", "id": "t1", "name": "Bash"}),
            json!({"t_ms": 9000, "kind": "text", "text": "still here"}),
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
            json!({"t_ms": u64::MAX, "kind": "usage", "input": u64::MAX, "output": u64::MAX}),
            json!({"t_ms": 3, "kind": "usage", "input": u64::MAX, "output": 1}),
        ];
        let t = build(&report, &events, 1);
        assert_eq!(t.duration, u64::MAX);
    }
}
