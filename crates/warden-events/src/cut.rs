//! Big values cut out of a line before serde reads it.
//!
//! A tool's output can be megabytes of escaped text, and the decoders need
//! only its start and its size ([`output_of`]), or nothing at all (the
//! copy Claude writes a second time). serde walks a string at ~1-2 GB/s
//! when it has an escape every few bytes; [`skim`] checks the same text
//! more than twice as fast, and counts its unescaped length as it goes. So for a long line, the values at a decoder's
//! known paths are checked by [`skim`] and replaced by `""` in a copy of
//! the line, which serde then reads; [`Cut::output_of`] reads a replaced
//! value from the original text.
//!
//! Nothing a decoder sees changes: [`skim`] is at least as strict as
//! serde (when it refuses the line, nothing is cut and serde decides as
//! before), the fields at these paths are raw JSON that serde accepts
//! whether they hold the value or `""`, and their one reader,
//! [`Cut::output_of`], finds the value they held.

use serde_json::value::RawValue;

use crate::json::{output_of, output_of_text};
use crate::skim::{self, Found, Step};
use crate::summary::ToolOutput;

/// Lines shorter than this are read as they are.
const MIN_LINE: usize = 16 << 10;
/// Values shorter than this are left in the line.
const MIN_VALUE: usize = 4 << 10;

/// A line, with the big values at some paths cut out.
pub(crate) struct Cut<'a> {
    line: &'a [u8],
    /// The line with each cut value replaced by `""`; empty when nothing
    /// was cut.
    reduced: Vec<u8>,
    /// Where each `""` is in `reduced`, and the value it stands for.
    cuts: Vec<(usize, Found)>,
}

impl<'a> Cut<'a> {
    /// `line` with the big values at `paths` (raw JSON fields whose only
    /// reader is [`Cut::output_of`], or fields the decoder ignores) cut
    /// out, when it is long and well formed.
    pub(crate) fn new(line: &'a [u8], paths: &[&[Step]]) -> Self {
        #[cfg(not(test))]
        let (min_line, min_value) = (MIN_LINE, MIN_VALUE);
        #[cfg(test)]
        let (min_line, min_value) = tests::SIZES.get();
        Self::with_sizes(line, paths, min_line, min_value)
    }

    fn with_sizes(line: &'a [u8], paths: &[&[Step]], min_line: usize, min_value: usize) -> Self {
        let mut cut = Cut {
            line,
            reduced: Vec::new(),
            cuts: Vec::new(),
        };
        if line.len() < min_line {
            return cut;
        }
        let Some(found) = skim::values_at(line, paths, min_value) else {
            return cut;
        };
        if found.is_empty() {
            return cut;
        }
        let kept: usize = line.len() - found.iter().map(|f| f.range.len()).sum::<usize>();
        cut.reduced.reserve(kept + 2 * found.len());
        let mut from = 0;
        for f in found {
            cut.reduced.extend_from_slice(&line[from..f.range.start]);
            from = f.range.end;
            cut.cuts.push((cut.reduced.len(), f));
            cut.reduced.extend_from_slice(b"\"\"");
        }
        cut.reduced.extend_from_slice(&line[from..]);
        cut
    }

    /// The line to parse: the original, or the copy with values cut out.
    pub(crate) fn line(&self) -> &[u8] {
        if self.cuts.is_empty() {
            self.line
        } else {
            &self.reduced
        }
    }

    /// [`output_of`] a raw value read from [`Cut::line`]: for a cut value,
    /// that of the value it replaced.
    pub(crate) fn output_of(&self, raw: &RawValue) -> ToolOutput {
        if self.cuts.is_empty() {
            return output_of(raw);
        }
        let resolve = |s| self.original(s).unwrap_or((s, None));
        let (s, size) = resolve(raw.get().as_bytes());
        output_of_text(s, size, resolve)
    }

    /// The value `s` (raw JSON read from [`Cut::line`]) replaced, when it
    /// is one of the `""` put in, with its text's length if it is a string.
    fn original(&self, s: &[u8]) -> Option<(&'a [u8], Option<u64>)> {
        if s != b"\"\"" {
            return None;
        }
        // Where `s` lies in the reduced line, if it lies in it at all.
        let at = (s.as_ptr() as usize).wrapping_sub(self.reduced.as_ptr() as usize);
        let (_, found) = self.cuts.iter().find(|(put, _)| *put == at)?;
        Some((self.line.get(found.range.clone())?, found.text_len))
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use proptest::prelude::*;

    use super::*;
    use crate::agent::Agent;
    use crate::decoder::AgentDecoder;
    use crate::event::Event;

    thread_local! {
        /// The sizes [`Cut::new`] uses in this thread's tests.
        pub static SIZES: Cell<(usize, usize)> = const { Cell::new((MIN_LINE, MIN_VALUE)) };
    }

    /// Each line's well-formedness and events, and the summary.
    type Decoded = (Vec<(bool, Vec<Event>)>, crate::summary::Summary);

    fn decode(agent: Agent, lines: &[Vec<u8>], sizes: (usize, usize)) -> Decoded {
        SIZES.set(sizes);
        let mut d = AgentDecoder::new(agent);
        let mut out = Vec::new();
        for l in lines {
            let mut events = Vec::new();
            let ok = d.line(l, &mut events);
            out.push((ok, events));
        }
        let mut events = Vec::new();
        d.finish(&mut events);
        out.push((true, events));
        SIZES.set((MIN_LINE, MIN_VALUE));
        (out, d.summary().clone())
    }

    fn fixtures(agent: Agent) -> Vec<Vec<Vec<u8>>> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(agent.name());
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|f| f.unwrap().path())
            .collect();
        files.sort();
        files
            .iter()
            .map(|f| {
                std::fs::read(f)
                    .unwrap()
                    .split(|b| *b == b'\n')
                    .map(<[u8]>::to_vec)
                    .collect()
            })
            .collect()
    }

    /// Pieces of a JSON string body: plain text, every escape (surrogate
    /// pairs, broken ones), and what a string may not hold.
    fn body() -> impl Strategy<Value = String> {
        let valid = prop::sample::select(vec![
            "a",
            "héllo wörld ",
            r#"\""#,
            r"\\",
            r"\\\\",
            r"\n",
            r"\t",
            r"\/",
            r"\u00e9",
            "{",
            "]",
            "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz",
        ]);
        let invalid = prop::sample::select(vec![
            r"\ud83d\ude00",
            r"\ud83d",
            r"\u12",
            r"\x",
            "\\",
            "\"",
            "\u{1}",
            "\t",
        ]);
        let piece = prop_oneof![30 => valid, 1 => invalid];
        prop::collection::vec(piece, 0..40).prop_map(|p| p.concat())
    }

    /// A raw value to put where a big one goes.
    fn value() -> impl Strategy<Value = String> {
        (body(), 0..5u8).prop_map(|(b, shape)| match shape {
            0 | 1 => format!(r#""{b}""#),
            2 => format!(r#"[{{"type":"text","text":"{b}"}},{{"text":"{b}"}}]"#),
            3 => format!(r#"{{"stdout":"{b}","stderr":""}}"#),
            _ => b,
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        /// Whatever is put at a decoder's big-value paths, and whatever
        /// byte is then changed, the events, the well-formedness of each
        /// line and the summary are those of reading the line whole.
        #[test]
        fn cutting_changes_nothing_a_decoder_sees(
            agent in prop::sample::select(Agent::ALL.to_vec()),
            file in any::<prop::sample::Index>(),
            line in any::<prop::sample::Index>(),
            put in value(),
            at in any::<prop::sample::Index>(),
            byte in prop::option::of(prop::sample::select(b"{}[]\",:\\ 0-.nu\x01\xff\xc3".to_vec())),
        ) {
            let paths: &[&[Step]] = match agent {
                Agent::Claude => crate::claude::BIG,
                Agent::Codex => crate::codex::BIG,
                Agent::OpenCode => crate::opencode::BIG,
                Agent::Pi => crate::pi::BIG,
                Agent::Gemini => crate::gemini::BIG,
                Agent::Exec => return Ok(()),
            };
            let files = fixtures(agent);
            let mut lines = files[file.index(files.len())].clone();
            let n = line.index(lines.len());
            let l = &lines[n];
            if let Some(found) = skim::values_at(l, paths, 0)
                && let Some(Found { range: r, .. }) = found.first()
            {
                let mut new = l[..r.start].to_vec();
                new.extend_from_slice(put.as_bytes());
                new.extend_from_slice(&l[r.end..]);
                lines[n] = new;
            }
            if let Some(byte) = byte {
                let l = &mut lines[n];
                if !l.is_empty() {
                    let i = at.index(l.len());
                    l[i] = byte;
                }
            }
            let whole = decode(agent, &lines, (usize::MAX, usize::MAX));
            let cut = decode(agent, &lines, (0, 0));
            prop_assert_eq!(whole, cut);
        }
    }

    #[test]
    fn a_cut_value_is_read_from_the_line() {
        let line = br#"{"type":"tool_result","tool_id":"t","status":"success","output":"a\"b"}"#;
        let cut = Cut::with_sizes(line, crate::gemini::BIG, 0, 0);
        assert_eq!(
            cut.line(),
            br#"{"type":"tool_result","tool_id":"t","status":"success","output":""}"#
        );
        #[derive(serde::Deserialize)]
        struct L<'a> {
            #[serde(borrow)]
            output: &'a RawValue,
        }
        let l: L<'_> = serde_json::from_slice(cut.line()).unwrap();
        let out = cut.output_of(l.output);
        assert_eq!((out.preview.as_str(), out.bytes), ("a\"b", 3));
        // An empty string that was there all along is read as it is.
        let line = br#"{"output":"","x":"big enough"}"#;
        let cut = Cut::with_sizes(line, crate::gemini::BIG, 0, 0);
        let l: L<'_> = serde_json::from_slice(cut.line()).unwrap();
        assert_eq!(cut.output_of(l.output).bytes, 0);
        // A line refused by the check is left whole.
        let line = b"{\"output\":\"\xff\"}";
        assert_eq!(Cut::with_sizes(line, crate::gemini::BIG, 0, 0).line(), line);
    }
}
