//! Where the supervisor's stamped events go: the run directory's
//! `events.jsonl`, the live feed, the run's spans, the status snapshot's
//! open tool calls, and the budget watch. Each is a [`Sink`]; the loop
//! hands every event to all of them ([`Sinks::deliver`]) and owns none of
//! their state. A sink that needs the loop to do something (write an
//! event of its own, record that the output could not be kept) says so in
//! the [`Ask`] it returns.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use warden_events::event::Stamped;
use warden_events::{Event, Stream, Summary};

use super::status::StatusFeed;
use crate::artifacts::RunDir;
use crate::budget::{BudgetLine, BudgetPool, BudgetScope, Spent, Watch};
use crate::live::LiveFeed;
use crate::telemetry::RunSpans;

/// A consumer of the run's stamped events.
pub(super) trait Sink {
    /// The next event of the run, in order.
    fn event(&mut self, event: &Stamped) -> Ask;

    /// The same for the sink the event is handed to last, which may keep
    /// it.
    fn keep(&mut self, event: Stamped) -> Ask {
        self.event(&event)
    }

    /// What the agent's decoders have learned by now (after a chunk of
    /// stdout; borrowed from the decoder); `at_work`: the agent has not
    /// said it is done and nobody is ending the run.
    fn learned(&mut self, summary: &Summary, at_work: bool) -> Ask {
        let _ = (summary, at_work);
        Ask::default()
    }
}

/// What a sink asks the loop to do.
#[must_use]
#[derive(Debug, Default)]
pub(super) struct Ask {
    /// Events to write in turn (a budget's warnings).
    pub say: Vec<Event>,
    /// The run's output could not be kept: why (`Report::output_lost`).
    pub lost: Option<String>,
}

impl Ask {
    fn lost(why: String) -> Self {
        Ask {
            say: Vec::new(),
            lost: Some(why),
        }
    }

    /// Both asks: the first failure to keep the output is the one kept.
    fn and(mut self, other: Ask) -> Self {
        self.say.extend(other.say);
        if self.lost.is_none() {
            self.lost = other.lost;
        }
        self
    }
}

/// Every sink of a run.
pub(super) struct Sinks {
    pub files: RunFiles,
    pub spans: Option<RunSpans>,
    pub status: StatusFeed,
    pub budget: BudgetWatch,
    /// Last: it keeps the event.
    pub live: LiveFeed,
}

impl Sinks {
    /// Hands `event` to every sink.
    pub(super) fn deliver(&mut self, event: Stamped) -> Ask {
        self.files
            .event(&event)
            .and(self.spans.event(&event))
            .and(self.status.event(&event))
            .and(self.budget.event(&event))
            .and(self.live.keep(event))
    }

    /// Tells every sink what the decoders have learned.
    pub(super) fn learned(&mut self, summary: &Summary, at_work: bool) -> Ask {
        self.files
            .learned(summary, at_work)
            .and(self.spans.learned(summary, at_work))
            .and(self.status.learned(summary, at_work))
            .and(self.budget.learned(summary, at_work))
            .and(self.live.learned(summary, at_work))
    }
}

impl<S: Sink> Sink for Option<S> {
    fn event(&mut self, event: &Stamped) -> Ask {
        self.as_mut().map(|s| s.event(event)).unwrap_or_default()
    }

    fn learned(&mut self, summary: &Summary, at_work: bool) -> Ask {
        self.as_mut()
            .map(|s| s.learned(summary, at_work))
            .unwrap_or_default()
    }
}

impl Sink for LiveFeed {
    fn event(&mut self, event: &Stamped) -> Ask {
        self.deliver(event.clone());
        Ask::default()
    }

    fn keep(&mut self, event: Stamped) -> Ask {
        self.deliver(event);
        Ask::default()
    }
}

impl Sink for RunSpans {
    fn event(&mut self, event: &Stamped) -> Ask {
        self.observe(event);
        Ask::default()
    }
}

/// The status snapshot folds every event: the tool calls still open.
impl Sink for StatusFeed {
    fn event(&mut self, event: &Stamped) -> Ask {
        self.observe(event);
        Ask::default()
    }
}

/// The run directory's files: the logs the output is teed to, and
/// `events.jsonl`, where consecutive plain lines of an `exec` run are
/// written as one `lines` event that points at their bytes in the log.
pub(super) struct RunFiles {
    pub dir: RunDir,
    /// Plain lines not yet written to `events.jsonl`.
    pending: Option<PendingLines>,
    /// Events written, by kind (plain lines as the events they stand for).
    counts: BTreeMap<&'static str, u64>,
    /// Whether a write to `stdout.log` / `stderr.log` failed: from then on
    /// that stream's lines are copied into `events.jsonl` again, since
    /// the log no longer holds them.
    tee_failed: [bool; 2],
}

/// Consecutive plain lines of one stream, to be written as one `lines`
/// event that points at their bytes in the log.
struct PendingLines {
    stream: Stream,
    t_ms: u64,
    at: Range<u64>,
    lines: u64,
}

impl Sink for RunFiles {
    fn event(&mut self, event: &Stamped) -> Ask {
        *self.counts.entry(event.event.kind()).or_default() += 1;
        self.write_lines().and(self.write(event))
    }
}

impl RunFiles {
    pub(super) fn new(dir: RunDir) -> Self {
        Self {
            dir,
            pending: None,
            counts: BTreeMap::new(),
            tee_failed: [false; 2],
        }
    }

    /// Events written so far, by kind.
    pub(super) fn counts(&self) -> BTreeMap<String, u64> {
        self.counts
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect()
    }

    /// Whether `stream`'s log could not be written.
    pub(super) fn tee_failed(&self, stream: Stream) -> bool {
        self.tee_failed[stream as usize]
    }

    /// Writes a chunk of `stream` to its log, byte for byte.
    pub(super) fn tee(&mut self, stream: Stream, chunk: &[u8]) -> Ask {
        let log = match stream {
            Stream::Stdout => &mut self.dir.stdout,
            Stream::Stderr => &mut self.dir.stderr,
        };
        match std::io::Write::write_all(log, chunk) {
            Ok(()) => Ask::default(),
            Err(e) => {
                self.tee_failed[stream as usize] = true;
                Ask::lost(format!("could not write {}.log: {e}", stream.as_str()))
            }
        }
    }

    fn write(&mut self, event: &Stamped) -> Ask {
        match self.dir.event(event) {
            Ok(()) => Ask::default(),
            Err(e) => Ask::lost(format!("could not write events.jsonl: {e}")),
        }
    }

    /// Writes what is buffered to `events.jsonl`.
    pub(super) fn flush(&mut self) -> Ask {
        let ask = self.write_lines();
        match self.dir.flush_events() {
            Ok(()) => ask,
            Err(e) => ask.and(Ask::lost(format!("could not write events.jsonl: {e}"))),
        }
    }

    /// Adds `lines` plain lines at `at` (read at `t_ms`) to the pending
    /// `lines` event, or starts a new one where they do not follow it. A
    /// blank line adds none but keeps the range whole.
    pub(super) fn add_lines(
        &mut self,
        stream: Stream,
        at: Range<u64>,
        lines: u64,
        t_ms: u64,
    ) -> Ask {
        if let Some(p) = &mut self.pending
            && p.stream == stream
            && p.at.end == at.start
        {
            p.at.end = at.end;
            p.lines += lines;
            return Ask::default();
        }
        if lines == 0 {
            return Ask::default();
        }
        let ask = self.write_lines();
        self.pending = Some(PendingLines {
            stream,
            t_ms,
            at,
            lines,
        });
        ask
    }

    /// Writes the pending `lines` event, if any, and counts its lines as
    /// the `text` or `stderr` events they stand for.
    fn write_lines(&mut self) -> Ask {
        let Some(p) = self.pending.take() else {
            return Ask::default();
        };
        let kind = match p.stream {
            Stream::Stdout => "text",
            Stream::Stderr => "stderr",
        };
        *self.counts.entry(kind).or_default() += p.lines;
        self.write(&Stamped {
            schema_version: warden_events::SchemaVersion,
            t_ms: p.t_ms,
            event: Event::Lines {
                stream: p.stream,
                offset: p.at.start,
                bytes: p.at.end - p.at.start,
                lines: p.lines,
            },
        })
    }
}

/// The budgets the run enforces (its own and those it shares), looked at
/// whenever the decoder learned something: a warning for each budget 80%
/// spent, and the first one exceeded is kept (the loop ends the run while
/// the agent is at work).
pub(super) struct BudgetWatch {
    watch: Watch,
    /// A batch's budget held with the runs running beside this one.
    pool: Option<Arc<BudgetPool>>,
    run_id: String,
    /// The first budget exceeded, as it stood then.
    hit: Option<BudgetLine>,
    /// What the run had spent at the last look.
    seen: Option<Spent>,
}

impl Sink for BudgetWatch {
    fn event(&mut self, _: &Stamped) -> Ask {
        Ask::default()
    }

    fn learned(&mut self, summary: &Summary, at_work: bool) -> Ask {
        if self.watch.is_empty() {
            return Ask::default();
        }
        let mine = Spent::of_summary(summary);
        let mine_changed = self.seen.replace(mine) != Some(mine);
        if let Some(pool) = &self.pool {
            pool.publish(&self.run_id, mine);
            // Another run's spending ends only a run still at work (as
            // when it wakes this one): a line from a run that is done
            // (the agent's last words while it exits) must not turn it
            // `budget_exceeded` for what the others spent. Its own new
            // spending is judged against everything, whatever the phase.
            if mine_changed || at_work {
                self.watch.others_spent(&pool.others(&self.run_id));
            }
        }
        let found = self.watch.check(&mine);
        let mut ask = Ask::default();
        for w in found.warnings {
            // A batch's budget held with the runs beside this one: one of
            // them may have warned of it already.
            if w.scope == BudgetScope::Batch
                && let Some(pool) = &self.pool
                && !pool.first_warning(w.budget)
            {
                continue;
            }
            ask.say.push(Event::BudgetWarning {
                scope: w.scope,
                budget: w.budget,
                limit: w.limit,
                reached: w.reached,
            });
        }
        if self.hit.is_none() {
            self.hit = found.exceeded;
        }
        ask
    }
}

impl BudgetWatch {
    pub(super) fn new(watch: Watch, pool: Option<Arc<BudgetPool>>, run_id: String) -> Self {
        Self {
            watch,
            pool,
            run_id,
            hit: None,
            seen: None,
        }
    }

    /// The first budget exceeded, as it stood then.
    pub(super) fn hit(&self) -> Option<&BudgetLine> {
        self.hit.as_ref()
    }

    /// Woken when a run beside this one spends against the batch's
    /// budget.
    pub(super) fn subscribe(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.pool.as_ref().map(|p| p.subscribe())
    }

    /// Every budget with what was reached by now (`spent` by this run):
    /// for a batch's budget held with the runs beside this one, where they
    /// have got to too.
    pub(super) fn lines(&self, spent: &Spent) -> Vec<BudgetLine> {
        match &self.pool {
            Some(pool) => {
                let mut watch = self.watch.clone();
                watch.others_spent(&pool.others(&self.run_id));
                watch.lines(spent)
            }
            None => self.watch.lines(spent),
        }
    }

    /// The budget exceeded, with what was reached by the end of the run
    /// (the agent may report more while it is being stopped).
    pub(super) fn exceeded(&self, spent: &Spent) -> Option<BudgetLine> {
        let hit = self.hit?;
        let now = self
            .lines(spent)
            .into_iter()
            .find(|l| l.scope == hit.scope && l.budget == hit.budget);
        Some(now.unwrap_or(hit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamped(t_ms: u64, event: Event) -> Stamped {
        Stamped {
            schema_version: warden_events::SchemaVersion,
            t_ms,
            event,
        }
    }

    #[test]
    fn plain_lines_that_follow_each_other_are_one_lines_event_counted_as_text() {
        let tmp = tempfile::tempdir().expect("a temporary directory");
        let mut files = RunFiles::new(RunDir::create(&tmp.path().join("run")).expect("a run dir"));
        assert!(files.add_lines(Stream::Stdout, 0..6, 1, 1).lost.is_none());
        assert!(files.add_lines(Stream::Stdout, 6..7, 0, 2).lost.is_none());
        assert!(files.add_lines(Stream::Stdout, 7..13, 1, 3).lost.is_none());
        // Another stream breaks the range; an event written comes after it.
        assert!(files.add_lines(Stream::Stderr, 0..4, 1, 4).lost.is_none());
        let ask = files.event(&stamped(5, Event::CompletionSignal));
        assert!(ask.lost.is_none() && ask.say.is_empty());
        assert!(files.flush().lost.is_none());
        let counts = files.counts();
        assert_eq!(counts.get("text"), Some(&2));
        assert_eq!(counts.get("stderr"), Some(&1));
        assert_eq!(counts.get("completion_signal"), Some(&1));
        let text =
            std::fs::read_to_string(files.dir.path().join("events.jsonl")).expect("events.jsonl");
        let events: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("an event"))
            .collect();
        assert_eq!(events.len(), 3, "{events:?}");
        assert_eq!(
            (
                &events[0]["kind"],
                &events[0]["offset"],
                &events[0]["bytes"]
            ),
            (&"lines".into(), &0.into(), &13.into())
        );
        assert_eq!(events[0]["lines"], 2);
        assert_eq!(events[1]["stream"], "stderr");
        assert_eq!(events[2]["kind"], "completion_signal");
    }

    #[test]
    fn the_first_failure_to_keep_the_output_is_the_one_asked_about() {
        let ask = Ask::default()
            .and(Ask::lost("first".into()))
            .and(Ask::lost("second".into()));
        assert_eq!(ask.lost.as_deref(), Some("first"));
    }
}
