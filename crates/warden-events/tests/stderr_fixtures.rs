//! Recorded stderr of real CLIs that announce their retries only there:
//! each retry counted once, whatever the chunking, and the other lines
//! left as they were.

use std::path::Path;

use warden_events::{Agent, Event, LineKind, StreamDecoder};

fn stderr_of(agent: Agent, name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/stderr")
        .join(agent.name())
        .join(format!("{name}.stderr.log"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The retry events, and the number of lines that were activity.
fn decode(agent: Agent, bytes: &[u8], chunk: usize) -> (Vec<Event>, u32, usize) {
    let mut d = StreamDecoder::stderr(agent, 1 << 20);
    let mut retries = Vec::new();
    let mut active = 0;
    let mut on_line = |kind: LineKind, events: &mut Vec<Event>| {
        if kind == LineKind::WellFormed {
            active += 1;
        }
        retries.extend(
            events
                .drain(..)
                .filter(|e| matches!(e, Event::Retry { .. })),
        );
    };
    for c in bytes.chunks(chunk) {
        d.push(c, &mut on_line);
    }
    d.finish(&mut on_line);
    let n = d.summary().reported.retries;
    (retries, n, active)
}

fn attempts(events: &[Event]) -> Vec<Option<u32>> {
    events
        .iter()
        .map(|e| match e {
            Event::Retry { attempt, .. } => *attempt,
            _ => None,
        })
        .collect()
}

#[test]
fn gemini_two_retries() {
    let bytes = stderr_of(Agent::Gemini, "retries");
    for chunk in [1, 7, 4096] {
        let (events, n, active) = decode(Agent::Gemini, &bytes, chunk);
        assert_eq!(n, 2);
        assert_eq!(attempts(&events), [Some(1), Some(2)]);
        // Every line is still a stderr line (stack traces included).
        assert_eq!(
            active,
            bytes
                .split(|b| *b == b'\n')
                .filter(|l| !l.is_empty())
                .count()
        );
    }
}

#[test]
fn opencode_two_retries_and_its_log_is_not_activity() {
    let bytes = stderr_of(Agent::OpenCode, "retries");
    for chunk in [1, 7, 4096] {
        let (events, n, active) = decode(Agent::OpenCode, &bytes, chunk);
        assert_eq!(n, 2);
        assert_eq!(attempts(&events), [Some(1), Some(2)]);
        // Only the two ERROR lines.
        assert_eq!(active, 2);
    }
}
