//! Collectors that fail in the three ways a network can: each function
//! returns an address on 127.0.0.1 at which an exporter's connect is
//! refused, or completes but is never answered, or never completes.
//!
//! What makes an address misbehave (a bound socket, a listener, its
//! connections) is kept for the rest of the test process: a fault that
//! healed itself when a guard was dropped early would turn a test of the
//! hang into a test of a refusal without anyone noticing.

use std::io::Read as _;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::Mutex;
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

/// What the faults keep open until the process ends.
static KEPT: Mutex<Vec<Socket>> = Mutex::new(Vec::new());

fn keep(socket: Socket) {
    KEPT.lock().expect("faults lock").push(socket);
}

fn loopback() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}

/// A port where nothing listens: a connect is refused at once.
///
/// The port stays bound (but never listens) for the rest of the process,
/// so no other program can take it and start answering; a bound socket
/// that does not listen gets a reset for every connect, as a closed port
/// does.
pub fn refusing() -> SocketAddr {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).expect("socket");
    socket.bind(&loopback().into()).expect("bind 127.0.0.1:0");
    let addr = local(&socket);
    keep(socket);
    addr
}

/// A collector that accepts every connection and reads what it is sent,
/// but never answers: a request waits until its own timeout. Each
/// connection stays open until the client closes it.
pub fn hanging() -> SocketAddr {
    let listener = TcpListener::bind(loopback()).expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local addr");
    std::thread::Builder::new()
        .name(format!("hanging-collector-{}", addr.port()))
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                // Reading keeps the client's writes from blocking on a full
                // buffer, so what it waits for is the answer.
                std::thread::spawn(move || {
                    let mut buf = [0u8; 8192];
                    while conn.read(&mut buf).is_ok_and(|n| n > 0) {}
                });
            }
        })
        .expect("spawn hanging collector");
    addr
}

/// A collector whose connect never completes: a listener with a backlog
/// of one that never accepts, its backlog already filled. Linux drops the
/// SYN of every further connect (the accept queue is full), so the
/// client's connect retransmits until its own timeout, as with a host
/// that has gone away.
///
/// Panics if the backlog cannot be seen to fill (a connect still
/// completing after several attempts): then this machine's TCP does not
/// behave as above and a test using it would prove nothing.
pub fn never_connecting() -> SocketAddr {
    let listener = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).expect("socket");
    listener.bind(&loopback().into()).expect("bind 127.0.0.1:0");
    // Linux queues backlog + 1 connections: one here.
    listener.listen(0).expect("listen");
    let addr = local(&listener);
    keep(listener);
    // Fill the queue, until a connect is seen not to complete. A connect
    // that times out before any has completed proves nothing (the queue
    // cannot be full yet; the machine was slow), so it does not count.
    let mut queued = 0;
    for _ in 0..8 {
        match TcpStream::connect_timeout(&addr, Duration::from_millis(100)) {
            Ok(filler) => {
                keep(Socket::from(filler));
                queued += 1;
            }
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut && queued > 0 => return addr,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) => panic!("filling the backlog of {addr}: {e}"),
        }
    }
    panic!("connects to {addr} still complete after its backlog was filled");
}

fn local(socket: &Socket) -> SocketAddr {
    socket
        .local_addr()
        .expect("local addr")
        .as_socket()
        .expect("an IP address")
}
