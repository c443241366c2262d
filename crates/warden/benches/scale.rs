//! Many runs and big runs: `cargo bench -p agent-warden --bench scale`.
//!
//! 1. `warden batch -j N` of N runs (default 200) that each print a line
//!    every 10 ms for 10 s, beside bash starting the same N children: how
//!    long until the last child started (each writes its start time), how
//!    late the 2 s stall clock of the one run that falls silent after 1 s
//!    fires, warden's own CPU and peak RSS (in all and per run, from
//!    /proc, without its children), and one shim's RSS and unshared
//!    memory.
//! 2. One run that writes 5 GB: warden's rate beside `cat` copying the
//!    same writer's output to a file, and warden's peak memory at 1 GB and
//!    at 5 GB.
//!
//! Throughput on realistic streams is the `endtoend` bench; the cost of
//! starting one run is the `startup` bench.
//!
//! `WARDEN_BENCH_RUNS`, `WARDEN_BENCH_SECS` (at least 4) and
//! `WARDEN_BENCH_GB` change the sizes; `WARDEN_BENCH_ONLY=2` runs only
//! that section (`WARDEN_BENCH_ONLY=1 WARDEN_BENCH_RUNS=50
//! WARDEN_BENCH_SECS=4` takes under a minute). `WARDEN_BENCH_BIN=PATH`
//! times another build of warden in section 1, and
//! `WARDEN_BENCH_BEFORE=PATH` times that build too, in the same run.
//! `WARDEN_BENCH_REPS` (default 3) repeats section 1, bash and each build
//! in turn: its start times and CPU per run are printed as min / median,
//! each against bash's of the same repetitions, with the machine's load
//! before and after.

mod measure;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use measure::{Machine, Samples, ratio};

const WARDEN: &str = env!("CARGO_BIN_EXE_warden");

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    warden_process::run_if_shim();
    let args: Vec<String> = std::env::args().collect();
    // Child modes: this binary is also the child process of the runs.
    if let Some(i) = args.iter().position(|a| a == "__ticker") {
        let secs: u64 = args[i + 1].parse().unwrap();
        // Its start time, for the launch figures.
        if let Some(file) = args.get(i + 2) {
            std::fs::write(file, now_us().to_string()).unwrap();
        }
        ticker(
            Duration::from_secs(secs),
            args.get(i + 3).map(PathBuf::from),
        );
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "__bulk") {
        bulk(args[i + 1].parse().unwrap());
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // `WARDEN_BENCH_ONLY=2`: only that section.
    let only = std::env::var("WARDEN_BENCH_ONLY").ok();
    let wanted = |n: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|s| s.trim() == n))
    };
    println!("# warden at scale\n");
    let machine = Machine::start();
    if wanted("1") {
        concurrent(tmp.path());
    }
    if wanted("2") {
        big_run(tmp.path());
    }
    machine.end();
}

/// A line every 10 ms for `length`; with `silence`, only for 1 s, then
/// nothing until killed (the time of its last line goes into that file).
fn ticker(length: Duration, silence: Option<PathBuf>) {
    let start = Instant::now();
    let mut out = std::io::stdout().lock();
    let mut n = 0u64;
    let mut last_line = now_us();
    while start.elapsed() < length {
        if let Some(file) = &silence
            && start.elapsed() >= Duration::from_secs(1)
        {
            std::fs::write(file, last_line.to_string()).unwrap();
            std::thread::sleep(Duration::from_secs(600));
        }
        n += 1;
        let _ = writeln!(out, "tick {n}: compiling crate {} of the workspace", n % 97);
        let _ = out.flush();
        last_line = now_us();
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn bulk(gib: u64) {
    let line = format!("{}\n", "x".repeat(4095));
    let mut out = std::io::stdout().lock();
    let total = gib << 30;
    let mut written = 0u64;
    while written < total {
        if out.write_all(line.as_bytes()).is_err() {
            return;
        }
        written += line.len() as u64;
    }
}

/// Microseconds since the epoch (CLOCK_REALTIME): comparable across
/// processes.
fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// A process's own CPU time (user + system) in ms and its peak RSS in KiB,
/// from /proc: its children's usage is not in them (a wait4 of warden
/// would add every shim and child it reaped).
fn proc_usage(pid: u32) -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat[stat.rfind(')')? + 2..].split(' ').collect();
    let ticks = fields[11].parse::<u64>().ok()? + fields[12].parse::<u64>().ok()?;
    let hz = rustix::param::clock_ticks_per_second().max(1);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())?;
    Some((ticks * 1000 / hz, hwm))
}

/// A run's shim: a child of warden `pid` started as one.
fn a_shim_of(pid: u32) -> Option<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| c.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .filter_map(|p| p.parse::<u32>().ok())
        .find(|p| {
            std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| {
                c.split(|b| *b == 0)
                    .any(|a| a == warden_process::shim::SHIM_ARG.as_bytes())
            })
        })
}

/// A process's RSS and unshared memory (Private_Clean + Private_Dirty),
/// in KiB.
fn smaps_kib(pid: u32) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let field = |name: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    Some((
        field("Rss:"),
        field("Private_Clean:") + field("Private_Dirty:"),
    ))
}

/// The starts written into `dir` (one file per child), sorted.
fn starts_in(dir: &std::path::Path) -> Vec<u64> {
    let mut starts: Vec<u64> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .filter_map(|t| t.trim().parse().ok())
        .collect();
    starts.sort_unstable();
    starts
}

/// First, median and last start after `t0`, in ms.
fn start_spread(starts: &[u64], t0: u64) -> String {
    let at = |i: usize| starts[i].saturating_sub(t0) as f64 / 1000.0;
    format!(
        "{:.0} / {:.0} / {:.0} ms",
        at(0),
        at(starts.len() / 2),
        at(starts.len() - 1)
    )
}

/// The `run.json` under `dir`, wherever the session put it.
fn find_run_json(dir: &std::path::Path) -> Option<std::path::PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.file_name().is_some_and(|n| n == "run.json") {
            return Some(p);
        }
        if p.is_dir()
            && let Some(found) = find_run_json(&p)
        {
            return Some(found);
        }
    }
    None
}

/// `warden batch -j N` of N tickers beside bash starting the same N: how
/// long until the last one started, how late the stall clock of the one
/// that goes silent fires, and what warden itself costs.
fn concurrent(tmp: &std::path::Path) {
    let runs = env_num("WARDEN_BENCH_RUNS", 200).max(2) as usize;
    let secs = env_num("WARDEN_BENCH_SECS", 10).max(4);
    let reps = env_num("WARDEN_BENCH_REPS", 3).max(1);
    let me = std::env::current_exe().unwrap();
    let me = me.to_string_lossy();

    // warden: batches of the same children (with the binary built here,
    // or `WARDEN_BENCH_BIN`), and, with `WARDEN_BENCH_BEFORE`, with that
    // other build too, in turn with bash, so drift hits all alike.
    let before = std::env::var("WARDEN_BENCH_BEFORE").ok();
    let mut bash = Samples::new();
    let mut bash_spread = String::new();
    let mut rows: Vec<(String, Launches)> =
        vec![("`warden batch`".to_string(), Launches::default())];
    if let Some(before) = &before {
        rows.push((format!("`warden batch` ({before})"), Launches::default()));
    }
    for rep in 0..reps {
        let (last, spread) = bash_once(tmp, &format!("bash{rep}"), runs, secs, &me);
        bash.push(last);
        bash_spread = spread;
        let now = batch_once(tmp, &format!("now{rep}"), runs, secs, &me);
        rows[0].1.add(now, runs);
        if let Some(before) = &before {
            let f = batch_once_with(before, tmp, &format!("before{rep}"), runs, secs, &me);
            rows[1].1.add(f, runs);
        }
    }

    println!(
        "## 1. `warden batch -j {runs}`: {runs} runs, a line every 10 ms each for {secs} s ({reps} times each, in turn; min / median)\n"
    );
    println!(
        "| launcher | children started after (first / median / last, of the last time) | last child started after | ratio to bash | stall clock (2 s) late by | warden CPU per run | warden peak RSS | RSS per run | one shim: RSS / unshared |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    println!(
        "| bash (`child &` x {runs}) | {bash_spread} | {} | 1.00× | | | | | |",
        bash.ms()
    );
    for (name, l) in rows {
        let f = l.last.expect("one batch at least");
        println!(
            "| {name} | {} | {} | {} | {} ms | {} | {} MiB | {} KiB | {} / {} KiB |",
            f.spread,
            l.last_start.ms(),
            ratio(&l.last_start, &bash),
            f.stall_late_ms,
            l.cpu_per_run.ms(),
            f.peak_rss_kib / 1024,
            f.peak_rss_kib / runs as u64,
            f.shim.0,
            f.shim.1
        );
    }
    println!();
}

/// bash starting the same children as fast as a shell can: when the last
/// one started, and the spread of the starts.
fn bash_once(
    tmp: &std::path::Path,
    tag: &str,
    runs: usize,
    secs: u64,
    me: &str,
) -> (Duration, String) {
    let bash_starts = tmp.join(format!("{tag}-starts"));
    std::fs::create_dir_all(&bash_starts).unwrap();
    let script = format!(
        "for i in $(seq 1 {runs}); do '{me}' __ticker {secs} '{d}'/$i > /dev/null & done; wait",
        d = bash_starts.display()
    );
    let t0 = now_us();
    let status = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .status()
        .unwrap();
    assert!(status.success());
    let bash = starts_in(&bash_starts);
    assert_eq!(bash.len(), runs, "every child under bash started");
    (
        Duration::from_micros(bash[runs - 1].saturating_sub(t0)),
        start_spread(&bash, t0),
    )
}

/// The batches of one build: the samples, and the last batch's other
/// figures.
#[derive(Default)]
struct Launches {
    last_start: Samples,
    cpu_per_run: Samples,
    last: Option<BatchFigures>,
}

impl Launches {
    fn add(&mut self, f: BatchFigures, runs: usize) {
        self.last_start.push(Duration::from_micros(f.last_start_us));
        self.cpu_per_run
            .push(Duration::from_micros(f.cpu_ms * 1000 / runs as u64));
        self.last = Some(f);
    }
}

/// What one `warden batch` of the tickers measured.
struct BatchFigures {
    last_start_us: u64,
    /// First, median and last start.
    spread: String,
    stall_late_ms: i64,
    cpu_ms: u64,
    peak_rss_kib: u64,
    /// One shim's RSS and unshared memory, KiB.
    shim: (u64, u64),
}

fn batch_once(tmp: &std::path::Path, tag: &str, runs: usize, secs: u64, me: &str) -> BatchFigures {
    let bin = std::env::var("WARDEN_BENCH_BIN").unwrap_or_else(|_| WARDEN.to_string());
    batch_once_with(&bin, tmp, tag, runs, secs, me)
}

/// Run 1 goes silent after 1 s and its stall clock (2 s) ends it.
fn batch_once_with(
    bin: &str,
    tmp: &std::path::Path,
    tag: &str,
    runs: usize,
    secs: u64,
    me: &str,
) -> BatchFigures {
    let starts = tmp.join(format!("{tag}-starts"));
    std::fs::create_dir_all(&starts).unwrap();
    let silence = tmp.join(format!("{tag}-silence"));
    let mut toml = String::from("[defaults]\nagent = \"exec\"\nstall_timeout = \"60s\"\n\n");
    for i in 1..=runs {
        let mut cmd = format!(
            "[\"{me}\", \"__ticker\", \"{secs}\", \"{}\"",
            starts.join(i.to_string()).display()
        );
        if i == 1 {
            cmd.push_str(&format!(", \"{}\"", silence.display()));
        }
        cmd.push(']');
        toml.push_str(&format!("[[run]]\nname = \"t{i}\"\ncommand = {cmd}\n"));
        if i == 1 {
            toml.push_str("stall_timeout = \"2s\"\n");
        }
    }
    let file = tmp.join(format!("{tag}-batch.toml"));
    std::fs::write(&file, toml).unwrap();
    let batch_dir = tmp.join(format!("{tag}-batch"));
    let t0 = now_us();
    let mut warden = Command::new(bin)
        .arg("batch")
        .arg(&file)
        .args(["-j", &runs.to_string(), "--dir"])
        .arg(&batch_dir)
        .current_dir(tmp)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = warden.id();
    let mut usage = (0, 0);
    let mut shim = None;
    let half = Instant::now() + Duration::from_secs(secs / 2);
    let status = loop {
        if let Some(s) = warden.try_wait().unwrap() {
            break s;
        }
        if let Some(u) = proc_usage(pid) {
            usage = u;
        }
        if shim.is_none() && Instant::now() >= half {
            shim = a_shim_of(pid).and_then(smaps_kib);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Run 1 was stalled on purpose: the batch fails.
    assert_eq!(status.code(), Some(1), "warden batch: {status:?}");
    let children = starts_in(&starts);
    assert_eq!(children.len(), runs, "every child under warden started");

    // The stall: when the report says it fired, against the child's last
    // line plus the stall timeout.
    let silent_us: u64 = std::fs::read_to_string(&silence)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let run_json = find_run_json(&batch_dir.join("t1")).expect("run 1's run.json");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&run_json).unwrap()).unwrap();
    assert_eq!(report["verdict"], "stalled", "{report}");
    let started: std::time::SystemTime =
        humantime::parse_rfc3339(report["started_at"].as_str().unwrap()).unwrap();
    let started_us = started
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let events = std::fs::read_to_string(run_json.with_file_name("events.jsonl")).unwrap();
    let fired_ms = events
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["kind"] == "terminating")
        .and_then(|e| e["t_ms"].as_u64())
        .expect("a terminating event");
    BatchFigures {
        last_start_us: children[runs - 1].saturating_sub(t0),
        spread: start_spread(&children, t0),
        stall_late_ms: (started_us + fired_ms * 1000) as i64 / 1000
            - (silent_us / 1000 + 2000) as i64,
        cpu_ms: usage.0,
        peak_rss_kib: usage.1,
        shim: shim.unwrap_or((0, 0)),
    }
}

fn big_run(tmp: &std::path::Path) {
    let gib = env_num("WARDEN_BENCH_GB", 5);
    let me = std::env::current_exe().unwrap();
    println!("## 2. One run writing a lot (4 KiB lines)\n");
    println!("The reference is `cat` copying the same writer's output to a file.\n");
    println!("| written | `cat > file` | warden | warden / cat | warden CPU | warden peak RSS |");
    println!("|---|---|---|---|---|---|");
    for size in [1, gib] {
        let bytes = (size << 30) as f64;
        let out = tmp.join(format!("cat{size}.log"));
        let t = Instant::now();
        let status = Command::new("sh")
            .arg("-c")
            .arg(r#""$0" __bulk "$1" | cat > "$2""#)
            .arg(&me)
            .arg(size.to_string())
            .arg(&out)
            .status()
            .unwrap();
        let cat = t.elapsed();
        assert!(status.success());
        let _ = std::fs::remove_file(&out);

        let run_dir = tmp.join(format!("big{size}"));
        let t = Instant::now();
        let status = Command::new(WARDEN)
            .args(["run", "exec", "-q", "--run-dir"])
            .arg(&run_dir)
            .arg("--")
            .arg(&me)
            .args(["__bulk", &size.to_string()])
            // Its log is its copy, as the file is `cat`'s: what it would
            // pass on is thrown away.
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        let wall = t.elapsed();
        assert!(status.success());
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(run_dir.join("run.json")).unwrap())
                .unwrap();
        let rate = |d: Duration| bytes / d.as_secs_f64() / 1e6;
        println!(
            "| {size} GiB | {:.0} MB/s | {:.0} MB/s | {:.2} | {} ms | {} KiB |",
            rate(cat),
            rate(wall),
            cat.as_secs_f64() / wall.as_secs_f64(),
            r["warden_cpu_ms"],
            r["warden_peak_rss_kib"]
        );
        let _ = std::fs::remove_dir_all(&run_dir);
    }
    println!();
}
