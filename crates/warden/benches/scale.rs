//! Many runs and big runs: `cargo bench -p warden --bench scale`.
//!
//! 1. N concurrent supervised processes (default 200) that each print a
//!    line every 10 ms for 10 s, supervised in one process through the
//!    library: its CPU time and peak memory, in all and per run.
//! 2. Decode and supervise throughput: a child writing realistic Claude
//!    stream lines as fast as it can, through `warden run claude`, against
//!    `cat` on the same stream.
//! 3. The overhead of `warden run exec -- true` beside `true` and beside
//!    what a Node-based runner pays just to start (`node -e 0`).
//! 4. One run that writes 5 GB: warden's peak memory at 1 GB and at 5 GB.
//!
//! `WARDEN_BENCH_RUNS`, `WARDEN_BENCH_SECS`, `WARDEN_BENCH_LINES` and
//! `WARDEN_BENCH_GB` change the sizes.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use warden_run::{Run, RunSpec};

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
        ticker(Duration::from_secs(secs));
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "__claude") {
        claude_stream(args[i + 1].parse().unwrap());
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "__bulk") {
        bulk(args[i + 1].parse().unwrap());
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    println!("# warden at scale\n");
    concurrent(tmp.path());
    throughput(tmp.path());
    overhead(tmp.path());
    big_run(tmp.path());
}

fn ticker(length: Duration) {
    let start = Instant::now();
    let mut out = std::io::stdout().lock();
    let mut n = 0u64;
    while start.elapsed() < length {
        n += 1;
        let _ = writeln!(out, "tick {n}: compiling crate {} of the workspace", n % 97);
        let _ = out.flush();
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn claude_stream(lines: u64) {
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let _ = writeln!(
        out,
        r#"{{"type":"system","subtype":"init","session_id":"bench","model":"claude-bench","claude_code_version":"2.1.197"}}"#
    );
    for i in 0..lines {
        let line = match i % 4 {
            0 => format!(
                r#"{{"type":"assistant","message":{{"id":"msg_{i}","role":"assistant","model":"claude-bench","content":[{{"type":"text","text":"Step {i}: I will look at the parser and run the tests again."}}],"usage":{{"input_tokens":812,"output_tokens":9}}}},"parent_tool_use_id":null,"session_id":"bench"}}"#
            ),
            1 => format!(
                r#"{{"type":"assistant","message":{{"id":"msg_{i}","role":"assistant","content":[{{"type":"tool_use","id":"toolu_{i}","name":"Bash","input":{{"command":"cargo test -p parser","timeout":120000}}}}],"usage":{{"input_tokens":812,"output_tokens":61}}}},"parent_tool_use_id":null,"session_id":"bench"}}"#
            ),
            2 => format!(
                r#"{{"type":"user","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"toolu_{}","content":"running 12 tests\ntest parser::a ... ok\ntest parser::b ... ok\ntest result: ok. 12 passed","is_error":false}}]}},"parent_tool_use_id":null,"session_id":"bench"}}"#,
                i - 1
            ),
            _ => format!(
                r#"{{"type":"system","subtype":"status","status":"requesting","session_id":"bench","n":{i}}}"#
            ),
        };
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(
        out,
        r#"{{"type":"result","subtype":"success","is_error":false,"result":"done","num_turns":1,"session_id":"bench","usage":{{"input_tokens":1,"output_tokens":1}}}}"#
    );
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

fn cpu_ms() -> u64 {
    warden_process::os::cpu_time().map_or(0, |d| d.as_millis() as u64)
}

fn concurrent(tmp: &std::path::Path) {
    let runs = env_num("WARDEN_BENCH_RUNS", 200) as usize;
    let secs = env_num("WARDEN_BENCH_SECS", 10);
    let me = std::env::current_exe().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let cpu0 = cpu_ms();
    let wall = Instant::now();
    let (lines, shim_rss) = rt.block_on(async {
        let mut handles = Vec::new();
        for i in 0..runs {
            let mut spec = RunSpec::exec([
                me.to_string_lossy().to_string(),
                "__ticker".into(),
                secs.to_string(),
            ]);
            spec.run_dir = Some(tmp.join(format!("c{i}")));
            spec.limits.stall_timeout = Some(Duration::from_secs(60));
            let mut run = Run::new(spec).spawn().await.unwrap();
            handles.push(tokio::spawn(async move {
                while run.next_event().await.is_some() {}
                run.wait().await
            }));
        }
        // One shim's memory, halfway through.
        tokio::time::sleep(Duration::from_secs(secs / 2)).await;
        let shim_rss = first_child_rss_kib();
        let mut lines = 0;
        for h in handles {
            let r = h.await.unwrap();
            assert_eq!(
                r.verdict,
                Some(warden_run::Verdict::Succeeded),
                "{}",
                r.reason
            );
            lines += r.activity_lines;
        }
        (lines, shim_rss)
    });
    let cpu = cpu_ms() - cpu0;
    let wall = wall.elapsed();
    let rss = warden_process::os::peak_rss_kib().unwrap_or(0);
    println!("## 1. {runs} runs at once, a line every 10 ms each for {secs} s\n");
    println!(
        "| lines | wall | supervisor CPU | share of one core | CPU per run | peak RSS | RSS per run | one shim's RSS |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    println!(
        "| {lines} | {:.1} s | {cpu} ms | {:.1}% | {:.1} ms | {} MiB | {} KiB | {} KiB |\n",
        wall.as_secs_f64(),
        cpu as f64 / wall.as_millis() as f64 * 100.0,
        cpu as f64 / runs as f64,
        rss / 1024,
        rss / runs as u64,
        shim_rss
    );
}

fn first_child_rss_kib() -> u64 {
    let me = std::process::id();
    let children = std::fs::read_dir(format!("/proc/{me}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| c.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .next();
    children
        .and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .map(|v| v.trim().trim_end_matches("kB").trim().parse().unwrap_or(0))
        })
        .unwrap_or(0)
}

fn throughput(tmp: &std::path::Path) {
    let lines = env_num("WARDEN_BENCH_LINES", 2_000_000);
    let me = std::env::current_exe().unwrap();
    let t = Instant::now();
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "'{}' __claude {lines} | cat > /dev/null",
            me.display()
        ))
        .status()
        .unwrap();
    assert!(status.success());
    let cat = t.elapsed();
    let t = Instant::now();
    let run_dir = tmp.join("throughput");
    let status = Command::new(WARDEN)
        .args(["run", "claude", "go", "-q", "--agent-bin"])
        .arg(&me)
        .arg("--run-dir")
        .arg(&run_dir)
        .args(["--", "__claude", &lines.to_string()])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    let warden = t.elapsed();
    assert!(status.success());
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("run.json")).unwrap()).unwrap();
    let bytes = report["stdout_bytes"].as_u64().unwrap_or(0);
    let rate = |d: Duration| lines as f64 / d.as_secs_f64();
    println!(
        "## 2. Claude stream as fast as the child can write ({lines} lines, {} MB)\n",
        bytes >> 20
    );
    println!("| path | wall | lines/s | MB/s |");
    println!("|---|---|---|---|");
    println!(
        "| child \\| cat | {:.2} s | {:.0} | {:.0} |",
        cat.as_secs_f64(),
        rate(cat),
        bytes as f64 / cat.as_secs_f64() / 1e6
    );
    println!(
        "| warden run claude (decode, tee, events) | {:.2} s | {:.0} | {:.0} |",
        warden.as_secs_f64(),
        rate(warden),
        bytes as f64 / warden.as_secs_f64() / 1e6
    );
    println!(
        "\nwarden carries {:.0}% of cat's rate; its CPU {} ms, peak RSS {} KiB.\n",
        rate(warden) / rate(cat) * 100.0,
        report["warden_cpu_ms"],
        report["warden_peak_rss_kib"]
    );
}

fn median_wall(reps: usize, mut f: impl FnMut()) -> Duration {
    let mut v: Vec<Duration> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    v.sort();
    v[v.len() / 2]
}

fn overhead(tmp: &std::path::Path) {
    let t_true = median_wall(30, || {
        Command::new("true").status().unwrap();
    });
    let mut i = 0;
    let t_warden = median_wall(30, || {
        i += 1;
        Command::new(WARDEN)
            .args(["run", "exec", "-q", "--run-dir"])
            .arg(tmp.join(format!("o{i}")))
            .args(["--", "true"])
            .stderr(Stdio::null())
            .status()
            .unwrap();
    });
    let node = Command::new("node").args(["-e", "0"]).status().is_ok();
    let t_node = node.then(|| {
        median_wall(15, || {
            Command::new("node").args(["-e", "0"]).status().unwrap();
        })
    });
    println!("## 3. Overhead of a run\n");
    println!("| command | median wall |");
    println!("|---|---|");
    println!("| `true` | {:.2} ms |", t_true.as_secs_f64() * 1000.0);
    println!(
        "| `warden run exec -- true` | {:.2} ms |",
        t_warden.as_secs_f64() * 1000.0
    );
    if let Some(n) = t_node {
        println!(
            "| `node -e 0` (what a Node-based runner pays to start) | {:.2} ms |",
            n.as_secs_f64() * 1000.0
        );
        println!(
            "\nwarden's whole supervised run costs {:.1}x `true` alone and {:.2}x a bare Node start.\n",
            t_warden.as_secs_f64() / t_true.as_secs_f64(),
            t_warden.as_secs_f64() / n.as_secs_f64()
        );
    }
}

fn big_run(tmp: &std::path::Path) {
    let gib = env_num("WARDEN_BENCH_GB", 5);
    let me = std::env::current_exe().unwrap();
    println!("## 4. One run writing a lot (4 KiB lines)\n");
    println!("| written | wall | MB/s | warden CPU | peak RSS |");
    println!("|---|---|---|---|---|");
    for size in [1, gib] {
        let run_dir = tmp.join(format!("big{size}"));
        let t = Instant::now();
        let status = Command::new(WARDEN)
            .args(["run", "exec", "-q", "--run-dir"])
            .arg(&run_dir)
            .arg("--")
            .arg(&me)
            .args(["__bulk", &size.to_string()])
            .stderr(Stdio::null())
            .status()
            .unwrap();
        let wall = t.elapsed();
        assert!(status.success());
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(run_dir.join("run.json")).unwrap())
                .unwrap();
        println!(
            "| {} GiB | {:.1} s | {:.0} | {} ms | {} KiB |",
            size,
            wall.as_secs_f64(),
            (size << 30) as f64 / wall.as_secs_f64() / 1e6,
            r["warden_cpu_ms"],
            r["warden_peak_rss_kib"]
        );
        let _ = std::fs::remove_dir_all(&run_dir);
    }
    println!();
}
