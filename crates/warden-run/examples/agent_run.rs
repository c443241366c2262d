//! One run of an agent (or any command) under warden's supervisor: every
//! event as it happens, then the verdict.
//!
//! ```sh
//! cargo run -p warden-run --example agent_run -- exec sh -c 'echo hello; sleep 1; echo bye'
//! cargo run -p warden-run --example agent_run -- claude "list the files here"
//! ```

use std::time::Duration;

use warden_run::{Agent, Event, Run, RunRequest, Update};

fn main() {
    // Each run's process tree is held by a shim: this program, started
    // again. It must become the shim before anything else happens (before
    // a runtime starts its threads).
    warden_run::run_if_shim();

    let mut args = std::env::args().skip(1);
    let agent: Agent = match args.next().unwrap_or_else(|| "exec".into()).parse() {
        Ok(a) => a,
        Err(e) => fail(e),
    };
    let rest: Vec<String> = args.collect();
    let mut request = if agent == Agent::Exec {
        RunRequest::exec(rest)
    } else {
        RunRequest::agent(agent, rest.join(" "))
    };
    request.limits.stall_timeout = Some(Duration::from_secs(120));

    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let code = runtime.block_on(async move {
        // Checked before anything starts: a missing CLI says how to
        // install it.
        let mut run = Run::new(request).start().await.unwrap_or_else(|e| fail(e));
        println!("run {} in {}", run.run_id(), run.run_dir().display());
        while let Some(Update::Event { event, .. }) = run.next_update().await {
            match &event.event {
                Event::Text { text } => println!("{:>6} ms  text: {text}", event.t_ms),
                Event::ToolStarted { name, input, .. } => println!(
                    "{:>6} ms  tool {name}: {}",
                    event.t_ms,
                    input.as_deref().unwrap_or("")
                ),
                other => println!("{:>6} ms  {}", event.t_ms, other.kind()),
            }
        }
        // Always returns, with a verdict; run.json is written.
        let outcome = run.wait().await;
        println!(
            "{} in {} ms: {}",
            outcome.verdict, outcome.report.duration_ms, outcome.report.reason
        );
        outcome.report.warden_exit_code()
    });
    std::process::exit(i32::from(code));
}

fn fail(e: impl std::fmt::Display) -> ! {
    eprintln!("error: {e}");
    std::process::exit(2);
}
