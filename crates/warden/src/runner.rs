//! Running what a request describes: one run, or a session of runs, with its
//! view and the signal handling.

use std::sync::{Arc, Mutex};

use warden_events::Agent;
use warden_run::session::{SessionControl, SessionEvent, run_session};
use warden_run::{Run, RunRequest, RunSpec};

use crate::cli::usage;
use crate::render::Renderer;
use crate::signals::Signals;

/// The end of a session: its lines get the console queue's reserve, so a
/// slow reader still sees how it ended.
macro_rules! important {
    ($($arg:tt)*) => {
        crate::render::console::important(&format!($($arg)*))
    };
}

/// What a signal to warden stops.
#[derive(Clone)]
enum Stopper {
    Run(warden_run::Canceller),
    Session(SessionControl),
}

impl Stopper {
    fn cancel(&self, again: bool) {
        match (self, again) {
            (Stopper::Run(c), false) => c.cancel(),
            (Stopper::Run(c), true) => c.kill(),
            (Stopper::Session(s), _) => s.cancel(),
        }
    }
}

/// Where the signal watcher says what it does: through the view, so a
/// live status line is not broken by a stray line.
type Notify = Arc<dyn Fn(&str) + Send + Sync>;

/// Acts on every signal to warden: the first cancels, the next kills. A
/// signal that came before the watch began (while the run was being set
/// up) is acted on at once.
fn watch_signals(
    mut signals: Signals,
    stopper: Stopper,
    notify: Notify,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut acted = 0;
        loop {
            let now = signals.received();
            while acted < now.count {
                acted += 1;
                let name = now.last;
                if acted == 1 {
                    notify(&format!(
                        "{name}: cancelling the run (send it again to kill at once)"
                    ));
                } else {
                    notify(&format!("{name} again: killing the run now"));
                }
                stopper.cancel(acted > 1);
            }
            if signals.changed().await.is_none() {
                return;
            }
        }
    })
}

pub(crate) async fn run_once(
    spec: RunSpec,
    agent: Agent,
    resolved: &crate::settings::Resolved,
    signals: Signals,
) -> u8 {
    let mut handle = match Run::new(spec).spawn().await {
        Ok(h) => h,
        Err(e) if e.exit_code() != 2 => {
            eprintln!("warden: error: {e}");
            return e.exit_code();
        }
        Err(e) => return usage(e),
    };
    let renderer = Renderer::new(resolved, agent, handle.run_dir(), handle.run_id());
    renderer.started_note(&resolved.limits);
    let ticker = renderer.start_ticker();
    let view = renderer.clone();
    let signals = watch_signals(
        signals,
        Stopper::Run(handle.canceller()),
        Arc::new(move |m| view.notice(m)),
    );
    while let Some(ev) = handle.next_event().await {
        renderer.event(&ev);
    }
    let report = handle.wait().await;
    signals.abort();
    ticker.abort();
    renderer.finished(&report);
    report.warden_exit_code()
}

pub(crate) async fn run_session_cli(
    request: RunRequest,
    resolved: crate::settings::Resolved,
    signals: Signals,
) -> u8 {
    let opts = request.session_options();
    let agent = request.agent;
    let control = SessionControl::default();
    let current: Arc<Mutex<Option<Renderer>>> = Arc::default();
    let view = current.clone();
    let signals = watch_signals(
        signals,
        Stopper::Session(control.clone()),
        Arc::new(move |m| match view.lock().expect("lock").as_ref() {
            Some(r) => r.notice(m),
            None => eprintln!("warden: {m}"),
        }),
    );
    let mut renderer: Option<(Renderer, tokio::task::JoinHandle<()>)> = None;
    let quiet = resolved.quiet;
    let iterations = opts.iterations;
    let result = run_session(
        opts,
        control,
        |ctx| request.spec(ctx).map_err(|e| e.to_string()),
        |ev| match ev {
            SessionEvent::Worktree(wt) if !quiet => {
                eprintln!(
                    "warden: working in a new worktree {} on branch {}",
                    wt.path.display(),
                    wt.branch
                );
            }
            SessionEvent::IterationStarted {
                iteration,
                run_dir,
                run_id,
            } => {
                if !quiet {
                    eprintln!("warden: iteration {iteration}/{iterations}");
                }
                let r = Renderer::new(&resolved, agent, run_dir, run_id);
                r.set_iteration(iteration, iterations);
                r.started_note(&resolved.limits);
                let ticker = r.start_ticker();
                *current.lock().expect("lock") = Some(r.clone());
                renderer = Some((r, ticker));
            }
            SessionEvent::Event(e) => {
                if let Some((r, _)) = renderer.as_ref() {
                    r.event(e);
                }
            }
            SessionEvent::IterationFinished { report, .. } => {
                if let Some((r, ticker)) = renderer.take() {
                    ticker.abort();
                    *current.lock().expect("lock") = None;
                    r.finished(report);
                }
            }
            // Quiet, or a kind of session event this view does not know:
            // nothing to show.
            _ => {}
        },
    )
    .await;
    signals.abort();
    let report = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("warden: error: {e}");
            return e.exit_code();
        }
    };
    let verdict = report.verdict.map_or("none", |v| v.as_str());
    important!(
        "warden: session {}: {verdict} after {} of {} iteration(s), stopped by {}; {} commit(s); tokens {} in / {} out{}",
        report.session_id,
        report.iterations_run,
        report.iterations_requested,
        report.stopped_because.replace('_', " "),
        report.commits.len(),
        report.tokens.input,
        report.tokens.output,
        report
            .cost_usd
            .map(|c| format!(", ${c:.4}"))
            .unwrap_or_default()
    );
    if let Some(wt) = &report.worktree {
        if wt.removed {
            important!(
                "warden: the worktree was clean and is removed; branch {} keeps the commits",
                wt.branch
            );
        } else {
            important!(
                "warden: worktree kept at {}{} (branch {})",
                wt.path.display(),
                if wt.dirty {
                    ", with uncommitted changes"
                } else {
                    ""
                },
                wt.branch
            );
        }
    }
    if let Some(e) = &report.error {
        important!("warden: error: {e}");
    }
    if report.written {
        important!(
            "warden: session report: {}",
            report.session_dir.join("session.json").display()
        );
    }
    report.warden_exit_code()
}
