//! SIGINT, SIGTERM and SIGHUP to warden: caught from the first moment.
//!
//! Before `main` (and before std's own start-up), a constructor gives the
//! three a handler that only counts them. For `run` and `batch`,
//! [`Signals::install`] then hands over to tokio's handlers, carrying the
//! count over, so a signal that came during start-up cancels the run as
//! surely as one that comes during it: everything after (reading the
//! prompt, the run, the batch) reads one count of signals received. Any
//! other command gets the default actions back ([`default_actions`]), and
//! a signal that came meanwhile then takes its default action: Ctrl-C ends
//! `warden report` as it ends any program.
//!
//! A handler, unlike a blocked mask or an ignore, does not pass through
//! `exec`: a process warden starts (the shim, and the agent after it)
//! begins with the default actions.
//!
//! A SIGHUP that warden was started with ignored (`nohup`) stays ignored:
//! the caller asked to outlive the terminal. SIGINT and SIGTERM are always
//! caught (a script's background job has SIGINT ignored, yet `kill -INT`
//! to it is meant).
//!
//! What is left: a signal in the instant between `exec` and the
//! constructor (the dynamic loader at work) takes the default action, as
//! it would for any program.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

const CAUGHT: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Warden was started with SIGHUP ignored.
static HUP_IGNORED: AtomicBool = AtomicBool::new(false);
/// Signals counted by the early handler, and the last one's number.
static EARLY_COUNT: AtomicU32 = AtomicU32::new(0);
static EARLY_LAST: AtomicI32 = AtomicI32::new(0);
/// The early handler's part is over: tokio's handlers (which call it
/// after their own) or the defaults have taken over.
static EARLY_OVER: AtomicBool = AtomicBool::new(false);

extern "C" fn count_early(sig: libc::c_int) {
    // Only atomics: async-signal-safe.
    if !EARLY_OVER.load(Ordering::SeqCst) {
        EARLY_LAST.store(sig, Ordering::SeqCst);
        EARLY_COUNT.fetch_add(1, Ordering::SeqCst);
    }
}

/// Runs before `main`, from the executable's constructors.
#[cfg(target_os = "linux")]
#[used]
// SAFETY: `.init_array` holds pointers to `extern "C" fn()`s that the
// loader calls once before `main`; this is one.
#[unsafe(link_section = ".init_array")]
static CATCH_EARLY: extern "C" fn() = catch_early;

extern "C" fn catch_early() {
    // The unit-test binary's harness keeps the default actions.
    if cfg!(test) {
        return;
    }
    HUP_IGNORED.store(is_ignored(libc::SIGHUP), Ordering::SeqCst);
    for sig in CAUGHT {
        if sig == libc::SIGHUP && HUP_IGNORED.load(Ordering::SeqCst) {
            continue;
        }
        set_action(sig, count_early as *const () as libc::sighandler_t);
    }
}

fn set_action(sig: libc::c_int, handler: libc::sighandler_t) {
    let mut action = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: a zeroed `sigaction` is valid (integers, a pointer, an empty
    // set); we fill in the handler (`count_early` only touches atomics, or
    // SIG_DFL) and restart-on-signal, then install it for a valid signal
    // number; the old action is not wanted (null).
    unsafe {
        let a = action.as_mut_ptr();
        (*a).sa_sigaction = handler;
        (*a).sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut (*a).sa_mask);
        libc::sigaction(sig, a, std::ptr::null_mut());
    }
}

fn is_ignored(sig: libc::c_int) -> bool {
    let mut old = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: with a null new action, `sigaction` only writes the current
    // one into `old`, which is zeroed memory of the right type and ours.
    let read = unsafe { libc::sigaction(sig, std::ptr::null(), old.as_mut_ptr()) };
    // SAFETY: zeroed is a valid `sigaction`, and on success the kernel
    // filled it in.
    read == 0 && unsafe { old.assume_init() }.sa_sigaction == libc::SIG_IGN
}

/// Holds the caught signals on this (the main) thread while handlers
/// change hands, so none is lost or counted twice. Child processes would
/// inherit the mask (std does not reset it before `exec`): both callers
/// unblock before anything is spawned.
fn set_mask(how: libc::c_int) {
    let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: `sigemptyset` initializes the set we own before anything
    // reads it; `sigaddset` is given valid signal numbers; `pthread_sigmask`
    // only reads the set and changes this thread's mask, and a null old
    // set is allowed.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        for s in CAUGHT {
            libc::sigaddset(set.as_mut_ptr(), s);
        }
        libc::pthread_sigmask(how, set.as_ptr(), std::ptr::null_mut());
    }
}

/// Runs `f` with SIGTTOU held on this thread. A process in the
/// background of its terminal that writes to it (with `stty tostop`) or
/// changes its modes is sent SIGTTOU, which stops it, clocks and all;
/// held, the call goes through instead. Only this thread's mask changes,
/// and it is restored before `f`'s result is returned, so no child
/// process can inherit it.
pub(crate) fn without_tty_stop<R>(f: impl FnOnce() -> R) -> R {
    let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    let mut old = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: `sigemptyset` initializes `set` before it is read;
    // `pthread_sigmask` reads `set` and writes the previous mask into
    // `old`, both ours and of the right type.
    let held = unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        libc::sigaddset(set.as_mut_ptr(), libc::SIGTTOU);
        libc::pthread_sigmask(libc::SIG_BLOCK, set.as_ptr(), old.as_mut_ptr()) == 0
    };
    let result = f();
    if held {
        // SAFETY: `old` was filled in by the successful call above.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, old.as_ptr(), std::ptr::null_mut());
        }
    }
    result
}

/// Whether this process is in the foreground of the terminal on stderr
/// (false off a terminal).
pub(crate) fn in_foreground() -> bool {
    rustix::termios::tcgetpgrp(std::io::stderr()).is_ok_and(|fg| fg == rustix::process::getpgrp())
}

/// Ends the early handling: what it counted, with the signals held.
fn take_over() -> Received {
    set_mask(libc::SIG_BLOCK);
    EARLY_OVER.store(true, Ordering::SeqCst);
    Received {
        count: EARLY_COUNT.load(Ordering::SeqCst),
        last: name(EARLY_LAST.load(Ordering::SeqCst)),
    }
}

/// For commands that are not a run: the default actions back, and a
/// signal that came during start-up acted on now.
/// Like [`Signals::install`], before any other thread is started.
pub(crate) fn default_actions() {
    let early = take_over();
    for sig in CAUGHT {
        if sig == libc::SIGHUP && HUP_IGNORED.load(Ordering::SeqCst) {
            continue;
        }
        set_action(sig, libc::SIG_DFL);
    }
    set_mask(libc::SIG_UNBLOCK);
    if early.count > 0 {
        let sig = EARLY_LAST.load(Ordering::SeqCst);
        // SAFETY: raising a valid signal number has no preconditions; its
        // action is the default now, which ends the process.
        unsafe {
            libc::raise(sig);
        }
    }
}

fn name(sig: libc::c_int) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// How many signals came, and the name of the last.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Received {
    pub count: u32,
    pub last: &'static str,
}

/// The signals received so far, and a way to wait for the next.
#[derive(Clone)]
pub(crate) struct Signals {
    rx: watch::Receiver<Received>,
}

impl Signals {
    /// Hands the signals over to tokio, with what came before. Must be
    /// called in the runtime, before any other thread is started: the
    /// handover holds the signals on this thread only, and another thread
    /// could take one that then nobody counts.
    pub(crate) fn install() -> Signals {
        let early = take_over();
        let (tx, rx) = watch::channel(early);
        let kinds = [
            SignalKind::interrupt(),
            SignalKind::terminate(),
            SignalKind::hangup(),
        ];
        let streams = kinds.map(|k| {
            let ignored = k == SignalKind::hangup() && HUP_IGNORED.load(Ordering::SeqCst);
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
        set_mask(libc::SIG_UNBLOCK);
        Signals { rx }
    }

    /// What has come so far.
    pub(crate) fn received(&self) -> Received {
        *self.rx.borrow()
    }

    /// Waits for the next signal (returns at once if one came since this
    /// was last asked); `None` if no more can come.
    pub(crate) async fn changed(&mut self) -> Option<Received> {
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
