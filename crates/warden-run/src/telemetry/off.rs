//! What stands in for the exporters when warden-run is built without its
//! `telemetry` feature: a span pipeline and a set of metrics that cannot
//! be made (starting either is an error naming the feature), so the
//! runs, sessions and batches that hold an `Option` of them compile
//! unchanged and always find `None`.

use std::sync::mpsc;
use std::time::Instant;

use super::spans::SpanRecord;
use super::{ExportConfig, Flushed, MetricsConfig, TelemetryError, TlsFiles};

/// No span exporter: there is no value of this type.
pub(super) enum Pipeline {}

impl Pipeline {
    pub(super) fn start(_: ExportConfig) -> Result<Self, TelemetryError> {
        Err(TelemetryError::NotBuilt("OTLP traces"))
    }

    pub(super) fn dropped(&self) -> u64 {
        match *self {}
    }

    pub(super) fn config(&self) -> &ExportConfig {
        match *self {}
    }

    pub(super) fn offer(&self, _: SpanRecord) -> bool {
        match *self {}
    }

    pub(super) fn shutdown(&self, _: Instant) -> Flushed {
        match *self {}
    }
}

/// No metrics: there is no value of this type.
pub(crate) enum Metrics {}

impl Metrics {
    pub(crate) fn start(
        otlp: Option<&MetricsConfig>,
        _prometheus: bool,
    ) -> Result<Self, TelemetryError> {
        Err(TelemetryError::NotBuilt(if otlp.is_some() {
            "OTLP metrics"
        } else {
            "the Prometheus metrics"
        }))
    }

    pub(crate) fn config(&self) -> Option<&MetricsConfig> {
        match *self {}
    }

    pub(crate) fn prometheus(&self) -> bool {
        match *self {}
    }

    pub(crate) fn record(&self, _: &crate::Report) {
        match *self {}
    }

    pub(crate) fn batch_runs(&self, _: usize, _: usize, _: usize) {
        match *self {}
    }

    pub(crate) fn prometheus_text(&self) -> Option<String> {
        match *self {}
    }

    pub(crate) fn end(&self) -> Option<mpsc::Receiver<bool>> {
        match *self {}
    }
}

impl TlsFiles {
    /// The files cannot be used without the exporters: asking for them
    /// is refused when the configuration is read, before anything runs.
    pub(crate) fn load(&self) -> Result<(), TelemetryError> {
        Err(TelemetryError::NotBuilt("OTLP over TLS"))
    }
}
