//! The run directory: the files that make "output is never lost" true.
//!
//! - `stdout.log`, `stderr.log`: the raw bytes, appended as they arrive,
//!   before anything is decoded;
//! - `events.jsonl`: one JSON object per event, flushed as the run goes;
//! - `run.json`: the report, written when the run starts (verdict `null`)
//!   and again when it ends, always by write-then-rename so a reader never
//!   sees half a file.
//!
//! The directory is new or empty (it holds exactly one run), reached and
//! written through a [`HeldDir`], so nothing the agent plants in it can
//! redirect a write. Each log is hashed as warden writes it; the final
//! `run.json` records the byte count and BLAKE3 digest of every log, so a
//! log changed afterwards is found out (`warden report` checks them).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::mpsc;

use warden_events::event::Stamped;

use crate::held_dir::{DirError, HeldDir, Reserved};
use crate::report::{LogDigest, Report};

/// The logs whose digests `run.json` records, by file name.
pub(crate) const LOGS: [&str; 3] = ["stdout.log", "stderr.log", "events.jsonl"];

/// Disk set aside at the start for the final `run.json`, so the report
/// is still written when the agent's output has filled the disk. A run
/// directory where even this does not fit is refused before the agent
/// starts.
const REPORT_RESERVE: usize = 64 * 1024;

/// A log file that hashes exactly the bytes that reached it.
///
/// The digest is BLAKE3: tamper-evident as SHA-256 is, at a fraction of
/// its cost (on one core it hashes faster than the page cache takes the
/// write). Where warden may use a second CPU, a log that has grown past
/// [`HASH_ON_THREAD_AFTER`] hashes on a thread of its own, so a flood
/// costs the supervisor's thread one copy per write; on one CPU a thread
/// would only add that copy and a wake-up per write, so the hashing stays
/// inline. The hash is always of warden's own copy of the bytes, never
/// read back from the file (which the agent may be able to change).
pub(crate) struct HashedLog {
    file: File,
    hasher: Hashing,
    bytes: u64,
}

/// A log past this size hashes on a thread; a small run never starts one.
const HASH_ON_THREAD_AFTER: u64 = 4 << 20;

/// Writes waiting for the hashing thread; past this the writer waits.
/// With the buffers kept for reuse, at most `HASH_QUEUE + HASH_SPARE`
/// reads' worth of memory (BLAKE3 hashes several times faster than a
/// flood arrives, so a short queue never holds the writer up).
const HASH_QUEUE: usize = 2;
const HASH_SPARE: usize = 1;

/// Whether a log may hash on a thread: only with a second CPU to run it.
fn hash_on_thread() -> bool {
    static SPARE_CPU: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SPARE_CPU.get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1))
}

enum Hashing {
    Inline(Box<blake3::Hasher>),
    Thread(HashThread),
}

enum HashWork {
    Bytes(Vec<u8>),
    Digest(mpsc::SyncSender<blake3::Hash>),
}

struct HashThread {
    work: mpsc::SyncSender<HashWork>,
    /// Buffers the thread is done with, to be filled again.
    spent: mpsc::Receiver<Vec<u8>>,
}

impl HashThread {
    /// Hands `hasher` to a new thread; gives it back if there is none.
    fn start(hasher: Box<blake3::Hasher>) -> Result<Self, Box<blake3::Hasher>> {
        let (work, todo) = mpsc::sync_channel::<HashWork>(HASH_QUEUE);
        let (give_back, spent) = mpsc::sync_channel::<Vec<u8>>(HASH_SPARE);
        let state = std::sync::Arc::new(std::sync::Mutex::new(Some(hasher)));
        let theirs = state.clone();
        let spawned = std::thread::Builder::new()
            .name("warden-log-hash".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                let Some(mut hasher) = theirs.lock().ok().and_then(|mut h| h.take()) else {
                    return;
                };
                for w in todo {
                    match w {
                        HashWork::Bytes(b) => {
                            hasher.update(&b);
                            let _ = give_back.try_send(b);
                        }
                        HashWork::Digest(reply) => {
                            let _ = reply.send(hasher.finalize());
                        }
                    }
                }
            });
        match spawned {
            Ok(_) => Ok(Self { work, spent }),
            Err(_) => Err(state
                .lock()
                .ok()
                .and_then(|mut h| h.take())
                .unwrap_or_default()),
        }
    }

    fn update(&self, data: &[u8]) -> bool {
        let mut buf = self.spent.try_recv().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(data);
        self.work.send(HashWork::Bytes(buf)).is_ok()
    }

    /// The hash so far: waits for the thread to catch up (at most
    /// `HASH_QUEUE` writes).
    fn state(&self) -> Option<blake3::Hash> {
        let (reply, answer) = mpsc::sync_channel(1);
        self.work.send(HashWork::Digest(reply)).ok()?;
        answer.recv().ok()
    }
}

impl HashedLog {
    fn new(file: File) -> Self {
        Self {
            file,
            hasher: Hashing::Inline(Box::default()),
            bytes: 0,
        }
    }

    /// What reached the log so far. A hashing thread that died (it cannot,
    /// short of a panic in BLAKE3) leaves no digest: `warden report` then
    /// says the log cannot be checked.
    pub(crate) fn digest(&self) -> LogDigest {
        let hash = match &self.hasher {
            Hashing::Inline(h) => Some(h.finalize()),
            Hashing::Thread(t) => t.state(),
        };
        LogDigest {
            bytes: self.bytes,
            blake3: hash.map(|h| h.to_hex().to_string()),
            sha256: None,
        }
    }

    fn hash(&mut self, data: &[u8]) {
        if let Hashing::Inline(h) = &mut self.hasher
            && self.bytes > HASH_ON_THREAD_AFTER
            && hash_on_thread()
        {
            let hasher = std::mem::take(h);
            self.hasher = match HashThread::start(hasher) {
                Ok(t) => Hashing::Thread(t),
                Err(hasher) => Hashing::Inline(hasher),
            };
        }
        match &mut self.hasher {
            Hashing::Inline(h) => _ = h.update(data),
            // A thread that is gone leaves `digest` to say so.
            Hashing::Thread(t) => _ = t.update(data),
        }
    }
}

impl Write for HashedLog {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.hash(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

pub(crate) struct RunDir {
    dir: HeldDir,
    pub stdout: HashedLog,
    pub stderr: HashedLog,
    events: BufWriter<HashedLog>,
    /// For the final `run.json`.
    reserved: Option<Reserved>,
    /// The directory's lock, held while the run is going: `warden gc`
    /// never removes a directory whose lock it cannot take. Released by
    /// the kernel if warden dies.
    _in_use: std::os::fd::OwnedFd,
}

impl RunDir {
    /// Creates the run directory, which must be new or empty (and, under a
    /// `.warden` directory, a `.gitignore` so an agent never commits
    /// warden's logs).
    pub(crate) fn create(path: &Path) -> Result<Self, DirError> {
        let dir = HeldDir::create_empty(path)?;
        // Locked before anything is written: until then `warden gc` may
        // take the new directory for an old one it can remove.
        let in_use = dir.claim()?;
        // O_EXCL: the first file claims the directory, so two runs started
        // on the same empty directory at once cannot both use it.
        let open = |name: &str| {
            dir.create_file(name).map(HashedLog::new).map_err(|e| {
                if e.kind() == io::ErrorKind::AlreadyExists {
                    DirError::NotEmpty {
                        path: path.to_path_buf(),
                    }
                } else {
                    DirError::Io {
                        path: path.join(name),
                        source: e,
                    }
                }
            })
        };
        let stdout = open("stdout.log")?;
        let stderr = open("stderr.log")?;
        let events = BufWriter::with_capacity(64 * 1024, open("events.jsonl")?);
        let reserved = dir
            .reserve("run.json", REPORT_RESERVE)
            .map_err(|source| DirError::Io {
                path: path.join("run.json"),
                source,
            })?;
        Ok(Self {
            stdout,
            stderr,
            events,
            reserved: Some(reserved),
            dir,
            _in_use: in_use,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The directory handle, for a report written after the run.
    pub(crate) fn handle(&self) -> HeldDir {
        self.dir.clone()
    }

    pub(crate) fn event(&mut self, e: &Stamped) -> io::Result<()> {
        serde_json::to_writer(&mut self.events, e)?;
        self.events.write_all(b"\n")
    }

    pub(crate) fn flush_events(&mut self) -> io::Result<()> {
        self.events.flush()
    }

    /// What has reached each log so far (`events.jsonl`: what left the
    /// buffer; flush first).
    pub(crate) fn digests(&self) -> BTreeMap<String, LogDigest> {
        [
            (LOGS[0], self.stdout.digest()),
            (LOGS[1], self.stderr.digest()),
            (LOGS[2], self.events.get_ref().digest()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// Says (and forgets it) if the space set aside for the final report
    /// was tampered with during the run; the report is then written anew.
    pub(crate) fn check_reserved(&mut self) -> Option<String> {
        if self.reserved.as_ref().is_some_and(|r| !r.is_intact()) {
            self.reserved = None;
            return Some(
                "the space set aside for run.json was removed or replaced during the run".into(),
            );
        }
        None
    }

    /// Writes the final `run.json`, into the space set aside for it.
    pub(crate) fn write_final_report(&mut self, report: &Report) -> io::Result<()> {
        let mut bytes = serde_json::to_vec_pretty(report)?;
        bytes.push(b'\n');
        match self.reserved.take() {
            // Written where the space was set aside; if that fails (it was
            // tampered with, say), a fresh file may still do.
            Some(r) => r
                .write(&bytes)
                .or_else(|_| self.dir.write_atomic("run.json", &bytes)),
            None => self.dir.write_atomic("run.json", &bytes),
        }
    }
}

/// Writes `run.json` in `dir` atomically.
/// Writes the first `run.json` of a run (verdict `null`) in `dir`, unless
/// a later one is there already: written off the supervisor's thread, it
/// may land after a report of the run's end (the fallback of a supervisor
/// that failed), which it must never replace.
pub(crate) fn write_first_report(dir: &HeldDir, report: &Report) -> io::Result<()> {
    let mut bytes = serde_json::to_vec_pretty(report)?;
    bytes.push(b'\n');
    dir.write_if_absent("run.json", &bytes)
}

pub(crate) fn write_report(dir: &HeldDir, report: &Report) -> io::Result<()> {
    let mut bytes = serde_json::to_vec_pretty(report)?;
    bytes.push(b'\n');
    dir.write_atomic("run.json", &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b3(bytes: &[u8]) -> String {
        blake3::hash(bytes).to_hex().to_string()
    }

    #[test]
    fn the_digest_is_the_blake3_of_what_was_written() {
        let t = tempfile::tempdir().unwrap();
        let mut d = RunDir::create(&t.path().join("run")).unwrap();
        d.stdout.write_all(b"abc").unwrap();
        let got = d.digests();
        assert_eq!(got["stdout.log"].bytes, 3);
        // BLAKE3("abc"), as `b3sum` and the reference implementation say.
        assert_eq!(
            got["stdout.log"].blake3.as_deref(),
            Some("6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85")
        );
        assert_eq!(got["stdout.log"].sha256, None);
        assert_eq!(got["stderr.log"].bytes, 0);
    }

    #[test]
    fn a_log_hashed_on_its_own_thread_has_the_digest_of_what_was_written() {
        let t = tempfile::tempdir().unwrap();
        let mut d = RunDir::create(&t.path().join("run")).unwrap();
        let mut all = Vec::new();
        for i in 0..200u32 {
            let chunk: Vec<u8> = (0..64 * 1024 + i).map(|j| (j * 7 + i) as u8).collect();
            d.stdout.write_all(&chunk).unwrap();
            all.extend_from_slice(&chunk);
            if i == 100 {
                // Asked midway, it is the digest of what was written so far.
                let got = d.digests();
                assert_eq!(got["stdout.log"].bytes, all.len() as u64);
                assert_eq!(got["stdout.log"].blake3, Some(b3(&all)));
            }
        }
        assert_eq!(
            matches!(d.stdout.hasher, Hashing::Thread(_)),
            hash_on_thread()
        );
        let got = d.digests();
        assert_eq!(got["stdout.log"].bytes, all.len() as u64);
        assert_eq!(got["stdout.log"].blake3, Some(b3(&all)));
        assert_eq!(std::fs::read(t.path().join("run/stdout.log")).unwrap(), all);
    }

    #[test]
    fn a_second_run_in_the_same_directory_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let _first = RunDir::create(&t.path().join("run")).unwrap();
        let err = RunDir::create(&t.path().join("run")).err().unwrap();
        assert!(matches!(err, DirError::NotEmpty { .. }), "{err}");
    }
}
