//! warden's own console output: stderr (the view, notices, the summary)
//! and stdout (`--json`, and what `report`, `doctor`, `completions`, `man`
//! print).
//!
//! Nothing printed may stop or kill a run. Each stream is written by a
//! thread of its own, from a bounded queue of whole lines:
//! - A reader who stops reading (a paused pager, a stuck log shipper, a
//!   terminal held with Ctrl-S) fills the queue. During a run or a batch
//!   ([`for_a_run`]) further lines are then dropped and counted, never
//!   waited for: the thread that drives the clocks only ever appends to
//!   memory. Outside a run nothing is dropped: a print waits for room, as a
//!   plain write would, since no clock depends on it.
//! - A write that fails (`EPIPE` from a closed pipe, `ENOSPC` on a full
//!   disk) closes the stream for good; later lines are discarded. Nothing
//!   panics, as `println!` and `eprintln!` do: a console that went away is
//!   not a reason to end a run, and the exit code stays the run's.
//! - Lines are queued and dropped whole, so a dropped line can never glue
//!   the start of one line to the end of another (which could make a new
//!   line start with a CI workflow command, or cut a JSON line in two).
//!
//! - The command's own output, passed on by [`pass_on`], is never dropped:
//!   the thread that passes it on waits for room, for as long as the reader
//!   takes something.
//!
//! At exit, [`finish`] lets what is queued go out while the reader takes
//! it (in a run, until nothing has gone for a while), and says how many
//! lines were dropped.

use std::collections::VecDeque;
use std::io;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// One of warden's two output streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

/// Whether a line may be dropped when its reader cannot keep up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Priority {
    /// Progress, agent output, notices: the run's logs have all of it.
    Droppable,
    /// A redraw of the status line: dropped without a count (the next
    /// one shows the same, newer).
    Redraw,
    /// The verdict and the summary: queued past the bound (up to a reserve
    /// of its own), so a slow but live reader still gets them.
    Important,
}

/// What may wait in memory for a slow reader, per stream.
const QUEUE_BYTES: usize = 256 * 1024;
/// What important lines may add on top of a full queue.
const RESERVE_BYTES: usize = 64 * 1024;
/// How long a reader of the command's own output passed on may take
/// nothing before the rest is left in the run's log.
pub(crate) const READER_STUCK: Duration = Duration::from_secs(10);
/// How much the writer writes at once: what a slow reader is seen to take.
const WRITE_PIECE: usize = 16 * 1024;
/// How long the end of a run waits for the last lines to go out while
/// none goes.
pub(crate) const FINISH_WAIT: Duration = Duration::from_secs(3);

#[derive(Default)]
struct Queue {
    chunks: VecDeque<Vec<u8>>,
    /// Bytes queued, including the chunk being written.
    bytes: usize,
    writing: bool,
    /// A write failed: the stream is closed for good (and why).
    broken: Option<Closed>,
    dropped: u64,
    /// Bytes written so far: what tells a slow reader from one that
    /// stopped.
    written: u64,
    writer: Writer,
}

#[derive(Default, PartialEq, Eq)]
enum Writer {
    #[default]
    NotStarted,
    Running,
    /// No thread could be started: lines are written in place.
    Inline,
}

struct Channel {
    stream: Stream,
    queue: Mutex<Queue>,
    /// Something to write.
    work: Condvar,
    /// Something was written (room, or nothing left).
    progress: Condvar,
}

/// Set for the length of a run or batch: a full queue drops.
static DROP_WHEN_FULL: AtomicBool = AtomicBool::new(false);

fn channel(stream: Stream) -> &'static Channel {
    static OUT: OnceLock<Channel> = OnceLock::new();
    static ERR: OnceLock<Channel> = OnceLock::new();
    let cell = match stream {
        Stream::Stdout => &OUT,
        Stream::Stderr => &ERR,
    };
    cell.get_or_init(|| Channel {
        stream,
        queue: Mutex::new(Queue::default()),
        work: Condvar::new(),
        progress: Condvar::new(),
    })
}

impl Channel {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // The queue is plain data, consistent between statements: a panic
        // elsewhere while it was held leaves nothing half-done.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts the writer thread once; `false` when none could be started.
    fn ensure_writer(&'static self, q: &mut Queue) -> bool {
        match q.writer {
            Writer::Running => return true,
            Writer::Inline => return false,
            Writer::NotStarted => {}
        }
        let name = match self.stream {
            Stream::Stdout => "warden-stdout",
            Stream::Stderr => "warden-stderr",
        };
        let spawned = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || self.write_forever());
        q.writer = if spawned.is_ok() {
            Writer::Running
        } else {
            Writer::Inline
        };
        spawned.is_ok()
    }

    fn push(&'static self, bytes: Vec<u8>, priority: Priority) {
        let mut q = self.lock();
        if q.broken.is_some() {
            return;
        }
        if !self.ensure_writer(&mut q) {
            // No thread: write in place, as the last resort it is.
            drop(q);
            if let Err(e) = crate::signals::without_tty_stop(|| write_all(self.stream, &bytes)) {
                self.lock().broken = Some(Closed::of(&e));
            }
            return;
        }
        let limit = match priority {
            Priority::Droppable | Priority::Redraw => QUEUE_BYTES,
            Priority::Important => QUEUE_BYTES + RESERVE_BYTES,
        };
        if DROP_WHEN_FULL.load(Ordering::Relaxed) {
            // A line larger than the whole queue still goes when the
            // queue is empty: dropping it would lose it for good.
            if q.bytes > 0 && q.bytes + bytes.len() > limit {
                if priority != Priority::Redraw {
                    q.dropped += 1;
                }
                return;
            }
        } else {
            while q.bytes > 0 && q.bytes + bytes.len() > limit && q.broken.is_none() {
                q = self.progress.wait(q).unwrap_or_else(|p| p.into_inner());
            }
            if q.broken.is_some() {
                return;
            }
        }
        q.bytes += bytes.len();
        q.chunks.push_back(bytes);
        self.work.notify_one();
    }

    fn write_forever(&self) {
        loop {
            let chunk = {
                let mut q = self.lock();
                while q.chunks.is_empty() {
                    q = self.work.wait(q).unwrap_or_else(|p| p.into_inner());
                }
                q.writing = true;
                q.chunks.pop_front().unwrap_or_default()
            };
            // In pieces, each counted as it goes: a reader that takes a
            // few KiB a second is seen taking them (a blocking write to a
            // pipe returns only once all of it is taken).
            for piece in chunk.chunks(WRITE_PIECE) {
                // A background process writing to its terminal with `stty
                // tostop` would be stopped, supervisor and all.
                let written = crate::signals::without_tty_stop(|| write_all(self.stream, piece));
                let mut q = self.lock();
                q.bytes = q.bytes.saturating_sub(piece.len());
                q.written += piece.len() as u64;
                if let Err(e) = written {
                    q.broken = Some(Closed::of(&e));
                    q.chunks.clear();
                    q.bytes = 0;
                    self.progress.notify_all();
                    break;
                }
                self.progress.notify_all();
            }
            self.lock().writing = false;
            self.progress.notify_all();
        }
    }

    /// Waits until everything queued is written or the stream breaks; with
    /// `stuck`, no longer than until nothing has been written for that
    /// long (a reader that reads slowly still gets everything, one that
    /// stopped costs `stuck`).
    fn drain(&self, stuck: Option<Duration>) {
        let mut q = self.lock();
        let mut seen = (q.written, Instant::now());
        while (q.writing || !q.chunks.is_empty()) && q.broken.is_none() {
            q = match stuck {
                None => self.progress.wait(q).unwrap_or_else(|p| p.into_inner()),
                Some(stuck) => {
                    if q.written != seen.0 {
                        seen = (q.written, Instant::now());
                    }
                    let left = stuck.saturating_sub(seen.1.elapsed());
                    if left.is_zero() {
                        return;
                    }
                    self.progress
                        .wait_timeout(q, left)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
            };
        }
    }

    /// Queues `bytes`, waiting for room however long the reader takes, as
    /// long as it takes something every `stuck` and `abandon` is not set:
    /// how the command's own output is passed on (never dropped; the
    /// caller is no thread that drives a clock).
    fn push_waiting(
        &'static self,
        bytes: Vec<u8>,
        stuck: Duration,
        abandon: &AtomicBool,
    ) -> Passed {
        let mut q = self.lock();
        if let Some(c) = &q.broken {
            return Passed::Closed(c.clone());
        }
        if !self.ensure_writer(&mut q) {
            drop(q);
            return match crate::signals::without_tty_stop(|| write_all(self.stream, &bytes)) {
                Ok(()) => Passed::Yes,
                Err(e) => {
                    let c = Closed::of(&e);
                    self.lock().broken = Some(c.clone());
                    Passed::Closed(c)
                }
            };
        }
        let full = |q: &Queue| q.bytes > 0 && q.bytes + bytes.len() > QUEUE_BYTES;
        let mut q = match self.wait_while(q, full, stuck, abandon) {
            Ok(q) => q,
            Err(passed) => return passed,
        };
        if let Some(c) = &q.broken {
            return Passed::Closed(c.clone());
        }
        q.bytes += bytes.len();
        q.chunks.push_back(bytes);
        self.work.notify_one();
        Passed::Yes
    }

    /// Waits until what is queued is written, as long as the reader takes
    /// something every `stuck` and `abandon` is not set: `Yes` when all
    /// of it went.
    fn flush_waiting(&self, stuck: Duration, abandon: &AtomicBool) -> Passed {
        let busy = |q: &Queue| q.writing || !q.chunks.is_empty();
        match self.wait_while(self.lock(), busy, stuck, abandon) {
            Ok(q) => match &q.broken {
                Some(c) => Passed::Closed(c.clone()),
                None => Passed::Yes,
            },
            Err(passed) => passed,
        }
    }

    /// Waits while `waiting` holds of the queue and the stream is open, as
    /// long as something is written every `stuck` and `abandon` is not
    /// set; else why it stopped.
    fn wait_while<'a>(
        &self,
        mut q: MutexGuard<'a, Queue>,
        waiting: impl Fn(&Queue) -> bool,
        stuck: Duration,
        abandon: &AtomicBool,
    ) -> Result<MutexGuard<'a, Queue>, Passed> {
        let mut seen = (q.written, Instant::now());
        while waiting(&q) && q.broken.is_none() {
            if abandon.load(Ordering::Relaxed) {
                return Err(Passed::Abandoned);
            }
            if q.written != seen.0 {
                seen = (q.written, Instant::now());
            }
            let left = stuck.saturating_sub(seen.1.elapsed());
            if left.is_zero() {
                return Err(Passed::Stuck);
            }
            // In slices, to see `abandon` soon.
            q = self
                .progress
                .wait_timeout(q, left.min(Duration::from_millis(100)))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        Ok(q)
    }

    fn dropped(&self) -> u64 {
        self.lock().dropped
    }
}

/// Writes all of `bytes` straight to the stream's file descriptor (no
/// buffer of std's in between, so nothing is left behind at exit). A
/// descriptor someone made non-blocking is waited on, not given up.
pub(crate) fn write_all(stream: Stream, mut bytes: &[u8]) -> io::Result<()> {
    let out = io::stdout();
    let err = io::stderr();
    let fd = match stream {
        Stream::Stdout => out.as_fd(),
        Stream::Stderr => err.as_fd(),
    };
    while !bytes.is_empty() {
        match rustix::io::write(fd, bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::AGAIN) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// From now on (a run or a batch is about to start), a stream whose reader
/// cannot keep up drops lines instead of making the caller wait. Starts
/// both writers now, before any agent runs, so starting a thread later
/// cannot fail for want of resources the agent used up.
pub(crate) fn for_a_run() {
    DROP_WHEN_FULL.store(true, Ordering::Relaxed);
    for stream in [Stream::Stdout, Stream::Stderr] {
        let ch = channel(stream);
        let mut q = ch.lock();
        ch.ensure_writer(&mut q);
    }
}

/// Queues `text` and a newline on `stream`.
pub(crate) fn line(stream: Stream, priority: Priority, text: &str) {
    let mut bytes = Vec::with_capacity(text.len() + 1);
    bytes.extend_from_slice(text.as_bytes());
    bytes.push(b'\n');
    channel(stream).push(bytes, priority);
}

/// Queues a line of text that may hold the agent's words: neutralized for
/// CI logs (see `github`), droppable. What `eprintln!` and `println!` do.
pub(crate) fn text(stream: Stream, text: &str) {
    line(
        stream,
        Priority::Droppable,
        &super::github::neutralize(text),
    );
}

/// Queues a line on stderr that tells how a run or session ended:
/// neutralized, and with the queue's reserve.
pub(crate) fn important(text: &str) {
    line(
        Stream::Stderr,
        Priority::Important,
        &super::github::neutralize(text),
    );
}

/// Why a stream was closed for good.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Closed {
    /// Its reader went away (`EPIPE`).
    ReaderGone,
    /// A write failed otherwise (`ENOSPC`, `EIO`, ...).
    Failed(String),
}

impl Closed {
    fn of(e: &io::Error) -> Self {
        if e.kind() == io::ErrorKind::BrokenPipe {
            Closed::ReaderGone
        } else {
            Closed::Failed(e.to_string())
        }
    }
}

/// What became of bytes handed to [`pass_on`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Passed {
    Yes,
    /// The stream is closed.
    Closed(Closed),
    /// Nothing was taken from the stream for the time allowed.
    Stuck,
    /// The caller stopped waiting (a signal to warden).
    Abandoned,
    /// Not passed on at all: the stream's reader was given up on before.
    Skipped,
}

/// Set once any of the command's own output was passed on: the end of
/// the program then waits for a slow reader as the passing on does.
static PASSED_ON: AtomicBool = AtomicBool::new(false);

/// Queues the command's own bytes on `stream`, as they are: waits for
/// room while the reader takes something every [`READER_STUCK`] and
/// `abandon` is not set (see [`Channel::push_waiting`]).
pub(crate) fn pass_on(stream: Stream, bytes: Vec<u8>, abandon: &AtomicBool) -> Passed {
    if bytes.is_empty() {
        return Passed::Yes;
    }
    PASSED_ON.store(true, Ordering::Relaxed);
    channel(stream).push_waiting(bytes, READER_STUCK, abandon)
}

/// The waiting for the command's output was called off (a signal to
/// warden): the end of the program waits for it no longer than for
/// warden's own lines.
pub(crate) fn stop_waiting_for_output() {
    PASSED_ON.store(false, Ordering::Relaxed);
}

/// Waits until what is queued on `stream` is written (see
/// [`Channel::flush_waiting`]).
pub(crate) fn flush_passed(stream: Stream, abandon: &AtomicBool) -> Passed {
    channel(stream).flush_waiting(READER_STUCK, abandon)
}

/// Queues bytes as they are (a whole redraw of the status line, a page).
pub(crate) fn raw(stream: Stream, priority: Priority, bytes: Vec<u8>) {
    if !bytes.is_empty() {
        channel(stream).push(bytes, priority);
    }
}

/// The end of the program: says what was dropped, then lets the queues
/// drain, for at most `FINISH_WAIT` after a run (outside one, a reader
/// who reads slowly still gets every line).
pub(crate) fn finish() {
    let run = DROP_WHEN_FULL.load(Ordering::Relaxed);
    if run {
        let out = channel(Stream::Stdout).dropped();
        let err = channel(Stream::Stderr).dropped();
        if out > 0 {
            line(
                Stream::Stderr,
                Priority::Important,
                &format!(
                    "warden: warning: {out} --json line(s) were not written to stdout because it was not read fast enough; events.jsonl in the run directory has them all"
                ),
            );
        }
        if err > 0 {
            line(
                Stream::Stderr,
                Priority::Important,
                &format!(
                    "warden: warning: {err} line(s) of warden's output were dropped because stderr was not read fast enough; the run's logs have everything"
                ),
            );
        }
    }
    let stuck = run.then_some(if PASSED_ON.load(Ordering::Relaxed) {
        READER_STUCK
    } else {
        FINISH_WAIT
    });
    channel(Stream::Stdout).drain(stuck);
    channel(Stream::Stderr).drain(stuck);
}

/// A terminal for indicatif that draws through the stderr queue, so a
/// terminal that stops taking output (Ctrl-S, a stopped `screen`) never
/// blocks the thread that redraws. Each redraw is buffered and queued as
/// one piece at `flush`, so a dropped redraw is dropped whole.
#[derive(Debug, Default)]
pub(crate) struct QueuedTerm {
    pending: Mutex<String>,
}

impl QueuedTerm {
    /// An indicatif draw target on stderr, through the queue.
    pub(crate) fn target() -> indicatif::ProgressDrawTarget {
        indicatif::ProgressDrawTarget::term_like_with_hz(Box::new(QueuedTerm::default()), 8)
    }

    fn put(&self, s: &str) -> io::Result<()> {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_str(s);
        Ok(())
    }
}

/// Whether a status line can be drawn (and redrawn in place) on stderr:
/// a terminal, this job in its foreground, and not one that says it
/// cannot move the cursor (`TERM=dumb`: an editor's shell buffer, some CI
/// logs), which gets the plain lines instead.
pub(crate) fn can_redraw() -> bool {
    use std::io::IsTerminal;
    io::stderr().is_terminal()
        && crate::signals::in_foreground()
        && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
}

/// Whether colour may be used: not with `NO_COLOR` set (and not empty),
/// nor on a terminal that says it is dumb.
pub(crate) fn color() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
}

/// The terminal's size on stderr as (columns, rows): 80 x 24 where it
/// cannot be read, and for a side the terminal says is 0 (a pseudo-terminal
/// nobody sized, or resized to nothing), which nothing can be drawn into.
pub(crate) fn terminal_size() -> (u16, u16) {
    let size = rustix::termios::tcgetwinsize(io::stderr()).ok();
    let or = |v: Option<u16>, default| v.filter(|&v| v > 0).unwrap_or(default);
    (
        or(size.map(|w| w.ws_col), 80),
        or(size.map(|w| w.ws_row), 24),
    )
}

impl indicatif::TermLike for QueuedTerm {
    fn width(&self) -> u16 {
        terminal_size().0
    }

    fn height(&self) -> u16 {
        terminal_size().1
    }

    fn move_cursor_up(&self, n: usize) -> io::Result<()> {
        if n > 0 {
            self.put(&format!("\x1b[{n}A"))?;
        }
        Ok(())
    }

    fn move_cursor_down(&self, n: usize) -> io::Result<()> {
        if n > 0 {
            self.put(&format!("\x1b[{n}B"))?;
        }
        Ok(())
    }

    fn move_cursor_right(&self, n: usize) -> io::Result<()> {
        if n > 0 {
            self.put(&format!("\x1b[{n}C"))?;
        }
        Ok(())
    }

    fn move_cursor_left(&self, n: usize) -> io::Result<()> {
        if n > 0 {
            self.put(&format!("\x1b[{n}D"))?;
        }
        Ok(())
    }

    fn write_line(&self, s: &str) -> io::Result<()> {
        self.put(s)?;
        self.put("\n")
    }

    fn write_str(&self, s: &str) -> io::Result<()> {
        self.put(s)
    }

    fn clear_line(&self) -> io::Result<()> {
        self.put("\r\x1b[2K")
    }

    fn flush(&self) -> io::Result<()> {
        let frame = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()));
        // A frame with a whole line in it carries a line printed above
        // the status line: its loss is counted. A bare redraw is not.
        let priority = if frame.contains('\n') {
            Priority::Droppable
        } else {
            Priority::Redraw
        };
        raw(Stream::Stderr, priority, frame.into_bytes());
        Ok(())
    }
}
