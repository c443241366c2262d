//! A session: the same task run N times, one fresh process each, until the
//! agent prints the completion signal or a run fails; `session.json`
//! holds every run and the totals.
//!
//! ```sh
//! cargo run -p warden-run --example session -- 3 sh -c 'echo "step $WARDEN_RUN_ID"'
//! ```

use warden_run::{Event, RunRequest, Session, Update};

fn main() {
    warden_run::run_if_shim();

    let mut args = std::env::args().skip(1);
    let iterations: u32 = match args.next().map(|n| n.parse()) {
        Some(Ok(n)) => n,
        _ => fail("usage: session ITERATIONS COMMAND [ARGS...]"),
    };
    let mut request = RunRequest::exec(args);
    request.session.iterations = iterations;

    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let code = runtime.block_on(async move {
        // Checked before anything starts.
        let mut session = Session::new(request)
            .start()
            .await
            .unwrap_or_else(|e| fail(e));
        // One stream for the whole session: its runs' events and the steps
        // around them.
        while let Some(update) = session.next_update().await {
            match update {
                Update::IterationStarted {
                    iteration, run_id, ..
                } => println!("iteration {iteration}: run {run_id}"),
                Update::Event { event, .. } => {
                    if let Event::Text { text } = &event.event {
                        println!("  {text}");
                    }
                }
                Update::IterationFinished { report, .. } => println!(
                    "  {} in {} ms",
                    report.verdict.map_or("unknown", |v| v.as_str()),
                    report.duration_ms
                ),
                _ => {}
            }
        }
        let outcome = session.wait().await.unwrap_or_else(|e| fail(e));
        let report = &outcome.report;
        println!(
            "session {}: {}, {} run(s), stopped by {}; report in {}",
            report.session_id,
            outcome.verdict,
            report.iterations_run,
            report.stopped_because,
            report.session_dir.join("session.json").display()
        );
        report.warden_exit_code()
    });
    std::process::exit(i32::from(code));
}

fn fail(e: impl std::fmt::Display) -> ! {
    eprintln!("error: {e}");
    std::process::exit(2);
}
