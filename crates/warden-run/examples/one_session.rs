use warden_run::{Agent, RunRequest, Session, Update};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    warden_run::run_if_shim(); // each run's shim is this program, started again
    let mut request = RunRequest::agent(Agent::Claude, "Do the next step of TODO.md");
    request.session.iterations = 5; // or until the agent says it is done
    tokio::runtime::Runtime::new()?.block_on(async {
        let mut session = Session::new(request).start().await?;
        while let Some(update) = session.next_update().await {
            if let Update::IterationFinished {
                iteration, report, ..
            } = update
            {
                println!("iteration {iteration}: {}", report.reason);
            }
        }
        let outcome = session.wait().await?;
        println!(
            "{}: stopped by {}",
            outcome.verdict, outcome.report.stopped_because
        );
        Ok(())
    })
}
