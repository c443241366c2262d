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
            _ => {}
        }
    }

    /// Warden's notices are for a person: on stderr, through the human
    /// view; the JSON stream carries only events.
    fn notice(&mut self, _msg: &str) {}
}
