//! One run of an agent (or any command) under warden's supervisor: every
//! event as it happens, then the verdict.
//!
//! ```sh
//! cargo run -p warden-run --example agent_run -- exec sh -c 'echo hello; sleep 1; echo bye'
//! cargo run -p warden-run --example agent_run -- claude "list the files here"
//! ```

use std::time::Duration;

use warden_run::{Agent, Event, Run, RunRequest};

fn main() {
    // Each run's process tree is held by a shim: this program, started
    // again. It must become the shim before anything else happens.
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
    // Everything that can be checked before the run starts: a missing CLI
    // says how to install it.
    if let Err(e) = request.check() {
        fail(e);
    }

    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let code = runtime.block_on(async move {
        let spec = request
            .spec(&request.iteration_context().await)
            .unwrap_or_else(|e| fail(e));
        let mut run = Run::new(spec).spawn().await.unwrap_or_else(|e| fail(e));
        println!("run {} in {}", run.run_id(), run.run_dir().display());
        while let Some(ev) = run.next_event().await {
            match &ev.event {
                Event::Text { text } => println!("{:>6} ms  text: {text}", ev.t_ms),
                Event::ToolStarted { name, input, .. } => println!(
                    "{:>6} ms  tool {name}: {}",
                    ev.t_ms,
                    input.as_deref().unwrap_or("")
                ),
                other => println!("{:>6} ms  {}", ev.t_ms, other.kind()),
            }
        }
        // Always returns, with a verdict; run.json is written.
        let report = run.wait().await;
        println!(
            "{} in {} ms: {}",
            report.verdict.map_or("unknown", |v| v.as_str()),
            report.duration_ms,
            report.reason
        );
        report.warden_exit_code()
    });
    std::process::exit(i32::from(code));
}

fn fail(e: impl std::fmt::Display) -> ! {
    eprintln!("error: {e}");
    std::process::exit(2);
}
