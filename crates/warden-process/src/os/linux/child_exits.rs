//! A descriptor that becomes readable when a child of this process exits
//! (SIGCHLD, taken through a signalfd), so that one thread can wait on a
//! child's exit and on a socket at once, with `poll`.
//!
//! SIGCHLD is blocked in the calling thread from [`ChildExits::new`] on
//! (a blocked signal stays pending, and a pending one is what the
//! descriptor reports); the process must be single-threaded, or every
//! other thread must block it too. A child started afterwards inherits the
//! mask: spawn it with `std::process::Command`, which resets the mask in
//! the child, or unblock SIGCHLD in the child before its exec.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};

/// The signalfd of SIGCHLD.
pub struct ChildExits {
    fd: OwnedFd,
}

impl ChildExits {
    /// Blocks SIGCHLD in this thread and opens its signalfd. A child that
    /// exited before this call sent its SIGCHLD already (to be ignored):
    /// reap with `WNOHANG` once after it, before the first wait.
    pub fn new() -> io::Result<Self> {
        // SAFETY: sigset_t is a plain bit set that sigemptyset fully
        // initialises; sigaddset, pthread_sigmask and signalfd read it and
        // write nothing but the process's signal state and a new
        // descriptor, which is owned here and nowhere else.
        unsafe {
            let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
            libc::sigemptyset(set.as_mut_ptr());
            let mut set = set.assume_init();
            libc::sigaddset(&mut set, libc::SIGCHLD);
            let r = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            if r != 0 {
                return Err(io::Error::from_raw_os_error(r));
            }
            let fd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(Self {
                fd: OwnedFd::from_raw_fd(fd),
            })
        }
    }

    /// Takes every pending SIGCHLD, so that the descriptor is readable
    /// again only at the next exit. Several exits may have merged into one
    /// signal: reap with `WNOHANG` until none is left after each drain.
    pub fn drain(&self) {
        let mut buf = [0u8; 4 * std::mem::size_of::<libc::signalfd_siginfo>()];
        while matches!(rustix::io::read(&self.fd, &mut buf), Ok(n) if n > 0) {}
    }
}

impl AsFd for ChildExits {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::event::{PollFd, PollFlags, Timespec, poll};

    fn readable(exits: &ChildExits) -> bool {
        let quick = Timespec {
            tv_sec: 0,
            tv_nsec: 20_000_000,
        };
        let mut fds = [PollFd::new(exits, PollFlags::IN)];
        poll(&mut fds, Some(&quick)).unwrap() == 1
    }

    #[test]
    fn readable_at_a_sigchld_and_drained_without_blocking() {
        let exits = ChildExits::new().unwrap();
        // To this thread, the one that blocks it. (Other tests in this
        // process start children too, whose exits can make it readable
        // at any time: only what must hold whatever they do is checked.)
        // SAFETY: raise(3) sends a signal to the calling thread; SIGCHLD
        // is blocked here, so it stays pending and runs no handler.
        assert_eq!(unsafe { libc::raise(libc::SIGCHLD) }, 0);
        assert!(readable(&exits), "not readable with a SIGCHLD pending");
        // Returns (the descriptor does not block) with nothing pending.
        exits.drain();
    }
}
