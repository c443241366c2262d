//! Processes for warden: spawn, contain, find, signal, kill.
//!
//! This crate knows how to start a command so that every process it ever
//! creates can be found and killed, and how to tell who still holds its
//! output pipes. It knows nothing about agents, events or verdicts, and it
//! never reads the agent's output: that is the supervisor's job.
//!
//! - [`mod@spawn`]: start a run's process tree through its shim; [`RunTree`].
//! - [`shim`]: the per-run subreaper that warden re-executes itself as.
//! - [`sweep`]: stop, then kill, every process of a run.
//! - [`resources`]: memory, process and CPU limits for a run (written into
//!   its cgroups by [`os::limits`]).
//! - [`os`]: /proc, cgroups and signals, behind one module.

pub mod os;
pub mod protocol;
pub mod resources;
pub mod shim;
pub mod spawn;
pub mod sweep;

pub use os::{Signal, Target};
pub use protocol::ShimMessage;
pub use resources::{Controller, Cpus, Hierarchy, ResourceEvents, ResourceLimits};
pub use shim::{SHIM_MARK, run_if_shim, shim_file_matches, started_as_shim};
pub use spawn::{
    Containment, ContainmentChoice, ProcessInfo, RunTree, SpawnError, SpawnSpec, spawn,
};
