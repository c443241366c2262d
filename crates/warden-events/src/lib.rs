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
//! - [`exec`]: the decoder for plain commands (one line, one event).

pub mod event;
pub mod exec;
pub mod lines;
pub mod signal;

pub use event::{Event, Holder, Stream};
pub use lines::{Line, LineSplitter};
pub use signal::SignalMatcher;
