//! A batch: N runs, J at a time, one update stream, one `batch.json`. One
//! run failing never stops the others; Ctrl-C cancels them all and still
//! writes every report.
//!
//! ```sh
//! cargo run -p warden-run --example batch -- 6 2
//! ```

use warden_run::{Batch, RunRequest, Update};

fn main() {
    warden_run::run_if_shim();

    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let (runs, jobs) = match (args.next(), args.next()) {
        (Some(Ok(n)), Some(Ok(j))) => (n, j),
        _ => fail("usage: batch RUNS JOBS"),
    };
    let cwd = std::env::current_dir().unwrap_or_else(|e| fail(e));
    let mut batch = Batch::in_default_dir(&cwd, jobs);
    for n in 1..=runs {
        // The odd ones fail: the others go on regardless.
        let script = format!("echo run {n}; sleep 0.2; exit $(({n} % 2))");
        let request = RunRequest::exec(["sh", "-c", &script]);
        if let Err(e) = request.check() {
            fail(e);
        }
        batch
            .add(format!("run-{n}"), request)
            .unwrap_or_else(|e| fail(e));
    }

    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let code = runtime.block_on(async move {
        let mut running = batch.start().await.unwrap_or_else(|e| fail(e));
        let canceller = running.canceller();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                canceller.cancel();
            }
        });
        while let Some(update) = running.next_update().await {
            match update {
                Update::EntryStarted { name, .. } => println!("{name}: started"),
                Update::EntryFinished { run, .. } => {
                    // Where the others are: the handle keeps count.
                    let status = running.status();
                    println!(
                        "{}: {} in {} ms ({} running, {} queued)",
                        run.name,
                        run.verdict.map_or("not run", |v| v.as_str()),
                        run.duration_ms,
                        status.running(),
                        status.queued()
                    );
                }
                _ => {}
            }
        }
        let done = running.wait().await;
        let r = &done.report;
        println!(
            "batch {}: {}, {} succeeded, {} failed, {} cancelled",
            r.batch_id, done.verdict, r.succeeded, r.failed, r.cancelled
        );
        match &done.written {
            Ok(path) => println!("report: {}", path.display()),
            Err(e) => eprintln!("could not write batch.json: {e}"),
        }
        done.exit_code()
    });
    std::process::exit(i32::from(code));
}

fn fail(e: impl std::fmt::Display) -> ! {
    eprintln!("error: {e}");
    std::process::exit(2);
}
