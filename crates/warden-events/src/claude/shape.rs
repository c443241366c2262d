//! The shapes of the last quiet `stream_event` lines, so that a line of
//! a shape seen before is checked by comparing bytes.
//!
//! The partial messages of one content block come as runs of lines that
//! differ only in their strings and numbers: the text of each delta, its
//! `uuid`, its block's `index`. Checking each such line as JSON, member by
//! member, is most of what a stream with partial messages costs. Once a
//! line has been checked and found quiet ([`StreamLine`] with no event to
//! hand on), its shape is kept: its bytes, and where its strings and
//! numbers are (the holes). A later line fits the shape when it has the
//! same bytes between the holes, and in each hole one well-formed string
//! or number, as the shape had there.
//!
//! Such a line is the shape's line with other strings and numbers: the
//! same keys in the same order, the same nesting, the same `null`s, and
//! the same type and event type, which are never holes. So it is well
//! formed exactly when its holes are, and what the full parse takes from
//! it differs only in the holes' text: the session id (only read while no
//! session is known, so shapes are used only once one is), the parent
//! (only read for an event that is handed on, which a quiet line's is
//! not), and what warden never reads. It decodes as the shape's line did:
//! to nothing.
//!
//! [`StreamLine`]: super::StreamLine

use std::ops::Range;

use crate::skim::{number_at, string_at};

/// How many shapes are kept: a round of partial messages has about six
/// (block starts of text and of tool calls, text deltas, tool-input
/// deltas, block stops, `message_stop`).
const SHAPES: usize = 8;

/// Lines longer than this are not kept as shapes (a copy is kept of each).
const MAX_SHAPE: usize = 4 << 10;

#[derive(Debug, Default)]
pub(super) struct Shapes {
    /// The latest first.
    recent: Vec<Shape>,
}

#[derive(Debug)]
struct Shape {
    line: Vec<u8>,
    /// Each string or number other than a type, in order.
    holes: Vec<Hole>,
}

#[derive(Debug)]
struct Hole {
    at: Range<usize>,
    string: bool,
}

impl Shapes {
    /// Whether `line` fits the shape of a quiet line seen before (see the
    /// module docs); if so, it is well formed and decodes to nothing.
    pub(super) fn fit(&mut self, line: &[u8]) -> bool {
        let Some(k) = self.recent.iter().position(|s| s.fits(line)) else {
            return false;
        };
        // Lines of one shape come in runs: keep the latest in front.
        self.recent[..=k].rotate_right(1);
        true
    }

    /// Keeps the shape of `line`, a line [`StreamLine`](super::StreamLine)
    /// read as well formed and quiet.
    pub(super) fn learn(&mut self, line: &[u8]) {
        if line.len() > MAX_SHAPE {
            return;
        }
        let Some(holes) = holes(line) else { return };
        if self.recent.len() == SHAPES {
            self.recent.pop();
        }
        self.recent.insert(
            0,
            Shape {
                line: line.to_vec(),
                holes,
            },
        );
    }
}

impl Shape {
    fn fits(&self, line: &[u8]) -> bool {
        let (mut from, mut at) = (0, 0);
        let mut non_ascii = false;
        for hole in &self.holes {
            let same = &self.line[from..hole.at.start];
            if !line[at..].starts_with(same) {
                return false;
            }
            at += same.len();
            let end = if hole.string {
                string_at(line, at).map(|(end, high)| {
                    non_ascii |= high;
                    end
                })
            } else {
                number_at(line, at)
            };
            let Some(end) = end else { return false };
            (from, at) = (hole.at.end, end);
        }
        // Outside strings, the line is the shape's, all ASCII.
        line[at..] == self.line[from..] && (!non_ascii || std::str::from_utf8(line).is_ok())
    }
}

/// Where the strings and numbers of `line` (well-formed JSON) are, but
/// for the values of `type`; `None` if the line is not what it should be.
fn holes(line: &[u8]) -> Option<Vec<Hole>> {
    let mut holes = Vec::new();
    let mut key: &[u8] = b"";
    let mut i = 0;
    while let Some(&c) = line.get(i) {
        match c {
            b'"' => {
                let (end, _) = string_at(line, i)?;
                let after = end
                    + line[end..]
                        .iter()
                        .take_while(|b| b.is_ascii_whitespace())
                        .count();
                if line.get(after) == Some(&b':') {
                    key = &line[i + 1..end - 1];
                    i = after + 1;
                    continue;
                }
                // The value of a type (and anything in it) is not a hole:
                // the line's type and its event's type must stay.
                if key != b"type" {
                    holes.push(Hole {
                        at: i..end,
                        string: true,
                    });
                }
                i = end;
            }
            b'-' | b'0'..=b'9' => {
                let end = number_at(line, i)?;
                holes.push(Hole {
                    at: i..end,
                    string: false,
                });
                i = end;
            }
            _ => i += 1,
        }
    }
    Some(holes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DELTA: &str = r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"I will"}},"session_id":"s1","parent_tool_use_id":null,"uuid":"e1"}"#;

    fn with(text: &str, index: &str) -> Vec<u8> {
        DELTA
            .replace(r#""I will""#, text)
            .replace(r#""index":0"#, &format!(r#""index":{index}"#))
            .into_bytes()
    }

    #[test]
    fn only_a_line_of_the_same_shape_with_well_formed_holes_fits() {
        let mut shapes = Shapes::default();
        assert!(!shapes.fit(DELTA.as_bytes()), "nothing is known yet");
        shapes.learn(DELTA.as_bytes());
        for fits in [
            with(
                r#""another text, \"quoted\": {\"type\":\"message_delta\"}""#,
                "12",
            ),
            with(r#""h\u00e9llo wörld""#, "-1.5e3"),
            with(r#""""#, "0"),
            DELTA.replace(r#""e1""#, r#""e\n2""#).into_bytes(),
        ] {
            assert!(shapes.fit(&fits), "{}", fits.escape_ascii());
        }
        let mut invalid_utf8 = with(r#""é""#, "0");
        let at = invalid_utf8.iter().position(|b| *b == 0xa9).unwrap();
        invalid_utf8[at] = 0xff;
        for misfit in [
            // The holes must be well formed, and of their kind.
            with(r#""a"b""#, "0"),
            with("\"a\u{1}\"", "0"),
            with(r#""\x""#, "0"),
            with(r#""\ud83d\ude00""#, "0"),
            with(r#""a""#, "01"),
            with(r#""a""#, "1."),
            with(r#""a""#, r#""0""#),
            with("7", "0"),
            invalid_utf8,
            // Types are not holes.
            DELTA
                .replace("content_block_delta", "message_delta")
                .into_bytes(),
            DELTA.replace("stream_event", "stream_evenT").into_bytes(),
            // Nor is anything else.
            DELTA.replace("null", r#""toolu_1""#).into_bytes(),
            DELTA.replace(r#","uuid""#, r#", "uuid""#).into_bytes(),
            format!("{DELTA} ").into_bytes(),
            DELTA.as_bytes()[..DELTA.len() - 1].to_vec(),
        ] {
            assert!(!shapes.fit(&misfit), "{}", misfit.escape_ascii());
        }
    }
}
