//! Splitting a byte stream into lines with a bounded buffer.
//!
//! Agents write whatever they like: invalid UTF-8, NULs, CRLF, a 50 MB tool
//! result on one line, a last line with no newline. The splitter keeps memory
//! bounded by `max_line` whatever arrives: a line longer than that is not
//! buffered, only counted, and reported as [`Line::Oversized`] once its end
//! is seen. The bytes themselves are never lost; the caller tees the raw
//! stream to disk before it splits.

use memchr::memchr;

/// One line out of the splitter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line<'a> {
    /// A whole line, without its `\n` (and without a `\r` before it).
    Complete(&'a [u8]),
    /// A line longer than the limit, consumed to its end; `len` counts its
    /// bytes without the newline.
    Oversized { len: u64 },
}

/// Splits chunks of bytes into lines; see the module docs.
#[derive(Debug)]
pub struct LineSplitter {
    buf: Vec<u8>,
    max_line: usize,
    /// `Some(n)` while skipping the rest of an oversized line of `n` bytes
    /// so far.
    skipping: Option<u64>,
}

impl LineSplitter {
    /// A splitter that buffers at most `max_line` bytes of one line.
    pub fn new(max_line: usize) -> Self {
        Self {
            buf: Vec::new(),
            max_line: max_line.max(1),
            skipping: None,
        }
    }

    /// Bytes of an unfinished line held right now.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// The unfinished line held right now (what [`finish`](Self::finish)
    /// would return), without consuming it.
    pub fn partial(&self) -> &[u8] {
        &self.buf
    }

    /// Feeds one chunk; calls `on_line` for every line it completes.
    pub fn push(&mut self, mut chunk: &[u8], mut on_line: impl FnMut(Line<'_>)) {
        while !chunk.is_empty() {
            let newline = memchr(b'\n', chunk);
            let (body, rest) = match newline {
                Some(i) => (&chunk[..i], Some(&chunk[i + 1..])),
                None => (chunk, None),
            };
            if let Some(skipped) = self.skipping.as_mut() {
                *skipped += body.len() as u64;
            } else if self.buf.len() + body.len() > self.max_line {
                self.skipping = Some((self.buf.len() + body.len()) as u64);
                self.buf = Vec::new();
            } else if rest.is_some() && self.buf.is_empty() {
                // The common case: a whole line inside one chunk, no copy.
                on_line(Line::Complete(strip_cr(body)));
                chunk = rest.unwrap_or_default();
                continue;
            } else {
                self.buf.extend_from_slice(body);
            }
            match rest {
                Some(rest) => {
                    self.emit(&mut on_line);
                    chunk = rest;
                }
                None => break,
            }
        }
    }

    /// Ends the stream: returns a last line that had no newline, if any.
    pub fn finish(&mut self, mut on_line: impl FnMut(Line<'_>)) {
        if self.skipping.is_some() || !self.buf.is_empty() {
            self.emit(&mut on_line);
        }
    }

    fn emit(&mut self, on_line: &mut impl FnMut(Line<'_>)) {
        if let Some(len) = self.skipping.take() {
            on_line(Line::Oversized { len });
        } else {
            on_line(Line::Complete(strip_cr(&self.buf)));
            self.buf.clear();
        }
    }
}

fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, PartialEq, Eq, Clone)]
    enum Owned {
        Complete(Vec<u8>),
        Oversized(u64),
    }

    fn split_all(chunks: &[&[u8]], max: usize) -> Vec<Owned> {
        let mut s = LineSplitter::new(max);
        let mut out = Vec::new();
        let mut sink = |l: Line<'_>| {
            out.push(match l {
                Line::Complete(b) => Owned::Complete(b.to_vec()),
                Line::Oversized { len } => Owned::Oversized(len),
            })
        };
        for c in chunks {
            s.push(c, &mut sink);
        }
        s.finish(&mut sink);
        out
    }

    #[test]
    fn lines_split_across_chunks_are_joined() {
        let got = split_all(&[b"hel", b"lo\nwor", b"ld\r\n", b"tail"], 100);
        assert_eq!(
            got,
            vec![
                Owned::Complete(b"hello".to_vec()),
                Owned::Complete(b"world".to_vec()),
                Owned::Complete(b"tail".to_vec()),
            ]
        );
    }

    #[test]
    fn oversized_line_is_counted_not_buffered() {
        let mut s = LineSplitter::new(4);
        let mut out = Vec::new();
        s.push(b"ok\n0123", |l| out.push(format!("{l:?}")));
        s.push(b"456789", |l| out.push(format!("{l:?}")));
        assert!(s.pending() <= 4, "an oversized line must not be buffered");
        s.push(b"\naft\n", |l| out.push(format!("{l:?}")));
        assert_eq!(
            out,
            vec![
                "Complete([111, 107])",
                "Oversized { len: 10 }",
                "Complete([97, 102, 116])"
            ]
        );
    }

    #[test]
    fn blank_and_binary_lines_are_kept() {
        let got = split_all(&[b"\n\0\xff\n"], 100);
        assert_eq!(
            got,
            vec![Owned::Complete(vec![]), Owned::Complete(vec![0, 0xff])]
        );
    }

    proptest! {
        #[test]
        fn any_split_gives_the_same_lines(
            data in proptest::collection::vec(prop_oneof![Just(b'\n'), Just(b'\r'), any::<u8>()], 0..400),
            cuts in proptest::collection::vec(0usize..400, 0..8),
            max in 1usize..64,
        ) {
            let whole = split_all(&[&data], max);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(data.len())).collect();
            cuts.sort();
            let mut chunks = Vec::new();
            let mut prev = 0;
            for c in cuts { chunks.push(&data[prev..c]); prev = c; }
            chunks.push(&data[prev..]);
            prop_assert_eq!(split_all(&chunks, max), whole);
        }
    }
}
