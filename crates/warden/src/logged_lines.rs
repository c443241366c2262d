//! Reading an `exec` run's plain lines back from its logs.
//!
//! `events.jsonl` does not copy the lines an `exec` run printed: a `lines`
//! event says where they are in `stdout.log` or `stderr.log`. This turns
//! such an event back into the `text` (or `stderr`) events it stands for,
//! exactly as the run made them: the same decoder reads the same bytes,
//! and each text is cut at the same cap. Lines the run's redactor changed
//! are never behind a `lines` event (their masked text is an event of its
//! own), so nothing needs masking here.
//!
//! Memory stays bounded whatever the event claims: the range is read in
//! pieces through the decoder's bounded line splitter.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde_json::Value;
use warden_events::event::Stamped;
use warden_events::{Agent, Event, StreamDecoder};

/// The two logs of a run, opened when first needed.
pub(crate) struct Logs<'a> {
    dir: &'a Path,
    stdout: Option<File>,
    stderr: Option<File>,
}

impl<'a> Logs<'a> {
    pub(crate) fn new(dir: &'a Path) -> Self {
        Self {
            dir,
            stdout: None,
            stderr: None,
        }
    }

    /// Calls `each` with every event a `lines` event stands for, in order.
    pub(crate) fn expand(
        &mut self,
        event: &Value,
        mut each: impl FnMut(&Stamped),
    ) -> Result<(), String> {
        let stderr = match event["stream"].as_str() {
            Some("stdout") => false,
            Some("stderr") => true,
            other => return Err(format!("a `lines` event names no log: {other:?}")),
        };
        let (Some(offset), Some(bytes)) = (event["offset"].as_u64(), event["bytes"].as_u64())
        else {
            return Err(format!("a `lines` event has no byte range: {event}"));
        };
        let t_ms = event["t_ms"].as_u64().unwrap_or(0);
        let (slot, name) = if stderr {
            (&mut self.stderr, "stderr.log")
        } else {
            (&mut self.stdout, "stdout.log")
        };
        let path = self.dir.join(name);
        let file = match slot {
            Some(f) => f,
            None => slot.insert(
                crate::report_cmd::open_regular(&path)
                    .map_err(|e| format!("could not open {}: {e}", path.display()))?,
            ),
        };
        let mut decoder = StreamDecoder::new(Agent::Exec, warden_run::defaults::MAX_LINE);
        let mut emit = |events: &mut Vec<Event>| {
            for e in events.drain(..) {
                let mut event = match e {
                    Event::Text { text } if stderr => Event::Stderr { text },
                    e => e,
                };
                event.cap_text(warden_run::defaults::EVENT_TEXT);
                each(&Stamped {
                    schema_version: warden_events::SchemaVersion,
                    t_ms,
                    event,
                });
            }
        };
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| format!("could not read {}: {e}", path.display()))?;
        let mut range = file.take(bytes);
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = match range.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("could not read {}: {e}", path.display())),
            };
            decoder.push(&buf[..n], |_, events| emit(events));
        }
        decoder.finish(|_, events| emit(events));
        if range.limit() > 0 {
            return Err(format!(
                "{} ends {} bytes before the lines an event points at",
                path.display(),
                range.limit()
            ));
        }
        Ok(())
    }
}
