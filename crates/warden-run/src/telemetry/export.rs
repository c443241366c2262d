//! The export thread: spans in through a bounded queue, out through the
//! OTLP exporter (HTTP/protobuf or gRPC), in batches. Nothing here runs
//! on a thread that drives a run's clocks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry::trace::{
    Event, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_otlp::{WithExportConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter as _, SpanLinks};

use super::spans::{Kind, SpanRecord, Value};
use super::{Count, ExportConfig, Flushed, TelemetryError};

/// Spans waiting for the export thread; past this they are dropped.
const QUEUE: usize = 4096;
/// The most spans in one export.
const BATCH: usize = 512;
/// How long the thread gathers spans before it sends what it has.
const GATHER: Duration = Duration::from_millis(200);

pub(super) struct Pipeline {
    config: ExportConfig,
    queue: Mutex<Option<SyncSender<SpanRecord>>>,
    dropped: Count,
    /// Spans the queue took.
    queued: Count,
    exported: Count,
    failed: Count,
    done: Mutex<Option<mpsc::Receiver<()>>>,
}

impl Pipeline {
    pub(super) fn start(config: ExportConfig) -> Result<Self, TelemetryError> {
        let (tx, rx) = mpsc::sync_channel::<SpanRecord>(QUEUE);
        let (done_tx, done) = mpsc::channel();
        let (made_tx, made) = mpsc::channel();
        let exported: Count = Arc::new(AtomicU64::new(0));
        let failed: Count = Arc::new(AtomicU64::new(0));
        let cfg = config.clone();
        let (e, f) = (exported.clone(), failed.clone());
        std::thread::Builder::new()
            .name("warden-otel".into())
            .spawn(move || {
                let exporter = match Exporter::new(&cfg) {
                    Ok(x) => {
                        let _ = made_tx.send(Ok(()));
                        x
                    }
                    Err(err) => {
                        let _ = made_tx.send(Err(err));
                        return;
                    }
                };
                exporter.serve(rx, &e, &f);
                let _ = done_tx.send(());
            })
            .map_err(|e| TelemetryError::Exporter(format!("no thread for it: {e}")))?;
        // Making the exporter touches no network (connections are made on
        // the first export), so this is quick.
        match made.recv_timeout(config.flush.max(Duration::from_secs(1))) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(TelemetryError::Exporter("it did not start".into())),
        }
        Ok(Self {
            config,
            queue: Mutex::new(Some(tx)),
            dropped: Arc::new(AtomicU64::new(0)),
            queued: Arc::new(AtomicU64::new(0)),
            exported,
            failed,
            done: Mutex::new(Some(done)),
        })
    }

    /// Every span dropped so far.
    pub(super) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub(super) fn config(&self) -> &ExportConfig {
        &self.config
    }

    /// Queues `span`; `false` (and counted) when it had to be dropped.
    pub(super) fn offer(&self, span: SpanRecord) -> bool {
        let queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        let sent = match queue.as_ref() {
            Some(tx) => match tx.try_send(span) {
                Ok(()) => true,
                Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
            },
            None => false,
        };
        if sent {
            self.queued.fetch_add(1, Ordering::Relaxed);
        } else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        sent
    }

    /// Lets the queue empty until `deadline`, then leaves the thread
    /// behind.
    pub(super) fn shutdown(&self, deadline: Instant) -> Flushed {
        // Closing the queue tells the thread to send the rest and stop.
        drop(self.queue.lock().unwrap_or_else(|p| p.into_inner()).take());
        let done = self.done.lock().unwrap_or_else(|p| p.into_inner()).take();
        let ended =
            done.map(|rx| rx.recv_timeout(deadline.saturating_duration_since(Instant::now())));
        // Read once the thread is done (or the bound ran out).
        let exported = self.exported.load(Ordering::Relaxed);
        let mut failed = self.failed.load(Ordering::Relaxed);
        let timed_out = match ended {
            Some(Ok(())) | None => false,
            Some(Err(RecvTimeoutError::Timeout)) => true,
            // The thread died (a panic in the exporter): what it had
            // taken and not sent is lost, and said so.
            Some(Err(RecvTimeoutError::Disconnected)) => {
                failed = self.queued.load(Ordering::Relaxed).saturating_sub(exported);
                false
            }
        };
        Flushed {
            exported,
            failed,
            dropped: self.dropped.load(Ordering::Relaxed),
            timed_out,
            metrics: None,
        }
    }
}

/// The OTLP exporter, with what it needs to run: a runtime of its own for
/// gRPC (tonic needs one), none for HTTP (a blocking client).
enum Exporter {
    Http(opentelemetry_otlp::SpanExporter),
    Grpc(opentelemetry_otlp::SpanExporter, tokio::runtime::Runtime),
}

/// What the spans and the metrics of this process come from: warden, in
/// one process of its own (`service.instance.id`, drawn once per process,
/// unless `OTEL_RESOURCE_ATTRIBUTES` names one). A backend keys metric
/// series on the resource: without an instance, two warden processes
/// exporting the same counts at once would look like one series that
/// goes back and forth.
pub(super) fn resource() -> Resource {
    // `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` are read here.
    let mut b = Resource::builder();
    let given = |key: &str| {
        std::env::var("OTEL_RESOURCE_ATTRIBUTES")
            .is_ok_and(|v| v.split(',').any(|kv| kv.trim().starts_with(key)))
    };
    // The user's name for the service wins, from either variable.
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() && !given("service.name=") {
        b = b.with_service_name("warden");
    }
    if !given("service.instance.id=") {
        b = b.with_attribute(KeyValue::new("service.instance.id", instance_id()));
    }
    b.with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build()
}

/// This process's instance id: a random UUID (version 4), the same for
/// its spans and its metrics.
fn instance_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        let mut b = [0u8; 16];
        super::fill_random(&mut b);
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
        format!(
            "{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        )
    })
}

impl Exporter {
    fn new(cfg: &ExportConfig) -> Result<Self, TelemetryError> {
        let bad = |e: &dyn std::fmt::Display| TelemetryError::Exporter(e.to_string());
        let mut exporter = match cfg.protocol {
            super::Protocol::HttpProtobuf => {
                use opentelemetry_otlp::WithHttpConfig as _;
                let b = opentelemetry_otlp::SpanExporter::builder()
                    .with_http()
                    // Said here: else the SDK reads OTEL_EXPORTER_OTLP_PROTOCOL
                    // and refuses `grpc` over HTTP, against --otel-protocol.
                    .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                    .with_endpoint(&cfg.traces_endpoint)
                    .with_timeout(cfg.timeout)
                    .with_http_client(super::http_client::Client::new(
                        cfg.timeout,
                        cfg.tls.as_ref(),
                    )?);
                Exporter::Http(b.build().map_err(|e| bad(&e))?)
            }
            super::Protocol::Grpc => {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| bad(&e))?;
                let x = {
                    let _in = rt.enter();
                    // Its own channel: the exporter's has no connect
                    // timeout, and a connect that never completes would
                    // hold an export past every bound.
                    let mut endpoint =
                        tonic::transport::Endpoint::from_shared(cfg.traces_endpoint.clone())
                            .map_err(|e| bad(&e))?
                            .connect_timeout(cfg.timeout)
                            .timeout(cfg.timeout);
                    if let Some(tls) = &cfg.tls {
                        endpoint = endpoint
                            .tls_config(tls.load()?.tonic(cfg.timeout)?)
                            .map_err(|e| bad(&e))?;
                    }
                    let channel = endpoint.connect_lazy();
                    opentelemetry_otlp::SpanExporter::builder()
                        .with_tonic()
                        .with_channel(channel)
                        .with_timeout(cfg.timeout)
                        .build()
                        .map_err(|e| bad(&e))?
                };
                Exporter::Grpc(x, rt)
            }
        };
        let r = resource();
        match &mut exporter {
            Exporter::Http(x) | Exporter::Grpc(x, _) => x.set_resource(&r),
        }
        Ok(exporter)
    }

    fn export(&self, batch: Vec<SpanData>) -> bool {
        match self {
            Exporter::Http(x) => futures_executor::block_on(x.export(batch)).is_ok(),
            Exporter::Grpc(x, rt) => rt.block_on(x.export(batch)).is_ok(),
        }
    }

    /// Sends what comes, in batches, until the queue is closed and empty.
    fn serve(self, rx: mpsc::Receiver<SpanRecord>, exported: &AtomicU64, failed: &AtomicU64) {
        let mut batch: Vec<SpanData> = Vec::new();
        let mut since = Instant::now();
        let send = |batch: &mut Vec<SpanData>| {
            if batch.is_empty() {
                return;
            }
            let n = batch.len() as u64;
            let spans = std::mem::take(batch);
            if self.export(spans) {
                exported.fetch_add(n, Ordering::Relaxed);
            } else {
                failed.fetch_add(n, Ordering::Relaxed);
            }
        };
        loop {
            match rx.recv_timeout(GATHER) {
                Ok(span) => {
                    batch.push(span_data(span));
                    if batch.len() >= BATCH || since.elapsed() >= GATHER {
                        send(&mut batch);
                        since = Instant::now();
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    send(&mut batch);
                    since = Instant::now();
                }
                Err(RecvTimeoutError::Disconnected) => {
                    send(&mut batch);
                    return;
                }
            }
        }
    }
}

fn key_value(key: &'static str, v: Value) -> KeyValue {
    match v {
        Value::Str(s) => KeyValue::new(key, s),
        Value::Int(i) => KeyValue::new(key, i),
        Value::Float(f) => KeyValue::new(key, f),
        Value::Bool(b) => KeyValue::new(key, b),
    }
}

/// Our span as the exporter's type.
fn span_data(s: SpanRecord) -> SpanData {
    let mut events = SpanEvents::default();
    for e in s.events {
        events.events.push(Event::new(
            e.name,
            e.at,
            e.attributes
                .into_iter()
                .map(|(k, v)| key_value(k, v))
                .collect(),
            0,
        ));
    }
    let status = match s.error {
        Some(m) => Status::error(m),
        None => Status::Unset,
    };
    SpanData {
        span_context: SpanContext::new(
            TraceId::from_bytes(s.trace_id.to_be_bytes()),
            SpanId::from_bytes(s.span_id.to_be_bytes()),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ),
        parent_span_id: s
            .parent_span_id
            .map_or(SpanId::INVALID, |p| SpanId::from_bytes(p.to_be_bytes())),
        parent_span_is_remote: s.parent_is_remote,
        span_kind: match s.kind {
            Kind::Internal => SpanKind::Internal,
            Kind::Client => SpanKind::Client,
        },
        name: s.name.into(),
        start_time: s.start,
        end_time: s.end.max(s.start),
        attributes: s
            .attributes
            .into_iter()
            .map(|(k, v)| key_value(k, v))
            .collect(),
        dropped_attributes_count: 0,
        events,
        links: SpanLinks::default(),
        status,
        instrumentation_scope: InstrumentationScope::builder("warden")
            .with_version(env!("CARGO_PKG_VERSION"))
            .build(),
    }
}
