//! End to end: `cargo bench -p agent-warden --bench endtoend`.
//!
//! Times, taking turns in the same run, the limit for anything that keeps
//! byte-exact logs (`sh -c 'cat FILE | cat > out'`) against warden
//! supervising a process that writes the same file:
//!
//! 1. `warden run claude` on a stream shaped like Claude Code's output
//!    with `--include-partial-messages` (most lines are `stream_event`
//!    deltas, every 40th round a large tool result with escapes);
//! 2. `warden run exec -- cat FILE` on plain lines.
//!
//! Each is measured twice: free to use every CPU, and with everything
//! pinned to one (`taskset -c 0`: the CPU per byte, with no second core
//! to hide work on). warden's stdout goes to `/dev/null` (the reference's
//! second `cat` keeps only its file; warden's is its log).
//!
//! It prints each one's MB/s (best and median), the ratio to the
//! reference of the same turns (best to best, median to median),
//! the agent's decoder alone on the same file (in this process, 64 KiB
//! pieces, nothing written: what no supervisor of that agent can beat),
//! warden's peak RSS (GNU time's `%M`: the figure of warden alone, not of
//! this process) and how big `events.jsonl` came out.
//!
//! `WARDEN_BENCH_MB` is the size of the Claude stream in MB (default 20,
//! a quick run); the plain-lines file is five times that (`200` gives the
//! full figures: 200 MB and 1 GB). `WARDEN_BENCH_REPS` (default 5) turns
//! of each. `WARDEN_BENCH_BIN=PATH` times another warden;
//! `WARDEN_BENCH_BASE=PATH` times a second one in the same turns (a
//! before/after measured in the same minutes).
//! `WARDEN_BENCH_DIR=DIR` writes the files there and keeps them (to
//! profile one run by hand: `DIR/claude` is the agent, `DIR/plain.log`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use warden_events::{Agent, StreamDecoder};

mod measure;
#[path = "../../warden-events/benches/streams/mod.rs"]
mod streams;
use streams::{big_text, claude_partial};

const GNU_TIME: &str = "/usr/bin/time";

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn warden() -> PathBuf {
    std::env::var_os("WARDEN_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_warden").into())
}

fn main() {
    let mb = env_num("WARDEN_BENCH_MB", 20);
    let reps = env_num("WARDEN_BENCH_REPS", 5).max(1) as usize;
    if !Path::new(GNU_TIME).exists() {
        eprintln!("{GNU_TIME} (GNU time) is needed to measure warden's peak memory");
        std::process::exit(2);
    }
    let tmp = tempfile::tempdir().unwrap();
    let kept = std::env::var_os("WARDEN_BENCH_DIR").map(PathBuf::from);
    let dir = kept.as_deref().unwrap_or(tmp.path());
    std::fs::create_dir_all(dir).unwrap();
    let claude = dir.join("claude.jsonl");
    write_file(&claude, mb << 20, claude_round, Some(CLAUDE_RESULT));
    let plain = dir.join("plain.log");
    write_file(&plain, (mb * 5) << 20, plain_round, None);

    // The Claude CLI is a script that writes the stream, whatever it is
    // asked.
    let agent = dir.join("claude");
    std::fs::write(
        &agent,
        format!("#!/bin/sh\nexec cat '{}'\n", claude.display()),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    let base = std::env::var_os("WARDEN_BENCH_BASE").map(PathBuf::from);
    let machine = measure::Machine::start();
    println!(
        "# warden end to end ({reps} turns of each, taking turns with the reference; MB/s best / median)\n"
    );
    if let Some(b) = &base {
        println!("base: {} (timed in the same turns)\n", b.display());
    }
    println!(
        "| stream | CPUs | size | `cat FILE \\| cat > out` | warden | warden / cat | {}decoder alone | warden's peak RSS | events.jsonl |",
        if base.is_some() {
            "base | base / cat | "
        } else {
            ""
        }
    );
    println!(
        "|---|---|---|---|---|---|{}---|---|---|",
        if base.is_some() { "---|---|" } else { "" }
    );
    let claude_run = |bin: &Path, dir: &Path| {
        let mut c = Command::new(bin);
        c.args(["run", "claude", "go", "-q", "--agent-bin"])
            .arg(&agent)
            .arg("--run-dir")
            .arg(dir);
        c
    };
    let plain_run = |bin: &Path, dir: &Path| {
        let mut c = Command::new(bin);
        c.args(["run", "exec", "-q", "--run-dir"])
            .arg(dir)
            .arg("--")
            .arg("cat")
            .arg(&plain);
        c
    };
    let pinned = Command::new("taskset")
        .args(["-c", "0", "true"])
        .status()
        .is_ok_and(|s| s.success());
    for one_cpu in [false, true] {
        if one_cpu && !pinned {
            println!("| (one CPU: `taskset` is missing, not measured) |");
            continue;
        }
        let bench = Bench {
            tmp: tmp.path(),
            reps,
            one_cpu,
            base: base.as_deref(),
        };
        bench.compare(
            "Claude, partial messages",
            Agent::Claude,
            &claude,
            &claude_run,
        );
        bench.compare("plain lines (`exec`)", Agent::Exec, &plain, &plain_run);
    }
    machine.end();
}

/// How each figure is taken.
struct Bench<'a> {
    tmp: &'a Path,
    reps: usize,
    /// Everything pinned to one CPU (`taskset -c 0`): the CPU per byte a
    /// machine running many agents pays, with no second core to hide work
    /// on.
    one_cpu: bool,
    /// Another warden, timed in the same turns.
    base: Option<&'a Path>,
}

/// What the runs of one warden binary came to.
#[derive(Default)]
struct Runs {
    times: measure::Samples,
    peak_kib: u64,
    events_bytes: u64,
}

impl Bench<'_> {
    /// `cmd`, under `taskset -c 0` when pinned.
    fn command(&self, program: &str) -> Command {
        if self.one_cpu {
            let mut c = Command::new("taskset");
            c.args(["-c", "0", program]);
            c
        } else {
            Command::new(program)
        }
    }

    /// One row: the reference and warden (and the base), in turns.
    fn compare(
        &self,
        label: &str,
        agent: Agent,
        file: &Path,
        warden_cmd: &dyn Fn(&Path, &Path) -> Command,
    ) {
        let size = std::fs::metadata(file).unwrap().len();
        let out = self.tmp.join("out");
        let mut cat = measure::Samples::new();
        let mut ours = Runs::default();
        let mut theirs = Runs::default();
        for _ in 0..self.reps {
            let t = Instant::now();
            let status = self
                .command("sh")
                .arg("-c")
                .arg(format!(
                    "cat '{}' | cat > '{}'",
                    file.display(),
                    out.display()
                ))
                .status()
                .unwrap();
            cat.push(t.elapsed());
            assert!(status.success());
            let _ = std::fs::remove_file(&out);
            self.run_warden(
                label,
                size,
                &warden_cmd(&warden(), &self.tmp.join("run")),
                &mut ours,
            );
            if let Some(base) = self.base {
                self.run_warden(
                    label,
                    size,
                    &warden_cmd(base, &self.tmp.join("run")),
                    &mut theirs,
                );
            }
        }
        let decoder = (0..self.reps).map(|_| decode(agent, file)).min().unwrap();
        let rate = |d: Duration| size as f64 / d.as_secs_f64() / 1e6;
        let rates =
            |s: &measure::Samples| format!("{:.0} / {:.0} MB/s", rate(s.min()), rate(s.median()));
        // Throughput ratio: the reference's time over warden's.
        let ratio = |s: &measure::Samples| measure::ratio(&cat, s);
        let base_cols = if self.base.is_some() {
            format!("{} | {} | ", rates(&theirs.times), ratio(&theirs.times))
        } else {
            String::new()
        };
        println!(
            "| {label} | {} | {} MB | {} | {} | {} | {base_cols}{:.0} MB/s | {:.1} MiB | {:.2} MB |",
            if self.one_cpu { "one" } else { "all" },
            size / 1_000_000,
            rates(&cat),
            rates(&ours.times),
            ratio(&ours.times),
            rate(decoder),
            ours.peak_kib as f64 / 1024.0,
            ours.events_bytes as f64 / 1e6
        );
    }

    /// One run of a warden, its stdout thrown away as the reference's
    /// second `cat` keeps nothing but its file: warden's file is its log.
    fn run_warden(&self, label: &str, size: u64, inner: &Command, runs: &mut Runs) {
        let run_dir = self.tmp.join("run");
        let _ = std::fs::remove_dir_all(&run_dir);
        let peak_file = self.tmp.join("peak");
        let t = Instant::now();
        let status = self
            .command(GNU_TIME)
            .arg("-f")
            .arg("%M")
            .arg("-o")
            .arg(&peak_file)
            .arg(inner.get_program())
            .args(inner.get_args())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        let took = t.elapsed();
        assert!(status.success(), "{label}: warden failed: {status}");
        let logged = std::fs::metadata(run_dir.join("stdout.log")).unwrap().len();
        assert_eq!(logged, size, "{label}: stdout.log is not the whole stream");
        runs.times.push(took);
        let peak: u64 = std::fs::read_to_string(&peak_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        runs.peak_kib = runs.peak_kib.max(peak);
        runs.events_bytes = std::fs::metadata(run_dir.join("events.jsonl"))
            .unwrap()
            .len();
        let _ = std::fs::remove_dir_all(&run_dir);
    }
}

/// The Claude stream's last line: the CLI's terminal event.
const CLAUDE_RESULT: &str = r#"{"type":"result","subtype":"success","is_error":false,"duration_ms":1000,"num_turns":1,"result":"done","session_id":"3f0c9a2e-1b7d-4e55-9c1a-0d2b7c6e9f10","total_cost_usd":0.01,"usage":{"input_tokens":1,"output_tokens":1}}"#;

/// The agent's decoder on the file, as the supervisor feeds it.
fn decode(agent: Agent, file: &Path) -> Duration {
    use std::io::Read;
    let mut f = std::fs::File::open(file).unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let t = Instant::now();
    let mut d = StreamDecoder::new(agent, 8 << 20);
    let mut events = 0u64;
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        d.push(&buf[..n], |_, e| events += e.len() as u64);
    }
    d.finish(|_, e| events += e.len() as u64);
    std::hint::black_box((events, d.summary()));
    t.elapsed()
}

fn write_file(path: &Path, size: u64, round: fn(usize, &str) -> Vec<String>, last: Option<&str>) {
    let mut w = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path).unwrap());
    let mut written = 0u64;
    let mut i = 0usize;
    while written < size {
        // Every 40th round carries a big block (64 KiB to 1 MiB).
        let big = if i.is_multiple_of(40) {
            big_text((64 << 10) << (i / 40 % 5), i)
        } else {
            big_text(600, i)
        };
        for l in round(i, &big) {
            w.write_all(l.as_bytes()).unwrap();
            w.write_all(b"\n").unwrap();
            written += l.len() as u64 + 1;
        }
        i += 1;
    }
    if let Some(l) = last {
        w.write_all(l.as_bytes()).unwrap();
        w.write_all(b"\n").unwrap();
    }
    w.flush().unwrap();
}

/// Plain lines: what a build or a test suite prints.
fn plain_round(_: usize, big: &str) -> Vec<String> {
    big.lines().map(str::to_string).collect()
}

/// One round of Claude with `--include-partial-messages`, the decode
/// benchmark's shape, after the `system` line that opens a session.
fn claude_round(i: usize, big: &str) -> Vec<String> {
    let mut lines = Vec::new();
    if i == 0 {
        lines.push(
            r#"{"type":"system","subtype":"init","cwd":"/work","session_id":"3f0c9a2e-1b7d-4e55-9c1a-0d2b7c6e9f10","tools":["Bash"],"model":"claude-sonnet-4-5","claude_code_version":"2.1.197"}"#
                .to_string(),
        );
    }
    lines.extend(claude_partial(i, big));
    lines
}
