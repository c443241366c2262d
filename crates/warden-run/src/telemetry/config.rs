//! What telemetry a process exports, and where: resolved once from
//! warden's settings (`--otel`, `--otel-protocol`, `--otel-flush`) and the
//! standard `OTEL_*` variables, per signal (traces, metrics), before
//! anything starts, so a bad value stops warden with its name.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

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
    /// `http://host:4317` for gRPC; `https://` for TLS).
    pub traces_endpoint: String,
    pub protocol: Protocol,
    /// For an `https://` endpoint: what to trust and the client's own
    /// certificate; `None` for `http://`.
    #[serde(default)]
    pub tls: Option<TlsFiles>,
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
    "OTEL_METRICS_EXPORTER",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
    "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT",
    "OTEL_METRIC_EXPORT_INTERVAL",
    "OTEL_EXPORTER_OTLP_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_CLIENT_KEY",
    "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY",
    "OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY",
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
        let flush = flush.unwrap_or(DEFAULT_FLUSH);
        Ok(Signal::Traces
            .resolve(endpoint, protocol, flush, &env)?
            .map(|e| Self {
                traces_endpoint: e.url,
                protocol: e.protocol,
                tls: e.tls,
                timeout: e.timeout,
                flush,
                agent_export: false,
            }))
    }
}

/// Where and how metrics go over OTLP.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetricsConfig {
    /// The URL metrics are sent to, whole (`http://host:4318/v1/metrics`,
    /// `http://host:4317` for gRPC; `https://` for TLS).
    pub endpoint: String,
    pub protocol: Protocol,
    /// As for spans.
    #[serde(default)]
    pub tls: Option<TlsFiles>,
    /// The most one export may take.
    pub timeout: Duration,
    /// How often the counts so far go out while the process lasts; they
    /// go out at its end in any case.
    pub interval: Duration,
}

/// How long one export may take when nothing else says (the OTLP
/// specification's default), and a flush bound of 0 does not cap it.
const DEFAULT_EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// How often metrics go out when `OTEL_METRIC_EXPORT_INTERVAL` does not
/// say (the OpenTelemetry default): a short `warden run` exports once, at
/// its end; a batch of hours shows its progress.
pub const DEFAULT_METRICS_INTERVAL: Duration = Duration::from_secs(60);

impl MetricsConfig {
    /// As [`ExportConfig::resolve`] does for traces, with the metrics'
    /// variables: `OTEL_METRICS_EXPORTER=none` turns them off,
    /// `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` is the whole URL, a base URL
    /// gets `/v1/metrics` over HTTP; `OTEL_METRIC_EXPORT_INTERVAL`
    /// (milliseconds) says how often they go out.
    /// `OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE` is read by the
    /// exporter itself (cumulative unless it says `delta`).
    pub fn resolve(
        endpoint: Option<&str>,
        protocol: Option<Protocol>,
        flush: Option<Duration>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, TelemetryError> {
        let flush = flush.unwrap_or(DEFAULT_FLUSH);
        let Some(SignalExport {
            url: endpoint,
            protocol,
            timeout,
            tls,
        }) = Signal::Metrics.resolve(endpoint, protocol, flush, &env)?
        else {
            return Ok(None);
        };
        let interval = match env("OTEL_METRIC_EXPORT_INTERVAL").filter(|v| !v.trim().is_empty()) {
            Some(ms) => match ms.trim().parse::<u64>() {
                Ok(n) if n > 0 => Duration::from_millis(n),
                _ => return Err(TelemetryError::Interval(ms)),
            },
            None => DEFAULT_METRICS_INTERVAL,
        };
        Ok(Some(Self {
            endpoint,
            protocol,
            tls,
            timeout,
            interval,
        }))
    }
}

/// Everything a process's telemetry does: OTLP traces, OTLP metrics, and
/// the metrics kept for a Prometheus endpoint, with one bound on the wait
/// at its end.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelemetryConfig {
    pub traces: Option<ExportConfig>,
    pub metrics: Option<MetricsConfig>,
    /// Keep the metrics in a Prometheus registry, for an endpoint to
    /// serve ([`super::Telemetry::prometheus_text`]).
    pub prometheus: bool,
    /// The most the end of the process waits for traces and metrics to
    /// go out, both together.
    pub flush: Duration,
}

impl TelemetryConfig {
    /// Traces and metrics as warden's settings and the `OTEL_*` variables
    /// say (see [`ExportConfig::resolve`], [`MetricsConfig::resolve`]);
    /// no Prometheus registry.
    pub fn resolve(
        endpoint: Option<&str>,
        protocol: Option<Protocol>,
        flush: Option<Duration>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, TelemetryError> {
        Ok(Self {
            traces: ExportConfig::resolve(endpoint, protocol, flush, &env)?,
            metrics: MetricsConfig::resolve(endpoint, protocol, flush, &env)?,
            prometheus: false,
            flush: flush.unwrap_or(DEFAULT_FLUSH),
        })
    }

    /// Also keeps the metrics for a Prometheus endpoint.
    pub fn with_prometheus(mut self) -> Self {
        self.prometheus = true;
        self
    }

    /// Nothing to export and nothing to keep.
    pub fn is_off(&self) -> bool {
        self.traces.is_none() && self.metrics.is_none() && !self.prometheus
    }
}

/// A kind of telemetry, as the `OTEL_*` variables name it.
#[derive(Debug, Clone, Copy)]
enum Signal {
    Traces,
    Metrics,
}

impl Signal {
    /// Its part of the per-signal variables' names.
    fn var(self) -> &'static str {
        match self {
            Signal::Traces => "TRACES",
            Signal::Metrics => "METRICS",
        }
    }

    /// The path a base URL gets over HTTP.
    fn path(self) -> &'static str {
        match self {
            Signal::Traces => "/v1/traces",
            Signal::Metrics => "/v1/metrics",
        }
    }

    /// The whole URL, the protocol, the export timeout and the TLS files
    /// (for `https://`) of this signal, from warden's settings first then
    /// the `OTEL_*` variables; `None` when it is off.
    fn resolve(
        self,
        endpoint: Option<&str>,
        protocol: Option<Protocol>,
        flush: Duration,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<SignalExport>, TelemetryError> {
        let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let signal = self.var();
        // A `--otel` endpoint is an explicit request: the switches that
        // turn export off apply to the one the environment gives.
        if endpoint.is_none() {
            if set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
                return Ok(None);
            }
            if set(&format!("OTEL_{signal}_EXPORTER")).is_some_and(|v| v.trim() == "none") {
                return Ok(None);
            }
        }
        let protocol = match protocol {
            Some(p) => p,
            None => match set(&format!("OTEL_EXPORTER_OTLP_{signal}_PROTOCOL"))
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
            Protocol::HttpProtobuf => format!("{}{}", url.trim_end_matches('/'), self.path()),
            Protocol::Grpc => url.to_string(),
        };
        let url = match endpoint {
            Some(e) => base(e.trim()),
            None => match set(&format!("OTEL_EXPORTER_OTLP_{signal}_ENDPOINT")) {
                Some(e) => e.trim().to_string(),
                None => match set("OTEL_EXPORTER_OTLP_ENDPOINT") {
                    Some(e) => base(e.trim()),
                    None => return Ok(None),
                },
            },
        };
        let tls = check_url(&url)?.then(|| {
            let file = |name: &str| {
                set(&format!("OTEL_EXPORTER_OTLP_{signal}_{name}"))
                    .or_else(|| set(&format!("OTEL_EXPORTER_OTLP_{name}")))
                    // Absolute: the agent (Codex wants it so) and a
                    // cluster node read it from elsewhere.
                    .map(|p| {
                        let p = std::path::PathBuf::from(p.trim());
                        std::path::absolute(&p).unwrap_or(p)
                    })
            };
            TlsFiles {
                ca: file("CERTIFICATE"),
                client_certificate: file("CLIENT_CERTIFICATE"),
                client_key: file("CLIENT_KEY"),
            }
        });
        // Read and checked now: a bad file stops warden before anything
        // runs, naming it.
        if let Some(files) = &tls {
            files.load()?;
        }
        let timeout = match set(&format!("OTEL_EXPORTER_OTLP_{signal}_TIMEOUT"))
            .or_else(|| set("OTEL_EXPORTER_OTLP_TIMEOUT"))
        {
            Some(ms) => Duration::from_millis(
                ms.trim()
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| TelemetryError::Timeout(ms.clone()))?,
            ),
            None => flush,
        };
        // One export never outlasts the flush bound; a bound of 0 (do not
        // wait at the end) leaves exports during the run their own
        // timeout, the OTLP default of 10 s.
        let timeout = match (timeout.is_zero(), flush.is_zero()) {
            (true, _) => DEFAULT_EXPORT_TIMEOUT,
            (false, true) => timeout,
            (false, false) => timeout.min(flush),
        };
        Ok(Some(SignalExport {
            url,
            protocol,
            timeout,
            tls,
        }))
    }
}

/// Where one signal goes, and how.
struct SignalExport {
    url: String,
    protocol: Protocol,
    timeout: Duration,
    tls: Option<TlsFiles>,
}

/// Whether `url` is a collector's URL with a host, and whether it asks
/// for TLS (`https://`).
fn check_url(url: &str) -> Result<bool, TelemetryError> {
    let (rest, tls) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
        (Some(rest), _) => (rest, false),
        (_, Some(rest)) => (rest, true),
        _ => return Err(TelemetryError::Endpoint(url.to_string())),
    };
    if rest.is_empty() || rest.starts_with('/') {
        return Err(TelemetryError::Endpoint(url.to_string()));
    }
    Ok(tls)
}

/// The files of an `https://` collector's TLS; all optional (the system's
/// certificates are trusted in any case).
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsFiles {
    /// PEM certificates to trust besides the system's (a private CA).
    pub ca: Option<PathBuf>,
    /// The client's PEM certificate chain, for a collector that asks for
    /// one (mutual TLS); with `client_key`.
    pub client_certificate: Option<PathBuf>,
    /// The client's PEM private key.
    pub client_key: Option<PathBuf>,
}

#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error(
        "the OTLP protocol `{0}` is not supported: use `http/protobuf` or `grpc` (OTEL_EXPORTER_OTLP_PROTOCOL or --otel-protocol)"
    )]
    Protocol(String),
    #[error(
        "the OTLP endpoint `{0}` is not an http:// or https:// URL with a host, such as http://127.0.0.1:4318"
    )]
    Endpoint(String),
    #[error("OTLP over TLS: {0}")]
    Tls(String),
    #[error(
        "OTEL_EXPORTER_OTLP_TIMEOUT `{0}` is not a number of milliseconds greater than 0, such as 5000"
    )]
    Timeout(String),
    #[error(
        "OTEL_METRIC_EXPORT_INTERVAL `{0}` is not a whole number of milliseconds above 0, such as 60000"
    )]
    Interval(String),
    #[error("the OTLP exporter could not be made: {0}")]
    Exporter(String),
    #[error(
        "telemetry was asked for ({0}), but this program was built without warden-run's `telemetry` feature: turn it on in the program's Cargo.toml (warden-run = {{ version = \"...\", features = [\"telemetry\"] }})"
    )]
    NotBuilt(&'static str),
    #[error(
        "--otel-agent: {0} has no trace export warden can switch on (Claude Code and Codex do, and `exec` gets the OTEL_* variables); its runs still get TRACEPARENT"
    )]
    AgentExport(&'static str),
}

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
        let e = ExportConfig::resolve(Some("ftp://c:4318"), None, None, env(&[])).unwrap_err();
        assert!(e.to_string().contains("http:// or https://"), "{e}");
        let e = ExportConfig::resolve(Some("c:4318"), None, None, env(&[])).unwrap_err();
        assert!(e.to_string().contains("`c:4318/v1/traces`"), "{e}");
    }

    #[test]
    fn metrics_go_to_the_same_collector_with_their_own_path_and_switches() {
        let c = TelemetryConfig::resolve(Some("http://h:4318/"), None, None, env(&[])).unwrap();
        let m = c.metrics.unwrap();
        assert_eq!(m.endpoint, "http://h:4318/v1/metrics");
        assert_eq!(m.protocol, Protocol::HttpProtobuf);
        assert_eq!(m.interval, DEFAULT_METRICS_INTERVAL);
        assert_eq!(m.timeout, DEFAULT_FLUSH);
        assert_eq!(c.traces.unwrap().traces_endpoint, "http://h:4318/v1/traces");
        assert!(!c.prometheus);

        let c = TelemetryConfig::resolve(
            None,
            None,
            Some(Duration::from_secs(2)),
            env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://m:4317"),
                ("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "grpc"),
                ("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "700"),
                ("OTEL_METRIC_EXPORT_INTERVAL", "1500"),
            ]),
        )
        .unwrap();
        let m = c.metrics.unwrap();
        assert_eq!(m.endpoint, "http://m:4317");
        assert_eq!(m.protocol, Protocol::Grpc);
        assert_eq!(m.timeout, Duration::from_millis(700));
        assert_eq!(m.interval, Duration::from_millis(1500));
        assert_eq!(c.flush, Duration::from_secs(2));
        // The traces' settings are their own.
        let t = c.traces.unwrap();
        assert_eq!(
            (t.traces_endpoint.as_str(), t.protocol),
            ("http://c:4318/v1/traces", Protocol::HttpProtobuf)
        );
        assert_eq!(t.timeout, Duration::from_secs(2));

        let base = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318");
        let c = TelemetryConfig::resolve(
            None,
            None,
            None,
            env(&[base, ("OTEL_METRICS_EXPORTER", "none")]),
        )
        .unwrap();
        assert!(c.metrics.is_none() && c.traces.is_some(), "{c:?}");
        let c = TelemetryConfig::resolve(
            None,
            None,
            None,
            env(&[base, ("OTEL_TRACES_EXPORTER", "none")]),
        )
        .unwrap();
        assert!(c.metrics.is_some() && c.traces.is_none(), "{c:?}");
        let c = TelemetryConfig::resolve(
            None,
            None,
            None,
            env(&[base, ("OTEL_SDK_DISABLED", "true")]),
        )
        .unwrap();
        assert!(c.is_off(), "{c:?}");
        assert!(!c.with_prometheus().is_off());

        let e = TelemetryConfig::resolve(
            None,
            None,
            None,
            env(&[base, ("OTEL_METRIC_EXPORT_INTERVAL", "1m")]),
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("OTEL_METRIC_EXPORT_INTERVAL `1m`"),
            "{e}"
        );
    }
}
