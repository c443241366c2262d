//! The agent's output as the loop reads it: each chunk teed to its log,
//! then split into lines and decoded; what the lines say moves the phase
//! and the clocks, and their events go to the sinks.

use std::ops::Range;
use std::time::{Duration, Instant};

use warden_events::event::Stamped;
use warden_events::{Agent, Event, LineKind, Stream};

use super::phase::Input;
use super::sinks::Sink;
use super::{Pipes, Supervisor};
use crate::clocks::now;
use crate::defaults;
use crate::pipe::Line;
use crate::report::StallExtension;

/// How much of an `exec` run's last output is kept for `--output-tag`.
const RECENT_TEXT: usize = 1 << 20;

/// How much of a container's stderr is kept to quote the engine's error.
const STDERR_HEAD: usize = 8 * 1024;

impl Supervisor {
    pub(super) fn on_read(&mut self, pipes: &mut Pipes, stream: Stream, r: std::io::Result<usize>) {
        let n = match r {
            Ok(n) => n,
            Err(e) => {
                self.note_error(format!("reading the agent's {}: {e}", stream.as_str()));
                0
            }
        };
        if stream == Stream::Stderr && self.setup.container.is_some() {
            self.through_gate(pipes, n);
            return;
        }
        self.on_bytes(pipes, stream, n);
    }

    /// A container's stderr: its start kept (where the engine's error is
    /// if it fails), and while the gate is open, the chunk goes through it
    /// first; what it lets through is read as if just read. `n == 0`: the
    /// end of the stream (or warden stops reading it).
    pub(super) fn through_gate(&mut self, pipes: &mut Pipes, n: usize) {
        let pipe = pipes.get(Stream::Stderr);
        let head = &mut self.streams.stderr_head;
        let room = STDERR_HEAD.saturating_sub(head.len()).min(n);
        head.extend_from_slice(&pipe.buf[..room]);
        let Some(gate) = self.streams.gate.as_mut() else {
            self.on_bytes(pipes, Stream::Stderr, n);
            return;
        };
        let eof = n == 0;
        let (diverted, released) = gate.take(&pipe.buf[..n], eof);
        for text in diverted {
            self.emit(Event::EngineLine { text });
        }
        let Some(released) = released else {
            return;
        };
        self.streams.gate = None;
        if !released.is_empty() {
            let pipe = pipes.get(Stream::Stderr);
            if pipe.buf.len() < released.len() {
                pipe.buf.resize(released.len(), 0);
            }
            pipe.buf[..released.len()].copy_from_slice(&released);
            self.on_bytes(pipes, Stream::Stderr, released.len());
        }
        if eof {
            self.on_bytes(pipes, Stream::Stderr, 0);
        }
    }

    /// `n` bytes of `stream` at the front of its buffer, just read (none:
    /// the end of the stream).
    fn on_bytes(&mut self, pipes: &mut Pipes, stream: Stream, n: usize) {
        let now = now();
        let pipe = pipes.get(stream);
        if n == 0 {
            pipe.close(|line| self.on_line(line, now));
            self.after_lines(pipes, stream, now);
            return;
        }
        pipe.bytes += n as u64;
        let chunk = &pipe.buf[..n];
        match stream {
            Stream::Stdout => self.streams.stdout_bytes += n as u64,
            Stream::Stderr => self.streams.stderr_bytes += n as u64,
        }
        let ask = self.sinks.files.tee(stream, chunk);
        self.answer(ask);
        // For `exec` the signal is matched on the raw stream (so it is found
        // even without a newline); for agents, on their decoded text.
        if stream == Stream::Stdout
            && !self.setup.agent.is_json()
            && self.streams.signal.push(chunk)
        {
            self.on_completion_signal(now);
        }
        if self.wants_no_line_text(stream) {
            if let Some((at, lines)) = pipe.decode_counting(n, |line| self.on_line(line, now)) {
                self.on_plain_run(stream, at, lines, now);
            }
        } else {
            pipe.decode(n, |line| self.on_line(line, now));
        }
        pipe.after_read(n);
        self.after_lines(pipes, stream, now);
    }

    pub(super) fn on_line(&mut self, line: Line<'_>, now: Instant) {
        let Line {
            stream,
            kind,
            at,
            events,
            plain,
        } = line;
        if kind != LineKind::EndOfStream {
            let activity = matches!(kind, LineKind::WellFormed | LineKind::Oversized { .. });
            self.advance_quietly(Input::Line { activity }, now);
        }
        match kind {
            LineKind::WellFormed => self.on_activity(now),
            LineKind::Oversized { len } => {
                self.on_activity(now);
                self.emit(Event::OversizedLine { stream, bytes: len });
            }
            LineKind::Malformed | LineKind::EndOfStream => {}
        }
        // `exec` writes plain lines (see `Pipe`): a blank one (no event)
        // between two others is still part of their range in the log.
        if let Some(raw) = plain {
            self.on_plain_line(stream, raw, at, now);
            return;
        }
        if self.setup.agent == Agent::Exec && kind == LineKind::Malformed {
            self.add_lines(stream, at, 0, now);
            return;
        }
        for event in events.drain(..) {
            let event = match (stream, event) {
                (Stream::Stderr, Event::Text { text }) => Event::Stderr { text },
                (Stream::Stdout, Event::Text { text }) if !self.setup.agent.is_json() => {
                    if self.setup.output.is_some() {
                        self.keep_recent_text(&text);
                    }
                    Event::Text { text }
                }
                (Stream::Stdout, Event::Text { text }) if self.setup.agent.is_json() => {
                    if self.streams.signal.push(text.as_bytes()) {
                        self.on_completion_signal(now);
                    }
                    Event::Text { text }
                }
                (_, e) => e,
            };
            if let Event::ToolStarted {
                id,
                name,
                timeout_ms: Some(t),
                ..
            } = &event
                && let Some(stall) = self.clocks.stall_timeout
                && Duration::from_millis(*t) + defaults::TOOL_TIMEOUT_MARGIN > stall
            {
                self.activity.stall_extensions.push(StallExtension {
                    at_ms: self.ms(now),
                    tool_id: id.clone(),
                    tool: name.clone(),
                    timeout_ms: *t,
                });
            }
            self.emit(event);
        }
    }

    /// A plain output line of an `exec` run (non-blank; `raw` is its
    /// bytes, at `at` in the log): the live feed gets its `text` or
    /// `stderr` event as any other line, but `events.jsonl` only the place
    /// of its bytes in the log, which already holds them. The text is made
    /// only when something needs it: the live feed has room for it (a full
    /// feed drops line events anyway), `--output-tag` reads it, or it must
    /// be checked. A line the redactor would change is not plain (its
    /// masked text is written as an event), and neither is any line once
    /// its log could not be written.
    fn on_plain_line(&mut self, stream: Stream, raw: &[u8], at: Range<u64>, now: Instant) {
        let room = self.sinks.live.line_has_room();
        let recent = stream == Stream::Stdout && self.setup.output.is_some();
        let tee_failed = self.sinks.files.tee_failed(stream);
        if !room && !recent && !tee_failed && self.setup.redactor.is_empty() {
            self.add_lines(stream, at, 1, now);
            return;
        }
        let text = warden_events::exec::text(raw);
        if recent {
            self.keep_recent_text(&text);
        }
        let mut event = match stream {
            Stream::Stdout => Event::Text { text },
            Stream::Stderr => Event::Stderr { text },
        };
        let mut masked = false;
        if !self.setup.redactor.is_empty() {
            let r = &self.setup.redactor;
            event.for_each_string(&mut |s| {
                if let std::borrow::Cow::Owned(m) = r.redact(s) {
                    *s = m;
                    masked = true;
                }
            });
        }
        event.cap_text(defaults::EVENT_TEXT);
        let stamped = Stamped {
            schema_version: warden_events::SchemaVersion,
            t_ms: self.ms(now),
            event,
        };
        if masked || tee_failed {
            let ask = self.sinks.files.event(&stamped);
            self.answer(ask);
        } else {
            self.add_lines(stream, at, 1, now);
        }
        if room {
            self.sinks.live.deliver(stamped);
        }
    }

    /// Whether an `exec` run's lines on `stream` need no text until the
    /// next turn of the loop: the live feed takes none now, and neither
    /// the redactor, `--output-tag` nor a failed log needs to see them.
    /// Then a read's lines are taken as one run (`on_plain_run`).
    fn wants_no_line_text(&mut self, stream: Stream) -> bool {
        self.setup.agent == Agent::Exec
            && self.setup.redactor.is_empty()
            && !self.sinks.files.tee_failed(stream)
            && !(stream == Stream::Stdout && self.setup.output.is_some())
            && self.sinks.live.takes_no_lines()
    }

    /// `lines` non-blank plain lines (and blank ones) at `at`, read at
    /// `now`, none of whose text is needed: what `on_line` and
    /// `on_plain_line` do for each, done once.
    fn on_plain_run(&mut self, stream: Stream, at: Range<u64>, lines: u64, now: Instant) {
        self.advance_quietly(
            Input::Line {
                activity: lines > 0,
            },
            now,
        );
        if lines > 0 {
            self.on_activity(now);
            self.activity.lines += lines - 1;
            self.sinks.live.skip_lines(lines);
        }
        self.add_lines(stream, at, lines, now);
    }

    /// Plain lines for the pending `lines` event of `events.jsonl`.
    fn add_lines(&mut self, stream: Stream, at: Range<u64>, lines: u64, now: Instant) {
        let t_ms = self.ms(now);
        let ask = self.sinks.files.add_lines(stream, at, lines, t_ms);
        self.answer(ask);
    }

    /// Keeps the end of an `exec` run's text for `--output-tag`.
    fn keep_recent_text(&mut self, text: &str) {
        let recent = &mut self.streams.recent_text;
        recent.push_str(text);
        recent.push('\n');
        let excess = recent.len().saturating_sub(RECENT_TEXT);
        if excess > 0 {
            let cut = (excess..recent.len())
                .find(|i| recent.is_char_boundary(*i))
                .unwrap_or(recent.len());
            recent.drain(..cut);
        }
    }

    /// After a chunk of stdout: what the decoder learned (borrowed from
    /// it), the terminal event, and open tool calls' declared limits.
    /// After a chunk of stderr, nothing: the retries announced there are
    /// read from its decoder when needed.
    pub(super) fn after_lines(&mut self, pipes: &Pipes, stream: Stream, now: Instant) {
        if stream != Stream::Stdout {
            return;
        }
        let s = pipes.out.summary();
        let ask = self.sinks.learned(s, self.phase.at_work());
        self.answer(ask);
        self.clocks.stall_floor = s
            .open_tool_timeout_ms()
            .map(|t| Duration::from_millis(t) + defaults::TOOL_TIMEOUT_MARGIN);
        // The last terminal event decides, and only while the agent has not
        // gone on working after it.
        let terminal_in_force = s.terminal_in_force().is_some();
        if s.terminal_events != self.activity.terminal_events {
            self.activity.terminal_events = s.terminal_events;
            self.activity.terminal_seen = Some(now);
        }
        let working_again = s.working_after_terminal;
        // A fatal error that is still the agent's last word: it has the
        // fatal-error grace to end by itself. A terminal event takes over.
        self.clocks.fatal_error_at = match s.fatal_pending {
            Some(_) if !terminal_in_force => Some(self.clocks.fatal_error_at.unwrap_or(now)),
            _ => None,
        };
        if terminal_in_force {
            // Done by its own word: from now on silence means it will not
            // exit, not that it is thinking.
            self.advance_quietly(Input::TerminalEvent, now);
        } else if working_again {
            // It reported an end, then went on (pi retries by itself after
            // an `agent_end` with an error): silence is the stall clock's
            // again, until the next terminal event. A completion signal is
            // never taken back.
            self.advance_quietly(Input::WorkingAgain, now);
        }
    }

    fn on_activity(&mut self, now: Instant) {
        if self.phase.cause().is_some() {
            // warden is ending the run: what the agent prints while it is
            // being stopped is not work, and must not move the last
            // activity that explains why it was stopped (a snapshot still
            // says a line came).
            self.sinks.status.on_activity(Duration::ZERO);
            self.activity.lines += 1;
            return;
        }
        if self.clocks.last_activity == Some(now) {
            // Another line of the same read: no silence ended.
            self.sinks.status.on_activity(Duration::ZERO);
            self.clocks.warned = false;
            self.activity.lines += 1;
            return;
        }
        let since = self.clocks.last_activity.unwrap_or(self.setup.started);
        self.activity.longest_silence = self
            .activity
            .longest_silence
            .max(now.saturating_duration_since(since));
        self.sinks
            .status
            .on_activity(now.saturating_duration_since(since));
        self.activity.first.get_or_insert(now);
        self.clocks.last_activity = Some(now);
        self.clocks.warned = false;
        self.activity.lines += 1;
    }

    fn on_completion_signal(&mut self, now: Instant) {
        if self.activity.completion_seen.is_some() {
            return;
        }
        self.activity.completion_seen = Some(now);
        self.advance_quietly(Input::CompletionSignal, now);
        self.emit(Event::CompletionSignal);
    }
}
