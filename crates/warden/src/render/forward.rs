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
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use warden_events::Agent;
use warden_run::{Canceller, Report};

use super::console::{self, Closed, Passed, READER_STUCK, Stream, important};

/// How often a follower looks at its log when nothing pokes it.
const LOOK_EVERY: Duration = Duration::from_millis(20);
/// The longest piece of a line a filter holds before letting it through.
const CHUNK: usize = 64 * 1024;
/// What a follower reads at once: a flood is read as the supervisor
/// reads it, in few big pieces.
const READ: usize = 256 * 1024;

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
    /// Nowhere: the stream is `/dev/null`, which takes everything and
    /// keeps nothing, so the log is not read back for it (the view leaves
    /// the stream out, as for any stream passed on).
    Discarded,
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
            _ if is_dev_null(std::io::stdout()) => Pass::Discarded,
            _ if !out_tty => Pass::Raw,
            _ if err_tty && stdout_is_stderrs_terminal() => Pass::No,
            _ => Pass::Shown,
        };
        let exec = agent == Agent::Exec;
        Self {
            stdout: if exec { stdout } else { Pass::No },
            stderr: match () {
                _ if !exec => Pass::No,
                _ if is_dev_null(std::io::stderr()) => Pass::Discarded,
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

/// Whether `fd` is `/dev/null` (the same character device).
fn is_dev_null(fd: impl std::os::fd::AsFd) -> bool {
    use rustix::fs::FileType;
    let char_dev =
        |st: &rustix::fs::Stat| FileType::from_raw_mode(st.st_mode) == FileType::CharacterDevice;
    match (rustix::fs::fstat(fd), rustix::fs::stat("/dev/null")) {
        (Ok(a), Ok(b)) => char_dev(&a) && char_dev(&b) && a.st_rdev == b.st_rdev,
        _ => false,
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
    /// Followers waiting on `poke`.
    waiting: std::sync::atomic::AtomicUsize,
}

/// How a follower ended: `Some` when it stopped before the end of its
/// log, and why.
type Followed = Option<Passed>;

/// One run's followers.
struct Current {
    shared: Arc<Shared>,
    threads: Vec<(Stream, JoinHandle<Followed>)>,
    /// Streams not passed on at all: their reader was given up on (or
    /// went away) in an earlier run.
    skipped: Vec<Stream>,
}

/// What every run of a command shares.
struct Common {
    /// Stops the run (or session) when the reader of warden's stdout has
    /// gone while it runs: its output has nowhere to go, and in a
    /// pipeline `SIGPIPE` would have stopped the command.
    stop: Canceller,
    /// The reader went away: said and acted on once.
    gone: AtomicBool,
    /// A stream's reader took nothing for [`READER_STUCK`]: nothing more
    /// is passed on to it (the next runs do not wait for it again). By
    /// stream: stdout, stderr.
    given_up: [AtomicBool; 2],
    /// A signal to warden: stop waiting for the reader.
    abandon: AtomicBool,
}

impl Common {
    /// Whether nothing more is passed on to `stream`: its reader was given
    /// up on, or (stdout) went away.
    fn stopped(&self, stream: Stream) -> bool {
        self.given_up[stream as usize].load(Ordering::Relaxed)
            || (stream == Stream::Stdout && self.gone.load(Ordering::Relaxed))
    }
}

/// Stops the waiting for a slow reader (a signal to warden).
#[derive(Clone)]
pub(crate) struct Abandon(Arc<Common>);

impl Abandon {
    pub(crate) fn now(&self) {
        self.0.abandon.store(true, Ordering::Relaxed);
        console::stop_waiting_for_output();
    }
}

/// How the passing on of a run's output ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Delivered {
    /// All of it, or nothing was to be passed on.
    All,
    /// Not all of it: why, in a sentence (the logs have it all).
    Short(String),
}

/// Passes the command's output on, run after run.
pub(crate) struct Forward {
    pass: Passthrough,
    current: Option<Current>,
    common: Arc<Common>,
}

impl Forward {
    /// `stop` ends what runs when the reader of stdout goes.
    pub(crate) fn new(pass: Passthrough, stop: Canceller) -> Self {
        Self {
            pass,
            current: None,
            common: Arc::new(Common {
                stop,
                gone: AtomicBool::new(false),
                given_up: [AtomicBool::new(false), AtomicBool::new(false)],
                abandon: AtomicBool::new(false),
            }),
        }
    }

    /// What stops the waiting at the end of a run.
    pub(crate) fn abandon(&self) -> Abandon {
        Abandon(self.common.clone())
    }

    /// A run started, its logs in `run_dir`: follows them.
    pub(crate) fn started(&mut self, run_dir: &Path) {
        let shared = Arc::new(Shared::default());
        let mut threads = Vec::new();
        let mut skipped = Vec::new();
        for (how, stream, file) in [
            (self.pass.stdout, Stream::Stdout, "stdout.log"),
            (self.pass.stderr, Stream::Stderr, "stderr.log"),
        ] {
            if matches!(how, Pass::No | Pass::Discarded) {
                continue;
            }
            if self.common.stopped(stream) {
                skipped.push(stream);
                continue;
            }
            let path = run_dir.join(file);
            let (shared, common) = (shared.clone(), self.common.clone());
            let filter = self.pass.filter(how);
            let spawned = std::thread::Builder::new()
                .name(format!("warden-pass-{}", file.trim_end_matches(".log")))
                .spawn(move || follow(&path, stream, &shared, filter, &common));
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
            shared,
            threads,
            skipped,
        });
    }

    /// The run said something: its logs may have grown. Only a follower
    /// that waits is woken (a wake-up costs a system call even when
    /// nobody waits, and a flood says something thousands of times a
    /// second); one that starts waiting just after this looks again
    /// within [`LOOK_EVERY`].
    pub(crate) fn poke(&self) {
        if let Some(c) = &self.current
            && c.shared.waiting.load(Ordering::Relaxed) > 0
        {
            c.shared.poke.notify_all();
        }
    }

    /// The run ended with `report`: what is left of its logs is passed on,
    /// then an agent's final answer, waiting (off the runtime's thread)
    /// while the reader takes them; how it went.
    pub(crate) async fn finished(&mut self, report: &Report) -> Delivered {
        let current = self.current.take();
        let answer = match self.pass.answer {
            Pass::No | Pass::Discarded => None,
            how => report
                .reported
                .final_text
                .clone()
                .filter(|t| !t.is_empty())
                .map(|t| (t, self.pass.filter(how))),
        };
        let passes = [Stream::Stdout, Stream::Stderr]
            .into_iter()
            .filter(|s| self.pass.passes(*s) || (*s == Stream::Stdout && answer.is_some()))
            .collect::<Vec<_>>();
        if current
            .as_ref()
            .is_none_or(|c| c.threads.is_empty() && c.skipped.is_empty())
            && answer.is_none()
        {
            return Delivered::All;
        }
        let common = self.common.clone();
        let run_dir = report.run_dir.clone();
        let work = move || finish(current, answer, &passes, &common, &run_dir);
        tokio::task::spawn_blocking(work)
            .await
            .unwrap_or_else(|e| Delivered::Short(format!("passing it on failed: {e}")))
    }
}

/// The end of a run's passing on (see [`Forward::finished`]).
fn finish(
    current: Option<Current>,
    answer: Option<(String, Filter)>,
    passes: &[Stream],
    common: &Common,
    run_dir: &Path,
) -> Delivered {
    let mut short = Vec::new();
    let mut note = |stream: Stream, why: Passed| {
        let name = match stream {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        };
        let why = match why {
            Passed::Yes => return,
            Passed::Stuck => {
                common.given_up[stream as usize].store(true, Ordering::Relaxed);
                // Nor is it waited for again at the very end.
                console::stop_waiting_for_output();
                format!(
                    "the reader of warden's {name} took nothing for {}",
                    humantime::format_duration(READER_STUCK)
                )
            }
            Passed::Closed(Closed::ReaderGone) => {
                format!("the reader of warden's {name} went away")
            }
            Passed::Closed(Closed::Failed(e)) => format!("writing warden's {name} failed: {e}"),
            Passed::Abandoned => "a signal to warden stopped the passing on".into(),
            Passed::Skipped => {
                format!(
                    "nothing of this run was passed on to warden's {name}, whose reader was given up on before"
                )
            }
        };
        let line = format!(
            "{why}; {} has it all",
            run_dir.join(format!("{name}.log")).display()
        );
        if !short.contains(&line) {
            short.push(line);
        }
    };
    if let Some(c) = current {
        for stream in &c.skipped {
            note(*stream, Passed::Skipped);
        }
        *c.shared.ended.lock().unwrap_or_else(|p| p.into_inner()) = true;
        c.shared.poke.notify_all();
        for (stream, thread) in c.threads {
            if let Ok(Some(why)) = thread.join() {
                note(stream, why);
            }
        }
    }
    if let Some((text, mut filter)) = answer {
        let mut bytes = Vec::with_capacity(text.len() + 8);
        filter.push(text.as_bytes(), &mut bytes);
        filter.finish(&mut bytes);
        if !bytes.ends_with(b"\n") {
            bytes.push(b'\n');
        }
        let passed = console::pass_on(Stream::Stdout, bytes, &common.abandon);
        note(Stream::Stdout, passed);
    }
    // What is queued is written (or fails) before the run's last lines:
    // a full disk or a closed pipe at the very end is seen too (not
    // waited for on a stream whose reader was given up on).
    for stream in passes {
        if !common.stopped(*stream) {
            note(*stream, console::flush_passed(*stream, &common.abandon));
        }
    }
    if short.is_empty() {
        Delivered::All
    } else {
        Delivered::Short(short.join("; "))
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
    common: &Common,
) -> Followed {
    let mut file = None;
    let mut read = Vec::new();
    let pass = |bytes: Vec<u8>| -> Followed {
        match console::pass_on(stream, bytes, &common.abandon) {
            Passed::Yes => None,
            Passed::Closed(Closed::ReaderGone) if stream == Stream::Stdout => {
                let running = !*shared.ended.lock().unwrap_or_else(|p| p.into_inner());
                if running && !common.gone.swap(true, Ordering::Relaxed) {
                    important(
                        "warden: the reader of warden's stdout went away (a closed pipe): stopping the run, as SIGPIPE would stop the command",
                    );
                    common.stop.cancel_because(READER_GONE);
                }
                Some(Passed::Closed(Closed::ReaderGone))
            }
            other => Some(other),
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
                // Read into a buffer of its own, which is queued as it is
                // when nothing filters it (no copy, no zeroing); one that
                // read nothing waits for the next look.
                read.reserve_exact(READ);
                // A failed read passes on what it got before failing.
                let failed = Read::by_ref(f)
                    .take(READ as u64)
                    .read_to_end(&mut read)
                    .is_err();
                if read.is_empty() {
                    break;
                }
                let bytes = if matches!(filter, Filter::None) {
                    std::mem::take(&mut read)
                } else {
                    let mut bytes = Vec::with_capacity(read.len() + 8);
                    filter.push(&read, &mut bytes);
                    read.clear();
                    bytes
                };
                if let Some(why) = pass(bytes) {
                    return Some(why);
                }
                if failed {
                    break;
                }
            }
        }
        if ended {
            let mut out = Vec::new();
            filter.finish(&mut out);
            return pass(out);
        }
        let guard = shared.ended.lock().unwrap_or_else(|p| p.into_inner());
        if !*guard {
            shared.waiting.fetch_add(1, Ordering::Relaxed);
            drop(
                shared
                    .poke
                    .wait_timeout(guard, LOOK_EVERY)
                    .unwrap_or_else(|p| p.into_inner()),
            );
            shared.waiting.fetch_sub(1, Ordering::Relaxed);
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
struct Lines {
    line: Vec<u8>,
    /// The line held goes on from a part let through already.
    continued: bool,
}

impl Filter {
    fn push(&mut self, mut bytes: &[u8], out: &mut Vec<u8>) {
        let shown = matches!(self, Filter::Shown(_));
        let lines = match self {
            Filter::None => return out.extend_from_slice(bytes),
            Filter::Inert(l) | Filter::Shown(l) => l,
        };
        loop {
            let end = if shown {
                memchr::memchr(b'\n', bytes)
            } else {
                memchr::memchr2(b'\n', b'\r', bytes)
            };
            let Some(at) = end else { break };
            lines.line.extend_from_slice(&bytes[..=at]);
            let_through(lines, shown, true, out);
            bytes = &bytes[at + 1..];
        }
        lines.line.extend_from_slice(bytes);
        if lines.line.len() > CHUNK {
            let_through(lines, shown, false, out);
        }
    }

    fn finish(&mut self, out: &mut Vec<u8>) {
        let shown = matches!(self, Filter::Shown(_));
        if let Filter::Inert(l) | Filter::Shown(l) = self {
            let_through(l, shown, true, out);
        }
    }
}

/// Lets the line held through, made fit. `whole`: it ended; else it is a
/// long line's part, and a `#` or two at its end wait for what follows
/// (a `##[` across the cut is still seen).
fn let_through(l: &mut Lines, shown: bool, whole: bool, out: &mut Vec<u8>) {
    let mut line = std::mem::take(&mut l.line);
    let keep = if whole {
        Vec::new()
    } else {
        let hashes = line
            .iter()
            .rev()
            .take(2)
            .take_while(|b| **b == b'#')
            .count();
        line.split_off(line.len() - hashes)
    };
    if shown {
        let (text, newline) = match line.strip_suffix(b"\n") {
            Some(text) => (text, true),
            None => (&line[..], false),
        };
        let text = String::from_utf8_lossy(text);
        out.extend_from_slice(super::github::neutralize(&text).as_bytes());
        if newline {
            out.push(b'\n');
        }
    } else {
        inert(&line, l.continued, out);
    }
    l.continued = !whole;
    l.line = keep;
}

/// `line` with workflow commands made inert (see [`Filter::Inert`]);
/// `continued`: it is the rest of a line, which starts no command.
fn inert(line: &[u8], continued: bool, out: &mut Vec<u8>) {
    if line.is_empty() {
        return;
    }
    // The runner trims every Unicode blank (vertical tab, no-break space,
    // ...) before it looks for `::`, as warden's own lines are checked.
    if !continued && String::from_utf8_lossy(line).trim_start().starts_with("::") {
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
    fn every_blank_before_a_command_and_a_cut_long_line_are_seen() {
        let out = inert(&[b"\x0b::error::vt\n\x0c::e::ff\n\xc2\xa0::e::nbsp\n"]);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\u{2024}\u{b}::error::vt\n\u{2024}\u{c}::e::ff\n\u{2024}\u{a0}::e::nbsp\n"
        );
        // Cut after `##`, the `[` in the next piece.
        let long = format!("{}##", "a".repeat(CHUNK - 1));
        let out = String::from_utf8(inert(&[long.as_bytes(), b"[error]x\n"])).unwrap();
        assert!(
            out.ends_with("##\u{2060}[error]x\n"),
            "{}",
            &out[out.len() - 20..]
        );
        let long = format!("{}::error::not a command\n", "a".repeat(CHUNK + 5));
        let out = String::from_utf8(inert(&[long.as_bytes()])).unwrap();
        assert!(
            !out.contains('\u{2024}'),
            "the rest of a line starts no command"
        );
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
