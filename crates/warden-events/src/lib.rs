//! Pure decoding for warden: bytes in, lines and events out.
//!
//! This crate is what turns an agent's raw output into the normalized
//! [`Event`]s the supervisor acts on and the reports are built from. It must
//! never do I/O, read a clock or spawn anything: every function here is a
//! function of the bytes it is given, so it can be fuzzed, benchmarked and
//! snapshot-tested on recorded streams.
//!
//! - [`lines`]: split a byte stream into bounded lines, losslessly.
//! - [`signal`]: find a marker string in a stream, across chunk boundaries.
//! - [`event`]: the normalized event vocabulary.
//! - [`decoder`]: one decoder per agent behind one interface, and the
//!   [`Summary`] it builds; the agents are [`claude`], [`codex`],
//!   [`opencode`], [`pi`], [`gemini`] and [`exec`] (plain lines); [`stderr`]
//!   reads an agent's stderr, where some agents announce their retries.

pub mod agent;
pub mod claude;
pub mod codex;
mod cut;
pub mod decoder;
pub mod event;
pub mod exec;
pub mod figure;
pub mod gemini;
mod json;
pub mod lines;
pub mod opencode;
pub mod pi;
pub mod redact;
pub mod schema_version;
pub mod signal;
mod skim;
pub mod stderr;
pub mod summary;

pub use agent::{Agent, UnknownAgent, UsageReporting};
pub use decoder::{AgentDecoder, Decode, LineKind, StreamDecoder};
pub use event::{
    BudgetKind, BudgetScope, ErrorClass, Event, FigureProblem, Holder, OpenCall, Stream, Tokens,
};
pub use lines::{Line, LineSplitter};
pub use redact::Redactor;
pub use schema_version::{SCHEMA_VERSION, SchemaVersion};
pub use signal::SignalMatcher;
pub use summary::{AgentReport, Summary};
