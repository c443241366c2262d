//! Starting a program directly inside a cgroup: `clone3` with
//! `CLONE_INTO_CGROUP` (Linux 5.7).
//!
//! The other way, moving the parent into the cgroup for the fork and back
//! out after it, costs two migrations, and a migration waits on the
//! kernel's thread-group lock and an RCU grace period: milliseconds each,
//! on every run. A child cloned into the cgroup is in it from its first
//! instruction, and its parent never is.
//!
//! Where `clone3` or the flag cannot be used (an older kernel, a seccomp
//! filter that answers `ENOSYS` as container runtimes do, no permission
//! on the cgroup), [`spawn_into`] says so with [`CloneError::Unavailable`]
//! and the caller takes the migrating way.
//!
//! The same holds where the kernel kills the child before it runs. Since
//! Linux 6.14 a fork notes the `kill_seq` (how many times `cgroup.kill`
//! was written) of the *parent's* cgroup, then compares it with that of
//! the cgroup the child lands in, and SIGKILLs the child when they differ
//! (`cgroup_css_set_fork` reads `kargs->cgrp` before `CLONE_INTO_CGROUP`
//! has set it). So once anyone has written `cgroup.kill` on the cgroup
//! warden runs in, even while it was empty, every child cloned into a
//! fresh run cgroup dies at birth, and would be taken for an agent killed
//! by a signal warden never sent. The child therefore says it is alive
//! (one byte on the pipe) before anything else: a child that never said so
//! was killed before it ran, and the caller takes the migrating way, where
//! the fork happens inside the run's cgroup and the two counts agree.

use std::ffi::{CString, OsStr, OsString, c_char};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;

/// `CLONE_INTO_CGROUP` from `<linux/sched.h>`.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `struct clone_args` from `<linux/sched.h>`, up to `cgroup`
/// (`CLONE_ARGS_SIZE_VER2`): the same layout on every architecture.
#[repr(C, align(8))]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// A program, its arguments and its environment as the C strings `execve`
/// takes, made before the fork: the child only reads them.
pub struct Exec {
    program: CString,
    _strings: Vec<CString>,
    argv: Vec<*const c_char>,
    envp: Vec<*const c_char>,
}

impl Exec {
    /// `None` if a string holds a NUL byte (the caller's usual spawn then
    /// reports that as it always has).
    pub fn new(
        program: &OsStr,
        args: &[OsString],
        env: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Option<Self> {
        let c = |s: &OsStr| CString::new(s.as_bytes()).ok();
        let program = c(program)?;
        let mut strings = vec![program.clone()];
        for a in args {
            strings.push(c(a)?);
        }
        let argc = strings.len();
        for (k, v) in env {
            let mut pair = k.as_bytes().to_vec();
            pair.push(b'=');
            pair.extend_from_slice(v.as_bytes());
            strings.push(CString::new(pair).ok()?);
        }
        // The pointers stay valid: a CString's bytes live on the heap and
        // do not move when the Vec holding it does.
        let ptrs = |s: &[CString]| {
            s.iter()
                .map(|s| s.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect::<Vec<_>>()
        };
        let argv = ptrs(&strings[..argc]);
        let envp = ptrs(&strings[argc..]);
        Some(Self {
            program,
            _strings: strings,
            argv,
            envp,
        })
    }
}

/// Why [`spawn_into`] did not start the program.
#[derive(Debug)]
pub enum CloneError {
    /// `clone3` into the cgroup is not possible here: use another way.
    Unavailable(io::Error),
    /// The child was made, but its set-up or its exec failed (it has been
    /// reaped): the program could not be started.
    Spawn(io::Error),
}

/// Starts `exec` in a child born in the cgroup open at `cgroup` (a
/// directory of the cgroup v2 file system). `setup` runs in the child
/// before the exec, exactly as a `pre_exec` closure does; after its exec the
/// child searches `PATH` as `execvp` does. Returns the child's pid once the
/// exec has succeeded.
///
/// `setup` must be async-signal-safe (raw system calls, no allocation, no
/// locks): it runs in a forked copy of a process that may have threads.
pub fn spawn_into(
    cgroup: BorrowedFd<'_>,
    exec: &Exec,
    setup: &dyn Fn() -> io::Result<()>,
) -> Result<i32, CloneError> {
    // Tells the parent why the exec failed; closed by a successful exec.
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| CloneError::Unavailable(e.into()))?;
    let mut args = CloneArgs {
        flags: CLONE_INTO_CGROUP,
        exit_signal: libc::SIGCHLD as u64,
        cgroup: cgroup.as_raw_fd() as u64,
        ..CloneArgs::default()
    };
    // SAFETY: clone3 reads `args` (a valid clone_args of the size passed)
    // and, without CLONE_VM, CLONE_SETTLS or a stack, creates a child that
    // is a copy of this process, as fork(2) does: the child returns here
    // with 0 on its own copy of this stack. The raw system call skips
    // libc's fork handlers, so the child calls nothing that relies on
    // libc's per-thread state being updated (locks, malloc, raise, pthread
    // functions): only `child`, which makes raw async-signal-safe system
    // calls on memory prepared before the fork, and then execs or exits.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &mut args as *mut CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    if pid < 0 {
        return Err(CloneError::Unavailable(io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: write(2) is async-signal-safe; ALIVE is a static.
        unsafe {
            libc::write(write.as_raw_fd(), ALIVE.as_ptr().cast(), ALIVE.len());
        }
        let errno = child(exec, setup);
        let bytes = errno.to_ne_bytes();
        // SAFETY: write(2) and _exit(2) are async-signal-safe; `bytes`
        // lives on this stack.
        unsafe {
            libc::write(write.as_raw_fd(), bytes.as_ptr().cast(), bytes.len());
            libc::_exit(127);
        }
    }
    drop(write);
    let pid = pid as i32;
    // ALIVE, then the errno of a failed set-up or exec, if any.
    let mut buf = [0u8; 5];
    let mut got = 0;
    while got < buf.len() {
        match rustix::io::read(&read, &mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => break,
        }
    }
    if got == ALIVE.len() {
        // Alive, then end of file without a word: the exec closed the pipe.
        return Ok(pid);
    }
    // The child failed or was killed, and is gone: reap it, so that the
    // one to say how the program ended is never this child.
    let mut status = 0;
    // SAFETY: waitpid on our own child, writing into a local.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0
        && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
    {}
    if got == 0 {
        return Err(CloneError::Unavailable(io::Error::other(format!(
            "the child cloned into the cgroup was killed before it ran ({}):              a `cgroup.kill` written earlier on this process's cgroup makes the kernel kill              every child cloned into another one",
            if libc::WIFSIGNALED(status) {
                format!("signal {}", libc::WTERMSIG(status))
            } else {
                format!("wait status {status}")
            }
        ))));
    }
    let errno = i32::from_ne_bytes([buf[1], buf[2], buf[3], buf[4]]);
    Err(CloneError::Spawn(if got == buf.len() && errno > 0 {
        io::Error::from_raw_os_error(errno)
    } else {
        io::Error::other("the program's set-up failed before its exec")
    }))
}

/// What the child writes first: that it runs.
const ALIVE: [u8; 1] = [1];

/// In the child: the set-up, then the exec. Returns the errno that stopped
/// it (0 when the set-up failed without one).
fn child(exec: &Exec, setup: &dyn Fn() -> io::Result<()>) -> i32 {
    // As std's spawn does: no blocked signal, and SIGPIPE (which the Rust
    // runtime ignores) back at its default.
    // SAFETY: sigemptyset and sigprocmask on a local set, and signal(2),
    // are async-signal-safe and touch no other memory.
    unsafe {
        let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
        libc::sigemptyset(set.as_mut_ptr());
        libc::sigprocmask(libc::SIG_SETMASK, set.as_ptr(), std::ptr::null_mut());
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    if let Err(e) = setup() {
        return e.raw_os_error().unwrap_or(0);
    }
    // SAFETY: every pointer is to a NUL-terminated string made before the
    // fork, and both arrays end with a null pointer. execvpe searches PATH
    // as execvp (std's spawn) does, with buffers on the stack.
    unsafe {
        libc::execvpe(
            exec.program.as_ptr(),
            exec.argv.as_ptr(),
            exec.envp.as_ptr(),
        );
    }
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_strings_end_with_a_null_and_keep_their_order() {
        let exec = Exec::new(
            OsStr::new("prog"),
            &["a".into(), "b".into()],
            [("K".into(), "v".into())],
        )
        .unwrap();
        assert_eq!(exec.argv.len(), 4);
        assert!(exec.argv[3].is_null());
        assert_eq!(exec.envp.len(), 2);
        assert!(exec.envp[1].is_null());
        // SAFETY: the pointers are to the CStrings `exec` holds.
        let s = |p| unsafe { std::ffi::CStr::from_ptr(p) }.to_str().unwrap();
        assert_eq!(
            [s(exec.argv[0]), s(exec.argv[2]), s(exec.envp[0])],
            ["prog", "b", "K=v"]
        );
        assert!(Exec::new(OsStr::new("a\0b"), &[], []).is_none());
    }
}
