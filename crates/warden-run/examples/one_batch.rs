use warden_run::{Agent, Batch, RunRequest, Update};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    warden_run::run_if_shim(); // each run's shim is this program, started again
    let mut batch = Batch::in_default_dir(&std::env::current_dir()?, 2); // 2 at a time
    for task in ["Fix issue 1", "Fix issue 2", "Fix issue 3"] {
        batch.add(task, RunRequest::agent(Agent::Claude, task))?;
    }
    tokio::runtime::Runtime::new()?.block_on(async {
        let mut running = batch.start().await?;
        while let Some(update) = running.next_update().await {
            if let Update::EntryFinished { run, .. } = update {
                println!("{}: {:?}", run.name, run.verdict);
            }
        }
        let outcome = running.wait().await;
        println!(
            "{}: {} succeeded",
            outcome.verdict, outcome.report.succeeded
        );
        Ok(())
    })
}
