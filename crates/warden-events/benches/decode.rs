//! Decode throughput: `cargo bench -p warden-events --bench decode`.
//!
//! For each agent, generates a realistic stream of tens of MB (text, tool
//! calls, usage, and big tool results with escapes), decodes it the way
//! the supervisor does (64 KiB reads through the line splitter and the
//! agent's decoder), and prints MB/s beside `wc -l` on the same file in
//! the same run. `WARDEN_BENCH_MB` sets the stream size (default 64);
//! `WARDEN_BENCH_ONLY` (words, such as `pi claude`) keeps the streams
//! whose label contains one of them; `WARDEN_BENCH_RUNS` sets how many
//! turns decoder and `wc -l` take (default 5). Each rate is given for the
//! fastest turn (the min time) and the median one, and so is the ratio of
//! decoder to `wc -l`: fastest over fastest, median over median.
//!
//! Claude is measured twice: as `claude -p --output-format stream-json`
//! writes, and with `--include-partial-messages` (how warden starts it),
//! where about 87% of the lines are `stream_event` deltas that carry
//! nothing warden records but the usage of `message_start` and
//! `message_delta`.

use std::io::Write;
use std::time::{Duration, Instant};

use warden_events::{Agent, StreamDecoder};

#[path = "../../warden/benches/measure/mod.rs"]
mod measure;
mod streams;
use measure::{Machine, Samples};
use streams::{big_text, claude_partial, json_str};

fn main() {
    let mb: usize = std::env::var("WARDEN_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let runs: usize = std::env::var("WARDEN_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let tmp = tempfile::tempdir().unwrap();
    println!("# decode throughput ({mb} MB per agent, {runs} turns each beside `wc -l`)\n");
    let machine = Machine::start();
    println!(
        "| stream | lines | events | decoder MB/s (fastest / median) | `wc -l` MB/s (fastest / median) | decoder / wc (fastest / median) |"
    );
    println!("|---|---|---|---|---|---|");
    let shapes = Agent::ALL.into_iter().flat_map(|agent| {
        let partial = (agent == Agent::Claude).then_some((agent, true));
        std::iter::once((agent, false)).chain(partial)
    });
    let only = std::env::var("WARDEN_BENCH_ONLY").unwrap_or_default();
    for (agent, partial) in shapes {
        let label = if partial {
            format!("{agent} (partial messages)")
        } else {
            agent.to_string()
        };
        if !only.is_empty() && !only.split_whitespace().any(|w| label.contains(w)) {
            continue;
        }
        let data = stream(agent, partial, mb << 20);
        let file = tmp.path().join(format!("{agent}-{partial}.jsonl"));
        std::fs::File::create(&file)
            .unwrap()
            .write_all(&data)
            .unwrap();
        // Decoder and `wc -l` take turns, so both see the same load on a
        // shared machine.
        let (mut ours, mut wc) = (Samples::new(), Samples::new());
        let mut lines = 0;
        let mut events = 0;
        for _ in 0..runs {
            let start = Instant::now();
            let (l, e, malformed) = decode(agent, &data);
            ours.push(start.elapsed());
            // A malformed line costs a decoder less than a real one.
            assert_eq!(
                malformed, 0,
                "the generated {label} stream is not well formed"
            );
            (lines, events) = (l, e);
            let start = Instant::now();
            let out = std::process::Command::new("wc")
                .arg("-l")
                .arg(&file)
                .output()
                .unwrap();
            wc.push(start.elapsed());
            assert!(out.status.success());
        }
        // As rates, the fastest turn is the min time, the highest rate.
        let rate = |d: Duration| data.len() as f64 / d.as_secs_f64().max(1e-12) / 1e6;
        let rates = |s: &Samples| format!("{:.0} / {:.0}", rate(s.min()), rate(s.median()));
        let ratio = |a: Duration, b: Duration| rate(a) / rate(b);
        println!(
            "| {label} | {lines} | {events} | {} | {} | {:.2} / {:.2} |",
            rates(&ours),
            rates(&wc),
            ratio(ours.min(), wc.min()),
            ratio(ours.median(), wc.median()),
        );
    }
    machine.end();
}

/// Decodes `data` as the supervisor does: (lines, events, malformed lines).
fn decode(agent: Agent, data: &[u8]) -> (u64, u64, u64) {
    let mut d = StreamDecoder::new(agent, 8 << 20);
    let (mut lines, mut events, mut malformed) = (0u64, 0u64, 0u64);
    let mut on_line = |k: warden_events::LineKind, e: &mut Vec<warden_events::Event>| {
        lines += 1;
        malformed += u64::from(k == warden_events::LineKind::Malformed);
        events += e.len() as u64;
    };
    for chunk in data.chunks(64 * 1024) {
        d.push(chunk, &mut on_line);
    }
    d.finish(&mut on_line);
    std::hint::black_box(d.summary());
    (lines, events, malformed)
}

fn stream(agent: Agent, partial: bool, size: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(size + (1 << 20));
    let mut i = 0usize;
    while out.len() < size {
        // Every 40th round carries a big tool result (64 KiB to 1 MiB).
        let big = if i.is_multiple_of(40) {
            big_text((64 << 10) << (i / 40 % 5), i)
        } else {
            big_text(600, i)
        };
        let lines = match agent {
            Agent::Claude if partial => claude_partial(i, &big),
            Agent::Claude => vec![
                format!(
                    r#"{{"type":"assistant","message":{{"id":"msg_{i}","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{{"type":"text","text":"Step {i}: I will look at the parser and run the tests again."}}],"stop_reason":null,"usage":{{"input_tokens":812,"cache_creation_input_tokens":0,"cache_read_input_tokens":12400,"output_tokens":9}}}},"parent_tool_use_id":null,"session_id":"3f0c9a2e-1b7d-4e55-9c1a-0d2b7c6e9f10","uuid":"a{i}"}}"#
                ),
                format!(
                    r#"{{"type":"assistant","message":{{"id":"msg_{i}","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{{"type":"tool_use","id":"toolu_{i}","name":"Bash","input":{{"command":"cargo test -p parser -- --nocapture","description":"Run tests","timeout":120000}}}}],"stop_reason":"tool_use","usage":{{"input_tokens":812,"cache_creation_input_tokens":0,"cache_read_input_tokens":12400,"output_tokens":61}}}},"parent_tool_use_id":null,"session_id":"3f0c9a2e-1b7d-4e55-9c1a-0d2b7c6e9f10","uuid":"b{i}"}}"#
                ),
                format!(
                    r#"{{"type":"user","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"toolu_{i}","content":{},"is_error":false}}]}},"tool_use_result":{{"stdout":{},"stderr":"","interrupted":false}},"parent_tool_use_id":null,"session_id":"3f0c9a2e-1b7d-4e55-9c1a-0d2b7c6e9f10","uuid":"c{i}"}}"#,
                    json_str(&big),
                    json_str(&big)
                ),
            ],
            Agent::Codex => vec![
                format!(
                    r#"{{"type":"item.started","item":{{"id":"item_{i}","type":"command_execution","command":"/bin/bash -lc 'cargo test'","aggregated_output":"","exit_code":null,"status":"in_progress"}}}}"#
                ),
                format!(
                    r#"{{"type":"item.completed","item":{{"id":"item_{i}","type":"command_execution","command":"/bin/bash -lc 'cargo test'","aggregated_output":{},"exit_code":0,"status":"completed"}}}}"#,
                    json_str(&big)
                ),
                format!(
                    r#"{{"type":"item.completed","item":{{"id":"m_{i}","type":"agent_message","text":"Step {i} done; the parser tests pass."}}}}"#
                ),
            ],
            Agent::OpenCode => vec![
                format!(
                    r#"{{"type":"step_start","timestamp":1767036059338,"sessionID":"ses_4947190f","part":{{"id":"prt_{i}","type":"step-start"}}}}"#
                ),
                format!(
                    r#"{{"type":"tool_use","timestamp":1767036061199,"sessionID":"ses_4947190f","part":{{"id":"prt_{i}","type":"tool","callID":"call_{i}","tool":"bash","state":{{"status":"completed","input":{{"command":"cargo test"}},"output":{},"title":"Run tests","metadata":{{"exit":0}}}}}}}}"#,
                    json_str(&big)
                ),
                format!(
                    r#"{{"type":"step_finish","timestamp":1767036061300,"sessionID":"ses_4947190f","part":{{"type":"step-finish","reason":"tool-calls","cost":0.0031,"tokens":{{"input":9120,"output":58,"reasoning":0,"cache":{{"read":8000,"write":0}}}}}}}}"#
                ),
            ],
            Agent::Pi => vec![
                format!(
                    r#"{{"type":"message_update","message":{{"role":"assistant","content":[{{"type":"text","text":"Step {i}: running the tests now to see what fails"}}],"model":"m1"}},"assistantMessageEvent":{{"type":"text_delta","contentIndex":0,"delta":"fails"}}}}"#
                ),
                format!(
                    r#"{{"type":"tool_execution_start","toolCallId":"call_{i}","toolName":"bash","args":{{"command":"cargo test"}}}}"#
                ),
                format!(
                    r#"{{"type":"tool_execution_end","toolCallId":"call_{i}","toolName":"bash","result":{{"content":[{{"type":"text","text":{}}}],"details":{{}}}},"isError":false}}"#,
                    json_str(&big)
                ),
                format!(
                    r#"{{"type":"message_end","message":{{"role":"assistant","content":[{{"type":"text","text":"Step {i} done."}}],"model":"m1","usage":{{"input":900,"output":8,"cacheRead":0,"cacheWrite":0,"totalTokens":908,"cost":{{"total":0.001}}}},"stopReason":"toolUse"}}}}"#
                ),
            ],
            Agent::Gemini => vec![
                format!(
                    r#"{{"type":"message","timestamp":"2026-08-21T16:17:01.200Z","role":"assistant","content":"Step {i}: I'll run the test suite.","delta":true}}"#
                ),
                format!(
                    r#"{{"type":"tool_use","timestamp":"2026-08-21T16:17:01.300Z","tool_name":"run_shell_command","tool_id":"sh-{i}","parameters":{{"command":"cargo test"}}}}"#
                ),
                format!(
                    r#"{{"type":"tool_result","timestamp":"2026-08-21T16:17:05.900Z","tool_id":"sh-{i}","status":"success","output":{}}}"#,
                    json_str(&big)
                ),
            ],
            Agent::Exec => big.lines().map(str::to_string).collect(),
        };
        for l in lines {
            out.extend_from_slice(l.as_bytes());
            out.push(b'\n');
        }
        i += 1;
    }
    out
}
