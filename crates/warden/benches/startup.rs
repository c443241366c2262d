//! Start-up benchmark: `cargo bench -p agent-warden --bench startup`.
//!
//! Prints the wall time of `warden run exec -- true` beside `true` and
//! `timeout 10 true` (a small supervisor of the same kind: fork, exec,
//! wait), measured in turn in the same run so the machine's drift hits
//! all three alike, once in a directory outside any git work tree and
//! once inside one (a run there reads the base commit at its start and
//! the commits made at its end). Also prints the size of warden and of
//! the executable each run starts as its shim (`warden-shim` beside
//! warden, when it is of the same build), and the shim's unshared memory
//! (Private_Clean + Private_Dirty of /proc/PID/smaps_rollup, during a run of
//! `sleep`, with a second such run alongside) beside that of
//! `timeout 10 sleep` (the same kind of parent,
//! waiting on the same child). Set `WARDEN_BENCH_QUICK=1` for fewer
//! repetitions, `WARDEN_BENCH_BIN=PATH` to time another warden binary
//! (an older build, to compare), `WARDEN_BENCH_BASE=PATH` to time another
//! build in the same loop, beside this one. A third timing row keeps the run
//! directories on tmpfs (/dev/shm), where there is one. Every time is
//! printed as min / median, each against the same figure of `timeout 10
//! true` measured in the same loop, with the machine's load before and
//! after.

mod measure;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use measure::{Machine, Samples, ratio};

const WARDEN: &str = env!("CARGO_BIN_EXE_warden");

fn main() {
    let bin = std::env::var("WARDEN_BENCH_BIN").unwrap_or_else(|_| WARDEN.to_string());
    let quick = std::env::var_os("WARDEN_BENCH_QUICK").is_some();
    let reps = if quick { 10 } else { 50 };
    let machine = Machine::start();
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

    // Another warden build timed in the same loop, for a before/after
    // measured in the same minutes.
    let base = std::env::var("WARDEN_BENCH_BASE").ok();
    let mib = |p: &Path| std::fs::metadata(p).map_or(0.0, |m| m.len() as f64 / (1024.0 * 1024.0));
    let shim = Path::new(&bin).with_file_name("warden-shim");
    println!("# warden start-up ({reps} runs of each, in turn; wall time, min / median)\n");
    println!("warden: {bin} ({:.1} MiB)", mib(Path::new(&bin)));
    if shim.is_file() {
        println!("shim: {} ({:.2} MiB)\n", shim.display(), mib(&shim));
    } else {
        println!("shim: warden itself\n");
    }
    if let Some(base) = &base {
        println!("base (same loop): {base}\n");
        println!(
            "| where | `true` | `timeout 10 true` | `warden run exec -- true` | ratio to `timeout 10 true` | base | base's ratio | ratio to base |"
        );
        println!("|---|---|---|---|---|---|---|---|");
    } else {
        println!(
            "| where | `true` | `timeout 10 true` | `warden run exec -- true` | ratio to `timeout 10 true` |"
        );
        println!("|---|---|---|---|---|");
    }
    // Each run creates its run directory and five files in it: on some
    // file systems creating a file costs far more than the rest of a run,
    // so a third row keeps the run directories in memory (tmpfs), to tell
    // warden's own share from the file system's.
    let shm = tempfile::tempdir_in("/dev/shm").ok();
    let runs_on_disk = tmp.path().join("runs");
    let mut rows = vec![
        ("outside git", &outside, runs_on_disk.clone()),
        ("inside git", &inside, runs_on_disk.clone()),
    ];
    if let Some(shm) = &shm {
        rows.push((
            "outside git, run dirs on tmpfs",
            &outside,
            shm.path().to_path_buf(),
        ));
    }
    for (name, dir, runs) in rows {
        let (mut t, mut tt, mut w, mut wb) = (
            Samples::new(),
            Samples::new(),
            Samples::new(),
            Samples::new(),
        );
        let run = |bin: &str, i: usize, tag: &str| {
            let run_dir = runs.join(format!("{name}-{tag}{i}"));
            time(
                dir,
                bin,
                &[
                    "run",
                    "exec",
                    "-q",
                    "--run-dir",
                    run_dir.to_str().unwrap(),
                    "--",
                    "true",
                ],
            )
        };
        // One warm-up of each: page cache, binary mapped.
        for i in 0..=reps {
            let a = time(dir, "true", &[]);
            let b = time(dir, "timeout", &["10", "true"]);
            let c = run(&bin, i, "");
            let d = base.as_deref().map(|base| run(base, i, "base-"));
            if i > 0 {
                t.push(a);
                tt.push(b);
                w.push(c);
                if let Some(d) = d {
                    wb.push(d);
                }
            }
        }
        let based = if wb.is_empty() {
            String::new()
        } else {
            format!(" {} | {} | {} |", wb.ms(), ratio(&wb, &tt), ratio(&w, &wb))
        };
        println!(
            "| {name} | {} | {} | {} | {} |{based}",
            t.ms(),
            tt.ms(),
            w.ms(),
            ratio(&w, &tt)
        );
    }

    let mem_reps = if quick { 3 } else { 9 };
    let runs = tmp.path().join("runs");
    let shim_kib = |bin: &str, tag: &str| {
        unshared_kib(
            &outside,
            bin,
            &|i| {
                let d = runs.join(format!("memory-{tag}{i}"));
                [
                    "run",
                    "exec",
                    "-q",
                    "--run-dir",
                    d.to_str().unwrap(),
                    "--",
                    "sleep",
                    "1",
                ]
                .map(String::from)
                .to_vec()
            },
            Some("__warden-shim"),
            mem_reps,
        )
    };
    let shim = shim_kib(&bin, "");
    let base_shim = base.as_deref().map(|b| shim_kib(b, "base-"));
    let timeout = unshared_kib(
        &outside,
        "timeout",
        &|_| ["10", "sleep", "1"].map(String::from).to_vec(),
        None,
        mem_reps,
    );
    println!(
        "\nunshared memory of the parent of `sleep 1` (Private_Clean + Private_Dirty, median of \
         {mem_reps}): warden's shim {shim} KiB, `timeout 10 sleep 1` {timeout} KiB ({:.1}x)",
        shim as f64 / timeout as f64
    );
    if let Some(b) = base_shim {
        println!(
            "base's shim {b} KiB ({:.1}x `timeout`'s)",
            b as f64 / timeout as f64
        );
    }
    machine.end();
}

/// The unshared memory (KiB) of the parent of `sleep` in a run of
/// `program args(i)`, beside another such run: `program` itself, or its
/// child whose command line holds `shim`. The median of `reps` runs.
fn unshared_kib(
    dir: &Path,
    program: &str,
    args: &dyn Fn(usize) -> Vec<String>,
    shim: Option<&str>,
    reps: usize,
) -> u64 {
    let mut all = Vec::new();
    for i in 0..reps {
        // A second one alongside: the pages of code that two such
        // processes share are not the measured one's own, as in any batch
        // (alone, every page of code it touched counts as private).
        let mut companion = Command::new(program)
            .args(args(reps + i))
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut child = Command::new(program)
            .args(args(i))
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let top = child.id() as i32;
        let until = Instant::now() + Duration::from_secs(10);
        let mut seen = None;
        while Instant::now() < until {
            // The parent of `sleep`, once `sleep` runs and the parent has
            // settled (its threads started).
            let parent = match shim {
                None => Some(top),
                Some(name) => children(top)
                    .into_iter()
                    .find(|&p| cmdline(p).contains(name)),
            };
            if let Some(p) = parent
                && children(p).iter().any(|&c| cmdline(c).starts_with("sleep"))
            {
                std::thread::sleep(Duration::from_millis(200));
                seen = private_kib(p);
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = child.wait();
        let _ = companion.wait();
        all.push(seen.expect("never saw the parent of `sleep` running"));
    }
    all.sort();
    all[all.len() / 2]
}

fn children(pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// Private_Clean + Private_Dirty, in KiB.
fn private_kib(pid: i32) -> Option<u64> {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let field = |name: &str| {
        rollup
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    Some(field("Private_Clean:")? + field("Private_Dirty:")?)
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
