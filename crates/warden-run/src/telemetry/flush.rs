//! How an export ends, and the counters the export thread shares.

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
    /// How the last export of the metrics went; `None` without OTLP
    /// metrics.
    pub metrics: Option<MetricsFlushed>,
}

/// How the last export of the metrics went.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsFlushed {
    Sent,
    /// The collector refused them, or could not be reached in time.
    Failed,
    /// The flush bound ran out first.
    TimedOut,
}

/// A counter shared with the export thread.
#[cfg(feature = "telemetry")]
pub(crate) type Count = std::sync::Arc<std::sync::atomic::AtomicU64>;
