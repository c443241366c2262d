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
pub(crate) trait PipeRead: AsyncRead + AsFd + Send {}
impl<T: AsyncRead + AsFd + Send> PipeRead for T {}

pub(crate) type Reader = Pin<Box<dyn PipeRead>>;

/// What one read asks for, to begin with.
const READ_CHUNK: usize = 64 * 1024;

/// A pipe that fills every read this many times in a row is a flood: it
/// gets a kernel buffer of [`FLOOD_PIPE`] and reads of [`FLOOD_READ`], so
/// the writer and warden each wake up less often. Other runs never ask
/// (a pipe's buffer counts against its user's limit).
const FLOOD_READS: u32 = 16;
const FLOOD_PIPE: usize = 1 << 20;
const FLOOD_READ: usize = 256 * 1024;

pub(crate) struct Pipe {
    pub stream: Stream,
    pub reader: Option<Reader>,
    pub buf: Vec<u8>,
    /// stdout goes through the agent's decoder; stderr through its stderr
    /// decoder (plain lines, which become `stderr` events, and the retries
    /// some agents announce only there).
    pub(crate) decoder: StreamDecoder,
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
    /// The longest line that is decoded (see [`LineSplitter::new`]).
    max_line: usize,
    finished: bool,
}

impl Pipe {
    pub(crate) fn new(
        stream: Stream,
        agent: Agent,
        reader: Option<Reader>,
        max_line: usize,
    ) -> Self {
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
            max_line: max_line.max(1),
            finished: false,
        }
    }

    pub(crate) fn open(&self) -> bool {
        self.reader.is_some()
    }

    pub(crate) fn summary(&self) -> &Summary {
        self.decoder.summary()
    }

    /// After a read of `n` bytes (decoded already): a pipe that floods gets
    /// a bigger buffer, once.
    pub(crate) fn after_read(&mut self, n: usize) {
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
    pub(crate) fn decode(&mut self, len: usize, mut on_line: impl FnMut(Line<'_>)) {
        let base = self.bytes - len as u64;
        self.decode_part(base, 0, len, &mut on_line);
    }

    /// [`decode`](Self::decode) for `exec` when no line's text is needed
    /// (see the supervisor): the lines that begin and end inside this read
    /// are not handed on one by one but returned as one run, their range
    /// and how many are not blank; they come after every line `on_line`
    /// got. Lines that run into a neighbouring read, and every line of a
    /// read that holds one longer than `max_line`, go to `on_line` as
    /// usual.
    pub(crate) fn decode_counting(
        &mut self,
        len: usize,
        mut on_line: impl FnMut(Line<'_>),
    ) -> Option<(Range<u64>, u64)> {
        let base = self.bytes - len as u64;
        let chunk = &self.buf[..len];
        let (Some(first), Some(last), true) = (
            memchr::memchr(b'\n', chunk),
            memchr::memrchr(b'\n', chunk),
            self.plain.is_some(),
        ) else {
            self.decode_part(base, 0, len, &mut on_line);
            return None;
        };
        // The line the previous read left unfinished ends here.
        self.decode_part(base, 0, first + 1, &mut on_line);
        let counted = self.count_lines(first, last);
        let run = match counted {
            Some(not_blank) => {
                let at = base + first as u64 + 1..base + last as u64 + 1;
                self.line_start = at.end;
                // None at all when no line lies between the first newline
                // and the last (they are the same one).
                (!at.is_empty()).then_some((at, not_blank))
            }
            None => {
                self.decode_part(base, first + 1, last + 1, &mut on_line);
                None
            }
        };
        // The start of a line the next read ends: kept by the splitter.
        self.decode_part(base, last + 1, len, &mut on_line);
        run
    }

    /// How many of the lines in `buf[first + 1..=last]` (each ended by its
    /// newline; `first` is the newline before them) are not blank; `None`
    /// when one is longer than `max_line` (they are then decoded one by
    /// one). Counted in vector passes when no line ends in whitespace
    /// (see [`warden_events::exec::lines_if_none_blank`]), else line by
    /// line.
    fn count_lines(&self, first: usize, last: usize) -> Option<u64> {
        let middle = &self.buf[first + 1..=last];
        // No line of it is longer than all of it.
        if middle.len() <= self.max_line
            && let Some(not_blank) =
                warden_events::exec::lines_if_none_blank(&self.buf[first..=last])
        {
            return Some(not_blank);
        }
        let mut start = 0;
        let mut not_blank = 0u64;
        for newline in memchr::memchr_iter(b'\n', middle) {
            let line = &middle[start..newline];
            if line.len() > self.max_line {
                return None;
            }
            // A `\r` before the newline is whitespace: no need to strip
            // it to tell a blank line.
            if !warden_events::exec::is_blank(line) {
                not_blank += 1;
            }
            start = newline + 1;
        }
        Some(not_blank)
    }

    /// Decodes `buf[from..to]`, whose first byte is at `base + from` in
    /// the stream.
    fn decode_part(
        &mut self,
        base: u64,
        from: usize,
        to: usize,
        on_line: &mut impl FnMut(Line<'_>),
    ) {
        let stream = self.stream;
        let chunk = &self.buf[from..to];
        let base = base + from as u64;
        let len = to - from;
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
    pub(crate) fn close(&mut self, mut on_line: impl FnMut(Line<'_>)) {
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
pub(crate) struct Line<'a> {
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
pub(crate) async fn read(reader: &mut Option<Reader>, buf: &mut [u8]) -> std::io::Result<usize> {
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
    fn lines_taken_as_runs_cover_the_same_bytes_and_count_the_same_lines() {
        let data: &[u8] =
            b"a\n\nbb\r\n  \nthis line is longer than sixteen\nc\n\r\nd\ne\nlast line";
        let whole = ranges(Agent::Exec, data, &[]);
        let not_blank = whole
            .iter()
            .filter(|(_, k)| *k == LineKind::WellFormed)
            .count() as u64;
        for cut in 0..data.len() {
            for cut2 in cut..data.len() {
                assert_eq!(
                    counted(data, cut, cut2, 16),
                    (not_blank, 1),
                    "cut at {cut}, {cut2}"
                );
            }
        }
    }

    /// Counts `data` cut at `cut` and `cut2` as the supervisor does; the
    /// lines' ranges must tile the stream. How many are not blank, and
    /// how many were too long to decode.
    fn counted(data: &[u8], cut: usize, cut2: usize, max_line: usize) -> (u64, u32) {
        let mut pipe = Pipe::new(Stream::Stdout, Agent::Exec, None, max_line);
        let mut got: Vec<(Range<u64>, u64)> = Vec::new();
        let mut oversized = 0;
        let mut prev = 0;
        for c in [cut, cut2, data.len()] {
            let piece = &data[prev..c];
            prev = c;
            pipe.buf[..piece.len()].copy_from_slice(piece);
            pipe.bytes += piece.len() as u64;
            let run = pipe.decode_counting(piece.len(), |l| {
                oversized += matches!(l.kind, LineKind::Oversized { .. }) as u32;
                got.push((l.at, (l.kind == LineKind::WellFormed) as u64));
            });
            got.extend(run);
        }
        pipe.close(|l| got.push((l.at, (l.kind == LineKind::WellFormed) as u64)));
        let mut end = 0;
        for (at, _) in &got {
            assert_eq!(at.start, end, "cut at {cut}, {cut2}: {got:?}");
            end = at.end;
        }
        assert_eq!(end, data.len() as u64);
        (got.iter().map(|g| g.1).sum(), oversized)
    }

    #[test]
    fn lines_counted_whole_and_line_by_line_agree() {
        // Indented lines, a lone `\r`, a line of a form feed: none blank;
        // then every kind of blank line, and lines that end in whitespace
        // (which send the count line by line).
        for data in [
            &b"first\n  indented\n\tx\nab\rc\n\x0cz\nlast\nend"[..],
            b"a\n\nb\n \t \nc \nd\r\n\r\n\x0c\ne\nf",
            b"\n\n\n",
            b"x\n\ny\n",
        ] {
            let whole = ranges(Agent::Exec, data, &[]);
            let not_blank = whole
                .iter()
                .filter(|(_, k)| *k == LineKind::WellFormed)
                .count() as u64;
            for cut in 0..=data.len() {
                for cut2 in cut..=data.len() {
                    assert_eq!(
                        counted(data, cut, cut2, 1 << 20),
                        (not_blank, 0),
                        "{:?} cut at {cut}, {cut2}",
                        String::from_utf8_lossy(data)
                    );
                }
            }
        }
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
