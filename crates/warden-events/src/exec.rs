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

/// The text of a plain line: its bytes, invalid UTF-8 replaced.
pub fn text(line: &[u8]) -> String {
    String::from_utf8_lossy(line).into_owned()
}
