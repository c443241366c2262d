//! A real Prometheus server for tests: Debian's `prometheus` binary (put
//! in `.agents/prometheus/` by `.ci/install-prometheus`, or named by
//! `WARDEN_PROMETHEUS`), started in the foreground on a free port of
//! 127.0.0.1 with a configuration of its own in a temporary directory,
//! scraping one target every second. Without the binary,
//! [`Prometheus::start`] says so and returns `None` (the test skips),
//! except under `CI=true`, where that is a failure.
//!
//! The server is killed, and its data deleted, when the value is dropped.
//!
//! Two things about Prometheus that tests meet:
//! * the first scrape comes 5 to 6 s after the start, whatever the scrape
//!   interval: target discovery hands its targets to the scraper on a
//!   fixed 5 s tick (Prometheus 2.42 has no flag for it). A test whose
//!   target lives only briefly (a batch's endpoint) starts Prometheus
//!   first, on the target's address, waits for
//!   [`Prometheus::wait_for_first_scrape`] (which fails, nothing answering
//!   yet), then starts the target: from then on it is scraped every
//!   second;
//! * when a target stops answering, the next failed scrape marks its
//!   series stale and an instant query of them returns nothing; query
//!   `last_over_time(name[1m])` for a value of a target that has gone.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How often the target is scraped; also the scrape timeout (which must
/// not be longer).
pub const SCRAPE_INTERVAL: Duration = Duration::from_secs(1);

/// The job name the target's series carry (`job="warden"`).
pub const JOB: &str = "warden";

/// Bounds the start: it takes about 0.2 s.
const READY_TIMEOUT: Duration = Duration::from_secs(15);

/// A running Prometheus; killed when dropped.
pub struct Prometheus {
    child: Child,
    url: String,
    target: SocketAddr,
    http: ureq::Agent,
    dir: tempfile::TempDir,
}

/// One sample of an instant vector.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Sample {
    /// The labels, `__name__`, `job` and `instance` included.
    pub metric: BTreeMap<String, String>,
    pub value: f64,
}

impl Prometheus {
    /// The server binary, or `None` (after saying why) when it is missing
    /// and this is not CI. Under `CI=true` a missing binary panics.
    pub fn binary() -> Option<PathBuf> {
        let path = match std::env::var_os("WARDEN_PROMETHEUS") {
            Some(p) => PathBuf::from(p),
            None => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../.agents/prometheus/prometheus"),
        };
        if path.is_file() {
            return Some(path);
        }
        let why = format!(
            "the Prometheus tests need {} (.ci/install-prometheus, or WARDEN_PROMETHEUS)",
            path.display()
        );
        if std::env::var_os("CI").is_some_and(|v| v == "true") {
            panic!("{why}");
        }
        eprintln!("skipped: {why}");
        None
    }

    /// Starts Prometheus scraping `target`'s `/metrics` every second, and
    /// waits until it is ready. `None` when there is no binary (see
    /// [`Prometheus::binary`]).
    pub fn start(target: SocketAddr) -> Option<Self> {
        Self::start_scraping(target, "/metrics")
    }

    /// Like [`Prometheus::start`], scraping `metrics_path`.
    pub fn start_scraping(target: SocketAddr, metrics_path: &str) -> Option<Self> {
        let binary = Self::binary()?;
        let dir = tempfile::tempdir().expect("tempdir for Prometheus");
        let config = dir.path().join("prometheus.yml");
        let interval = format!("{}s", SCRAPE_INTERVAL.as_secs());
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: {interval}\n  evaluation_interval: {interval}\n\
                 scrape_configs:\n  - job_name: {JOB}\n    scrape_interval: {interval}\n    \
                 scrape_timeout: {interval}\n    metrics_path: '{metrics_path}'\n    \
                 static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .expect("write prometheus.yml");
        let http: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(5)))
            .build()
            .into();
        // The port is chosen free, then given to Prometheus, which binds it
        // itself: another process can take it in between, so a start that
        // fails on "address already in use" is tried again on another.
        let log_path = dir.path().join("prometheus.log");
        let mut last_log = String::new();
        for _ in 0..3 {
            let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let log = std::fs::File::create(&log_path).expect("prometheus.log");
            // Through `setpriv --pdeathsig KILL`, which then runs
            // Prometheus in its place: if the test process is killed
            // (and Drop never runs), the kernel kills Prometheus too. The
            // signal comes when the thread that started it ends, so a
            // `Prometheus` stays on its test's thread.
            let mut child = Command::new("setpriv")
                .args(["--pdeathsig", "KILL", "--"])
                .arg(&binary)
                .arg(format!("--config.file={}", config.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.path().join("data").display()
                ))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                // Debian's defaults point at /etc/prometheus/console*; the
                // API does not need them.
                .arg("--web.console.templates=/nonexistent")
                .arg("--web.console.libraries=/nonexistent")
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log file"))
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
            let url = format!("http://127.0.0.1:{port}");
            match wait_ready(&mut child, &url, &http) {
                Ok(()) => {
                    return Some(Self {
                        child,
                        url,
                        target,
                        http,
                        dir,
                    });
                }
                Err(why) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                    if !log.contains("address already in use") {
                        panic!("Prometheus at {url} {why}:\n{log}");
                    }
                    last_log = log;
                }
            }
        }
        panic!("Prometheus found no free port in three tries:\n{last_log}");
    }

    /// `http://127.0.0.1:PORT`, the server's own address.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What it scrapes.
    pub fn target(&self) -> SocketAddr {
        self.target
    }

    /// The server's output so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// Runs the instant query `promql` now; returns the `data` of the
    /// answer (`resultType` and `result`). Panics if Prometheus answers
    /// with an error (a query that does not parse, say).
    pub fn query(&self, promql: &str) -> Value {
        let answer = self.get("/api/v1/query", &[("query", promql)]);
        if answer["status"] != "success" {
            panic!("query {promql:?} failed: {answer}");
        }
        answer["data"].clone()
    }

    /// The samples of the instant vector `promql` evaluates to now. Panics
    /// if it is not a vector.
    pub fn samples(&self, promql: &str) -> Vec<Sample> {
        let data = self.query(promql);
        assert_eq!(
            data["resultType"], "vector",
            "query {promql:?} is not an instant vector: {data}"
        );
        data["result"]
            .as_array()
            .map(|result| result.iter().map(|s| sample(promql, s)).collect())
            .unwrap_or_default()
    }

    /// The samples of `promql`, once there is at least one. Panics, with
    /// the target's scrape state, if there is none within `timeout`.
    pub fn wait_for_samples(&self, promql: &str, timeout: Duration) -> Vec<Sample> {
        let deadline = Instant::now() + timeout;
        loop {
            let samples = self.samples(promql);
            if !samples.is_empty() {
                return samples;
            }
            if Instant::now() >= deadline {
                panic!(
                    "no samples for {promql:?} within {timeout:?}; the targets: {}",
                    self.targets()
                );
            }
            // A scrape comes once a second; polling faster only loads
            // the machine.
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits until the target has been scraped once, whether that
    /// succeeded or not; returns its state (see [`Prometheus::targets`]).
    /// Panics if it has not been within `timeout`.
    pub fn wait_for_first_scrape(&self, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let targets = self.targets();
            let health = &targets[0]["health"];
            if health.is_string() && health != "unknown" {
                return targets[0].clone();
            }
            if Instant::now() >= deadline {
                panic!("{} not scraped within {timeout:?}: {targets}", self.target);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The scrape targets' state (`/api/v1/targets`): each one's `health`,
    /// `lastError` and `lastScrape`.
    pub fn targets(&self) -> Value {
        self.get("/api/v1/targets", &[])["data"]["activeTargets"].clone()
    }

    fn get(&self, path: &str, query: &[(&str, &str)]) -> Value {
        let mut request = self.http.get(format!("{}{path}", self.url));
        for (k, v) in query {
            request = request.query(*k, *v);
        }
        let mut response = request
            .call()
            .unwrap_or_else(|e| panic!("GET {}{path}: {e}", self.url));
        let body = response
            .body_mut()
            .read_to_string()
            .unwrap_or_else(|e| panic!("GET {}{path}: reading the answer: {e}", self.url));
        serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("GET {}{path}: not JSON ({e}): {body}", self.url))
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        // SIGKILL, not SIGTERM: its data is thrown away with the
        // directory, and a kill cannot be ignored or delayed.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits for `/-/ready`; on failure, says what happened instead.
fn wait_ready(child: &mut Child, url: &str, http: &ureq::Agent) -> Result<(), String> {
    let deadline = Instant::now() + READY_TIMEOUT;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("exited with {status}"));
        }
        if let Ok(r) = http.get(format!("{url}/-/ready")).call()
            && r.status() == 200
        {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!("did not become ready within {READY_TIMEOUT:?}"))
}

fn sample(promql: &str, s: &Value) -> Sample {
    let metric = s["metric"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default();
    // `value` is `[unix time, "text"]`; the text is Go's float format,
    // whose NaN and ±Inf Rust reads too.
    let value = s["value"][1]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("query {promql:?}: a sample without a value: {s}"));
    Sample { metric, value }
}
