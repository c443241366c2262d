//! A program that embeds warden-run but forgets `run_if_shim()` at the top
//! of `main`: its shim (the program started again) runs the program's own
//! `main`, which starts a run, whose shim runs `main` again... That must
//! stop at the first copy, with a message that says what to fix.
//!
//! This test is its own `main` (no test harness), so that it can be such a
//! program: with `FORGOT_SHIM_ROLE=program` it is the careless program,
//! otherwise the driver that runs it and checks what happened.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use warden_run::{ContainmentChoice, Run, RunRequest};

const ROLE: &str = "FORGOT_SHIM_ROLE";
const MARK: &str = "FORGOT_SHIM_MARK";

fn main() {
    // Deliberately no `warden_process::run_if_shim()` here.
    if std::env::var_os(ROLE).is_some_and(|r| r == "program") {
        program();
    } else {
        driver();
    }
}

/// The careless program: starts one run of `echo`, prints its verdict.
fn program() {
    let dir = std::env::var_os("FORGOT_SHIM_DIR").expect("a directory");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut request = RunRequest::exec(["sh", "-c", "echo hello"]);
        request.cwd = dir.clone().into();
        request.dir = Some(std::path::Path::new(&dir).join("run"));
        request.containment = ContainmentChoice::Subreaper;
        match Run::new(request).start().await {
            Err(e) => {
                eprintln!("refused: {e}");
                std::process::exit(3);
            }
            Ok(run) => {
                let report = run.wait().await.report;
                println!(
                    "verdict={:?} error={}",
                    report.verdict,
                    report.error.unwrap_or_default()
                );
            }
        }
    });
}

/// Live processes that carry this test's mark.
fn marked(mark: &str) -> Vec<i32> {
    let needle = format!("{MARK}={mark}");
    let me = std::process::id() as i32;
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == needle.as_bytes()))
        })
        .collect()
}

/// Stopped, or gone.
fn stopped(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit(')')
                .next()?
                .split_whitespace()
                .next()
                .map(str::to_owned)
        })
        .is_none_or(|st| st == "T" || st == "Z")
}

fn driver() {
    let dir = tempfile::tempdir().unwrap();
    let mark = format!(
        "{}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos()
    );
    let start = Instant::now();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(ROLE, "program")
        .env(MARK, &mark)
        .env("FORGOT_SHIM_DIR", dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut most = 0;
    let finished = loop {
        most = most.max(marked(&mark).len());
        // More than a few copies: it is the endless chain; stop it early.
        if child.try_wait().unwrap().is_some()
            || most > 20
            || start.elapsed() > Duration::from_secs(20)
        {
            break child.try_wait().unwrap().is_some();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Whatever happened, leave nothing behind: stop every copy until all
    // are stopped (a stopped copy cannot start another), then kill them.
    let mut quiet = 0;
    while quiet < 20 {
        let left = marked(&mark);
        if left.is_empty() {
            quiet += 1;
            continue;
        }
        quiet = 0;
        let running: Vec<i32> = left.iter().copied().filter(|p| !stopped(*p)).collect();
        let (signal, targets) = if running.is_empty() {
            ("-KILL", left)
        } else {
            ("-STOP", running)
        };
        let mut kill = Command::new("kill");
        kill.arg(signal);
        kill.args(targets.iter().map(i32::to_string));
        let _ = kill.stderr(Stdio::null()).status();
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        finished,
        "the program did not end (a chain of {most} copies)"
    );
    assert!(most <= 3, "the program started itself {most} times over");
    assert!(stdout.contains("SpawnFailed"), "{stdout}");
    assert!(stdout.contains("run_if_shim"), "{stdout}");
    assert!(
        stdout.contains("started as a warden shim but did not call"),
        "the copy must say why it refused: {stdout}"
    );
    println!("forgot_run_if_shim: ok ({most} processes at most)");
}
