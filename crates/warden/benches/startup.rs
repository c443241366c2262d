//! Start-up benchmark: `cargo bench -p warden --bench startup`.
//!
//! Prints the wall time of `warden run exec -- true` beside `true` and
//! `timeout 10 true` (a small supervisor of the same kind: fork, exec,
//! wait), measured in turn in the same run so the machine's drift hits
//! all three alike, once in a directory outside any git work tree and
//! once inside one (a run there reads the base commit at its start and
//! the commits made at its end). Also prints the size of the binary that
//! each run re-executes as its shim. Set `WARDEN_BENCH_QUICK=1` for fewer
//! repetitions, `WARDEN_BENCH_BIN=PATH` to time another warden binary
//! (an older build, to compare).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const WARDEN: &str = env!("CARGO_BIN_EXE_warden");

fn main() {
    let bin = std::env::var("WARDEN_BENCH_BIN").unwrap_or_else(|_| WARDEN.to_string());
    let quick = std::env::var_os("WARDEN_BENCH_QUICK").is_some();
    let reps = if quick { 10 } else { 50 };
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("plain");
    let inside = tmp.path().join("repo");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(&inside).unwrap();
    make_repo(&inside);
    assert!(
        !outside.ancestors().any(|d| d.join(".git").exists()),
        "{} is inside a git work tree: set TMPDIR to a directory outside one",
        outside.display()
    );

    let size = std::fs::metadata(&bin).unwrap().len();
    println!("# warden start-up ({reps} runs of each, in turn; median wall time)\n");
    println!(
        "shim binary: {bin} ({:.1} MiB)\n",
        size as f64 / (1024.0 * 1024.0)
    );
    println!(
        "| where | `true` | `timeout 10 true` | `warden run exec -- true` | ratio to `timeout 10 true` |"
    );
    println!("|---|---|---|---|---|");
    for (name, dir) in [("outside git", &outside), ("inside git", &inside)] {
        let (mut t, mut tt, mut w) = (Vec::new(), Vec::new(), Vec::new());
        // One warm-up of each: page cache, binary mapped.
        for i in 0..=reps {
            let a = time(dir, "true", &[]);
            let b = time(dir, "timeout", &["10", "true"]);
            let run_dir = tmp.path().join(format!("runs/{name}-{i}"));
            let c = time(
                dir,
                &bin,
                &[
                    "run",
                    "exec",
                    "-q",
                    "--run-dir",
                    run_dir.to_str().unwrap(),
                    "--",
                    "true",
                ],
            );
            if i > 0 {
                t.push(a);
                tt.push(b);
                w.push(c);
            }
        }
        let (t, tt, w) = (median(&mut t), median(&mut tt), median(&mut w));
        println!(
            "| {name} | {} | {} | {} | {:.1}x |",
            fmt(t),
            fmt(tt),
            fmt(w),
            w.as_secs_f64() / tt.as_secs_f64()
        );
    }
}

fn make_repo(dir: &Path) {
    let git = |args: &[&str]| {
        let ok = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_AUTHOR_NAME", "bench")
            .env("GIT_AUTHOR_EMAIL", "bench@example.com")
            .env("GIT_COMMITTER_NAME", "bench")
            .env("GIT_COMMITTER_EMAIL", "bench@example.com")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?} failed in {}", dir.display());
    };
    git(&["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("README"), "bench\n").unwrap();
    git(&["add", "README"]);
    git(&["commit", "-q", "-m", "first"]);
}

fn time(dir: &Path, program: &str, args: &[&str]) -> Duration {
    let start = Instant::now();
    let status = Command::new(program)
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    let took = start.elapsed();
    assert!(status.success(), "{program} {args:?} failed: {status}");
    took
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn fmt(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}
