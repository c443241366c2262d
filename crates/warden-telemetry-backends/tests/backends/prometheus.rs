//! Debian's Prometheus scrapes a static page from a real listener and
//! answers queries of it.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use warden_telemetry_backends::faults;
use warden_telemetry_backends::prometheus::{JOB, Prometheus};

const PAGE: &str = "\
# HELP warden_test_runs_total Runs.
# TYPE warden_test_runs_total counter
warden_test_runs_total{agent=\"claude\",outcome=\"ok\"} 3
warden_test_runs_total{agent=\"codex\",outcome=\"failed\"} 1
";

/// Serves `PAGE` as Prometheus text to every request, once started,
/// until stopped.
struct Page {
    addr: SocketAddr,
    listener: Option<TcpListener>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Page {
    /// Listening, but answering nothing yet: a connect completes (into the
    /// backlog) and waits.
    fn bind() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        Self {
            addr: listener.local_addr().unwrap(),
            listener: Some(listener),
            stop: Arc::new(AtomicBool::new(false)),
            thread: None,
        }
    }

    fn serve(&mut self) {
        let listener = self.listener.take().expect("not served yet");
        let stopping = self.stop.clone();
        self.thread = Some(std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(conn) = conn {
                    answer(conn);
                }
            }
        }));
    }

    /// Closes the listener: from now on a scrape is refused.
    fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept, so the thread sees the flag and drops the
        // listener.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

fn answer(conn: TcpStream) {
    let mut reader = BufReader::new(&conn);
    let mut line = String::new();
    // The request head; its end is an empty line.
    while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
        line.clear();
    }
    let _ = (&conn).write_all(
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{PAGE}",
            PAGE.len()
        )
        .as_bytes(),
    );
}

#[test]
fn prometheus_scrapes_a_page_and_answers_queries_of_it() {
    let mut page = Page::bind();
    let Some(prometheus) = Prometheus::start(page.addr) else {
        return;
    };
    assert_eq!(prometheus.target(), page.addr);
    // Started before its target answers, as a test of a short-lived
    // endpoint does: the first scrape fails (after its 1 s timeout) ...
    let first = prometheus.wait_for_first_scrape(Duration::from_secs(15));
    assert_eq!(first["health"], "down", "{first}");
    // ... and once the page is served, a scrape within a second has it.
    page.serve();
    let runs = prometheus.wait_for_samples(
        r#"warden_test_runs_total{agent="claude"}"#,
        Duration::from_secs(5),
    );
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].value, 3.0);
    let label = |k: &str| runs[0].metric.get(k).map(String::as_str);
    assert_eq!(label("outcome"), Some("ok"));
    assert_eq!(label("job"), Some(JOB));
    assert_eq!(label("instance"), Some(page.addr.to_string().as_str()));
    // PromQL is evaluated, not just stored values read back.
    let total = prometheus.samples("sum(warden_test_runs_total) * 2");
    assert_eq!(total.len(), 1, "{total:?}");
    assert_eq!(total[0].value, 8.0);
    assert_eq!(prometheus.query("vector(1)")["resultType"], "vector");
    let target = &prometheus.targets()[0];
    assert_eq!(target["health"], "up", "{target}");

    // When the page goes, the next failed scrape makes the series stale:
    // an instant query returns nothing, `last_over_time` the last value.
    page.stop();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !prometheus.samples("warden_test_runs_total").is_empty() {
        assert!(
            Instant::now() < deadline,
            "still a value after the target went: {}",
            prometheus.targets()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let last = prometheus.samples(r#"last_over_time(warden_test_runs_total{agent="codex"}[1m])"#);
    assert_eq!(last.len(), 1, "{last:?}");
    assert_eq!(last[0].value, 1.0);
}

#[test]
fn dropping_prometheus_leaves_no_process_behind() {
    let Some(prometheus) = Prometheus::start(faults::refusing()) else {
        return;
    };
    let pid = prometheus.pid();
    let proc = format!("/proc/{pid}");
    assert!(std::path::Path::new(&proc).exists());
    let url = prometheus.url().to_string();
    drop(prometheus);
    // Reaped, not only killed: no zombie either.
    assert!(
        !std::path::Path::new(&proc).exists(),
        "{proc} is still there"
    );
    assert!(ureq::get(format!("{url}/-/ready")).call().is_err());
}

/// Set in the test process that `a_killed_test_process_takes_its_prometheus_along`
/// starts and kills.
const HOLDER: &str = "WARDEN_TEST_PROMETHEUS_HOLDER";

#[test]
fn a_killed_test_process_takes_its_prometheus_along() {
    if std::env::var_os(HOLDER).is_some() {
        // The holder: starts Prometheus, says its pid, waits to be killed.
        let Some(prometheus) = Prometheus::start(faults::refusing()) else {
            return;
        };
        println!("prometheus pid {}", prometheus.pid());
        std::io::stdout().flush().unwrap();
        std::thread::sleep(Duration::from_secs(60));
        return;
    }
    if Prometheus::binary().is_none() {
        return;
    }
    let mut holder = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "prometheus::a_killed_test_process_takes_its_prometheus_along",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HOLDER, "1")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid: u32 = BufReader::new(holder.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        // The harness may print the test's name on the same line first.
        .find_map(|l| l.split("prometheus pid ").nth(1).map(str::to_string))
        .expect("the holder names its Prometheus")
        .parse()
        .unwrap();
    let proc = format!("/proc/{pid}");
    assert!(std::path::Path::new(&proc).exists());
    // SIGKILL: the holder's Drop never runs.
    holder.kill().unwrap();
    holder.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    // Prometheus is killed by the kernel and, orphaned, reaped by init
    // (or a subreaper); either way it is not running any more.
    while std::fs::read_to_string(format!("{proc}/stat"))
        .is_ok_and(|stat| !stat.split(") ").nth(1).is_some_and(|s| s.starts_with('Z')))
    {
        assert!(
            Instant::now() < deadline,
            "Prometheus {pid} outlived its test"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
