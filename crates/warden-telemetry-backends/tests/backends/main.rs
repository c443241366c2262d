//! The backends against the real thing: the receiver is sent exports by
//! the real OTLP exporter (`opentelemetry-otlp`), over HTTP and gRPC; the
//! faults are met with real connects and requests; Prometheus is Debian's,
//! scraping a real listener.

mod faults;
mod otlp_metrics;
mod otlp_receiver;
mod otlp_traces;
mod prometheus;
