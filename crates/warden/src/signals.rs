//! SIGINT, SIGTERM and SIGHUP to warden: caught from the first moment.
//!
//! `main` blocks the three before it does anything else. For `run` and
//! `batch`, [`Signals::install`] then registers the handlers and unblocks
//! them, so a signal that came in between is delivered at that point,
//! neither fatal nor lost. Everything after (reading the prompt, the run,
//! the batch) reads one count of signals received: a signal that comes
//! before a run starts cancels it as surely as one that comes during it.
//! Other commands unblock at once and keep the default actions (Ctrl-C
//! ends `warden report` as it ends any program).
//!
//! A SIGHUP that warden was started with ignored (`nohup`) stays ignored:
//! the caller asked to outlive the terminal. SIGINT and SIGTERM are always
//! caught (a script's background job has SIGINT ignored, yet `kill -INT`
//! to it is meant).
//!
//! What is left: a signal in the instant between `exec` and `main` (the
//! dynamic loader, std's start-up) still takes the default action, as it
//! would for any program.

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

use std::sync::atomic::{AtomicBool, Ordering};

const CAUGHT: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Warden was started with SIGHUP ignored.
static HUP_IGNORED: AtomicBool = AtomicBool::new(false);

/// Blocks the caught signals on this (the main) thread: they wait, pending,
/// until [`unblock`]. Threads started meanwhile inherit the mask, and so
/// would child processes (std does not reset it before `exec`): every path
/// unblocks before anything is spawned.
pub fn block() {
    set_mask(libc::SIG_BLOCK);
    HUP_IGNORED.store(is_ignored(libc::SIGHUP), Ordering::Relaxed);
}

fn is_ignored(sig: libc::c_int) -> bool {
    let mut old = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: with a null new action, `sigaction` only writes the current
    // one into `old`, which is zeroed memory of the right type and ours.
    let read = unsafe { libc::sigaction(sig, std::ptr::null(), old.as_mut_ptr()) };
    // SAFETY: zeroed is a valid `sigaction` (plain integers and pointers),
    // and on success the kernel filled it in.
    read == 0 && unsafe { old.assume_init() }.sa_sigaction == libc::SIG_IGN
}

/// Delivers what came in while blocked, and everything after.
pub fn unblock() {
    set_mask(libc::SIG_UNBLOCK);
}

fn set_mask(how: libc::c_int) {
    let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: `sigemptyset` initializes the set we own before anything
    // reads it; `sigaddset` is given valid signal numbers; `pthread_sigmask`
    // only reads the set and changes this thread's mask, and a null old
    // set is allowed. None of them can fail with these arguments.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        for s in CAUGHT {
            libc::sigaddset(set.as_mut_ptr(), s);
        }
        libc::pthread_sigmask(how, set.as_ptr(), std::ptr::null_mut());
    }
}

/// How many signals came, and the name of the last.
#[derive(Debug, Clone, Copy, Default)]
pub struct Received {
    pub count: u32,
    pub last: &'static str,
}

/// The signals received so far, and a way to wait for the next.
#[derive(Clone)]
pub struct Signals {
    rx: watch::Receiver<Received>,
}

impl Signals {
    /// Registers the handlers, then unblocks. Must be called in the runtime.
    pub fn install() -> Signals {
        let (tx, rx) = watch::channel(Received::default());
        let kinds = [
            SignalKind::interrupt(),
            SignalKind::terminate(),
            SignalKind::hangup(),
        ];
        let streams = kinds.map(|k| {
            let ignored = k == SignalKind::hangup() && HUP_IGNORED.load(Ordering::Relaxed);
            (!ignored).then(|| signal(k).ok()).flatten()
        });
        let [mut int, mut term, mut hup] = streams;
        tokio::spawn(async move {
            loop {
                let name = tokio::select! {
                    Some(()) = recv(&mut int) => "SIGINT",
                    Some(()) = recv(&mut term) => "SIGTERM",
                    Some(()) = recv(&mut hup) => "SIGHUP",
                    else => return,
                };
                tx.send_modify(|r| {
                    r.count += 1;
                    r.last = name;
                });
            }
        });
        unblock();
        Signals { rx }
    }

    /// What has come so far.
    pub fn received(&self) -> Received {
        *self.rx.borrow()
    }

    /// Waits for the next signal (returns at once if one came since this
    /// was last asked); `None` if no more can come.
    pub async fn changed(&mut self) -> Option<Received> {
        self.rx.changed().await.ok()?;
        Some(*self.rx.borrow_and_update())
    }
}

async fn recv(s: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
    match s {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}
