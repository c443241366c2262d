//! Real telemetry backends for warden's tests, each on 127.0.0.1:
//!
//! * [`otlp::Receiver`]: an OTLP receiver over HTTP (protobuf) or gRPC,
//!   built from the protocol's own definitions (`opentelemetry-proto`),
//!   that records every export and hands the spans and metric points back
//!   flattened, with helpers to check a span tree ([`otlp::SpanTree`]);
//! * [`faults`]: collectors that refuse, hang, or never let a connect
//!   complete, to show that an exporter pointed at one costs a run no
//!   more than its flush bound;
//! * [`pki::TestPki`]: a CA of the test's own, for a receiver over TLS
//!   ([`otlp::Receiver::start_tls`]);
//! * [`proxy::ConnectProxy`]: an HTTP proxy that tunnels to one address;
//! * [`prometheus::Prometheus`]: Debian's Prometheus server, started in
//!   the foreground by the test to scrape one target and answer queries.
//!
//! All of them are blocking to use: tests are plain `#[test]` functions
//! that run the `warden` binary as a child process, so each server runs
//! on its own runtime thread.
//!
//! This is test support: it is not part of warden, and must never be used
//! outside tests.

#![forbid(unsafe_code)]

pub mod faults;
pub mod otlp;
pub mod pki;
pub mod prometheus;
pub mod proxy;
