//! `--json`: each event of the run as one JSON line on stdout, naming its
//! run (a session's runs share one stdout).

use warden_events::Event;
use warden_events::event::FeedLine;
use warden_run::Update;

use super::console::{self, Priority, Stream};
use super::{Reporter, github};

#[derive(Default)]
pub(crate) struct JsonLines {
    run_id: String,
}

impl Reporter for JsonLines {
    fn update(&mut self, update: &Update) {
        match update {
            Update::IterationStarted { run_id, .. } => run_id.clone_into(&mut self.run_id),
            Update::Event { event, .. } => {
                let Ok(mut line) = serde_json::to_vec(&FeedLine {
                    run_id: Some(&self.run_id),
                    stamped: event,
                }) else {
                    return;
                };
                line.push(b'\n');
                // The last event gets the reserve: a slow reader still
                // sees how the run ended.
                let priority = match event.event {
                    Event::Finished { .. } => Priority::Important,
                    _ => Priority::Droppable,
                };
                console::raw(Stream::Stdout, priority, github::json_line(line));
            }
            Update::StepStarted {
                kind,
                iteration,
                command,
                run_dir,
                ..
            } => step_line(
                None,
                "step_started",
                &serde_json::json!({
                    "kind": kind,
                    "iteration": iteration,
                    "command": command,
                    "run_dir": run_dir,
                }),
                Priority::Droppable,
            ),
            Update::StepFinished { step, .. } => step_line(
                Some(&step.run_id),
                "step_finished",
                &serde_json::json!(step),
                // How a check ended decides the session: a slow reader
                // still gets it.
                Priority::Important,
            ),
            _ => {}
        }
    }

    /// Warden's notices are for a person: on stderr, through the human
    /// view; the JSON stream carries only events.
    fn notice(&mut self, _msg: &str) {}
}

/// A check, hook or prompt command as a line of the stream, beside the
/// runs' events: `{"run_id": ..., "schema_version": 1, "kind":
/// "step_started" | "step_finished", "step": {...}}`, `step` being what
/// `session.json` lists for it (at its start: its kind, iteration,
/// command and run directory).
fn step_line(run_id: Option<&str>, kind: &str, step: &serde_json::Value, priority: Priority) {
    let mut v = serde_json::json!({
        "schema_version": warden_events::SchemaVersion,
        "kind": kind,
        "step": step,
    });
    if let (Some(id), Some(o)) = (run_id, v.as_object_mut()) {
        o.insert("run_id".into(), id.into());
    }
    let Ok(mut line) = serde_json::to_vec(&v) else {
        return;
    };
    line.push(b'\n');
    console::raw(Stream::Stdout, priority, github::json_line(line));
}
