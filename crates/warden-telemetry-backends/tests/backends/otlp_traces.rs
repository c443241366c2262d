//! A span tree with chosen ids, times, attributes, events and statuses,
//! exported by the real OTLP exporter, comes out of the receiver exactly.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{
    Event, SpanContext, SpanId, SpanKind as SdkKind, Status as SdkStatus, TraceFlags, TraceId,
    TraceState,
};
use opentelemetry::{Array, InstrumentationScope, KeyValue, StringValue, Value};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter as _, SpanLinks};
use warden_telemetry_backends::otlp::{
    AttrValue, Receiver, SpanKind, SpanTree, StatusCode, Transport,
};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
/// The span of another process (a `TRACEPARENT` warden was given).
const REMOTE_PARENT: &str = "1111111111111111";
const RUN: &str = "00f067aa0ba902b7";
const TOOL: &str = "b7ad6b7169203331";
/// 2023-11-14T22:13:20.123456789Z: nanoseconds that a lossy conversion
/// (through microseconds or a float) would not keep.
const T0: u64 = 1_700_000_000_123_456_789;

fn at(nanos: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(nanos)
}

/// A span with no attributes, no events and an unset status.
fn span(
    id: &str,
    (parent, parent_is_remote): (&str, bool),
    name: &'static str,
    kind: SdkKind,
    (start, end): (u64, u64),
) -> SpanData {
    SpanData {
        span_context: SpanContext::new(
            TraceId::from_hex(TRACE).unwrap(),
            SpanId::from_hex(id).unwrap(),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ),
        parent_span_id: SpanId::from_hex(parent).unwrap(),
        parent_span_is_remote: parent_is_remote,
        span_kind: kind,
        name: name.into(),
        start_time: at(start),
        end_time: at(end),
        attributes: Vec::new(),
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status: SdkStatus::Unset,
        instrumentation_scope: InstrumentationScope::builder("warden")
            .with_version("0.1.0-test")
            .build(),
    }
}

/// A run under a remote parent, with one tool call under it.
fn tree() -> Vec<SpanData> {
    let mut run = span(
        RUN,
        (REMOTE_PARENT, true),
        "warden.run",
        SdkKind::Internal,
        (T0, T0 + 5_000_000_000),
    );
    run.attributes = vec![
        KeyValue::new("gen_ai.provider.name", "anthropic"),
        KeyValue::new("gen_ai.usage.input_tokens", 21_i64),
        KeyValue::new("warden.cost_usd", 0.25_f64),
        KeyValue::new("warden.timed_out", false),
        KeyValue::new(
            "gen_ai.response.finish_reasons",
            Value::Array(Array::String(vec![StringValue::from("stop")])),
        ),
    ];
    run.status = SdkStatus::Ok;
    let mut tool = span(
        TOOL,
        (RUN, false),
        "execute_tool Bash",
        SdkKind::Client,
        (T0 + 1_000_000_000, T0 + 2_000_000_001),
    );
    tool.attributes = vec![KeyValue::new("gen_ai.tool.name", "Bash")];
    tool.events.events.push(Event::new(
        "warden.stall",
        at(T0 + 1_500_000_000),
        vec![KeyValue::new("warden.stall_seconds", 3_i64)],
        0,
    ));
    tool.status = SdkStatus::error("exit status 2");
    vec![run, tool]
}

fn resource() -> Resource {
    // `builder_empty`: what `Resource::builder` would read from this
    // machine's OTEL_* variables must not leak into the expected values.
    Resource::builder_empty()
        .with_service_name("warden")
        .with_attribute(KeyValue::new("service.instance.id", "run-1"))
        .build()
}

fn export_over(transport: Transport, rx: &Receiver) {
    let timeout = Duration::from_secs(5);
    match transport {
        Transport::Http => {
            let mut exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                // Verbatim: the exporter appends /v1/traces only to an
                // endpoint from OTEL_EXPORTER_OTLP_ENDPOINT.
                .with_endpoint(format!("{}/v1/traces", rx.endpoint()))
                .with_headers(HashMap::from([("x-token".into(), "secret-1".into())]))
                .with_timeout(timeout)
                .build()
                .expect("HTTP span exporter");
            exporter.set_resource(&resource());
            // The blocking HTTP client needs no runtime.
            futures_executor::block_on(exporter.export(tree())).expect("HTTP export");
        }
        Transport::Grpc => {
            // tonic needs a runtime, entered while the exporter is built.
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let _entered = rt.enter();
            let mut metadata = opentelemetry_otlp::tonic_types::metadata::MetadataMap::new();
            metadata.insert("x-token", "secret-1".parse().unwrap());
            let mut exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(rx.endpoint())
                .with_metadata(metadata)
                .with_timeout(timeout)
                .build()
                .expect("gRPC span exporter");
            exporter.set_resource(&resource());
            rt.block_on(exporter.export(tree())).expect("gRPC export");
        }
    }
}

fn decoded_exactly(transport: Transport) {
    let rx = Receiver::start(transport);
    assert_eq!(rx.transport(), transport);
    export_over(transport, &rx);
    let spans = rx.wait_for_spans(2, Duration::from_secs(5));
    assert_eq!(spans.len(), 2, "{}", spans.render());
    assert_eq!(
        spans.render(),
        format!("warden.run [internal] <- parent {REMOTE_PARENT}\n  execute_tool Bash [client]\n")
    );

    let run = spans.one("warden.run");
    assert_eq!(run.trace_id, TRACE);
    assert_eq!(run.span_id, RUN);
    assert_eq!(run.parent_span_id, REMOTE_PARENT);
    assert_eq!(run.parent_is_remote, Some(true));
    assert_eq!(run.kind, SpanKind::Internal);
    assert_eq!(
        (run.start_unix_nano, run.end_unix_nano),
        (T0, T0 + 5_000_000_000)
    );
    assert_eq!(
        run.attributes,
        [
            ("gen_ai.provider.name", AttrValue::from("anthropic")),
            ("gen_ai.usage.input_tokens", AttrValue::Int(21)),
            ("warden.cost_usd", AttrValue::Double(0.25)),
            ("warden.timed_out", AttrValue::Bool(false)),
            (
                "gen_ai.response.finish_reasons",
                AttrValue::Array(vec![AttrValue::from("stop")])
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    );
    assert_eq!(run.str_attr("gen_ai.provider.name"), Some("anthropic"));
    assert_eq!(run.int_attr("gen_ai.usage.input_tokens"), Some(21));
    assert!(run.events.is_empty());
    assert_eq!(run.status.code, StatusCode::Ok);
    assert_eq!(run.resource["service.name"], AttrValue::from("warden"));
    assert_eq!(
        run.resource["service.instance.id"],
        AttrValue::from("run-1")
    );
    assert_eq!(run.scope, ("warden".to_string(), "0.1.0-test".to_string()));

    let tool = spans.one("execute_tool Bash");
    spans.assert_child_of(tool, run);
    assert_eq!(spans.parent(tool), Some(run));
    assert_eq!(spans.children(run), vec![tool]);
    assert_eq!(tool.span_id, TOOL);
    assert_eq!(tool.parent_is_remote, Some(false));
    assert_eq!(tool.kind, SpanKind::Client);
    assert_eq!(
        (tool.start_unix_nano, tool.end_unix_nano),
        (T0 + 1_000_000_000, T0 + 2_000_000_001)
    );
    assert_eq!(tool.str_attr("gen_ai.tool.name"), Some("Bash"));
    let stall: Vec<_> = tool.events_named("warden.stall").collect();
    assert_eq!(stall.len(), 1, "{:?}", tool.events);
    assert_eq!(stall[0].time_unix_nano, T0 + 1_500_000_000);
    assert_eq!(
        stall[0].attributes.get("warden.stall_seconds"),
        Some(&AttrValue::Int(3))
    );
    assert_eq!(tool.status.code, StatusCode::Error);
    assert_eq!(tool.status.message, "exit status 2");
    assert_eq!(tool.resource, run.resource);

    let exports = rx.exports();
    assert_eq!(exports.len(), 1, "{exports:?}");
    assert_eq!(exports[0].items, 2);
    assert_eq!(
        exports[0].headers.get("x-token").map(String::as_str),
        Some("secret-1"),
        "{:?}",
        exports[0].headers
    );
    assert!(rx.rejected().is_empty(), "{:?}", rx.rejected());
    assert!(rx.metrics().is_empty());
}

#[test]
fn a_span_tree_exported_over_http_is_decoded_exactly() {
    decoded_exactly(Transport::Http);
}

#[test]
fn a_span_tree_exported_over_grpc_is_decoded_exactly() {
    decoded_exactly(Transport::Grpc);
}
