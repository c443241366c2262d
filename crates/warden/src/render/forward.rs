//! The command's own output, passed on as it is, so that warden stands in
//! a pipeline where the command would (`warden run exec -- cmd | jq`,
//! `> file`): an `exec` command's stdout goes to warden's stdout and its
//! stderr to warden's stderr, byte for byte, and an agent CLI's final
//! answer goes to stdout when its run ends (as `claude -p` prints it).
//!
//! The bytes are read back from the run's logs (`stdout.log`,
//! `stderr.log`), which the supervisor writes as it reads the pipes: a
//! reader of warden's stdout that is slow, or stops, never holds up the
//! supervisor or its clocks, and nothing is lost (the log has it all). A
//! thread per stream follows its log and queues what it reads on the
//! console, waiting for room as long as the reader takes something; the
//! end of each run waits until everything is passed on.
//!
//! Where warden draws its live status line on a terminal, the lines of
//! that terminal's streams are shown in the view instead (`out|`, `err|`),
//! and `--json` keeps stdout for the events. Under GitHub Actions, whose
//! log runs workflow commands, a line that would be one is made inert as
//! in warden's own lines (the one change to the bytes).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use warden_events::Agent;
use warden_run::{Canceller, Report};

use super::console::{self, Passed, Stream, important};

/// How long a reader may take nothing before the rest is left in the log.
pub(crate) const READER_STUCK: Duration = Duration::from_secs(10);
/// How often a follower looks at its log when nothing pokes it.
const LOOK_EVERY: Duration = Duration::from_millis(20);
/// What a follower reads at once.
const CHUNK: usize = 64 * 1024;

/// Which of the command's output is passed on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Passthrough {
    /// An `exec` command's stdout, to warden's stdout.
    pub stdout: bool,
    /// An `exec` command's stderr, to warden's stderr.
    pub stderr: bool,
    /// An agent CLI's final answer, to warden's stdout.
    pub answer: bool,
    /// Workflow commands made inert (under GitHub Actions).
    github: bool,
}

impl Passthrough {
    /// What is passed on for a run of `agent`: each stream, unless it is
    /// the terminal the live view is drawn on (`live`), and stdout unless
    /// it holds `--json`'s events.
    pub(crate) fn decide(agent: Agent, json: bool, live: bool) -> Self {
        let stdout_on_live = live && stdout_is_stderrs_terminal();
        let exec = agent == Agent::Exec;
        Self {
            stdout: exec && !json && !stdout_on_live,
            stderr: exec && !live,
            answer: !exec && !json && !stdout_on_live,
            github: super::github::GitHub::from_env().is_some(),
        }
    }
}

/// Whether stdout is the very terminal stderr is.
fn stdout_is_stderrs_terminal() -> bool {
    use std::io::IsTerminal;
    let (out, err) = (std::io::stdout(), std::io::stderr());
    if !(out.is_terminal() && err.is_terminal()) {
        return false;
    }
    match (rustix::fs::fstat(&out), rustix::fs::fstat(&err)) {
        (Ok(a), Ok(b)) => a.st_rdev == b.st_rdev,
        _ => true,
    }
}

/// What the runs' loop tells a follower.
#[derive(Default)]
struct Shared {
    /// The run has ended: its logs are whole.
    ended: Mutex<bool>,
    poke: Condvar,
}

/// How a follower ended.
struct Followed {
    passed: u64,
    /// `Some` when it stopped before the end of its log: why.
    stopped: Option<Passed>,
}

/// One run's followers.
struct Current {
    run_dir: PathBuf,
    shared: Arc<Shared>,
    threads: Vec<(Stream, JoinHandle<Followed>)>,
}

/// Passes the command's output on, run after run.
pub(crate) struct Forward {
    pass: Passthrough,
    current: Option<Current>,
    /// Stops the run (or session) when the reader of warden's stdout has
    /// gone: its output has nowhere to go, and in a pipeline `SIGPIPE`
    /// would have stopped the command.
    stop: Option<Canceller>,
    /// Said once.
    reader_gone: Arc<AtomicBool>,
}

impl Forward {
    /// `stop` ends what runs when the reader of stdout goes.
    pub(crate) fn new(pass: Passthrough, stop: Canceller) -> Self {
        Self {
            pass,
            current: None,
            stop: Some(stop),
            reader_gone: Arc::default(),
        }
    }

    /// A run started, its logs in `run_dir`: follows them.
    pub(crate) fn started(&mut self, run_dir: &Path) {
        let shared = Arc::new(Shared::default());
        let mut threads = Vec::new();
        for (on, stream, file) in [
            (self.pass.stdout, Stream::Stdout, "stdout.log"),
            (self.pass.stderr, Stream::Stderr, "stderr.log"),
        ] {
            if !on {
                continue;
            }
            let path = run_dir.join(file);
            let shared = shared.clone();
            let gone = Gone {
                said: self.reader_gone.clone(),
                stop: self.stop.clone(),
            };
            let github = self.pass.github;
            let spawned = std::thread::Builder::new()
                .name(format!("warden-pass-{}", file.trim_end_matches(".log")))
                .spawn(move || follow(&path, stream, &shared, github, &gone));
            match spawned {
                Ok(t) => threads.push((stream, t)),
                Err(e) => important(&format!(
                    "warden: warning: the command's {} is not passed on (no thread: {e}); {} has it",
                    file.trim_end_matches(".log"),
                    run_dir.join(file).display()
                )),
            }
        }
        self.current = Some(Current {
            run_dir: run_dir.to_path_buf(),
            shared,
            threads,
        });
    }

    /// The run said something: its logs may have grown.
    pub(crate) fn poke(&self) {
        if let Some(c) = &self.current {
            c.shared.poke.notify_all();
        }
    }

    /// The run ended with `report`: what is left of its logs is passed on
    /// (waiting while the reader takes it), then an agent's final answer.
    pub(crate) fn finished(&mut self, report: &Report) {
        if let Some(c) = self.current.take() {
            *c.shared.ended.lock().unwrap_or_else(|p| p.into_inner()) = true;
            c.shared.poke.notify_all();
            for (stream, thread) in c.threads {
                let Ok(followed) = thread.join() else {
                    continue;
                };
                if followed.stopped == Some(Passed::Stuck) {
                    let name = match stream {
                        Stream::Stdout => "stdout",
                        Stream::Stderr => "stderr",
                    };
                    important(&format!(
                        "warden: warning: the reader of warden's {name} took nothing for {}: the command's {name} was passed on up to byte {} only; {} has it all",
                        humantime::format_duration(READER_STUCK),
                        followed.passed,
                        c.run_dir.join(format!("{name}.log")).display()
                    ));
                }
            }
        }
        if self.pass.answer
            && let Some(text) = report.reported.final_text.as_deref()
            && !text.is_empty()
        {
            let mut bytes = text.as_bytes().to_vec();
            if !bytes.ends_with(b"\n") {
                bytes.push(b'\n');
            }
            if self.pass.github {
                let mut inert = Inert::default();
                let mut out = Vec::with_capacity(bytes.len() + 8);
                inert.push(&bytes, &mut out);
                inert.finish(&mut out);
                bytes = out;
            }
            let _ = console::pass_on(Stream::Stdout, bytes, READER_STUCK);
        }
    }
}

/// What a follower does when the reader of stdout has gone.
struct Gone {
    said: Arc<AtomicBool>,
    stop: Option<Canceller>,
}

impl Gone {
    fn now(&self) {
        if self.said.swap(true, Ordering::Relaxed) {
            return;
        }
        important(
            "warden: the reader of warden's stdout went away (a closed pipe): stopping the run, as SIGPIPE would stop the command",
        );
        if let Some(stop) = &self.stop {
            stop.cancel_because(READER_GONE);
        }
    }
}

/// Why a run stops when nothing reads its output any more.
const READER_GONE: &str = "because the reader of warden's stdout went away (a closed pipe), as SIGPIPE would stop the command";

/// Follows the log at `path` until the run has ended and all of it is
/// passed on to `stream`, or the stream's reader has gone or is stuck.
fn follow(path: &Path, stream: Stream, shared: &Shared, github: bool, gone: &Gone) -> Followed {
    let mut followed = Followed {
        passed: 0,
        stopped: None,
    };
    let mut file = None;
    let mut inert = github.then(Inert::default);
    let mut buf = vec![0; CHUNK];
    let pass = |bytes: Vec<u8>, followed: &mut Followed| -> bool {
        let n = bytes.len() as u64;
        match console::pass_on(stream, bytes, READER_STUCK) {
            Passed::Yes => {
                followed.passed += n;
                true
            }
            stopped => {
                if stopped == Passed::Closed && stream == Stream::Stdout {
                    gone.now();
                }
                followed.stopped = Some(stopped);
                false
            }
        }
    };
    loop {
        // Read before the log is drained: once the run has ended, one more
        // drain to its end leaves nothing behind.
        let ended = *shared.ended.lock().unwrap_or_else(|p| p.into_inner());
        if file.is_none() {
            file = open_log(path);
        }
        if let Some(f) = file.as_mut() {
            loop {
                let n = match f.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                };
                let bytes = match inert.as_mut() {
                    Some(i) => {
                        let mut out = Vec::with_capacity(n + 8);
                        i.push(&buf[..n], &mut out);
                        out
                    }
                    None => buf[..n].to_vec(),
                };
                if !pass(bytes, &mut followed) {
                    return followed;
                }
            }
        }
        if ended {
            if let Some(mut i) = inert {
                let mut out = Vec::new();
                i.finish(&mut out);
                pass(out, &mut followed);
            }
            return followed;
        }
        let guard = shared.ended.lock().unwrap_or_else(|p| p.into_inner());
        if !*guard {
            drop(
                shared
                    .poke
                    .wait_timeout(guard, LOOK_EVERY)
                    .unwrap_or_else(|p| p.into_inner()),
            );
        }
    }
}

/// The run's log, read where it is and only as a regular file (never
/// through a link, never a FIFO that would block the read).
fn open_log(path: &Path) -> Option<std::fs::File> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
        return None;
    }
    Some(std::fs::File::from(fd))
}

/// Makes workflow commands inert in a stream of bytes, line by line: a
/// line that would start one (`::name::`, after blanks) gets a dot
/// leader before it, and the old `##[` form a word joiner inside it, as
/// in warden's own lines. Whole lines are needed to tell, so a line is
/// held until it ends (or grows past [`CHUNK`], when it is let through
/// as it stands).
#[derive(Debug, Default)]
struct Inert {
    line: Vec<u8>,
}

impl Inert {
    fn push(&mut self, mut bytes: &[u8], out: &mut Vec<u8>) {
        while let Some(at) = memchr::memchr2(b'\n', b'\r', bytes) {
            self.line.extend_from_slice(&bytes[..=at]);
            self.flush(out);
            bytes = &bytes[at + 1..];
        }
        self.line.extend_from_slice(bytes);
        if self.line.len() > CHUNK {
            self.flush(out);
        }
    }

    fn finish(&mut self, out: &mut Vec<u8>) {
        self.flush(out);
    }

    fn flush(&mut self, out: &mut Vec<u8>) {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            return;
        }
        let blank = line
            .iter()
            .position(|b| !matches!(b, b' ' | b'\t'))
            .unwrap_or(line.len());
        if line[blank..].starts_with(b"::") {
            out.extend_from_slice("\u{2024}".as_bytes());
        }
        let mut from = 0;
        for at in memchr::memmem::find_iter(&line, b"##[") {
            out.extend_from_slice(&line[from..at + 2]);
            out.extend_from_slice("\u{2060}".as_bytes());
            from = at + 2;
        }
        out.extend_from_slice(&line[from..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inert(pieces: &[&[u8]]) -> Vec<u8> {
        let mut i = Inert::default();
        let mut out = Vec::new();
        for p in pieces {
            i.push(p, &mut out);
        }
        i.finish(&mut out);
        out
    }

    #[test]
    fn ordinary_bytes_pass_unchanged() {
        let bytes: &[u8] = b"a line\n\x00\xff binary: bytes\r\nno end";
        assert_eq!(inert(&[bytes]), bytes);
        assert_eq!(inert(&[&bytes[..5], &bytes[5..12], &bytes[12..]]), bytes);
    }

    #[test]
    fn workflow_commands_are_made_inert_across_pieces() {
        let out = inert(&[b"ok\n  :", b":error::x\n##", b"[group]y\n"]);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "ok\n\u{2024}  ::error::x\n##\u{2060}[group]y\n"
        );
        let out = inert(&[b"a\r::warning::b"]);
        assert_eq!(String::from_utf8(out).unwrap(), "a\r\u{2024}::warning::b");
    }
}
