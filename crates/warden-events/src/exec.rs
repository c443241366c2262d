//! The decoder for `exec`: any command, output treated as plain lines.
//!
//! Every complete non-blank line is activity and a `text` event (invalid
//! UTF-8 is replaced in the event; the raw bytes stay in the log). There
//! is no terminal event: the exit status decides.
//!
//! [`is_blank`] and [`text`] are the two rules, for callers that take
//! plain lines without a decoder (the supervisor, which makes a line's
//! text only when something needs it).

use crate::decoder::Decode;
use crate::summary::Out;

#[derive(Debug, Default)]
pub struct Exec;

impl Decode for Exec {
    fn line(&mut self, line: &[u8], out: &mut Out<'_>) -> bool {
        if is_blank(line) {
            return false;
        }
        out.text(text(line));
        true
    }
}

/// A blank line (only ASCII whitespace) is neither activity nor text.
pub fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

/// How many lines `span` ends, if none of them is blank: `span` starts at
/// the newline before its first line and ends with its last line's
/// newline. A blank line (whitespace only) ends with a newline that
/// follows whitespace (or another newline), so a span in which no newline
/// does is counted in two vector passes (that check, then memchr's
/// count), instead of line by line; one that has such a newline (a blank
/// line, or lines that end in `\r` or a space) is left to the caller
/// (`None`).
pub fn lines_if_none_blank(span: &[u8]) -> Option<u64> {
    let (before, after) = (&span[..span.len() - 1], &span[1..]);
    if newline_after_space(before, after) {
        return None;
    }
    Some(memchr::memchr_iter(b'\n', after).count() as u64)
}

/// Whether some `after[i]` is a newline and `before[i]` ASCII whitespace
/// (as `u8::is_ascii_whitespace` has it), with AVX2 where the CPU has it
/// (a third faster than the SSE2 every x86-64 has).
fn newline_after_space(before: &[u8], after: &[u8]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, the one feature the function is built
        // for; it is otherwise the same safe code.
        return unsafe { newline_after_space_avx2(before, after) };
    }
    newline_after_space_any(before, after)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn newline_after_space_avx2(before: &[u8], after: &[u8]) -> bool {
    newline_after_space_any(before, after)
}

/// The loop itself, written as byte compares folded with `|` (no branch,
/// no early exit), which the compiler turns into vector code of the
/// width it is built for.
#[inline(always)]
fn newline_after_space_any(before: &[u8], after: &[u8]) -> bool {
    let found = before.iter().zip(after).fold(0u8, |found, (&b, &next)| {
        let space =
            u8::from(b == b' ') | (u8::from(b.wrapping_sub(b'\t') < 5) & u8::from(b != 0x0b));
        found | (u8::from(next == b'\n') & space)
    });
    found != 0
}

/// The text of a plain line: its bytes, invalid UTF-8 replaced.
pub fn text(line: &[u8]) -> String {
    String::from_utf8_lossy(line).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Line by line, as the supervisor counted before.
    fn naive(span: &[u8]) -> Option<u64> {
        let mut lines = 0;
        for line in span[1..].split_inclusive(|b| *b == b'\n') {
            if is_blank(&line[..line.len() - 1]) {
                return None;
            }
            lines += 1;
        }
        Some(lines)
    }

    #[test]
    fn lines_are_counted_as_line_by_line_for_every_byte_around_a_newline() {
        // Every byte value before a newline, at every place in a span long
        // enough for the vector loop and its tail.
        for b in 0..=255u8 {
            for at in [1usize, 31, 32, 33, 63, 64, 65, 100] {
                let mut span = vec![b'x'; 130];
                span[0] = b'\n';
                span[at] = b;
                span[at + 1] = b'\n';
                *span.last_mut().unwrap() = b'\n';
                // A line that ends in whitespace is left to the caller, a
                // blank one too; any other span is counted as line by line.
                let want = if b.is_ascii_whitespace() {
                    None
                } else {
                    naive(&span)
                };
                assert_eq!(lines_if_none_blank(&span), want, "{b:#x} at {at}");
                let (before, after) = (&span[..span.len() - 1], &span[1..]);
                assert_eq!(
                    newline_after_space_any(before, after),
                    newline_after_space(before, after),
                    "{b:#x} at {at}"
                );
            }
        }
        assert_eq!(lines_if_none_blank(b"\nab\ncd\n"), Some(2));
        assert_eq!(lines_if_none_blank(b"\nab\n\ncd\n"), None);
        assert_eq!(lines_if_none_blank(b"\nab \ncd\n"), None);
        assert_eq!(
            lines_if_none_blank(b"\nab\x0b\ncd\n"),
            Some(2),
            "\\v is no blank"
        );
    }
}
