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

#[test]
fn the_batch_endpoint_counts_each_run_as_its_report_does_while_the_batch_runs() {
    let case = Case::new();
    let gate = case.path().join("gate");
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

# Held until the test has read the others' counts.
[[run]]
name = "last"
timeout = "60s"
command = ["sh", "-c", "echo waiting; while [ ! -e '{gate}' ]; do sleep 0.05; done; echo released"]
"#,
        gate = gate.display()
    );
    let file = super::batch::write(&case, &toml);
    let dir = case.path().join("batch");
    let mut child = command(
        &case,
        &[
            "batch",
            &file,
            "-j",
            "5",
            "--dir",
            dir.to_str().unwrap(),
            "--metrics-addr",
            "127.0.0.1:0",
        ],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .expect("spawn warden");
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let addr = watch_stderr(&mut child, stderr.clone())
        .recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("no metrics URL on stderr: {:?}", stderr.lock().unwrap()));
    assert_ne!(addr.port(), 0, "port 0 is replaced by the one chosen");

    // The four runs that end by themselves, counted while the fifth runs.
    let until = Instant::now() + Duration::from_secs(30);
    let s = loop {
        let (status, body) = get(addr, "/metrics");
        assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
        let s = samples(&body);
        if sum(&s, "warden_runs_total", &[]) >= 4.0 {
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
    assert!(
        ms(&reports["orphan"]["orphans_killed"]) >= 1,
        "the orphan run killed none: {}",
        reports["orphan"]
    );
    assert!(
        ms(&reports["stalls"]["stall_warnings"]) >= 1,
        "{}",
        reports["stalls"]
    );
    let of = |key: &str| -> f64 {
        reports
            .iter()
            .filter(|(name, _)| *name != "last")
            .map(|(_, r)| ms(&r[key]) as f64)
            .sum()
    };
    assert_eq!(
        at(r#"warden_orphans_killed_total{agent="exec"}"#),
        of("orphans_killed")
    );
    assert_eq!(
        at(r#"warden_stall_warnings_total{agent="exec"}"#),
        of("stall_warnings")
    );
    let seconds = |name: &str| ms(&reports[name]["duration_ms"]) as f64 / 1000.0;
    let succeeded = at(r#"warden_run_duration_seconds_sum{agent="exec",verdict="succeeded"}"#);
    assert!(
        (succeeded - (seconds("ok") + seconds("orphan"))).abs() < 1e-6,
        "{succeeded} s for {} s and {} s",
        seconds("ok"),
        seconds("orphan")
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
