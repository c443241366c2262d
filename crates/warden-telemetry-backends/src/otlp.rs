//! An OTLP receiver for tests: it listens on 127.0.0.1 on an ephemeral
//! port, speaks OTLP/HTTP with protobuf bodies ([`Receiver::start_http`])
//! or OTLP/gRPC ([`Receiver::start_grpc`]), accepts traces and metrics,
//! and records every export request, decoded with the prost types of
//! `opentelemetry-proto` (the protocol's own definitions, not ours).
//!
//! It answers every well-formed export with success; a request it cannot
//! take (another path or method, OTLP/JSON, a body that does not decode)
//! gets a 4xx and is recorded in [`Receiver::rejected`], so a test whose
//! spans never came can say why.
//!
//! ```no_run
//! use std::time::Duration;
//! use warden_telemetry_backends::otlp::{Receiver, SpanTree};
//!
//! let rx = Receiver::start_http();
//! // ... run something that exports to rx.endpoint() ...
//! let spans = rx.wait_for_spans(2, Duration::from_secs(5));
//! let run = spans.one("warden.run");
//! assert_eq!(spans.children(run).len(), 1, "{}", spans.render());
//! ```

mod grpc;
mod http;
mod metric;
mod span;
mod tree;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

pub use metric::{AggregationTemporality, MetricKind, MetricPoint, Number};
pub use span::{AttrValue, Attributes, Span, SpanEvent, SpanKind, SpanLink, Status, StatusCode};
pub use tree::SpanTree;

/// How the receiver is spoken to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// OTLP/HTTP, protobuf bodies: `POST /v1/traces`, `POST /v1/metrics`.
    Http,
    /// OTLP/gRPC: `TraceService/Export`, `MetricsService/Export`.
    Grpc,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Traces,
    Metrics,
}

/// One export request the receiver accepted.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Export {
    pub signal: Signal,
    /// The HTTP headers or gRPC metadata, names in lower case (what
    /// `OTEL_EXPORTER_OTLP_HEADERS` adds shows up here).
    pub headers: BTreeMap<String, String>,
    /// Spans or data points in it.
    pub items: usize,
}

/// One request the receiver answered with an error.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Rejected {
    pub method: String,
    pub path: String,
    pub content_type: String,
    pub status: u16,
    pub reason: String,
}

#[derive(Default)]
struct Received {
    traces: Vec<ExportTraceServiceRequest>,
    metrics: Vec<ExportMetricsServiceRequest>,
    exports: Vec<Export>,
    rejected: Vec<Rejected>,
}

/// What the server tasks record into and the test thread waits on.
#[derive(Default)]
pub(crate) struct Store {
    received: Mutex<Received>,
    changed: Condvar,
}

impl Store {
    fn update(&self, f: impl FnOnce(&mut Received)) {
        f(&mut self.received.lock().expect("receiver store lock"));
        self.changed.notify_all();
    }

    pub(crate) fn traces(
        &self,
        request: ExportTraceServiceRequest,
        headers: BTreeMap<String, String>,
    ) {
        self.update(|r| {
            r.exports.push(Export {
                signal: Signal::Traces,
                headers,
                items: span::count(&request),
            });
            r.traces.push(request);
        });
    }

    pub(crate) fn metrics(
        &self,
        request: ExportMetricsServiceRequest,
        headers: BTreeMap<String, String>,
    ) {
        self.update(|r| {
            r.exports.push(Export {
                signal: Signal::Metrics,
                headers,
                items: metric::count(&request),
            });
            r.metrics.push(request);
        });
    }

    pub(crate) fn reject(&self, rejected: Rejected) {
        self.update(|r| r.rejected.push(rejected));
    }

    /// Waits until `done` holds of what was received, or `timeout`
    /// passes; returns whether it held.
    fn wait_until(&self, timeout: Duration, done: impl Fn(&Received) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut received = self.received.lock().expect("receiver store lock");
        loop {
            if done(&received) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            received = self
                .changed
                .wait_timeout(received, left)
                .expect("receiver store lock")
                .0;
        }
    }
}

/// A running OTLP receiver; it stops, closing its port and every open
/// connection, when dropped.
pub struct Receiver {
    addr: SocketAddr,
    transport: Transport,
    tls: bool,
    store: Arc<Store>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Receiver {
    /// An OTLP/HTTP (protobuf) receiver.
    pub fn start_http() -> Self {
        Self::start(Transport::Http)
    }

    /// An OTLP/gRPC receiver.
    pub fn start_grpc() -> Self {
        Self::start(Transport::Grpc)
    }

    pub fn start(transport: Transport) -> Self {
        Self::start_with(transport, None)
    }

    /// A receiver over TLS with a certificate `pki` signed (for
    /// 127.0.0.1); with `client_auth`, it takes only clients with a
    /// certificate `pki` signed (mutual TLS). Its endpoint is `https://`.
    pub fn start_tls(transport: Transport, pki: &crate::pki::TestPki, client_auth: bool) -> Self {
        Self::start_with(
            transport,
            Some(Tls {
                cert: pki.server_cert.clone(),
                key: pki.server_key.clone(),
                client_ca: client_auth.then(|| pki.ca_cert.clone()),
            }),
        )
    }

    fn start_with(transport: Transport, tls: Option<Tls>) -> Self {
        let secure = tls.is_some();
        // Bound here, on the caller's thread, so the address is known (and
        // connectable) before this returns.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("nonblocking listener");
        let addr = listener.local_addr().expect("local addr");
        let store = Arc::new(Store::default());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let state = store.clone();
        let thread = std::thread::Builder::new()
            .name(format!("otlp-receiver-{}", addr.port()))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("receiver runtime");
                rt.block_on(async move {
                    let listener =
                        tokio::net::TcpListener::from_std(listener).expect("tokio listener");
                    // On stop, leaving `block_on` drops the runtime and with
                    // it every connection task: an exporter's idle
                    // keep-alive connection cannot hold the receiver open.
                    tokio::select! {
                        () = serve(transport, listener, state, tls) => {}
                        _ = stopped => {}
                    }
                });
            })
            .expect("spawn receiver thread");
        Self {
            addr,
            transport,
            tls: secure,
            store,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    pub fn transport(&self) -> Transport {
        self.transport
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` (`https://` over TLS): the base URL, as
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` takes it (for HTTP, the exporter adds
    /// `/v1/traces` and `/v1/metrics`).
    pub fn endpoint(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// Every span received so far, in the order they arrived.
    pub fn spans(&self) -> Vec<Span> {
        span::flatten(&self.lock().traces)
    }

    /// Every metric data point received so far, in the order they arrived.
    pub fn metrics(&self) -> Vec<MetricPoint> {
        metric::flatten(&self.lock().metrics)
    }

    /// Every export request accepted so far.
    pub fn exports(&self) -> Vec<Export> {
        self.lock().exports.clone()
    }

    /// Every request answered with an error so far.
    pub fn rejected(&self) -> Vec<Rejected> {
        self.lock().rejected.clone()
    }

    /// The trace export requests as they were decoded, for what the flat
    /// [`Span`] leaves out.
    pub fn trace_requests(&self) -> Vec<ExportTraceServiceRequest> {
        self.lock().traces.clone()
    }

    /// The metric export requests as they were decoded.
    pub fn metric_requests(&self) -> Vec<ExportMetricsServiceRequest> {
        self.lock().metrics.clone()
    }

    /// The spans, once at least `n` have arrived. Panics, saying what did
    /// arrive, if they have not within `timeout`.
    pub fn wait_for_spans(&self, n: usize, timeout: Duration) -> Vec<Span> {
        let arrived = self.store.wait_until(timeout, |r| {
            r.traces.iter().map(span::count).sum::<usize>() >= n
        });
        let spans = self.spans();
        assert!(
            arrived,
            "expected {n} spans at {} within {timeout:?}, got {}:\n{}{}",
            self.endpoint(),
            spans.len(),
            spans.render(),
            self.rejections()
        );
        spans
    }

    /// The data points of the metric `name`, once one has arrived. Panics,
    /// saying what did arrive, if none has within `timeout`.
    pub fn wait_for_metric(&self, name: &str, timeout: Duration) -> Vec<MetricPoint> {
        let arrived = self.store.wait_until(timeout, |r| {
            metric::flatten(&r.metrics).iter().any(|p| p.name == name)
        });
        let points = self.metrics();
        assert!(
            arrived,
            "expected metric {name:?} at {} within {timeout:?}; got {:?}{}",
            self.endpoint(),
            points.iter().map(|p| &p.name).collect::<Vec<_>>(),
            self.rejections()
        );
        points.into_iter().filter(|p| p.name == name).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Received> {
        self.store.received.lock().expect("receiver store lock")
    }

    fn rejections(&self) -> String {
        self.rejected()
            .iter()
            .map(|r| {
                format!(
                    "\nrejected: {} {} ({}): {} {}",
                    r.method, r.path, r.content_type, r.status, r.reason
                )
            })
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // Quick: nothing waits for a connection to finish (see `start`).
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The server side of TLS: its certificate and key (PEM), and the CA
/// whose certificates clients must present (mutual TLS), if any.
#[derive(Clone)]
pub(crate) struct Tls {
    pub(crate) cert: String,
    pub(crate) key: String,
    pub(crate) client_ca: Option<String>,
}

async fn serve(
    transport: Transport,
    listener: tokio::net::TcpListener,
    store: Arc<Store>,
    tls: Option<Tls>,
) {
    match transport {
        Transport::Http => http::serve(listener, store, tls).await,
        Transport::Grpc => grpc::serve(listener, store, tls).await,
    }
}
