//! Container start-up benchmark: `cargo bench -p agent-warden --bench containers`.
//!
//! For each engine that answers (Docker, Podman), prints the wall time of
//! `warden run exec --sandbox ENGINE --image IMAGE -- true` beside the
//! engine's own `ENGINE run --rm -i --init IMAGE true`, the command line
//! warden starts, measured in turn in the same run so that the machine's
//! drift hits both alike. The image is `WARDEN_BENCH_IMAGE`, else
//! `WARDEN_CI_IMAGE`, else `localhost/warden-ci-min:bookworm` (what
//! `.ci/containers up DIR` builds). Set `WARDEN_BENCH_QUICK=1` for fewer
//! repetitions.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const WARDEN: &str = env!("CARGO_BIN_EXE_warden");

mod measure;

fn main() {
    let quick = std::env::var_os("WARDEN_BENCH_QUICK").is_some();
    let reps = if quick { 5 } else { 20 };
    let image = std::env::var("WARDEN_BENCH_IMAGE")
        .or_else(|_| std::env::var("WARDEN_CI_IMAGE"))
        .unwrap_or_else(|_| "localhost/warden-ci-min:bookworm".into());
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let machine = measure::Machine::start();
    println!("# container start-up ({reps} runs of each, in turn; wall time min / median)\n");
    println!("image: {image}\n");
    println!(
        "| engine | `ENGINE run --rm -i --init IMAGE true` | `warden run exec --sandbox ENGINE --image IMAGE -- true` | warden adds | ratio |"
    );
    println!("|---|---|---|---|---|");
    for engine in ["docker", "podman"] {
        if let Some(why) = unusable(engine, &image) {
            println!("| {engine} | skipped: {why} | | | |");
            continue;
        }
        let (mut bare, mut warden) = (measure::Samples::new(), measure::Samples::new());
        // One warm-up of each: page cache, the image's layers mounted once.
        for i in 0..=reps {
            let a = time(
                &work,
                engine,
                &["run", "--rm", "-i", "--init", &image, "true"],
            );
            let run_dir = tmp.path().join(format!("runs/{engine}-{i}"));
            let b = time(
                &work,
                WARDEN,
                &[
                    "run",
                    "exec",
                    "-q",
                    "--run-dir",
                    run_dir.to_str().unwrap(),
                    "--sandbox",
                    engine,
                    "--image",
                    &image,
                    "--",
                    "true",
                ],
            );
            if i > 0 {
                bare.push(a);
                warden.push(b);
            }
        }
        let (a, b) = (bare.median(), warden.median());
        println!(
            "| {engine} | {} | {} | {:+.1} ms (median) | {} |",
            bare.ms(),
            warden.ms(),
            (b.as_secs_f64() - a.as_secs_f64()) * 1e3,
            measure::ratio(&warden, &bare)
        );
    }
    machine.end();
}

/// Why `engine` cannot run `image` here, or `None` when it can.
fn unusable(engine: &str, image: &str) -> Option<String> {
    match Command::new(engine)
        .args(["image", "inspect", image])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => None,
        Ok(_) => Some(format!(
            "no image {image} (run `.ci/containers up DIR`, or set WARDEN_BENCH_IMAGE)"
        )),
        Err(e) => Some(format!("no `{engine}` client ({e})")),
    }
}

fn time(dir: &Path, program: &str, args: &[&str]) -> Duration {
    let start = Instant::now();
    let status = Command::new(program)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    let took = start.elapsed();
    assert!(status.success(), "{program} {args:?} failed: {status}");
    took
}
