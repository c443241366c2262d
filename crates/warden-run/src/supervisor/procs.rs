//! The run's processes as the loop handles them: the orphans the agent
//! leaves, what escaped the cgroup, the signals, the output cut when the
//! drain window runs out, and the sandbox's own kill.

use std::time::{Duration, Instant};

use warden_events::{Event, Holder};
use warden_process::{ProcessInfo, Signal};

use super::phase::Exit;
use super::tree::Tree;
use super::{Pipes, Supervisor, quiet};
use crate::report::{Orphan, Truncation};

impl Supervisor {
    /// The agent was reaped: everything still alive now is an orphan. Name
    /// it, then send it `signal` at once while the pipes are still read.
    /// The sandbox's own helpers are not the agent's.
    pub(super) fn on_reaped(&mut self, tree: &impl Tree, exit: Exit, signal: Option<Signal>) {
        self.emit(Event::Exited {
            exit_code: exit.code,
            signal: exit.signal,
        });
        let found = self.agents_processes(tree);
        self.note_escapes(tree, &found);
        for p in found {
            let held_pipe = tree.holds_output(p.pid);
            self.emit(Event::Orphan {
                pid: p.pid,
                cmdline: p.cmdline.clone(),
                held_pipe,
            });
            self.procs.orphans.push(Orphan {
                pid: p.pid,
                cmdline: p.cmdline,
                held_pipe,
            });
        }
        if let Some(signal) = signal
            && !self.procs.orphans.is_empty()
        {
            self.signal_all(tree, signal);
        }
    }

    /// The drain window ran out with output still open: keep what was
    /// read, name who holds the pipes, and stop reading.
    pub(super) fn cut_output(&mut self, tree: &impl Tree, pipes: &mut Pipes, now: Instant) {
        if !pipes.open() {
            return;
        }
        let holders = tree
            .pipe_holders()
            .into_iter()
            .map(|p| Holder {
                pid: p.pid,
                cmdline: p.cmdline,
            })
            .collect::<Vec<_>>();
        let bytes = pipes.out.bytes + pipes.err.bytes;
        self.close_pipes(pipes, now);
        self.emit(Event::OutputTruncated {
            bytes,
            holders: holders.clone(),
        });
        self.streams.truncated = Some(Truncation { bytes, holders });
    }

    /// Stops reading both pipes, keeping a last line that had no newline.
    fn close_pipes(&mut self, pipes: &mut Pipes, now: Instant) {
        // What a container's stderr gate still holds goes to the log first.
        if self.streams.gate.is_some() {
            self.through_gate(pipes, 0);
        }
        for stream in [warden_events::Stream::Stdout, warden_events::Stream::Stderr] {
            pipes.get(stream).close(|line| self.on_line(line, now));
            self.after_lines(pipes, stream, now);
        }
    }

    /// The wait after SIGKILL ran out: what is left is named, and the
    /// shim, the tree and the output are no longer waited for.
    pub(super) fn give_up(&mut self, tree: &impl Tree, pipes: &mut Pipes, now: Instant) {
        if !self.procs.empty {
            // Judged after the shim's last sweep (in `after_close`): most
            // of these are a chain still being stopped.
            self.procs.final_left = tree
                .processes()
                .into_iter()
                .map(|p| (p.pid, p.cmdline))
                .collect();
        }
        self.procs.shim_open = false;
        self.procs.empty = true;
        if self.phase.exit().is_none() {
            self.note_error("the agent's exit status was never reported".into());
        }
        self.close_pipes(pipes, now);
    }

    /// Starts the sandbox's own kill (`docker rm -f`) without waiting.
    pub(super) fn start_sandbox_kill(&mut self) {
        if let Some(cmd) = &self.setup.on_kill
            && !self.procs.sandbox_kill_started
        {
            // The last count before the container and its cgroups go.
            if let Some(w) = &self.procs.limits_watch {
                w.sample();
            }
            self.procs.sandbox_kill_started = true;
            if let Err(e) = quiet(cmd).spawn() {
                self.note_error(format!("could not run `{}`: {e}", cmd[0].to_string_lossy()));
            }
        }
    }

    /// At the end of every run: make sure the sandbox left nothing (a
    /// container that outlived its client), waiting at most 10 s.
    pub(super) async fn remove_sandbox_leftovers(&mut self) {
        let Some(cmd) = self.setup.on_kill.clone() else {
            return;
        };
        if self.client_removed_the_container() {
            return;
        }
        match quiet(&cmd).spawn() {
            Ok(mut child) => {
                if tokio::time::timeout(Duration::from_secs(10), child.wait())
                    .await
                    .is_err()
                {
                    let _ = child.start_kill();
                    self.note_error(format!(
                        "`{}` did not finish within 10s",
                        cmd[0].to_string_lossy()
                    ));
                }
            }
            Err(e) => self.note_error(format!("could not run `{}`: {e}", cmd[0].to_string_lossy())),
        }
    }

    /// In a container: whether the engine, not the agent, failed, and the
    /// end of the sweep of dead wardens' containers this run started.
    ///
    /// The engine's client exits 125 when the engine fails (no daemon, an
    /// image that cannot be had) and 126 when it is refused the daemon's
    /// socket, but an agent may exit with either: the code does not tell.
    /// What does is whether the container ever existed: the client writes
    /// its id to the `--cidfile` as soon as the engine has created it,
    /// before anything of the agent runs, and the agent cannot write that
    /// file (it is in a directory of warden's own, outside the container). A
    /// client that exited non-zero on its own with no id written failed
    /// before there was a container: the run could not start, as when a
    /// program is not found (`spawn_failed`), and the reason quotes the
    /// engine and says what fixes it. A container that was created but
    /// never ran the agent (the runtime refused a mount; the image has no
    /// such program) is told by the engine's or its init's words as the
    /// first line of stderr ([`warden_sandbox::container::start_failure`]).
    /// Checked after the fact rather than
    /// by asking the engine about the image first, which would add its
    /// time (10 ms for `docker image inspect`, 30-40 ms for Podman's) to
    /// every run's start.
    pub(super) async fn judge_engine(&mut self) {
        let Some(c) = self.setup.container.as_mut() else {
            return;
        };
        if let Some(sweep) = c.sweep.take() {
            let _ = sweep.await;
        }
        let failed_by_itself = self.phase.cause().is_none()
            && self
                .phase
                .exit()
                .is_some_and(|e| e.signal.is_none() && e.code.is_some_and(|c| c != 0));
        // Read, and removed, off the clocks' thread.
        let Some(cid) = c.cid.take() else {
            return;
        };
        let created = tokio::task::spawn_blocking(move || cid.written())
            .await
            .unwrap_or(true);
        if !failed_by_itself || self.errors.spawn.is_some() {
            return;
        }
        let why = if created {
            // Created, and then it may never have run the agent.
            let code = self.phase.exit().and_then(|e| e.code).unwrap_or_default();
            let Some(why) = warden_sandbox::container::start_failure(
                c.sandbox,
                &c.image,
                code,
                &self.streams.stderr_head,
            ) else {
                return;
            };
            why
        } else {
            warden_sandbox::container::engine_failure(
                c.sandbox,
                &c.image,
                &self.streams.stderr_head,
            )
        };
        self.errors.spawn = Some(why.clone());
        self.note_error(why);
    }

    /// Whether the engine's client (`run --rm`) has removed the container
    /// itself: it exited on its own with the container's exit code, warden
    /// never signalled it nor started a removal, and nothing of the run
    /// was left to kill. Both engines' clients remove a `--rm` container
    /// before they exit, so asking the engine again would only cost a
    /// client's start-up (about a tenth of a second) on every run. 125 is
    /// the engine's own failure, after which a container may be left.
    fn client_removed_the_container(&self) -> bool {
        let exited = self
            .phase
            .exit()
            .is_some_and(|e| e.signal.is_none() && e.code.is_some_and(|c| c != 125));
        exited
            && self.phase.cause().is_none()
            && !self.procs.sandbox_kill_started
            && self.procs.orphans.is_empty()
    }

    /// SIGKILLs every process of the run (the final, bounded wait for the
    /// kernel to confirm is the `Killing` phase's).
    pub(super) fn kill_rest(&mut self, tree: &impl Tree) {
        self.start_sandbox_kill();
        // Processes that appeared after the exit (forked by orphans) are
        // orphans too.
        let found = self.agents_processes(tree);
        self.note_escapes(tree, &found);
        self.note_late_orphans(tree, found);
        // The kill's own scan can see what the one above missed (a chain
        // moves on between scans).
        let signalled = self.signal_all(tree, Signal::Kill);
        self.note_late_orphans(tree, signalled);
    }

    /// After the agent's exit, processes not seen before are orphans too.
    fn note_late_orphans(&mut self, tree: &impl Tree, found: Vec<ProcessInfo>) {
        if self.phase.exit().is_none() {
            return;
        }
        for p in found {
            if !self.procs.orphans.iter().any(|o| o.pid == p.pid)
                && !self.procs.sandbox_helpers.contains(&p.pid)
            {
                let held_pipe = tree.holds_output(p.pid);
                self.procs.orphans.push(Orphan {
                    pid: p.pid,
                    cmdline: p.cmdline,
                    held_pipe,
                });
            }
        }
    }

    /// Names the processes that moved themselves out of the run's cgroup:
    /// `cgroup.kill` misses them, the shim's sweep does not.
    fn note_escapes(&mut self, tree: &impl Tree, found: &[ProcessInfo]) {
        for p in found {
            if let Some(dir) = tree.outside_cgroup(p.pid) {
                let line = format!("{} `{}` (moved to {})", p.pid, p.cmdline, dir.display());
                self.note_escaped(line);
            }
        }
    }

    fn note_escaped(&mut self, line: String) {
        // A container's processes live in the cgroup its engine made for
        // it (Podman's are in the shim's tree, below `conmon`): that is
        // the engine's doing, not an escape, and the engine's removal
        // reaches them.
        if self.setup.on_kill.is_some() {
            return;
        }
        if !self.procs.escaped.contains(&line) && self.procs.escaped.len() < 16 {
            self.procs.escaped.push(line);
        }
    }

    /// The processes of the run but the sandbox's own helpers. The helpers
    /// are picked out before the listing: one that exits in between (its
    /// status gone, not yet reaped) is then never mistaken for the agent's.
    /// Every helper seen is remembered, so that a list made later (of what
    /// a kill found) can leave it out by pid.
    fn agents_processes(&mut self, tree: &impl Tree) -> Vec<ProcessInfo> {
        let sandbox = self.setup.sandbox;
        for pid in tree.pids() {
            if !self.procs.sandbox_helpers.contains(&pid) && sandbox.is_own_helper(pid) {
                self.procs.sandbox_helpers.push(pid);
            }
        }
        tree.processes()
            .into_iter()
            .filter(|p| !self.procs.sandbox_helpers.contains(&p.pid))
            .collect()
    }

    /// A process the shim's sweep killed after the agent had exited: an
    /// orphan, perhaps one that forked too fast for warden's scans.
    pub(super) fn on_swept(&mut self, pid: i32, cmdline: String, escaped: bool) {
        if escaped {
            self.note_escaped(format!("{pid} `{cmdline}`"));
        }
        if self.procs.orphans.iter().any(|o| o.pid == pid)
            || self.procs.sandbox_helpers.contains(&pid)
        {
            return;
        }
        self.emit(Event::Orphan {
            pid,
            cmdline: cmdline.clone(),
            held_pipe: false,
        });
        self.procs.orphans.push(Orphan {
            pid,
            cmdline,
            held_pipe: false,
        });
    }

    /// After the shim's last sweep: the orphans it reported, what left the
    /// cgroup, and what (if anything) truly survived SIGKILL.
    pub(super) fn after_close(&mut self, swept: Vec<(ProcessInfo, bool)>) {
        for (p, escaped) in swept {
            self.on_swept(p.pid, p.cmdline, escaped);
        }
        if !self.procs.escaped.is_empty() {
            self.note_error(format!(
                "processes moved themselves out of the run's cgroup, out of reach of \
                 cgroup.kill; they were stopped and killed as descendants of the run's shim: {}",
                self.procs.escaped.join(", ")
            ));
        }
        let alive: Vec<String> = self
            .procs
            .final_left
            .iter()
            .filter_map(|(pid, cmdline)| {
                let e = warden_process::os::procfs::entry(*pid)?;
                (!e.is_dead()).then(|| {
                    let why = match e.state {
                        b'D' => "in uninterruptible sleep in the kernel (state D)".to_string(),
                        s => format!("state {}", s as char),
                    };
                    format!("{pid} `{cmdline}` ({why})")
                })
            })
            .collect();
        if !alive.is_empty() {
            self.note_error(format!(
                "processes survived SIGKILL and the shim's stop-and-kill sweep: {}",
                alive.join(", ")
            ));
        }
    }

    /// SIGTERM for a container: to the engine's client alone, which
    /// passes it to the container's init and so to the agent, once. The
    /// rest of the tree is the engine's (Podman's `conmon` holds the
    /// container's output; the container's processes are below it): a
    /// SIGTERM of its own to each would cut the output and reach the
    /// agent twice. What is left at the end of the grace is killed.
    pub(super) fn signal_container(&mut self, tree: &impl Tree) {
        // The container may end at this signal, its cgroups with it.
        if let Some(w) = &self.procs.limits_watch {
            w.sample();
        }
        let client = tree.agent_pid();
        let Some(pid) = rustix::process::Pid::from_raw(client) else {
            return;
        };
        if rustix::process::kill_process(pid, rustix::process::Signal::TERM).is_ok() {
            self.emit(Event::Signalled {
                signal: Signal::Term.name().into(),
                pids: vec![client],
            });
        }
    }

    pub(super) fn signal_all(&mut self, tree: &impl Tree, signal: Signal) -> Vec<ProcessInfo> {
        let signalled = tree.signal_all(signal);
        let pids: Vec<i32> = signalled.iter().map(|p| p.pid).collect();
        if !pids.is_empty() {
            self.emit(Event::Signalled {
                signal: signal.name().into(),
                pids,
            });
        }
        signalled
    }
}
