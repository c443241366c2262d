//! Metrics of runs, counted from each finished run's report: as OTLP
//! metrics (the OpenTelemetry SDK's meter provider, whose reader thread
//! exports them now and then and at the end of the process) and in a
//! Prometheus registry, which `warden batch --metrics-addr` serves while
//! the batch runs.
//!
//! One place records: `Metrics::record`, called once per run where its
//! report is final (the supervisor's `finish`), so both outputs always
//! say the same. Recording never waits: Prometheus counters are atomics
//! (a family takes a lock only to add a new label set), the SDK's
//! instruments aggregate in memory, and nothing touches the network on
//! the caller's thread.
//!
//! | OpenTelemetry (unit)                      | Prometheus                                   | labels                  |
//! |-------------------------------------------|----------------------------------------------|-------------------------|
//! | `warden.runs` (`{run}`)                   | `warden_runs_total`                          | agent, verdict          |
//! | `warden.run.duration` (`s`)               | `warden_run_duration_seconds` (histogram)    | agent, verdict          |
//! | `warden.time_to_first_activity` (`s`)     | `warden_time_to_first_activity_seconds`      | agent                   |
//! | `warden.tokens` (`{token}`)               | `warden_tokens_total`                        | agent, model, type      |
//! | `warden.cost.usd` (`{USD}`)               | `warden_cost_usd_total`                      | agent, model            |
//! | `warden.orphans_killed` (`{process}`)     | `warden_orphans_killed_total`                | agent                   |
//! | `warden.stall_warnings` (`{warning}`)     | `warden_stall_warnings_total`                | agent                   |
//! | `warden.batch.runs` (`{run}`, gauge)      | `warden_batch_runs` (gauge)                  | state                   |
//!
//! The OpenTelemetry names become the Prometheus ones under the usual
//! translation (dots to underscores, `_seconds` for `s`, braced units
//! dropped, `_total` for a monotonic sum), and the attribute keys are the
//! label names, so one query reads either path.
//!
//! Labels stay few: `agent` and `verdict` are warden's own names; `type`
//! is one of `input`, `output`, `cache_read`, `cache_write`, `reasoning`
//! (see `Tokens` in `run.json`); `model` is whatever the agent said, so it
//! is cut to [`MAX_MODEL_LEN`] characters, and past [`MAX_MODELS`]
//! distinct models in a process the rest count as `other` (`unknown` when
//! the run named none). Tokens are counted for runs whose agent reported
//! any, cost only where the agent reports one.

use std::collections::HashSet;
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, mpsc};

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Gauge, Histogram, Meter, MeterProvider as _};
use opentelemetry_otlp::{WithExportConfig, WithTonicConfig};
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter as PromCounter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge as PromGauge;
use prometheus_client::metrics::histogram::Histogram as PromHistogram;
use prometheus_client::registry::{Registry, Unit};

use super::{MetricsConfig, Protocol, TelemetryError};
use crate::Report;

/// Distinct `model` label values one process keeps; later ones are
/// `other`.
pub const MAX_MODELS: usize = 32;
/// The most characters of a `model` label value.
pub const MAX_MODEL_LEN: usize = 64;

/// The `Content-Type` of [`super::Telemetry::prometheus_text`].
pub const PROMETHEUS_CONTENT_TYPE: &str =
    prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// A run lasts from seconds (a failed start) to hours.
const DURATION_BUCKETS: [f64; 12] = [
    1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0,
];
/// An agent says something within a second or so, unless it is starting
/// slowly or stuck (the startup timeout is minutes).
const FIRST_ACTIVITY_BUCKETS: [f64; 11] = [
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// The states of `warden.batch.runs`.
const BATCH_STATES: [&str; 3] = ["queued", "running", "finished"];

/// The metrics of one process: OTLP, Prometheus, or both.
pub(crate) struct Metrics {
    models: ModelNames,
    prometheus: Option<Prom>,
    otlp: Option<Otlp>,
    config: Option<MetricsConfig>,
}

impl Metrics {
    /// Starts the meter provider when `otlp` says where metrics go (its
    /// reader thread starts now; the exporter touches no network until
    /// the first export), and keeps a Prometheus registry when
    /// `prometheus`.
    pub(crate) fn start(
        otlp: Option<&MetricsConfig>,
        prometheus: bool,
    ) -> Result<Self, TelemetryError> {
        Ok(Self {
            models: ModelNames::default(),
            prometheus: prometheus.then(Prom::new),
            otlp: otlp.map(Otlp::start).transpose()?,
            config: otlp.cloned(),
        })
    }

    pub(crate) fn config(&self) -> Option<&MetricsConfig> {
        self.config.as_ref()
    }

    pub(crate) fn prometheus(&self) -> bool {
        self.prometheus.is_some()
    }

    /// Counts one finished run, from its final report.
    pub(crate) fn record(&self, r: &Report) {
        let run = RunLabels {
            agent: agent_label(&r.agent),
            verdict: r.verdict.map_or("unknown", |v| v.as_str()),
            model: self.models.label(r.reported.model.as_deref()),
        };
        if let Some(p) = &self.prometheus {
            p.record(&run, r);
        }
        if let Some(o) = &self.otlp {
            o.record(&run, r);
        }
    }

    /// How many of a batch's entries wait, run, and have ended.
    pub(crate) fn batch_runs(&self, queued: usize, running: usize, finished: usize) {
        let counts = [queued, running, finished].map(|n| i64::try_from(n).unwrap_or(i64::MAX));
        for (state, n) in BATCH_STATES.into_iter().zip(counts) {
            if let Some(p) = &self.prometheus {
                p.batch.get_or_create(&StateLabel { state }).set(n);
            }
            if let Some(o) = &self.otlp {
                o.batch.record(n, &[KeyValue::new("state", state)]);
            }
        }
    }

    /// The Prometheus text (version 0.0.4) of what was counted so far.
    pub(crate) fn prometheus_text(&self) -> Option<String> {
        let p = self.prometheus.as_ref()?;
        let mut text = String::new();
        // Writing to a String fails only if an encoder does, which ours
        // never do: an empty answer then is still an answer.
        if prometheus_client::encoding::prometheus_text::encode(&mut text, &p.registry).is_err() {
            text.clear();
        }
        Some(text)
    }

    /// Starts the last OTLP export on a thread of its own; the receiver
    /// says whether it went (`true`) or failed. `None` without OTLP
    /// metrics, or when it was started before.
    pub(crate) fn end(&self) -> Option<mpsc::Receiver<bool>> {
        self.otlp.as_ref()?.end()
    }
}

/// The labels of one run.
struct RunLabels {
    agent: &'static str,
    verdict: &'static str,
    model: String,
}

/// The agent's name as warden spells it (a report of this version always
/// has one of them).
fn agent_label(agent: &str) -> &'static str {
    warden_events::Agent::ALL
        .iter()
        .find(|a| a.name() == agent)
        .map_or("other", |a| a.name())
}

/// Each count of a report's tokens, by its `type` label: what a counter
/// adds, so a count not known adds nothing.
fn token_counts(t: &warden_events::Tokens) -> [(&'static str, u64); 5] {
    [
        ("input", t.input),
        ("output", t.output),
        ("cache_read", t.cache_read),
        ("cache_write", t.cache_write),
        ("reasoning", t.reasoning),
    ]
    .map(|(label, count)| (label, count.unwrap_or(0)))
}

fn seconds(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

/// The `model` label values of a process: at most [`MAX_MODELS`].
#[derive(Default)]
struct ModelNames {
    seen: Mutex<HashSet<String>>,
}

impl ModelNames {
    fn label(&self, model: Option<&str>) -> String {
        let Some(model) = model.map(str::trim).filter(|m| !m.is_empty()) else {
            return "unknown".into();
        };
        // Control characters would make a label value no one can type in
        // a query; the agent's text is not trusted to be short.
        let name: String = model
            .chars()
            .take(MAX_MODEL_LEN)
            .map(|c| if c.is_control() { '_' } else { c })
            .collect();
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.contains(&name) {
            return name;
        }
        if seen.len() >= MAX_MODELS {
            return "other".into();
        }
        seen.insert(name.clone());
        name
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AgentVerdict {
    agent: &'static str,
    verdict: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AgentLabel {
    agent: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AgentModel {
    agent: &'static str,
    model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    agent: &'static str,
    model: String,
    r#type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

type Buckets = fn() -> PromHistogram;

/// The Prometheus registry and its metrics.
struct Prom {
    registry: Registry,
    runs: Family<AgentVerdict, PromCounter>,
    duration: Family<AgentVerdict, PromHistogram, Buckets>,
    first_activity: Family<AgentLabel, PromHistogram, Buckets>,
    tokens: Family<TokenLabels, PromCounter>,
    cost: Family<AgentModel, PromCounter<f64, AtomicU64>>,
    orphans: Family<AgentLabel, PromCounter>,
    stalls: Family<AgentLabel, PromCounter>,
    batch: Family<StateLabel, PromGauge>,
}

impl Prom {
    fn new() -> Self {
        let mut p = Self {
            registry: Registry::default(),
            runs: Family::default(),
            duration: Family::new_with_constructor(|| PromHistogram::new(DURATION_BUCKETS)),
            first_activity: Family::new_with_constructor(|| {
                PromHistogram::new(FIRST_ACTIVITY_BUCKETS)
            }),
            tokens: Family::default(),
            cost: Family::default(),
            orphans: Family::default(),
            stalls: Family::default(),
            batch: Family::default(),
        };
        let registry = &mut p.registry;
        // Counters are registered without `_total`: the encoder adds it
        // (and refuses a name that has it already).
        registry.register(
            "warden_runs",
            "Runs warden supervised to their end, by agent and verdict",
            p.runs.clone(),
        );
        registry.register_with_unit(
            "warden_run_duration",
            "How long runs lasted, by agent and verdict",
            Unit::Seconds,
            p.duration.clone(),
        );
        registry.register_with_unit(
            "warden_time_to_first_activity",
            "How long runs took to show their first activity, by agent",
            Unit::Seconds,
            p.first_activity.clone(),
        );
        registry.register(
            "warden_tokens",
            "Tokens the runs' agents reported, by agent, model and type",
            p.tokens.clone(),
        );
        registry.register(
            "warden_cost_usd",
            "Cost in US dollars the runs' agents reported, by agent and model",
            p.cost.clone(),
        );
        registry.register(
            "warden_orphans_killed",
            "Processes the runs left behind that warden killed, by agent",
            p.orphans.clone(),
        );
        registry.register(
            "warden_stall_warnings",
            "Warnings that a run was silent for long, by agent",
            p.stalls.clone(),
        );
        registry.register(
            "warden_batch_runs",
            "Entries of the batch by state: queued, running, finished",
            p.batch.clone(),
        );
        p
    }

    fn record(&self, run: &RunLabels, r: &Report) {
        let by_verdict = AgentVerdict {
            agent: run.agent,
            verdict: run.verdict,
        };
        let by_agent = AgentLabel { agent: run.agent };
        self.runs.get_or_create(&by_verdict).inc();
        self.duration
            .get_or_create(&by_verdict)
            .observe(seconds(r.duration_ms));
        if let Some(ms) = r.time_to_first_activity_ms {
            self.first_activity
                .get_or_create(&by_agent)
                .observe(seconds(ms));
        }
        if reported_tokens(r) {
            for (kind, n) in token_counts(&r.reported.tokens) {
                self.tokens
                    .get_or_create(&TokenLabels {
                        agent: run.agent,
                        model: run.model.clone(),
                        r#type: kind,
                    })
                    .inc_by(n);
            }
        }
        if let Some(usd) = cost(r) {
            self.cost
                .get_or_create(&AgentModel {
                    agent: run.agent,
                    model: run.model.clone(),
                })
                .inc_by(usd);
        }
        // Added even when zero: a series that exists from the first run
        // on makes `increase()` see the first orphan.
        self.orphans
            .get_or_create(&by_agent)
            .inc_by(u64::from(r.orphans_killed));
        self.stalls
            .get_or_create(&by_agent)
            .inc_by(u64::from(r.stall_warnings));
    }
}

/// The run's agent said how many tokens it used.
fn reported_tokens(r: &Report) -> bool {
    token_counts(&r.reported.tokens).iter().any(|(_, n)| *n > 0)
}

/// The run's cost, when its agent reported a usable one.
fn cost(r: &Report) -> Option<f64> {
    r.reported.cost_usd.filter(|c| c.is_finite() && *c >= 0.0)
}

/// The SDK's instruments, and what ends them.
struct Otlp {
    runs: Counter<u64>,
    duration: Histogram<f64>,
    first_activity: Histogram<f64>,
    tokens: Counter<u64>,
    cost: Counter<f64>,
    orphans: Counter<u64>,
    stalls: Counter<u64>,
    batch: Gauge<i64>,
    ending: Mutex<Option<Ending>>,
}

impl Otlp {
    fn start(cfg: &MetricsConfig) -> Result<Self, TelemetryError> {
        let bad = |e: &dyn std::fmt::Display| TelemetryError::Exporter(e.to_string());
        match cfg.protocol {
            Protocol::HttpProtobuf => {
                use opentelemetry_otlp::WithHttpConfig as _;
                let b = opentelemetry_otlp::MetricExporter::builder()
                    .with_http()
                    // As for spans: the protocol the settings chose, not
                    // the environment's.
                    .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                    .with_endpoint(&cfg.endpoint)
                    .with_timeout(cfg.timeout)
                    .with_http_client(super::http_client::Client::new(
                        cfg.timeout,
                        cfg.tls.as_ref(),
                    )?);
                let exporter = b.build().map_err(|e| bad(&e))?;
                Ok(Self::with_exporter(exporter, cfg.interval, None))
            }
            Protocol::Grpc => {
                // The reader's thread runs each export to its end without
                // a runtime of its own; tonic's connection needs one whose
                // reactor keeps going beside it: one worker thread.
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("warden-otel-metrics")
                    .enable_all()
                    .build()
                    .map_err(|e| bad(&e))?;
                let built = {
                    let _in = rt.enter();
                    // Its own channel, as for spans: the exporter's has
                    // no connect timeout.
                    tonic::transport::Endpoint::from_shared(cfg.endpoint.clone())
                        .map_err(|e| bad(&e))
                        .and_then(|endpoint| {
                            let endpoint =
                                endpoint.connect_timeout(cfg.timeout).timeout(cfg.timeout);
                            let endpoint = match &cfg.tls {
                                Some(tls) => endpoint
                                    .tls_config(tls.load()?.tonic(cfg.timeout)?)
                                    .map_err(|e| bad(&e))?,
                                None => endpoint,
                            };
                            let channel = endpoint.connect_lazy();
                            opentelemetry_otlp::MetricExporter::builder()
                                .with_tonic()
                                .with_channel(channel)
                                .with_timeout(cfg.timeout)
                                .build()
                                .map_err(|e| bad(&e))
                        })
                };
                match built {
                    Ok(exporter) => Ok(Self::with_exporter(exporter, cfg.interval, Some(rt))),
                    Err(e) => {
                        // A runtime may not be dropped inside another's
                        // async context (warden's main): dropped on a
                        // thread of its own.
                        let _ = std::thread::spawn(move || drop(rt)).join();
                        Err(e)
                    }
                }
            }
        }
    }

    /// The meter provider over `exporter`, read every `interval` and at
    /// the end; `runtime` is kept for the exporter until then.
    fn with_exporter<E: PushMetricExporter>(
        exporter: E,
        interval: std::time::Duration,
        runtime: Option<tokio::runtime::Runtime>,
    ) -> Self {
        let reader = PeriodicReader::builder(exporter)
            .with_interval(interval)
            .build();
        let provider = SdkMeterProvider::builder()
            .with_reader(reader)
            .with_resource(super::export::resource())
            .build();
        let meter = provider.meter_with_scope(
            opentelemetry::InstrumentationScope::builder("warden")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
        );
        Self::instruments(
            &meter,
            Ending {
                provider: Some(provider),
                runtime,
            },
        )
    }

    fn instruments(meter: &Meter, ending: Ending) -> Self {
        Self {
            runs: meter
                .u64_counter("warden.runs")
                .with_unit("{run}")
                .with_description("Runs warden supervised to their end, by agent and verdict")
                .build(),
            duration: meter
                .f64_histogram("warden.run.duration")
                .with_unit("s")
                .with_description("How long runs lasted, by agent and verdict")
                .with_boundaries(DURATION_BUCKETS.to_vec())
                .build(),
            first_activity: meter
                .f64_histogram("warden.time_to_first_activity")
                .with_unit("s")
                .with_description("How long runs took to show their first activity, by agent")
                .with_boundaries(FIRST_ACTIVITY_BUCKETS.to_vec())
                .build(),
            tokens: meter
                .u64_counter("warden.tokens")
                .with_unit("{token}")
                .with_description("Tokens the runs' agents reported, by agent, model and type")
                .build(),
            cost: meter
                .f64_counter("warden.cost.usd")
                .with_unit("{USD}")
                .with_description(
                    "Cost in US dollars the runs' agents reported, by agent and model",
                )
                .build(),
            orphans: meter
                .u64_counter("warden.orphans_killed")
                .with_unit("{process}")
                .with_description("Processes the runs left behind that warden killed, by agent")
                .build(),
            stalls: meter
                .u64_counter("warden.stall_warnings")
                .with_unit("{warning}")
                .with_description("Warnings that a run was silent for long, by agent")
                .build(),
            batch: meter
                .i64_gauge("warden.batch.runs")
                .with_unit("{run}")
                .with_description("Entries of the batch by state: queued, running, finished")
                .build(),
            ending: Mutex::new(Some(ending)),
        }
    }

    fn record(&self, run: &RunLabels, r: &Report) {
        let by_verdict = [
            KeyValue::new("agent", run.agent),
            KeyValue::new("verdict", run.verdict),
        ];
        let by_agent = [KeyValue::new("agent", run.agent)];
        self.runs.add(1, &by_verdict);
        self.duration.record(seconds(r.duration_ms), &by_verdict);
        if let Some(ms) = r.time_to_first_activity_ms {
            self.first_activity.record(seconds(ms), &by_agent);
        }
        let model = KeyValue::new("model", run.model.clone());
        if reported_tokens(r) {
            for (kind, n) in token_counts(&r.reported.tokens) {
                self.tokens.add(
                    n,
                    &[
                        by_agent[0].clone(),
                        model.clone(),
                        KeyValue::new("type", kind),
                    ],
                );
            }
        }
        if let Some(usd) = cost(r) {
            self.cost.add(usd, &[by_agent[0].clone(), model]);
        }
        self.orphans.add(u64::from(r.orphans_killed), &by_agent);
        self.stalls.add(u64::from(r.stall_warnings), &by_agent);
    }

    fn end(&self) -> Option<mpsc::Receiver<bool>> {
        let ending = self
            .ending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()?;
        let (tx, rx) = mpsc::channel();
        // If no thread can be had, the closure (and the ending in it) is
        // dropped here, which never waits (see `Ending`'s drop).
        let _ = std::thread::Builder::new()
            .name("warden-otel-metrics-end".into())
            .spawn(move || {
                let _ = tx.send(ending.finish());
            });
        Some(rx)
    }
}

impl Drop for Otlp {
    /// Never ended (the process's telemetry was dropped without a
    /// shutdown): the last export still goes, from a thread nobody waits
    /// for.
    fn drop(&mut self) {
        drop(self.end());
    }
}

/// The meter provider and the runtime its exporter needs, until the end.
struct Ending {
    provider: Option<SdkMeterProvider>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Ending {
    /// The last collection and export (the SDK waits up to 5 s for it,
    /// whatever it is told: run this where waiting harms nothing).
    fn finish(mut self) -> bool {
        let sent = self.provider.take().is_some_and(|p| p.shutdown().is_ok());
        // Dropped here, on a thread that may wait.
        drop(self.runtime.take());
        sent
    }
}

impl Drop for Ending {
    fn drop(&mut self) {
        // A provider not shut down would shut itself down in its drop (an
        // export, waited for up to 5 s) on whatever thread drops it: it is
        // left to the end of the process instead.
        if let Some(p) = self.provider.take() {
            std::mem::forget(p);
        }
        // Dropping a runtime inside another one's task panics; this may be
        // one.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests;
