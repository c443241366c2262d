//! warden as a library: run AI coding agents (or any command) headless,
//! supervised so that a run never hangs, never leaks a process, never
//! loses output, and always says why it ended.
//!
//! - [`RunRequest`]: one run (or session of runs) described as data,
//!   `Serialize + Deserialize`: the agent, the prompt, limits, sandbox,
//!   output, worktree. [`RunRequest::check`] finds what cannot run before
//!   anything starts.
//! - [`Run`]: one supervised run of a request.
//! - [`Session`]: the iterations of a request (a fresh process each, in a
//!   new git worktree if asked, wrong structured output resumed with a
//!   correction, runs that ended by a transient failure tried again as
//!   [`retry::RetryPolicy`] says), ending in a [`SessionReport`].
//! - [`Batch`]: many requests, N at a time, cancel-all, one
//!   [`BatchReport`].
//!
//! All three have the same shape: `start()` gives a handle; the handle's
//! `next_update()` gives what happens as [`Update`]s, its `canceller()` a
//! [`Canceller`] to stop it from anywhere, and its `wait()` how it ended,
//! with a final verdict that is never unknown. `wait()` never needs the
//! updates read first.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use warden_run::{Agent, Run, RunRequest, Update};
//! let request = RunRequest::agent(Agent::Claude, "Fix the failing test");
//! let mut run = Run::new(request).start().await?; // checked: the CLI is installed, ...
//! while let Some(Update::Event { event, .. }) = run.next_update().await {
//!     println!("{} {:?}", event.t_ms, event.event);
//! }
//! let outcome = run.wait().await; // always returns, with a verdict
//! println!("{}: {}", outcome.verdict, outcome.report.reason);
//! # Ok(()) }
//! ```
//!
//! The crate's `examples/` (`agent_run`, `session`, `batch`) are whole
//! programs; the tests run each of them.
//!
//! A program that embeds this crate must call [`run_if_shim`] first thing
//! in `main`: each run's process tree is held by a small shim, which is
//! the program itself started again (see `warden_process::shim`). It
//! never prints to a terminal.
//!
//! # Features
//!
//! None is on by default: a program that supervises runs, sessions or
//! batches and reads their reports builds only that (53 crates, where
//! all of them take 190).
//!
//! - `telemetry`: OpenTelemetry export over OTLP (HTTP/protobuf or gRPC,
//!   with TLS) of spans and metrics, and the metrics as Prometheus text
//!   ([`telemetry::Telemetry`]). Without it the [`telemetry`] module keeps
//!   only its configuration and trace ids, and
//!   [`telemetry::Telemetry::start`] refuses a configuration that asks for
//!   an export, naming the feature.
//! - `junit`: a batch's report as a JUnit XML file (the `junit` module).
//! - `output-schema`: structured output checked against a JSON Schema
//!   ([`OutputRequest::schema`]). Without it, a run whose request has a
//!   schema fails to start with an error naming the feature.
//! - `full`: all of the above (what the `warden` CLI turns on).

#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod artifacts;
pub mod batch;
pub mod batch_key;
mod batch_plan;
pub mod batch_report;
pub mod budget;
mod clocks;
mod codex_thread;
mod container_sweep;
pub mod defaults;
pub mod executor;
pub mod gc;
pub mod git;
mod held_dir;
#[cfg(feature = "junit")]
#[cfg_attr(docsrs, doc(cfg(feature = "junit")))]
pub mod junit;
mod keys;
pub mod limits;
mod live;
pub mod logged_lines;
mod outcome;
mod output;
pub mod outputs;
mod pipe;
mod plan;
pub mod readback;
/// Reading a file of the work tree without following a link or blocking
/// on a FIFO; for the warden CLI, not part of the library's API.
#[doc(hidden)]
pub mod regular_file;
mod remove;
pub mod report;
mod request;
mod resources;
pub mod retry;
mod run;
pub mod session;
mod supervisor;
pub mod telemetry;
pub mod template;
pub mod timeline;
mod update;
mod verdict;

pub use batch::{Batch, BatchHandle, BatchOutcome, BatchStatus};
pub use batch_report::{BatchReport, BatchRun, JobReport};
pub use held_dir::{DirError, new_run_id};
pub use limits::{Limits, OnFatalError};
pub use outcome::Outcome;
pub use output::OutputError;
pub use report::Report;
pub use request::{
    CheckFailure, CheckFeedback, CheckRequest, ErrorKind, Finding, HooksRequest, IterationContext,
    OutputRequest, Prompt, RequestError, RetryOf, RunRequest, SessionRequest, WorktreeRequest,
};
pub use run::{Canceller, Run, RunHandle, SetupError};
pub use session::{
    Session, SessionHandle, SessionReport, SessionRun, StepKind, StepReport, StopReason,
    WorktreeReport,
};
pub use supervisor::Control;
pub use update::Update;
pub use verdict::Verdict;
pub use warden_events::event::Stamped;
pub use warden_events::{Agent, Event};
pub use warden_process::{ContainmentChoice, run_if_shim};
pub use warden_sandbox::env::EnvArg;
pub use warden_sandbox::{ContainerUser, Sandbox, SandboxChoice, SandboxOptions};
