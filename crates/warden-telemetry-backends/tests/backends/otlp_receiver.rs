//! What the receiver refuses, and that it lets go of its port.

use std::io::Write as _;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use warden_telemetry_backends::otlp::Receiver;

fn post(url: &str, content_type: &str, body: &[u8]) -> u16 {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .into();
    agent
        .post(url)
        .header("content-type", content_type)
        .send(body)
        .expect("request")
        .status()
        .as_u16()
}

#[test]
fn the_http_receiver_rejects_what_is_not_an_otlp_protobuf_export_and_records_why() {
    let rx = Receiver::start_http();
    let base = rx.endpoint();
    // OTLP/JSON is another encoding: not taken.
    assert_eq!(
        post(&format!("{base}/v1/traces"), "application/json", b"{}"),
        415
    );
    // Bytes that are no protobuf message (a truncated varint).
    assert_eq!(
        post(
            &format!("{base}/v1/metrics"),
            "application/x-protobuf",
            b"\xff\xff\xff"
        ),
        400
    );
    assert_eq!(
        post(&format!("{base}/v1/logs"), "application/x-protobuf", b""),
        404
    );
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let get = agent
        .get(format!("{base}/v1/traces"))
        .call()
        .expect("GET")
        .status();
    assert_eq!(get, 405);

    let rejected = rx.rejected();
    let seen: Vec<(&str, &str, u16)> = rejected
        .iter()
        .map(|r| (r.method.as_str(), r.path.as_str(), r.status))
        .collect();
    assert_eq!(
        seen,
        [
            ("POST", "/v1/traces", 415),
            ("POST", "/v1/metrics", 400),
            ("POST", "/v1/logs", 404),
            ("GET", "/v1/traces", 405),
        ]
    );
    assert_eq!(rejected[0].content_type, "application/json");
    assert!(rx.exports().is_empty(), "{:?}", rx.exports());

    // An empty protobuf body is a valid (empty) export: taken, no spans.
    assert_eq!(
        post(&format!("{base}/v1/traces"), "application/x-protobuf", b""),
        200
    );
    assert_eq!(rx.exports().len(), 1);
    assert!(rx.spans().is_empty());
}

#[test]
#[should_panic(expected = "expected 1 spans")]
fn waiting_for_spans_that_never_come_fails_saying_so() {
    let rx = Receiver::start_http();
    rx.wait_for_spans(1, Duration::from_millis(100));
}

#[test]
fn dropping_a_receiver_closes_its_port_at_once_despite_an_open_connection() {
    for rx in [Receiver::start_http(), Receiver::start_grpc()] {
        let addr = rx.addr();
        // An idle connection, as an exporter's keep-alive leaves one.
        let mut open = TcpStream::connect(addr).expect("connect to the receiver");
        open.write_all(b"POST /v1/traces HTTP/1.1\r\n").unwrap();
        let t = Instant::now();
        drop(rx);
        assert!(
            t.elapsed() < Duration::from_secs(1),
            "dropping took {:?}",
            t.elapsed()
        );
        let err = TcpStream::connect_timeout(&addr, Duration::from_secs(1))
            .expect_err("the port still accepts after the drop");
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused, "{err}");
    }
}
