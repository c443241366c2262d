//! The decoder for `exec`: any command, output treated as plain lines.
//!
//! Every complete non-blank line is activity and a `text` event (invalid
//! UTF-8 is replaced in the event; the raw bytes stay in the log). There
//! is no terminal event: the exit status decides.

use crate::decoder::Decode;
use crate::summary::Out;

#[derive(Debug, Default)]
pub struct Exec;

impl Decode for Exec {
    fn line(&mut self, line: &[u8], out: &mut Out<'_>) -> bool {
        if line.iter().all(u8::is_ascii_whitespace) {
            return false;
        }
        out.text(String::from_utf8_lossy(line).into_owned());
        true
    }
}
