//! On a cluster: `cargo bench -p agent-warden --bench slurm`, with
//! `WARDEN_SLURM_CONF` naming the cluster's slurm.conf (`.ci/slurm up DIR`
//! starts a one-node one).
//!
//! Beside Slurm's own latency for the same work, taking turns in the same
//! run:
//!
//! 1. one run: `warden batch` of one `exec -- true` run on Slurm, from the
//!    command's start to its exit with `batch.json` written, beside
//!    `sbatch --parsable --wrap true` and polling `scontrol show job -o` every
//!    50 ms until the job is COMPLETED;
//! 2. `N` runs (`WARDEN_BENCH_RUNS`, default 50) all at once: `warden batch
//!    -j N` beside `sbatch --array=0-(N-1) --wrap true` polled the same way.
//!
//! The difference is warden's overhead per batch and per run: writing the
//! requests, starting warden in each job, supervising, reading each
//! `session.json` back. `WARDEN_BENCH_REPS` (default 5) turns of each; the
//! median is printed. `WARDEN_BENCH_BIN=PATH` times another warden.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const WARDEN: &str = env!("CARGO_BIN_EXE_warden");

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

mod measure;

/// Submits `args` with sbatch and polls until every task is done.
fn sbatch_until_done(conf: &Path, dir: &Path, args: &[&str]) -> Duration {
    let start = Instant::now();
    let out = Command::new("sbatch")
        .env("SLURM_CONF", conf)
        .current_dir(dir)
        .arg("--parsable")
        .arg(format!("--output={}/slurm-%A_%a.out", dir.display()))
        .args(args)
        .output()
        .expect("sbatch");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8_lossy(&out.stdout)
        .trim()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    loop {
        let out = Command::new("scontrol")
            .env("SLURM_CONF", conf)
            .args(["show", "job", "-o", &id])
            .output()
            .expect("scontrol");
        let text = String::from_utf8_lossy(&out.stdout);
        let done = !text.is_empty()
            && text
                .lines()
                .all(|l| l.contains("JobState=COMPLETED") || l.contains("JobState=FAILED"));
        if done {
            return start.elapsed();
        }
        assert!(start.elapsed() < Duration::from_secs(300), "{text}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `warden batch` of `n` `true` runs on Slurm, all at once.
fn warden_batch(bin: &str, conf: &Path, dir: &Path, n: usize) -> Duration {
    let mut toml = String::from("[defaults]\nagent = \"exec\"\nexecutor = \"slurm\"\n");
    for i in 0..n {
        toml.push_str(&format!("[[run]]\nname = \"r{i}\"\ncommand = [\"true\"]\n"));
    }
    let file = dir.join(format!("b{n}.toml"));
    std::fs::write(&file, toml).unwrap();
    let batch_dir = dir.join(format!("batch-{n}-{}", Instant::now().elapsed().as_nanos()));
    let _ = std::fs::remove_dir_all(&batch_dir);
    let start = Instant::now();
    let out = Command::new(bin)
        .env("SLURM_CONF", conf)
        .current_dir(dir)
        .args(["batch", file.to_str().unwrap(), "-q", "-j"])
        .arg(n.to_string())
        .arg("--dir")
        .arg(&batch_dir)
        .output()
        .expect("warden batch");
    let took = start.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&batch_dir).ok();
    took
}

fn main() {
    let Some(conf) = std::env::var_os("WARDEN_SLURM_CONF") else {
        eprintln!(
            "set WARDEN_SLURM_CONF to a cluster's slurm.conf (`.ci/slurm up /tmp/slurm-bench` starts one)"
        );
        return;
    };
    let conf = Path::new(&conf).to_path_buf();
    let bin = std::env::var("WARDEN_BENCH_BIN").unwrap_or_else(|_| WARDEN.to_string());
    let reps = env_num("WARDEN_BENCH_REPS", 5);
    let n = env_num("WARDEN_BENCH_RUNS", 50);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();

    let machine = measure::Machine::start();
    let mut one_w = measure::Samples::new();
    let (mut one_s, mut many_w, mut many_s) = (one_w.clone(), one_w.clone(), one_w.clone());
    for _ in 0..reps {
        one_s.push(sbatch_until_done(&conf, dir, &["--wrap", "true"]));
        one_w.push(warden_batch(&bin, &conf, dir, 1));
        let array = format!("--array=0-{}", n - 1);
        many_s.push(sbatch_until_done(&conf, dir, &[&array, "--wrap", "true"]));
        many_w.push(warden_batch(&bin, &conf, dir, n));
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("# warden on Slurm ({reps} turns of each with Slurm alone; wall time min / median)\n");
    println!(
        "| work | Slurm alone (`sbatch` + polling `scontrol`) | `warden batch --executor slurm` | warden − Slurm (median) | per run | ratio |"
    );
    println!("|---|---|---|---|---|---|");
    for (work, runs, slurm, warden) in [
        ("1 run of `true`".to_string(), 1, &one_s, &one_w),
        (
            format!("{n} runs of `true`, all at once"),
            n,
            &many_s,
            &many_w,
        ),
    ] {
        let extra = ms(warden.median()) - ms(slurm.median());
        println!(
            "| {work} | {} | {} | {extra:+.0} ms | {:+.1} ms | {} |",
            slurm.ms(),
            warden.ms(),
            extra / runs as f64,
            measure::ratio(warden, slurm)
        );
    }
    machine.end();
}
