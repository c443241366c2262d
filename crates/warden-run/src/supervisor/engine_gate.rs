//! A container's stderr begins with the engine's own lines (its warnings,
//! its log lines) before the agent's: the gate that tells them apart.

use warden_sandbox::Sandbox;

/// The engine's own lines at the start of a container's stderr.
///
/// The engine's client writes the container's stderr to its own, and its
/// own lines there too: Docker's warnings about the container it created
/// (`WARNING: IPv4 forwarding is disabled. Networking will not work.`),
/// printed before the container starts, and Podman's log lines at warning
/// level. Those lines are told only by their shape
/// ([`warden_sandbox::container::is_engine_line`]), so only the leading
/// run of such lines is taken as the engine's: from the first line of
/// another shape on, everything is the agent's, whatever it looks like.
/// What the gate holds (a line not finished yet that may still be an
/// engine's) goes to the log once it is known not to be one.
///
/// An agent can print a line of that shape first: then that line is shown
/// on warden's stderr as the engine's (an `engine_line` event, masked like
/// every event, control characters dropped, cut at [`ENGINE_LINE`]
/// characters) and left out of `stderr.log`. It gains nothing by it: the
/// line is its own text, said as the engine's, and no more than
/// [`ENGINE_LINES`] lines of at most [`GATE_HELD`] bytes are taken so.
/// A warning the engine writes later, after the agent has written to
/// stderr, stays in `stderr.log`.
pub(super) struct EngineGate {
    sandbox: Sandbox,
    held: Vec<u8>,
    lines: usize,
}

/// The most lines the gate takes as the engine's.
const ENGINE_LINES: usize = 32;
/// The longest line it holds; a longer one is the agent's.
const GATE_HELD: usize = 4096;
/// How much of an engine's line is shown.
const ENGINE_LINE: usize = 500;

impl EngineGate {
    pub(super) fn new(sandbox: Sandbox) -> Self {
        Self {
            sandbox,
            held: Vec::new(),
            lines: 0,
        }
    }

    /// Takes `chunk` (at the end of the stream with `eof`): the engine's
    /// lines found, as text to show, and, once the gate closes, the bytes
    /// it lets through (what it held and the rest of the chunk), for the
    /// log; `None` while it stays open.
    pub(super) fn take(&mut self, chunk: &[u8], eof: bool) -> (Vec<String>, Option<Vec<u8>>) {
        use warden_sandbox::container::{is_engine_line, may_be_engine_line};
        self.held.extend_from_slice(chunk);
        let mut lines = Vec::new();
        loop {
            let newline = memchr::memchr(b'\n', &self.held);
            let end = newline.unwrap_or(self.held.len());
            let line = &self.held[..end];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let finished = newline.is_some() || eof;
            if self.held.is_empty() {
                return (lines, eof.then(Vec::new));
            }
            let engine = self.lines < ENGINE_LINES
                && line.len() <= GATE_HELD
                && is_engine_line(self.sandbox, line);
            if finished && engine {
                lines.push(shown(line));
                self.lines += 1;
                let cut = newline.map_or(self.held.len(), |i| i + 1);
                self.held.drain(..cut);
                continue;
            }
            if !finished
                && self.lines < ENGINE_LINES
                && line.len() <= GATE_HELD
                && may_be_engine_line(self.sandbox, line)
            {
                return (lines, None);
            }
            return (lines, Some(std::mem::take(&mut self.held)));
        }
    }
}

/// An engine's line as shown: valid text, no control characters, cut.
fn shown(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    let mut s: String = text
        .chars()
        .filter(|c| !c.is_control())
        .take(ENGINE_LINE)
        .collect();
    if text.chars().count() > ENGINE_LINE {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const WARN: &str = "WARNING: IPv4 forwarding is disabled. Networking will not work.";

    #[test]
    fn the_leading_engine_lines_are_taken_and_the_rest_let_through() {
        let mut g = EngineGate::new(Sandbox::Docker);
        let (lines, out) = g.take(format!("{WARN}\nWARN").as_bytes(), false);
        assert_eq!(lines, [WARN]);
        assert_eq!(out, None, "a line that may still be the engine's is held");
        let (lines, out) = g.take(b"ING: two\nthe agent\nWARNING: the agent's\n", false);
        assert_eq!(lines, ["WARNING: two"]);
        assert_eq!(
            out.as_deref(),
            Some(&b"the agent\nWARNING: the agent's\n"[..]),
            "from the first other line on, all is the agent's"
        );
    }

    #[test]
    fn what_cannot_be_the_engines_is_let_through_at_once() {
        let mut g = EngineGate::new(Sandbox::Docker);
        let (lines, out) = g.take(b"hel", false);
        assert!(lines.is_empty());
        assert_eq!(out.as_deref(), Some(&b"hel"[..]));
        let mut g = EngineGate::new(Sandbox::Podman);
        let (lines, out) = g.take(b"", false);
        assert!(lines.is_empty() && out.is_none(), "nothing yet");
        let (lines, out) = g.take(b"", true);
        assert!(lines.is_empty());
        assert_eq!(out.as_deref(), Some(&b""[..]), "the end closes the gate");
    }

    #[test]
    fn an_engine_line_without_newline_at_the_end_is_the_engines() {
        let mut g = EngineGate::new(Sandbox::Podman);
        let (lines, out) = g.take(b"WARN[0000] no newline", false);
        assert!(lines.is_empty() && out.is_none());
        let (lines, out) = g.take(b"", true);
        assert_eq!(lines, ["WARN[0000] no newline"]);
        assert_eq!(out.as_deref(), Some(&b""[..]));
    }

    #[test]
    fn the_gate_takes_few_short_lines_and_shows_them_harmless() {
        let mut g = EngineGate::new(Sandbox::Docker);
        let many = "WARNING: x\n".repeat(ENGINE_LINES + 3);
        let (lines, out) = g.take(many.as_bytes(), false);
        assert_eq!(lines.len(), ENGINE_LINES);
        assert_eq!(out.unwrap(), "WARNING: x\n".repeat(3).into_bytes());
        let mut g = EngineGate::new(Sandbox::Docker);
        let long = format!("WARNING: {}", "y".repeat(GATE_HELD));
        let (lines, out) = g.take(long.as_bytes(), false);
        assert!(lines.is_empty());
        assert_eq!(out.unwrap(), long.into_bytes(), "too long to hold");
        let mut g = EngineGate::new(Sandbox::Docker);
        let (lines, _) = g.take(b"WARNING: \x1b[2Jcleared\r\n", false);
        assert_eq!(lines, ["WARNING: [2Jcleared"], "no control characters");
    }
}
