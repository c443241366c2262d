//! OpenTelemetry traces, received by a real OTLP receiver (HTTP and gRPC,
//! decoded with the protocol's own definitions): the span tree of a run,
//! a session and a batch, their attributes and status, `TRACEPARENT` in
//! the agent and from warden's own environment, and collectors that
//! refuse, hang or never connect, which change no verdict and hold warden
//! for at most the flush bound.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use warden_telemetry_backends::faults;
use warden_telemetry_backends::otlp::{Receiver, SpanKind, SpanTree, StatusCode, Transport};
use warden_telemetry_backends::pki::TestPki;

use crate::support::{Case, Finished};

const WAIT: Duration = Duration::from_secs(10);

/// `warden ARGS` exporting to `endpoint`, with no `OTEL_*` of the test's
/// own environment.
fn warden(case: &Case, endpoint: &str, args: &[&str]) -> Finished {
    let mut all = vec![args[0], "--otel", endpoint];
    all.extend(&args[1..]);
    let mut cmd: Command = case.command(&all);
    crate::support::without_own_telemetry(&mut cmd);
    case.finished(cmd.output().unwrap(), Instant::now())
}

fn json(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_run_is_one_span_whose_context_the_agent_gets_as_traceparent() {
    let case = Case::new();
    let rx = Receiver::start_http();
    let out = case.path().join("traceparent");
    let script = format!(
        "echo \"$TRACEPARENT\" > '{}'; sleep 30 & echo done",
        out.display()
    );
    let done = warden(
        &case,
        &rx.endpoint(),
        &["run", "exec", "--", "sh", "-c", &script],
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    let spans = rx.wait_for_spans(1, WAIT);
    assert_eq!(spans.len(), 1, "{}", spans.render());
    let run = spans.one("invoke_agent exec");
    assert!(run.is_root(), "a plain run is a trace of its own");
    assert_eq!(run.kind, SpanKind::Internal);
    assert_eq!(run.str_attr("gen_ai.operation.name"), Some("invoke_agent"));
    assert_eq!(run.str_attr("gen_ai.agent.name"), Some("exec"));
    assert_eq!(run.str_attr("warden.verdict"), Some("succeeded"));
    assert_eq!(run.int_attr("warden.orphans_killed"), Some(1));
    assert_eq!(run.int_attr("process.exit.code"), Some(0));
    assert_ne!(run.status.code, StatusCode::Error);
    let orphan = run
        .events_named("warden.orphan")
        .next()
        .unwrap_or_else(|| panic!("an orphan event: {run:?}"));
    assert!(
        orphan.attributes["process.command_line"]
            .as_str()
            .unwrap()
            .contains("sleep"),
        "{orphan:?}"
    );
    assert_eq!(run.resource["service.name"].as_str(), Some("warden"));

    // The agent's TRACEPARENT is the run's span, and run.json says so.
    let tp = std::fs::read_to_string(&out).unwrap();
    assert_eq!(
        tp.trim(),
        format!("00-{}-{}-01", run.trace_id, run.span_id),
        "TRACEPARENT"
    );
    let report = done.report();
    assert_eq!(report["otel"]["trace_id"], run.trace_id.as_str());
    assert_eq!(report["otel"]["span_id"], run.span_id.as_str());
    assert_eq!(report["otel"]["spans"], 1);
    assert_eq!(report["otel"]["spans_dropped"], 0);
    // Times from the run itself: the span lasts as long as the report says.
    let ms = (run.end_unix_nano - run.start_unix_nano) / 1_000_000;
    let reported = report["duration_ms"].as_u64().unwrap();
    assert!(ms.abs_diff(reported) <= 2, "{ms} vs {reported}");
    case.assert_nothing_left();
}

#[test]
fn a_failed_run_is_an_error_span_and_an_inbound_traceparent_is_its_parent() {
    let case = Case::new();
    let rx = Receiver::start_grpc();
    let mut cmd = case.command(&[
        "run",
        "--otel",
        &rx.endpoint(),
        "--otel-protocol",
        "grpc",
        "exec",
        "--",
        "sh",
        "-c",
        "exit 3",
    ]);
    crate::support::without_own_telemetry(&mut cmd);
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    cmd.env("TRACEPARENT", parent);
    let done = case.finished(cmd.output().unwrap(), Instant::now());
    assert_eq!(done.code, 1, "{}", done.stderr);
    let spans = rx.wait_for_spans(1, WAIT);
    let run = spans.one("invoke_agent exec");
    assert_eq!(run.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(run.parent_span_id, "00f067aa0ba902b7");
    assert_eq!(run.parent_is_remote, Some(true), "{run:?}");
    assert_eq!(run.status.code, StatusCode::Error);
    assert!(
        run.status
            .message
            .starts_with("agent_failed: exited with code 3"),
        "{:?}",
        run.status
    );
    assert_eq!(run.str_attr("warden.verdict"), Some("agent_failed"));
}

#[test]
fn under_an_inbound_traceparent_that_is_not_sampled_nothing_is_exported() {
    let case = Case::new();
    let rx = Receiver::start_http();
    let out = case.path().join("traceparent");
    let script = format!("echo \"$TRACEPARENT\" >> '{}'", out.display());
    let mut cmd = case.command(&[
        "run",
        "--otel",
        &rx.endpoint(),
        "exec",
        "--iterations",
        "2",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    crate::support::without_own_telemetry(&mut cmd);
    cmd.env(
        "TRACEPARENT",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
    );
    let done = case.finished(cmd.output().unwrap(), Instant::now());
    assert_eq!(done.code, 0, "{}", done.stderr);
    // warden has flushed before it ends: what was sent has arrived.
    assert_eq!(rx.spans().len(), 0, "{}", rx.spans().render());
    assert!(rx.trace_requests().is_empty());
    // The agent still gets its run's place in the trace, not sampled
    // either, so its own telemetry follows the same decision.
    let seen = std::fs::read_to_string(&out).unwrap();
    let seen: Vec<&str> = seen.lines().collect();
    assert_eq!(seen.len(), 2, "{seen:?}");
    for tp in &seen {
        assert!(
            tp.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-") && tp.ends_with("-00"),
            "{tp}"
        );
    }
    assert_ne!(seen[0], seen[1], "each run is a span of its own");
    let session = done
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("warden: session report: "))
        .unwrap_or_else(|| panic!("the session's report: {}", done.stderr));
    let dir = std::path::Path::new(session).parent().unwrap();
    for report in [
        "session.json",
        "iteration-1/run.json",
        "iteration-2/run.json",
    ] {
        let otel = &json(&dir.join(report))["otel"];
        assert_eq!(otel["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(otel["spans"], 0, "{report}: {otel}");
        assert_eq!(otel["spans_dropped"], 0, "{report}: {otel}");
    }
    assert!(
        !done.stderr.contains("OpenTelemetry"),
        "no warning of spans lost: {}",
        done.stderr
    );
}

#[test]
fn a_session_is_a_span_with_one_per_iteration_and_the_runs_under_them() {
    let case = Case::new();
    let rx = Receiver::start_http();
    let done = warden(
        &case,
        &rx.endpoint(),
        &[
            "run",
            "exec",
            "--iterations",
            "2",
            "--",
            "sh",
            "-c",
            "echo step",
        ],
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    let spans = rx.wait_for_spans(5, WAIT);
    let tree = spans.render();
    assert_eq!(spans.len(), 5, "{tree}");
    let session = spans.one("session exec");
    assert!(session.is_root(), "{tree}");
    assert_eq!(session.int_attr("warden.iterations_run"), Some(2));
    assert_eq!(
        session.str_attr("warden.stopped_because"),
        Some("iterations_exhausted")
    );
    for n in 1..=2 {
        let it = spans.one(&format!("iteration {n}"));
        spans.assert_child_of(it, session);
        let runs = spans.children(it);
        assert_eq!(runs.len(), 1, "{tree}");
        assert_eq!(runs[0].name, "invoke_agent exec");
    }
    assert!(spans.iter().all(|s| s.trace_id == session.trace_id));
    // session.json names the session's span; each run.json its own.
    let dir = done
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("warden: session report: "))
        .map(|p| std::path::Path::new(p).parent().unwrap().to_path_buf())
        .unwrap_or_else(|| panic!("the session's report: {}", done.stderr));
    let s = json(&dir.join("session.json"));
    assert_eq!(s["otel"]["span_id"], session.span_id.as_str());
    assert_eq!(
        s["otel"]["spans"], 3,
        "the session's span and its iterations'"
    );
    let r = json(&dir.join("iteration-2/run.json"));
    let run2 = spans.children(spans.one("iteration 2"))[0];
    assert_eq!(r["otel"]["span_id"], run2.span_id.as_str());
    assert_eq!(
        r["otel"]["parent_span_id"],
        spans.one("iteration 2").span_id.as_str()
    );
}

#[test]
fn a_batch_is_one_trace_with_a_session_per_entry() {
    let case = Case::new();
    let rx = Receiver::start_http();
    let file = crate::batch::write(
        &case,
        "[defaults]\nagent = \"exec\"\n\
         [[run]]\nname = \"a\"\ncommand = [\"true\"]\n\
         [[run]]\nname = \"b\"\ncommand = [\"sh\", \"-c\", \"exit 1\"]\n\
         [[run]]\nname = \"c\"\ncommand = [\"echo\", \"hi\"]\n",
    );
    let dir = case.path().join("batch");
    let mut cmd = case.command(&["batch", &file, "--dir", dir.to_str().unwrap()]);
    crate::support::without_own_telemetry(&mut cmd);
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", rx.endpoint());
    let done = case.finished(cmd.output().unwrap(), Instant::now());
    assert_eq!(done.code, 1, "{}", done.stderr);
    // A batch, 3 sessions, 3 iterations, 3 runs.
    let spans = rx.wait_for_spans(10, WAIT);
    let tree = spans.render();
    assert_eq!(spans.len(), 10, "{tree}");
    let batch = spans.iter().find(|s| s.name.starts_with("batch ")).unwrap();
    assert!(batch.is_root(), "{tree}");
    assert_eq!(batch.int_attr("warden.succeeded"), Some(2));
    assert_eq!(batch.int_attr("warden.failed"), Some(1));
    assert_eq!(batch.status.code, StatusCode::Error);
    let sessions = spans.children(batch);
    assert_eq!(sessions.len(), 3, "{tree}");
    let names: Vec<&str> = sessions
        .iter()
        .filter_map(|s| s.str_attr("warden.session_name"))
        .collect();
    for n in ["a", "b", "c"] {
        assert!(names.contains(&n), "{names:?}\n{tree}");
    }
    assert!(spans.iter().all(|s| s.trace_id == batch.trace_id), "{tree}");
    let b = json(&dir.join("batch.json"));
    assert_eq!(b["otel"]["span_id"], batch.span_id.as_str());
}

/// A collector that refuses, hangs or never completes a connection: the
/// run's verdict is unchanged, warden says what was lost, and its end
/// waits at most the flush bound (1 s here; the bound asserted is
/// generous, the figure is in the benchmark).
#[test]
fn a_dead_hanging_or_unreachable_collector_costs_at_most_the_flush_bound() {
    for (what, addr, protocol) in [
        ("refusing", faults::refusing(), "http/protobuf"),
        ("hanging", faults::hanging(), "http/protobuf"),
        ("hanging", faults::hanging(), "grpc"),
        ("never connecting", faults::never_connecting(), "grpc"),
        (
            "never connecting",
            faults::never_connecting(),
            "http/protobuf",
        ),
    ] {
        let case = Case::new();
        let start = Instant::now();
        let endpoint = format!("http://{addr}");
        let done = warden(
            &case,
            &endpoint,
            &[
                "run",
                "--otel-protocol",
                protocol,
                "--otel-flush",
                "1s",
                "exec",
                "--",
                "echo",
                "hi",
            ],
        );
        let took = start.elapsed();
        assert_eq!(done.code, 0, "{what} {protocol}: {}", done.stderr);
        assert_eq!(done.report()["verdict"], "succeeded");
        assert!(
            done.stderr
                .contains("warning: OpenTelemetry: 0 span(s) sent"),
            "{what} {protocol}: {}",
            done.stderr
        );
        assert!(
            took < Duration::from_secs(4),
            "{what} {protocol}: warden took {took:?} with a flush bound of 1s"
        );
    }
}

/// Over HTTP, exports go through the proxy `HTTP_PROXY` names (a tunnel
/// to the receiver), and straight to the collector for a host of
/// `NO_PROXY`.
#[test]
fn http_exports_go_through_the_environment_s_proxy_unless_no_proxy_says() {
    let rx = Receiver::start_http();
    let proxy = warden_telemetry_backends::proxy::ConnectProxy::start(rx.addr());
    // TEST-NET-1: nothing answers there; only the proxy can deliver.
    let collector = "http://192.0.2.10:4318";
    for no_proxy in [None, Some("192.0.2.10")] {
        let case = Case::new();
        let mut cmd = case.command(&[
            "run",
            "--otel",
            collector,
            "--otel-flush",
            "1s",
            "exec",
            "--",
            "true",
        ]);
        crate::support::without_own_telemetry(&mut cmd);
        for v in [
            "HTTP_PROXY",
            "http_proxy",
            "HTTPS_PROXY",
            "https_proxy",
            "ALL_PROXY",
            "all_proxy",
            "NO_PROXY",
            "no_proxy",
        ] {
            cmd.env_remove(v);
        }
        cmd.env("HTTP_PROXY", proxy.url());
        if let Some(hosts) = no_proxy {
            cmd.env("NO_PROXY", hosts);
        }
        let done = case.finished(cmd.output().unwrap(), Instant::now());
        assert_eq!(done.code, 0, "{no_proxy:?}: {}", done.stderr);
        match no_proxy {
            None => {
                let spans = rx.wait_for_spans(1, WAIT);
                assert_eq!(spans.len(), 1, "{}", spans.render());
                assert!(
                    proxy.asked().iter().all(|t| t == "192.0.2.10:4318"),
                    "{:?}",
                    proxy.asked()
                );
            }
            Some(_) => {
                assert_eq!(rx.spans().len(), 1, "no second span through the proxy");
                assert!(
                    done.stderr
                        .contains("warning: OpenTelemetry: 0 span(s) sent"),
                    "{}",
                    done.stderr
                );
            }
        }
    }
}

/// A collector that takes the connection and never answers the TLS
/// handshake: each export is cut at its timeout (here 300 ms), well
/// inside a long flush bound, so the export thread is free for the next
/// spans (not stuck until the server hangs up).
#[test]
fn a_tls_handshake_that_never_completes_is_cut_at_the_export_timeout() {
    for protocol in ["http/protobuf", "grpc"] {
        let case = Case::new();
        let endpoint = format!("https://{}", faults::hanging());
        let mut cmd = case.command(&[
            "run",
            "--otel",
            &endpoint,
            "--otel-protocol",
            protocol,
            "--otel-flush",
            "20s",
            "exec",
            "--",
            "true",
        ]);
        crate::support::without_own_telemetry(&mut cmd);
        cmd.env("OTEL_EXPORTER_OTLP_TIMEOUT", "300");
        let start = Instant::now();
        let done = case.finished(cmd.output().unwrap(), start);
        let took = start.elapsed();
        assert_eq!(done.code, 0, "{protocol}: {}", done.stderr);
        assert!(
            done.stderr
                .contains("0 span(s) sent, 0 dropped (queue full), 1 in failed exports"),
            "{protocol}: {}",
            done.stderr
        );
        assert!(
            took < Duration::from_secs(8),
            "{protocol}: {took:?}: the handshake was not cut at the 300 ms timeout"
        );
    }
}

#[test]
fn bad_telemetry_settings_are_refused_before_anything_runs() {
    let case = Case::new();
    for (args, needle) in [
        (
            vec!["run", "--otel", "ftp://c:4318", "exec", "--", "true"],
            "not an http:// or https:// URL",
        ),
        (
            vec![
                "run",
                "--otel",
                "http://c:4318",
                "--otel-protocol",
                "http/json",
                "exec",
                "--",
                "true",
            ],
            "--otel-protocol",
        ),
        (
            vec!["run", "--otel-agent", "exec", "--", "true"],
            "--otel-agent needs a collector",
        ),
        (
            vec![
                "run",
                "--otel",
                "http://127.0.0.1:9",
                "--otel-agent",
                "--agent-bin",
                "/bin/sh",
                "pi",
                "hi",
            ],
            "pi has no trace export",
        ),
    ] {
        let mut cmd = case.command(&args);
        crate::support::without_own_telemetry(&mut cmd);
        let done = case.finished(cmd.output().unwrap(), Instant::now());
        assert_eq!(done.code, 2, "{args:?}: {}", done.stderr);
        assert!(done.stderr.contains(needle), "{args:?}: {}", done.stderr);
        assert!(
            !case.path().join(".warden/runs").exists(),
            "nothing ran: {args:?}"
        );
    }
}

/// `warden run exec -- true` exporting spans and metrics to `rx`, with
/// `vars` in its environment.
fn run_exporting_to(case: &Case, rx: &Receiver, vars: &[(&str, &std::path::Path)]) -> Finished {
    let protocol = match rx.transport() {
        Transport::Http => "http/protobuf",
        Transport::Grpc => "grpc",
    };
    let mut cmd = case.command(&[
        "run",
        "--otel",
        &rx.endpoint(),
        "--otel-protocol",
        protocol,
        "--otel-flush",
        "2s",
        "exec",
        "--",
        "true",
    ]);
    crate::support::without_own_telemetry(&mut cmd);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let _ = std::fs::remove_dir_all(case.run_dir());
    case.finished(cmd.output().unwrap(), Instant::now())
}

#[test]
fn an_https_collector_gets_spans_and_metrics_when_its_ca_is_trusted() {
    let pki = TestPki::new();
    for transport in [Transport::Http, Transport::Grpc] {
        let case = Case::new();
        let rx = Receiver::start_tls(transport, &pki, false);
        assert!(rx.endpoint().starts_with("https://"));
        let ca = pki.ca_file();
        let done = run_exporting_to(&case, &rx, &[("OTEL_EXPORTER_OTLP_CERTIFICATE", &ca)]);
        assert_eq!(done.code, 0, "{transport:?}: {}", done.stderr);
        assert!(
            !done.stderr.contains("warning"),
            "{transport:?}: {}",
            done.stderr
        );
        let spans = rx.wait_for_spans(1, WAIT);
        assert_eq!(
            spans.one("invoke_agent exec").str_attr("warden.verdict"),
            Some("succeeded")
        );
        assert!(
            !rx.wait_for_metric("warden.runs", WAIT).is_empty(),
            "{transport:?}"
        );

        // Without the CA the server is not trusted: nothing goes out, and
        // the run is the same.
        let rx = Receiver::start_tls(transport, &pki, false);
        let done = run_exporting_to(&case, &rx, &[]);
        assert_eq!(done.code, 0, "{transport:?}: {}", done.stderr);
        assert_eq!(done.report()["verdict"], "succeeded");
        assert!(
            done.stderr
                .contains("warning: OpenTelemetry: 0 span(s) sent"),
            "{transport:?}: {}",
            done.stderr
        );
        assert!(rx.spans().is_empty() && rx.metrics().is_empty());
    }
}

#[test]
fn a_collector_that_asks_for_a_client_certificate_gets_one_when_it_is_set() {
    let pki = TestPki::new();
    let (cert, key) = pki.client_files();
    let ca = pki.ca_file();
    for transport in [Transport::Http, Transport::Grpc] {
        let case = Case::new();
        let rx = Receiver::start_tls(transport, &pki, true);
        let done = run_exporting_to(
            &case,
            &rx,
            &[
                ("OTEL_EXPORTER_OTLP_CERTIFICATE", &ca),
                ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", &cert),
                ("OTEL_EXPORTER_OTLP_CLIENT_KEY", &key),
            ],
        );
        assert_eq!(done.code, 0, "{transport:?}: {}", done.stderr);
        assert!(
            !done.stderr.contains("warning"),
            "{transport:?}: {}",
            done.stderr
        );
        assert_eq!(rx.wait_for_spans(1, WAIT).len(), 1, "{transport:?}");

        // Without one, the collector refuses the connection.
        let rx = Receiver::start_tls(transport, &pki, true);
        let done = run_exporting_to(&case, &rx, &[("OTEL_EXPORTER_OTLP_CERTIFICATE", &ca)]);
        assert_eq!(done.code, 0, "{transport:?}: {}", done.stderr);
        assert!(
            done.stderr
                .contains("warning: OpenTelemetry: 0 span(s) sent"),
            "{transport:?}: {}",
            done.stderr
        );
        assert!(rx.spans().is_empty());
    }
}

#[test]
fn bad_tls_files_are_refused_before_anything_runs_naming_the_file() {
    let case = Case::new();
    let pki = TestPki::new();
    let (cert, key) = pki.client_files();
    let missing = case.path().join("no-such-ca.pem");
    let not_pem = case.path().join("not.pem");
    std::fs::write(&not_pem, "hello").unwrap();
    // PEM framing around what is no certificate.
    let not_x509 = case.path().join("not-x509.pem");
    std::fs::write(
        &not_x509,
        "-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    // A key, but the server's, not the client certificate's.
    let other_key = case.path().join("other-key.pem");
    std::fs::write(&other_key, &pki.server_key).unwrap();
    let rx = Receiver::start_tls(Transport::Http, &pki, false);
    for (vars, needle) in [
        (
            vec![("OTEL_EXPORTER_OTLP_CERTIFICATE", missing.as_path())],
            format!("the CA certificate file {}", missing.display()),
        ),
        (
            vec![("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", not_pem.as_path())],
            format!("{} holds no PEM certificate", not_pem.display()),
        ),
        (
            vec![("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", cert.as_path())],
            "set both OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY"
                .to_string(),
        ),
        (
            vec![
                ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", cert.as_path()),
                ("OTEL_EXPORTER_OTLP_CLIENT_KEY", not_pem.as_path()),
            ],
            format!("the client key {}", not_pem.display()),
        ),
        (
            vec![("OTEL_EXPORTER_OTLP_CERTIFICATE", not_x509.as_path())],
            format!(
                "the CA certificate file {}: 1 of its 1 certificate(s) cannot be used",
                not_x509.display()
            ),
        ),
        (
            vec![
                ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", cert.as_path()),
                ("OTEL_EXPORTER_OTLP_CLIENT_KEY", other_key.as_path()),
            ],
            format!(
                "the client certificate {} and key {}: the key is not the certificate's",
                cert.display(),
                other_key.display()
            ),
        ),
    ] {
        let done = run_exporting_to(&case, &rx, &vars);
        assert_eq!(done.code, 2, "{vars:?}: {}", done.stderr);
        assert!(done.stderr.contains(&needle), "{vars:?}: {}", done.stderr);
        assert!(!case.run_dir().exists(), "nothing ran: {vars:?}");
    }
    // The key is not the problem when it is right.
    assert!(key.exists());
}

/// `--otel-protocol` beats `OTEL_EXPORTER_OTLP_PROTOCOL`, and a gRPC
/// endpoint that cannot be used is a usage error, never a crash.
#[test]
fn the_protocol_setting_beats_the_environment_and_a_bad_grpc_endpoint_is_refused() {
    let case = Case::new();
    let rx = Receiver::start_http();
    let mut cmd = case.command(&[
        "run",
        "--otel",
        &rx.endpoint(),
        "--otel-protocol",
        "http/protobuf",
        "exec",
        "--",
        "true",
    ]);
    crate::support::without_own_telemetry(&mut cmd);
    cmd.env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc");
    let done = case.finished(cmd.output().unwrap(), Instant::now());
    assert_eq!(done.code, 0, "{}", done.stderr);
    rx.wait_for_spans(1, WAIT);

    for traces in ["otlp", "none"] {
        let mut cmd = case.command(&[
            "run",
            "--otel",
            "http://bad host:4317",
            "--otel-protocol",
            "grpc",
            "exec",
            "--",
            "true",
        ]);
        crate::support::without_own_telemetry(&mut cmd);
        cmd.env("OTEL_TRACES_EXPORTER", traces);
        let done = case.finished(cmd.output().unwrap(), Instant::now());
        assert_eq!(done.code, 2, "traces {traces}: {}", done.stderr);
        assert!(
            done.stderr.contains("OTLP exporter could not be made"),
            "traces {traces}: {}",
            done.stderr
        );
    }
}
