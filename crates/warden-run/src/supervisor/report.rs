//! How a run ends: the verdict, the structured output, the commits, and
//! the report written as `run.json`.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc::UnboundedReceiver;
use warden_events::{AgentReport, Event};

use super::{Control, Supervisor};
use crate::report::{LimitsReport, Report};
use crate::verdict::{Cause, Facts, Verdict, decide};

impl Supervisor {
    /// The report as it stands; `verdict` is `None` until the end. Secret
    /// values are masked in every text field.
    pub(crate) fn report(&self, verdict: Option<Verdict>, reason: String) -> Report {
        let mut r = self.raw_report(verdict, reason);
        let red = &self.setup.redactor;
        if !red.is_empty() {
            let mut texts: Vec<&mut String> = Vec::new();
            texts.extend(r.command.iter_mut());
            texts.push(&mut r.reason);
            texts.extend(r.reported.final_text.as_mut());
            texts.extend(r.reported.error_message.as_mut());
            texts.extend(r.error.as_mut());
            texts.extend(r.orphans.iter_mut().map(|o| &mut o.cmdline));
            texts.extend(r.hanging.iter_mut().map(|h| &mut h.cmdline));
            if let Some(t) = r.output_truncated.as_mut() {
                texts.extend(t.holders.iter_mut().map(|h| &mut h.cmdline));
            }
            texts.extend(r.output_lost.as_mut());
            for t in texts {
                red.redact_in_place(t);
            }
            // The structured output is the agent's text too (and goes on
            // into session.json and batch.json from here).
            if let Some(v) = r.output.as_mut() {
                redact_json(red, v);
            }
        }
        r
    }

    /// Records a failure to keep the output: an error, and the first one
    /// stays `output_lost`.
    pub(super) fn note_lost(&mut self, e: String) {
        if self.errors.output_lost.is_none() {
            self.errors.output_lost = Some(e.clone());
        }
        self.note_error(e);
    }

    /// Brings `error` and `output_lost` of `report` up to date, masked.
    fn refresh_errors(&self, report: &mut Report) {
        let red = &self.setup.redactor;
        report.error = (!self.errors.list.is_empty())
            .then(|| red.redact(&self.errors.list.join("; ")).into_owned());
        report.output_lost = self
            .errors
            .output_lost
            .as_ref()
            .map(|e| red.redact(e).into_owned());
    }

    /// Writes what is buffered to `events.jsonl`.
    pub(super) fn flush_events(&mut self) {
        let ask = self.sinks.files.flush();
        self.answer(ask);
    }

    fn raw_report(&self, verdict: Option<Verdict>, reason: String) -> Report {
        let l = &self.setup.limits;
        let ms = |d: Option<Duration>| d.map(|d| d.as_millis() as u64);
        let now = crate::clocks::now();
        let ended = verdict.is_some();
        let mut longest = self.activity.longest_silence;
        if ended {
            let since = self.clocks.last_activity.unwrap_or(self.setup.started);
            longest = longest.max(now.saturating_duration_since(since));
        }
        Report {
            schema_version: warden_events::SchemaVersion,
            run_id: self.setup.run_id.clone(),
            agent: self.setup.agent.name().to_string(),
            command: self.setup.command.clone(),
            cwd: self.setup.cwd.clone(),
            run_dir: self.sinks.files.dir.path().to_path_buf(),
            warden_version: env!("CARGO_PKG_VERSION").to_string(),
            verdict,
            reason,
            exit_code: self.phase.exit().and_then(|e| e.code),
            signal: self.phase.exit().and_then(|e| e.signal),
            pid: self.procs.pid,
            started_at: humantime::format_rfc3339_millis(self.setup.started_at).to_string(),
            ended_at: ended
                .then(|| humantime::format_rfc3339_millis(SystemTime::now()).to_string()),
            duration_ms: self.ms(now),
            time_to_first_activity_ms: self.activity.first.map(|t| self.ms(t)),
            last_activity_ms: self.clocks.last_activity.map(|t| self.ms(t)),
            longest_silence_ms: longest.as_millis() as u64,
            activity_lines: self.activity.lines,
            event_counts: self.counts(),
            stall_warnings: self.activity.stall_warnings,
            stall_watchdog_armed: self.clocks.stall_timeout.is_some(),
            completion_signal_seen_ms: self.activity.completion_seen.map(|t| self.ms(t)),
            forced_completion: self.phase.cause() == Some(Cause::ForcedCompletion),
            // A cause is set only by `begin_ending`, which sends SIGTERM
            // or SIGKILL to the run's processes.
            ended_by_warden: self.phase.cause().is_some(),
            hanging: self.procs.hanging.clone(),
            output_truncated: self.streams.truncated.clone(),
            orphans: self.procs.orphans.clone(),
            orphans_killed: self.orphans_killed(),
            containment: self.procs.containment.clone(),
            sandbox: self.setup.sandbox.name().to_string(),
            reported: AgentReport {
                model: self
                    .outcome
                    .summary
                    .reported
                    .model
                    .clone()
                    .or_else(|| crate::report::model_in_command(&self.setup.command)),
                ..self.outcome.summary.reported.clone()
            },
            terminal_event_ms: self.activity.terminal_seen.map(|t| self.ms(t)),
            stall_extensions: self.activity.stall_extensions.clone(),
            base_commit: self.setup.git.as_ref().and_then(|g| g.base.clone()),
            branch: self.outcome.branch.clone(),
            commits: self.outcome.commits.clone(),
            output: self.outcome.output.clone(),
            output_error: None,
            stdout_bytes: self.streams.stdout_bytes,
            stderr_bytes: self.streams.stderr_bytes,
            budgets: self.budget_lines(),
            budget_exceeded: self.budget_exceeded(),
            limits: LimitsReport {
                timeout_ms: ms(l.timeout),
                stall_timeout_ms: ms(l.stall_timeout),
                startup_timeout_ms: ms(l.startup_timeout),
                completion_timeout_ms: ms(l.completion_timeout),
                drain_grace_ms: l.drain_grace.as_millis() as u64,
                kill_grace_ms: l.kill_grace.as_millis() as u64,
                completion_signal: l.completion_signal.clone(),
                max_line: l.max_line,
                on_fatal_error: l.on_fatal_error,
            },
            warden_peak_rss_kib: warden_process::os::peak_rss_kib(),
            live_events_dropped: self.sinks.live.dropped(),
            warden_cpu_ms: warden_process::os::cpu_time().map(|d| d.as_millis() as u64),
            error: (!self.errors.list.is_empty()).then(|| self.errors.list.join("; ")),
            output_lost: self.errors.output_lost.clone(),
            logs: None,
            resources: self.procs.resources.clone(),
            // No limit, nothing to have hit; a count never read, unknown.
            oom_killed: self
                .procs
                .resources
                .as_ref()
                .map_or(Some(false), |r| r.oom_kills.map(|n| n > 0)),
            pids_limit_hit: self
                .procs
                .resources
                .as_ref()
                .map_or(Some(false), |r| r.pids_limit_hits.map(|n| n > 0)),
            env_dropped: self.setup.env_dropped.clone(),
            otel: None,
            written: false,
        }
    }

    /// What the run has spent so far, as its budgets count it.
    fn spent(&self) -> crate::budget::Spent {
        crate::budget::Spent::of_summary(&self.outcome.summary)
    }

    /// Every budget with what was reached by now: for a batch's budget
    /// held with the runs beside this one, where they have got to too.
    fn budget_lines(&self) -> Vec<crate::budget::BudgetLine> {
        self.sinks.budget.lines(&self.spent())
    }

    /// The budget exceeded, with what was reached by the end of the run
    /// (the agent may report more while it is being stopped).
    fn budget_exceeded(&self) -> Option<crate::budget::BudgetLine> {
        self.sinks.budget.exceeded(&self.spent())
    }

    fn counts(&self) -> BTreeMap<String, u64> {
        self.sinks.files.counts()
    }

    fn orphans_killed(&self) -> u32 {
        self.procs
            .orphans
            .iter()
            .filter(|o| !warden_process::os::procfs::is_alive(o.pid))
            .count() as u32
    }

    /// The commits made since the start, read after every process of the
    /// run is gone (so none is still writing). git is bounded in time
    /// (`defaults::GIT_QUERY_TIMEOUT`), and a cancel stops it at once: the
    /// agent may have left a repository git blocks on.
    pub(super) async fn collect_commits(&mut self, control: &mut UnboundedReceiver<Control>) {
        let Some(g) = self.setup.git.clone() else {
            return;
        };
        let work = async {
            let commits = crate::git::commits_since(&g.dir, g.base.as_deref()).await;
            (commits, crate::git::branch(&g.dir).await)
        };
        let mut work = std::pin::pin!(work);
        let mut control_open = true;
        // Dropping `work` kills the git it is waiting for.
        let found = loop {
            tokio::select! {
                // Work that has finished wins over a cancel in the same instant.
                biased;
                found = &mut work => break Some(found),
                c = control.recv(), if control_open => match c {
                    Some(_) => break None,
                    None => control_open = false,
                },
            }
        };
        match found {
            Some((Ok(commits), branch)) => {
                self.outcome.commits = Some(commits);
                self.outcome.branch = branch;
            }
            Some((Err(e), _)) => {
                self.outcome.commits = None;
                self.note_error(format!("could not collect commits: {e}"));
            }
            None => {
                self.outcome.commits = None;
                self.note_error(
                    "could not collect commits: cancelled while git was reading them".into(),
                );
            }
        }
    }

    /// Takes the structured output from the final text; an error makes a
    /// successful run `agent_failed`.
    fn take_output(&mut self) -> Result<(), String> {
        let Some(spec) = &self.setup.output else {
            return Ok(());
        };
        let text = match &self.outcome.summary.reported.final_text {
            Some(t) => t.clone(),
            None => self.streams.recent_text.clone(),
        };
        let raw = crate::output::extract(&text, &spec.tag).map_err(|e| e.to_string())?;
        let value = match &spec.schema {
            Some(schema) => {
                let v = crate::output::parse_json(&raw, &spec.tag).map_err(|e| e.to_string())?;
                schema.check(&v, &spec.tag).map_err(|e| e.to_string())?;
                v
            }
            None => serde_json::Value::String(raw),
        };
        self.outcome.output = Some(value);
        Ok(())
    }

    /// Ends a run whose agent could not be started.
    pub(crate) async fn spawn_failed(mut self, error: warden_process::SpawnError) -> Report {
        self.errors.spawn = Some(error.to_string());
        self.note_error(error.to_string());
        self.finish().await
    }

    /// Decides the verdict, records `finished`, writes `run.json`.
    pub(super) async fn finish(mut self) -> Report {
        // The first run.json is in place before the last one replaces it.
        if let Some(initial) = self.initial_report.take() {
            match initial.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => self.note_lost(format!("could not write run.json: {e}")),
                Err(e) => self.note_lost(format!(
                    "could not write run.json: the task writing it failed: {e}"
                )),
            }
        }
        let (mut verdict, mut reason) = self.verdict();
        reason = crate::resources::explain(verdict, reason, self.procs.resources.as_ref());
        let mut output_error = None;
        if verdict == Verdict::Succeeded
            && let Err(e) = self.take_output()
        {
            verdict = Verdict::AgentFailed;
            reason = format!("structured output: {e}");
            self.note_error(reason.clone());
            output_error = Some(e);
        }
        let mut report = self.report(Some(verdict), reason.clone());
        // The agent's text may be quoted in it: redacted as the reason is.
        report.output_error = output_error.map(|mut e| {
            self.setup.redactor.redact_in_place(&mut e);
            e
        });
        self.emit(Event::Finished {
            verdict: verdict.as_str().into(),
            reason,
            exit_code: report.exit_code,
            signal: report.signal,
            duration_ms: report.duration_ms,
        });
        self.flush_events();
        report.event_counts = self.counts();
        if let Some(problem) = self.sinks.files.dir.check_reserved() {
            self.note_error(problem);
        }
        // Errors met since the report was made (the last events' flush).
        self.refresh_errors(&mut report);
        // The run's spans go to the exporter's queue (never waiting for
        // it) before the report is written, which says how many went.
        if let (Some(spans), Some(t)) = (self.sinks.spans.take(), &self.setup.shared.telemetry) {
            let (handed, dropped) = t.exporter.submit(spans.finish(&report), t.ids.sampled());
            report.otel = Some(crate::telemetry::OtelReport::new(&t.ids, handed, dropped));
        }
        // Counted once the verdict and every count are final; the metrics
        // aggregate in memory, and go out from threads of their own. A
        // session's check or hook is no agent's run: a check failing as
        // the loop expects is not counted as a failed run.
        if let Some(t) = &self.setup.shared.telemetry
            && t.step.is_none()
        {
            t.exporter.record_run(&report);
        }
        report.logs = Some(self.sinks.files.dir.digests());
        match self.sinks.files.dir.write_final_report(&report) {
            Ok(()) => report.written = true,
            Err(e) => {
                // Said after the errors before it, never instead of them.
                self.note_lost(format!("could not write run.json: {e}"));
                self.refresh_errors(&mut report);
            }
        }
        // The run's last events (its verdict among them) still waiting for
        // a slow reader get a short while to go out.
        let live = std::mem::replace(&mut self.sinks.live, crate::live::LiveFeed::new(None, true));
        live.drain(Duration::from_secs(2)).await;
        report
    }

    fn verdict(&self) -> (Verdict, String) {
        let l = &self.setup.limits;
        let fmt =
            |d: Option<Duration>| humantime::format_duration(d.unwrap_or_default()).to_string();
        decide(&Facts {
            json_agent: self.setup.agent.is_json(),
            spawn_error: self.errors.spawn.clone(),
            cause: self.phase.cause(),
            exit: self.phase.exit().map(|e| (e.code, e.signal)),
            terminal: self.outcome.summary.terminal_in_force(),
            agent_error: self.outcome.summary.reported.error_message.clone(),
            authentication_error: self.outcome.summary.reported.error_class
                == Some(warden_events::ErrorClass::Authentication),
            completion_signal_seen: self.activity.completion_seen.is_some(),
            cancelled_because: self.activity.cancelled_because.clone(),
            budget_exceeded: self.budget_exceeded().map(|b| b.exceeded()),
            stall_timeout: fmt(self.clocks.effective_stall()),
            startup_timeout: fmt(l.startup_timeout),
            timeout: fmt(l.timeout),
            completion_timeout: fmt(l.completion_timeout),
        })
    }
}

/// Masks secrets in every string of a JSON value, keys included.
fn redact_json(red: &warden_events::Redactor, v: &mut serde_json::Value) {
    match v {
        serde_json::Value::String(s) => red.redact_in_place(s),
        serde_json::Value::Array(a) => a.iter_mut().for_each(|x| redact_json(red, x)),
        serde_json::Value::Object(o) => {
            let old = std::mem::take(o);
            for (mut k, mut x) in old {
                red.redact_in_place(&mut k);
                redact_json(red, &mut x);
                o.insert(k, x);
            }
        }
        _ => {}
    }
}
