//! One output pipe of the agent: the reader, its buffer, and the decoder
//! its bytes go through after they are teed.
//!
//! Each line handed on comes with where it is in the log (the tee writes
//! every byte read, in order, so a line's offset in the stream is its
//! offset in `stdout.log` or `stderr.log`): that is what lets
//! `events.jsonl` point at plain lines instead of copying them.

use std::ops::Range;
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncReadExt};
use warden_events::{Agent, Event, LineKind, LineSplitter, Stream, StreamDecoder, Summary};

pub type Reader = Pin<Box<dyn AsyncRead + Send>>;

const READ_CHUNK: usize = 64 * 1024;

pub struct Pipe {
    pub stream: Stream,
    pub reader: Option<Reader>,
    pub buf: Vec<u8>,
    /// stdout goes through the agent's decoder; stderr through its stderr
    /// decoder (plain lines, which become `stderr` events, and the retries
    /// some agents announce only there).
    decoder: StreamDecoder,
    /// For `exec`, whose output is plain lines on both streams: the lines
    /// are handed on as bytes (see [`Line::plain`]) and `decoder` is left
    /// unused, so a line's text is made only when something needs it.
    plain: Option<LineSplitter>,
    /// Bytes read so far.
    pub bytes: u64,
    /// Where the line being read began: just past the last newline.
    line_start: u64,
    finished: bool,
}

impl Pipe {
    pub fn new(stream: Stream, agent: Agent, reader: Option<Reader>, max_line: usize) -> Self {
        let decoder = match stream {
            Stream::Stdout => StreamDecoder::new(agent, max_line),
            Stream::Stderr => StreamDecoder::stderr(agent, max_line),
        };
        Self {
            stream,
            reader,
            buf: vec![0; READ_CHUNK],
            decoder,
            plain: (agent == Agent::Exec).then(|| LineSplitter::new(max_line)),
            bytes: 0,
            line_start: 0,
            finished: false,
        }
    }

    pub fn open(&self) -> bool {
        self.reader.is_some()
    }

    pub fn summary(&self) -> &Summary {
        self.decoder.summary()
    }

    /// Decodes the last `len` bytes read, which are at the front of the
    /// buffer (and already counted in `bytes`). `on_line` gets each line's
    /// range in the stream, its newline included (empty for what the end
    /// of the stream closes).
    pub fn decode(&mut self, len: usize, mut on_line: impl FnMut(Line<'_>)) {
        let stream = self.stream;
        let chunk = &self.buf[..len];
        let base = self.bytes - len as u64;
        let line_start = &mut self.line_start;
        // The splitter reports lines in order, each when its newline is
        // seen: the next newline in the chunk ends it.
        let mut newlines = memchr::memchr_iter(b'\n', chunk);
        let mut next_range = || {
            let end = newlines
                .next()
                .map_or(base + len as u64, |i| base + i as u64 + 1);
            std::mem::replace(line_start, end)..end
        };
        match &mut self.plain {
            Some(lines) => {
                let mut none = Vec::new();
                lines.push(chunk, |l| {
                    on_line(plain_line(stream, l, next_range(), &mut none));
                });
            }
            None => self.decoder.push(chunk, |kind, events| {
                on_line(Line {
                    stream,
                    kind,
                    at: next_range(),
                    events,
                    plain: None,
                })
            }),
        }
    }

    /// Stops reading, and decodes a last line without newline (and closes
    /// what the stream left open). Safe to call twice.
    pub fn close(&mut self, mut on_line: impl FnMut(Line<'_>)) {
        self.reader = None;
        if self.finished {
            return;
        }
        self.finished = true;
        let stream = self.stream;
        let end = self.bytes;
        let line_start = &mut self.line_start;
        if let Some(lines) = &mut self.plain {
            let mut none = Vec::new();
            lines.finish(|l| {
                let at = std::mem::replace(line_start, end)..end;
                on_line(plain_line(stream, l, at, &mut none));
            });
            return;
        }
        self.decoder.finish(|kind, events| {
            let at = match kind {
                LineKind::EndOfStream => end..end,
                _ => std::mem::replace(line_start, end)..end,
            };
            on_line(Line {
                stream,
                kind,
                at,
                events,
                plain: None,
            })
        });
    }
}

/// One line of a pipe, as decoded.
pub struct Line<'a> {
    pub stream: Stream,
    pub kind: LineKind,
    /// Where its bytes are in the log, newline included.
    pub at: Range<u64>,
    pub events: &'a mut Vec<Event>,
    /// A plain line (`exec`), not decoded: its bytes (without the newline
    /// and a `\r` before it). Its event, as the `exec` decoder would make
    /// it, is [`warden_events::exec::text`] of them; `events` is empty.
    pub plain: Option<&'a [u8]>,
}

/// A line of `exec` output, as the `exec` decoder would take it.
fn plain_line<'a>(
    stream: Stream,
    line: warden_events::Line<'a>,
    at: Range<u64>,
    none: &'a mut Vec<Event>,
) -> Line<'a> {
    let (kind, plain) = match line {
        warden_events::Line::Complete(bytes) if warden_events::exec::is_blank(bytes) => {
            (LineKind::Malformed, None)
        }
        warden_events::Line::Complete(bytes) => (LineKind::WellFormed, Some(bytes)),
        warden_events::Line::Oversized { len } => (LineKind::Oversized { len }, None),
    };
    Line {
        stream,
        kind,
        at,
        events: none,
        plain,
    }
}

/// Reads from the pipe; never resolves once it is closed.
pub async fn read(reader: &mut Option<Reader>, buf: &mut [u8]) -> std::io::Result<usize> {
    match reader {
        Some(r) => r.read(buf).await,
        None => std::future::pending().await,
    }
}
