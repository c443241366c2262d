//! `warden replay AGENT FILE`: decode a recorded stdout offline.
//!
//! The same decoder the supervisor uses, on a file instead of a pipe, so a
//! run can be understood (and a decoder bug reproduced) after the fact.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};

use warden_events::SchemaVersion;
use warden_events::event::Stamped;
use warden_events::{Agent, Event, LineKind, StreamDecoder};

use crate::args::ReplayArgs;
use crate::error::{Outcome, usage};

/// `--json`'s summary, on stderr (`schemas/replay.schema.json`): the
/// summary and the line counts. Not on stdout, which holds only event
/// lines: it is no event.
#[derive(serde::Serialize)]
struct ReplaySummary<'a> {
    schema_version: SchemaVersion,
    agent: &'static str,
    lines: u64,
    malformed_lines: u64,
    oversized_lines: u64,
    /// What the verdict would be from the stream alone (the exit status is
    /// not in a recording): `succeeded`, `agent_failed`, or
    /// `no_terminal_event`. An `exec` stream has no terminal event: its
    /// outcome is the verdict of the run whose directory holds the file
    /// (its `run.json`), else `unknown`.
    outcome: &'static str,
    #[serde(flatten)]
    summary: &'a warden_events::Summary,
}

pub(crate) fn replay(args: &ReplayArgs) -> Outcome {
    let agent: Agent = match args.agent.parse() {
        Ok(a) => a,
        Err(e) => {
            return Err(usage(format_args!("{e}")));
        }
    };
    let input = match File::open(&args.file) {
        Ok(f) => f,
        Err(e) => {
            return Err(usage(format_args!(
                "could not read {}: {e}",
                args.file.display()
            )));
        }
    };
    let mut decoder = StreamDecoder::new(agent, warden_run::defaults::MAX_LINE);
    let (mut lines, mut malformed, mut oversized) = (0u64, 0u64, 0u64);
    // A recording can be far larger than memory: it is decoded a chunk
    // at a time, and the events go out in large writes (one write per
    // event made the output, not the decoding, the cost of a replay).
    let mut out = BufWriter::with_capacity(OUT_BUFFER, StdoutFd::default());
    let mut chunk = vec![0u8; IN_CHUNK];
    // One buffer for every `--json` line, not one allocation per event.
    let mut json = Vec::with_capacity(4096);
    let mut on_line = |kind: LineKind, events: &mut Vec<Event>| {
        match kind {
            LineKind::WellFormed => lines += 1,
            LineKind::Malformed => {
                lines += 1;
                malformed += 1;
            }
            LineKind::Oversized { .. } => {
                lines += 1;
                oversized += 1;
            }
            LineKind::EndOfStream => {}
        }
        for e in events.drain(..) {
            if args.json {
                // An event line as `warden run --json` writes it (the event
                // schema), at `t_ms` 0: a recording keeps no times.
                let e = Stamped {
                    schema_version: SchemaVersion,
                    t_ms: 0,
                    event: e,
                };
                // `##[` inside a string written so a CI log cannot take it
                // for a command (the same text to a JSON reader).
                json.clear();
                if serde_json::to_writer(&mut json, &e).is_ok() {
                    json.push(b'\n');
                    let _ = crate::render::github::write_json_line(&mut out, &json);
                }
            } else {
                print_event(&mut out, &e, agent);
            }
        }
    };
    if let Err(e) = feed(input, &mut chunk, |c| decoder.push(c, &mut on_line)) {
        return Err(usage(format_args!(
            "could not read {}: {e}",
            args.file.display()
        )));
    }
    decoder.finish(&mut on_line);
    let mut summary = decoder.summary().clone();
    if let Some(path) = &args.stderr {
        let input = match File::open(path) {
            Ok(f) => f,
            Err(e) => {
                return Err(usage(format_args!(
                    "could not read {}: {e}",
                    path.display()
                )));
            }
        };
        // Its retries only: its lines are not the agent's events.
        let mut stderr = StreamDecoder::stderr(agent, warden_run::defaults::MAX_LINE);
        let mut retries = |_: LineKind, events: &mut Vec<Event>| {
            events.retain(|e| matches!(e, Event::Retry { .. }));
            on_line(LineKind::EndOfStream, events);
        };
        if let Err(e) = feed(input, &mut chunk, |c| stderr.push(c, &mut retries)) {
            return Err(usage(format_args!(
                "could not read {}: {e}",
                path.display()
            )));
        }
        stderr.finish(&mut retries);
        summary.reported.retries += stderr.summary().reported.retries;
    }
    let summary = &summary;
    // An agent that went on working after a terminal event had not ended.
    let outcome = match summary.terminal_in_force() {
        Some(true) => "succeeded",
        Some(false) => "agent_failed",
        None if agent == Agent::Exec => recorded_verdict(&args.file, agent).unwrap_or("unknown"),
        None => "no_terminal_event",
    };
    // The summary follows the events; with `--json` it goes to stderr as
    // one JSON object, so that stdout holds only event lines (each valid
    // by the event schema).
    let mut text = Vec::new();
    if !args.json {
        let out = &mut text;
        let t = &summary.reported.tokens;
        let _ = writeln!(out, "---");
        let _ = match (agent, outcome) {
            (Agent::Exec, "unknown") => writeln!(
                out,
                "outcome: unknown (a command's output does not say how it ended, and no run.json of the run is beside the file)"
            ),
            (Agent::Exec, _) => writeln!(out, "outcome: {outcome} (the run's run.json)"),
            _ => writeln!(out, "outcome: {outcome}"),
        };
        let _ = writeln!(
            out,
            "lines: {lines} ({malformed} malformed, {oversized} oversized)"
        );
        if let Some(id) = &summary.reported.session_id {
            let _ = writeln!(out, "session: {id}");
        }
        if let Some(m) = &summary.reported.model {
            let _ = writeln!(out, "model: {m}");
        }
        let _ = writeln!(
            out,
            "turns: {}, tool calls: {}, retries: {}",
            summary.reported.turns, summary.reported.tool_calls, summary.reported.retries
        );
        let _ = writeln!(
            out,
            "tokens: {} in, {} out, {} cache read, {} cache write, {} reasoning",
            warden_events::Tokens::shown(t.input),
            warden_events::Tokens::shown(t.output),
            warden_events::Tokens::shown(t.cache_read),
            warden_events::Tokens::shown(t.cache_write),
            warden_events::Tokens::shown(t.reasoning)
        );
        if let Some(c) = summary.reported.cost_usd {
            let _ = writeln!(out, "cost: ${c:.4}");
        }
        if let Some(e) = &summary.reported.error_message {
            let _ = writeln!(out, "error: {e}");
        }
        if let Some(f) = &summary.reported.final_text {
            let _ = writeln!(out, "final text: {f}");
        }
    }
    let _ = out.write_all(&text);
    let _ = out.flush();
    if args.json {
        let s = ReplaySummary {
            schema_version: SchemaVersion,
            agent: agent.name(),
            lines,
            malformed_lines: malformed,
            oversized_lines: oversized,
            outcome,
            summary,
        };
        if let Ok(mut line) = serde_json::to_vec(&s) {
            line.push(b'\n');
            crate::render::console::raw(
                crate::render::console::Stream::Stderr,
                crate::render::console::Priority::Important,
                crate::render::github::json_line(line),
            );
        }
    }
    Ok(match outcome {
        // Nothing in a command's plain output says it failed.
        "succeeded" | "unknown" => 0,
        _ => 1,
    })
}

/// The verdict in the `run.json` beside `file` (a run's `stdout.log` or
/// `stderr.log`), if that report is of a run of `agent`: how a command's
/// run ended is in no line of its output (a run that printed and then
/// stalled reads like one that printed and exited 0).
fn recorded_verdict(file: &std::path::Path, agent: Agent) -> Option<&'static str> {
    #[derive(serde::Deserialize)]
    struct Recorded {
        agent: String,
        verdict: Option<warden_run::Verdict>,
    }
    let text = std::fs::read(file.parent()?.join("run.json")).ok()?;
    let r: Recorded = serde_json::from_slice(&text).ok()?;
    (r.agent == agent.name())
        .then_some(r.verdict)
        .flatten()
        .map(warden_run::Verdict::as_str)
}

/// How much of the recording is read at a time. The decoder keeps only
/// an unfinished line between chunks, so memory stays bounded by this and
/// the longest line it keeps (`MAX_LINE`), whatever the file's size.
const IN_CHUNK: usize = 256 * 1024;
/// How much output is gathered into one write.
const OUT_BUFFER: usize = 128 * 1024;

/// Hands `input` to `push` a chunk at a time, until its end.
fn feed(mut input: File, chunk: &mut [u8], mut push: impl FnMut(&[u8])) -> io::Result<()> {
    loop {
        match input.read(chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => push(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Replay's stdout, written straight to the descriptor as the console
/// does (`render::console::write_all`): a reader gone away (`EPIPE`)
/// makes writes fail, never panic, and the output is then discarded
/// while the decoding (and so the exit code) goes on.
#[derive(Default)]
struct StdoutFd {
    broken: bool,
}

impl Write for StdoutFd {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if !self.broken
            && crate::signals::without_tty_stop(|| {
                crate::render::console::write_all(crate::render::console::Stream::Stdout, buf)
            })
            .is_err()
        {
            self.broken = true;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The lines the live view shows for `e` (one formatter for both), each
/// made inert: the recording is the agent's text, and no workflow
/// command or escape sequence of it may reach a CI log or a terminal.
fn print_event(out: &mut impl Write, e: &Event, agent: Agent) {
    crate::render::lines::event_lines(
        e,
        agent,
        std::path::Path::new(""),
        false,
        &mut |kind, text| {
            let _ = writeln!(
                out,
                "{}",
                crate::render::github::neutralize(&kind.text(text))
            );
        },
    );
}
