//! OpenTelemetry over OTLP: traces (a span per batch, session, iteration
//! and run, with a child per tool call and per model request) and metrics
//! (runs by verdict, durations, tokens, cost, orphans, stall warnings: see
//! the `metrics` module), so a fleet of runs shows up in the backends a user
//! already has. The same metrics can be kept for a Prometheus endpoint
//! (`warden batch --metrics-addr`), with or without OTLP.
//!
//! Off unless asked for (`--otel`, `OTEL_EXPORTER_OTLP_ENDPOINT`). A
//! span is made when its end is known, from the events' own times, and
//! handed to one export thread through a bounded queue: the supervisor
//! never waits for a collector. A full queue drops the span and counts it
//! (the count is in the report). A run's metrics are counted in memory
//! when its report is final, and exported by the SDK's reader thread. At
//! the end [`Telemetry::shutdown`] lets the spans' queue empty and the
//! metrics' last export run at the same time, and waits for both for at
//! most the flush bound (5 s by default): a dead, hanging or refusing
//! collector costs a run at most that, once.
//!
//! The ids of a run's span are chosen before the agent starts, and the
//! agent gets them as `TRACEPARENT` (W3C trace context), so an agent that
//! exports its own spans nests them under warden's run span.
//!
//! The exporters are warden-run's `telemetry` feature. Without it this
//! module keeps its configuration and trace ids, and [`Telemetry::start`]
//! refuses a configuration that asks for anything
//! ([`TelemetryError::NotBuilt`]).

mod config;
// The exporters are the `telemetry` feature; without it, `off` stands in
// for them (it cannot be started, so nothing else needs a `cfg`).
#[cfg(feature = "telemetry")]
mod export;
#[cfg(feature = "telemetry")]
mod http_client;
#[cfg(feature = "telemetry")]
#[cfg_attr(docsrs, doc(cfg(feature = "telemetry")))]
pub mod metrics;
#[cfg(not(feature = "telemetry"))]
mod off;
// Without the exporters, nothing reads the spans' contents.
mod flush;
#[cfg_attr(not(feature = "telemetry"), allow(dead_code))]
pub(crate) mod spans;
#[cfg(feature = "telemetry")]
mod tls;
mod trace_ids;
#[cfg(not(feature = "telemetry"))]
use off as export;
#[cfg(not(feature = "telemetry"))]
use off as metrics;

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use config::{
    DEFAULT_FLUSH, DEFAULT_METRICS_INTERVAL, ENV_VARS, ExportConfig, MetricsConfig, Protocol,
    TelemetryConfig, TelemetryError, TlsFiles,
};
#[cfg(feature = "telemetry")]
use flush::Count;
pub use flush::{Flushed, MetricsFlushed};
#[cfg(feature = "telemetry")]
#[cfg_attr(docsrs, doc(cfg(feature = "telemetry")))]
pub use metrics::PROMETHEUS_CONTENT_TYPE;
pub(crate) use spans::{RunSpans, SpanRecord, StepSpan};
pub use trace_ids::TraceIds;
#[cfg(feature = "telemetry")]
use trace_ids::fill_random;

/// What an agent's CLI is given to export its own spans.
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentExport {
    /// Variables for its environment.
    pub env: Vec<(String, String)>,
    /// Variables for its environment where the environment has none of
    /// that name (the user's own value wins).
    pub env_defaults: Vec<(String, String)>,
    /// Arguments added to its command line.
    pub args: Vec<String>,
}

/// What makes `agent`'s CLI export its own spans to `config`'s collector.
/// Claude Code: its telemetry with the (beta) enhanced traces, over OTLP,
/// only traces; Codex: its `otel.trace_exporter`; `exec`: the standard
/// variables an OpenTelemetry SDK reads.
pub fn agent_export(
    agent: warden_events::Agent,
    config: &ExportConfig,
) -> Result<AgentExport, TelemetryError> {
    use warden_events::Agent;
    // The collector's CA, as the variables' suffix and Codex's key name
    // it. Never warden's client certificate and key: the agent is not to
    // be trusted with warden's identity (a collector that asks for one
    // gets the agent's own export only if the user configures it).
    let tls: Vec<(&str, &str, String)> = config
        .tls
        .iter()
        .filter_map(|t| t.ca.as_ref())
        .map(|ca| ("CERTIFICATE", "ca-certificate", ca.display().to_string()))
        .collect();
    let standard = || {
        let mut env = vec![
            ("OTEL_TRACES_EXPORTER".to_string(), "otlp".to_string()),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT".to_string(),
                config.traces_endpoint.clone(),
            ),
            (
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL".to_string(),
                config.protocol.as_str().to_string(),
            ),
        ];
        for (var, _, path) in &tls {
            env.push((format!("OTEL_EXPORTER_OTLP_TRACES_{var}"), path.clone()));
        }
        env
    };
    match agent {
        Agent::Exec => Ok(AgentExport {
            env: standard(),
            ..AgentExport::default()
        }),
        Agent::Claude => {
            let mut env = standard();
            env.extend([
                ("CLAUDE_CODE_ENABLE_TELEMETRY".into(), "1".into()),
                ("CLAUDE_CODE_ENHANCED_TELEMETRY_BETA".into(), "1".into()),
            ]);
            // Its OTLP/HTTP exporter reads no certificate variable; Node
            // trusts this file besides its own roots (for every
            // connection of the CLI: it only adds trust).
            let env_defaults = config
                .tls
                .as_ref()
                .and_then(|t| t.ca.as_ref())
                .map(|ca| ("NODE_EXTRA_CA_CERTS".to_string(), ca.display().to_string()))
                .into_iter()
                .collect();
            Ok(AgentExport {
                env,
                env_defaults,
                args: Vec::new(),
            })
        }
        Agent::Codex => {
            let endpoint = toml_string(&config.traces_endpoint);
            // Its exporter's own TLS table (absolute paths, as Codex wants).
            let tls = if tls.is_empty() {
                String::new()
            } else {
                let keys: Vec<String> = tls
                    .iter()
                    .map(|(_, key, path)| format!("{key}={}", toml_string(path)))
                    .collect();
                format!(",tls={{{}}}", keys.join(","))
            };
            let exporter = match config.protocol {
                Protocol::HttpProtobuf => {
                    format!(r#"{{otlp-http={{endpoint={endpoint},protocol="binary"{tls}}}}}"#)
                }
                Protocol::Grpc => format!(r#"{{otlp-grpc={{endpoint={endpoint}{tls}}}}}"#),
            };
            Ok(AgentExport {
                args: vec!["-c".into(), format!("otel.trace_exporter={exporter}")],
                ..AgentExport::default()
            })
        }
        other => Err(TelemetryError::AgentExport(other.name())),
    }
}

/// `v` as a TOML basic string: quotes, backslashes and every control
/// character escaped.
fn toml_string(v: &str) -> String {
    let mut out = String::with_capacity(v.len() + 2);
    out.push('"');
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// OpenTelemetry export for one run: the process's telemetry (its spans,
/// its metrics) and the ids of the run's span (chosen before the agent
/// starts, which gets them as `TRACEPARENT` when spans are exported).
#[derive(Debug, Clone)]
pub(crate) struct RunTelemetry {
    pub(crate) exporter: Telemetry,
    pub(crate) ids: TraceIds,
    /// A session's check, hook or prompt command: what its run's span is
    /// named and says it is (`None`: an agent's run).
    pub(crate) step: Option<StepSpan>,
}

impl RunTelemetry {
    /// The process's top span as the run's: a run on its own.
    pub(crate) fn top(exporter: Telemetry) -> Self {
        Self {
            ids: exporter.top_span(),
            exporter,
            step: None,
        }
    }
}

/// Telemetry in a serialized request: where spans and metrics go, and
/// the parent span (another process's) as a `TRACEPARENT` value.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OtelRequest {
    /// Spans; `None` when only metrics are exported.
    pub export: Option<ExportConfig>,
    /// OTLP metrics: the node's warden counts the runs it supervises.
    #[serde(default)]
    pub metrics: Option<MetricsConfig>,
    /// The most the node's warden waits at its end for both to go out.
    #[serde(default = "default_flush")]
    pub flush: Duration,
    pub parent: String,
}

fn default_flush() -> Duration {
    DEFAULT_FLUSH
}

impl OtelRequest {
    /// What `telemetry` exports, for a run elsewhere under `parent`;
    /// `None` when it exports nothing (metrics kept only for this
    /// process's Prometheus endpoint).
    pub fn new(telemetry: &Telemetry, parent: &TraceIds) -> Option<Self> {
        let export = telemetry.traces_config().cloned();
        let metrics = telemetry.metrics_config().cloned();
        (export.is_some() || metrics.is_some()).then(|| Self {
            export,
            metrics,
            flush: telemetry.flush(),
            parent: parent.traceparent(),
        })
    }

    /// Starts its telemetry, whose top span nests under the parent.
    pub fn start(&self) -> Result<Option<Telemetry>, TelemetryError> {
        let config = TelemetryConfig {
            traces: self.export.clone(),
            metrics: self.metrics.clone(),
            prometheus: false,
            flush: self.flush,
        };
        let parent = TraceIds::from_traceparent(&self.parent);
        Ok(Telemetry::start(config)?.map(|t| match parent {
            Some(p) => t.with_parent(p, true),
            None => t,
        }))
    }
}

// Declared with the reports that hold it, which stand below every
// exporter; made here, from the trace's ids.
pub use crate::report::OtelReport;

impl OtelReport {
    pub(crate) fn new(ids: &TraceIds, spans: u64, dropped: u64) -> Self {
        Self {
            trace_id: ids.trace_id_hex(),
            span_id: ids.span_id_hex(),
            parent_span_id: ids.parent_span_id.map(|p| format!("{p:016x}")),
            spans,
            spans_dropped: dropped,
        }
    }
}

/// The telemetry of one process (its span exporter, its metrics): cheap
/// to clone, shared by every run, session and batch in it.
#[derive(Clone)]
pub struct Telemetry {
    inner: Arc<Shared>,
    /// The parent of what this process makes at its top, and whether it
    /// is another process's (an inbound `TRACEPARENT`, a cluster job's
    /// batch span) or a span of this one (a batch's, for its sessions).
    parent: Option<(TraceIds, bool)>,
}

struct Shared {
    /// `None`: no traces (only metrics).
    spans: Option<export::Pipeline>,
    /// `None`: neither OTLP metrics nor a Prometheus registry.
    metrics: Option<metrics::Metrics>,
    flush: Duration,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("traces", &self.traces_config())
            .field("metrics", &self.metrics_config())
            .field("prometheus", &self.prometheus())
            .finish_non_exhaustive()
    }
}

impl Telemetry {
    /// Starts what `config` asks for: the span export thread (the
    /// exporter is made there; an endpoint it refuses is an error here),
    /// the meter provider and its reader thread, the Prometheus registry.
    /// `None` when it asks for nothing. The parent of the top span is
    /// this process's `TRACEPARENT`, if it has one.
    pub fn start(config: TelemetryConfig) -> Result<Option<Self>, TelemetryError> {
        if config.is_off() {
            return Ok(None);
        }
        let spans = config.traces.map(export::Pipeline::start).transpose()?;
        let metrics = (config.metrics.is_some() || config.prometheus)
            .then(|| metrics::Metrics::start(config.metrics.as_ref(), config.prometheus))
            .transpose()?;
        Ok(Some(Self {
            inner: Arc::new(Shared {
                spans,
                metrics,
                flush: config.flush,
            }),
            parent: TraceIds::from_env().map(|p| (p, true)),
        }))
    }

    /// The same exporter, with `parent` as the parent of the top span:
    /// another process's span when `remote`.
    pub fn with_parent(&self, parent: TraceIds, remote: bool) -> Self {
        Self {
            inner: self.inner.clone(),
            parent: Some((parent, remote)),
        }
    }

    /// Spans are exported: runs, sessions and batches make them, and the
    /// agent gets its run's span as `TRACEPARENT`.
    pub fn traces(&self) -> bool {
        self.inner.spans.is_some()
    }

    pub fn traces_config(&self) -> Option<&ExportConfig> {
        self.inner.spans.as_ref().map(|p| p.config())
    }

    pub fn metrics_config(&self) -> Option<&MetricsConfig> {
        self.inner.metrics.as_ref().and_then(|m| m.config())
    }

    /// The metrics are kept for a Prometheus endpoint.
    pub fn prometheus(&self) -> bool {
        self.inner.metrics.as_ref().is_some_and(|m| m.prometheus())
    }

    /// The most [`Telemetry::shutdown`] waits.
    pub fn flush(&self) -> Duration {
        self.inner.flush
    }

    /// The ids of a new top span: under the inbound context if any.
    pub fn top_span(&self) -> TraceIds {
        match &self.parent {
            Some((p, true)) => TraceIds::under_remote(p),
            Some((p, false)) => p.child(),
            None => TraceIds::root(),
        }
    }

    /// Hands `spans` to the export thread without waiting: those that do
    /// not fit in its queue are dropped. Gives (handed, dropped). Spans of
    /// a trace that is not `sampled` (their ids say: an inbound parent
    /// decided so) are not handed.
    pub(crate) fn submit(&self, spans: Vec<SpanRecord>, sampled: bool) -> (u64, u64) {
        let Some(pipeline) = &self.inner.spans else {
            return (0, 0);
        };
        if !sampled {
            return (0, 0);
        }
        let mut dropped = 0;
        let n = spans.len() as u64;
        for s in spans {
            if !pipeline.offer(s) {
                dropped += 1;
            }
        }
        (n, dropped)
    }

    /// Counts a finished run in the metrics, from its final report: never
    /// waits (see the `metrics` module).
    pub(crate) fn record_run(&self, report: &crate::Report) {
        if let Some(m) = &self.inner.metrics {
            m.record(report);
        }
    }

    /// How many of a batch's entries are queued, running and finished:
    /// the `warden.batch.runs` gauge.
    pub(crate) fn batch_runs(&self, queued: usize, running: usize, finished: usize) {
        if let Some(m) = &self.inner.metrics {
            m.batch_runs(queued, running, finished);
        }
    }

    /// The metrics so far in the Prometheus text format (version 0.0.4,
    /// `PROMETHEUS_CONTENT_TYPE`); `None` when they are not kept for
    /// it.
    pub fn prometheus_text(&self) -> Option<String> {
        self.inner
            .metrics
            .as_ref()
            .and_then(|m| m.prometheus_text())
    }

    /// Every span dropped so far, in this process.
    pub fn dropped(&self) -> u64 {
        self.inner.spans.as_ref().map_or(0, |p| p.dropped())
    }

    /// Sends what is left, for at most the flush bound in all: the spans'
    /// queue empties and the metrics' last export runs at the same time,
    /// each on its own thread, and whatever is not done when the bound
    /// runs out is left behind (the process ends it). Later spans are
    /// dropped; later metrics are kept for the Prometheus endpoint only.
    pub fn shutdown(&self) -> Flushed {
        let deadline = std::time::Instant::now() + self.inner.flush;
        // Started first, so it runs while the spans' queue empties.
        let metrics_done = self.inner.metrics.as_ref().and_then(|m| m.end());
        let mut flushed = match &self.inner.spans {
            Some(p) => p.shutdown(deadline),
            None => Flushed::default(),
        };
        flushed.metrics = metrics_done.map(|done| {
            match done.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now())) {
                Ok(true) => MetricsFlushed::Sent,
                Ok(false) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    MetricsFlushed::Failed
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => MetricsFlushed::TimedOut,
            }
        });
        flushed
    }
}

/// The spans of a session: its own, and one per iteration (the parent of
/// that iteration's runs: its attempts and output retries).
pub(crate) struct SessionSpans {
    exporter: Telemetry,
    ids: TraceIds,
    started: std::time::SystemTime,
    iterations: Vec<IterationSpan>,
}

struct IterationSpan {
    iteration: u32,
    ids: TraceIds,
    start: std::time::SystemTime,
    end: std::time::SystemTime,
    runs: u32,
    verdict: Option<crate::Verdict>,
    reason: String,
}

impl SessionSpans {
    pub(crate) fn new(exporter: &Telemetry, started: std::time::SystemTime) -> Self {
        Self {
            ids: exporter.top_span(),
            exporter: exporter.clone(),
            started,
            iterations: Vec::new(),
        }
    }

    /// The telemetry of the next run of `iteration`, which starts now.
    pub(crate) fn run(&mut self, iteration: u32) -> RunTelemetry {
        let now = std::time::SystemTime::now();
        if self
            .iterations
            .last()
            .is_none_or(|i| i.iteration != iteration)
        {
            self.iterations.push(IterationSpan {
                iteration,
                ids: self.ids.child(),
                start: now,
                end: now,
                runs: 0,
                verdict: None,
                reason: String::new(),
            });
        }
        let it = self.iterations.last_mut().expect("just pushed");
        it.runs += 1;
        RunTelemetry {
            exporter: self.exporter.clone(),
            ids: it.ids.child(),
            step: None,
        }
    }

    /// The telemetry of a check, hook or prompt command (of `iteration`,
    /// if it has one), which starts now: its run's span, under the
    /// session's, named after what it is (see [`StepSpan::name`]).
    pub(crate) fn step(
        &mut self,
        kind: crate::StepKind,
        iteration: Option<u32>,
        command: &str,
    ) -> RunTelemetry {
        RunTelemetry {
            exporter: self.exporter.clone(),
            ids: self.ids.child(),
            step: Some(StepSpan {
                kind,
                iteration,
                command: command.to_string(),
            }),
        }
    }

    /// The last run of the current iteration ended as `run` says.
    pub(crate) fn run_ended(&mut self, run: &crate::Report) {
        if let Some(it) = self.iterations.last_mut() {
            it.end = std::time::SystemTime::now();
            it.verdict = run.verdict;
            it.reason = spans::cap(&run.reason, 1024);
        }
    }

    /// The session's span and its iterations', handed to the exporter;
    /// `None` when spans are not exported.
    pub(crate) fn finish(&mut self, r: &crate::session::SessionReport) -> Option<OtelReport> {
        use spans::{Kind, Value};
        if !self.exporter.traces() {
            return None;
        }
        let error = |v: Option<crate::Verdict>, reason: &str| match v {
            Some(crate::Verdict::Succeeded) => None,
            v => Some(format!("{}: {reason}", v.map_or("unknown", |v| v.as_str()))),
        };
        let mut all = Vec::new();
        for it in &self.iterations {
            let verdict = it.verdict.map_or("unknown", |v| v.as_str());
            all.push(SpanRecord {
                trace_id: it.ids.trace(),
                span_id: it.ids.span(),
                parent_span_id: it.ids.parent(),
                parent_is_remote: false,
                name: format!("iteration {}", it.iteration),
                kind: Kind::Internal,
                start: it.start,
                end: it.end,
                attributes: vec![
                    ("warden.iteration", Value::from(it.iteration)),
                    ("warden.runs", Value::from(it.runs)),
                    ("warden.verdict", verdict.into()),
                    ("warden.reason", it.reason.as_str().into()),
                ],
                events: Vec::new(),
                error: error(it.verdict, &it.reason),
            });
        }
        let verdict = r.verdict.map_or("unknown", |v| v.as_str());
        let stopped = r.stopped_because.as_str();
        let mut attributes: spans::Attributes = vec![
            ("warden.session_id", r.session_id.as_str().into()),
            ("warden.session_name", r.name.as_str().into()),
            ("warden.verdict", verdict.into()),
            ("warden.stopped_because", stopped.into()),
            ("warden.iterations_requested", r.iterations_requested.into()),
            ("warden.iterations_run", r.iterations_run.into()),
            (
                "warden.commits",
                (r.commits.as_ref().map_or(0, Vec::len) as u64).into(),
            ),
        ];
        for (name, count) in [
            ("gen_ai.usage.input_tokens", r.tokens.input),
            ("gen_ai.usage.output_tokens", r.tokens.output),
        ] {
            if let Some(c) = count {
                attributes.push((name, c.into()));
            }
        }
        if let Some(c) = r.cost_usd {
            attributes.push(("warden.cost_usd", c.into()));
        }
        // `session.json`'s `branch`: the branch the commits are on.
        if let Some(b) = &r.branch {
            attributes.push(("warden.branch", b.as_str().into()));
        }
        all.push(SpanRecord {
            trace_id: self.ids.trace(),
            span_id: self.ids.span(),
            parent_span_id: self.ids.parent(),
            parent_is_remote: self.ids.parent_is_remote,
            name: format!("session {}", r.name),
            kind: Kind::Internal,
            start: self.started,
            end: self.started + Duration::from_millis(r.duration_ms),
            attributes,
            events: Vec::new(),
            error: error(r.verdict, &format!("stopped by {stopped}")),
        });
        let (handed, dropped) = self.exporter.submit(all, self.ids.sampled());
        Some(OtelReport::new(&self.ids, handed, dropped))
    }
}

/// The batch's span, handed to the exporter: its children are its
/// entries' sessions.
pub(crate) fn batch_span(
    exporter: &Telemetry,
    ids: &TraceIds,
    started: std::time::SystemTime,
    r: &crate::batch_report::BatchReport,
) -> OtelReport {
    use spans::{Kind, Value};
    let ok = r.succeeded == r.runs.len();
    let span = SpanRecord {
        trace_id: ids.trace(),
        span_id: ids.span(),
        parent_span_id: ids.parent(),
        parent_is_remote: ids.parent_is_remote,
        name: format!("batch {}", r.batch_id),
        kind: Kind::Internal,
        start: started,
        end: started + Duration::from_millis(r.duration_ms),
        attributes: vec![
            ("warden.batch_id", r.batch_id.as_str().into()),
            ("warden.executor", r.executor.as_str().into()),
            ("warden.runs", Value::from(r.runs.len() as u64)),
            ("warden.succeeded", Value::from(r.succeeded as u64)),
            ("warden.failed", Value::from(r.failed as u64)),
            ("warden.cancelled", Value::from(r.cancelled as u64)),
            ("warden.never_ran", Value::from(r.never_ran.len() as u64)),
        ],
        events: Vec::new(),
        error: (!ok).then(|| {
            format!(
                "{} of {} run(s) did not succeed",
                r.runs.len() - r.succeeded,
                r.runs.len()
            )
        }),
    };
    let (handed, dropped) = exporter.submit(vec![span], ids.sampled());
    OtelReport::new(ids, handed, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "telemetry")]
    #[test]
    fn a_request_ships_the_metrics_with_the_spans_and_an_older_one_still_reads() {
        // Nothing listens at port 9: whatever is exported is refused at once.
        let flush = Duration::from_secs(2);
        let config =
            TelemetryConfig::resolve(Some("http://127.0.0.1:9"), None, Some(flush), |_| None)
                .unwrap();
        let t = Telemetry::start(config).unwrap().expect("on");
        let ids = t.top_span();
        let shipped = OtelRequest::new(&t, &ids).expect("something to ship");
        let json = serde_json::to_string(&shipped).unwrap();
        let read: OtelRequest = serde_json::from_str(&json).unwrap();
        assert_eq!(read, shipped);
        assert_eq!(read.flush, flush);
        assert_eq!(
            read.metrics.as_ref().map(|m| m.endpoint.as_str()),
            Some("http://127.0.0.1:9/v1/metrics")
        );
        let node = read.start().unwrap().expect("on");
        assert!(node.traces() && node.metrics_config().is_some());
        assert_eq!(node.flush(), flush);
        let under = node.top_span();
        assert_eq!(under.trace_id_hex(), ids.trace_id_hex());
        assert_eq!(under.parent(), Some(ids.span()));

        // A request from a warden that shipped only spans.
        let older = serde_json::json!({
            "export": serde_json::to_value(shipped.export.as_ref().unwrap()).unwrap(),
            "parent": ids.traceparent(),
        });
        let older: OtelRequest = serde_json::from_value(older).unwrap();
        assert!(older.metrics.is_none() && older.export.is_some());
        assert_eq!(older.flush, DEFAULT_FLUSH);

        // Metrics kept only for this process's Prometheus endpoint: a node
        // has nothing to export.
        let local = TelemetryConfig::resolve(None, None, None, |_| None)
            .unwrap()
            .with_prometheus();
        let local = Telemetry::start(local).unwrap().expect("on");
        assert!(OtelRequest::new(&local, &local.top_span()).is_none());
        for t in [t, node, local] {
            t.shutdown();
        }
    }

    #[cfg(not(feature = "telemetry"))]
    #[test]
    fn without_the_feature_an_export_is_refused_naming_it() {
        let config =
            TelemetryConfig::resolve(Some("http://127.0.0.1:9"), None, None, |_| None).unwrap();
        let e = Telemetry::start(config).expect_err("refused").to_string();
        assert!(
            e.contains("OTLP traces") && e.contains("`telemetry` feature"),
            "{e}"
        );
        let nothing = TelemetryConfig::resolve(None, None, None, |_| None).unwrap();
        let e = Telemetry::start(nothing.clone().with_prometheus())
            .expect_err("refused")
            .to_string();
        assert!(
            e.contains("Prometheus") && e.contains("`telemetry` feature"),
            "{e}"
        );
        // Asking for nothing needs nothing.
        assert!(Telemetry::start(nothing).unwrap().is_none());
        // TLS files are refused when the configuration is read.
        let env = |k: &str| match k {
            "OTEL_EXPORTER_OTLP_ENDPOINT" => Some("https://c:4318".to_string()),
            "OTEL_EXPORTER_OTLP_CERTIFICATE" => Some("/nonexistent/ca.pem".to_string()),
            _ => None,
        };
        let e = ExportConfig::resolve(None, None, None, env)
            .expect_err("refused")
            .to_string();
        assert!(
            e.contains("TLS") && e.contains("`telemetry` feature"),
            "{e}"
        );
    }

    #[cfg(feature = "telemetry")]
    #[test]
    fn an_agent_is_given_the_collector_s_ca_and_never_warden_s_client_key() {
        let dir = tempfile::tempdir().unwrap();
        // A name TOML must escape: a quote and a tab.
        let ca = dir.path().join("ca \"quoted\"\t.pem");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["warden".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        std::fs::write(&ca, cert.pem()).unwrap();
        let (client, client_key) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
        std::fs::write(&client, cert.pem()).unwrap();
        std::fs::write(&client_key, key.serialize_pem()).unwrap();
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://c:4318".to_string()),
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", ca.display().to_string()),
            (
                "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
                client.display().to_string(),
            ),
            (
                "OTEL_EXPORTER_OTLP_CLIENT_KEY",
                client_key.display().to_string(),
            ),
        ];
        let env = |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
        let config = ExportConfig::resolve(None, None, None, env)
            .unwrap()
            .unwrap();
        let tls = config.tls.as_ref().unwrap();
        assert_eq!(tls.client_key.as_deref(), Some(client_key.as_path()));
        let claude = agent_export(warden_events::Agent::Claude, &config).unwrap();
        assert!(claude.env.contains(&(
            "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE".to_string(),
            ca.display().to_string()
        )));
        assert!(
            !claude.env.iter().any(|(k, _)| k.contains("CLIENT")),
            "{:?}",
            claude.env
        );
        assert_eq!(
            claude.env_defaults,
            [("NODE_EXTRA_CA_CERTS".to_string(), ca.display().to_string())]
        );
        // Codex's `-c` value is TOML, with its exporter's own TLS table.
        let codex = agent_export(warden_events::Agent::Codex, &config).unwrap();
        let value = codex.args[1].strip_prefix("otel.trace_exporter=").unwrap();
        let parsed: toml::Table = toml::from_str(&format!("x = {value}")).unwrap();
        let http = &parsed["x"]["otlp-http"];
        assert_eq!(http["endpoint"].as_str(), Some("https://c:4318/v1/traces"));
        assert_eq!(
            http["tls"]["ca-certificate"].as_str(),
            Some(ca.to_str().unwrap())
        );
        assert!(http["tls"].get("client-private-key").is_none(), "{value}");
        assert!(http["tls"].get("client-certificate").is_none(), "{value}");
    }

    #[test]
    fn traceparent_round_trips_and_bad_ones_are_ignored() {
        let p =
            TraceIds::from_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
                .unwrap();
        let child = TraceIds::under_remote(&p);
        assert_eq!(child.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(child.parent_span_id, Some(0x00f0_67aa_0ba9_02b7));
        assert!(child.parent_is_remote);
        let tp = child.traceparent();
        assert!(
            tp.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"),
            "{tp}"
        );
        assert_eq!(
            TraceIds::from_traceparent(&tp).unwrap().span_id,
            child.span_id
        );
        assert!(tp.ends_with("-01"), "sampled as its parent: {tp}");
        // The sampled flag is bit 0 of the flags; the others are not ours.
        for (flags, sampled) in [("00", false), ("01", true), ("02", false), ("03", true)] {
            let p = TraceIds::from_traceparent(&format!(
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-{flags}"
            ))
            .unwrap();
            let grandchild = TraceIds::under_remote(&p).child();
            assert_eq!(grandchild.sampled(), sampled, "{flags}");
            let tp = grandchild.traceparent();
            assert_eq!(tp.ends_with("-01"), sampled, "{flags}: {tp}");
            assert_eq!(tp.ends_with("-00"), !sampled, "{flags}: {tp}");
        }
        assert!(TraceIds::root().sampled());
        for bad in [
            "",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
        ] {
            assert!(TraceIds::from_traceparent(bad).is_none(), "{bad}");
        }
    }
}
