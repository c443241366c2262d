//! Killing every descendant of a process, even ones that fork faster than
//! they can be found.
//!
//! A scan of /proc followed by SIGKILL to each pid found loses to a chain
//! that forks and exits in a loop: by the time the signal arrives, the pid
//! found is gone and its child is running. So the sweep freezes first and
//! kills second:
//!
//! 1. walk the tree from the root (each process's children, from
//!    `/proc/PID/task/*/children`: cheap, and complete for a process that
//!    is stopped, since a stopped process cannot fork);
//! 2. SIGSTOP every live process found that is not stopped yet, and its
//!    process group (which also catches a child forked since the walk);
//! 3. repeat until one walk finds every live process stopped: then the
//!    tree is complete and frozen, and nothing in it can fork;
//! 4. SIGKILL all of them (and `cgroup.kill` the run's cgroup), and walk
//!    again until nothing is left alive.
//!
//! A walk can miss a process: one that is re-parented (its parent exited)
//! after the list it moves into was read. So the root's list is read again
//! until it holds nothing new, and "nothing left" must be seen by several
//! walks in a row, over a few milliseconds, before it is believed.
//!
//! Every orphan of the run is re-parented to the subreaper shim whatever
//! its session, process group or cgroup, so the walk from the shim finds
//! processes that left the run's cgroup as well.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::os::{self, Signal, Target, cgroup::Cgroup, procfs};

/// A process a sweep killed.
#[derive(Debug)]
pub struct Killed {
    pub pid: i32,
    pub cmdline: String,
    /// It was outside the cgroup it was given (it moved itself out).
    pub escaped: bool,
}

/// What a sweep did.
#[derive(Debug, Default)]
pub struct Swept {
    /// The processes it SIGKILLed, with their command lines (read while
    /// they were stopped; only for the first [`NAMED`], empty after).
    pub killed: Vec<Killed>,
    /// Processes still alive when time ran out (stuck in the kernel, in
    /// uninterruptible sleep).
    pub left: Vec<i32>,
}

/// How many empty walks in a row, over how long, make "nothing left" true.
const CONFIRM_WALKS: u32 = 10;
const CONFIRM_TIME: Duration = Duration::from_millis(5);

/// How many killed processes have their command line read: a chain can
/// leave thousands.
pub const NAMED: usize = 64;

/// Stops, then kills, every descendant of `root` (and every process in
/// `cgroup`), within `limit`. `spare` lists process groups that must never
/// be signalled as a whole (the shim's and warden's own).
pub fn sweep(root: i32, cgroup: Option<&Cgroup>, spare: &[i32], limit: Duration) -> Swept {
    let until = Instant::now() + limit;
    let mut swept = Swept::default();
    let mut killed: HashSet<i32> = HashSet::new();
    let mut empty_since: Option<(Instant, u32)> = None;
    loop {
        let live = live_tree(root, cgroup);
        if live.is_empty() {
            let (since, walks) = empty_since.get_or_insert((Instant::now(), 0));
            *walks += 1;
            if (*walks >= CONFIRM_WALKS && since.elapsed() >= CONFIRM_TIME)
                || Instant::now() >= until
            {
                break;
            }
            std::thread::yield_now();
            continue;
        }
        empty_since = None;
        let frozen = live.iter().all(procfs::ProcEntry::is_stopped);
        let out_of_time = Instant::now() >= until;
        if frozen || out_of_time {
            if let Some(cg) = cgroup {
                let _ = cg.kill();
            }
            for p in &live {
                let named = swept.killed.len() < NAMED && !killed.contains(&p.pid);
                let cmdline = if named {
                    procfs::cmdline(p.pid)
                } else {
                    String::new()
                };
                let escaped = named && cgroup.is_some_and(|cg| cg.outside(p.pid).is_some());
                let _ = os::send(Target::Process(p.pid), Signal::Kill);
                if killed.insert(p.pid) {
                    swept.killed.push(Killed {
                        pid: p.pid,
                        cmdline,
                        escaped,
                    });
                }
            }
            if out_of_time {
                // One last look, after the kernel had a moment to act.
                std::thread::sleep(Duration::from_millis(20));
                swept.left = live_tree(root, cgroup).iter().map(|p| p.pid).collect();
                break;
            }
            // Killed processes take a moment to become zombies.
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        let mut groups: HashSet<i32> = HashSet::new();
        for p in live.iter().filter(|p| !p.is_stopped()) {
            let _ = os::send(Target::Process(p.pid), Signal::Stop);
            if p.pgid > 1 && !spare.contains(&p.pgid) {
                groups.insert(p.pgid);
            }
        }
        for g in groups {
            let _ = os::send(Target::Group(g), Signal::Stop);
        }
        // A stop takes effect when the process next runs; give it that.
        std::thread::yield_now();
    }
    swept
}

/// The live (not dead) processes under `root`, and in `cgroup`.
fn live_tree(root: i32, cgroup: Option<&Cgroup>) -> Vec<procfs::ProcEntry> {
    let mut seen: HashSet<i32> = HashSet::new();
    let mut out = Vec::new();
    let mut queue = procfs::children(root);
    if let Some(cg) = cgroup {
        queue.extend(cg.pids());
    }
    // Bounded: a chain could feed the root's list for ever.
    for _ in 0..8 {
        while let Some(pid) = queue.pop() {
            if pid == root || !seen.insert(pid) {
                continue;
            }
            let Some(e) = procfs::entry(pid) else {
                continue;
            };
            queue.extend(procfs::children(pid));
            if !e.is_dead() {
                out.push(e);
            }
        }
        // Orphans re-parented to the root while the walk went on.
        queue = procfs::children(root);
        queue.retain(|p| !seen.contains(p));
        if queue.is_empty() {
            break;
        }
    }
    out
}
