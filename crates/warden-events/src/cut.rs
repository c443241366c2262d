//! Big values cut out of a line before serde reads it.
//!
//! A tool's output can be megabytes of escaped text, and the decoders need
//! only its start and its size ([`output_of`]), or nothing at all (the
//! copy Claude writes a second time). serde walks a string at ~1-2 GB/s
//! when it has an escape every few bytes; [`skim`] checks the same text
//! several times faster. So for a long line, the values at a decoder's
//! known paths are checked by [`skim`] and replaced by `""` in a copy of
//! the line, which serde then reads; [`Cut::output_of`] reads a replaced
//! value from the original text.
//!
//! Nothing a decoder sees changes: [`skim`] is at least as strict as
//! serde (when it refuses the line, nothing is cut and serde decides as
//! before), the fields at these paths are raw JSON that serde accepts
//! whether they hold the value or `""`, and their one reader,
//! [`Cut::output_of`], finds the value they held.

use std::ops::Range;

use serde_json::value::RawValue;

use crate::json::{output_of, output_of_text};
use crate::skim::{self, Step};
use crate::summary::ToolOutput;

/// Lines shorter than this are read as they are.
const MIN_LINE: usize = 16 << 10;
/// Values shorter than this are left in the line.
const MIN_VALUE: usize = 4 << 10;

/// A line, with the big values at some paths cut out.
pub struct Cut<'a> {
    line: &'a [u8],
    /// `line` as text, once it was found to be UTF-8 (when something was cut).
    text: &'a str,
    /// The line with each cut value replaced by `""`; empty when nothing
    /// was cut.
    reduced: Vec<u8>,
    /// Where each `""` is in `reduced`, and where its value is in `line`.
    cuts: Vec<(usize, Range<usize>)>,
}

impl<'a> Cut<'a> {
    /// `line` with the big values at `paths` (raw JSON fields whose only
    /// reader is [`Cut::output_of`], or fields the decoder ignores) cut
    /// out, when it is long and well formed.
    pub fn new(line: &'a [u8], paths: &[&[Step]]) -> Self {
        Self::with_sizes(line, paths, MIN_LINE, MIN_VALUE)
    }

    fn with_sizes(line: &'a [u8], paths: &[&[Step]], min_line: usize, min_value: usize) -> Self {
        let mut cut = Cut {
            line,
            text: "",
            reduced: Vec::new(),
            cuts: Vec::new(),
        };
        if line.len() < min_line {
            return cut;
        }
        let Ok(text) = std::str::from_utf8(line) else {
            return cut;
        };
        let Some(found) = skim::values_at(text, paths, min_value) else {
            return cut;
        };
        cut.text = text;
        if found.is_empty() {
            return cut;
        }
        let kept: usize = line.len() - found.iter().map(|r| r.len()).sum::<usize>();
        cut.reduced.reserve(kept + 2 * found.len());
        let mut from = 0;
        for r in found {
            cut.reduced.extend_from_slice(&line[from..r.start]);
            cut.cuts.push((cut.reduced.len(), r.clone()));
            cut.reduced.extend_from_slice(b"\"\"");
            from = r.end;
        }
        cut.reduced.extend_from_slice(&line[from..]);
        cut
    }

    /// The line to parse: the original, or the copy with values cut out.
    pub fn line(&self) -> &[u8] {
        if self.cuts.is_empty() {
            self.line
        } else {
            &self.reduced
        }
    }

    /// [`output_of`] a raw value read from [`Cut::line`]: for a cut value,
    /// that of the value it replaced.
    pub fn output_of(&self, raw: &RawValue) -> ToolOutput {
        match self.original(raw) {
            Some(text) => output_of_text(text),
            None => output_of(raw),
        }
    }

    /// The value `raw` replaced, when it is one of the `""` put in.
    fn original(&self, raw: &RawValue) -> Option<&'a str> {
        let s = raw.get();
        if self.cuts.is_empty() || s != "\"\"" {
            return None;
        }
        // Where `raw` lies in the reduced line, if it lies in it at all.
        let at = (s.as_ptr() as usize).wrapping_sub(self.reduced.as_ptr() as usize);
        let (_, range) = self.cuts.iter().find(|(put, _)| *put == at)?;
        self.text.get(range.clone())
    }
}
