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
//!
//! ```no_run
//! # fn demo(run_dir: &std::path::Path, event: &warden_run::Stamped) {
//! let mut logs = warden_run::logged_lines::Logs::new(run_dir);
//! logs.expand(event, |text_event| println!("{:?}", text_event.event))
//!     .expect("the logs are the run's");
//! # }
//! ```

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use warden_events::event::Stamped;
use warden_events::{Agent, Event, Stream, StreamDecoder};

/// Why the lines of a `lines` event could not be read back.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum LinesError {
    #[error("not a `lines` event")]
    NotLines,
    #[error("could not open {}: {source}", .path.display())]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("could not read {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} ends {missing} bytes before the lines an event points at", .path.display())]
    Short { path: PathBuf, missing: u64 },
}

/// The two logs of a run, opened when first needed.
pub struct Logs<'a> {
    dir: &'a Path,
    stdout: Option<File>,
    stderr: Option<File>,
}

impl<'a> Logs<'a> {
    pub fn new(dir: &'a Path) -> Self {
        Self {
            dir,
            stdout: None,
            stderr: None,
        }
    }

    /// Calls `each` with every event a `lines` event stands for, in order.
    pub fn expand(
        &mut self,
        event: &Stamped,
        mut each: impl FnMut(&Stamped),
    ) -> Result<(), LinesError> {
        let Event::Lines {
            stream,
            offset,
            bytes,
            ..
        } = event.event
        else {
            return Err(LinesError::NotLines);
        };
        let stderr = stream == Stream::Stderr;
        let t_ms = event.t_ms;
        let (slot, name) = if stderr {
            (&mut self.stderr, "stderr.log")
        } else {
            (&mut self.stdout, "stdout.log")
        };
        let path = self.dir.join(name);
        let file = match slot {
            Some(f) => f,
            None => slot.insert(crate::regular_file::open_written(&path).map_err(|source| {
                LinesError::Open {
                    path: path.clone(),
                    source,
                }
            })?),
        };
        let mut decoder = StreamDecoder::new(Agent::Exec, crate::defaults::MAX_LINE);
        let mut emit = |events: &mut Vec<Event>| {
            for e in events.drain(..) {
                let mut event = match e {
                    Event::Text { text } if stderr => Event::Stderr { text },
                    e => e,
                };
                event.cap_text(crate::defaults::EVENT_TEXT);
                each(&Stamped {
                    schema_version: warden_events::SchemaVersion,
                    t_ms,
                    event,
                });
            }
        };
        let read_error = |source| LinesError::Read {
            path: path.clone(),
            source,
        };
        file.seek(SeekFrom::Start(offset)).map_err(read_error)?;
        let mut range = file.take(bytes);
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = match range.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(read_error(e)),
            };
            decoder.push(&buf[..n], |_, events| emit(events));
        }
        decoder.finish(|_, events| emit(events));
        if range.limit() > 0 {
            return Err(LinesError::Short {
                missing: range.limit(),
                path,
            });
        }
        Ok(())
    }
}
