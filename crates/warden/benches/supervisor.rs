//! Supervisor benchmarks: `cargo bench -p warden --bench supervisor`.
//!
//! Measures, on this machine, what the supervisor core promises:
//! 1. how late each clock fires after it was due (stall warning, stall,
//!    startup, run, completion), median and worst over repeated runs;
//! 2. the time from the child's exit to `warden` having returned, for a
//!    healthy child and for one whose orphan holds stdout;
//! 3. the whole-process overhead of `warden run exec -- true` over `true`;
//! 4. warden's CPU time while a child writes 100k lines per second.
//!
//! Clock lateness is measured in-process through the library (events are
//! timestamped as they arrive, in microseconds); the rest drives the real
//! binary. Set `WARDEN_BENCH_QUICK=1` for fewer repetitions.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use warden_run::{Limits, Run, RunSpec};

const WARDEN: &str = env!("CARGO_BIN_EXE_warden");

fn main() {
    warden_process::run_if_shim();
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("__writer") {
        let rate: u64 = args[2].parse().unwrap();
        let secs: u64 = args[3].parse().unwrap();
        writer(rate, Duration::from_secs(secs));
        return;
    }
    let quick = std::env::var_os("WARDEN_BENCH_QUICK").is_some();
    let reps = if quick { 5 } else { 20 };
    let tmp = tempfile::tempdir().unwrap();

    println!("# warden supervisor benchmarks ({reps} repetitions each)\n");
    println!("## 1. Clock lateness (fired minus due)\n");
    println!("| clock | due after | median | worst |");
    println!("|---|---|---|---|");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(clock_lateness(tmp.path(), reps));

    println!("\n## 2. Child exit to warden returned\n");
    println!("| child | median | worst |");
    println!("|---|---|---|");
    for (name, script) in [
        (
            "healthy: `echo; exit 0`",
            "echo did the work; date +%s%N > $T; exit 0",
        ),
        (
            "orphan holds stdout: `sleep 600 & exit 0`",
            "echo did the work; sleep 600 & date +%s%N > $T; exit 0",
        ),
    ] {
        let mut samples = Vec::new();
        for i in 0..reps {
            let stamp = tmp.path().join(format!("exit-{i}"));
            let status = Command::new(WARDEN)
                .args(["run", "exec", "-q", "--run-dir"])
                .arg(tmp.path().join(format!("r-exit-{i}")))
                .args(["--", "sh", "-c", script])
                .env("T", &stamp)
                .stderr(Stdio::null())
                .status()
                .unwrap();
            let returned = now_ns();
            assert!(status.success());
            let exited: u128 = std::fs::read_to_string(&stamp)
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            samples.push(Duration::from_nanos((returned - exited) as u64));
        }
        let (med, worst) = stats(&mut samples);
        println!("| {name} | {} | {} |", fmt(med), fmt(worst));
    }

    println!("\n## 3. Overhead of a run\n");
    let true_alone = time_cmd(reps * 3, || Command::new("true").status().unwrap());
    let mut i = 0;
    let under = time_cmd(reps * 3, || {
        i += 1;
        Command::new(WARDEN)
            .args(["run", "exec", "-q", "--run-dir"])
            .arg(tmp.path().join(format!("r-true-{i}")))
            .args(["--", "true"])
            .stderr(Stdio::null())
            .status()
            .unwrap()
    });
    println!("| command | median wall time |");
    println!("|---|---|");
    println!("| `true` | {} |", fmt(true_alone));
    println!("| `warden run exec -- true` | {} |", fmt(under));
    println!(
        "\nwarden adds {} per run ({:.1}x `true` alone).",
        fmt(under.saturating_sub(true_alone)),
        under.as_secs_f64() / true_alone.as_secs_f64()
    );

    let secs = if quick { 3 } else { 10 };
    println!("\n## 4. CPU while the child writes 100k lines/s for {secs}s\n");
    let me = std::env::current_exe().unwrap();
    let run_dir = tmp.path().join("r-flood");
    let start = Instant::now();
    let status = Command::new(WARDEN)
        .args(["run", "exec", "-q", "--run-dir"])
        .arg(&run_dir)
        .arg("--")
        .arg(&me)
        .args(["__writer", "100000", &secs.to_string()])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    let wall = start.elapsed();
    assert!(status.success());
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("run.json")).unwrap()).unwrap();
    let cpu = report["warden_cpu_ms"].as_u64().unwrap();
    let lines = report["activity_lines"].as_u64().unwrap();
    println!("| lines | bytes | wall | warden CPU | share of one core | peak RSS |");
    println!("|---|---|---|---|---|---|");
    println!(
        "| {lines} | {} | {} | {cpu} ms | {:.1}% | {} KiB |",
        report["stdout_bytes"],
        fmt(wall),
        cpu as f64 / wall.as_millis() as f64 * 100.0,
        report["warden_peak_rss_kib"]
    );
}

async fn clock_lateness(tmp: &Path, reps: usize) {
    let ms = Duration::from_millis;
    let base = Limits {
        timeout: None,
        stall_timeout: None,
        startup_timeout: None,
        completion_timeout: None,
        kill_grace: Duration::ZERO,
        drain_grace: ms(500),
        ..Limits::default()
    };
    struct Case {
        name: &'static str,
        due: Duration,
        script: &'static str,
        limits: Limits,
        /// The event whose arrival starts the clock (`None`: the spawn).
        from: Option<&'static str>,
        /// The event that shows the clock fired.
        fired: &'static str,
    }
    let cases = [
        Case {
            name: "stall warning",
            due: ms(100),
            script: "echo working; sleep 600",
            limits: Limits {
                stall_timeout: Some(ms(200)),
                ..base.clone()
            },
            from: Some("text"),
            fired: "stall_warning",
        },
        Case {
            name: "stall",
            due: ms(200),
            script: "echo working; sleep 600",
            limits: Limits {
                stall_timeout: Some(ms(200)),
                ..base.clone()
            },
            from: Some("text"),
            fired: "terminating",
        },
        Case {
            name: "completion",
            due: ms(100),
            script: "echo '<promise>COMPLETE</promise>'; sleep 600",
            limits: Limits {
                completion_timeout: Some(ms(100)),
                ..base.clone()
            },
            from: Some("completion_signal"),
            fired: "terminating",
        },
        Case {
            name: "startup",
            due: ms(100),
            script: "sleep 600",
            limits: Limits {
                startup_timeout: Some(ms(100)),
                ..base.clone()
            },
            from: None,
            fired: "terminating",
        },
        Case {
            name: "run",
            due: ms(150),
            script: "while :; do echo tick; sleep 0.01; done",
            limits: Limits {
                timeout: Some(ms(150)),
                ..base.clone()
            },
            from: None,
            fired: "terminating",
        },
    ];
    for (n, case) in cases.iter().enumerate() {
        let mut samples = Vec::new();
        for i in 0..reps {
            let mut spec = RunSpec::exec(["sh", "-c", case.script]);
            spec.limits = case.limits.clone();
            spec.run_dir = Some(tmp.join(format!("r-clock-{n}-{i}")));
            let t0 = Instant::now();
            let mut run = Run::new(spec).spawn().await.unwrap();
            let mut from = case.from.is_none().then_some(t0);
            let mut fired = None;
            while let Some(ev) = run.next_event().await {
                let at = Instant::now();
                let kind = serde_json::to_value(&ev.event).unwrap()["kind"]
                    .as_str()
                    .unwrap()
                    .to_string();
                if Some(kind.as_str()) == case.from && from.is_none() {
                    from = Some(at);
                }
                if kind == case.fired && fired.is_none() {
                    fired = Some(at);
                }
            }
            run.wait().await;
            let late = fired.unwrap() - from.unwrap();
            samples.push(late.saturating_sub(case.due));
        }
        let (med, worst) = stats(&mut samples);
        println!(
            "| {} | {} | {} | {} |",
            case.name,
            fmt(case.due),
            fmt(med),
            fmt(worst)
        );
    }
}

/// Writes `rate` lines a second for `length`, paced in 1 ms batches.
fn writer(rate: u64, length: Duration) {
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out.lock());
    let start = Instant::now();
    let mut written = 0u64;
    while start.elapsed() < length {
        let due = (start.elapsed().as_micros() as u64 * rate) / 1_000_000;
        while written < due {
            writeln!(
                out,
                "{{\"type\":\"progress\",\"line\":{written},\"text\":\"compiling module {}\"}}",
                written % 977
            )
            .unwrap();
            written += 1;
        }
        out.flush().unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

fn time_cmd<T>(reps: usize, mut f: impl FnMut() -> T) -> Duration {
    let mut samples: Vec<Duration> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    stats(&mut samples).0
}

fn stats(samples: &mut [Duration]) -> (Duration, Duration) {
    samples.sort();
    (samples[samples.len() / 2], samples[samples.len() - 1])
}

fn fmt(d: Duration) -> String {
    if d < Duration::from_millis(1) {
        format!("{} µs", d.as_micros())
    } else {
        format!("{:.2} ms", d.as_secs_f64() * 1000.0)
    }
}
