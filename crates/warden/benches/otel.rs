//! What OpenTelemetry export costs a run: `cargo bench -p agent-warden
//! --bench otel`.
//!
//! Times `warden run exec -- true` without export (the reference), then
//! exporting to a live OTLP receiver (HTTP and gRPC), and to collectors
//! that refuse connections, accept them and never answer, or never
//! complete them, each with the default flush bound (5 s), in turn in the
//! same loop so the machine's drift hits every row alike; the live rows
//! also with spans alone (`OTEL_METRICS_EXPORTER=none`) and over TLS (a
//! receiver whose CA is given as `OTEL_EXPORTER_OTLP_CERTIFICATE`; each
//! run makes its TLS connection anew). Prints the
//! median wall time of each and its extra time over the reference, beside
//! the bound. `WARDEN_BENCH_QUICK=1` for fewer repetitions (the hanging
//! rows take up to the bound each).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use warden_telemetry_backends::faults;
use warden_telemetry_backends::otlp::{Receiver, Transport};
use warden_telemetry_backends::pki::TestPki;

const WARDEN: &str = env!("CARGO_BIN_EXE_warden");

fn run(
    dir: &std::path::Path,
    otel: Option<(&str, &str)>,
    spans_only: bool,
    ca: Option<&std::path::Path>,
) -> Duration {
    let mut cmd = Command::new(WARDEN);
    cmd.arg("run");
    if let Some((endpoint, protocol)) = otel {
        cmd.args(["--otel", endpoint, "--otel-protocol", protocol]);
    }
    cmd.args(["-q", "exec", "--", "true"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for v in warden_run::telemetry::ENV_VARS {
        cmd.env_remove(v);
    }
    cmd.env_remove("TRACEPARENT");
    if spans_only {
        cmd.env("OTEL_METRICS_EXPORTER", "none");
    }
    if let Some(ca) = ca {
        cmd.env("OTEL_EXPORTER_OTLP_CERTIFICATE", ca);
    }
    let start = Instant::now();
    let status = cmd.status().expect("warden");
    let took = start.elapsed();
    assert!(
        status.success(),
        "warden exited {status}: export never changes the verdict"
    );
    took
}

/// A row: its name, the collector and protocol (none: no export), how
/// many runs it gets, and whether only spans are exported (no metrics).
type Row<'a> = (&'a str, Option<(String, &'a str)>, usize, bool);

mod measure;

fn main() {
    let quick = std::env::var_os("WARDEN_BENCH_QUICK").is_some();
    let (fast_reps, slow_reps) = if quick { (10, 3) } else { (40, 7) };
    let tmp = tempfile::tempdir().unwrap();
    let machine = measure::Machine::start();
    let http = Receiver::start_http();
    let grpc = Receiver::start_grpc();
    let pki = TestPki::new();
    let https = Receiver::start_tls(Transport::Http, &pki, false);
    let grpcs = Receiver::start_tls(Transport::Grpc, &pki, false);
    let url = |a: std::net::SocketAddr| format!("http://{a}");
    let rows: Vec<Row> = vec![
        ("no export (reference)", None, fast_reps, false),
        (
            "live receiver, HTTP",
            Some((http.endpoint(), "http/protobuf")),
            fast_reps,
            false,
        ),
        (
            "live receiver, gRPC",
            Some((grpc.endpoint(), "grpc")),
            fast_reps,
            false,
        ),
        (
            "live receiver, HTTP, spans only",
            Some((http.endpoint(), "http/protobuf")),
            fast_reps,
            true,
        ),
        (
            "live receiver, gRPC, spans only",
            Some((grpc.endpoint(), "grpc")),
            fast_reps,
            true,
        ),
        (
            "live receiver, HTTPS",
            Some((https.endpoint(), "http/protobuf")),
            fast_reps,
            false,
        ),
        (
            "live receiver, gRPC over TLS",
            Some((grpcs.endpoint(), "grpc")),
            fast_reps,
            false,
        ),
        (
            "refusing, HTTP",
            Some((url(faults::refusing()), "http/protobuf")),
            slow_reps,
            false,
        ),
        (
            "refusing, gRPC",
            Some((url(faults::refusing()), "grpc")),
            slow_reps,
            false,
        ),
        (
            "hanging, HTTP",
            Some((url(faults::hanging()), "http/protobuf")),
            slow_reps,
            false,
        ),
        (
            "hanging, gRPC",
            Some((url(faults::hanging()), "grpc")),
            slow_reps,
            false,
        ),
        (
            "never connecting, HTTP",
            Some((url(faults::never_connecting()), "http/protobuf")),
            slow_reps,
            false,
        ),
        (
            "never connecting, gRPC",
            Some((url(faults::never_connecting()), "grpc")),
            slow_reps,
            false,
        ),
    ];
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); rows.len()];
    let most = rows.iter().map(|r| r.2).max().unwrap_or(1);
    for i in 0..most {
        for (row, (_, otel, reps, spans_only)) in rows.iter().enumerate() {
            if i < *reps {
                let otel = otel.as_ref().map(|(e, p)| (e.as_str(), *p));
                let ca = pki.ca_file();
                let tls = otel.is_some_and(|(e, _)| e.starts_with("https://"));
                times[row].push(run(
                    tmp.path(),
                    otel,
                    *spans_only,
                    tls.then_some(ca.as_path()),
                ));
            }
        }
    }
    let times: Vec<measure::Samples> = times
        .into_iter()
        .map(|t| {
            let mut s = measure::Samples::new();
            t.into_iter().for_each(|d| s.push(d));
            s
        })
        .collect();
    let reference = times[0].median();
    println!(
        "# warden run exec -- true, exporting traces (wall time min / median; flush bound 5s)\n"
    );
    println!("| collector | runs | wall time | extra over no export (median) |");
    println!("|---|---|---|---|");
    for ((name, _, reps, _), t) in rows.iter().zip(&times) {
        println!(
            "| {name} | {reps} | {} | {:+.1} ms |",
            t.ms(),
            (t.median().as_secs_f64() - reference.as_secs_f64()) * 1e3
        );
    }
    println!(
        "\n{} spans received over HTTP, {} over gRPC, {} over HTTPS, {} over gRPC with TLS",
        http.spans().len(),
        grpc.spans().len(),
        https.spans().len(),
        grpcs.spans().len()
    );
    machine.end();
}
