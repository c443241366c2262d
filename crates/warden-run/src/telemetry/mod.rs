//! OpenTelemetry traces over OTLP: a span per batch, session, iteration
//! and run, with a child per tool call and per model request, so a fleet
//! of runs shows up in the tracing backend a user already has.
//!
//! Off unless asked for (`--otel`, `OTEL_EXPORTER_OTLP_ENDPOINT`). A
//! span is made when its end is known, from the events' own times, and
//! handed to one export thread through a bounded queue: the supervisor
//! never waits for a collector. A full queue drops the span and counts it
//! (the count is in the report); at the end [`Telemetry::shutdown`] waits
//! for the queue to empty for at most the flush bound (5 s by default),
//! so a dead, hanging or refusing collector costs a run at most that.
//!
//! The ids of a run's span are chosen before the agent starts, and the
//! agent gets them as `TRACEPARENT` (W3C trace context), so an agent that
//! exports its own spans nests them under warden's run span.

mod export;
pub(crate) mod spans;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub(crate) use spans::{RunSpans, SpanRecord};

/// How long the end of a process may wait for its spans to go out, when
/// nothing says (`--otel-flush`).
pub const DEFAULT_FLUSH: Duration = Duration::from_secs(5);

/// The wire protocol of the collector.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Protocol {
    /// OTLP over HTTP with protobuf bodies (`http/protobuf`, port 4318).
    #[default]
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
    /// OTLP over gRPC (`grpc`, port 4317).
    #[serde(rename = "grpc")]
    Grpc,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::HttpProtobuf => "http/protobuf",
            Protocol::Grpc => "grpc",
        }
    }
}

impl std::str::FromStr for Protocol {
    type Err = TelemetryError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "http/protobuf" => Ok(Protocol::HttpProtobuf),
            "grpc" => Ok(Protocol::Grpc),
            other => Err(TelemetryError::Protocol(other.to_string())),
        }
    }
}

/// Where and how spans go: resolved once, shipped in a run request to a
/// cluster node (whose warden exports its own runs' spans).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportConfig {
    /// The URL spans are sent to, whole (`http://host:4318/v1/traces`,
    /// `http://host:4317` for gRPC).
    pub traces_endpoint: String,
    pub protocol: Protocol,
    /// The most one export may take.
    pub timeout: Duration,
    /// The most the end of the process waits for the spans to go out.
    pub flush: Duration,
    /// Switch on the agent CLI's own trace export, to the same collector
    /// (Claude Code, Codex; the standard `OTEL_*` variables for `exec`):
    /// its spans nest under the run's through `TRACEPARENT`.
    #[serde(default)]
    pub agent_export: bool,
}

/// The environment variables [`ExportConfig::resolve`] reads.
pub const ENV_VARS: &[&str] = &[
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
];

impl ExportConfig {
    /// The configuration the standard `OTEL_*` variables (read through
    /// `env`) give, with warden's own settings first: `endpoint` (the
    /// collector's base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` takes it),
    /// `protocol`, `flush`. `None`: telemetry is off (no endpoint, or
    /// `OTEL_SDK_DISABLED=true`, or `OTEL_TRACES_EXPORTER=none`).
    /// `OTEL_EXPORTER_OTLP_HEADERS` and `OTEL_SERVICE_NAME` are read by the
    /// exporter itself.
    pub fn resolve(
        endpoint: Option<&str>,
        protocol: Option<Protocol>,
        flush: Option<Duration>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, TelemetryError> {
        let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        if endpoint.is_none() {
            if set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
                return Ok(None);
            }
            if set("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim() == "none") {
                return Ok(None);
            }
        }
        let protocol = match protocol {
            Some(p) => p,
            None => match set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                .or_else(|| set("OTEL_EXPORTER_OTLP_PROTOCOL"))
            {
                Some(p) => p.parse()?,
                None => Protocol::default(),
            },
        };
        // A base URL gets the signal's path over HTTP; the per-signal
        // variable is the whole URL already (as the OTLP specification
        // says).
        let base = |url: &str| match protocol {
            Protocol::HttpProtobuf => format!("{}/v1/traces", url.trim_end_matches('/')),
            Protocol::Grpc => url.to_string(),
        };
        let traces_endpoint = match endpoint {
            Some(e) => base(e.trim()),
            None => match set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
                Some(e) => e.trim().to_string(),
                None => match set("OTEL_EXPORTER_OTLP_ENDPOINT") {
                    Some(e) => base(e.trim()),
                    None => return Ok(None),
                },
            },
        };
        check_url(&traces_endpoint)?;
        let flush = flush.unwrap_or(DEFAULT_FLUSH);
        let timeout = match set("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
            .or_else(|| set("OTEL_EXPORTER_OTLP_TIMEOUT"))
        {
            Some(ms) => Duration::from_millis(
                ms.trim()
                    .parse()
                    .map_err(|_| TelemetryError::Timeout(ms.clone()))?,
            ),
            None => flush,
        };
        Ok(Some(Self {
            traces_endpoint,
            protocol,
            // One export never outlasts the flush bound.
            timeout: timeout.min(flush),
            flush,
            agent_export: false,
        }))
    }
}

fn check_url(url: &str) -> Result<(), TelemetryError> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| TelemetryError::Endpoint(url.to_string()))?;
    if rest.is_empty() || rest.starts_with('/') {
        return Err(TelemetryError::Endpoint(url.to_string()));
    }
    Ok(())
}

#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error(
        "the OTLP protocol `{0}` is not supported: use `http/protobuf` or `grpc` (OTEL_EXPORTER_OTLP_PROTOCOL or --otel-protocol)"
    )]
    Protocol(String),
    #[error(
        "the OTLP endpoint `{0}` is not a plain http:// URL with a host, such as http://127.0.0.1:4318 (TLS is not supported)"
    )]
    Endpoint(String),
    #[error("OTEL_EXPORTER_OTLP_TIMEOUT `{0}` is not a whole number of milliseconds, such as 5000")]
    Timeout(String),
    #[error("the OTLP exporter could not be made: {0}")]
    Exporter(String),
    #[error(
        "--otel-agent: {0} has no trace export warden can switch on (Claude Code and Codex do, and `exec` gets the OTEL_* variables); its runs still get TRACEPARENT"
    )]
    AgentExport(&'static str),
}

/// What an agent's CLI is given to export its own spans.
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentExport {
    /// Variables for its environment.
    pub env: Vec<(String, String)>,
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
    let standard = || {
        vec![
            ("OTEL_TRACES_EXPORTER".to_string(), "otlp".to_string()),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT".to_string(),
                config.traces_endpoint.clone(),
            ),
            (
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL".to_string(),
                config.protocol.as_str().to_string(),
            ),
        ]
    };
    match agent {
        Agent::Exec => Ok(AgentExport {
            env: standard(),
            args: Vec::new(),
        }),
        Agent::Claude => {
            let mut env = standard();
            env.extend([
                ("CLAUDE_CODE_ENABLE_TELEMETRY".into(), "1".into()),
                ("CLAUDE_CODE_ENHANCED_TELEMETRY_BETA".into(), "1".into()),
            ]);
            Ok(AgentExport {
                env,
                args: Vec::new(),
            })
        }
        Agent::Codex => {
            let endpoint = config
                .traces_endpoint
                .replace('\\', "\\\\")
                .replace('"', "\\\"");
            let exporter = match config.protocol {
                Protocol::HttpProtobuf => {
                    format!(r#"{{otlp-http={{endpoint="{endpoint}",protocol="binary"}}}}"#)
                }
                Protocol::Grpc => format!(r#"{{otlp-grpc={{endpoint="{endpoint}"}}}}"#),
            };
            Ok(AgentExport {
                env: Vec::new(),
                args: vec!["-c".into(), format!("otel.trace_exporter={exporter}")],
            })
        }
        other => Err(TelemetryError::AgentExport(other.name())),
    }
}

/// A span's place in a trace: the trace, the span, and its parent. In
/// reports as lower-case hex, as a `TRACEPARENT` writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceIds {
    trace_id: u128,
    span_id: u64,
    parent_span_id: Option<u64>,
    /// The parent is another process's (an inbound `TRACEPARENT`).
    parent_is_remote: bool,
}

impl TraceIds {
    pub(crate) fn new_span_id() -> u64 {
        loop {
            let mut b = [0u8; 8];
            fill_random(&mut b);
            let id = u64::from_ne_bytes(b);
            if id != 0 {
                return id;
            }
        }
    }

    fn new_trace_id() -> u128 {
        loop {
            let mut b = [0u8; 16];
            fill_random(&mut b);
            let id = u128::from_ne_bytes(b);
            if id != 0 {
                return id;
            }
        }
    }

    /// A span that starts a trace of its own.
    pub fn root() -> Self {
        Self {
            trace_id: Self::new_trace_id(),
            span_id: Self::new_span_id(),
            parent_span_id: None,
            parent_is_remote: false,
        }
    }

    /// A new span under `parent` (`None`: a new trace).
    pub fn under(parent: Option<&TraceIds>) -> Self {
        match parent {
            Some(p) => p.child(),
            None => Self::root(),
        }
    }

    /// A new span whose parent is this one.
    pub fn child(&self) -> Self {
        Self {
            trace_id: self.trace_id,
            span_id: Self::new_span_id(),
            parent_span_id: Some(self.span_id),
            parent_is_remote: false,
        }
    }

    /// The span context of a `TRACEPARENT` value (version 00), as the
    /// parent of what this process makes: `None` when it is not a valid
    /// one (it is then ignored, as the W3C specification asks).
    pub fn from_traceparent(value: &str) -> Option<Self> {
        let mut parts = value.trim().split('-');
        let (version, trace, span, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let hex = |s: &str, n: usize| {
            s.len() == n
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        if version != "00" || parts.next().is_some() || !hex(trace, 32) || !hex(span, 16) {
            return None;
        }
        if !hex(flags, 2) {
            return None;
        }
        let trace_id = u128::from_str_radix(trace, 16).ok().filter(|t| *t != 0)?;
        let span_id = u64::from_str_radix(span, 16).ok().filter(|s| *s != 0)?;
        // Used as a parent: the span "of" this value is the other
        // process's.
        Some(Self {
            trace_id,
            span_id,
            parent_span_id: None,
            parent_is_remote: false,
        })
    }

    /// The inbound context of this process (its `TRACEPARENT`), if any.
    pub fn from_env() -> Option<Self> {
        std::env::var("TRACEPARENT")
            .ok()
            .and_then(|v| Self::from_traceparent(&v))
    }

    /// A new span under an inbound context: its parent is remote.
    pub fn under_remote(parent: &TraceIds) -> Self {
        Self {
            parent_is_remote: true,
            ..parent.child()
        }
    }

    /// This span as a `TRACEPARENT` value, sampled.
    pub fn traceparent(&self) -> String {
        format!("00-{:032x}-{:016x}-01", self.trace_id, self.span_id)
    }

    pub fn trace_id_hex(&self) -> String {
        format!("{:032x}", self.trace_id)
    }

    pub fn span_id_hex(&self) -> String {
        format!("{:016x}", self.span_id)
    }

    pub(crate) fn trace(&self) -> u128 {
        self.trace_id
    }

    pub(crate) fn span(&self) -> u64 {
        self.span_id
    }

    pub(crate) fn parent(&self) -> Option<u64> {
        self.parent_span_id
    }
}

/// Fills `buf` from the kernel's random source (getrandom). Span ids must
/// not repeat across the processes of a fleet; nothing here needs them to
/// be secret.
fn fill_random(buf: &mut [u8]) {
    let mut filled = 0;
    while filled < buf.len() {
        match rustix::rand::getrandom(&mut buf[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            // Never seen on Linux ≥ 3.17; a clock-derived id is still
            // unique enough to keep a run going.
            Err(_) => {
                let t = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_nanos()
                    ^ u128::from(std::process::id()) << 64;
                for (i, b) in buf[filled..].iter_mut().enumerate() {
                    *b = (t >> ((i % 16) * 8)) as u8;
                }
                filled = buf.len();
            }
        }
    }
}

/// Telemetry in a serialized request: the exporter's configuration and
/// the parent span (another process's) as a `TRACEPARENT` value.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OtelRequest {
    pub export: ExportConfig,
    pub parent: String,
}

impl OtelRequest {
    pub fn new(export: &ExportConfig, parent: &TraceIds) -> Self {
        Self {
            export: export.clone(),
            parent: parent.traceparent(),
        }
    }

    /// Starts an exporter for it, whose top span nests under the parent.
    pub fn start(&self) -> Result<Telemetry, TelemetryError> {
        let t = Telemetry::start(self.export.clone())?;
        Ok(match TraceIds::from_traceparent(&self.parent) {
            Some(p) => t.with_parent(p, true),
            None => t,
        })
    }
}

/// What a report says of its span: in `run.json`, `session.json` and
/// `batch.json` as `otel` when telemetry is on.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OtelReport {
    /// The trace, as 32 lower-case hex digits.
    pub trace_id: String,
    /// This report's own span (the run's, the session's, the batch's).
    pub span_id: String,
    pub parent_span_id: Option<String>,
    /// Spans handed to the exporter for this report's span and its
    /// children (tool calls, model requests; a session's iterations).
    pub spans: u64,
    /// Spans of those that were dropped because the exporter's queue was
    /// full (the collector slow or down).
    pub spans_dropped: u64,
}

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

/// The exporter of one process: cheap to clone, shared by every run,
/// session and batch in it.
#[derive(Clone)]
pub struct Telemetry {
    inner: Arc<export::Pipeline>,
    /// The parent of what this process makes at its top, and whether it
    /// is another process's (an inbound `TRACEPARENT`, a cluster job's
    /// batch span) or a span of this one (a batch's, for its sessions).
    parent: Option<(TraceIds, bool)>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("config", self.inner.config())
            .finish_non_exhaustive()
    }
}

/// How the end of the export went.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flushed {
    /// Spans the collector took.
    pub exported: u64,
    /// Spans sent in exports that failed (refused, timed out).
    pub failed: u64,
    /// Spans dropped because the queue was full.
    pub dropped: u64,
    /// The flush bound ran out with spans still to send.
    pub timed_out: bool,
}

impl Telemetry {
    /// Starts the export thread (the exporter is made there; an endpoint
    /// it refuses is an error here). The parent of the top span is this
    /// process's `TRACEPARENT`, if it has one.
    pub fn start(config: ExportConfig) -> Result<Self, TelemetryError> {
        Ok(Self {
            inner: Arc::new(export::Pipeline::start(config)?),
            parent: TraceIds::from_env().map(|p| (p, true)),
        })
    }

    /// The same exporter, with `parent` as the parent of the top span:
    /// another process's span when `remote`.
    pub fn with_parent(&self, parent: TraceIds, remote: bool) -> Self {
        Self {
            inner: self.inner.clone(),
            parent: Some((parent, remote)),
        }
    }

    pub fn config(&self) -> &ExportConfig {
        self.inner.config()
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
    /// not fit in its queue are dropped. Gives (handed, dropped).
    pub(crate) fn submit(&self, spans: Vec<SpanRecord>) -> (u64, u64) {
        let mut dropped = 0;
        let n = spans.len() as u64;
        for s in spans {
            if !self.inner.offer(s) {
                dropped += 1;
            }
        }
        (n, dropped)
    }

    /// Every span dropped so far, in this process.
    pub fn dropped(&self) -> u64 {
        self.inner.dropped.load(Ordering::Relaxed)
    }

    /// Lets the queue empty, for at most the flush bound, then stops the
    /// export thread (left behind if the collector still holds it: the
    /// process ends it). Later spans are dropped.
    pub fn shutdown(&self) -> Flushed {
        self.inner.shutdown()
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
    pub(crate) fn run(&mut self, iteration: u32) -> crate::RunTelemetry {
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
        crate::RunTelemetry {
            exporter: self.exporter.clone(),
            ids: it.ids.child(),
        }
    }

    /// The last run of the current iteration ended as `run` says.
    pub(crate) fn run_ended(&mut self, run: &crate::Report) {
        if let Some(it) = self.iterations.last_mut() {
            it.end = std::time::SystemTime::now();
            it.verdict = run.verdict;
            it.reason.clone_from(&run.reason);
        }
    }

    /// The session's span and its iterations', handed to the exporter.
    pub(crate) fn finish(&mut self, r: &crate::session::SessionReport) -> OtelReport {
        use spans::{Kind, Value};
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
            ("warden.commits", (r.commits.len() as u64).into()),
            ("gen_ai.usage.input_tokens", r.tokens.input.into()),
            ("gen_ai.usage.output_tokens", r.tokens.output.into()),
        ];
        if let Some(c) = r.cost_usd {
            attributes.push(("warden.cost_usd", c.into()));
        }
        if let Some(wt) = &r.worktree {
            attributes.push(("warden.branch", wt.branch.as_str().into()));
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
        let (handed, dropped) = self.exporter.submit(all);
        OtelReport::new(&self.ids, handed, dropped)
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
    let (handed, dropped) = exporter.submit(vec![span]);
    OtelReport::new(ids, handed, dropped)
}

/// A counter shared with the export thread.
pub(crate) type Count = Arc<AtomicU64>;

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_endpoint_comes_from_the_flag_then_the_standard_variables() {
        let c = ExportConfig::resolve(Some("http://h:4318/"), None, None, env(&[]))
            .unwrap()
            .unwrap();
        assert_eq!(c.traces_endpoint, "http://h:4318/v1/traces");
        assert_eq!(c.protocol, Protocol::HttpProtobuf);
        assert_eq!(c.flush, DEFAULT_FLUSH);
        let c = ExportConfig::resolve(
            None,
            None,
            None,
            env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "700"),
            ]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.traces_endpoint, "http://c:4317");
        assert_eq!(c.protocol, Protocol::Grpc);
        assert_eq!(c.timeout, Duration::from_millis(700));
        // The per-signal URL is whole.
        let c = ExportConfig::resolve(
            None,
            None,
            None,
            env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:9/x"),
            ]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.traces_endpoint, "http://t:9/x");
    }

    #[test]
    fn telemetry_is_off_without_an_endpoint_or_when_disabled() {
        assert!(
            ExportConfig::resolve(None, None, None, env(&[]))
                .unwrap()
                .is_none()
        );
        for off in [
            ("OTEL_SDK_DISABLED", "true"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ] {
            let vars = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"), off];
            assert!(
                ExportConfig::resolve(None, None, None, env(&vars))
                    .unwrap()
                    .is_none()
            );
        }
    }

    #[test]
    fn bad_settings_are_named() {
        let e = ExportConfig::resolve(
            None,
            None,
            None,
            env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ]),
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("`http/json` is not supported"),
            "{e}"
        );
        let e = ExportConfig::resolve(Some("https://c:4318"), None, None, env(&[])).unwrap_err();
        assert!(e.to_string().contains("TLS is not supported"), "{e}");
        let e = ExportConfig::resolve(Some("c:4318"), None, None, env(&[])).unwrap_err();
        assert!(e.to_string().contains("`c:4318/v1/traces`"), "{e}");
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
