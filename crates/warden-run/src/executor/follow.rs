//! Following, from the submitting host, the runs an entry makes on
//! another machine: its session writes each run's directory
//! (`iteration-N`, `iteration-N-retry-M`, each perhaps with `-attempt-K`)
//! into the entry's directory on
//! shared storage, and the batch's stream says what it reads there, as
//! it would for a run on this machine: the run started, its events as
//! `events.jsonl` grows, the run ended with its final `run.json`.
//!
//! The files are written by warden on the node, but they sit where the
//! run's agent may reach (no sandbox, or a shared directory it can see):
//! every file is opened without following a link and only if regular,
//! and no look reads more than [`LOOK_BYTES`] of a log.

use std::collections::BTreeSet;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use warden_events::event::Stamped;

use crate::Report;
use crate::regular_file;
use crate::update::Update;

/// The most of one run's `events.jsonl` one look reads; the rest waits
/// for the next look.
const LOOK_BYTES: u64 = 1 << 20;

/// The most looks taken at once when a task has ended (what its runs
/// wrote and was not read yet): a log that keeps growing after its job
/// ended is not read forever.
pub(crate) const LOOKS_AT_THE_END: usize = 1024;

/// The most a `run.json` read back may be.
const MAX_RUN_JSON: u64 = 64 << 20;

/// What the submitting side has read so far of one entry's runs.
#[derive(Debug, Default)]
pub(crate) struct Follow {
    /// The runs whose end has been said, by directory name.
    ended: BTreeSet<String>,
    /// The run being read.
    current: Option<Reading>,
}

#[derive(Debug)]
struct Reading {
    name: String,
    iteration: u32,
    /// How much of `events.jsonl` has been read.
    offset: u64,
    /// The start of a line not yet whole.
    partial: Vec<u8>,
}

impl Follow {
    /// One look at the entry's directory `dir`: the updates for what
    /// appeared since the last look, for entry `entry`. Blocking I/O.
    pub(crate) fn look(&mut self, dir: &Path, entry: usize) -> Vec<Update> {
        let mut updates = Vec::new();
        loop {
            if self.current.is_none() {
                let Some((iteration, attempt, name)) = runs_of(dir)
                    .into_iter()
                    .map(|(iteration, (_, attempt), name)| (iteration, attempt, name))
                    .find(|(_, _, name)| !self.ended.contains(name))
                else {
                    break;
                };
                // Its run.json, written as the run starts, holds its id.
                let run_dir = dir.join(&name);
                let Some(started) = read_report(&run_dir) else {
                    break;
                };
                updates.push(Update::IterationStarted {
                    entry: Some(entry),
                    iteration,
                    attempt,
                    run_dir,
                    run_id: started.run_id,
                });
                self.current = Some(Reading {
                    name,
                    iteration,
                    offset: 0,
                    partial: Vec::new(),
                });
            }
            let Some(reading) = self.current.as_mut() else {
                break;
            };
            let run_dir = dir.join(&reading.name);
            // The final report is looked at before the events: every
            // event is in the file by the time it is written.
            let ended = read_report(&run_dir).filter(|r| r.verdict.is_some());
            let at_end = read_events(&run_dir, reading, entry, &mut updates);
            match ended {
                Some(report) if at_end => {
                    updates.push(Update::IterationFinished {
                        entry: Some(entry),
                        iteration: reading.iteration,
                        report: Box::new(report),
                    });
                    self.ended.insert(reading.name.clone());
                    self.current = None;
                }
                _ => break,
            }
        }
        updates
    }
}

/// The run directories in `dir`, in the order the session made them:
/// (iteration, (0 or the output retry's number plus one, the attempt),
/// name). Anything else there, a link among them, is not a run.
pub(crate) fn runs_of(dir: &Path) -> Vec<(u32, (u32, u32), String)> {
    let Ok(list) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut runs: Vec<(u32, (u32, u32), String)> = list
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let (iteration, retry, attempt) = run_name(&name)?;
            Some((iteration, (retry, attempt), name))
        })
        .collect();
    runs.sort();
    runs
}

/// `iteration-N` → (N, 0, 1); `iteration-N-retry-M` → (N, M + 1, 1);
/// either with `-attempt-K` (a retry of a transient failure, K ≥ 2) →
/// attempt K. The attempts at a run come before its next output retry.
fn run_name(name: &str) -> Option<(u32, u32, u32)> {
    let rest = name.strip_prefix("iteration-")?;
    let number = |s: &str| {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u32>().ok())
            .flatten()
    };
    let (rest, attempt) = match rest.split_once("-attempt-") {
        Some((r, k)) => (r, number(k).filter(|k| *k >= 2)?),
        None => (rest, 1),
    };
    match rest.split_once("-retry-") {
        Some((n, m)) => Some((number(n)?, number(m)?.checked_add(1)?, attempt)),
        None => Some((number(rest)?, 0, attempt)),
    }
}

/// The run's `run.json`, if it is there and whole.
fn read_report(run_dir: &Path) -> Option<Report> {
    let file = regular_file::open_written(&run_dir.join("run.json")).ok()?;
    let mut bytes = Vec::new();
    file.take(MAX_RUN_JSON).read_to_end(&mut bytes).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Reads what was added to the run's `events.jsonl` since the last look
/// (at most [`LOOK_BYTES`]) and says each whole line as an event; a line
/// this warden cannot read is left out (the file keeps it). Whether the
/// end of the file was reached.
fn read_events(
    run_dir: &Path,
    reading: &mut Reading,
    entry: usize,
    updates: &mut Vec<Update>,
) -> bool {
    let Ok(mut file) = regular_file::open_written(&run_dir.join("events.jsonl")) else {
        // Not there yet, or not a file warden wrote: nothing to read.
        return true;
    };
    if file.seek(SeekFrom::Start(reading.offset)).is_err() {
        return true;
    }
    let mut chunk = Vec::new();
    if file
        .by_ref()
        .take(LOOK_BYTES)
        .read_to_end(&mut chunk)
        .is_err()
    {
        return true;
    }
    reading.offset += chunk.len() as u64;
    let at_end = (chunk.len() as u64) < LOOK_BYTES;
    let mut bytes = std::mem::take(&mut reading.partial);
    bytes.extend_from_slice(&chunk);
    let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    for line in bytes[..whole].split(|&b| b == b'\n') {
        if let Ok(event) = serde_json::from_slice::<Stamped>(line) {
            updates.push(Update::Event {
                entry: Some(entry),
                event,
            });
        }
    }
    // A line longer than a look is not kept whole: it is not an event
    // warden writes.
    if bytes.len() - whole < LOOK_BYTES as usize {
        reading.partial = bytes[whole..].to_vec();
    }
    at_end
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_dir(dir: &Path, name: &str) -> std::path::PathBuf {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn run_directories_are_taken_in_the_order_the_session_made_them() {
        assert_eq!(run_name("iteration-2"), Some((2, 0, 1)));
        assert_eq!(run_name("iteration-2-retry-0"), Some((2, 1, 1)));
        assert_eq!(run_name("iteration-2-attempt-3"), Some((2, 0, 3)));
        assert_eq!(run_name("iteration-2-retry-1-attempt-2"), Some((2, 2, 2)));
        for not in [
            "iteration-",
            "iteration-x",
            "iteration-1-retry-",
            "iteration-1-attempt-",
            "iteration-1-attempt-1",
            "iteration-1-attempt-x",
            "iteration-1-attempt-2-retry-1",
            "iter-1",
            "iteration--1",
        ] {
            assert_eq!(run_name(not), None, "{not}");
        }
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "iteration-10",
            "iteration-2-retry-0",
            "iteration-2-attempt-10",
            "iteration-2-retry-0-attempt-2",
            "iteration-2-attempt-2",
            "iteration-2",
            "session.json",
        ] {
            run_dir(dir.path(), name);
        }
        std::os::unix::fs::symlink(
            dir.path().join("iteration-2"),
            dir.path().join("iteration-1"),
        )
        .unwrap();
        let names: Vec<String> = runs_of(dir.path()).into_iter().map(|r| r.2).collect();
        assert_eq!(
            names,
            [
                "iteration-2",
                "iteration-2-attempt-2",
                "iteration-2-attempt-10",
                "iteration-2-retry-0",
                "iteration-2-retry-0-attempt-2",
                "iteration-10"
            ]
        );
    }

    #[test]
    fn events_are_said_a_whole_line_at_a_time_and_a_fifo_is_never_opened() {
        let dir = tempfile::tempdir().unwrap();
        let run = run_dir(dir.path(), "iteration-1");
        let line = |t: u64| {
            format!("{{\"schema_version\":1,\"t_ms\":{t},\"kind\":\"thinking\",\"text\":\"x\"}}\n")
        };
        let first = line(1);
        let second = line(2);
        std::fs::write(
            run.join("events.jsonl"),
            format!("{first}{}", &second[..10]),
        )
        .unwrap();
        let mut reading = Reading {
            name: "iteration-1".into(),
            iteration: 1,
            offset: 0,
            partial: Vec::new(),
        };
        let mut updates = Vec::new();
        assert!(read_events(&run, &mut reading, 3, &mut updates));
        assert_eq!(updates.len(), 1, "{updates:?}");
        assert!(matches!(&updates[0], Update::Event { entry: Some(3), event } if event.t_ms == 1));
        std::fs::write(run.join("events.jsonl"), format!("{first}{second}")).unwrap();
        updates.clear();
        assert!(read_events(&run, &mut reading, 3, &mut updates));
        assert!(
            matches!(&updates[..], [Update::Event { event, .. }] if event.t_ms == 2),
            "{updates:?}"
        );
        // A FIFO planted in the file's place is not opened (it would
        // block the reader).
        std::fs::remove_file(run.join("events.jsonl")).unwrap();
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            run.join("events.jsonl"),
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        updates.clear();
        read_events(&run, &mut reading, 3, &mut updates);
        assert!(updates.is_empty());
    }
}
