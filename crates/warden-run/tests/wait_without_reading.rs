//! `RunHandle::wait` must not depend on the caller reading the live
//! events: a library user who only wants the report calls `wait()` at
//! once, and gets it as soon as the run has ended.
//!
//! This test is its own `main` (no test harness): each run's shim is this
//! program started again, so `run_if_shim()` comes first.

use std::time::{Duration, Instant};

use warden_run::{ContainmentChoice, Run, RunRequest, Verdict};

/// The run below ends in tens of milliseconds; a `wait()` that gives an
/// unread feed time to drain took 2 s more.
const BOUND: Duration = Duration::from_millis(1500);

fn main() {
    warden_process::run_if_shim();
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        // More lines than the live feed holds, so that events other than
        // lines wait for room in it when nobody reads them.
        let mut request = RunRequest::exec(["sh", "-c", "seq 1 20000"]);
        request.cwd = dir.path().to_path_buf();
        request.dir = Some(dir.path().join("run"));
        request.containment = ContainmentChoice::Subreaper;
        let run = Run::new(request).start().await.expect("the run starts");
        let started = Instant::now();
        let report = run.wait().await.report;
        let took = started.elapsed();
        println!("wait() without reading the events took {took:?}");
        assert_eq!(report.verdict, Some(Verdict::Succeeded), "{report:?}");
        assert!(report.written, "run.json is written: {report:?}");
        assert_eq!(report.exit_code, Some(0), "{report:?}");
        assert!(
            took < BOUND,
            "wait() took {took:?} without the events being read (bound {BOUND:?})"
        );
        let stdout = std::fs::read_to_string(dir.path().join("run/stdout.log")).unwrap();
        assert_eq!(stdout.lines().count(), 20000, "stdout.log has every line");
        let events = std::fs::read_to_string(dir.path().join("run/events.jsonl")).unwrap();
        assert!(
            events.contains("\"kind\":\"finished\""),
            "events.jsonl is complete: {events}"
        );
    });
    println!("ok: wait() does not depend on the events being read");
}
