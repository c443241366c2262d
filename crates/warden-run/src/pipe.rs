//! One output pipe of the agent: the reader, its buffer, and the decoder
//! its bytes go through after they are teed.
//!
//! Each line handed on comes with where it is in the log (the tee writes
//! every byte read, in order, so a line's offset in the stream is its
//! offset in `stdout.log` or `stderr.log`): that is what lets
//! `events.jsonl` point at plain lines instead of copying them.

use std::ops::Range;
use std::os::fd::AsFd;
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncReadExt};
use warden_events::{Agent, Event, LineKind, LineSplitter, Stream, StreamDecoder, Summary};

/// What a pipe is read through: the agent's end of it, with its fd (to
/// make the pipe bigger for a flood).
pub trait PipeRead: AsyncRead + AsFd + Send {}
impl<T: AsyncRead + AsFd + Send> PipeRead for T {}

pub type Reader = Pin<Box<dyn PipeRead>>;

/// What one read asks for, to begin with.
const READ_CHUNK: usize = 64 * 1024;

/// A pipe that fills every read this many times in a row is a flood: it
/// gets a kernel buffer of [`FLOOD_PIPE`] and reads of [`FLOOD_READ`], so
/// the writer and warden each wake up less often. Other runs never ask
/// (a pipe's buffer counts against its user's limit).
const FLOOD_READS: u32 = 16;
const FLOOD_PIPE: usize = 1 << 20;
const FLOOD_READ: usize = 256 * 1024;

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
    /// Reads in a row that filled the buffer (see [`FLOOD_READS`]).
    full_reads: u32,
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
            full_reads: 0,
            finished: false,
        }
    }

    pub fn open(&self) -> bool {
        self.reader.is_some()
    }

    pub fn summary(&self) -> &Summary {
        self.decoder.summary()
    }

    /// After a read of `n` bytes (decoded already): a pipe that floods gets
    /// a bigger buffer, once.
    pub fn after_read(&mut self, n: usize) {
        if n < self.buf.len() {
            self.full_reads = 0;
            return;
        }
        self.full_reads += 1;
        if self.full_reads == FLOOD_READS
            && self.buf.len() < FLOOD_READ
            && let Some(r) = &self.reader
        {
            // Refused past the system's or the user's limit: then the pipe
            // stays as it is, which is only slower.
            let _ = rustix::pipe::fcntl_setpipe_size(r.as_fd(), FLOOD_PIPE);
            self.buf.resize(FLOOD_READ, 0);
        }
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
        let mut cursor = 0;
        let mut next_range = |known: Option<usize>| {
            let newline = known
                .filter(|&i| i >= cursor && chunk.get(i) == Some(&b'\n'))
                .or_else(|| memchr::memchr(b'\n', &chunk[cursor..]).map(|i| cursor + i));
            let end = match newline {
                Some(i) => {
                    cursor = i + 1;
                    base + i as u64 + 1
                }
                None => base + len as u64,
            };
            std::mem::replace(line_start, end)..end
        };
        match &mut self.plain {
            Some(lines) => {
                let mut none = Vec::new();
                lines.push(chunk, |l| {
                    // A line that lies in the chunk says where its newline
                    // is: no second search.
                    let known = match &l {
                        warden_events::Line::Complete(b) => newline_after(chunk, b),
                        warden_events::Line::Oversized { .. } => None,
                    };
                    on_line(plain_line(stream, l, next_range(known), &mut none));
                });
            }
            None => self.decoder.push(chunk, |kind, events| {
                on_line(Line {
                    stream,
                    kind,
                    at: next_range(None),
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

/// Where the newline after `line` is in `chunk`, if `line` is a piece of
/// `chunk` (not the splitter's own copy of a line cut across reads).
fn newline_after(chunk: &[u8], line: &[u8]) -> Option<usize> {
    let start = (line.as_ptr() as usize).checked_sub(chunk.as_ptr() as usize)?;
    let end = start + line.len();
    if end > chunk.len() {
        return None;
    }
    // The splitter leaves out a `\r` before the newline.
    Some(if chunk.get(end) == Some(&b'\r') {
        end + 1
    } else {
        end
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `data` cut at `cuts` and returns each line's range and kind.
    fn ranges(agent: Agent, data: &[u8], cuts: &[usize]) -> Vec<(Range<u64>, LineKind)> {
        let mut pipe = Pipe::new(Stream::Stdout, agent, None, 16);
        let mut got = Vec::new();
        let mut prev = 0;
        for &c in cuts.iter().chain([data.len()].iter()) {
            let piece = &data[prev..c.max(prev)];
            prev = c.max(prev);
            pipe.buf[..piece.len()].copy_from_slice(piece);
            pipe.bytes += piece.len() as u64;
            pipe.decode(piece.len(), |l| got.push((l.at, l.kind)));
        }
        pipe.close(|l| got.push((l.at, l.kind)));
        got
    }

    #[test]
    fn every_line_comes_with_its_place_in_the_stream() {
        let data = b"one\r\ntwo\n\n   \nthis line is longer than sixteen\r\r\nx\r\nlast";
        let whole = ranges(Agent::Exec, data, &[]);
        let starts: Vec<&[u8]> = whole
            .iter()
            .map(|(at, _)| &data[at.start as usize..at.end as usize])
            .collect();
        assert_eq!(
            starts,
            [
                &b"one\r\n"[..],
                b"two\n",
                b"\n",
                b"   \n",
                b"this line is longer than sixteen\r\r\n",
                b"x\r\n",
                b"last"
            ]
        );
        assert!(matches!(whole[4].1, LineKind::Oversized { .. }));
        for cut in 0..data.len() {
            for cut2 in cut..data.len() {
                assert_eq!(
                    ranges(Agent::Exec, data, &[cut, cut2]),
                    whole,
                    "cut at {cut}, {cut2}"
                );
            }
        }
        // The same places through a decoder.
        let decoded: Vec<_> = ranges(Agent::Claude, data, &[5, 9])
            .into_iter()
            .map(|(at, _)| at)
            .collect();
        let plain: Vec<_> = whole.into_iter().map(|(at, _)| at).collect();
        assert_eq!(decoded, plain);
    }
}
