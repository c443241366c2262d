//! The commands a session runs around its agent's runs: the check
//! (`--check`), the hooks (`--host-setup`, `--setup`, `--on-success`,
//! `--finally`) and the prompt's `{{$ CMD}}`. Each is a run of
//! `sh -c COMMAND` supervised as any run is: a directory of its own in
//! the session's (`stdout.log`, `stderr.log`, `run.json`), its own clocks,
//! its whole process tree ended with it. It works where the agent works,
//! in the agent's sandbox: what it runs is the agent's work, and no
//! program the agent wrote runs outside the sandbox. Only `--host-setup`
//! runs on the host, before any agent has touched the directory.

use std::collections::{BTreeMap, VecDeque};

use super::Runs;
use super::control::SessionControl;
use super::phase::CheckEnd;
use super::report::{SessionReport, StepKind, StepReport, sign_run_report};
use crate::limits::Limits;
use crate::plan::{RunPlan, Shared};
use crate::request::CheckFailure;
use crate::update::{Outbox, Update};
use crate::{Event, Verdict, defaults};

/// A step to run: what it is, for which iteration, and its clocks.
pub(super) struct Order<'c> {
    pub(super) kind: StepKind,
    pub(super) iteration: Option<u32>,
    pub(super) command: &'c str,
    /// Its directory's name in the session's.
    pub(super) name: String,
    pub(super) timeout: Option<std::time::Duration>,
    pub(super) stall_timeout: Option<std::time::Duration>,
}

/// How a step ended: its line of `session.json`, and the last lines of
/// its output (masked, as its events are).
pub(super) struct Ended {
    pub(super) step: StepReport,
    pub(super) tail: String,
    /// What its run masks (for what is read of it afterwards).
    pub(super) redactor: warden_events::Redactor,
}

impl Runs<'_> {
    /// Runs `order` to its end, says so through `out`, and lists it in
    /// `session.json`. `Err` says why it could not be started at all.
    pub(super) async fn step(
        &mut self,
        order: Order<'_>,
        control: &SessionControl,
        out: &mut Outbox,
        report: &mut SessionReport,
    ) -> Result<Ended, String> {
        let run_dir = self.place.session_dir.join(&order.name);
        let plan = self.step_plan(&order, &run_dir);
        // The command as its run's report has it: a secret of `--env`
        // written into it is masked wherever the session shows it.
        let redactor = crate::run::redactor_of(&plan);
        let command = redactor.redact(order.command).into_owned();
        let mut handle = match crate::run::start(plan).await {
            Ok(h) => h,
            Err(e) => {
                if e.is_storage() {
                    report.output_lost.get_or_insert_with(|| e.to_string());
                }
                return Err(format!(
                    "{} `{command}` could not start: {e}",
                    order.kind.flag(),
                ));
            }
        };
        out.send(Update::StepStarted {
            entry: self.entry,
            kind: order.kind,
            iteration: order.iteration,
            command: command.clone(),
            run_dir,
        })
        .await;
        // `--finally` is the clean-up: it runs through the session's first
        // cancel, whether that came before it or while it runs; the next
        // kills it.
        let watcher = if order.kind == StepKind::Finally {
            let (control, canceller, seen) = (
                control.clone(),
                handle.canceller(),
                control.cancels().max(1),
            );
            Some(tokio::spawn(async move {
                control.cancelled_after(seen).await;
                canceller.kill();
            }))
        } else {
            control.set_current(Some(handle.canceller()));
            None
        };
        let mut lines: VecDeque<String> = VecDeque::new();
        while let Some(event) = handle.next_event().await {
            if let Event::Text { text } | Event::Stderr { text } = &event.event {
                for line in text.lines() {
                    if lines.len() == defaults::CHECK_FEEDBACK_LINES {
                        lines.pop_front();
                    }
                    lines.push_back(line.to_string());
                }
            }
        }
        let run = handle.report().await;
        match watcher {
            Some(w) => w.abort(),
            None => control.set_current(None),
        }
        if let Some(signer) = &self.request.report_signer {
            sign_run_report(signer, &run);
        }
        let step = StepReport {
            kind: order.kind,
            iteration: order.iteration,
            command,
            passed: run.verdict == Some(Verdict::Succeeded),
            verdict: run.verdict,
            reason: run.reason.clone(),
            exit_code: run.exit_code,
            signal: run.signal,
            duration_ms: run.duration_ms,
            run_id: run.run_id.clone(),
            run_dir: run.run_dir.clone(),
        };
        if let Some(lost) = &run.output_lost {
            report
                .output_lost
                .get_or_insert_with(|| format!("{} `{}`: {lost}", order.kind, step.command));
        }
        match order.kind {
            StepKind::Check => report.checks.push(step.clone()),
            _ => report.hooks.push(step.clone()),
        }
        self.write(report);
        out.send(Update::StepFinished {
            entry: self.entry,
            step: Box::new(step.clone()),
        })
        .await;
        Ok(Ended {
            step,
            tail: last_bytes(lines, defaults::CHECK_FEEDBACK_BYTES),
            redactor,
        })
    }

    /// The plan of a step's run: `sh -c COMMAND` in the session's work
    /// directory and sandbox (the host for `--host-setup`), with the
    /// request's variables and resource limits, and clocks of its own.
    fn step_plan(&mut self, order: &Order<'_>, run_dir: &std::path::Path) -> RunPlan {
        let request = self.request;
        let limits = Limits {
            timeout: order.timeout,
            stall_timeout: order.stall_timeout,
            // A command may say nothing until it is done (a build); and
            // it has no completion signal to wait after.
            startup_timeout: None,
            completion_timeout: None,
            drain_grace: request.limits.drain_grace,
            kill_grace: request.limits.kill_grace,
            resources: request.limits.resources,
            ..Limits::default()
        };
        let sandbox = match order.kind {
            StepKind::HostSetup => crate::SandboxOptions::default(),
            _ => request.sandbox.clone(),
        };
        let mut plan = RunPlan {
            agent: warden_events::Agent::Exec,
            command: ["sh", "-c", order.command].map(Into::into).to_vec(),
            cwd: self.place.workdir.clone(),
            run_dir: Some(run_dir.to_path_buf()),
            project: None,
            limits,
            containment: request.containment,
            env: Vec::new(),
            stdin: None,
            shim_exe: request.shim_exe.clone(),
            sandbox,
            env_args: request.env.clone(),
            output_tag: None,
            output_schema: None,
            shared: Shared {
                telemetry: self
                    .spans
                    .as_mut()
                    .map(|s| s.step(order.kind, order.iteration, order.command)),
                ..Shared::default()
            },
        };
        self.place.fit(&mut plan);
        plan
    }

    /// Runs the check of iteration `done` (0: before the first); what
    /// the session saw. A failure is kept for the next iteration's
    /// prompt.
    pub(super) async fn check(
        &mut self,
        done: u32,
        control: &SessionControl,
        out: &mut Outbox,
        report: &mut SessionReport,
    ) -> CheckEnd {
        let Some(check) = self.request.session.check.clone() else {
            return CheckEnd::Passed;
        };
        if control.stopped() {
            return CheckEnd::Cancelled;
        }
        let order = Order {
            kind: StepKind::Check,
            iteration: Some(done),
            command: &check.command,
            name: match done {
                0 => "check-first".into(),
                n => format!("iteration-{n}-check"),
            },
            timeout: check.timeout,
            stall_timeout: check.stall_timeout,
        };
        let ended = match self.step(order, control, out, report).await {
            Ok(e) => e,
            Err(e) => {
                report.note_error(e);
                return CheckEnd::Broken;
            }
        };
        match ended.step.verdict {
            Some(Verdict::Succeeded) => {
                self.check_failure = None;
                if self.request.session.merge {
                    self.checked = Some(crate::git::checked_commit(&self.place.workdir).await);
                }
                CheckEnd::Passed
            }
            Some(Verdict::Cancelled) => CheckEnd::Cancelled,
            Some(Verdict::SpawnFailed | Verdict::InternalError) | None => {
                report.note_error(format!(
                    "the check `{}` could not run: {}",
                    ended.step.command, ended.step.reason
                ));
                CheckEnd::Broken
            }
            Some(_) => {
                self.check_failure = Some(CheckFailure {
                    command: ended.step.command.clone(),
                    how: ended.step.how(),
                    output: ended.tail,
                });
                CheckEnd::Failed
            }
        }
    }

    /// Runs `--host-setup`, then `--setup`; `false` when one failed (or
    /// the session was cancelled meanwhile): no agent starts then, and
    /// the report says why.
    pub(super) async fn setup(
        &mut self,
        control: &SessionControl,
        out: &mut Outbox,
        report: &mut SessionReport,
    ) -> bool {
        let hooks = &self.request.session.hooks;
        for (kind, command) in [
            (StepKind::HostSetup, hooks.host_setup.clone()),
            (StepKind::Setup, hooks.setup.clone()),
        ] {
            let Some(command) = command else { continue };
            if control.stopped() {
                report.verdict = Some(Verdict::Cancelled);
                report.stopped_because = super::StopReason::Cancelled;
                return false;
            }
            let ok = self.hook(kind, &command, control, out, report).await;
            if !ok {
                // A hook cancelled with the session did not fail: the
                // session stopped because it was cancelled.
                report.stopped_because = match report.verdict {
                    Some(Verdict::Cancelled) => super::StopReason::Cancelled,
                    _ => {
                        report.verdict = Some(Verdict::SetupFailed);
                        super::StopReason::SetupFailed
                    }
                };
                return false;
            }
        }
        true
    }

    /// Runs `--on-success` (after a session that succeeded), then
    /// `--finally` (whatever the verdict). A failing one makes a session
    /// that succeeded `hook_failed`; a session that did not keeps its
    /// verdict (the hook's failure is in `error`).
    pub(super) async fn wrap_up(
        &mut self,
        control: &SessionControl,
        out: &mut Outbox,
        report: &mut SessionReport,
    ) {
        let hooks = &self.request.session.hooks;
        let seen = control.cancels();
        let succeeded = report.verdict == Some(Verdict::Succeeded) && !control.stopped();
        let on_success = hooks.on_success.clone().filter(|_| succeeded);
        let finally = hooks.finally.clone();
        for (kind, command) in [
            (StepKind::OnSuccess, on_success),
            (StepKind::Finally, finally),
        ] {
            let Some(command) = command else { continue };
            let ok = self.hook(kind, &command, control, out, report).await;
            if !ok && report.verdict == Some(Verdict::Succeeded) {
                report.verdict = Some(Verdict::HookFailed);
            }
        }
        // A cancel that `--finally` ran through still stops the session:
        // nothing follows it (no merge).
        if control.cancels() > seen && report.verdict == Some(Verdict::Succeeded) {
            report.verdict = Some(Verdict::Cancelled);
            report.note_error(
                "cancelled while --finally ran, after the session's work had succeeded".into(),
            );
            self.write(report);
        }
    }

    /// Runs one hook; whether it passed. A failure is said in `error`,
    /// naming the hook and how it ended.
    async fn hook(
        &mut self,
        kind: StepKind,
        command: &str,
        control: &SessionControl,
        out: &mut Outbox,
        report: &mut SessionReport,
    ) -> bool {
        let order = Order {
            kind,
            iteration: None,
            command,
            name: kind.as_str().replace('_', "-"),
            timeout: self.request.session.hooks.timeout,
            stall_timeout: self.request.session.hooks.timeout,
        };
        match self.step(order, control, out, report).await {
            Ok(e) if e.step.passed => true,
            Ok(e) => {
                if e.step.verdict == Some(Verdict::Cancelled) {
                    report.verdict = Some(Verdict::Cancelled);
                }
                report.note_error(format!(
                    "{} `{}` {} (its output: {})",
                    kind.flag(),
                    e.step.command,
                    e.step.how(),
                    e.step.run_dir.display()
                ));
                self.write(report);
                false
            }
            Err(e) => {
                report.note_error(e);
                self.write(report);
                false
            }
        }
    }

    /// Runs each `{{$ CMD}}` of the prompt for the run `run_name` of
    /// iteration `iteration` (each in `<run_name>-prompt-K`); their
    /// outputs (stdout, at most [`defaults::PROMPT_COMMAND_OUTPUT`] each,
    /// without its last newline), or why one failed.
    pub(super) async fn prompt_commands(
        &mut self,
        iteration: u32,
        run_name: &str,
        control: &SessionControl,
        out: &mut Outbox,
        report: &mut SessionReport,
    ) -> Result<BTreeMap<String, String>, String> {
        let commands = match &self.request.prompt {
            Some(crate::Prompt::Template {
                text,
                commands: true,
                ..
            }) => crate::template::commands(text).map_err(|e| e.to_string())?,
            _ => Vec::new(),
        };
        let mut outputs = BTreeMap::new();
        for (k, command) in commands.iter().enumerate() {
            let order = Order {
                kind: StepKind::PromptCommand,
                iteration: Some(iteration),
                command,
                name: format!("{run_name}-prompt-{}", k + 1),
                timeout: self.request.session.hooks.prompt_command_timeout,
                stall_timeout: self.request.session.hooks.prompt_command_timeout,
            };
            let ended = self.step(order, control, out, report).await?;
            if !ended.step.passed {
                return Err(format!(
                    "the prompt's command `{}` {}, so iteration {iteration}'s agent did not start (its output: {})",
                    ended.step.command,
                    ended.step.how(),
                    ended.step.run_dir.display()
                ));
            }
            // Masked as its run's report is: the prompt goes to the
            // agent's model provider.
            let output = stdout_of(&ended.step.run_dir);
            outputs.insert(command.clone(), ended.redactor.redact(&output).into_owned());
        }
        Ok(outputs)
    }
}

/// A step's stdout, as the prompt takes it: at most
/// [`defaults::PROMPT_COMMAND_OUTPUT`] (with a note where it was cut),
/// without its last newline. Read as any file of a directory the agent
/// may reach: only a regular file, bounded.
fn stdout_of(run_dir: &std::path::Path) -> String {
    let limit = defaults::PROMPT_COMMAND_OUTPUT as u64;
    let (bytes, cut) =
        crate::regular_file::read_head(&run_dir.join("stdout.log"), limit).unwrap_or_default();
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if cut {
        text.push_str("\n[… cut by warden: the whole output is in the command's stdout.log]");
    }
    if text.ends_with('\n') {
        text.pop();
    }
    text
}

/// The last lines, cut to their last `limit` bytes (at a line's start
/// where one is within reach).
fn last_bytes(lines: VecDeque<String>, limit: usize) -> String {
    let text = Vec::from(lines).join("\n");
    if text.len() <= limit {
        return text;
    }
    let mut start = text.len() - limit;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    match text[start..].find('\n') {
        Some(nl) => text[start + nl + 1..].to_string(),
        None => text[start..].to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_whole_last_lines_within_its_bound() {
        let lines: VecDeque<String> = (1..=5).map(|i| format!("line {i}")).collect();
        assert_eq!(
            last_bytes(lines.clone(), 1000),
            "line 1\nline 2\nline 3\nline 4\nline 5"
        );
        assert_eq!(last_bytes(lines.clone(), 14), "line 4\nline 5");
        let long: VecDeque<String> = ["é".repeat(10)].into_iter().collect();
        let cut = last_bytes(long, 5);
        assert!(cut.len() <= 5 && cut.chars().all(|c| c == 'é'), "{cut}");
    }
}
