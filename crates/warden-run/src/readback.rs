//! Reading a finished (or unfinished) run back from its directory: the
//! report (`run.json`, or a session's `session.json` and each of its
//! runs', or a batch's `batch.json` and each of its entries'), the events, the check of each log against the digest warden
//! recorded, and the lines a `lines` event stands for.
//!
//! A session's runs and a batch's entries are found under the directory
//! given, by the last name of each directory recorded, never at the
//! absolute paths recorded: a moved or copied directory reads as itself,
//! and nothing outside it is read. What is not there is missing
//! ([`MissingRun`]), not an error.
//!
//! Every file is read as warden's own type (`run.json` as a [`Report`],
//! `session.json` as a [`SessionReport`], each `events.jsonl` line as a
//! [`Stamped`] event), so a field renamed or retyped is an error that names
//! the file, never a view that silently shows nothing. Every file is
//! opened as warden opens any file the agent could have touched
//! ([`crate::regular_file::open_written`]): never through a link, never a
//! FIFO or a device. The parsing is pure and apart from the reads
//! ([`parse_as`], [`parse_events`], [`events_line`], [`check_digests`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use warden_events::SCHEMA_VERSION;
use warden_events::event::Stamped;

use crate::Report;
use crate::batch_report::BatchReport;
use crate::regular_file::open_written;
use crate::report::LogDigest;
use crate::session::SessionReport;

/// Why a report file of a run or session could not be read as one.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("could not read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not valid JSON: {source}", path.display())]
    NotJson {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// Valid JSON, but not the type: a field missing or of another type,
    /// or a document of another format version.
    #[error(
        "{} is not a {what} of this warden, which reads schema_version {SCHEMA_VERSION}: {source}",
        path.display()
    )]
    NotReport {
        path: PathBuf,
        what: &'static str,
        source: serde_json::Error,
    },
    /// The directory holds no report of a run, a session or a batch.
    #[error(
        "{} has no run.json, session.json or batch.json: name a run directory (.warden/runs/<id>), a session directory or a batch directory",
        dir.display()
    )]
    NoRecord { dir: PathBuf },
}

/// The whole text of a file warden wrote.
fn read_text(path: &Path) -> std::io::Result<String> {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut open_written(path)?, &mut text)?;
    Ok(text)
}

/// `text`, the contents of `path`, as warden's type `T` (`what` names it
/// in errors).
pub fn parse_as<T: DeserializeOwned>(
    text: &str,
    path: &Path,
    what: &'static str,
) -> Result<T, ReadError> {
    serde_json::from_str(text).map_err(|source| {
        let path = path.into();
        if source.is_data() {
            ReadError::NotReport { path, what, source }
        } else {
            ReadError::NotJson { path, source }
        }
    })
}

/// Reads `path` as warden's type `T` (`what` names it in errors).
pub fn read_as<T: DeserializeOwned>(path: &Path, what: &'static str) -> Result<T, ReadError> {
    let text = read_text(path).map_err(|source| ReadError::Io {
        path: path.into(),
        source,
    })?;
    parse_as(&text, path, what)
}

/// A run's `run.json`.
pub fn read_report(run_dir: &Path) -> Result<Report, ReadError> {
    read_as(&run_dir.join("run.json"), "run report")
}

/// What a directory records: one run, or a session and its runs.
#[derive(Debug)]
pub struct Record {
    /// `session.json`, for a session directory.
    pub session: Option<SessionReport>,
    /// Each run read: its directory and report, in the order they ran.
    pub runs: Vec<ReadRun>,
    /// The runs `session.json` lists that are not there to be read, in
    /// its order.
    pub missing: Vec<MissingRun>,
    /// For a batch entry: why its directory is not there, if so (every
    /// run it lists is then in `missing`).
    pub gone: Option<String>,
}

/// A run read back.
#[derive(Debug, Clone)]
pub struct ReadRun {
    /// Its directory, under the directory given to the reader.
    pub dir: PathBuf,
    pub report: Report,
    /// Its place in `session.json`'s runs (0 for a lone run).
    pub index: usize,
}

/// A run `session.json` lists that is not there: its directory was
/// deleted or never copied, or it has no `run.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingRun {
    /// Its place in `session.json`'s runs.
    pub index: usize,
    /// The directory `session.json` recorded (where the run was then).
    pub recorded: PathBuf,
    /// Where it was looked for: the recorded directory's name under the
    /// session's directory; `None` when that name is refused.
    pub dir: Option<PathBuf>,
    /// Why it is missing, as a sentence.
    pub why: String,
}

/// What a batch directory records: `batch.json`, and for each of its
/// entries (in its order) the entry's session and runs, or `None` for an
/// entry whose session never started (`batch.json` says why).
#[derive(Debug)]
pub struct BatchRecord {
    pub batch: BatchReport,
    pub entries: Vec<Option<Record>>,
}

impl Record {
    /// Whether a run it lists, or its directory, is not there.
    pub fn incomplete(&self) -> bool {
        !self.missing.is_empty() || self.gone.is_some()
    }
}

impl BatchRecord {
    /// Whether an entry, or a run of one, is not there.
    pub fn incomplete(&self) -> bool {
        self.entries.iter().flatten().any(Record::incomplete)
    }
}

/// What a directory given to `warden report` records.
#[derive(Debug)]
pub enum Recorded {
    /// A run, or a session and its runs.
    Runs(Box<Record>),
    /// A batch and each entry's session and runs.
    Batch(Box<BatchRecord>),
}

/// The one plain name that ends `recorded`, a directory a report
/// recorded: a name that would lead elsewhere (`..`, `/`, an empty path)
/// is refused.
fn last_name(recorded: &Path) -> Result<&std::ffi::OsStr, String> {
    match recorded.components().next_back() {
        Some(std::path::Component::Normal(name)) => Ok(name),
        _ => Err(format!(
            "its recorded directory `{}` does not end in a directory name, so it is not read",
            recorded.display()
        )),
    }
}

/// Where a directory a report recorded is looked for, and why it is not
/// there when it is not.
struct NotThere {
    /// `None` when its name is refused.
    dir: Option<PathBuf>,
    why: String,
}

/// The directory named like `recorded` (its last component) in `parent`:
/// a report's directories are found under the directory given, wherever
/// they were when it was written, and never anywhere else. A link there
/// is not followed.
fn dir_in(parent: &Path, recorded: &Path) -> Result<PathBuf, NotThere> {
    let name = last_name(recorded).map_err(|why| NotThere { dir: None, why })?;
    let dir = parent.join(name);
    let why = match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.is_dir() => return Ok(dir),
        Ok(m) if m.file_type().is_symlink() => format!(
            "{} is a link, not a directory: it is not followed",
            dir.display()
        ),
        Ok(_) => format!("{} is not a directory", dir.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            format!("{} is not there", dir.display())
        }
        Err(e) => format!("{} cannot be read: {e}", dir.display()),
    };
    Err(NotThere {
        dir: Some(dir),
        why,
    })
}

/// Reads every report of a run directory, or of a session directory with
/// one run per iteration (each found under `dir` by its directory's name:
/// a run not there is [`Record::missing`]); the first that is there and
/// cannot be read is the error.
pub fn read_record(dir: &Path) -> Result<Record, ReadError> {
    let session: Option<SessionReport> = if dir.join("run.json").exists() {
        None
    } else if dir.join("session.json").exists() {
        Some(read_as(&dir.join("session.json"), "session report")?)
    } else {
        return Err(ReadError::NoRecord { dir: dir.into() });
    };
    match session {
        Some(s) => read_session(dir, s),
        None => Ok(Record {
            session: None,
            runs: vec![ReadRun {
                dir: dir.to_path_buf(),
                report: read_report(dir)?,
                index: 0,
            }],
            missing: Vec::new(),
            gone: None,
        }),
    }
}

/// Each run of the session `s`, whose directory is `dir`: found there by
/// its directory's name, or missing.
fn read_session(dir: &Path, s: SessionReport) -> Result<Record, ReadError> {
    let mut runs = Vec::new();
    let mut missing = Vec::new();
    for (index, r) in s.runs.iter().enumerate() {
        let missed = |dir: Option<PathBuf>, why: String| MissingRun {
            index,
            recorded: r.run_dir.clone(),
            dir,
            why,
        };
        match dir_in(dir, &r.run_dir) {
            Ok(d) => match read_report(&d) {
                Ok(report) => runs.push(ReadRun {
                    dir: d,
                    report,
                    index,
                }),
                Err(ReadError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound =>
                {
                    let why = format!("{} has no run.json", d.display());
                    missing.push(missed(Some(d), why));
                }
                Err(e) => return Err(e),
            },
            Err(NotThere { dir, why }) => missing.push(missed(dir, why)),
        }
    }
    Ok(Record {
        session: Some(s),
        runs,
        missing,
        gone: None,
    })
}

/// Reads a run, session or batch directory ([`read_record`] for the
/// first two). A batch's entries are read from the session reports
/// `batch.json` holds, each entry's runs found under the batch directory
/// by the names of the entry's and the run's directories (an entry or a
/// run not there is missing); the first that is there and cannot be
/// read is the error.
pub fn read_any(dir: &Path) -> Result<Recorded, ReadError> {
    if dir.join("run.json").exists() || !dir.join("batch.json").exists() {
        return read_record(dir).map(|r| Recorded::Runs(Box::new(r)));
    }
    let batch: BatchReport = read_as(&dir.join("batch.json"), "batch report")?;
    let mut entries = Vec::with_capacity(batch.runs.len());
    for entry in &batch.runs {
        entries.push(match &entry.session {
            Some(s) => Some(match dir_in(dir, &s.session_dir) {
                Ok(entry_dir) => read_session(&entry_dir, s.clone())?,
                Err(not_there) => gone_entry(s, not_there),
            }),
            None => None,
        });
    }
    Ok(Recorded::Batch(Box::new(BatchRecord { batch, entries })))
}

/// An entry whose directory is not there: every run it lists missing.
fn gone_entry(s: &SessionReport, entry: NotThere) -> Record {
    let missing = s
        .runs
        .iter()
        .enumerate()
        .map(|(index, r)| MissingRun {
            index,
            recorded: r.run_dir.clone(),
            dir: entry
                .dir
                .as_ref()
                .and_then(|d| last_name(&r.run_dir).ok().map(|n| d.join(n))),
            why: format!("the entry's directory is missing: {}", entry.why),
        })
        .collect();
    Record {
        session: Some(s.clone()),
        runs: Vec::new(),
        missing,
        gone: Some(entry.why),
    }
}

/// The events of `events.jsonl`'s text this warden can read. A line that
/// is not one (cut short by a warden killed mid-write, or not an event at
/// all) is left out.
pub fn parse_events(text: &str) -> Vec<Stamped> {
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The events of a run this warden can read ([`parse_events`]); none when
/// `events.jsonl` cannot be read: a view says what `run.json` says, and
/// draws what the events it can read say.
pub fn read_events(run_dir: &Path) -> Vec<Stamped> {
    parse_events(&read_text(&run_dir.join("events.jsonl")).unwrap_or_default())
}

/// The hash a log's digest in `run.json` was made with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogHash {
    /// What warden records.
    Blake3,
    /// What earlier versions recorded; still checked.
    Sha256,
}

impl LogHash {
    pub fn as_str(self) -> &'static str {
        match self {
            LogHash::Blake3 => "blake3",
            LogHash::Sha256 => "sha256",
        }
    }
}

/// The byte count and digest (lowercase hex) of a file, read in pieces.
pub fn digest_of(path: &Path, hash: LogHash) -> std::io::Result<(u64, String)> {
    use sha2::Digest;
    use std::io::Read;
    enum Hasher {
        Blake3(Box<blake3::Hasher>),
        Sha256(sha2::Sha256),
    }
    let mut f = open_written(path)?;
    let mut hasher = match hash {
        LogHash::Blake3 => Hasher::Blake3(Box::default()),
        LogHash::Sha256 => Hasher::Sha256(sha2::Sha256::new()),
    };
    let mut buf = vec![0u8; 256 * 1024];
    let mut bytes = 0u64;
    loop {
        let n = match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        match &mut hasher {
            Hasher::Blake3(h) => _ = h.update(&buf[..n]),
            Hasher::Sha256(h) => h.update(&buf[..n]),
        }
        bytes += n as u64;
    }
    let hex = match hasher {
        Hasher::Blake3(h) => h.finalize().to_hex().to_string(),
        Hasher::Sha256(h) => h.finalize().iter().map(|b| format!("{b:02x}")).collect(),
    };
    Ok((bytes, hex))
}

/// What the check of a run's logs found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LogCheck {
    /// Logs that no longer are what warden wrote: one sentence each.
    pub changed: Vec<String>,
    /// Why the logs could not be checked at all, if so.
    pub unchecked: Option<String>,
}

impl LogCheck {
    /// Every log was checked and is as warden wrote it.
    pub fn matches(&self) -> bool {
        self.unchecked.is_none() && self.changed.is_empty()
    }
}

/// Checks each log of `report` against the byte count and digest that it
/// recorded when warden finished writing it; `digest` gives a log's
/// current ones by its file name (only a plain file name of the run
/// directory is asked for) and the hash its record was made with.
pub fn check_digests(
    report: &Report,
    mut digest: impl FnMut(&str, LogHash) -> std::io::Result<(u64, String)>,
) -> LogCheck {
    let mut check = LogCheck::default();
    let Some(logs) = &report.logs else {
        check.unchecked = Some(if report.verdict.is_none() {
            "the run is unfinished, so its logs have no recorded digests to check".into()
        } else {
            "run.json records no digests of the logs, so they cannot be checked".into()
        });
        return check;
    };
    check.changed = changed_logs(logs, &mut digest);
    check
}

fn changed_logs(
    logs: &BTreeMap<String, LogDigest>,
    digest: &mut impl FnMut(&str, LogHash) -> std::io::Result<(u64, String)>,
) -> Vec<String> {
    let mut changed = Vec::new();
    for (name, want) in logs {
        // Only a plain file name: run.json must not send the check
        // elsewhere.
        if name.contains('/') || name == ".." || name == "." {
            changed.push(format!("`{name}`: not a file of the run directory"));
            continue;
        }
        // BLAKE3 when recorded (a record with both is checked against the
        // one warden writes now).
        let recorded = match (&want.blake3, &want.sha256) {
            (Some(h), _) => Some((LogHash::Blake3, h)),
            (None, Some(h)) => Some((LogHash::Sha256, h)),
            (None, None) => None,
        };
        let Some((hash, recorded)) = recorded else {
            changed.push(format!(
                "{name}: run.json records no digest of it, so it cannot be checked"
            ));
            continue;
        };
        let bytes = want.bytes;
        let short = |h: &str| h.get(..16).unwrap_or(h).to_string();
        match digest(name, hash) {
            Ok((n, got)) if n == bytes && got == *recorded => {}
            Ok((n, got)) => changed.push(format!(
                "{name} no longer matches what warden wrote: warden wrote {bytes} bytes ({} {}), the file now has {n} bytes ({} {})",
                hash.as_str(),
                short(recorded),
                hash.as_str(),
                short(&got)
            )),
            Err(e) => changed.push(format!(
                "{name} can no longer be read as warden wrote it: {e}"
            )),
        }
    }
    changed
}

/// Checks each log of the run in `run_dir` against its recorded digest.
pub fn check_logs(run_dir: &Path, report: &Report) -> LogCheck {
    check_digests(report, |name, hash| digest_of(&run_dir.join(name), hash))
}

/// What a line of `events.jsonl` is to a reader that copies the lines and
/// reads back the lines a `lines` event stands for.
#[derive(Debug)]
pub enum EventsLine {
    /// A `lines` event (an error when it is not one this warden reads);
    /// boxed, as an event is large and most lines are copied.
    Lines(Box<Result<Stamped, serde_json::Error>>),
    /// Any other line, to be copied byte for byte; `true`: an object with
    /// fields and no `run_id`, which can be named with its run by
    /// splicing `"run_id":…,` before its own fields.
    Copy(bool),
}

/// Whether a field is there at all, even as `null`.
#[derive(Default)]
struct Present(bool);

impl<'de> serde::Deserialize<'de> for Present {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d).map(|_| Present(true))
    }
}

/// The two fields read of every line: only a `lines` event is read whole,
/// so the copy of the others costs one light pass.
#[derive(serde::Deserialize)]
struct LineHead<'a> {
    #[serde(borrow)]
    kind: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    run_id: Present,
}

/// What the line `line` of `events.jsonl` is.
pub fn events_line(line: &[u8]) -> EventsLine {
    // Only an object is an event, or can be named: `{"run_id":…,` is
    // spliced before its own fields.
    if line.first() != Some(&b'{') {
        return EventsLine::Copy(false);
    }
    match serde_json::from_slice::<LineHead>(line) {
        Ok(h) if h.kind.as_deref() == Some("lines") => {
            EventsLine::Lines(Box::new(serde_json::from_slice(line)))
        }
        // An object with a kind has a field: the splice leaves it valid.
        Ok(h) if h.kind.is_some() => EventsLine::Copy(!h.run_id.0),
        // No kind, or one that is not a string, or a field twice: named
        // when it is an object with fields and no `run_id`.
        _ => EventsLine::Copy(
            serde_json::from_slice::<std::collections::HashMap<String, serde::de::IgnoredAny>>(
                line,
            )
            .is_ok_and(|m| !m.is_empty() && !m.contains_key("run_id")),
        ),
    }
}

/// One line of a run's events as [`read_event_lines`] gives it.
#[derive(Debug)]
pub enum EventLine<'a> {
    /// An event a `lines` event stood for, read back from its log.
    Expanded(&'a Stamped),
    /// A line as `events.jsonl` has it ([`EventsLine::Copy`] says what
    /// `named` is).
    Copied { line: &'a [u8], named: bool },
    /// The lines a `lines` event stands for could not be read back: the
    /// record is not what warden wrote.
    Broken(String),
}

/// Reads the events of the run in `run_dir` line by line, in order, with
/// each `lines` event turned back into the line events it stands for;
/// `each` says whether to go on (a reader that went away stops it).
/// Memory stays bounded whatever the file holds.
pub fn read_event_lines(
    run_dir: &Path,
    mut each: impl FnMut(EventLine<'_>) -> bool,
) -> Result<(), ReadError> {
    use std::io::BufRead;
    let path = run_dir.join("events.jsonl");
    let io = |source| ReadError::Io {
        path: path.clone(),
        source,
    };
    let file = open_written(&path).map_err(io)?;
    let mut logs = crate::logged_lines::Logs::new(run_dir);
    for line in std::io::BufReader::new(file).split(b'\n') {
        let line = line.map_err(io)?;
        let go_on = match events_line(&line) {
            EventsLine::Lines(l) => match *l {
                Ok(e) => {
                    let mut go_on = true;
                    let r = logs.expand(&e, |s| {
                        if go_on {
                            go_on = each(EventLine::Expanded(s));
                        }
                    });
                    match r {
                        Ok(()) => go_on,
                        Err(e) => go_on && each(EventLine::Broken(e.to_string())),
                    }
                }
                Err(e) => each(EventLine::Broken(format!(
                    "a `lines` event of events.jsonl is not one this warden reads, so the lines it stands for cannot be read back: {e}"
                ))),
            },
            EventsLine::Copy(named) => each(EventLine::Copied { line: &line, named }),
        };
        if !go_on {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(bytes: u64, hash: &str) -> LogDigest {
        serde_json::from_value(serde_json::json!({"bytes": bytes, "blake3": hash}))
            .expect("a digest")
    }

    #[test]
    fn a_log_that_changed_or_is_no_file_of_the_run_is_named() {
        let mut r = crate::report::sample();
        assert_eq!(
            check_digests(&r, |_, _| unreachable!())
                .unchecked
                .as_deref(),
            Some("the run is unfinished, so its logs have no recorded digests to check")
        );
        r.verdict = Some(crate::Verdict::Succeeded);
        r.logs = Some(BTreeMap::from([
            ("stdout.log".to_string(), digest(3, &"a".repeat(64))),
            ("stderr.log".to_string(), digest(0, &"b".repeat(64))),
            ("../run.json".to_string(), digest(0, "c")),
        ]));
        let mut asked = Vec::new();
        let check = check_digests(&r, |name, hash| {
            assert_eq!(hash, LogHash::Blake3);
            asked.push(name.to_string());
            match name {
                "stdout.log" => Ok((3, "a".repeat(64))),
                _ => Ok((5, "d".repeat(64))),
            }
        });
        assert_eq!(asked, ["stderr.log", "stdout.log"], "never the path");
        assert!(!check.matches());
        assert_eq!(
            check.changed,
            [
                "`../run.json`: not a file of the run directory".to_string(),
                format!(
                    "stderr.log no longer matches what warden wrote: warden wrote 0 bytes (blake3 {}), the file now has 5 bytes (blake3 {})",
                    "b".repeat(16),
                    "d".repeat(16)
                ),
            ]
        );
    }

    #[test]
    fn an_earlier_runs_sha256_is_checked_as_sha256_and_no_digest_is_named() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("stdout.log"), b"abc").unwrap();
        std::fs::write(t.path().join("stderr.log"), b"").unwrap();
        let mut r = crate::report::sample();
        r.verdict = Some(crate::Verdict::Succeeded);
        let old = |bytes: u64, sha: &str| -> LogDigest {
            serde_json::from_value(serde_json::json!({"bytes": bytes, "sha256": sha})).unwrap()
        };
        // SHA-256("abc"): the record of a run from before BLAKE3.
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        r.logs = Some(BTreeMap::from([("stdout.log".to_string(), old(3, abc))]));
        assert!(check_logs(t.path(), &r).matches());
        assert_eq!(
            digest_of(&t.path().join("stdout.log"), LogHash::Blake3).unwrap(),
            (
                3,
                "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85".to_string()
            )
        );
        r.logs = Some(BTreeMap::from([
            ("stdout.log".to_string(), old(3, &"0".repeat(64))),
            (
                "stderr.log".to_string(),
                serde_json::from_value(serde_json::json!({"bytes": 0, "blake3": null})).unwrap(),
            ),
        ]));
        let check = check_logs(t.path(), &r);
        assert_eq!(
            check.changed,
            [
                "stderr.log: run.json records no digest of it, so it cannot be checked".to_string(),
                format!(
                    "stdout.log no longer matches what warden wrote: warden wrote 3 bytes (sha256 {}), the file now has 3 bytes (sha256 {})",
                    "0".repeat(16),
                    &abc[..16]
                ),
            ]
        );
    }

    #[test]
    fn only_a_plain_last_name_of_a_recorded_directory_is_taken() {
        let name = |p: &str| last_name(Path::new(p)).map(|n| n.to_string_lossy().into_owned());
        assert_eq!(name("/old/batch/two").as_deref(), Ok("two"));
        assert_eq!(name("/old/s/iteration-1/.").as_deref(), Ok("iteration-1"));
        assert_eq!(name("iteration-2").as_deref(), Ok("iteration-2"));
        for refused in ["/etc/..", "..", "/", ""] {
            assert!(name(refused).is_err(), "{refused:?} is refused");
        }
    }

    #[test]
    fn a_file_that_is_no_report_is_told_from_one_that_is_no_json() {
        let path = Path::new("/r/run.json");
        let e = parse_as::<Report>("{", path, "run report").unwrap_err();
        assert!(matches!(e, ReadError::NotJson { .. }), "{e}");
        let e = parse_as::<Report>("{}", path, "run report").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("/r/run.json is not a run report of this warden"),
            "{e}"
        );
    }

    #[test]
    fn only_readable_events_are_kept_and_lines_are_told_apart() {
        let text =
            "{\"schema_version\":1,\"t_ms\":5,\"kind\":\"completion_signal\"}\n{\"t_ms\":\ncut";
        let events = parse_events(text);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].t_ms, 5);
        assert!(matches!(
            events_line(br#"{"kind":"lines","t_ms":1}"#),
            EventsLine::Lines(l) if l.is_err()
        ));
        assert!(matches!(
            events_line(br#"{"kind":"text","text":"x"}"#),
            EventsLine::Copy(true)
        ));
        assert!(matches!(
            events_line(br#"{"kind":"text","run_id":null}"#),
            EventsLine::Copy(false)
        ));
        assert!(matches!(events_line(b"{}"), EventsLine::Copy(false)));
        assert!(matches!(events_line(b"[1]"), EventsLine::Copy(false)));
    }
}
