//! The command's own output, passed on, so that warden stands in a
//! pipeline where the command would (`warden run exec -- cmd | jq`,
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
//! Byte for byte only where no terminal is: a terminal is a person's, and
//! the agent's bytes there could clear it, retitle it or write the
//! clipboard. A stream that is the terminal warden's view is drawn on
//! leaves the output to the view (its `out|` and `err|` lines); a stdout
//! that is another terminal gets the lines made harmless as the view's
//! are. `--json` keeps stdout for the events. Under GitHub Actions, whose
//! log runs workflow commands, a line that would be one is made inert (the
//! one change to the bytes).

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

/// How one stream of the command's output is passed on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Pass {
    /// Not: the view shows it, or it is not the command's to pass.
    #[default]
    No,
    /// Byte for byte (workflow commands made inert under GitHub Actions).
    Raw,
    /// To a terminal the view is not drawn on: line by line, each made
    /// harmless as the view's lines are.
    Shown,
}

/// Which of the command's output is passed on, and how.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Passthrough {
    /// An `exec` command's stdout, to warden's stdout.
    pub stdout: Pass,
    /// An `exec` command's stderr, to warden's stderr.
    pub stderr: Pass,
    /// An agent CLI's final answer, to warden's stdout.
    pub answer: Pass,
    /// Workflow commands made inert (under GitHub Actions).
    github: bool,
}

impl Passthrough {
    /// What is passed on for a run of `agent`: a stream byte for byte
    /// where it is no terminal; stdout on a terminal of its own, as lines
    /// made harmless; a terminal the view is drawn on (stderr, and stdout
    /// when it is the same terminal), not at all (the view shows it); and
    /// stdout not with `--json` (`json`), which holds the events.
    pub(crate) fn decide(agent: Agent, json: bool) -> Self {
        use std::io::IsTerminal;
        let out_tty = std::io::stdout().is_terminal();
        let err_tty = std::io::stderr().is_terminal();
        let stdout = match () {
            _ if json => Pass::No,
            _ if !out_tty => Pass::Raw,
            _ if err_tty && stdout_is_stderrs_terminal() => Pass::No,
            _ => Pass::Shown,
        };
        let exec = agent == Agent::Exec;
        Self {
            stdout: if exec { stdout } else { Pass::No },
            stderr: match () {
                _ if !exec => Pass::No,
                _ if err_tty => Pass::No,
                _ => Pass::Raw,
            },
            answer: if exec { Pass::No } else { stdout },
            github: super::github::GitHub::from_env().is_some(),
        }
    }

    /// Whether the view leaves out the lines of `stream`.
    pub(crate) fn passes(&self, stream: Stream) -> bool {
        match stream {
            Stream::Stdout => self.stdout != Pass::No,
            Stream::Stderr => self.stderr != Pass::No,
        }
    }

    /// What makes bytes of a stream passed on as `how` fit to pass.
    fn filter(&self, how: Pass) -> Filter {
        match how {
            Pass::Shown => Filter::Shown(Lines::default()),
            _ if self.github => Filter::Inert(Lines::default()),
            _ => Filter::None,
        }
    }
}

/// Whether stdout is the very terminal stderr is.
fn stdout_is_stderrs_terminal() -> bool {
    let (out, err) = (std::io::stdout(), std::io::stderr());
    match (rustix::fs::fstat(out), rustix::fs::fstat(err)) {
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
        for (how, stream, file) in [
            (self.pass.stdout, Stream::Stdout, "stdout.log"),
            (self.pass.stderr, Stream::Stderr, "stderr.log"),
        ] {
            if how == Pass::No {
                continue;
            }
            let path = run_dir.join(file);
            let shared = shared.clone();
            let gone = Gone {
                said: self.reader_gone.clone(),
                stop: self.stop.clone(),
            };
            let filter = self.pass.filter(how);
            let spawned = std::thread::Builder::new()
                .name(format!("warden-pass-{}", file.trim_end_matches(".log")))
                .spawn(move || follow(&path, stream, &shared, filter, &gone));
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
        if self.pass.answer != Pass::No
            && let Some(text) = report.reported.final_text.as_deref()
            && !text.is_empty()
        {
            let mut bytes = Vec::with_capacity(text.len() + 8);
            let mut filter = self.pass.filter(self.pass.answer);
            filter.push(text.as_bytes(), &mut bytes);
            filter.finish(&mut bytes);
            if !bytes.ends_with(b"\n") {
                bytes.push(b'\n');
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
fn follow(
    path: &Path,
    stream: Stream,
    shared: &Shared,
    mut filter: Filter,
    gone: &Gone,
) -> Followed {
    let mut followed = Followed {
        passed: 0,
        stopped: None,
    };
    let mut file = None;
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
                let mut bytes = Vec::with_capacity(n + 8);
                filter.push(&buf[..n], &mut bytes);
                if !pass(bytes, &mut followed) {
                    return followed;
                }
            }
        }
        if ended {
            let mut out = Vec::new();
            filter.finish(&mut out);
            if !out.is_empty() {
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

/// What is done to the bytes passed on.
#[derive(Debug)]
enum Filter {
    None,
    /// Workflow commands made inert, line by line: a line that would
    /// start one (`::name::`, after blanks) gets a dot leader before it,
    /// and the old `##[` form a word joiner inside it, as in warden's own
    /// lines; nothing else changes.
    Inert(Lines),
    /// Each line made harmless for a terminal, as the view's lines are
    /// (controls shown as symbols, workflow commands inert).
    Shown(Lines),
}

/// A line held until it ends (or grows past [`CHUNK`], when it is let
/// through as it stands): whole lines are needed to tell what they are.
#[derive(Debug, Default)]
struct Lines(Vec<u8>);

impl Filter {
    fn push(&mut self, mut bytes: &[u8], out: &mut Vec<u8>) {
        let end = |f: &Filter, b: &[u8]| match f {
            Filter::None => None,
            Filter::Inert(_) => memchr::memchr2(b'\n', b'\r', b),
            Filter::Shown(_) => memchr::memchr(b'\n', b),
        };
        let Some(_) = self.held() else {
            return out.extend_from_slice(bytes);
        };
        while let Some(at) = end(self, bytes) {
            self.held()
                .into_iter()
                .for_each(|l| l.extend_from_slice(&bytes[..=at]));
            self.flush(out);
            bytes = &bytes[at + 1..];
        }
        if let Some(l) = self.held() {
            l.extend_from_slice(bytes);
            if l.len() > CHUNK {
                self.flush(out);
            }
        }
    }

    /// The line held, if the filter holds lines.
    fn held(&mut self) -> Option<&mut Vec<u8>> {
        match self {
            Filter::None => None,
            Filter::Inert(l) | Filter::Shown(l) => Some(&mut l.0),
        }
    }

    fn finish(&mut self, out: &mut Vec<u8>) {
        self.flush(out);
    }

    fn flush(&mut self, out: &mut Vec<u8>) {
        match self {
            Filter::None => {}
            Filter::Inert(l) => inert(&std::mem::take(&mut l.0), out),
            Filter::Shown(l) => {
                let line = std::mem::take(&mut l.0);
                if line.is_empty() {
                    return;
                }
                let (text, newline) = match line.strip_suffix(b"\n") {
                    Some(text) => (text, true),
                    None => (&line[..], false),
                };
                let text = String::from_utf8_lossy(text);
                out.extend_from_slice(super::github::neutralize(&text).as_bytes());
                if newline {
                    out.push(b'\n');
                }
            }
        }
    }
}

/// `line` with workflow commands made inert (see [`Filter::Inert`]).
fn inert(line: &[u8], out: &mut Vec<u8>) {
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
    for at in memchr::memmem::find_iter(line, b"##[") {
        out.extend_from_slice(&line[from..at + 2]);
        out.extend_from_slice("\u{2060}".as_bytes());
        from = at + 2;
    }
    out.extend_from_slice(&line[from..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn through(mut f: Filter, pieces: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in pieces {
            f.push(p, &mut out);
        }
        f.finish(&mut out);
        out
    }

    fn inert(pieces: &[&[u8]]) -> Vec<u8> {
        through(Filter::Inert(Lines::default()), pieces)
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

    #[test]
    fn lines_for_a_terminal_show_controls_as_symbols() {
        let f = || Filter::Shown(Lines::default());
        let out = through(f(), &[b"a\x1b[2J", b"b\r\nc\x07"]);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "a\u{241b}[2Jb\u{240d}\nc\u{2407}"
        );
        assert_eq!(through(f(), &[b"plain\n"]), b"plain\n");
        assert_eq!(through(Filter::None, &[b"\x1b", b"x"]), b"\x1bx");
    }
}
