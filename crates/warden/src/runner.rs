//! Running what a request describes: one run, or a session of runs, with
//! its view and the signal handling, in one loop.

use warden_run::Session;
use warden_run::Update;
use warden_run::telemetry::{MetricsFlushed, Telemetry, TelemetryConfig};
use warden_run::{Run, RunRequest};

use crate::error::Outcome;
use crate::render::forward::{Delivered, Forward, Passthrough};
use crate::render::{Reporter, Reporters};
use crate::signals::Signals;
use crate::wakeups::{Wake, Wakeups};

/// The end of a session: its lines get the console queue's reserve, so a
/// slow reader still sees how it ended.
macro_rules! important {
    ($($arg:tt)*) => {
        crate::render::console::important(&format!($($arg)*))
    };
}

/// What warden says when the `nth` signal comes.
fn signal_notice(nth: u32, name: &str) -> String {
    if nth == 1 {
        format!("{name}: cancelling the run (send it again to kill at once)")
    } else {
        format!("{name} again: killing the run now")
    }
}

/// The OpenTelemetry export the settings ask for (traces and metrics),
/// with the metrics also kept for a Prometheus endpoint when
/// `prometheus`, started; `None` when all of it is off. `agents`: the
/// agents it will run, each checked for `--otel-agent` before anything
/// starts.
pub(crate) fn start_telemetry(
    resolved: &crate::settings::Resolved,
    agents: &[warden_events::Agent],
    prometheus: bool,
) -> Result<Option<Telemetry>, crate::error::CliError> {
    let mut config = TelemetryConfig::resolve(
        resolved.otel_endpoint.as_deref(),
        resolved.otel_protocol,
        resolved.otel_flush,
        |k| std::env::var(k).ok(),
    )
    .map_err(crate::error::usage)?;
    if resolved.otel_agent {
        let Some(traces) = config.traces.as_mut() else {
            return Err(crate::error::usage(
                "--otel-agent needs a collector for traces: give --otel URL (or set OTEL_EXPORTER_OTLP_ENDPOINT, without OTEL_TRACES_EXPORTER=none)",
            ));
        };
        for agent in agents {
            warden_run::telemetry::agent_export(*agent, traces).map_err(crate::error::usage)?;
        }
        traces.agent_export = true;
    }
    let config = if prometheus {
        config.with_prometheus()
    } else {
        config
    };
    Telemetry::start(config).map_err(crate::error::usage)
}

/// Lets the spans and the metrics go out (for at most the flush bound, both
/// together) and says what was lost; the run's outcome and exit code
/// stay.
pub(crate) fn end_telemetry(telemetry: Option<Telemetry>) {
    let Some(t) = telemetry else { return };
    let f = t.shutdown();
    let within = humantime::format_duration(t.flush());
    if let Some(traces) = t.traces_config() {
        let lost = f.dropped + f.failed;
        if lost > 0 || f.timed_out {
            important!(
                "warden: warning: OpenTelemetry: {} span(s) sent, {} dropped (queue full), {} in failed exports{}; collector {}",
                f.exported,
                f.dropped,
                f.failed,
                if f.timed_out {
                    format!(", the rest not sent within {within}")
                } else {
                    String::new()
                },
                traces.traces_endpoint
            );
        }
    }
    if let Some(metrics) = t.metrics_config() {
        let why = match f.metrics {
            Some(MetricsFlushed::Failed) => Some("the export failed".to_string()),
            Some(MetricsFlushed::TimedOut) => Some(format!("not sent within {within}")),
            _ => None,
        };
        if let Some(why) = why {
            important!(
                "warden: warning: OpenTelemetry: the metrics' last export: {why}; collector {}",
                metrics.endpoint
            );
        }
    }
}

/// The exit code once the passing on of the command's output ended as
/// `delivered`: a run that would exit 0 but whose output did not all
/// reach warden's stdout or stderr exits 74 (its logs have it all), and
/// the warning says why; a run that failed keeps its own code.
fn short_of(delivered: &Delivered, code: u8) -> u8 {
    let Delivered::Short(why) = delivered else {
        return code;
    };
    important!("warden: warning: the command's output was not all passed on: {why}");
    if code == 0 { 74 } else { code }
}

/// `ended`: gets the run's directory, which the gc after it must spare.
pub(crate) async fn run_once(
    request: RunRequest,
    resolved: &crate::settings::Resolved,
    signals: Signals,
    ended: &mut Vec<std::path::PathBuf>,
    junit: Option<&std::path::Path>,
    telemetry: Option<&Telemetry>,
) -> Outcome {
    let agent = request.agent;
    let mut run = Run::new(request);
    if let Some(t) = telemetry {
        run = run.telemetry(t.clone());
    }
    let mut handle = run.start().await?;
    let pass = Passthrough::decide(agent, resolved.json);
    let mut view = Reporters::for_runs(resolved, agent, None, pass);
    if !view.wants_output_lines() {
        handle.without_output_lines();
    }
    let canceller = handle.canceller();
    let mut forward = Forward::new(pass, canceller.clone());
    forward.started(handle.run_dir());
    view.update(&Update::IterationStarted {
        entry: None,
        iteration: 1,
        attempt: 1,
        run_dir: handle.run_dir().to_path_buf(),
        run_id: handle.run_id().to_string(),
    });
    let mut wake = Wakeups::new(signals);
    let on_wake = |view: &mut Reporters, w: Wake| match w {
        Wake::Tick => view.tick(),
        Wake::Signal { nth, name } => {
            view.notice(&signal_notice(nth, name));
            if nth == 1 {
                canceller.cancel();
            } else {
                canceller.kill();
            }
        }
    };
    loop {
        tokio::select! {
            ev = handle.next_event() => match ev {
                Some(event) => {
                    forward.poke();
                    view.update(&Update::Event { entry: None, event })
                }
                None => break,
            },
            w = wake.next() => on_wake(&mut view, w),
        }
    }
    // The feed is closed; the run is finishing (its report being
    // written): a signal meanwhile still kills it.
    let report = wake
        .while_waiting(handle.wait(), |w| on_wake(&mut view, w))
        .await
        .report;
    let code = if resolved.preserve_status {
        report.exit_code_preserving_status()
    } else {
        report.warden_exit_code()
    };
    ended.push(report.run_dir.clone());
    let xml = junit.map(|_| warden_run::junit::run(&report, &warden_run::junit::log_tail));
    let text = crate::render::github::output_file().map(|out| {
        let file = crate::render::github::final_text_file(
            &report.run_dir,
            report.reported.final_text.as_deref(),
        );
        (out, file)
    });
    let outputs = text.map(|(out, file)| (out, report.clone(), file));
    // The command's output is all passed on before the lines that say how
    // its run ended (a signal meanwhile stops the waiting for a reader).
    let abandon = forward.abandon();
    let delivered = wake
        .while_waiting(forward.finished(&report), |w| {
            if matches!(w, Wake::Signal { .. }) {
                abandon.now();
            }
        })
        .await;
    let code = short_of(&delivered, code);
    view.update(&Update::IterationFinished {
        entry: None,
        iteration: 1,
        report: Box::new(report),
    });
    // After the view's last lines, so the file's line ends the output.
    let code = match (junit, xml) {
        (Some(path), Some(xml)) => crate::junit_file::write(path, &xml, code),
        _ => code,
    };
    // With the exit code as it ends (a JUnit file that could not be
    // written makes it 74).
    if let Some((out, report, file)) = outputs {
        crate::render::github::write_outputs(
            &out,
            &warden_run::outputs::Outputs::for_run(&report, code, file.as_deref()),
        );
    }
    Ok(code)
}

/// `ended`: gets the session's directory and its runs', which the gc
/// after it must spare.
pub(crate) async fn run_session_cli(
    request: RunRequest,
    resolved: crate::settings::Resolved,
    signals: Signals,
    ended: &mut Vec<std::path::PathBuf>,
    junit: Option<&std::path::Path>,
    telemetry: Option<&Telemetry>,
) -> Outcome {
    let pass = Passthrough::decide(request.agent, resolved.json);
    let mut view = Reporters::for_runs(
        &resolved,
        request.agent,
        Some(request.session.iterations),
        pass,
    );
    let mut session = Session::new(request);
    if let Some(t) = telemetry {
        session = session.telemetry(t.clone());
    }
    let mut session = session.start().await?;
    if !view.wants_output_lines() {
        session.without_output_lines();
    }
    let canceller = session.canceller();
    let mut forward = Forward::new(pass, canceller.clone());
    let mut wake = Wakeups::new(signals);
    let mut final_text: Option<String> = None;
    // Some run's output was not all passed on.
    let mut short = false;
    let on_wake = |view: &mut Reporters, w: Wake| match w {
        Wake::Tick => view.tick(),
        Wake::Signal { nth, name } => {
            view.notice(&signal_notice(nth, name));
            canceller.cancel();
        }
    };
    loop {
        tokio::select! {
            update = session.next_update() => match update {
                Some(u) => {
                    match &u {
                        Update::IterationStarted { run_dir, .. } => forward.started(run_dir),
                        Update::Event { .. } => forward.poke(),
                        // The last run's answer is the session's; its
                        // output is all passed on before its last lines.
                        Update::IterationFinished { report, .. } => {
                            final_text = report.reported.final_text.clone();
                            let abandon = forward.abandon();
                            let delivered = wake
                                .while_waiting(forward.finished(report), |w| {
                                    if matches!(w, Wake::Signal { .. }) {
                                        abandon.now();
                                        canceller.cancel();
                                    }
                                })
                                .await;
                            // Said at once, for this run; the session's
                            // exit code says it at the end.
                            short |= short_of(&delivered, 0) != 0;
                        }
                        _ => {}
                    }
                    view.update(&u)
                }
                None => break,
            },
            w = wake.next() => on_wake(&mut view, w),
        }
    }
    // Every run has ended; the session collects its commits (a signal
    // meanwhile stops that at once).
    let report = wake
        .while_waiting(session.wait(), |w| on_wake(&mut view, w))
        .await?
        .report;
    ended.push(report.session_dir.clone());
    ended.extend(report.runs.iter().map(|r| r.run_dir.clone()));
    let verdict = report.verdict.map_or("none", |v| v.as_str());
    important!(
        "warden: session {}: {verdict} after {} of {} iteration(s), stopped by {}; {} commit(s); tokens {} in / {} out{}",
        report.session_id,
        report.iterations_run,
        report.iterations_requested,
        report.stopped_because.as_str().replace('_', " "),
        warden_run::git::count_shown(report.commits.as_deref()),
        warden_events::Tokens::shown(report.tokens.input),
        warden_events::Tokens::shown(report.tokens.output),
        report
            .cost_usd
            .map(|c| format!(", ${c:.4}"))
            .unwrap_or_default()
    );
    // The check's result, each hook that did not pass, the merge.
    for line in crate::render::lines::session_step_lines(&report) {
        important!("warden: {}", crate::render::github::neutralize(&line));
    }
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
    // One step summary for the session, with a row per run; a verdict
    // of the session's own (its check, a hook, the merge) is annotated
    // here, as a failed run's is when it ends.
    if let Some(g) = crate::render::github::GitHub::from_env() {
        crate::render::github::annotate_session(&g, &report);
        g.append_summary(&crate::render::github::session_summary_markdown(&report));
    }
    let code = if resolved.preserve_status {
        report.exit_code_preserving_status()
    } else {
        report.warden_exit_code()
    };
    let code = if short && code == 0 { 74 } else { code };
    let code = match junit {
        Some(path) => crate::junit_file::write(
            path,
            &warden_run::junit::session(&report, &warden_run::junit::log_tail),
            code,
        ),
        None => code,
    };
    // With the exit code as it ends (a JUnit file that could not be
    // written makes it 74).
    if let Some(out) = crate::render::github::output_file() {
        let text =
            crate::render::github::final_text_file(&report.session_dir, final_text.as_deref());
        crate::render::github::write_outputs(
            &out,
            &warden_run::outputs::Outputs::for_session(&report, code, text.as_deref()),
        );
    }
    Ok(code)
}
