//! A counter, a histogram and a gauge, exported by the real SDK meter
//! provider and OTLP exporter at shutdown, come out of the receiver as
//! their data points.

use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider, Temporality};
use warden_telemetry_backends::otlp::{
    AggregationTemporality, AttrValue, MetricKind, Number, Receiver, Transport,
};

fn record_and_export(transport: Transport, rx: &Receiver) {
    let timeout = Duration::from_secs(5);
    // For gRPC the exporter is built inside a multi-thread runtime that
    // outlives the shutdown: the reader's own thread drives the export.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let exporter = match transport {
        Transport::Http => opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_endpoint(format!("{}/v1/metrics", rx.endpoint()))
            .with_timeout(timeout)
            .with_temporality(Temporality::Cumulative)
            .build(),
        Transport::Grpc => {
            let _entered = rt.enter();
            opentelemetry_otlp::MetricExporter::builder()
                .with_tonic()
                .with_endpoint(rx.endpoint())
                .with_timeout(timeout)
                .with_temporality(Temporality::Cumulative)
                .build()
        }
    }
    .expect("metric exporter");
    // An interval far past the test: the one export is shutdown's.
    let reader = PeriodicReader::builder(exporter)
        .with_interval(Duration::from_secs(3600))
        .build();
    let provider = SdkMeterProvider::builder()
        .with_reader(reader)
        .with_resource(
            Resource::builder_empty()
                .with_service_name("warden")
                .build(),
        )
        .build();
    let meter = provider.meter("warden");
    let attrs = [KeyValue::new("agent", "claude")];
    meter.u64_counter("warden.runs").build().add(3, &attrs);
    let duration = meter
        .f64_histogram("warden.run.duration")
        .with_unit("s")
        .with_boundaries(vec![1.0, 10.0])
        .build();
    duration.record(0.5, &attrs);
    duration.record(12.5, &attrs);
    meter.i64_gauge("warden.runs.active").build().record(4, &[]);
    provider.shutdown().expect("metrics shutdown exports");
    drop(rt);
}

fn points_decoded(transport: Transport) {
    let rx = Receiver::start(transport);
    record_and_export(transport, &rx);
    let claude = AttrValue::from("claude");

    let runs = rx.wait_for_metric("warden.runs", Duration::from_secs(5));
    assert_eq!(runs.len(), 1, "{runs:?}");
    let runs = &runs[0];
    assert_eq!(runs.kind, MetricKind::Sum);
    assert!(runs.monotonic);
    assert_eq!(runs.temporality, Some(AggregationTemporality::Cumulative));
    assert_eq!(runs.value, Some(Number::Int(3)));
    assert_eq!(runs.attributes.get("agent"), Some(&claude));
    assert_eq!(runs.resource["service.name"], AttrValue::from("warden"));
    assert_eq!(runs.scope.0, "warden");

    let points = rx.metrics();
    let duration: Vec<_> = points
        .iter()
        .filter(|p| p.name == "warden.run.duration")
        .collect();
    assert_eq!(duration.len(), 1, "{points:?}");
    let duration = duration[0];
    assert_eq!(duration.kind, MetricKind::Histogram);
    assert_eq!(duration.unit, "s");
    assert_eq!(duration.count, Some(2));
    assert_eq!(duration.sum, Some(13.0));
    assert_eq!(duration.bounds, [1.0, 10.0]);
    assert_eq!(duration.bucket_counts, [1, 0, 1]);
    assert_eq!(duration.attributes.get("agent"), Some(&claude));

    let active: Vec<_> = points
        .iter()
        .filter(|p| p.name == "warden.runs.active")
        .collect();
    assert_eq!(active.len(), 1, "{points:?}");
    assert_eq!(active[0].kind, MetricKind::Gauge);
    assert_eq!(active[0].value.map(Number::as_f64), Some(4.0));
    assert!(active[0].attributes.is_empty());

    assert_eq!(points.len(), 3, "{points:?}");
    assert!(rx.spans().is_empty());
    assert!(rx.rejected().is_empty(), "{:?}", rx.rejected());
}

#[test]
fn metrics_exported_over_http_are_decoded_as_points() {
    points_decoded(Transport::Http);
}

#[test]
fn metrics_exported_over_grpc_are_decoded_as_points() {
    points_decoded(Transport::Grpc);
}
