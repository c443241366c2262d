//! Snapshot tests: every recorded stream under `tests/fixtures/<agent>/`
//! decoded into events and a summary. A change in what warden understands
//! of an agent's output shows up as a readable diff of the snapshot.
//!
//! Lines over 4 KiB count as oversized here, so fixtures can exercise that
//! path with small files.

use std::fmt::Write;
use std::path::Path;

use warden_events::{Agent, LineKind, StreamDecoder};

const MAX_LINE: usize = 4096;

/// Decodes `bytes` as `agent` in chunks of `chunk` bytes and renders one
/// line per input line with its kind and events, then the summary.
pub fn render(agent: Agent, bytes: &[u8], chunk: usize) -> String {
    let mut d = StreamDecoder::new(agent, MAX_LINE);
    let mut out = String::new();
    let mut n = 0;
    let mut on_line = |kind: LineKind, events: &mut Vec<warden_events::Event>| {
        n += 1;
        let _ = writeln!(out, "line {n}: {kind:?}");
        for e in events.iter() {
            let _ = writeln!(out, "  {}", serde_json::to_string(e).unwrap());
        }
    };
    for c in bytes.chunks(chunk.max(1)) {
        d.push(c, &mut on_line);
    }
    d.finish(&mut on_line);
    let _ = writeln!(
        out,
        "summary: {}",
        serde_json::to_string_pretty(d.summary()).unwrap()
    );
    out
}

fn fixtures(agent: Agent) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(agent.name());
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect()
}

fn check(agent: Agent) {
    let all = fixtures(agent);
    assert!(!all.is_empty(), "no fixtures for {agent}");
    for (name, bytes) in all {
        let whole = render(agent, &bytes, bytes.len());
        // The same events whatever the chunking.
        for chunk in [1, 7, 4096] {
            assert_eq!(
                render(agent, &bytes, chunk),
                whole,
                "{agent}/{name} split every {chunk} bytes"
            );
        }
        insta::assert_snapshot!(format!("{}__{}", agent.name(), name), whole);
    }
}

#[test]
fn claude_fixtures() {
    check(Agent::Claude);
}

#[test]
fn codex_fixtures() {
    check(Agent::Codex);
}

#[test]
fn opencode_fixtures() {
    check(Agent::OpenCode);
}

#[test]
fn pi_fixtures() {
    check(Agent::Pi);
}

#[test]
fn gemini_fixtures() {
    check(Agent::Gemini);
}

#[test]
fn exec_fixtures() {
    check(Agent::Exec);
}
