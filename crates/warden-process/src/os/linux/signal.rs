//! Sending signals, with the target's kind in the type.

use rustix::process::{kill_process, kill_process_group};

/// The signals warden sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Term,
    Kill,
    Int,
    /// Freezes a process until SIGCONT; it cannot be caught or ignored.
    Stop,
    Cont,
}

impl Signal {
    fn raw(self) -> rustix::process::Signal {
        match self {
            Signal::Term => rustix::process::Signal::TERM,
            Signal::Kill => rustix::process::Signal::KILL,
            Signal::Int => rustix::process::Signal::INT,
            Signal::Stop => rustix::process::Signal::STOP,
            Signal::Cont => rustix::process::Signal::CONT,
        }
    }

    /// The conventional name (`SIGTERM`).
    pub fn name(self) -> &'static str {
        match self {
            Signal::Term => "SIGTERM",
            Signal::Kill => "SIGKILL",
            Signal::Int => "SIGINT",
            Signal::Stop => "SIGSTOP",
            Signal::Cont => "SIGCONT",
        }
    }
}

/// Who receives a signal: one process, or every member of a process group.
/// A type rather than a sign on the pid, so the two cannot be confused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Process(i32),
    Group(i32),
}

/// Sends `signal` to `target`. A target that is already gone is not an
/// error: the caller wanted it dead, and it is.
pub fn send(target: Target, signal: Signal) -> std::io::Result<()> {
    let result = match target {
        Target::Process(p) => match super::pid(p) {
            Some(p) => kill_process(p, signal.raw()),
            None => return Ok(()),
        },
        Target::Group(g) => match super::pid(g) {
            Some(g) => kill_process_group(g, signal.raw()),
            None => return Ok(()),
        },
    };
    match result {
        Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
