//! An HTTP proxy for tests that tunnels (`CONNECT host:port`) every
//! connection to one address, whatever host the client asked for, and
//! records what was asked: a collector behind a proxy, on 127.0.0.1.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct ConnectProxy {
    addr: SocketAddr,
    asked: Arc<Mutex<Vec<String>>>,
}

impl ConnectProxy {
    /// Tunnels every `CONNECT` to `to`.
    pub fn start(to: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let addr = listener.local_addr().expect("the proxy's address");
        let asked = Arc::new(Mutex::new(Vec::new()));
        let seen = asked.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let seen = seen.clone();
                std::thread::spawn(move || {
                    let _ = tunnel(client, to, &seen);
                });
            }
        });
        Self { addr, asked }
    }

    /// `http://127.0.0.1:PORT`, as `HTTP_PROXY` takes it.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The `host:port` of every `CONNECT` so far.
    pub fn asked(&self) -> Vec<String> {
        self.asked.lock().expect("proxy lock").clone()
    }
}

fn tunnel(client: TcpStream, to: SocketAddr, asked: &Mutex<Vec<String>>) -> std::io::Result<()> {
    client.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(client.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let target = match line.split_whitespace().collect::<Vec<_>>()[..] {
        ["CONNECT", target, _] => target.to_string(),
        _ => {
            (&client).write_all(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")?;
            return Ok(());
        }
    };
    // The rest of the request head.
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
    }
    asked.lock().expect("proxy lock").push(target);
    let server = TcpStream::connect(to)?;
    (&client).write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")?;
    client.set_read_timeout(None)?;
    // Whatever the client sent after the head is already in the reader.
    let pending = reader.buffer().to_vec();
    (&server).write_all(&pending)?;
    let (mut from_client, mut to_server) = (reader.into_inner(), server.try_clone()?);
    let up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut from_client, &mut to_server);
        let _ = to_server.shutdown(std::net::Shutdown::Write);
    });
    let (mut from_server, mut to_client) = (server, client);
    let _ = std::io::copy(&mut from_server, &mut to_client);
    let _ = to_client.shutdown(std::net::Shutdown::Write);
    let _ = up.join();
    Ok(())
}
