//! A run described as data: the agent, what it is asked, its limits,
//! sandbox and output, and the session around it. The CLI, a batch file
//! and a remote executor all build one [`RunRequest`]; everything a run
//! needs is decided from it, so it can be written to a file or shipped to
//! another machine and run there the same.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use warden_run::{Agent, RunRequest};
//! let mut request = RunRequest::agent(Agent::Claude, "Fix the failing test");
//! request.limits.stall_timeout = Some(std::time::Duration::from_secs(300));
//! for warning in request.check()? {
//!     eprintln!("warning: {warning}");
//! }
//! let json = serde_json::to_string(&request)?; // ship it, read it back
//! let request: RunRequest = serde_json::from_str(&json)?;
//! let run = warden_run::Run::new(request).start().await?;
//! # let _ = run; Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use warden_agents::{AgentError, AgentRequest, profile};
use warden_events::{Agent, UsageReporting};
use warden_process::ContainmentChoice;
use warden_sandbox::env::EnvArg;
use warden_sandbox::{Sandbox, SandboxNeeds, SandboxOptions};

use crate::limits::Limits;
use crate::retry::{RetryOn, RetryPolicy};
use crate::template;

mod container;

/// `--worktree`: where the session works.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorktreeRequest {
    /// The branch to create; `warden/<name>/<stamp>-<random>` if `None`.
    pub branch: Option<String>,
    /// The commit or ref to start from; HEAD if `None`.
    pub base: Option<String>,
    /// Keep a clean worktree at the end (a dirty one is always kept).
    pub keep: bool,
}

/// Where and as what one run of a request runs: its iteration, its
/// directories, and for a retry what it retries.
#[derive(Debug, Clone)]
pub struct IterationContext {
    pub iteration: u32,
    pub iterations: u32,
    pub workdir: PathBuf,
    pub run_dir: PathBuf,
    pub branch: Option<String>,
    pub base: Option<String>,
    /// For an output retry: the agent's session to resume and the
    /// correction to send instead of the task's prompt.
    pub correction: Option<(String, String)>,
    /// For a retry of a transient failure: the failure, and the agent's
    /// session to resume, if any.
    pub retry_of: Option<RetryOf>,
    /// What the check said of the iteration before, when it failed.
    pub check_failure: Option<CheckFailure>,
    /// The output of each `{{$ CMD}}` of the prompt, by command.
    pub prompt_outputs: BTreeMap<String, String>,
}

/// A failed check, as the next iteration is told of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckFailure {
    pub command: String,
    /// How it failed: "exited with status 1", "timed out after 10m".
    pub how: String,
    /// The last lines of its output, secrets masked.
    pub output: String,
}

/// What a retry of a transient failure is told about the attempt before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryOf {
    pub failure: RetryOn,
    /// The agent's session to resume: the CLI can, and the failed attempt
    /// got at least one answer from the model (else there is nothing to
    /// resume, and the run starts afresh).
    pub resume: Option<String>,
}

/// What the agent is asked.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Prompt {
    /// Sent as it is.
    Text(String),
    /// `{{NAME}}` placeholders filled from `args` and the built-in values
    /// (`BRANCH`, `BASE`, `ITERATION`, `ITERATIONS`, `AGENT`,
    /// `CHECK_OUTPUT`) for each run.
    Template {
        text: String,
        #[serde(default)]
        args: BTreeMap<String, String>,
        /// Run each `{{$ CMD}}` of the text before the agent and put in
        /// its output; otherwise they are sent as they are. For a text
        /// the user wrote (a prompt file), never for one that may come
        /// from anyone (standard input, an inline prompt that a workflow
        /// fills from an issue).
        #[serde(default)]
        commands: bool,
    },
}

/// The structured output a run must give: `<TAG>…</TAG>` in its final
/// text, valid against the schema if there is one.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputRequest {
    pub tag: String,
    /// The JSON Schema, and the file it came from (named in messages).
    /// Checking against it is the `output-schema` feature: without it a
    /// run with a schema does not start (`OutputError::SchemaNotBuilt`).
    #[serde(default)]
    pub schema: Option<(PathBuf, serde_json::Value)>,
    /// How many times a run whose output was wrong is resumed with a
    /// correction (agents whose profile says `can_resume`).
    #[serde(default)]
    pub retries: u32,
}

/// The session around the run: more than one iteration, a worktree, or
/// output retries make it a session, with a `session.json`.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SessionRequest {
    /// Used in branch names and the session id; the agent's name if
    /// `None`.
    pub name: Option<String>,
    pub iterations: u32,
    pub worktree: Option<WorktreeRequest>,
    /// The most the session's runs may spend together
    /// (`--session-max-cost`, `--session-max-tokens`,
    /// `--session-max-turns`).
    pub budget: crate::budget::Budget,
    /// What verifies the work after each iteration (`--check`): the
    /// session ends when it passes, and a failure is told to the next
    /// iteration.
    pub check: Option<CheckRequest>,
    /// Commands run around the agent's runs (`--setup`, `--host-setup`,
    /// `--on-success`, `--finally`) and the bounds of those and of the
    /// prompt's `{{$ CMD}}` commands.
    pub hooks: HooksRequest,
    /// Merge the session's branch into the branch checked out when it
    /// started, once it succeeded (`--merge`; needs a worktree).
    pub merge: bool,
}

/// `--check`: a command run after each iteration, in the same directory
/// and sandbox, supervised as a run of its own. Exit 0 passes.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CheckRequest {
    /// Run with `sh -c`.
    pub command: String,
    /// The check's wall clock (`--check-timeout`); `None`: none.
    pub timeout: Option<std::time::Duration>,
    /// No output from the check for this long ends it as stalled
    /// (`--check-stall-timeout`); `None`: none.
    pub stall_timeout: Option<std::time::Duration>,
    /// Whether a failed check's output is told to the next iteration
    /// (`--check-feedback`).
    pub feedback: CheckFeedback,
    /// Run the check once before the first iteration (`--check-first`):
    /// a check that already passes ends the session with nothing to do.
    pub first: bool,
}

impl CheckRequest {
    /// A check of `command` with the default clocks and feedback.
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            ..Self::default()
        }
    }
}

impl Default for CheckRequest {
    fn default() -> Self {
        Self {
            command: String::new(),
            timeout: Some(crate::defaults::CHECK_TIMEOUT),
            stall_timeout: Some(crate::defaults::CHECK_STALL_TIMEOUT),
            feedback: CheckFeedback::default(),
            first: false,
        }
    }
}

/// How a failed check reaches the next iteration.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckFeedback {
    /// Through `{{CHECK_OUTPUT}}` where the prompt uses it, else as a
    /// note appended to the prompt.
    #[default]
    Auto,
    /// Not at all: the next iteration gets the task's prompt as it is
    /// (`{{CHECK_OUTPUT}}` is still filled).
    None,
}

/// The commands run around a session's runs, each supervised as a run of
/// its own and bounded by `timeout` (a prompt's commands by
/// `prompt_command_timeout`).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HooksRequest {
    /// On the host, in the work directory, before anything runs in the
    /// sandbox (`--host-setup`).
    pub host_setup: Option<String>,
    /// In the sandbox, once, before the first iteration (`--setup`).
    pub setup: Option<String>,
    /// In the sandbox, after a session that succeeded (`--on-success`).
    pub on_success: Option<String>,
    /// In the sandbox, at the end whatever the verdict (`--finally`).
    pub finally: Option<String>,
    /// Each hook's wall clock (`--hook-timeout`); `None`: none.
    pub timeout: Option<std::time::Duration>,
    /// Each `{{$ CMD}}` of the prompt's wall clock
    /// (`--prompt-command-timeout`); `None`: none.
    pub prompt_command_timeout: Option<std::time::Duration>,
}

impl Default for HooksRequest {
    fn default() -> Self {
        Self {
            host_setup: None,
            setup: None,
            on_success: None,
            finally: None,
            timeout: Some(crate::defaults::HOOK_TIMEOUT),
            prompt_command_timeout: Some(crate::defaults::PROMPT_COMMAND_TIMEOUT),
        }
    }
}

impl HooksRequest {
    /// Whether any hook is set.
    pub fn any(&self) -> bool {
        self.host_setup.is_some()
            || self.setup.is_some()
            || self.on_success.is_some()
            || self.finally.is_some()
    }
}

impl OutputRequest {
    /// The output in `<tag>…</tag>`, as text, with no retry.
    pub fn new(tag: impl Into<String>) -> Self {
        Self {
            tag: tag.into(),
            schema: None,
            retries: 0,
        }
    }
}

impl Default for SessionRequest {
    fn default() -> Self {
        Self {
            name: None,
            iterations: 1,
            worktree: None,
            budget: crate::budget::Budget::default(),
            check: None,
            hooks: HooksRequest::default(),
            merge: false,
        }
    }
}

/// Everything that decides one run (or session of runs).
///
/// A request may hold secrets given by value (`EnvArg::Pair`): store and
/// ship it as you would a secret.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    pub agent: Agent,
    /// `None` for `exec`, which runs `command`.
    #[serde(default)]
    pub prompt: Option<Prompt>,
    /// Tell the agent it runs unattended, its deadline, and the
    /// completion signal (appended to the prompt).
    #[serde(default)]
    pub preamble: bool,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub effort: Option<String>,
    /// The agent's session to resume.
    #[serde(default)]
    pub resume: Option<String>,
    /// The agent CLI's executable, when not its usual name on PATH.
    #[serde(default)]
    pub agent_bin: Option<PathBuf>,
    /// Passed to the agent CLI after warden's own arguments.
    #[serde(default)]
    pub extra_args: Vec<String>,
    /// `exec`: the program and its arguments.
    #[serde(default)]
    pub command: Vec<String>,
    /// The directory to work in (or to make the worktree from).
    pub cwd: PathBuf,
    /// Where the report goes: the run directory of a single run, the
    /// session directory of a session; under `project`'s `.warden/` if
    /// `None`.
    #[serde(default)]
    pub dir: Option<PathBuf>,
    /// The project's root, whose `.warden/` holds the run's (or the
    /// session's) directory when `dir` is `None`: `warden` gives the
    /// directory of the `warden.toml` it found, else the top of the git
    /// work tree, else `cwd`. When `None`, a run's directory goes under
    /// `cwd`, a session's under the top of its repository.
    #[serde(default)]
    pub project: Option<PathBuf>,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default)]
    pub containment: ContainmentChoice,
    #[serde(default)]
    pub sandbox: SandboxOptions,
    /// Variables passed to the agent (also into a sandbox), treated as
    /// secrets.
    #[serde(default)]
    pub env: Vec<EnvArg>,
    #[serde(default)]
    pub output: Option<OutputRequest>,
    #[serde(default)]
    pub session: SessionRequest,
    /// Retries of runs that end by a transient failure; any retry makes
    /// the request a session.
    #[serde(default)]
    pub retry: RetryPolicy,
    /// The batch's budget, with what the entries before this one spent
    /// against it (set by the batch).
    #[serde(default)]
    pub batch_budget: Option<crate::budget::SharedBudget>,
    /// The program that acts as each run's shim on this machine (the
    /// running executable if `None`); never shipped.
    #[serde(skip)]
    pub shim_exe: Option<PathBuf>,
    /// OpenTelemetry export for a run started elsewhere (a batch's entry
    /// on a cluster's node): where spans go and the span to nest under.
    /// A process that runs the request itself passes its exporter to the
    /// session instead.
    #[serde(default)]
    pub otel: Option<crate::telemetry::OtelRequest>,
    /// A batch's entry: what its session signs `session.json` and each
    /// run's `run.json` with, so that what it reports can be told from a
    /// forgery when read back. Never shipped (a cluster's job gets the
    /// key through its environment).
    #[serde(skip)]
    pub report_signer: Option<crate::batch_key::ReportSigner>,
}

/// What is wrong with a request, or worth a warning, in the request's own
/// words: the fields it is about (`session.iterations`,
/// `limits.budget.max_cost_usd`), and a message that names the `N`th of
/// them where it says `{N}`, so that a front end can name them its own way
/// ([`Finding::render`]; the CLI names its flags). Shown as it is, the
/// fields are named by their paths in the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    fields: Vec<&'static str>,
    message: String,
}

impl Finding {
    pub(crate) fn new(message: impl Into<String>, fields: &[&'static str]) -> Self {
        Self {
            fields: fields.to_vec(),
            message: message.into(),
        }
    }

    /// A finding about no field in particular.
    pub(crate) fn plain(message: impl Into<String>) -> Self {
        Self::new(message, &[])
    }

    /// The fields it is about, as paths in the request.
    pub fn fields(&self) -> &[&'static str] {
        &self.fields
    }

    /// The message with each field named by `name`.
    pub fn render(&self, name: impl Fn(&str) -> String) -> String {
        let mut text = self.message.clone();
        for (i, field) in self.fields.iter().enumerate() {
            text = text.replace(&format!("{{{i}}}"), &name(field));
        }
        text
    }
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render(str::to_string))
    }
}

/// What kind of failure an error of the library's is: what a front end
/// needs to decide what to do (the CLI: which exit code).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request (or a file it names) is wrong: fixing it fixes this.
    Invalid,
    /// This machine cannot do what the request asks: an agent's CLI not
    /// installed, a sandbox that cannot run here.
    Unavailable,
    /// The file system cannot keep the records (full, read-only, failing).
    Storage,
    /// warden itself failed.
    Internal,
}

/// What makes a request unusable, found before anything starts.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("{0}")]
    Invalid(Finding),
    #[error(transparent)]
    Template(template::TemplateError),
    #[error(transparent)]
    Agent(#[from] AgentError),
}

impl From<template::TemplateError> for RequestError {
    fn from(e: template::TemplateError) -> Self {
        match e {
            // The value is the request's to give: named as a field.
            template::TemplateError::Missing { name } => RequestError::Invalid(Finding::new(
                format!(
                    "the prompt uses {{{{{name}}}}} but no value was given: add {{0}} {name}=VALUE"
                ),
                &["prompt.args"],
            )),
            e => RequestError::Template(e),
        }
    }
}

impl RequestError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            RequestError::Agent(AgentError::NotInstalled { .. }) => ErrorKind::Unavailable,
            _ => ErrorKind::Invalid,
        }
    }

    /// Whether the machine, not the request, is at fault: the agent's CLI
    /// is not installed here.
    pub fn is_unavailable(&self) -> bool {
        self.kind() == ErrorKind::Unavailable
    }

    /// The message with each field of the request named by `name` (see
    /// [`Finding::render`]).
    pub fn render(&self, name: impl Fn(&str) -> String) -> String {
        match self {
            RequestError::Invalid(f) => f.render(name),
            e => e.to_string(),
        }
    }
}

fn invalid(message: impl Into<String>, fields: &[&'static str]) -> RequestError {
    RequestError::Invalid(Finding::new(message, fields))
}

impl RunRequest {
    /// A request to run `command` as it is (`exec`), in the current
    /// directory, with the default limits.
    pub fn exec<I, S>(command: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut r = Self::empty(Agent::Exec);
        r.command = command.into_iter().map(Into::into).collect();
        r
    }

    /// A request to run `agent` headless on `prompt`, in the current
    /// directory, with the default limits.
    pub fn agent(agent: Agent, prompt: impl Into<String>) -> Self {
        let mut r = Self::empty(agent);
        r.prompt = Some(Prompt::Text(prompt.into()));
        r
    }

    fn empty(agent: Agent) -> Self {
        Self {
            agent,
            prompt: None,
            preamble: false,
            model: None,
            effort: None,
            resume: None,
            agent_bin: None,
            extra_args: Vec::new(),
            command: Vec::new(),
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            dir: None,
            project: None,
            limits: Limits::default(),
            containment: ContainmentChoice::Auto,
            sandbox: SandboxOptions::default(),
            env: Vec::new(),
            output: None,
            session: SessionRequest::default(),
            retry: RetryPolicy::default(),
            batch_budget: None,
            shim_exe: None,
            otel: None,
            report_signer: None,
        }
    }

    /// Whether this is a session (a `session.json` around the runs)
    /// rather than one run.
    pub fn is_session(&self) -> bool {
        self.session.iterations != 1
            || self.session.worktree.is_some()
            || self.output.as_ref().is_some_and(|o| o.retries > 0)
            || self.retry.retries > 0
            || self.session.check.is_some()
            || self.session.hooks.any()
            || self.session.merge
            || self.has_prompt_commands()
    }

    /// Whether the prompt runs commands (`{{$ CMD}}` in a template).
    pub fn has_prompt_commands(&self) -> bool {
        matches!(&self.prompt, Some(Prompt::Template { text, commands: true, .. })
            if template::commands(text).is_ok_and(|c| !c.is_empty()))
    }

    /// Whether the prompt is a template (filled for each run).
    pub fn is_template(&self) -> bool {
        matches!(self.prompt, Some(Prompt::Template { .. }))
    }

    /// Checks everything that can be checked before a run starts,
    /// including that the agent's CLI is installed; returns the warnings
    /// (a template value no placeholder uses, a secret that will not be
    /// masked).
    pub fn check(&self) -> Result<Vec<Finding>, RequestError> {
        let mut warnings = Vec::new();
        if self.session.iterations == 0 {
            return Err(invalid("{0} must be at least 1", &["session.iterations"]));
        }
        self.check_steps()?;
        if self.sandbox.sandbox == Sandbox::Host
            && (self.sandbox.no_network
                || !self.sandbox.ro.is_empty()
                || !self.sandbox.rw.is_empty()
                || !self.sandbox.allow_sockets.is_empty())
        {
            return Err(invalid(
                "{0}, {1}, {2} and {3} need a sandbox: set {4} to bwrap (or docker, podman)",
                &[
                    "sandbox.no_network",
                    "sandbox.ro",
                    "sandbox.rw",
                    "sandbox.allow_sockets",
                    "sandbox.sandbox",
                ],
            ));
        }
        let needs = sandbox_needs(self.agent);
        let found = container::check(&self.sandbox, self.agent, &needs, &self.cwd)
            .map_err(|s| invalid(s.message, &s.fields))?;
        warnings.extend(
            found
                .into_iter()
                .map(|s| Finding::new(s.message, &s.fields)),
        );
        // Limits this machine cannot enforce, refused up front.
        crate::resources::check(
            &self.limits.resources,
            self.sandbox.sandbox,
            self.containment,
        )
        .map_err(|e| invalid(e.to_string(), &["limits.resources"]))?;
        warnings.extend(self.check_budgets()?);
        let retries = self.output.as_ref().map_or(0, |o| o.retries);
        if retries > 0 && !profile(self.agent).can_resume {
            let can: Vec<&str> = warden_agents::profiles()
                .iter()
                .filter(|p| p.can_resume)
                .map(|p| p.agent.name())
                .collect();
            return Err(invalid(
                format!(
                    "{{0}} resumes the agent's session, which warden does for {}, not {}",
                    list(&can),
                    self.agent
                ),
                &["output.retries"],
            ));
        }
        if self.agent == Agent::Exec {
            if self.prompt.is_some() {
                return Err(invalid(
                    "`exec` runs a command, not a prompt: give {0} instead of {1}",
                    &["command", "prompt"],
                ));
            }
            for (field, given) in [
                ("model", self.model.is_some()),
                ("effort", self.effort.is_some()),
                ("resume", self.resume.is_some()),
                ("agent_bin", self.agent_bin.is_some()),
                ("preamble", self.preamble),
            ] {
                if given {
                    return Err(invalid(
                        "{0} is for agents; `exec` runs {1} as it is",
                        &[field, "command"],
                    ));
                }
            }
            if self.command.is_empty() {
                return Err(invalid(
                    "no command given for `exec`: {0} is empty",
                    &["command"],
                ));
            }
        }
        // The template once, before anything starts: a missing value is an
        // error, an unused one a warning.
        if let Some(Prompt::Template { text, args, .. }) = &self.prompt {
            let names = template::placeholders(text)?;
            for unused in args.keys().filter(|k| !names.contains(k)) {
                warnings.push(Finding::new(
                    format!("{{0}} {unused} is not used by the prompt"),
                    &["prompt.args"],
                ));
            }
        }
        warnings.extend(
            self.env
                .iter()
                .filter_map(|e| e.unmasked_warning(|n| std::env::var(n).ok()))
                .map(|w| Finding::new(format!("{{0}} {w}"), &["env"])),
        );
        // What the agent's set-up refers to that will not reach it: said
        // before the run (and kept in its report, `env_dropped`).
        let host: Vec<(String, String)> = std::env::vars_os()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })
            .collect();
        let home = std::env::var_os("HOME").map(PathBuf::from);
        warnings.extend(
            warden_sandbox::env::dropped(
                &sandbox_needs(self.agent),
                self.sandbox.sandbox != Sandbox::Host,
                &host,
                &self.env,
                home.as_deref(),
            )
            .into_iter()
            .map(Finding::plain),
        );
        let probe = IterationContext {
            iteration: 1,
            iterations: self.session.iterations,
            workdir: self.cwd.clone(),
            run_dir: PathBuf::new(),
            branch: Some("BRANCH".into()),
            base: Some("BASE".into()),
            correction: None,
            retry_of: None,
            check_failure: None,
            prompt_outputs: BTreeMap::new(),
        };
        let prompt = self.prompt_for(&probe)?;
        if self.agent != Agent::Exec {
            self.invocation(prompt, None)?;
        }
        Ok(warnings)
    }

    /// Refuses a check, hook or merge that cannot do what it says.
    fn check_steps(&self) -> Result<(), RequestError> {
        let session = &self.session;
        if let Some(c) = &session.check
            && c.command.trim().is_empty()
        {
            return Err(invalid(
                "{0} is empty: give the command that checks the work (e.g. `cargo test`)",
                &["session.check.command"],
            ));
        }
        let hooks = &session.hooks;
        for (field, hook) in [
            ("session.hooks.host_setup", &hooks.host_setup),
            ("session.hooks.setup", &hooks.setup),
            ("session.hooks.on_success", &hooks.on_success),
            ("session.hooks.finally", &hooks.finally),
        ] {
            if hook.as_ref().is_some_and(|h| h.trim().is_empty()) {
                return Err(invalid(
                    "{0} is empty: give a command or leave it out",
                    &[field],
                ));
            }
        }
        // On the host, a directory a sandboxed agent wrote before (an
        // earlier run there, a batch's other entry) is no place to run a
        // command outside the sandbox: only a new worktree is one no agent
        // has touched yet.
        if hooks.host_setup.is_some()
            && session.worktree.is_none()
            && self.sandbox.sandbox != Sandbox::Host
        {
            return Err(invalid(
                "{0} runs on the host, outside the sandbox, so only in a new worktree no agent has written yet: add {1}",
                &["session.hooks.host_setup", "session.worktree"],
            ));
        }
        if session.merge && session.worktree.is_none() {
            return Err(invalid(
                "{0} merges the session's branch, which only a worktree has: add {1}",
                &["session.merge", "session.worktree"],
            ));
        }
        Ok(())
    }

    /// Refuses a budget the agent's output can never show being spent (a
    /// cost budget for a CLI that reports no cost; any budget for `exec`,
    /// whose plain lines say nothing of tokens or turns); warns where a
    /// cost budget can only be judged at the end of a run.
    fn check_budgets(&self) -> Result<Vec<Finding>, RequestError> {
        use crate::budget::BudgetKind;
        let b = &self.limits.budget;
        let s = &self.session.budget;
        let batch = self.batch_budget.map(|b| b.budget).unwrap_or_default();
        let set: Vec<(BudgetKind, &'static str)> = [
            (
                b.max_cost_usd.is_some(),
                BudgetKind::Cost,
                "limits.budget.max_cost_usd",
            ),
            (
                b.max_tokens.is_some(),
                BudgetKind::Tokens,
                "limits.budget.max_tokens",
            ),
            (
                b.max_turns.is_some(),
                BudgetKind::Turns,
                "limits.budget.max_turns",
            ),
            (
                s.max_cost_usd.is_some(),
                BudgetKind::Cost,
                "session.budget.max_cost_usd",
            ),
            (
                s.max_tokens.is_some(),
                BudgetKind::Tokens,
                "session.budget.max_tokens",
            ),
            (
                s.max_turns.is_some(),
                BudgetKind::Turns,
                "session.budget.max_turns",
            ),
            (
                batch.max_cost_usd.is_some(),
                BudgetKind::Cost,
                "batch_budget.max_cost_usd",
            ),
            (
                batch.max_tokens.is_some(),
                BudgetKind::Tokens,
                "batch_budget.max_tokens",
            ),
            (
                batch.max_turns.is_some(),
                BudgetKind::Turns,
                "batch_budget.max_turns",
            ),
        ]
        .into_iter()
        .filter_map(|(given, kind, field)| given.then_some((kind, field)))
        .collect();
        let (tokens, turns) = ("limits.budget.max_tokens", "limits.budget.max_turns");
        if self.agent == Agent::Exec {
            if let Some((_, field)) = set.first() {
                return Err(invalid(
                    "{0}: `exec` runs a command whose output warden reads as plain lines, \
                     with no cost, tokens or turns in them, so a budget could never fire; \
                     bound it with {1} instead",
                    &[field, "limits.timeout"],
                ));
            }
            return Ok(Vec::new());
        }
        let mut warnings = Vec::new();
        if let Some((_, field)) = set.iter().find(|(k, _)| *k == BudgetKind::Cost) {
            match self.agent.cost_reporting() {
                UsageReporting::None => {
                    return Err(invalid(
                        format!(
                            "{{0}}: `{}` reports no cost in its output, so a cost budget could \
                             never fire; use {{1}} (tokens.total) or {{2}} instead",
                            self.agent
                        ),
                        &[field, tokens, turns],
                    ));
                }
                UsageReporting::AtEnd => warnings.push(Finding::new(
                    format!(
                        "{{0}}: `{}` reports its cost only in its last line, so a cost budget \
                         cannot end one of its runs mid-way: a run over it ends budget_exceeded \
                         (and a session or batch stops there); {{1}} can end a run mid-way",
                        self.agent
                    ),
                    &[field, tokens],
                )),
                UsageReporting::PerStep => {}
            }
        }
        if let Some((_, field)) = set.iter().find(|(k, _)| *k == BudgetKind::Tokens) {
            match self.agent.token_reporting() {
                UsageReporting::None => {
                    return Err(invalid(
                        format!(
                            "{{0}}: `{}` reports no tokens in its output, so a token budget \
                             could never fire; use {{1}} instead",
                            self.agent
                        ),
                        &[field, turns],
                    ));
                }
                UsageReporting::AtEnd => warnings.push(Finding::new(
                    format!(
                        "{{0}}: `{}` reports its tokens only when its run ends, so a token \
                         budget cannot end one of its runs mid-way (a run ended first, by \
                         {{2}} say, reports none): a run over it ends budget_exceeded (and a \
                         session or batch stops there); {{1}} stops it mid-way",
                        self.agent
                    ),
                    &[field, turns, "limits.timeout"],
                )),
                UsageReporting::PerStep => {}
            }
        }
        Ok(warnings)
    }

    /// The context of the first run when there is no session around it:
    /// in `cwd`, without asking git (see [`Self::iteration_context`]).
    pub fn first_iteration(&self) -> IterationContext {
        IterationContext {
            iteration: 1,
            iterations: self.session.iterations,
            workdir: self.cwd.clone(),
            run_dir: PathBuf::new(),
            branch: None,
            base: None,
            correction: None,
            retry_of: None,
            check_failure: None,
            prompt_outputs: BTreeMap::new(),
        }
    }

    /// The context of a run that is not part of a session: in `cwd`, with
    /// the branch and HEAD git gives when the prompt is a template (only
    /// a template uses them; asking git costs a process).
    pub async fn iteration_context(&self) -> IterationContext {
        let mut ctx = self.first_iteration();
        if self.is_template() {
            ctx.branch = crate::git::branch(&self.cwd).await;
            ctx.base = crate::git::head(&self.cwd).await;
        }
        ctx
    }

    /// The prompt of one run: the template filled, the preamble added; for
    /// an output retry, the correction.
    pub fn prompt_for(&self, ctx: &IterationContext) -> Result<String, RequestError> {
        if let Some(RetryOf {
            failure,
            resume: Some(_),
        }) = &ctx.retry_of
        {
            // The resumed session has the task and the work so far.
            return Ok(format!(
                "Your previous attempt was cut off by a transient failure ({}), not by anything you did. Continue the task from where you stopped; do not redo finished steps.",
                failure.words()
            ));
        }
        if let Some((_, correction)) = &ctx.correction {
            let tag = self.output.as_ref().map_or("output", |o| o.tag.as_str());
            return Ok(format!(
                "Your last answer did not give a usable <{tag}> output ({correction}). Reply again with the complete, corrected <{tag}>…</{tag}>."
            ));
        }
        let check_output = ctx
            .check_failure
            .as_ref()
            .map(|c| c.output.clone())
            .unwrap_or_default();
        let (mut prompt, uses_check_output) = match &self.prompt {
            None => (String::new(), false),
            Some(Prompt::Text(text)) => (text.clone(), false),
            Some(Prompt::Template { text, args, .. }) => {
                let mut values = args.clone();
                let builtins = [
                    ("BRANCH", ctx.branch.clone().unwrap_or_default()),
                    ("BASE", ctx.base.clone().unwrap_or_default()),
                    ("ITERATION", ctx.iteration.to_string()),
                    ("ITERATIONS", ctx.iterations.to_string()),
                    ("AGENT", self.agent.name().to_string()),
                    ("CHECK_OUTPUT", check_output),
                ];
                for (k, v) in builtins {
                    values.entry(k.to_string()).or_insert(v);
                }
                let uses = template::placeholders(text)?
                    .iter()
                    .any(|n| n == "CHECK_OUTPUT");
                (template::render(text, &values, &ctx.prompt_outputs)?, uses)
            }
        };
        if let Some(failed) = &ctx.check_failure
            && !uses_check_output
            && self.session.check.as_ref().map(|c| c.feedback) == Some(CheckFeedback::Auto)
        {
            prompt.push_str(&format!(
                "\n\n---\nAfter your last turn, warden ran the check `{}`, and it failed: it {}. The end of its output:\n```\n{}\n```\nFix what it reports; the check runs again when you finish.\n",
                failed.command, failed.how, failed.output
            ));
        }
        if self.preamble {
            let deadline = self.limits.timeout.map(|t| {
                humantime::format_rfc3339_seconds(std::time::SystemTime::now() + t).to_string()
            });
            prompt.push_str("\n\n---\nYou are running unattended under warden, with no one to answer questions.");
            if let Some(d) = deadline {
                prompt.push_str(&format!(
                    " Finish before {d} (also in $WARDEN_DEADLINE, unix seconds)."
                ));
            }
            prompt.push_str(&format!(
                " When the whole task is done, print {} on a line of its own.\n",
                self.limits.completion_signal
            ));
        }
        Ok(prompt)
    }

    /// The agent's command line for `prompt`.
    pub(crate) fn invocation(
        &self,
        prompt: String,
        resume: Option<&str>,
    ) -> Result<warden_agents::Invocation, RequestError> {
        let req = AgentRequest {
            prompt,
            model: self.model.clone(),
            effort: self.effort.clone(),
            resume: resume.map(str::to_string).or_else(|| self.resume.clone()),
            extra_args: self.extra_args.iter().map(Into::into).collect(),
            program: self.agent_bin.clone(),
        };
        Ok(warden_agents::invocation(
            self.agent,
            &req,
            std::env::var_os("PATH").as_ref(),
        )?)
    }
}

/// `a, b and c`.
fn list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// What `agent`'s CLI needs from a sandbox, from its profile.
pub(crate) fn sandbox_needs(agent: Agent) -> SandboxNeeds {
    profile(agent).sandbox
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_survives_json_and_builds_the_same_spec() {
        let mut r = RunRequest::exec(["sh", "-c", "echo hi"]);
        r.limits.stall_timeout = Some(std::time::Duration::from_millis(1500));
        r.env = vec![EnvArg::Name("TOKEN".into())];
        r.session.iterations = 3;
        r.session.budget.max_turns = Some(40);
        // A cluster's node reads the batch's budget, and what was spent
        // before, from the request.
        r.batch_budget = Some(crate::budget::SharedBudget::new(
            crate::budget::BudgetScope::Batch,
            crate::budget::Budget {
                max_cost_usd: crate::budget::Usd::from_dollars(5.0),
                ..Default::default()
            },
            crate::budget::Spent {
                cost_usd: 1.25,
                ..Default::default()
            },
        ));
        r.output = Some(OutputRequest {
            tag: "out".into(),
            schema: Some(("s.json".into(), serde_json::json!({"type": "object"}))),
            retries: 0,
        });
        let json = serde_json::to_string(&r).unwrap();
        let back: RunRequest = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);
        let ctx = back.first_iteration();
        let (a, b) = (r.plan(&ctx).unwrap(), back.plan(&ctx).unwrap());
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        assert_eq!(a.command, ["sh", "-c", "echo hi"]);
        assert_eq!(a.output_tag.as_deref(), Some("out"));
        assert_eq!(a.shared.budgets.len(), 2, "the session's and the batch's");
        assert_eq!(a.shared.budgets[1].spent.cost_usd, 1.25);
    }

    #[test]
    fn a_failed_check_reaches_the_next_prompt_once_and_only_as_asked() {
        let failure = CheckFailure {
            command: "cargo test".into(),
            how: "exited with status 101".into(),
            output: "EXPECTED 42 GOT 41".into(),
        };
        let ctx = |check_failure: Option<CheckFailure>| IterationContext {
            iteration: 2,
            check_failure,
            ..RunRequest::agent(Agent::Claude, "").first_iteration()
        };
        let mut r = RunRequest::agent(Agent::Claude, "Fix the parser.");
        r.session.check = Some(CheckRequest::new("cargo test"));
        assert_eq!(r.prompt_for(&ctx(None)).unwrap(), "Fix the parser.");
        let told = r.prompt_for(&ctx(Some(failure.clone()))).unwrap();
        assert!(told.starts_with("Fix the parser.\n\n---\n"), "{told}");
        assert!(
            told.contains("`cargo test`")
                && told.contains("exited with status 101")
                && told.contains("EXPECTED 42 GOT 41"),
            "{told}"
        );

        // A template that places it gets it there, and no note.
        r.prompt = Some(Prompt::Template {
            text: "Fix it.\nLast check:\n{{CHECK_OUTPUT}}".into(),
            args: BTreeMap::new(),
            commands: false,
        });
        let placed = r.prompt_for(&ctx(Some(failure.clone()))).unwrap();
        assert_eq!(placed, "Fix it.\nLast check:\nEXPECTED 42 GOT 41");
        assert_eq!(
            r.prompt_for(&ctx(None)).unwrap(),
            "Fix it.\nLast check:\n",
            "empty before any failure"
        );

        // `none`: no note (a template still gets its placeholder).
        r.prompt = Some(Prompt::Text("Fix the parser.".into()));
        r.session.check.as_mut().unwrap().feedback = CheckFeedback::None;
        assert_eq!(
            r.prompt_for(&ctx(Some(failure))).unwrap(),
            "Fix the parser."
        );
    }

    #[test]
    fn a_templates_commands_run_only_when_its_text_is_the_users() {
        let mut r = RunRequest::agent(Agent::Claude, "");
        r.prompt = Some(Prompt::Template {
            text: "Context: {{$ git log -1}}".into(),
            args: BTreeMap::new(),
            commands: false,
        });
        assert!(!r.has_prompt_commands() && !r.is_session());
        let ctx = r.first_iteration();
        assert_eq!(r.prompt_for(&ctx).unwrap(), "Context: {{$ git log -1}}");
        if let Some(Prompt::Template { commands, .. }) = &mut r.prompt {
            *commands = true;
        }
        assert!(r.has_prompt_commands() && r.is_session());
    }

    #[test]
    fn checks_hooks_and_merge_that_cannot_work_are_refused_by_field() {
        let mut r = RunRequest::exec(["true"]);
        r.session.check = Some(CheckRequest::new("  "));
        let e = r.check().unwrap_err().to_string();
        assert!(e.starts_with("session.check.command is empty"), "{e}");
        r.session.check = None;
        r.session.hooks.finally = Some(String::new());
        let e = r.check().unwrap_err().to_string();
        assert!(e.starts_with("session.hooks.finally is empty"), "{e}");
        r.session.hooks.finally = None;
        r.session.merge = true;
        let e = r.check().unwrap_err().to_string();
        assert_eq!(
            e,
            "session.merge merges the session's branch, which only a worktree has: add session.worktree"
        );
        assert!(r.is_session());
    }

    #[test]
    fn unknown_fields_are_refused_by_name() {
        let e = serde_json::from_str::<RunRequest>(
            r#"{"agent":"exec","command":["true"],"cwd":"/","timeout":"5s"}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("unknown field `timeout`"), "{e}");
        let e = serde_json::from_str::<RunRequest>(r#"{"agent":"nope","cwd":"/"}"#).unwrap_err();
        assert!(e.to_string().contains("unknown variant `nope`"), "{e}");
    }

    #[test]
    fn check_refuses_what_cannot_run_and_warns_of_unused_values() {
        let mut r = RunRequest::exec(Vec::<String>::new());
        assert!(r.check().unwrap_err().to_string().contains("no command"));
        r.command = vec!["true".into()];
        r.model = Some("m".into());
        let e = r.check().unwrap_err();
        assert_eq!(
            e.to_string(),
            "model is for agents; `exec` runs command as it is"
        );
        assert_eq!(
            e.render(|f| format!("--{f}")),
            "--model is for agents; `exec` runs --command as it is"
        );

        let mut r = RunRequest::agent(Agent::Gemini, "x");
        r.output = Some(OutputRequest {
            tag: "o".into(),
            schema: None,
            retries: 1,
        });
        let e = r.check().unwrap_err().to_string();
        assert!(e.contains("claude, codex and pi, not gemini"), "{e}");

        let mut r = RunRequest::exec(["true"]);
        r.sandbox.no_network = true;
        assert!(
            r.check()
                .unwrap_err()
                .to_string()
                .contains("need a sandbox")
        );

        let mut r = RunRequest::agent(Agent::Claude, "");
        r.prompt = Some(Prompt::Template {
            text: "fix {{ISSUE}} on {{BRANCH}}".into(),
            args: BTreeMap::from([("ISSUE".into(), "7".into()), ("X".into(), "1".into())]),
            commands: false,
        });
        r.agent_bin = Some("/bin/true".into());
        let warnings = r.check().unwrap();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert_eq!(warnings[0].fields(), ["prompt.args"]);
        assert_eq!(
            warnings[0].to_string(),
            "prompt.args X is not used by the prompt"
        );
        assert_eq!(
            warnings[0].render(|_| "--arg".into()),
            "--arg X is not used by the prompt"
        );
        let mut ctx = r.first_iteration();
        ctx.branch = Some("main".into());
        assert_eq!(r.prompt_for(&ctx).unwrap(), "fix 7 on main");
    }

    #[test]
    fn a_budget_the_output_cannot_show_is_refused_naming_the_agent() {
        let cost = crate::budget::Usd::from_dollars(0.5);
        let mut r = RunRequest::agent(Agent::Codex, "x");
        r.agent_bin = Some("/bin/true".into());
        r.limits.budget.max_cost_usd = cost;
        let e = r.check().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid);
        let e = e.to_string();
        assert!(
            e.starts_with("limits.budget.max_cost_usd: `codex` reports no cost")
                && e.contains("limits.budget.max_tokens"),
            "{e}"
        );
        r.limits.budget.max_cost_usd = None;
        r.limits.budget.max_tokens = Some(1000);
        let w = r.check().unwrap();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].to_string()
                .contains("reports its tokens only when its run ends")
                && w[0].fields()
                    == [
                        "limits.budget.max_tokens",
                        "limits.budget.max_turns",
                        "limits.timeout"
                    ],
            "{w:?}"
        );
        r.limits.budget.max_tokens = None;
        r.session.budget.max_tokens = Some(1000);
        assert_eq!(
            r.check().unwrap()[0].fields()[0],
            "session.budget.max_tokens"
        );
        let mut r = RunRequest::agent(Agent::Pi, "x");
        r.agent_bin = Some("/bin/true".into());
        r.limits.budget.max_tokens = Some(1000);
        assert!(r.check().unwrap().is_empty(), "pi reports tokens per call");

        let mut r = RunRequest::agent(Agent::Claude, "x");
        r.agent_bin = Some("/bin/true".into());
        r.session.budget.max_cost_usd = cost;
        let w = r.check().unwrap();
        assert!(w[0].to_string().contains("only in its last line"), "{w:?}");
        assert_eq!(w[0].fields()[0], "session.budget.max_cost_usd");

        let mut r = RunRequest::exec(["true"]);
        r.limits.budget.max_turns = Some(3);
        let e = r.check().unwrap_err().to_string();
        assert!(e.contains("limits.budget.max_turns: `exec`"), "{e}");
    }

    #[test]
    fn a_missing_cli_is_unavailable_and_names_its_package() {
        let e = RequestError::from(AgentError::NotInstalled {
            agent_name: "pi",
            program: "pi".into(),
            install: profile(Agent::Pi).install(),
        });
        assert_eq!(e.kind(), ErrorKind::Unavailable);
        assert!(e.to_string().contains("@mariozechner/pi-coding-agent"));
        assert_eq!(invalid("x", &[]).kind(), ErrorKind::Invalid);
    }

    #[test]
    fn an_output_retry_resumes_the_session_with_the_correction() {
        let mut r = RunRequest::agent(Agent::Claude, "task");
        r.agent_bin = Some("/bin/true".into());
        let mut ctx = r.first_iteration();
        ctx.correction = Some(("sess-1".into(), "no <output> tag".into()));
        let spec = r.plan(&ctx).unwrap();
        let args: Vec<String> = spec
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(
            args.windows(2).any(|w| w == ["--resume", "sess-1"]),
            "{args:?}"
        );
        let stdin = String::from_utf8(spec.stdin.unwrap()).unwrap();
        assert!(stdin.contains("no <output> tag"), "{stdin}");
    }
}
