//! Replay throughput and memory: `cargo bench -p agent-warden --bench replay`.
//!
//! For plain lines (`exec`) and a recorded Claude stream repeated, writes
//! a file of `WARDEN_BENCH_MB` MB (default 1024), then prints, from the
//! same run on the same file:
//! - the decoder's own speed (in this process, 256 KiB reads fed to the
//!   same `StreamDecoder`, nothing printed);
//! - `warden replay AGENT FILE` and `warden replay AGENT FILE --json`,
//!   output to `/dev/null`, as MB/s and as a ratio to the decoder;
//! - replay's peak resident memory (from GNU `time`).
//!
//! Three turns of each, best and median (`WARDEN_BENCH_QUICK=1`: one).

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use warden_events::{Agent, StreamDecoder};

mod measure;

const WARDEN: &str = env!("CARGO_BIN_EXE_warden");
const CLAUDE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../warden-events/tests/fixtures/claude/success_with_tools.jsonl"
));

fn main() {
    let mb: usize = std::env::var("WARDEN_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024);
    let reps = if std::env::var_os("WARDEN_BENCH_QUICK").is_some() {
        1
    } else {
        3
    };
    let tmp = tempfile::tempdir().unwrap();
    let machine = measure::Machine::start();
    println!(
        "# replay throughput ({mb} MB per stream, {reps} turns of each; MB/s best / median)\n"
    );
    println!(
        "| stream | decoder | `replay` | / decoder | `replay --json` | / decoder | peak RSS of `replay` |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (name, agent) in [
        ("plain lines (`exec`)", Agent::Exec),
        ("Claude recording", Agent::Claude),
    ] {
        let file = tmp.path().join(format!("{agent}.log"));
        write_stream(&file, agent, mb << 20);
        let size = std::fs::metadata(&file).unwrap().len() as f64;
        let rate = |d: Duration| size / d.as_secs_f64() / 1e6;
        let rates =
            |s: &measure::Samples| format!("{:.0} / {:.0} MB/s", rate(s.min()), rate(s.median()));
        // The three take turns, so a change in the machine's load hits
        // each alike.
        let (mut decoder, mut text, mut json) = Default::default();
        let mut rss = 0i64;
        for _ in 0..reps {
            let start = Instant::now();
            decode(agent, &file);
            measure::Samples::push(&mut decoder, start.elapsed());
            for (samples, as_json) in [(&mut text, false), (&mut json, true)] {
                let (took, peak) = replay(agent, &file, as_json);
                measure::Samples::push(samples, took);
                rss = rss.max(peak);
            }
        }
        println!(
            "| {name} | {} | {} | {} | {} | {} | {:.1} MiB |",
            rates(&decoder),
            rates(&text),
            measure::ratio(&decoder, &text),
            rates(&json),
            measure::ratio(&decoder, &json),
            rss as f64 / 1024.0,
        );
        let _ = std::fs::remove_file(&file);
    }
    machine.end();
}

fn write_stream(path: &Path, agent: Agent, size: usize) {
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut written = 0;
    let mut n = 0u64;
    while written < size {
        let block = match agent {
            Agent::Exec => format!(
                "line {n:>10} of plain output from a build, a test or a log: {}\n",
                "ok ".repeat((n % 23) as usize)
            ),
            _ => CLAUDE.to_string(),
        };
        w.write_all(block.as_bytes()).unwrap();
        written += block.len();
        n += 1;
    }
    w.flush().unwrap();
}

fn decode(agent: Agent, path: &Path) {
    let mut input = std::fs::File::open(path).unwrap();
    let mut chunk = vec![0u8; 256 * 1024];
    let mut d = StreamDecoder::new(agent, warden_run::defaults::MAX_LINE);
    let mut events = 0usize;
    let mut count = |_, e: &mut Vec<_>| {
        events += e.len();
        e.clear();
    };
    loop {
        let n = input.read(&mut chunk).unwrap();
        if n == 0 {
            break;
        }
        d.push(&chunk[..n], &mut count);
    }
    d.finish(&mut count);
    std::hint::black_box(events);
}

/// Runs `warden replay` to its end: its wall time and peak RSS in KiB.
///
/// Started through GNU `time`, whose own memory (about 1 MiB) is the
/// floor of the figure: Linux counts in a process's peak the memory its
/// parent had when it was spawned, and this bench's is larger.
fn replay(agent: Agent, path: &Path, json: bool) -> (Duration, i64) {
    let rss_file = path.with_extension("rss");
    let mut cmd = Command::new("/usr/bin/time");
    cmd.args(["-f", "%M", "-o"])
        .arg(&rss_file)
        .arg(WARDEN)
        .args(["replay", agent.name(), path.to_str().unwrap()]);
    if json {
        cmd.arg("--json");
    }
    let start = Instant::now();
    let status = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("GNU time at /usr/bin/time (apt install time)");
    let elapsed = start.elapsed();
    assert!(status.code().is_some(), "replay was killed: {status}");
    let rss = std::fs::read_to_string(&rss_file)
        .ok()
        .and_then(|s| s.lines().last()?.trim().parse().ok())
        .expect("GNU time wrote the peak RSS");
    (elapsed, rss)
}
