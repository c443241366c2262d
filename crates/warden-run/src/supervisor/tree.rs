//! What the supervisor needs of a run's process tree, as a trait: the
//! real tree ([`RunTree`]: the shim, its cgroup, /proc) implements it, and
//! the loop's unit tests drive the loop with a tree of their own.

use std::future::Future;
use std::path::PathBuf;

use warden_process::resources::Applied;
use warden_process::{Containment, ProcessInfo, ResourceEvents, RunTree, ShimMessage, Signal};

use crate::pipe::Reader;

/// A run's process tree as the supervisor sees it: the agent's pipes, the
/// shim's reports, and the processes of the run.
pub(crate) trait Tree {
    /// The agent's own process.
    fn agent_pid(&self) -> i32;
    /// How the run is contained (its cgroup, or the shim alone).
    fn containment(&self) -> Containment;
    /// The resource limits in force.
    fn limits_applied(&self) -> &[Applied];
    /// What the kernel did at the limits, as last counted.
    fn resource_events(&self) -> ResourceEvents;
    /// The agent's stdout and stderr, taken once.
    fn take_output(&mut self) -> (Option<Reader>, Option<Reader>);
    /// The shim's next report; `None` once its channel is closed. Dropping
    /// the future loses no report.
    fn next_message(&mut self) -> impl Future<Output = Option<ShimMessage>> + Send;
    /// Every process of the run, by pid.
    fn pids(&self) -> Vec<i32>;
    /// Every process of the run, with its command line.
    fn processes(&self) -> Vec<ProcessInfo>;
    /// Whether `pid` holds the agent's stdout or stderr open.
    fn holds_output(&self, pid: i32) -> bool;
    /// The processes that hold the agent's stdout or stderr open.
    fn pipe_holders(&self) -> Vec<ProcessInfo>;
    /// Sends `signal` to every process of the run; says which got it.
    fn signal_all(&self, signal: Signal) -> Vec<ProcessInfo>;
    /// Where `pid` went if it moved itself out of the run's cgroup.
    fn outside_cgroup(&self, pid: i32) -> Option<PathBuf>;
    /// Ends the run's containment: the shim kills what is left and
    /// reports what its last sweep killed (`true`: it had left the cgroup).
    fn close(&mut self) -> impl Future<Output = Vec<(ProcessInfo, bool)>> + Send;
}

impl Tree for RunTree {
    fn agent_pid(&self) -> i32 {
        RunTree::agent_pid(self)
    }

    fn containment(&self) -> Containment {
        RunTree::containment(self)
    }

    fn limits_applied(&self) -> &[Applied] {
        RunTree::limits_applied(self)
    }

    fn resource_events(&self) -> ResourceEvents {
        RunTree::resource_events(self)
    }

    fn take_output(&mut self) -> (Option<Reader>, Option<Reader>) {
        (
            self.stdout.take().map(|r| Box::pin(r) as Reader),
            self.stderr.take().map(|r| Box::pin(r) as Reader),
        )
    }

    fn next_message(&mut self) -> impl Future<Output = Option<ShimMessage>> + Send {
        RunTree::next_message(self)
    }

    fn pids(&self) -> Vec<i32> {
        RunTree::pids(self)
    }

    fn processes(&self) -> Vec<ProcessInfo> {
        RunTree::processes(self)
    }

    fn holds_output(&self, pid: i32) -> bool {
        RunTree::holds_output(self, pid)
    }

    fn pipe_holders(&self) -> Vec<ProcessInfo> {
        RunTree::pipe_holders(self)
    }

    fn signal_all(&self, signal: Signal) -> Vec<ProcessInfo> {
        RunTree::signal_all(self, signal)
    }

    fn outside_cgroup(&self, pid: i32) -> Option<PathBuf> {
        RunTree::outside_cgroup(self, pid)
    }

    fn close(&mut self) -> impl Future<Output = Vec<(ProcessInfo, bool)>> + Send {
        RunTree::close(self)
    }
}
