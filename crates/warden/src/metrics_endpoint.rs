//! `warden batch --metrics-addr ADDR`: the batch's metrics at
//! `GET http://ADDR/metrics`, in the Prometheus text format, while the
//! batch runs.
//!
//! A GET-only HTTP/1.1 responder on a thread of its own, with a runtime of
//! its own: the runs are supervised on the main thread, which nothing here
//! touches, so no scraper (slow, stuck or hostile) can delay a run. The
//! text is encoded before a byte is written, so no lock is held while a
//! scraper reads.
//!
//! Each connection gets one answer and is closed. Its request head may be
//! at most [`MAX_HEAD`] bytes and must arrive, whole, within
//! [`HEAD_TIMEOUT`] of the connection (however it is split); the answer
//! must be taken within [`IO_TIMEOUT`]. At most [`MAX_CONNECTIONS`] are
//! served at once, and no idle or slow client can keep a scraper out: a
//! connection over the cap takes the place of the oldest one still
//! sending its head, and when every place is busy answering it is told
//! `503` at once and closed.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use warden_run::telemetry::{PROMETHEUS_CONTENT_TYPE, Telemetry};

use crate::error::{CliError, Kind};

/// The most bytes of a request head read.
const MAX_HEAD: usize = 8 * 1024;
/// The most a whole request head may take to arrive: a scraper sends its
/// few hundred bytes at once.
const HEAD_TIMEOUT: Duration = Duration::from_secs(2);
/// The most an answer may take to be taken.
const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections served at once.
const MAX_CONNECTIONS: usize = 16;

/// `--metrics-addr`: an IP address and a port, or `localhost:PORT`.
pub(crate) fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    let t = s.trim();
    let parsed = match t.strip_prefix("localhost:") {
        Some(port) => port
            .parse::<u16>()
            .ok()
            .map(|p| SocketAddr::from(([127, 0, 0, 1], p))),
        None => t.parse().ok(),
    };
    parsed.ok_or_else(|| {
        format!(
            "`{s}` is not an address to listen on: give IP:PORT, such as 127.0.0.1:9464 ([::1]:9464 for IPv6; port 0 picks a free one)"
        )
    })
}

/// The listening socket, taken before the batch starts: a port in use
/// stops the batch before anything runs.
pub(crate) fn bind(addr: SocketAddr) -> Result<std::net::TcpListener, CliError> {
    let cannot = |why: String| {
        CliError::new(
            Kind::Unavailable,
            format_args!("cannot serve metrics on {addr} (--metrics-addr): {why}"),
        )
    };
    let listener = std::net::TcpListener::bind(addr).map_err(|e| {
        cannot(match e.kind() {
            std::io::ErrorKind::AddrInUse => {
                "the address is in use: another program listens there; choose another port, or 0 for a free one".into()
            }
            std::io::ErrorKind::AddrNotAvailable => {
                "no interface of this machine has that address".into()
            }
            std::io::ErrorKind::PermissionDenied => {
                "permission denied (ports below 1024 need privileges)".into()
            }
            _ => e.to_string(),
        })
    })?;
    listener
        .set_nonblocking(true)
        .map_err(|e| cannot(e.to_string()))?;
    Ok(listener)
}

/// The endpoint, serving until [`MetricsEndpoint::stop`].
pub(crate) struct MetricsEndpoint {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MetricsEndpoint {
    /// Serves `telemetry`'s Prometheus text on `listener`.
    pub(crate) fn start(
        listener: std::net::TcpListener,
        telemetry: Telemetry,
    ) -> Result<Self, CliError> {
        let internal = |e: std::io::Error| {
            CliError::new(
                Kind::Internal,
                format_args!("cannot start the metrics endpoint: {e}"),
            )
        };
        let addr = listener.local_addr().map_err(internal)?;
        let (stop, stopped) = tokio::sync::oneshot::channel();
        // The runtime is made (and dropped) on the endpoint's own thread:
        // never inside warden's main runtime, where dropping one panics.
        let (made_tx, made) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("warden-metrics-http".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_io()
                    .enable_time()
                    .build()
                {
                    Ok(r) => {
                        let _ = made_tx.send(Ok(()));
                        r
                    }
                    Err(e) => {
                        let _ = made_tx.send(Err(e));
                        return;
                    }
                };
                runtime.block_on(serve(listener, telemetry, stopped));
            })
            .map_err(internal)?;
        match made.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(internal(e)),
            Err(_) => return Err(internal(std::io::Error::other("its thread ended"))),
        }
        Ok(Self {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Where it listens (the port chosen, for port 0).
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops listening; answers being written are cut off.
    pub(crate) fn stop(mut self) {
        self.end();
    }

    fn end(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // Its loop ends at the next poll, and dropping its runtime drops
        // every connection: nothing there waits on a peer.
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MetricsEndpoint {
    fn drop(&mut self) {
        self.end();
    }
}

async fn serve(
    listener: std::net::TcpListener,
    telemetry: Telemetry,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let mut places = Places::default();
    loop {
        let conn = tokio::select! {
            _ = &mut stopped => return,
            conn = listener.accept() => conn,
        };
        let Ok((stream, _)) = conn else {
            // Out of file descriptors, say: a moment for some to close.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        if !places.make_room() {
            busy(stream);
            continue;
        }
        let answering = Arc::new(AtomicBool::new(false));
        let telemetry = telemetry.clone();
        let flag = answering.clone();
        let task = tokio::spawn(async move {
            let _ =
                tokio::time::timeout(HEAD_TIMEOUT + IO_TIMEOUT, answer(stream, &telemetry, &flag))
                    .await;
        });
        places.taken.push_back(Place {
            task: task.abort_handle(),
            answering,
        });
        // The new connection's head, when it came with it (a scraper's
        // does), is read before the next connection is taken: a flood of
        // connections does not push it out before it was looked at.
        tokio::task::yield_now().await;
    }
}

/// The connections being served, oldest first.
#[derive(Default)]
struct Places {
    taken: VecDeque<Place>,
}

struct Place {
    task: tokio::task::AbortHandle,
    /// Its head has come: it is being answered.
    answering: Arc<AtomicBool>,
}

impl Places {
    /// Whether a new connection may be served: under the cap, or once the
    /// oldest connection still sending its head (idle, slow, or hostile:
    /// a scraper's head comes in one piece) is dropped for it.
    fn make_room(&mut self) -> bool {
        self.taken.retain(|p| !p.task.is_finished());
        if self.taken.len() < MAX_CONNECTIONS {
            return true;
        }
        match self
            .taken
            .iter()
            .position(|p| !p.answering.load(Ordering::Acquire))
        {
            Some(oldest) => {
                if let Some(p) = self.taken.remove(oldest) {
                    p.task.abort();
                }
                true
            }
            None => false,
        }
    }
}

/// Tells a connection over the cap that every place is taken, without
/// waiting for it (what fits in its socket's buffer, which a fresh one
/// has room for), and closes it.
fn busy(stream: tokio::net::TcpStream) {
    let r = Response::text(
        503,
        "Service Unavailable",
        "too many connections; try again\n",
    );
    let _ = stream.try_write(&head_and_body(&r, true));
    // What the client sent already is taken, so that closing sends it a
    // FIN after the answer, not a reset that could discard the answer.
    // At most a head's worth: a client that keeps sending is not waited on.
    let mut sink = [0u8; 1024];
    for _ in 0..MAX_HEAD / sink.len() {
        if !matches!(stream.try_read(&mut sink), Ok(n) if n > 0) {
            break;
        }
    }
}

/// Reads one request head and answers it; `answering` is set once the
/// head has come.
async fn answer(
    mut stream: tokio::net::TcpStream,
    telemetry: &Telemetry,
    answering: &AtomicBool,
) -> std::io::Result<()> {
    // One bound for the whole head, however many reads it takes: a client
    // that sends a byte now and then holds its place no longer.
    let head = tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut stream)).await;
    answering.store(true, Ordering::Release);
    let head = match head {
        Ok(Ok(Some(head))) => head,
        Ok(Ok(None)) => {
            let r = Response::text(
                431,
                "Request Header Fields Too Large",
                "request too large\n",
            );
            return write(&mut stream, r, false).await;
        }
        // Closed, failed or too slow: nobody to answer.
        Ok(Err(e)) => return Err(e),
        Err(_) => return Ok(()),
    };
    let (response, body) = respond(&head, telemetry);
    write(&mut stream, response, body).await
}

/// The request head (up to the blank line); `None` past [`MAX_HEAD`].
async fn read_head(stream: &mut tokio::net::TcpStream) -> std::io::Result<Option<Vec<u8>>> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        head.extend_from_slice(&buf[..n]);
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            head.truncate(end);
            return Ok(Some(head));
        }
        if head.len() > MAX_HEAD {
            return Ok(None);
        }
    }
}

struct Response {
    status: u16,
    reason: &'static str,
    content_type: &'static str,
    extra: &'static str,
    body: String,
}

impl Response {
    fn text(status: u16, reason: &'static str, body: &str) -> Self {
        Self {
            status,
            reason,
            content_type: "text/plain; charset=utf-8",
            extra: "",
            body: body.into(),
        }
    }
}

/// The answer to `head`, and whether it carries its body (not for HEAD).
fn respond(head: &[u8], telemetry: &Telemetry) -> (Response, bool) {
    let line = head.split(|b| *b == b'\r').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if !parts.next().is_some_and(|v| v.starts_with("HTTP/1.")) {
        return (Response::text(400, "Bad Request", "bad request\n"), true);
    }
    let body = method != "HEAD";
    if method != "GET" && method != "HEAD" {
        let mut r = Response::text(405, "Method Not Allowed", "only GET\n");
        r.extra = "Allow: GET, HEAD\r\n";
        return (r, true);
    }
    let path = target.split('?').next().unwrap_or("");
    if path != "/metrics" {
        return (
            Response::text(404, "Not Found", "not found: the metrics are at /metrics\n"),
            body,
        );
    }
    let r = match telemetry.prometheus_text() {
        Some(text) => Response {
            status: 200,
            reason: "OK",
            content_type: PROMETHEUS_CONTENT_TYPE,
            extra: "Cache-Control: no-store\r\n",
            body: text,
        },
        None => Response::text(503, "Service Unavailable", "no metrics are kept\n"),
    };
    (r, body)
}

/// The bytes of an answer: its head, and its body unless `with_body` is
/// false (a HEAD request).
fn head_and_body(r: &Response, with_body: bool) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}Connection: close\r\n\r\n",
        r.status,
        r.reason,
        r.content_type,
        r.body.len(),
        r.extra
    )
    .into_bytes();
    if with_body {
        out.extend_from_slice(r.body.as_bytes());
    }
    out
}

async fn write(
    stream: &mut tokio::net::TcpStream,
    r: Response,
    with_body: bool,
) -> std::io::Result<()> {
    let out = head_and_body(&r, with_body);
    match tokio::time::timeout(IO_TIMEOUT, async {
        stream.write_all(&out).await?;
        stream.shutdown().await
    })
    .await
    {
        Ok(r) => r,
        Err(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_ip_and_port_or_localhost() {
        assert_eq!(
            parse_addr("127.0.0.1:9464"),
            Ok("127.0.0.1:9464".parse().unwrap())
        );
        assert_eq!(parse_addr("[::1]:0"), Ok("[::1]:0".parse().unwrap()));
        assert_eq!(
            parse_addr("localhost:9464"),
            Ok("127.0.0.1:9464".parse().unwrap())
        );
        for bad in [
            "9464",
            ":9464",
            "127.0.0.1",
            "example.com:80",
            "127.0.0.1:99999",
            "",
        ] {
            let e = parse_addr(bad).unwrap_err();
            assert!(e.contains("such as 127.0.0.1:9464"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_port_in_use_is_named() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        let e = bind(addr).unwrap_err();
        assert_eq!(e.exit_code(), 6);
        let text = format!("{e:?}");
        assert!(text.contains(&addr.to_string()), "{text}");
        assert!(text.contains("in use"), "{text}");
    }

    fn telemetry() -> Telemetry {
        let config = warden_run::telemetry::TelemetryConfig::resolve(None, None, None, |_| None)
            .unwrap()
            .with_prometheus();
        Telemetry::start(config).unwrap().unwrap()
    }

    /// Sends `request` as it is and reads the whole answer.
    fn exchange(addr: SocketAddr, request: &[u8]) -> String {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(request).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn metrics_are_served_at_their_path_only() {
        let endpoint =
            MetricsEndpoint::start(bind("127.0.0.1:0".parse().unwrap()).unwrap(), telemetry())
                .unwrap();
        let addr = endpoint.addr();
        assert_ne!(addr.port(), 0);
        let ok = exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(
            ok.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"),
            "{ok}"
        );
        // What it says is the registry's (empty before any run: the
        // batch's tests read real counts); it says how long it is.
        let (head, body) = ok.split_once("\r\n\r\n").unwrap();
        assert!(
            head.contains(&format!("Content-Length: {}\r\n", body.len())),
            "{ok}"
        );
        let q = exchange(addr, b"GET /metrics?x=1 HTTP/1.0\r\n\r\n");
        assert!(q.starts_with("HTTP/1.1 200 OK\r\n"), "{q}");
        let head = exchange(addr, b"HEAD /metrics HTTP/1.1\r\n\r\n");
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(head.ends_with("\r\n\r\n"), "no body for HEAD: {head}");
        let other = exchange(addr, b"GET / HTTP/1.1\r\n\r\n");
        assert!(other.starts_with("HTTP/1.1 404 Not Found\r\n"), "{other}");
        let post = exchange(addr, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
        assert!(
            post.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"),
            "{post}"
        );
        let huge = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(20_000));
        let big = exchange(addr, huge.as_bytes());
        assert!(big.starts_with("HTTP/1.1 431 "), "{big}");
        endpoint.stop();
        assert!(
            std::net::TcpStream::connect(addr).is_err(),
            "still listening after stop"
        );
    }

    #[test]
    fn a_stuck_scraper_does_not_hold_the_others() {
        let endpoint =
            MetricsEndpoint::start(bind("127.0.0.1:0".parse().unwrap()).unwrap(), telemetry())
                .unwrap();
        let addr = endpoint.addr();
        // Connections that send half a request and wait.
        let stuck: Vec<_> = (0..4)
            .map(|_| {
                use std::io::Write;
                let mut s = std::net::TcpStream::connect(addr).unwrap();
                s.write_all(b"GET /metr").unwrap();
                s
            })
            .collect();
        let t0 = std::time::Instant::now();
        let ok = exchange(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "answered after {:?}",
            t0.elapsed()
        );
        drop(stuck);
        endpoint.stop();
    }

    #[test]
    fn idle_connections_over_the_cap_make_way_for_a_scraper() {
        let endpoint =
            MetricsEndpoint::start(bind("127.0.0.1:0".parse().unwrap()).unwrap(), telemetry())
                .unwrap();
        let addr = endpoint.addr();
        let idle: Vec<_> = (0..MAX_CONNECTIONS * 2)
            .map(|_| std::net::TcpStream::connect(addr).unwrap())
            .collect();
        let t0 = std::time::Instant::now();
        let ok = exchange(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok:?}");
        assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
        drop(idle);
        endpoint.stop();
    }

    #[test]
    fn a_head_that_trickles_in_is_dropped_at_the_head_timeout() {
        use std::io::{Read, Write};
        let endpoint =
            MetricsEndpoint::start(bind("127.0.0.1:0".parse().unwrap()).unwrap(), telemetry())
                .unwrap();
        let mut s = std::net::TcpStream::connect(endpoint.addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let t0 = std::time::Instant::now();
        // A byte every 100 ms: each read is quick, the head never whole.
        let closed = loop {
            let _ = s.write_all(b"G");
            let mut b = [0u8; 64];
            match s.read(&mut b) {
                Ok(0) => break t0.elapsed(),
                Ok(n) => panic!("an answer to no request: {:?}", &b[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => break t0.elapsed(),
            }
            assert!(
                t0.elapsed() < HEAD_TIMEOUT + Duration::from_secs(2),
                "still open after {:?}",
                t0.elapsed()
            );
        };
        assert!(
            closed >= HEAD_TIMEOUT - Duration::from_millis(200),
            "{closed:?}"
        );
        endpoint.stop();
    }

    #[tokio::test]
    async fn when_every_place_is_answering_a_newcomer_is_told_503_at_once() {
        let mut places = Places::default();
        for _ in 0..MAX_CONNECTIONS {
            let task = tokio::spawn(std::future::pending::<()>());
            places.taken.push_back(Place {
                task: task.abort_handle(),
                answering: Arc::new(AtomicBool::new(true)),
            });
        }
        assert!(!places.make_room(), "every place is answering");
        places.taken[3].answering.store(false, Ordering::Release);
        assert!(places.make_room(), "one still sending its head makes way");
        assert_eq!(places.taken.len(), MAX_CONNECTIONS - 1);

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::spawn(async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").await.unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).await.map(|_| out)
        });
        let (stream, _) = listener.accept().await.unwrap();
        // Its request is there before the answer, as from a real scraper.
        tokio::time::sleep(Duration::from_millis(50)).await;
        busy(stream);
        let out = tokio::time::timeout(Duration::from_secs(2), client)
            .await
            .expect("answered at once")
            .unwrap()
            .expect("an answer, not a reset");
        assert!(
            out.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
            "{out}"
        );
    }
}
