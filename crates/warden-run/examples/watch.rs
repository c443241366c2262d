//! Runs an agent (or any command) under warden's supervisor and prints
//! every event as it happens, then the verdict: warden as a library.
//!
//! ```sh
//! cargo run -p warden-run --example watch -- exec sh -c 'echo hello; sleep 1; echo bye'
//! cargo run -p warden-run --example watch -- claude "list the files here"
//! ```

use std::time::Duration;

use warden_events::{Agent, Event};
use warden_run::{Run, RunSpec};

fn main() {
    // Each run's process tree is held by a shim: this program, started
    // again. It must become the shim before anything else happens.
    warden_process::run_if_shim();

    let mut args = std::env::args().skip(1);
    let agent: Agent = args
        .next()
        .unwrap_or_else(|| "exec".into())
        .parse()
        .unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(2);
        });
    let rest: Vec<String> = args.collect();
    let mut spec = if agent == Agent::Exec {
        RunSpec::exec(&rest)
    } else {
        // The agent layer builds the CLI's headless command line.
        let request = warden_agents::AgentRequest {
            prompt: rest.join(" "),
            ..Default::default()
        };
        let inv = warden_agents::invocation(agent, &request, std::env::var_os("PATH").as_ref())
            .unwrap_or_else(|e| {
                eprintln!("{e}");
                std::process::exit(2);
            });
        let mut spec = RunSpec::exec(std::iter::once(inv.program).chain(inv.args));
        spec.agent = agent;
        spec.env = inv.env;
        spec.stdin = inv.stdin;
        spec
    };
    spec.limits.stall_timeout = Some(Duration::from_secs(120));

    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    runtime.block_on(async move {
        let mut run = match Run::new(spec).spawn().await {
            Ok(run) => run,
            Err(e) => {
                eprintln!("could not start: {e}");
                std::process::exit(2);
            }
        };
        println!("run {} in {}", run.run_id(), run.run_dir().display());
        while let Some(ev) = run.next_event().await {
            match &ev.event {
                Event::Text { text } => println!("{:>6} ms  text: {text}", ev.t_ms),
                Event::ToolStarted { name, input, .. } => {
                    println!(
                        "{:>6} ms  tool {name}: {}",
                        ev.t_ms,
                        input.as_deref().unwrap_or("")
                    )
                }
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
        std::process::exit(report.verdict.map_or(70, |v| v.exit_code()));
    });
}
