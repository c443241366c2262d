//! Metrics: `warden batch --metrics-addr` serves the runs' counts in the
//! Prometheus text format while the batch runs, and the end of a process
//! exporting to a collector that never answers waits no longer than its
//! flush bound, spans and metrics together.

use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::Value;
use warden_telemetry_backends::otlp::{
    AggregationTemporality, AttrValue, MetricKind, MetricPoint, Number, Receiver, Transport,
};
use warden_telemetry_backends::prometheus::Prometheus;

use crate::support::{Case, ms};

/// `warden` without any `OTEL_*` variable of the test's own environment.
fn command(case: &Case, args: &[&str]) -> std::process::Command {
    let mut cmd = case.command(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("OTEL_") || k == "TRACEPARENT" {
            cmd.env_remove(k);
        }
    }
    cmd
}

/// `GET path` on `addr`: the status line and the body.
fn get(addr: SocketAddr, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").expect("a head and a body");
    (
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    )
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

/// The sum of the samples of `name` whose series have every label of
/// `labels` (`agent="exec"`).
fn sum(s: &BTreeMap<String, f64>, name: &str, labels: &[&str]) -> f64 {
    s.iter()
        .filter(|(k, _)| k.split('{').next() == Some(name) && labels.iter().all(|l| k.contains(l)))
        .map(|(_, v)| v)
        .sum()
}

/// Reads a child's stderr on a thread: every line goes to `lines`, and the
/// metrics URL warden says, once, to the receiver.
fn watch_stderr(
    child: &mut std::process::Child,
    lines: Arc<Mutex<Vec<String>>>,
) -> mpsc::Receiver<SocketAddr> {
    let (tx, rx) = mpsc::channel();
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            if let Some(url) = line.strip_prefix("warden: metrics: http://")
                && let Some(addr) = url.strip_suffix("/metrics")
            {
                let _ = tx.send(addr.parse().expect("an address"));
            }
            lines.lock().unwrap().push(line);
        }
    });
    rx
}

/// A batch of five `exec` runs: one succeeds, one fails, one leaves an
/// orphan, one stalls (with its warning), and the last waits for the file
/// `gate` (for at most a minute) so the batch goes on after the others.
fn gated_batch(case: &Case, gate: &std::path::Path) -> String {
    let toml = format!(
        r#"[defaults]
agent = "exec"
kill_grace = "200ms"

[[run]]
name = "ok"
command = ["sh", "-c", "echo fine"]

[[run]]
name = "fails"
command = ["sh", "-c", "echo broken; exit 3"]

[[run]]
name = "orphan"
command = ["sh", "-c", "echo did the work; sleep 30 & exit 0"]

[[run]]
name = "stalls"
stall_timeout = "600ms"
command = ["sh", "-c", "echo working; sleep 600"]

[[run]]
name = "last"
timeout = "60s"
command = ["sh", "-c", "echo waiting; while [ ! -e '{gate}' ]; do sleep 0.05; done; echo released"]
"#,
        gate = gate.display()
    );
    super::batch::write(case, &toml)
}

/// `warden batch FILE -j 5 --dir DIR ARGS...` in the background, its
/// stderr watched.
fn spawn_batch(
    case: &Case,
    file: &str,
    dir: &std::path::Path,
    args: &[&str],
) -> (
    std::process::Child,
    Arc<Mutex<Vec<String>>>,
    mpsc::Receiver<SocketAddr>,
) {
    let mut all = vec!["batch", file, "-j", "5", "--dir", dir.to_str().unwrap()];
    all.extend_from_slice(args);
    let mut child = command(case, &all)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn warden");
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let addr = watch_stderr(&mut child, stderr.clone());
    (child, stderr, addr)
}

/// Each entry's run.json, by the entry's name (the first run of each).
fn reports(dir: &std::path::Path) -> BTreeMap<String, Value> {
    let batch: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("batch.json")).unwrap()).unwrap();
    let mut reports = BTreeMap::new();
    for entry in batch["runs"].as_array().unwrap() {
        let run_dir = entry["session"]["runs"][0]["run_dir"].as_str().unwrap();
        let r: Value =
            serde_json::from_str(&std::fs::read_to_string(format!("{run_dir}/run.json")).unwrap())
                .unwrap();
        reports.insert(entry["name"].as_str().unwrap().to_string(), r);
    }
    reports
}

/// The sum of `key` over the reports of the runs named.
fn total(reports: &BTreeMap<String, Value>, names: &[&str], key: &str) -> f64 {
    names.iter().map(|n| ms(&reports[*n][key]) as f64).sum()
}

/// What the gated batch's four ended runs must show (asserting that the
/// runs did what they were written to do, else a count that matches
/// proves nothing).
fn assert_the_runs_did_their_part(reports: &BTreeMap<String, Value>) {
    for (name, verdict) in [
        ("ok", "succeeded"),
        ("fails", "agent_failed"),
        ("orphan", "succeeded"),
        ("stalls", "stalled"),
        ("last", "succeeded"),
    ] {
        assert_eq!(
            reports[name]["verdict"], verdict,
            "{name}: {}",
            reports[name]
        );
    }
    assert!(
        ms(&reports["orphan"]["orphans_killed"]) >= 1,
        "{}",
        reports["orphan"]
    );
    assert!(
        ms(&reports["stalls"]["stall_warnings"]) >= 1,
        "{}",
        reports["stalls"]
    );
}

const ENDED: [&str; 4] = ["ok", "fails", "orphan", "stalls"];

#[test]
fn the_batch_endpoint_counts_each_run_as_its_report_does_while_the_batch_runs() {
    let case = Case::new();
    let gate = case.path().join("gate");
    let file = gated_batch(&case, &gate);
    let dir = case.path().join("batch");
    let (child, stderr, addr) = spawn_batch(&case, &file, &dir, &["--metrics-addr", "127.0.0.1:0"]);
    let addr = addr
        .recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("no metrics URL on stderr: {:?}", stderr.lock().unwrap()));
    assert_ne!(addr.port(), 0, "port 0 is replaced by the one chosen");

    // The four runs that end by themselves, counted while the fifth runs.
    // A run is counted when its report is final and the batch's gauge
    // moves when the batch hears it ended, a moment later: wait for both.
    let until = Instant::now() + Duration::from_secs(30);
    let s = loop {
        let (status, body) = get(addr, "/metrics");
        assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
        let s = samples(&body);
        if sum(&s, "warden_runs_total", &[]) >= 4.0
            && s.get(r#"warden_batch_runs{state="finished"}"#) >= Some(&4.0)
        {
            break s;
        }
        assert!(
            Instant::now() < until,
            "the runs were never counted: {body}\nstderr: {:?}",
            stderr.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let at = |series: &str| {
        *s.get(series)
            .unwrap_or_else(|| panic!("no {series} in {s:#?}"))
    };
    assert_eq!(sum(&s, "warden_runs_total", &[]), 4.0, "{s:#?}");
    assert_eq!(
        at(r#"warden_runs_total{agent="exec",verdict="succeeded"}"#),
        2.0
    );
    assert_eq!(
        at(r#"warden_runs_total{agent="exec",verdict="agent_failed"}"#),
        1.0
    );
    assert_eq!(
        at(r#"warden_runs_total{agent="exec",verdict="stalled"}"#),
        1.0
    );
    assert_eq!(
        at(r#"warden_run_duration_seconds_count{agent="exec",verdict="succeeded"}"#),
        2.0
    );
    assert_eq!(
        at(r#"warden_time_to_first_activity_seconds_count{agent="exec"}"#),
        4.0
    );
    assert_eq!(at(r#"warden_batch_runs{state="running"}"#), 1.0);
    assert_eq!(at(r#"warden_batch_runs{state="finished"}"#), 4.0);
    assert_eq!(at(r#"warden_batch_runs{state="queued"}"#), 0.0);
    let (status, _) = get(addr, "/");
    assert_eq!(status, "HTTP/1.1 404 Not Found");

    std::fs::write(&gate, "").unwrap();
    let out = child.wait_with_output().expect("warden ends");
    let stderr = stderr.lock().unwrap().join("\n");
    assert_eq!(out.status.code(), Some(1), "one run failed: {stderr}");
    assert!(
        TcpStream::connect(addr).is_err(),
        "still serving metrics after the batch ended"
    );

    // What the endpoint said is what the runs' reports say.
    let reports = reports(&dir);
    assert_the_runs_did_their_part(&reports);
    assert_eq!(
        at(r#"warden_orphans_killed_total{agent="exec"}"#),
        total(&reports, &ENDED, "orphans_killed")
    );
    assert_eq!(
        at(r#"warden_stall_warnings_total{agent="exec"}"#),
        total(&reports, &ENDED, "stall_warnings")
    );
    let succeeded = at(r#"warden_run_duration_seconds_sum{agent="exec",verdict="succeeded"}"#);
    let expected = total(&reports, &["ok", "orphan"], "duration_ms") / 1000.0;
    assert!(
        (succeeded - expected).abs() < 1e-6,
        "{succeeded} s for the runs' {expected} s"
    );
    case.assert_nothing_left();
}

#[test]
fn prometheus_scrapes_the_batch_and_answers_queries_with_its_counts() {
    // The address is chosen before Prometheus starts: its first scrape
    // comes about 5 s after its start, and only then is it scraped every
    // second (see warden_telemetry_backends::prometheus).
    let addr = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let Some(prometheus) = Prometheus::start(addr) else {
        return;
    };
    prometheus.wait_for_first_scrape(Duration::from_secs(20));

    let case = Case::new();
    let gate = case.path().join("gate");
    let file = gated_batch(&case, &gate);
    let dir = case.path().join("batch");
    let (child, stderr, said) =
        spawn_batch(&case, &file, &dir, &["--metrics-addr", &addr.to_string()]);
    assert_eq!(
        said.recv_timeout(Duration::from_secs(20)).ok(),
        Some(addr),
        "{:?}",
        stderr.lock().unwrap()
    );
    // Scraped once the four runs that end by themselves have ended (and
    // the batch's gauge, which moves a moment after the counters, agrees).
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let all = prometheus.samples("sum(warden_runs_total)");
        let finished = prometheus.samples(r#"warden_batch_runs{state="finished"}"#);
        if all.first().is_some_and(|s| s.value >= 4.0)
            && finished.first().is_some_and(|s| s.value >= 4.0)
        {
            assert_eq!(all[0].value, 4.0, "{all:?}");
            break;
        }
        assert!(
            Instant::now() < until,
            "Prometheus never saw the four runs: {all:?}; targets: {}",
            prometheus.targets()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let by_verdict: BTreeMap<String, f64> = prometheus
        .samples("sum by (verdict) (warden_runs_total{agent=\"exec\"})")
        .into_iter()
        .map(|s| (s.metric["verdict"].clone(), s.value))
        .collect();
    assert_eq!(
        by_verdict,
        BTreeMap::from([
            ("agent_failed".to_string(), 1.0),
            ("stalled".to_string(), 1.0),
            ("succeeded".to_string(), 2.0),
        ])
    );
    let one = |promql: &str| {
        let s = prometheus.samples(promql);
        assert_eq!(s.len(), 1, "{promql}: {s:?}");
        assert_eq!(
            s[0].metric.get("job").map(String::as_str),
            Some("warden"),
            "{s:?}"
        );
        s[0].value
    };
    assert_eq!(one(r#"warden_batch_runs{state="running"}"#), 1.0);
    assert_eq!(one(r#"warden_batch_runs{state="finished"}"#), 4.0);
    let orphans = one("warden_orphans_killed_total");
    let stalls = one("warden_stall_warnings_total");
    let first_activity = one("warden_time_to_first_activity_seconds_count");

    std::fs::write(&gate, "").unwrap();
    let out = child.wait_with_output().expect("warden ends");
    assert_eq!(out.status.code(), Some(1), "{:?}", stderr.lock().unwrap());
    let reports = reports(&dir);
    assert_the_runs_did_their_part(&reports);
    assert_eq!(orphans, total(&reports, &ENDED, "orphans_killed"));
    assert_eq!(stalls, total(&reports, &ENDED, "stall_warnings"));
    assert_eq!(first_activity, 4.0);
    case.assert_nothing_left();
}

#[test]
fn idle_connections_never_keep_a_scraper_from_the_batch_endpoint() {
    let case = Case::new();
    let gate = case.path().join("gate");
    let file = super::batch::write(
        &case,
        &format!(
            "[[run]]\nname = \"waits\"\nagent = \"exec\"\ntimeout = \"60s\"\n\
             command = [\"sh\", \"-c\", \"while [ ! -e '{}' ]; do sleep 0.05; done\"]\n",
            gate.display()
        ),
    );
    let dir = case.path().join("batch");
    let (child, stderr, addr) = spawn_batch(&case, &file, &dir, &["--metrics-addr", "127.0.0.1:0"]);
    let addr = addr
        .recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("no metrics URL on stderr: {:?}", stderr.lock().unwrap()));
    // More connections than the endpoint serves at once, each sending
    // nothing (or half a head), held open for the whole test.
    let idle: Vec<TcpStream> = (0..40)
        .map(|i| {
            let mut s = TcpStream::connect(addr).expect("connect");
            if i % 2 == 1 {
                s.write_all(b"GET /metr").unwrap();
            }
            s
        })
        .collect();
    for round in 0..3 {
        let t0 = Instant::now();
        let (status, body) = get(addr, "/metrics");
        assert_eq!(
            status, "HTTP/1.1 200 OK",
            "round {round}, 40 idle connections open: {body}"
        );
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "answered after {:?}",
            t0.elapsed()
        );
    }
    drop(idle);
    std::fs::write(&gate, "").unwrap();
    let out = child.wait_with_output().expect("warden ends");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        stderr.lock().unwrap().join("\n")
    );
    case.assert_nothing_left();
}

#[test]
fn a_metrics_address_that_cannot_be_served_stops_the_batch_before_it_starts() {
    let case = Case::new();
    let ran = case.path().join("ran");
    let file = super::batch::write(
        &case,
        &format!(
            "[[run]]\nagent = \"exec\"\ncommand = [\"touch\", \"{}\"]\n",
            ran.display()
        ),
    );
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = case.path().join("batch");
    let out = command(
        &case,
        &[
            "batch",
            &file,
            "--dir",
            dir.to_str().unwrap(),
            "--metrics-addr",
            &addr,
        ],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot serve metrics on {addr}")) && stderr.contains("in use"),
        "{stderr}"
    );
    assert!(!ran.exists(), "a run started: {stderr}");
    assert!(!dir.exists(), "the batch started: {stderr}");

    for bad in ["9464", "example.com:80", "127.0.0.1:99999"] {
        let out = command(&case, &["batch", &file, "--metrics-addr", bad])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {stderr}");
        assert!(
            stderr.contains(&format!("`{bad}` is not an address to listen on")),
            "{bad}: {stderr}"
        );
    }
    assert!(!ran.exists());
}

/// A collector that takes every connection and never answers; each
/// request's first line is kept.
fn hanging_collector() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut r = std::io::BufReader::new(&s);
                let mut line = String::new();
                if r.read_line(&mut line).is_ok() && !line.is_empty() {
                    seen.lock().unwrap().push(line.trim_end().to_string());
                }
                // Held open, unanswered, until the test ends.
                std::thread::sleep(Duration::from_secs(600));
            });
        }
    });
    (addr, requests)
}

#[test]
fn a_hanging_collector_delays_the_end_by_at_most_the_flush_bound() {
    let (collector, requests) = hanging_collector();
    let case = Case::new();
    // Long enough that spans and metrics flushed one after the other
    // (twice the bound) could not pass for one bound and a margin.
    let flush = Duration::from_secs(3);
    let t0 = Instant::now();
    let out = command(
        &case,
        &[
            "run",
            "exec",
            "--otel",
            &format!("http://{collector}"),
            "--otel-flush",
            "3s",
            "--",
            "true",
        ],
    )
    .output()
    .unwrap();
    let took = t0.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // Spans and metrics go out at once, each cut at the bound: one bound,
    // not two, plus the run and a generous margin.
    assert!(
        took < flush + Duration::from_millis(2500),
        "warden took {took:?} with --otel-flush 3s: {stderr}"
    );
    // Both were really tried (else the bound proves nothing), and their
    // loss is said.
    let requests = requests.lock().unwrap().clone();
    for path in ["/v1/traces", "/v1/metrics"] {
        assert!(
            requests
                .iter()
                .any(|r| r.starts_with(&format!("POST {path} "))),
            "no export to {path}: {requests:?}"
        );
    }
    assert!(
        stderr.contains("the metrics' last export") && stderr.contains("span(s) sent"),
        "{stderr}"
    );
}

#[test]
fn metrics_without_traces_leave_the_agent_without_a_traceparent() {
    let (collector, requests) = hanging_collector();
    let case = Case::new();
    let out = command(
        &case,
        &[
            "run",
            "exec",
            "--otel-flush",
            "500ms",
            "--",
            "sh",
            "-c",
            "echo \"parent=${TRACEPARENT:-none}\"",
        ],
    )
    .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{collector}"))
    .env("OTEL_TRACES_EXPORTER", "none")
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let stdout = std::fs::read_to_string(case.run_dir().join("stdout.log")).unwrap();
    assert_eq!(stdout, "parent=none\n");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(case.run_dir().join("run.json")).unwrap())
            .unwrap();
    assert_eq!(report["otel"], Value::Null, "{report}");
    let requests = requests.lock().unwrap().clone();
    assert!(
        requests.iter().any(|r| r.starts_with("POST /v1/metrics ")),
        "{requests:?}"
    );
    assert!(
        !requests.iter().any(|r| r.contains("/v1/traces")),
        "{requests:?}"
    );
}

/// A batch of four `exec` runs exporting to `rx`: one fails, one leaves an
/// orphan, the last runs a while. `interval`: `OTEL_METRIC_EXPORT_INTERVAL`.
fn otlp_batch(rx: &Receiver, interval: Option<&str>) -> BTreeMap<String, Value> {
    let case = Case::new();
    let file = super::batch::write(
        &case,
        r#"[defaults]
agent = "exec"

[[run]]
name = "ok"
command = ["sh", "-c", "echo fine"]

[[run]]
name = "fails"
command = ["sh", "-c", "echo broken; exit 3"]

[[run]]
name = "orphan"
command = ["sh", "-c", "echo did the work; sleep 30 & exit 0"]

[[run]]
name = "last"
command = ["sh", "-c", "echo a while; sleep 1.5; echo done"]
"#,
    );
    let dir = case.path().join("batch");
    let mut cmd = command(
        &case,
        &["batch", &file, "-j", "4", "--dir", dir.to_str().unwrap()],
    );
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", rx.endpoint());
    cmd.env(
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        match rx.transport() {
            Transport::Http => "http/protobuf",
            Transport::Grpc => "grpc",
        },
    );
    if let Some(ms) = interval {
        cmd.env("OTEL_METRIC_EXPORT_INTERVAL", ms);
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "one run failed: {stderr}");
    assert!(
        !stderr.contains("OpenTelemetry"),
        "a loss was said: {stderr}"
    );
    assert!(rx.rejected().is_empty(), "{:?}", rx.rejected());
    case.assert_nothing_left();
    reports(&dir)
}

fn otlp_metrics_say_what_the_reports_say(transport: Transport) {
    let rx = Receiver::start(transport);
    // Over gRPC, also every 300 ms while the batch runs.
    let interval = (transport == Transport::Grpc).then_some("300");
    let reports = otlp_batch(&rx, interval);
    let exports = rx.metric_requests().len();
    match interval {
        // The default interval (60 s) is past the batch: its end exports.
        None => assert_eq!(exports, 1, "{:?}", rx.exports()),
        Some(_) => assert!(exports >= 3, "{exports} export(s) in about 1.5 s"),
    }
    let points = rx.metrics();
    let exec = AttrValue::from("exec");
    // The latest point of a series: each export has every series so far
    // (the temporality is cumulative), the last one its final value.
    let find = |name: &str, attrs: &[(&str, &str)]| -> MetricPoint {
        points
            .iter()
            .filter(|p| {
                p.name == name
                    && p.attributes.len() == attrs.len()
                    && attrs
                        .iter()
                        .all(|(k, v)| p.attributes.get(*k) == Some(&AttrValue::from(*v)))
            })
            .max_by_key(|p| p.time_unix_nano)
            .unwrap_or_else(|| panic!("no {name} {attrs:?} in {points:#?}"))
            .clone()
    };
    let value = |p: &MetricPoint| p.value.map(Number::as_f64);

    let ok = find(
        "warden.runs",
        &[("agent", "exec"), ("verdict", "succeeded")],
    );
    assert_eq!(value(&ok), Some(3.0));
    assert_eq!(
        (ok.kind, ok.monotonic, ok.unit.as_str()),
        (MetricKind::Sum, true, "{run}")
    );
    assert_eq!(ok.temporality, Some(AggregationTemporality::Cumulative));
    let failed = find(
        "warden.runs",
        &[("agent", "exec"), ("verdict", "agent_failed")],
    );
    assert_eq!(value(&failed), Some(1.0));

    let d = find(
        "warden.run.duration",
        &[("agent", "exec"), ("verdict", "succeeded")],
    );
    assert_eq!(
        (d.kind, d.unit.as_str(), d.count),
        (MetricKind::Histogram, "s", Some(3))
    );
    let expected = total(&reports, &["ok", "orphan", "last"], "duration_ms") / 1000.0;
    let sum = d.sum.expect("a histogram's sum");
    assert!((sum - expected).abs() < 1e-6, "{sum} s for {expected} s");
    assert_eq!(d.bounds.first(), Some(&1.0), "{:?}", d.bounds);
    assert_eq!(d.bucket_counts.iter().sum::<u64>(), 3);
    let first = find("warden.time_to_first_activity", &[("agent", "exec")]);
    assert_eq!((first.unit.as_str(), first.count), ("s", Some(4)));

    assert!(
        ms(&reports["orphan"]["orphans_killed"]) >= 1,
        "{}",
        reports["orphan"]
    );
    let names = ["ok", "fails", "orphan", "last"];
    let orphans = find("warden.orphans_killed", &[("agent", "exec")]);
    assert_eq!(
        value(&orphans),
        Some(total(&reports, &names, "orphans_killed"))
    );
    let stalls = find("warden.stall_warnings", &[("agent", "exec")]);
    assert_eq!(value(&stalls), Some(0.0));
    for (state, n) in [("queued", 0.0), ("running", 0.0), ("finished", 4.0)] {
        let g = find("warden.batch.runs", &[("state", state)]);
        assert_eq!((g.kind, value(&g)), (MetricKind::Gauge, Some(n)), "{state}");
    }
    // `exec` reports no tokens and no cost: no series for them.
    assert!(
        !points
            .iter()
            .any(|p| p.name == "warden.tokens" || p.name == "warden.cost.usd"),
        "{points:#?}"
    );

    // One process, one resource: its spans' and its metrics' instance is
    // the same, and a string no other process has.
    let resource = &ok.resource;
    assert_eq!(
        resource.get("service.name"),
        Some(&AttrValue::from("warden"))
    );
    assert_eq!(ok.scope.0, "warden");
    let instance = resource
        .get("service.instance.id")
        .and_then(AttrValue::as_str)
        .expect("service.instance.id");
    assert_eq!(instance.len(), 36, "{instance}");
    let spans = rx.wait_for_spans(1, Duration::from_secs(5));
    assert!(
        spans
            .iter()
            .all(|s| s.resource.get("service.instance.id") == Some(&AttrValue::from(instance))),
        "{spans:#?}"
    );
    assert!(
        points
            .iter()
            .all(|p| p.attributes.get("agent").is_none_or(|a| *a == exec))
    );
}

#[test]
fn otlp_metrics_over_http_say_what_the_reports_say() {
    otlp_metrics_say_what_the_reports_say(Transport::Http);
}

#[test]
fn otlp_metrics_over_grpc_go_out_every_interval_and_say_what_the_reports_say() {
    otlp_metrics_say_what_the_reports_say(Transport::Grpc);
}
