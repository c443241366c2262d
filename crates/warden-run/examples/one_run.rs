use warden_run::{Agent, Run, RunRequest, Update};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    warden_run::run_if_shim(); // each run's shim is this program, started again
    let request = RunRequest::agent(Agent::Claude, "Make the failing test pass");
    tokio::runtime::Runtime::new()?.block_on(async {
        let mut run = Run::new(request).start().await?;
        while let Some(Update::Event { event, .. }) = run.next_update().await {
            println!("{:>6} ms  {}", event.t_ms, event.event.kind());
        }
        let outcome = run.wait().await; // always returns, with a verdict
        println!("{}: {}", outcome.verdict, outcome.report.reason);
        Ok(())
    })
}
