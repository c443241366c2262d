//! Supervisor benchmarks: `cargo bench -p agent-warden --bench supervisor`.
//!
//! Measures, on this machine, what the supervisor core promises:
//! 1. how late each clock fires after it was due (stall warning, stall,
//!    startup, run, completion), median and worst over repeated runs;
//!    beside a bare `tokio::time::sleep` of the same length in the same
//!    runtime;
//! 2. the time from the child's exit to `warden` having returned, for a
//!    healthy child and for one whose orphan holds stdout, beside
//!    `timeout 10` on the healthy child;
//! 3. warden's CPU time while a child writes 100k lines per second, beside
//!    `cat` copying the same lines to a file.
//!
//! Clock lateness is measured in-process through the library (events are
//! timestamped as they arrive, in microseconds); the rest drives the real
//! binary. Set `WARDEN_BENCH_QUICK=1` for fewer repetitions. The cost of
//! starting a run is measured by the `startup` bench.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use warden_run::{Limits, Run, RunRequest};

mod measure;

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

    let machine = measure::Machine::start();
    println!("# warden supervisor benchmarks ({reps} repetitions each)\n");
    println!("## 1. Clock lateness (fired minus due)\n");
    println!("| clock | due after | min / median / worst | bare `sleep`: min / median / worst |");
    println!("|---|---|---|---|");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(clock_lateness(tmp.path(), reps));

    println!("\n## 2. Child exit to warden returned\n");
    println!(
        "The reference is `timeout 10 sh -c ...` on the healthy child: the least a \
         supervisor that waits for its child pays.\n"
    );
    println!("| child | under | min / median / worst |");
    println!("|---|---|---|");
    let healthy = "echo did the work; date +%s%N > $T; exit 0";
    for (k, (name, under, script)) in [
        ("healthy: `echo; exit 0`", "`timeout 10`", healthy),
        ("healthy: `echo; exit 0`", "warden", healthy),
        (
            "orphan holds stdout: `sleep 600 & exit 0`",
            "warden",
            "echo did the work; sleep 600 & date +%s%N > $T; exit 0",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let mut samples = Vec::new();
        for i in 0..reps {
            let stamp = tmp.path().join(format!("exit-{i}"));
            let mut cmd = if under == "warden" {
                let mut c = Command::new(WARDEN);
                c.args(["run", "exec", "-q", "--run-dir"])
                    .arg(tmp.path().join(format!("r-exit-{k}-{i}")))
                    .arg("--");
                c
            } else {
                let mut c = Command::new("timeout");
                c.arg("10");
                c
            };
            let status = cmd
                .args(["sh", "-c", script])
                .env("T", &stamp)
                .stdout(Stdio::null())
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
        println!("| {name} | {under} | {} |", stats(&mut samples));
    }

    println!("\nThe cost of starting a run is in `cargo bench -p agent-warden --bench startup`.");

    let secs = if quick { 3 } else { 10 };
    println!("\n## 3. CPU while the child writes 100k lines/s for {secs}s\n");
    println!(
        "The reference is `cat` copying the same writer's output to a file: \
         the least anything that keeps the bytes pays.\n"
    );
    let me = std::env::current_exe().unwrap();
    let writer_args = ["__writer", "100000", &secs.to_string()];

    let out = std::fs::File::create(tmp.path().join("flood-cat.log")).unwrap();
    let mut writer = Command::new(&me)
        .args(writer_args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let cat = Command::new("cat")
        .stdin(Stdio::from(writer.stdout.take().unwrap()))
        .stdout(out)
        .spawn()
        .unwrap();
    let cat_usage = wait_usage(cat);
    let cat_wall = start.elapsed();
    writer.wait().unwrap();

    let run_dir = tmp.path().join("r-flood");
    let start = Instant::now();
    let status = Command::new(WARDEN)
        .args(["run", "exec", "-q", "--run-dir"])
        .arg(&run_dir)
        .arg("--")
        .arg(&me)
        .args(writer_args)
        // Its log is warden's copy, as the file is `cat`'s: the output it
        // would pass on is thrown away.
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    let wall = start.elapsed();
    assert!(status.success());
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("run.json")).unwrap()).unwrap();
    let cpu = report["warden_cpu_ms"].as_u64().unwrap();
    let lines = report["activity_lines"].as_u64().unwrap();
    println!("| copier | lines | bytes | wall | CPU | share of one core | peak RSS |");
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| `cat > file` | {lines} | {} | {} | {} ms | {:.1}% | |",
        report["stdout_bytes"],
        fmt(cat_wall),
        cat_usage.cpu_ms,
        cat_usage.cpu_ms as f64 / cat_wall.as_millis() as f64 * 100.0,
    );
    println!(
        "| warden | {lines} | {} | {} | {cpu} ms | {:.1}% | {} KiB |",
        report["stdout_bytes"],
        fmt(wall),
        cpu as f64 / wall.as_millis() as f64 * 100.0,
        report["warden_peak_rss_kib"]
    );
    println!(
        "\nwarden's CPU is {:.1}x `cat`'s for the same lines.",
        cpu as f64 / cat_usage.cpu_ms.max(1) as f64
    );
    machine.end();
}

struct Usage {
    cpu_ms: u64,
}

/// Waits for `child` and returns the CPU it used (wait4's rusage: the
/// child itself, it forks nothing). Its peak RSS is not taken: Linux keeps
/// the high-water mark of the memory a child had before `exec`, which
/// for a child spawned from this process is this process's.
fn wait_usage(child: std::process::Child) -> Usage {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `pid` is our own unreaped child (`Child` never waited on it,
    // and it is forgotten below so it never will); `status` and `usage`
    // are ours and of the right types.
    let got = unsafe { libc::wait4(pid, &mut status, 0, usage.as_mut_ptr()) };
    assert_eq!(got, pid, "wait4: {}", std::io::Error::last_os_error());
    std::mem::forget(child);
    // SAFETY: `wait4` returned the child, so it filled in `usage`.
    let usage = unsafe { usage.assume_init() };
    let ms = |t: libc::timeval| t.tv_sec as u64 * 1000 + t.tv_usec as u64 / 1000;
    Usage {
        cpu_ms: ms(usage.ru_utime) + ms(usage.ru_stime),
    }
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
            let mut request = RunRequest::exec(["sh", "-c", case.script]);
            request.limits = case.limits.clone();
            request.dir = Some(tmp.join(format!("r-clock-{n}-{i}")));
            let t0 = Instant::now();
            let mut run = Run::new(request).start().await.unwrap();
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
        let ours = stats(&mut samples);
        let mut bare: Vec<Duration> = Vec::with_capacity(reps);
        for _ in 0..reps {
            let t0 = Instant::now();
            tokio::time::sleep(case.due).await;
            bare.push(t0.elapsed().saturating_sub(case.due));
        }
        println!(
            "| {} | {} | {ours} | {} |",
            case.name,
            fmt(case.due),
            stats(&mut bare)
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

/// "min / median / worst".
fn stats(samples: &mut [Duration]) -> String {
    samples.sort();
    format!(
        "{} / {} / {}",
        fmt(samples[0]),
        fmt(samples[samples.len() / 2]),
        fmt(samples[samples.len() - 1])
    )
}

fn fmt(d: Duration) -> String {
    if d < Duration::from_millis(1) {
        format!("{} µs", d.as_micros())
    } else {
        format!("{:.2} ms", d.as_secs_f64() * 1000.0)
    }
}
