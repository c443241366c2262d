//! Each fault does what it says, seen with real connects.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use warden_telemetry_backends::faults;

#[test]
fn a_connect_to_the_refusing_address_fails_at_once() {
    let addr = faults::refusing();
    for _ in 0..2 {
        let t = Instant::now();
        let err = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
            .expect_err("something accepted the connect");
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused, "{err}");
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "refused only after {:?}",
            t.elapsed()
        );
    }
}

#[test]
fn the_hanging_collector_accepts_and_reads_but_never_answers() {
    let addr = faults::hanging();
    let mut conn =
        TcpStream::connect_timeout(&addr, Duration::from_secs(2)).expect("the connect completes");
    conn.write_all(
        b"POST /v1/traces HTTP/1.1\r\nhost: x\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n",
    )
    .unwrap();
    conn.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut buf = [0u8; 64];
    match conn.read(&mut buf) {
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) => {}
        Ok(0) => panic!("the collector closed the connection"),
        other => panic!("the collector answered: {other:?}"),
    }

    // An HTTP client sees a request that times out, not a refusal.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_millis(300)))
        .build()
        .into();
    let t = Instant::now();
    let err = agent
        .post(format!("http://{addr}/v1/traces"))
        .header("content-type", "application/x-protobuf")
        .send(&b""[..])
        .expect_err("the collector answered");
    assert!(matches!(err, ureq::Error::Timeout(_)), "{err}");
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn a_connect_to_the_never_connecting_address_does_not_complete() {
    let addr = faults::never_connecting();
    // Twice: a connect that gave up must not free the way for the next.
    for _ in 0..2 {
        let t = Instant::now();
        let err = TcpStream::connect_timeout(&addr, Duration::from_millis(300))
            .expect_err("the connect completed");
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut, "{err}");
        assert!(
            t.elapsed() >= Duration::from_millis(300),
            "{:?}",
            t.elapsed()
        );
    }
}
