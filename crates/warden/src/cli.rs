//! Flags and commands.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use clap::{Args, Parser, Subcommand};
use tokio::signal::unix::{SignalKind, signal};
use warden_agents::AgentRequest;
use warden_events::Agent;
use warden_run::session::{
    IterationContext, SessionControl, SessionEvent, SessionOptions, WorktreeRequest, run_session,
};
use warden_run::{EnvArg, Run, RunSpec, Sandbox, SandboxChoice, SandboxOptions};

use crate::render::Renderer;
use crate::replay;
use crate::settings::RawSettings;

#[derive(Debug, Parser)]
#[command(
    name = "warden",
    version,
    about = "Run AI coding agents headless and supervise every run: it never hangs, never leaks a process, never loses output, and always says why it ended."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run an agent (or any command with `exec`) under supervision.
    Run(Box<RunArgs>),
    /// Decode a recorded stdout (a run's stdout.log) offline and summarize it.
    Replay(ReplayArgs),
    /// What this machine can do: agent CLIs, sandboxes, containment.
    Doctor,
    /// Explain a finished run (or session) from its directory; --html draws its timeline.
    Report(ReportArgs),
    /// Print shell completions (bash, zsh, fish, elvish, powershell).
    Completions { shell: clap_complete::Shell },
    /// Print the man page (roff) on stdout.
    Man,
    /// Run many agents from a TOML file, N at a time.
    Batch(BatchArgs),
}

#[derive(Debug, Args)]
pub struct BatchArgs {
    /// The batch file: `[defaults]`, then one `[[run]]` table per run.
    pub file: PathBuf,
    /// How many runs at once.
    #[arg(short = 'j', long, value_name = "N", default_value_t = 4)]
    pub jobs: usize,
    /// Where the batch directory goes [default: .warden/batches/<id>].
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Only the summary, no progress lines.
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A run directory (.warden/runs/<id>) or a session directory.
    pub dir: PathBuf,
    /// Also write the timeline as one self-contained HTML file.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Silences at least this long are listed and marked.
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub silence: String,
}

#[derive(Debug, Args, Default)]
pub struct RunArgs {
    /// The agent: claude, codex, opencode, pi, gemini, or exec (any command, given after `--`).
    pub agent: String,

    /// The prompt. Or use -f FILE; `-` reads it from stdin.
    pub prompt: Option<String>,

    /// The prompt, for one that starts with `-`.
    #[arg(
        long = "prompt",
        value_name = "TEXT",
        allow_hyphen_values = true,
        conflicts_with = "prompt"
    )]
    pub prompt_text: Option<String>,

    /// Read the prompt from this file (`-` for stdin).
    #[arg(short = 'f', long = "prompt-file", value_name = "FILE")]
    pub prompt_file: Option<PathBuf>,

    /// The model, passed to the agent's CLI.
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,

    /// Reasoning effort, for CLIs that take one (codex, opencode, pi).
    #[arg(long, value_name = "LEVEL")]
    pub effort: Option<String>,

    /// Continue this session of the agent.
    #[arg(long, value_name = "SESSION")]
    pub resume: Option<String>,

    /// The agent CLI's executable, if it is not on PATH under its usual name.
    #[arg(long, value_name = "PATH")]
    pub agent_bin: Option<PathBuf>,

    /// Give the agent this variable (from warden's environment, or with a
    /// value); it passes into a sandbox and is masked in every report. Repeatable.
    #[arg(long = "env", value_name = "NAME[=VALUE]")]
    pub env: Vec<String>,

    /// Make PATH visible read-only inside the sandbox. Repeatable.
    #[arg(long = "ro", value_name = "PATH")]
    pub ro: Vec<PathBuf>,

    /// Make PATH writable inside the sandbox. Repeatable.
    #[arg(long = "rw", value_name = "PATH")]
    pub rw: Vec<PathBuf>,

    /// Work in a new git worktree on a new branch (named, or
    /// warden/<name>/<id>), made from HEAD or --base.
    #[arg(long, value_name = "BRANCH", num_args = 0..=1, default_missing_value = "")]
    pub worktree: Option<String>,

    /// The commit or ref the worktree starts from [default: HEAD].
    #[arg(long, value_name = "REF", requires = "worktree")]
    pub base: Option<String>,

    /// Keep the worktree at the end even when it is clean.
    #[arg(long, requires = "worktree")]
    pub keep_worktree: bool,

    /// Work in DIR instead of the current directory.
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,

    /// Run up to N iterations, a fresh agent each, until one prints the completion signal.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub iterations: u32,

    /// A name for the session (used in branch names).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,

    /// Fill {{NAME}} in the prompt file. Repeatable.
    #[arg(long = "arg", value_name = "NAME=VALUE")]
    pub arg: Vec<String>,

    /// Add a short note to the prompt: the deadline and the completion signal to print.
    #[arg(long)]
    pub preamble: bool,

    /// Take the last <TAG>…</TAG> of the agent's final text into the report's `output`.
    #[arg(long, value_name = "TAG")]
    pub output_tag: Option<String>,

    /// Validate the tagged output as JSON against this JSON Schema.
    #[arg(long, value_name = "FILE")]
    pub output_schema: Option<PathBuf>,

    /// When the output is missing or invalid, resume the agent's session with a correction, up to N times.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub output_retries: u32,

    /// For `exec`: the command and its arguments. For an agent: extra
    /// arguments for its CLI.
    #[arg(last = true, value_name = "ARGS")]
    pub rest: Vec<String>,

    #[command(flatten)]
    pub settings: SettingFlags,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The agent whose output this is.
    pub agent: String,
    /// The recorded stdout, e.g. .warden/runs/<run-id>/stdout.log.
    pub file: PathBuf,
    /// Print the events as JSON lines, then the summary object.
    #[arg(long)]
    pub json: bool,
}

/// Every setting flag; each also comes from `WARDEN_<NAME>` and from
/// `warden.toml`. Values are taken as text and validated in one place
/// (`settings`), so a bad value gets the same message from every source.
#[derive(Debug, Args, Default)]
pub struct SettingFlags {
    /// Wall clock for the run [default: 1h; 0 disables].
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// Kill the run after this long with no activity [default: 15m].
    #[arg(long, value_name = "DURATION")]
    pub stall_timeout: Option<String>,
    /// Kill the run if no activity at all comes this soon [default: 2m].
    #[arg(long, value_name = "DURATION")]
    pub startup_timeout: Option<String>,
    /// After the agent says it is done, end the run after this much silence [default: 60s].
    #[arg(long, value_name = "DURATION")]
    pub completion_timeout: Option<String>,
    /// The string that says the task is done [default: <promise>COMPLETE</promise>].
    #[arg(long, value_name = "TEXT")]
    pub completion_signal: Option<String>,
    /// After the agent exits, how long to keep reading its output [default: 5s].
    #[arg(long, value_name = "DURATION")]
    pub drain_grace: Option<String>,
    /// Between SIGTERM and SIGKILL [default: 10s].
    #[arg(long, value_name = "DURATION")]
    pub kill_grace: Option<String>,
    /// Lines longer than this are logged but not decoded [default: 8MiB].
    #[arg(long, value_name = "BYTES")]
    pub max_line: Option<String>,
    /// How to contain the run's processes: auto, cgroup or subreaper [default: auto].
    #[arg(long, value_name = "MODE")]
    pub containment: Option<String>,
    /// Where the run's artifacts go [default: .warden/runs/<run-id>].
    #[arg(long, value_name = "DIR")]
    pub run_dir: Option<String>,
    /// Where the agent runs: host, bwrap, docker, podman, or auto (bwrap where it works) [default: host].
    #[arg(long, value_name = "SANDBOX")]
    pub sandbox: Option<String>,
    /// Cut the network inside the sandbox (agents that call a model API need it).
    #[arg(long)]
    pub no_network: bool,
    /// The container image, for --sandbox docker or podman.
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// Write the events as JSON lines on stdout.
    #[arg(long)]
    pub json: bool,
    /// Do not echo the agent's output; warnings and the summary remain.
    #[arg(short, long)]
    pub quiet: bool,
    /// Off a terminal: how often to say the run is alive, and how long it has been quiet [default: 30s; 0 disables].
    #[arg(long, value_name = "DURATION")]
    pub heartbeat: Option<String>,
    /// Read settings from this file instead of ./warden.toml.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

pub async fn dispatch(cli: Cli) -> u8 {
    match cli.command {
        Command::Run(args) => run(*args).await,
        Command::Replay(args) => replay::replay(&args),
        Command::Doctor => crate::doctor::doctor().await,
        Command::Batch(args) => crate::batch::batch(args).await,
        Command::Report(args) => crate::report_cmd::report(&args),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Cli::command(), "warden", &mut std::io::stdout());
            0
        }
        Command::Man => {
            use clap::CommandFactory;
            match clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout()) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("warden: error: could not write the man page: {e}");
                    70
                }
            }
        }
    }
}

/// Prints a usage error and gives its exit code.
fn usage(msg: impl std::fmt::Display) -> u8 {
    eprintln!("warden: error: {msg}");
    2
}

/// The prompt from the argument, the file, or stdin.
fn read_prompt(args: &RunArgs) -> Result<Option<String>, String> {
    let from_stdin = || -> Result<String, String> {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| format!("could not read the prompt from stdin: {e}"))?;
        Ok(s)
    };
    let prompt = args.prompt.as_ref().or(args.prompt_text.as_ref());
    match (prompt, &args.prompt_file) {
        (Some(_), Some(_)) => {
            Err("give the prompt as an argument or with -f FILE, not both".into())
        }
        (Some(p), None) if p == "-" => from_stdin().map(Some),
        (Some(p), None) => Ok(Some(p.clone())),
        (None, Some(f)) if f.as_os_str() == "-" => from_stdin().map(Some),
        (None, Some(f)) => std::fs::read_to_string(f)
            .map(Some)
            .map_err(|e| format!("could not read the prompt file {}: {e}", f.display())),
        (None, None) if !std::io::stdin().is_terminal() => from_stdin().map(Some),
        (None, None) => Ok(None),
    }
}

async fn run(args: RunArgs) -> u8 {
    let agent: Agent = match args.agent.parse() {
        Ok(a) => a,
        Err(e) => {
            return usage(format_args!(
                "{e}\n  for any command: warden run exec -- CMD [ARGS...]"
            ));
        }
    };
    let here = match std::env::current_dir() {
        Ok(d) => d,
        Err(e) => return usage(format_args!("cannot read the current directory: {e}")),
    };
    let cwd = match &args.cwd {
        Some(d) => match absolute(&here, d).canonicalize() {
            Ok(d) if d.is_dir() => d,
            _ => return usage(format_args!("--cwd {}: no such directory", d.display())),
        },
        None => here,
    };
    let resolved = match RawSettings::gather(&args.settings, &cwd).and_then(|raw| raw.resolve()) {
        Ok(s) => s,
        Err(e) => return usage(e),
    };
    if args.iterations == 0 {
        return usage("--iterations must be at least 1");
    }

    // What stays the same for every run of the session.
    let plan = match Plan::new(&args, agent, &cwd, &resolved) {
        Ok(p) => p,
        Err(code) => return code,
    };

    let single = args.iterations == 1 && args.worktree.is_none() && args.output_retries == 0;
    if single {
        let ctx = IterationContext {
            iteration: 1,
            iterations: 1,
            workdir: cwd.clone(),
            run_dir: PathBuf::new(),
            // Only a template needs them; asking git costs a process.
            branch: plan
                .templated
                .then(|| warden_run::git::branch(&cwd))
                .flatten(),
            base: plan
                .templated
                .then(|| warden_run::git::head(&cwd))
                .flatten(),
            correction: None,
        };
        let mut spec = match plan.spec(&ctx) {
            Ok(s) => s,
            Err(e) => return usage(e),
        };
        spec.run_dir = resolved.run_dir.clone();
        return run_once(spec, agent, &resolved).await;
    }
    run_session_cli(args, agent, cwd, resolved, plan).await
}

/// Everything needed to build one run's spec.
pub(crate) struct Plan {
    agent: Agent,
    /// The prompt as given; a template when it came from a file or with --arg.
    prompt: Option<String>,
    templated: bool,
    args: std::collections::BTreeMap<String, String>,
    preamble: bool,
    request: AgentRequest,
    exec_command: Vec<String>,
    limits: warden_run::Limits,
    containment: warden_run::ContainmentChoice,
    sandbox: SandboxOptions,
    env_args: Vec<EnvArg>,
    output_tag: Option<String>,
    output_schema: Option<(PathBuf, serde_json::Value)>,
}

impl Plan {
    pub(crate) fn new(
        args: &RunArgs,
        agent: Agent,
        cwd: &std::path::Path,
        resolved: &crate::settings::Resolved,
    ) -> Result<Plan, u8> {
        let env_args = args
            .env
            .iter()
            .map(|e| EnvArg::parse(e))
            .collect::<Result<Vec<_>, _>>()
            .map_err(usage)?;
        let sandbox = match resolved.sandbox {
            SandboxChoice::Host => Sandbox::Host,
            SandboxChoice::Use(s) => s,
            SandboxChoice::Auto => {
                let (s, why) = warden_sandbox::probe::resolve_auto();
                if !resolved.quiet {
                    eprintln!("warden: {why}");
                }
                s
            }
        };
        if sandbox == Sandbox::Host
            && (resolved.no_network || !args.ro.is_empty() || !args.rw.is_empty())
        {
            return Err(usage(
                "--no-network, --ro and --rw need a sandbox: add --sandbox bwrap (or docker, podman)",
            ));
        }
        let mut template_args = std::collections::BTreeMap::new();
        for a in &args.arg {
            let (k, v) = warden_run::template::parse_arg(a).map_err(usage)?;
            template_args.insert(k, v);
        }
        let output_schema = match &args.output_schema {
            Some(path) => {
                let path = absolute(cwd, path);
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    usage(format_args!(
                        "could not read the output schema {}: {e}",
                        path.display()
                    ))
                })?;
                let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                    usage(format_args!(
                        "the output schema {} is not JSON: {e}",
                        path.display()
                    ))
                })?;
                Some((path, value))
            }
            None => None,
        };
        if output_schema.is_some() && args.output_tag.is_none() {
            return Err(usage(
                "--output-schema needs --output-tag TAG: the tag the agent wraps its output in",
            ));
        }
        if args.output_retries > 0 && !matches!(agent, Agent::Claude | Agent::Codex | Agent::Pi) {
            return Err(usage(format_args!(
                "--output-retries resumes the agent's session, which warden does for claude, codex and pi, not {agent}"
            )));
        }
        let (prompt, templated, exec_command) = if agent == Agent::Exec {
            if args.prompt.is_some() || args.prompt_text.is_some() || args.prompt_file.is_some() {
                return Err(usage(
                    "`exec` runs a command, not a prompt: put the command after `--`, e.g. warden run exec -- make test",
                ));
            }
            for (flag, given) in [
                ("--model", args.model.is_some()),
                ("--effort", args.effort.is_some()),
                ("--resume", args.resume.is_some()),
                ("--agent-bin", args.agent_bin.is_some()),
                ("--arg", !args.arg.is_empty()),
                ("--preamble", args.preamble),
            ] {
                if given {
                    return Err(usage(format_args!(
                        "{flag} is for agents; `exec` runs the command after `--` as it is"
                    )));
                }
            }
            if args.rest.is_empty() {
                return Err(usage(
                    "no command given for `exec`\n  put it after `--`, e.g.: warden run exec -- sh -c 'echo hello'",
                ));
            }
            (None, false, args.rest.clone())
        } else {
            let prompt = read_prompt(args).map_err(usage)?.unwrap_or_default();
            let templated = args.prompt_file.is_some() || !args.arg.is_empty();
            (Some(prompt), templated, Vec::new())
        };
        let plan = Plan {
            agent,
            prompt,
            templated,
            args: template_args,
            preamble: args.preamble,
            request: AgentRequest {
                prompt: String::new(),
                model: args.model.clone(),
                effort: args.effort.clone(),
                resume: args.resume.clone(),
                extra_args: args.rest.iter().map(Into::into).collect(),
                program: args.agent_bin.clone(),
            },
            exec_command,
            limits: resolved.limits.clone(),
            containment: resolved.containment,
            sandbox: SandboxOptions {
                sandbox,
                no_network: resolved.no_network,
                ro: args.ro.iter().map(|p| absolute(cwd, p)).collect(),
                rw: args.rw.iter().map(|p| absolute(cwd, p)).collect(),
                image: resolved.image.clone(),
            },
            env_args,
            output_tag: args.output_tag.clone(),
            output_schema,
        };
        // Check the template once, before anything starts: a missing value
        // is an error, an unused one a warning.
        if let Some(p) = &plan.prompt
            && plan.templated
        {
            let names = warden_run::template::placeholders(p).map_err(usage)?;
            for unused in plan.args.keys().filter(|k| !names.contains(k)) {
                eprintln!("warden: warning: --arg {unused} is not used by the prompt");
            }
        }
        let probe = IterationContext {
            iteration: 1,
            iterations: args.iterations,
            workdir: cwd.to_path_buf(),
            run_dir: PathBuf::new(),
            branch: Some("BRANCH".into()),
            base: Some("BASE".into()),
            correction: None,
        };
        match plan.prompt_for(&probe) {
            Ok(_) => {}
            Err(e) => return Err(usage(e)),
        }
        if agent != Agent::Exec {
            let mut req = plan.request.clone();
            req.prompt = plan.prompt_for(&probe).unwrap_or_default();
            match warden_agents::invocation(agent, &req, std::env::var_os("PATH").as_ref()) {
                Ok(_) => {}
                Err(e @ warden_agents::AgentError::NotInstalled { .. }) => {
                    eprintln!("warden: error: {e}");
                    return Err(6);
                }
                Err(e) => return Err(usage(e)),
            }
        }
        Ok(plan)
    }

    /// The prompt for one run: the template filled, the preamble added.
    fn prompt_for(&self, ctx: &IterationContext) -> Result<String, String> {
        if let Some((_, correction)) = &ctx.correction {
            let tag = self.output_tag.as_deref().unwrap_or("output");
            return Ok(format!(
                "Your last answer did not give a usable <{tag}> output ({correction}). Reply again with the complete, corrected <{tag}>…</{tag}>."
            ));
        }
        let raw = self.prompt.clone().unwrap_or_default();
        let mut prompt = if self.templated {
            let mut values = self.args.clone();
            let builtins = [
                ("BRANCH", ctx.branch.clone().unwrap_or_default()),
                ("BASE", ctx.base.clone().unwrap_or_default()),
                ("ITERATION", ctx.iteration.to_string()),
                ("ITERATIONS", ctx.iterations.to_string()),
                ("AGENT", self.agent.name().to_string()),
            ];
            for (k, v) in builtins {
                values.entry(k.to_string()).or_insert(v);
            }
            warden_run::template::render(&raw, &values).map_err(|e| e.to_string())?
        } else {
            raw
        };
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

    /// The spec of one run.
    pub(crate) fn spec(&self, ctx: &IterationContext) -> Result<RunSpec, String> {
        let mut spec = if self.agent == Agent::Exec {
            RunSpec::exec(&self.exec_command)
        } else {
            let mut req = self.request.clone();
            req.prompt = self.prompt_for(ctx)?;
            if let Some((session, _)) = &ctx.correction {
                req.resume = Some(session.clone());
            }
            let inv =
                warden_agents::invocation(self.agent, &req, std::env::var_os("PATH").as_ref())
                    .map_err(|e| e.to_string())?;
            let mut command = vec![inv.program];
            command.extend(inv.args);
            let mut spec = RunSpec::exec(command);
            spec.agent = self.agent;
            spec.env = inv.env;
            spec.stdin = inv.stdin;
            spec
        };
        spec.cwd = ctx.workdir.clone();
        spec.limits = self.limits.clone();
        spec.containment = self.containment;
        spec.sandbox = self.sandbox.clone();
        spec.env_args = self.env_args.clone();
        spec.output_tag = self.output_tag.clone();
        spec.output_schema = self.output_schema.clone();
        Ok(spec)
    }
}

impl Plan {
    /// The stall timeout the runs will have, for a view.
    pub(crate) fn stall(&self) -> Option<std::time::Duration> {
        self.limits.armed_stall_timeout()
    }
}

/// A run name made safe as a directory name.
pub(crate) fn safe_name(name: &str) -> String {
    warden_run::git::dir_name(name)
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

fn watch_signals(stopper: Stopper, notify: Notify) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) else {
            return;
        };
        let mut count = 0;
        loop {
            let name = tokio::select! {
                _ = int.recv() => "SIGINT",
                _ = term.recv() => "SIGTERM",
                _ = hup.recv() => "SIGHUP",
            };
            count += 1;
            if count == 1 {
                notify(&format!(
                    "{name}: cancelling the run (send it again to kill at once)"
                ));
            } else {
                notify(&format!("{name} again: killing the run now"));
            }
            stopper.cancel(count > 1);
        }
    })
}

async fn run_once(spec: RunSpec, agent: Agent, resolved: &crate::settings::Resolved) -> u8 {
    let mut handle = match Run::new(spec).spawn() {
        Ok(h) => h,
        Err(e) if e.is_unavailable() => {
            eprintln!("warden: error: {e}");
            return 6;
        }
        Err(e) => return usage(e),
    };
    let renderer = Renderer::new(resolved, agent, handle.run_dir());
    renderer.started_note(&resolved.limits);
    let ticker = renderer.start_ticker();
    let view = renderer.clone();
    let signals = watch_signals(
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
    report
        .verdict
        .map_or(70, |v| u8::try_from(v.exit_code()).unwrap_or(70))
}

async fn run_session_cli(
    args: RunArgs,
    agent: Agent,
    cwd: PathBuf,
    resolved: crate::settings::Resolved,
    plan: Plan,
) -> u8 {
    let opts = SessionOptions {
        name: args
            .name
            .clone()
            .unwrap_or_else(|| agent.name().to_string()),
        iterations: args.iterations,
        cwd,
        worktree: args.worktree.as_ref().map(|branch| WorktreeRequest {
            branch: Some(branch.clone()).filter(|b| !b.is_empty()),
            base: args.base.clone(),
            keep: args.keep_worktree,
        }),
        session_dir: resolved.run_dir.clone(),
        output_retries: args.output_retries,
        can_resume: matches!(agent, Agent::Claude | Agent::Codex | Agent::Pi),
    };
    let control = SessionControl::default();
    let current: Arc<Mutex<Option<Renderer>>> = Arc::default();
    let view = current.clone();
    let signals = watch_signals(
        Stopper::Session(control.clone()),
        Arc::new(move |m| match view.lock().expect("lock").as_ref() {
            Some(r) => r.notice(m),
            None => eprintln!("warden: {m}"),
        }),
    );
    let mut renderer: Option<(Renderer, tokio::task::JoinHandle<()>)> = None;
    let quiet = resolved.quiet;
    let iterations = args.iterations;
    let result = run_session(
        opts,
        control,
        |ctx| plan.spec(ctx),
        |ev| match ev {
            SessionEvent::Worktree(wt) => {
                if !quiet {
                    eprintln!(
                        "warden: working in a new worktree {} on branch {}",
                        wt.path.display(),
                        wt.branch
                    );
                }
            }
            SessionEvent::IterationStarted { iteration, run_dir } => {
                if !quiet {
                    eprintln!("warden: iteration {iteration}/{iterations}");
                }
                let r = Renderer::new(&resolved, agent, run_dir);
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
        },
    )
    .await;
    signals.abort();
    let report = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("warden: error: {e}");
            return if e.is_unavailable() { 6 } else { 2 };
        }
    };
    let verdict = report.verdict.map_or("none", |v| v.as_str());
    eprintln!(
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
            eprintln!(
                "warden: the worktree was clean and is removed; branch {} keeps the commits",
                wt.branch
            );
        } else {
            eprintln!(
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
        eprintln!("warden: error: {e}");
    }
    eprintln!(
        "warden: session report: {}",
        report.session_dir.join("session.json").display()
    );
    match report.verdict {
        Some(v) => u8::try_from(v.exit_code()).unwrap_or(70),
        None => 2,
    }
}

fn absolute(cwd: &std::path::Path, p: &std::path::Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        cwd.join(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn setting_flags_match_the_settings_table() {
        let cmd = Cli::command();
        let run = cmd.find_subcommand("run").unwrap();
        for key in crate::settings::KEYS {
            let flag = key.name.replace('_', "-");
            assert!(
                run.get_arguments()
                    .any(|a| a.get_long() == Some(flag.as_str())),
                "--{flag} is missing"
            );
        }
    }
}
