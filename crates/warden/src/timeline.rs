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
    pub duration: u64,
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
    let duration = report["duration_ms"].as_u64().unwrap_or_else(|| {
        events
            .iter()
            .filter_map(|e| e["t_ms"].as_u64())
            .max()
            .unwrap_or(0)
    });
    let mut t = Timeline {
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
                    s.end = at;
                    s.finished = true;
                    s.failed = e["is_error"].as_bool().unwrap_or(false);
                    t.tools.push(s);
                }
            }
            "usage" => {
                let n = e["input"].as_u64().unwrap_or(0) + e["output"].as_u64().unwrap_or(0);
                if e["cumulative"].as_bool().unwrap_or(false) {
                    tokens_total = Some(n);
                } else {
                    tokens_step += n;
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
    for &a in t.activity.iter().chain(std::iter::once(&duration)) {
        if a >= prev + silence_ms && silence_ms > 0 {
            t.silences.push((prev, a));
        }
        prev = prev.max(a);
    }
    t
}
