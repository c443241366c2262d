//! One run's plan: everything a [`RunRequest`] decides for one iteration
//! (the command line, the environment the agent's CLI needs, limits,
//! sandbox, output), made once from the request, and what the run shares
//! with the runs around it. Private: a user describes a run with a
//! [`RunRequest`]; [`crate::Run`] and [`crate::session::Session`] make
//! the plan from it.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

use warden_events::{Agent, Tokens};
use warden_process::ContainmentChoice;
use warden_sandbox::SandboxOptions;
use warden_sandbox::env::EnvArg;

use crate::budget::{BudgetPool, BudgetScope, SharedBudget, Spent};
use crate::limits::Limits;
use crate::request::{IterationContext, RequestError, RunRequest};
use crate::telemetry::RunTelemetry;

/// What one run is started from.
#[derive(Debug, Clone)]
pub(crate) struct RunPlan {
    /// The agent: how its output is decoded and judged.
    pub(crate) agent: Agent,
    /// The program and its arguments.
    pub(crate) command: Vec<OsString>,
    /// The working directory of the agent.
    pub(crate) cwd: PathBuf,
    /// Where the artifacts go; `<project>/.warden/runs/<run-id>` if
    /// `None`.
    pub(crate) run_dir: Option<PathBuf>,
    /// The directory whose `.warden/` holds the run's directory when
    /// `run_dir` is `None`; `cwd` if `None`.
    pub(crate) project: Option<PathBuf>,
    pub(crate) limits: Limits,
    pub(crate) containment: ContainmentChoice,
    /// Variables the agent's CLI needs set (its invocation's), on top of
    /// warden's environment.
    pub(crate) env: Vec<(OsString, OsString)>,
    /// Written to the agent's stdin, which is then closed; `None` gives it
    /// /dev/null.
    pub(crate) stdin: Option<Vec<u8>>,
    /// The program that acts as the run's shim; the running executable if
    /// `None`.
    pub(crate) shim_exe: Option<PathBuf>,
    pub(crate) sandbox: SandboxOptions,
    /// The request's `env`: passed to the agent (also into a sandbox) and
    /// treated as secrets.
    pub(crate) env_args: Vec<EnvArg>,
    /// Take `<TAG>…</TAG>` from the final text (validated against the
    /// schema, if given) into the report's `output`.
    pub(crate) output_tag: Option<String>,
    pub(crate) output_schema: Option<(PathBuf, serde_json::Value)>,
    pub(crate) shared: Shared,
}

/// What a run shares with the runs around it (its session's, its
/// batch's): the budgets they spend together and the telemetry they
/// export through. One place, so that a budget travels as one value.
#[derive(Debug, Clone, Default)]
pub(crate) struct Shared {
    /// Budgets shared with the runs before this one, with what those
    /// spent; the run's own is `limits.budget`.
    pub(crate) budgets: Vec<SharedBudget>,
    /// What the earlier attempts at the same step of a session (retries
    /// of a transient failure, output retries) spent: counted against the
    /// run's own budget, which holds for the step, not for each attempt.
    pub(crate) spent_before: Spent,
    /// The running total of tokens the agent's session to resume had
    /// reported (Codex counts usage over the whole thread): the run's
    /// tokens are what it reports beyond it.
    pub(crate) usage_baseline: Tokens,
    /// A batch's budget held live with the runs running beside this one
    /// (the local executor's); its runs publish their spending there.
    pub(crate) pool: Option<Arc<BudgetPool>>,
    /// OpenTelemetry export (off when `None`).
    pub(crate) telemetry: Option<RunTelemetry>,
    /// The view of the session the run is in shows none of its output
    /// lines: the run leaves them out of its live feed from its start
    /// (see `RunHandle::without_output_lines`).
    pub(crate) lines_off: bool,
}

impl RunRequest {
    /// The plan of the run `ctx` describes: the agent's command line for
    /// its prompt (filled for the iteration, or the correction of an
    /// output retry, or the note of a resumed attempt), in `ctx`'s work
    /// directory, with the budgets a first run of its session has (a
    /// session puts in what its runs spent before each run).
    pub(crate) fn plan(&self, ctx: &IterationContext) -> Result<RunPlan, RequestError> {
        let (command, env, stdin) = if self.agent == Agent::Exec {
            (
                self.command.iter().map(OsString::from).collect(),
                Vec::new(),
                None,
            )
        } else {
            // A retry of a transient failure, or an output retry, resumes
            // the agent's own session.
            let resume = ctx
                .retry_of
                .as_ref()
                .and_then(|r| r.resume.as_deref())
                .or(ctx.correction.as_ref().map(|(session, _)| session.as_str()));
            let inv = self.invocation(self.prompt_for(ctx)?, resume)?;
            let mut command = vec![inv.program];
            command.extend(inv.args);
            (command, inv.env, inv.stdin)
        };
        let mut budgets = Vec::new();
        if !self.session.budget.is_empty() {
            budgets.push(SharedBudget::new(
                BudgetScope::Session,
                self.session.budget,
                Spent::default(),
            ));
        }
        budgets.extend(self.batch_budget);
        Ok(RunPlan {
            agent: self.agent,
            command,
            cwd: ctx.workdir.clone(),
            run_dir: if self.is_session() {
                None
            } else {
                self.dir.clone()
            },
            project: self.project.clone(),
            limits: self.limits.clone(),
            containment: self.containment,
            env,
            stdin,
            shim_exe: self.shim_exe.clone(),
            sandbox: self.sandbox.clone(),
            env_args: self.env.clone(),
            output_tag: self.output.as_ref().map(|o| o.tag.clone()),
            output_schema: self.output.as_ref().and_then(|o| o.schema.clone()),
            shared: Shared {
                budgets,
                ..Shared::default()
            },
        })
    }
}
