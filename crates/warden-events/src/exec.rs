//! The decoder for `exec`: any command, output treated as plain lines.
//!
//! Every complete non-blank line is activity; a stdout line becomes a
//! `text` event and a stderr line a `stderr` event. Invalid UTF-8 is
//! replaced in the event (the raw bytes stay in the log).

use crate::event::{Event, Stream};

/// What one line meant to the supervisor.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// Whether the line counts as activity for the stall watchdog.
    pub activity: bool,
    pub event: Option<Event>,
}

/// Decodes one complete line (without its newline) of an `exec` run.
pub fn decode_line(stream: Stream, line: &[u8]) -> Decoded {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Decoded {
            activity: false,
            event: None,
        };
    }
    let text = String::from_utf8_lossy(line).into_owned();
    let event = match stream {
        Stream::Stdout => Event::Text { text },
        Stream::Stderr => Event::Stderr { text },
    };
    Decoded {
        activity: true,
        event: Some(event),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_lines_are_not_activity() {
        assert!(!decode_line(Stream::Stdout, b"").activity);
        assert!(!decode_line(Stream::Stderr, b"  \t").activity);
    }

    #[test]
    fn lines_become_events_per_stream() {
        let d = decode_line(Stream::Stdout, b"did the work");
        assert!(d.activity);
        assert_eq!(
            d.event,
            Some(Event::Text {
                text: "did the work".into()
            })
        );
        let d = decode_line(Stream::Stderr, b"bad \xff byte");
        assert_eq!(
            d.event,
            Some(Event::Stderr {
                text: "bad \u{fffd} byte".into()
            })
        );
    }
}
