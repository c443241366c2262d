//! Received metrics, flattened: one [`MetricPoint`] per data point, with
//! its metric's name, kind and unit and its resource's attributes.

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::metrics::v1::{metric::Data, number_data_point};

pub use opentelemetry_proto::tonic::metrics::v1::AggregationTemporality;

use super::span::{Attributes, attributes};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    Sum,
    Gauge,
    Histogram,
    ExponentialHistogram,
    Summary,
}

/// A sum's or a gauge's value, as the exporter typed it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    Int(i64),
    Double(f64),
}

impl Number {
    pub fn as_f64(self) -> f64 {
        match self {
            // Exact for the counts tests make (below 2^53).
            Self::Int(i) => i as f64,
            Self::Double(d) => d,
        }
    }
}

/// One received data point.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct MetricPoint {
    pub name: String,
    pub description: String,
    pub unit: String,
    pub kind: MetricKind,
    /// For a sum: whether it only goes up.
    pub monotonic: bool,
    /// For a sum or a histogram.
    pub temporality: Option<AggregationTemporality>,
    pub attributes: Attributes,
    pub resource: Attributes,
    /// The instrumentation scope's name and version.
    pub scope: (String, String),
    pub start_unix_nano: u64,
    pub time_unix_nano: u64,
    /// A sum's or a gauge's value.
    pub value: Option<Number>,
    /// A histogram's or a summary's count of observations.
    pub count: Option<u64>,
    /// A histogram's or a summary's sum of observations, when sent.
    pub sum: Option<f64>,
    /// An explicit-bucket histogram's bucket bounds and counts (one more
    /// count than bounds).
    pub bounds: Vec<f64>,
    pub bucket_counts: Vec<u64>,
}

pub(crate) fn flatten(requests: &[ExportMetricsServiceRequest]) -> Vec<MetricPoint> {
    let mut out = Vec::new();
    for rm in requests.iter().flat_map(|r| &r.resource_metrics) {
        let resource = rm
            .resource
            .as_ref()
            .map(|r| attributes(&r.attributes))
            .unwrap_or_default();
        for sm in &rm.scope_metrics {
            let scope = sm
                .scope
                .as_ref()
                .map(|s| (s.name.clone(), s.version.clone()))
                .unwrap_or_default();
            for m in &sm.metrics {
                let point = |kind, attrs, start, time| MetricPoint {
                    name: m.name.clone(),
                    description: m.description.clone(),
                    unit: m.unit.clone(),
                    kind,
                    monotonic: false,
                    temporality: None,
                    attributes: attributes(attrs),
                    resource: resource.clone(),
                    scope: scope.clone(),
                    start_unix_nano: start,
                    time_unix_nano: time,
                    value: None,
                    count: None,
                    sum: None,
                    bounds: Vec::new(),
                    bucket_counts: Vec::new(),
                };
                let temporality = |t: i32| AggregationTemporality::try_from(t).ok();
                let number = |v: &Option<number_data_point::Value>| {
                    v.as_ref().map(|v| match v {
                        number_data_point::Value::AsInt(i) => Number::Int(*i),
                        number_data_point::Value::AsDouble(d) => Number::Double(*d),
                    })
                };
                match &m.data {
                    Some(Data::Sum(sum)) => {
                        for p in &sum.data_points {
                            out.push(MetricPoint {
                                monotonic: sum.is_monotonic,
                                temporality: temporality(sum.aggregation_temporality),
                                value: number(&p.value),
                                ..point(
                                    MetricKind::Sum,
                                    &p.attributes,
                                    p.start_time_unix_nano,
                                    p.time_unix_nano,
                                )
                            });
                        }
                    }
                    Some(Data::Gauge(gauge)) => {
                        for p in &gauge.data_points {
                            out.push(MetricPoint {
                                value: number(&p.value),
                                ..point(
                                    MetricKind::Gauge,
                                    &p.attributes,
                                    p.start_time_unix_nano,
                                    p.time_unix_nano,
                                )
                            });
                        }
                    }
                    Some(Data::Histogram(h)) => {
                        for p in &h.data_points {
                            out.push(MetricPoint {
                                temporality: temporality(h.aggregation_temporality),
                                count: Some(p.count),
                                sum: p.sum,
                                bounds: p.explicit_bounds.clone(),
                                bucket_counts: p.bucket_counts.clone(),
                                ..point(
                                    MetricKind::Histogram,
                                    &p.attributes,
                                    p.start_time_unix_nano,
                                    p.time_unix_nano,
                                )
                            });
                        }
                    }
                    Some(Data::ExponentialHistogram(h)) => {
                        for p in &h.data_points {
                            out.push(MetricPoint {
                                temporality: temporality(h.aggregation_temporality),
                                count: Some(p.count),
                                sum: p.sum,
                                ..point(
                                    MetricKind::ExponentialHistogram,
                                    &p.attributes,
                                    p.start_time_unix_nano,
                                    p.time_unix_nano,
                                )
                            });
                        }
                    }
                    Some(Data::Summary(s)) => {
                        for p in &s.data_points {
                            out.push(MetricPoint {
                                count: Some(p.count),
                                sum: Some(p.sum),
                                ..point(
                                    MetricKind::Summary,
                                    &p.attributes,
                                    p.start_time_unix_nano,
                                    p.time_unix_nano,
                                )
                            });
                        }
                    }
                    None => {}
                }
            }
        }
    }
    out
}

pub(crate) fn count(request: &ExportMetricsServiceRequest) -> usize {
    flatten(std::slice::from_ref(request)).len()
}
