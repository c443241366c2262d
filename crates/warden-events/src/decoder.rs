//! Decoding an agent's stdout, line by line, into events and a summary.
//!
//! [`AgentDecoder`] is what the supervisor (and `warden replay`) holds for
//! one run: it owns the agent's decoder and the [`Summary`] it builds.
//! [`StreamDecoder`] puts a [`LineSplitter`] in front of it for callers
//! that have chunks of bytes rather than lines.

use crate::agent::Agent;
use crate::event::Event;
use crate::lines::{Line, LineSplitter};
use crate::summary::{Out, Summary, ToolOutput};
use crate::{claude, codex, exec, gemini, opencode, pi, stderr};

/// One agent's line decoder. Implementations are pure: bytes in, events
/// out, no I/O and no clock.
pub trait Decode: Send {
    /// Decodes one complete line (without its newline). Returns whether the
    /// line was well formed for this agent: that is what counts as activity.
    /// Unknown event types in well-formed JSON are well formed.
    fn line(&mut self, line: &[u8], out: &mut Out<'_>) -> bool;
}

/// A decoder and what it learned.
pub struct AgentDecoder {
    agent: Agent,
    inner: Box<dyn Decode>,
    summary: Summary,
}

impl AgentDecoder {
    pub fn new(agent: Agent) -> Self {
        let inner: Box<dyn Decode> = match agent {
            Agent::Claude => Box::<claude::Claude>::default(),
            Agent::Codex => Box::<codex::Codex>::default(),
            Agent::OpenCode => Box::<opencode::OpenCode>::default(),
            Agent::Pi => Box::<pi::Pi>::default(),
            Agent::Gemini => Box::<gemini::Gemini>::default(),
            Agent::Exec => Box::new(exec::Exec),
        };
        Self {
            agent,
            inner,
            summary: Summary::default(),
        }
    }

    /// The decoder for `agent`'s stderr: plain lines, and the retries
    /// the agent announces only there (see [`stderr`]).
    pub fn stderr(agent: Agent) -> Self {
        Self {
            agent,
            inner: Box::new(stderr::Stderr::new(agent)),
            summary: Summary::default(),
        }
    }

    pub fn agent(&self) -> Agent {
        self.agent
    }

    /// Decodes one complete line; see [`Decode::line`].
    pub fn line(&mut self, line: &[u8], events: &mut Vec<Event>) -> bool {
        self.summary.line += 1;
        let mut out = Out {
            summary: &mut self.summary,
            events,
        };
        self.inner.line(line, &mut out)
    }

    /// Ends the stream: tool calls still open are closed as failed.
    pub fn finish(&mut self, events: &mut Vec<Event>) {
        let open: Vec<(String, String)> = self
            .summary
            .open_tools()
            .map(|(id, name)| (id.to_string(), name.to_string()))
            .collect();
        let mut out = Out {
            summary: &mut self.summary,
            events,
        };
        for (id, name) in open {
            out.tool_finished(
                id,
                Some(name),
                true,
                Some(ToolOutput::text("the tool call never finished")),
            );
        }
    }

    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// A line that was not decoded (longer than the limit): it still
    /// counts, so that events name lines as the log numbers them.
    pub fn skip_line(&mut self) {
        self.summary.line += 1;
    }

    /// See [`Summary::usage_baseline`].
    pub fn set_usage_baseline(&mut self, tokens: crate::Tokens) {
        self.summary.usage_baseline = tokens;
    }
}

/// What one line was, for the caller of a [`StreamDecoder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    /// A line the agent's decoder accepted: activity.
    WellFormed,
    /// Blank, or not what this agent writes: not activity.
    Malformed,
    /// Longer than the limit; consumed to its end, not decoded: activity.
    Oversized { len: u64 },
    /// Not a line: what the end of the stream closed (tool calls that
    /// never finished).
    EndOfStream,
}

/// Splits a byte stream into bounded lines and decodes each one.
pub struct StreamDecoder {
    lines: LineSplitter,
    decoder: AgentDecoder,
}

impl StreamDecoder {
    pub fn new(agent: Agent, max_line: usize) -> Self {
        Self {
            lines: LineSplitter::new(max_line),
            decoder: AgentDecoder::new(agent),
        }
    }

    /// See [`Summary::usage_baseline`].
    pub fn set_usage_baseline(&mut self, tokens: crate::Tokens) {
        self.decoder.set_usage_baseline(tokens);
    }

    /// For `agent`'s stderr; see [`AgentDecoder::stderr`].
    pub fn stderr(agent: Agent, max_line: usize) -> Self {
        Self {
            lines: LineSplitter::new(max_line),
            decoder: AgentDecoder::stderr(agent),
        }
    }

    /// Feeds a chunk; calls `on_line` after each line with its kind and the
    /// events it produced.
    pub fn push(&mut self, chunk: &[u8], mut on_line: impl FnMut(LineKind, &mut Vec<Event>)) {
        let decoder = &mut self.decoder;
        let mut events = Vec::new();
        self.lines.push(chunk, |l| {
            let kind = decode(decoder, l, &mut events);
            on_line(kind, &mut events);
            events.clear();
        });
    }

    /// Ends the stream: a last line without newline, then open tool calls.
    pub fn finish(&mut self, mut on_line: impl FnMut(LineKind, &mut Vec<Event>)) {
        let decoder = &mut self.decoder;
        let mut events = Vec::new();
        self.lines.finish(|l| {
            let kind = decode(decoder, l, &mut events);
            on_line(kind, &mut events);
            events.clear();
        });
        self.decoder.finish(&mut events);
        if !events.is_empty() {
            on_line(LineKind::EndOfStream, &mut events);
        }
    }

    pub fn summary(&self) -> &Summary {
        self.decoder.summary()
    }

    /// Bytes of an unfinished line held now: never more than `max_line`.
    pub fn pending_bytes(&self) -> usize {
        self.lines.pending()
    }

    pub fn agent(&self) -> Agent {
        self.decoder.agent()
    }
}

fn decode(decoder: &mut AgentDecoder, line: Line<'_>, events: &mut Vec<Event>) -> LineKind {
    match line {
        Line::Complete(bytes) => {
            if decoder.line(bytes, events) {
                LineKind::WellFormed
            } else {
                LineKind::Malformed
            }
        }
        Line::Oversized { len } => {
            decoder.skip_line();
            LineKind::Oversized { len }
        }
    }
}
