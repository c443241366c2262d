use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::Temporality;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};

use super::*;
use crate::Verdict;
use crate::telemetry::{ExportConfig, MetricsFlushed, Telemetry, TelemetryConfig};

/// A final report of an `agent` run, as `run.json` has it.
fn report(agent: &str, verdict: Verdict) -> Report {
    let mut r = crate::report::sample();
    r.agent = agent.into();
    r.verdict = Some(verdict);
    r
}

/// Three runs: two Claude Code runs of one model (one failed), with
/// tokens and cost; a command that stalled and left orphans.
fn three_runs() -> [Report; 3] {
    let mut ok = report("claude", Verdict::Succeeded);
    ok.reported.model = Some("claude-sonnet-4-5".into());
    ok.duration_ms = 12_500;
    ok.time_to_first_activity_ms = Some(800);
    ok.reported.tokens.input = Some(100);
    ok.reported.tokens.output = Some(20);
    ok.reported.tokens.cache_read = Some(1000);
    ok.reported.tokens.cache_write = Some(50);
    ok.reported.tokens.reasoning = Some(5);
    ok.reported.cost_usd = Some(0.25);
    let mut failed = report("claude", Verdict::AgentFailed);
    failed.reported.model = Some("claude-sonnet-4-5".into());
    failed.duration_ms = 40_000;
    failed.time_to_first_activity_ms = Some(3_000);
    failed.reported.tokens.input = Some(7);
    failed.reported.cost_usd = Some(0.125);
    let mut stalled = report("exec", Verdict::Stalled);
    stalled.duration_ms = 3_000;
    stalled.orphans_killed = 2;
    stalled.stall_warnings = 1;
    [ok, failed, stalled]
}

/// Every sample of a Prometheus text, by its series (`name{labels}`).
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').expect("a sample line");
            (series.to_string(), value.parse().expect("a number"))
        })
        .collect()
}

fn prometheus_only() -> Metrics {
    Metrics::start(None, true).expect("no exporter to make")
}

#[test]
fn prometheus_text_counts_runs_by_agent_verdict_and_model() {
    let m = prometheus_only();
    for r in three_runs() {
        m.record(&r);
    }
    let text = m.prometheus_text().expect("kept for Prometheus");
    let s = samples(&text);
    let at = |series: &str| {
        *s.get(series)
            .unwrap_or_else(|| panic!("no sample {series} in:\n{text}"))
    };
    assert_eq!(
        at(r#"warden_runs_total{agent="claude",verdict="succeeded"}"#),
        1.0
    );
    assert_eq!(
        at(r#"warden_runs_total{agent="claude",verdict="agent_failed"}"#),
        1.0
    );
    assert_eq!(
        at(r#"warden_runs_total{agent="exec",verdict="stalled"}"#),
        1.0
    );
    // 12.5 s: not in the 10 s bucket, in the 30 s one.
    let d = r#"warden_run_duration_seconds_bucket{agent="claude",verdict="succeeded",le="#;
    assert_eq!(at(&format!(r#"{d}"10"}}"#)), 0.0);
    assert_eq!(at(&format!(r#"{d}"30"}}"#)), 1.0);
    assert_eq!(at(&format!(r#"{d}"+Inf"}}"#)), 1.0);
    assert_eq!(
        at(r#"warden_run_duration_seconds_sum{agent="claude",verdict="succeeded"}"#),
        12.5
    );
    assert_eq!(
        at(r#"warden_time_to_first_activity_seconds_count{agent="claude"}"#),
        2.0
    );
    assert_eq!(
        at(r#"warden_time_to_first_activity_seconds_sum{agent="claude"}"#),
        3.8
    );
    let tokens = |kind: &str| {
        at(&format!(
            r#"warden_tokens_total{{agent="claude",model="claude-sonnet-4-5",type="{kind}"}}"#
        ))
    };
    assert_eq!(tokens("input"), 107.0);
    assert_eq!(tokens("output"), 20.0);
    assert_eq!(tokens("cache_read"), 1000.0);
    assert_eq!(tokens("cache_write"), 50.0);
    assert_eq!(tokens("reasoning"), 5.0);
    assert_eq!(
        at(r#"warden_cost_usd_total{agent="claude",model="claude-sonnet-4-5"}"#),
        0.375
    );
    assert_eq!(at(r#"warden_orphans_killed_total{agent="exec"}"#), 2.0);
    assert_eq!(at(r#"warden_orphans_killed_total{agent="claude"}"#), 0.0);
    assert_eq!(at(r#"warden_stall_warnings_total{agent="exec"}"#), 1.0);
    // A run whose agent reports no tokens nor cost adds no series for
    // them, and had no first activity.
    assert!(
        !s.keys().any(|k| (k.starts_with("warden_tokens")
            || k.starts_with("warden_cost")
            || k.starts_with("warden_time_to_first"))
            && k.contains(r#"agent="exec""#)),
        "{text}"
    );
    for line in [
        "# TYPE warden_runs_total counter",
        "# TYPE warden_run_duration_seconds histogram",
        "# TYPE warden_time_to_first_activity_seconds histogram",
        "# TYPE warden_tokens_total counter",
        "# TYPE warden_cost_usd_total counter",
        "# TYPE warden_orphans_killed_total counter",
        "# TYPE warden_stall_warnings_total counter",
    ] {
        assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
    }
}

#[test]
fn model_labels_are_bounded_in_length_and_number() {
    let names = ModelNames::default();
    assert_eq!(names.label(None), "unknown");
    assert_eq!(names.label(Some("  ")), "unknown");
    let long = "m".repeat(200);
    assert_eq!(names.label(Some(&long)), "m".repeat(MAX_MODEL_LEN));
    assert_eq!(names.label(Some("a\nb\u{7}c")), "a_b_c");
    for i in 0..100 {
        let name = format!("model-{i}");
        let label = names.label(Some(&name));
        // Two are taken already; the first ones keep their names, and a
        // name once kept stays.
        if i < MAX_MODELS - 2 {
            assert_eq!(label, name);
        } else {
            assert_eq!(label, "other", "{name}");
        }
    }
    assert_eq!(names.label(Some("model-0")), "model-0");
    assert_eq!(names.label(Some("a\nb\u{7}c")), "a_b_c");

    // The registry never sees more than the bound.
    let m = prometheus_only();
    for i in 0..100 {
        let mut r = report("codex", Verdict::Succeeded);
        r.reported.model = Some(format!("gpt-{i}"));
        r.reported.tokens.input = Some(1);
        m.record(&r);
    }
    let text = m.prometheus_text().unwrap();
    let models: std::collections::HashSet<&str> = text
        .lines()
        .filter(|l| l.starts_with("warden_tokens_total{"))
        .filter_map(|l| l.split("model=\"").nth(1)?.split('"').next())
        .collect();
    assert_eq!(models.len(), MAX_MODELS + 1, "{models:?}");
    assert!(models.contains("other"));
    let other = samples(&text)[r#"warden_tokens_total{agent="codex",model="other",type="input"}"#];
    assert_eq!(other, (100 - MAX_MODELS) as f64);
}

#[test]
fn the_batch_gauge_says_where_the_entries_are() {
    let m = prometheus_only();
    m.batch_runs(3, 2, 0);
    let s = samples(&m.prometheus_text().unwrap());
    assert_eq!(s[r#"warden_batch_runs{state="queued"}"#], 3.0);
    assert_eq!(s[r#"warden_batch_runs{state="running"}"#], 2.0);
    assert_eq!(s[r#"warden_batch_runs{state="finished"}"#], 0.0);
    m.batch_runs(0, 1, 4);
    let s = samples(&m.prometheus_text().unwrap());
    assert_eq!(s[r#"warden_batch_runs{state="queued"}"#], 0.0);
    assert_eq!(s[r#"warden_batch_runs{state="running"}"#], 1.0);
    assert_eq!(s[r#"warden_batch_runs{state="finished"}"#], 4.0);
}

/// One data point as the SDK hands it to an exporter.
#[derive(Debug, Clone, PartialEq)]
struct Point {
    name: String,
    unit: String,
    attributes: BTreeMap<String, String>,
    /// A sum's or a gauge's value; a histogram's sum.
    value: f64,
    /// A histogram's count.
    count: u64,
    bounds: Vec<f64>,
    cumulative: bool,
    monotonic: bool,
}

/// An exporter that keeps what it is given, and the resource's
/// attributes.
#[derive(Clone, Default)]
struct Capture {
    points: Arc<Mutex<Vec<Point>>>,
    resource: Arc<Mutex<BTreeMap<String, String>>>,
}

impl PushMetricExporter for Capture {
    fn export(
        &self,
        rm: &ResourceMetrics,
    ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
        let mut points = self.points.lock().unwrap();
        points.clear();
        *self.resource.lock().unwrap() = rm
            .resource()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        for scope in rm.scope_metrics() {
            assert_eq!(scope.scope().name(), "warden");
            for m in scope.metrics() {
                let point = |attrs: &mut dyn Iterator<Item = &KeyValue>| Point {
                    name: m.name().to_string(),
                    unit: m.unit().to_string(),
                    attributes: attrs
                        .map(|kv| (kv.key.to_string(), kv.value.to_string()))
                        .collect(),
                    value: 0.0,
                    count: 0,
                    bounds: Vec::new(),
                    cumulative: false,
                    monotonic: false,
                };
                match m.data() {
                    AggregatedMetrics::U64(MetricData::Sum(s)) => {
                        for p in s.data_points() {
                            points.push(Point {
                                value: p.value() as f64,
                                cumulative: s.temporality() == Temporality::Cumulative,
                                monotonic: s.is_monotonic(),
                                ..point(&mut p.attributes())
                            });
                        }
                    }
                    AggregatedMetrics::F64(MetricData::Sum(s)) => {
                        for p in s.data_points() {
                            points.push(Point {
                                value: p.value(),
                                cumulative: s.temporality() == Temporality::Cumulative,
                                monotonic: s.is_monotonic(),
                                ..point(&mut p.attributes())
                            });
                        }
                    }
                    AggregatedMetrics::F64(MetricData::Histogram(h)) => {
                        for p in h.data_points() {
                            points.push(Point {
                                value: p.sum(),
                                count: p.count(),
                                bounds: p.bounds().collect(),
                                cumulative: h.temporality() == Temporality::Cumulative,
                                ..point(&mut p.attributes())
                            });
                        }
                    }
                    AggregatedMetrics::I64(MetricData::Gauge(g)) => {
                        for p in g.data_points() {
                            points.push(Point {
                                value: p.value() as f64,
                                ..point(&mut p.attributes())
                            });
                        }
                    }
                    other => panic!("{}: an unexpected kind: {other:?}", m.name()),
                }
            }
        }
        std::future::ready(Ok(()))
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }

    fn temporality(&self) -> Temporality {
        Temporality::Cumulative
    }
}

fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn otlp_metrics_say_what_the_prometheus_text_says() {
    let capture = Capture::default();
    let m = Metrics {
        models: ModelNames::default(),
        prometheus: Some(Prom::new()),
        otlp: Some(Otlp::with_exporter(
            capture.clone(),
            Duration::from_secs(3600),
            None,
        )),
        config: None,
    };
    for r in three_runs() {
        m.record(&r);
    }
    m.batch_runs(0, 0, 3);
    let sent = m.end().expect("OTLP metrics are on");
    assert_eq!(sent.recv_timeout(Duration::from_secs(10)), Ok(true));
    assert!(m.end().is_none(), "the end comes once");

    let points = capture.points.lock().unwrap().clone();
    let find = |name: &str, a: &[(&str, &str)]| {
        points
            .iter()
            .find(|p| p.name == name && p.attributes == attrs(a))
            .unwrap_or_else(|| panic!("no {name} {a:?} in {points:#?}"))
            .clone()
    };
    let runs = find(
        "warden.runs",
        &[("agent", "claude"), ("verdict", "agent_failed")],
    );
    assert_eq!((runs.value, runs.unit.as_str()), (1.0, "{run}"));
    assert!(runs.cumulative && runs.monotonic, "{runs:?}");
    let d = find(
        "warden.run.duration",
        &[("agent", "claude"), ("verdict", "succeeded")],
    );
    assert_eq!((d.count, d.value, d.unit.as_str()), (1, 12.5, "s"));
    assert_eq!(d.bounds, DURATION_BUCKETS.to_vec());
    let f = find("warden.time_to_first_activity", &[("agent", "claude")]);
    assert_eq!((f.count, f.value), (2, 3.8));
    assert_eq!(f.bounds, FIRST_ACTIVITY_BUCKETS.to_vec());
    let t = find(
        "warden.tokens",
        &[
            ("agent", "claude"),
            ("model", "claude-sonnet-4-5"),
            ("type", "cache_read"),
        ],
    );
    assert_eq!((t.value, t.unit.as_str()), (1000.0, "{token}"));
    let c = find(
        "warden.cost.usd",
        &[("agent", "claude"), ("model", "claude-sonnet-4-5")],
    );
    assert_eq!(c.value, 0.375);
    assert_eq!(
        find("warden.orphans_killed", &[("agent", "exec")]).value,
        2.0
    );
    assert_eq!(
        find("warden.stall_warnings", &[("agent", "exec")]).value,
        1.0
    );
    assert_eq!(
        find("warden.batch.runs", &[("state", "finished")]).value,
        3.0
    );
    assert!(
        !points
            .iter()
            .any(|p| p.name == "warden.tokens" && p.attributes.get("agent").unwrap() == "exec"),
        "{points:#?}"
    );

    let resource = capture.resource.lock().unwrap().clone();
    assert_eq!(
        resource.get("service.name").map(String::as_str),
        Some("warden")
    );
    let instance = resource.get("service.instance.id").expect("an instance id");
    assert_eq!(instance.len(), 36, "a UUID: {instance}");

    // What Prometheus shows is the same count.
    let s = samples(&m.prometheus_text().unwrap());
    assert_eq!(
        s[r#"warden_runs_total{agent="claude",verdict="agent_failed"}"#],
        runs.value
    );
}

/// A collector that takes connections and never answers: each one is
/// held until the test ends.
fn hanging_collector() -> std::net::SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming().flatten() {
            held.push(s);
        }
    });
    addr
}

#[test]
fn spans_and_metrics_share_one_flush_bound_with_a_hanging_collector() {
    let addr = hanging_collector();
    let flush = Duration::from_millis(1500);
    let base = format!("http://{addr}");
    let env = |_: &str| None;
    let config = TelemetryConfig {
        traces: ExportConfig::resolve(Some(&base), None, Some(flush), env).unwrap(),
        metrics: MetricsConfig::resolve(Some(&base), None, Some(flush), env).unwrap(),
        prometheus: false,
        flush,
    };
    let t = Telemetry::start(config).unwrap().expect("on");
    t.record_run(&report("exec", Verdict::Succeeded));
    let ids = t.top_span();
    let (handed, _) = t.submit(
        vec![crate::telemetry::SpanRecord {
            trace_id: ids.trace(),
            span_id: ids.span(),
            parent_span_id: None,
            parent_is_remote: false,
            name: "run".into(),
            kind: crate::telemetry::spans::Kind::Internal,
            start: std::time::SystemTime::now(),
            end: std::time::SystemTime::now(),
            attributes: Vec::new(),
            events: Vec::new(),
            error: None,
        }],
        ids.sampled(),
    );
    assert_eq!(handed, 1);
    let t0 = Instant::now();
    let flushed = t.shutdown();
    let took = t0.elapsed();
    // Each export is cut at the flush bound by its own timeout, and the
    // two run at once: one after the other they would take twice that.
    assert!(
        took < flush + Duration::from_secs(1),
        "shutdown took {took:?} with a flush bound of {flush:?}"
    );
    assert!(
        matches!(
            flushed.metrics,
            Some(MetricsFlushed::Failed | MetricsFlushed::TimedOut)
        ),
        "{flushed:?}"
    );
    assert_eq!(flushed.exported, 0, "{flushed:?}");
}
