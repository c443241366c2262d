//! A run as a timeline: the facts `warden report` prints and draws, read
//! from `run.json` and `events.jsonl`. Pure: values in, text out.
//!
//! Activity, silences and tokens are the supervisor's, from its `status`
//! snapshots (activity is a line, and many lines carry no event), and the
//! finished run's numbers are `run.json`'s: nothing here re-derives them.

use warden_events::event::Stamped;
use warden_run::Report;
use warden_run::timeline::{Fold, Folded, Mark, ToolCall};

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
    /// Tool calls in the order they started.
    pub tools: Vec<ToolCall>,
    pub marks: Vec<Mark>,
    /// `(t, tokens so far)`: the supervisor's count each time it changed.
    pub tokens: Vec<(u64, u64)>,
}

pub(crate) fn build(report: &Report, events: &[Stamped], silence_ms: u64) -> Timeline {
    let finished = report.verdict.is_some();
    let last_event = events.iter().map(|e| e.t_ms).max().unwrap_or(0);
    // The first run.json of a run says 0 ms: only a finished run's length
    // is the report's, and never shorter than its own events.
    let duration = if finished {
        report.duration_ms.max(last_event)
    } else {
        last_event
    };
    let mut t = Timeline {
        finished,
        duration,
        ..Timeline::default()
    };
    let mut fold = Fold::new().noting_silences(silence_ms);
    let mut take = |f: Folded| match f {
        Folded::Tool(call) => t.tools.push(call),
        Folded::Mark(m) => t.marks.push(m),
        Folded::Activity { at_ms } => t.activity.push(at_ms),
        Folded::Silence { from_ms, to_ms } => t.silences.push((from_ms, to_ms)),
        Folded::Tokens { at_ms, total } => t.tokens.push((at_ms, total)),
        Folded::Request(_) => {}
    };
    for e in events {
        fold.push(e, &mut take);
    }
    fold.finish(duration, &mut take);
    t.tools.sort_by_key(|s| s.start_ms);
    // The silence still going at the end (or at the last event): from the
    // last activity the supervisor wrote down, else run.json's, else the
    // start when there was none. A run recorded with no status snapshots
    // but with activity has no silence to draw.
    let mut longest = fold.longest_silence_ms();
    let last = fold.last_activity_ms().or(report.last_activity_ms);
    let no_activity = report.activity_lines == 0;
    if let Some(from) = last.or(no_activity.then_some(0)) {
        let tail = duration.saturating_sub(from);
        longest = longest.max(tail);
        if silence_ms > 0 && tail >= silence_ms {
            t.silences.push((from, duration));
        }
    }
    t.first_activity = report
        .time_to_first_activity_ms
        .filter(|_| finished)
        .or(t.activity.first().copied());
    t.longest_silence = if finished {
        report.longest_silence_ms
    } else {
        longest
    };
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// A `run.json` of this warden with `fields` in place of its own.
    fn report(fields: Value) -> Report {
        let mut r = json!({
            "schema_version": 1, "run_id": "r", "agent": "exec", "command": ["true"],
            "cwd": "/", "run_dir": "/r", "warden_version": "0", "verdict": null,
            "reason": "", "started_at": "", "duration_ms": 0, "longest_silence_ms": 0,
            "activity_lines": 0, "event_counts": {}, "stall_warnings": 0,
            "stall_watchdog_armed": true, "forced_completion": false, "hanging": [],
            "orphans": [], "orphans_killed": 0, "sandbox": "host", "turns": 0,
            "tool_calls": 0, "tokens": tokens(0, 0),
            "retries": 0, "stall_extensions": [], "commits": [], "stdout_bytes": 0,
            "stderr_bytes": 0, "live_events_dropped": 0,
            "limits": {"drain_grace_ms": 0, "kill_grace_ms": 0, "completion_signal": "",
                       "max_line": 1, "on_fatal_error": "end"},
        });
        for (k, v) in fields.as_object().expect("an object") {
            r[k] = v.clone();
        }
        serde_json::from_value(r).expect("a run report")
    }

    /// An `events.jsonl` line.
    fn event(mut e: Value) -> Stamped {
        e["schema_version"] = json!(1);
        serde_json::from_value(e.clone()).unwrap_or_else(|err| panic!("{e}: {err}"))
    }

    fn tokens(input: u64, output: u64) -> Value {
        json!({"input": input, "output": output, "cache_read": 0, "cache_write": 0, "reasoning": 0})
    }

    fn status(t: u64, last: u64, before: u64, n: u64) -> Stamped {
        event(
            json!({"t_ms": t, "kind": "status", "last_activity_ms": last,
               "activity_lines": 1, "silence_before_ms": before, "longest_silence_ms": before,
               "tokens": tokens(n, 0), "tool_calls": 0, "retries": 0}),
        )
    }

    #[test]
    fn an_unfinished_run_is_drawn_up_to_its_last_event() {
        // The first run.json: no verdict, 0 ms; the events went on.
        let report =
            report(json!({"verdict": null, "duration_ms": 0, "time_to_first_activity_ms": null}));
        let events = [
            status(40, 40, 40, 0),
            event(json!({"t_ms": 5000, "kind": "tool_started", "id": "t1", "name": "Bash"})),
            status(5000, 5000, 4960, 0),
            event(json!({"t_ms": 9000, "kind": "text", "text": "still here"})),
            status(9000, 9000, 4000, 0),
        ];
        let t = build(&report, &events, 1000);
        assert!(!t.finished);
        assert_eq!(t.duration, 9000);
        assert_eq!(t.first_activity, Some(40));
        assert_eq!(t.longest_silence, 4960);
        assert_eq!(t.tools.len(), 1);
        assert!(t.tools[0].end_ms >= t.tools[0].start_ms);
    }

    #[test]
    fn back_to_back_silences_are_two_and_come_from_the_supervisor() {
        // Lines with no event (no `text`) are activity all the same: the
        // status snapshots say so.
        let report =
            report(json!({"verdict": "stalled", "duration_ms": 9000, "longest_silence_ms": 5000}));
        let events = [
            status(10, 10, 10, 0),
            status(2000, 2000, 1990, 100),
            status(4000, 4000, 2000, 100),
            event(json!({"t_ms": 8000, "kind": "text", "text": "an event is not activity here"})),
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
        let report = report(json!({"verdict": "succeeded", "duration_ms": 200_000}));
        let events = [
            event(json!({"t_ms": 130_000, "kind": "tool_started", "id": "t1", "name": "bash"})),
            event(
                json!({"t_ms": 130_000, "kind": "tool_finished", "id": "t1", "name": "bash",
                         "is_error": false, "output_bytes": 0, "duration_ms": 127_000}),
            ),
        ];
        let t = build(&report, &events, 1000);
        assert_eq!((t.tools[0].start_ms, t.tools[0].end_ms), (3_000, 130_000));
    }

    #[test]
    fn an_exit_reads_as_it_did_and_a_kill_is_an_error() {
        let report = report(json!({"verdict": "cancelled", "duration_ms": 20}));
        let events = [
            event(json!({"t_ms": 10, "kind": "exited", "exit_code": 0, "signal": null})),
            event(json!({"t_ms": 20, "kind": "exited", "exit_code": null, "signal": 9})),
        ];
        let t = build(&report, &events, 0);
        let marks: Vec<(&str, &str)> = t
            .marks
            .iter()
            .map(|m| (m.level.as_str(), m.text.as_str()))
            .collect();
        assert_eq!(
            marks,
            [
                ("info", "exited (code 0, signal null)"),
                ("error", "exited (code null, signal 9)")
            ]
        );
    }

    #[test]
    fn forged_numbers_do_not_overflow() {
        let report = report(json!({"verdict": "succeeded", "duration_ms": u64::MAX}));
        let events = [
            event(
                json!({"t_ms": u64::MAX, "kind": "status", "last_activity_ms": u64::MAX,
                   "activity_lines": 1, "silence_before_ms": u64::MAX, "longest_silence_ms": 0,
                   "tokens": tokens(u64::MAX, u64::MAX), "tool_calls": 0, "retries": 0}),
            ),
            event(
                json!({"t_ms": 3, "kind": "usage", "input": u64::MAX, "output": 1,
                   "cache_read": 0, "cache_write": 0, "reasoning": 0, "cumulative": false}),
            ),
        ];
        let t = build(&report, &events, 1);
        assert_eq!(t.duration, u64::MAX);
        assert_eq!(t.tokens, vec![(u64::MAX, u64::MAX)]);
    }
}
