//! Flags and commands.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use tokio::signal::unix::{SignalKind, signal};
use warden_agents::AgentRequest;
use warden_events::Agent;
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
}

#[derive(Debug, Args)]
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
    /// Read settings from this file instead of ./warden.toml.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

pub async fn dispatch(cli: Cli) -> u8 {
    match cli.command {
        Command::Run(args) => run(*args).await,
        Command::Replay(args) => replay::replay(&args),
        Command::Doctor => crate::doctor::doctor().await,
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
    let cwd = match std::env::current_dir() {
        Ok(d) => d,
        Err(e) => return usage(format_args!("cannot read the current directory: {e}")),
    };
    let resolved = match RawSettings::gather(&args.settings, &cwd).and_then(|raw| raw.resolve()) {
        Ok(s) => s,
        Err(e) => return usage(e),
    };

    let mut spec = if agent == Agent::Exec {
        if args.prompt.is_some() || args.prompt_text.is_some() || args.prompt_file.is_some() {
            return usage(
                "`exec` runs a command, not a prompt: put the command after `--`, e.g. warden run exec -- make test",
            );
        }
        if args.rest.is_empty() {
            return usage(
                "no command given for `exec`\n  put it after `--`, e.g.: warden run exec -- sh -c 'echo hello'",
            );
        }
        RunSpec::exec(&args.rest)
    } else {
        let prompt = match read_prompt(&args) {
            Ok(p) => p.unwrap_or_default(),
            Err(e) => return usage(e),
        };
        let request = AgentRequest {
            prompt,
            model: args.model.clone(),
            effort: args.effort.clone(),
            resume: args.resume.clone(),
            extra_args: args.rest.iter().map(Into::into).collect(),
            program: args.agent_bin.clone(),
        };
        let path = std::env::var_os("PATH");
        let inv = match warden_agents::invocation(agent, &request, path.as_ref()) {
            Ok(inv) => inv,
            Err(e @ warden_agents::AgentError::NotInstalled { .. }) => {
                eprintln!("warden: error: {e}");
                return 6;
            }
            Err(e) => return usage(e),
        };
        let mut command = vec![inv.program];
        command.extend(inv.args);
        let mut spec = RunSpec::exec(command);
        spec.agent = agent;
        spec.env = inv.env;
        spec.stdin = inv.stdin;
        spec
    };
    spec.cwd = cwd;
    spec.limits = resolved.limits.clone();
    spec.containment = resolved.containment;
    spec.run_dir = resolved.run_dir.clone();
    spec.env_args = match args.env.iter().map(|e| EnvArg::parse(e)).collect() {
        Ok(v) => v,
        Err(e) => return usage(e),
    };
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
        return usage(
            "--no-network, --ro and --rw need a sandbox: add --sandbox bwrap (or docker, podman)",
        );
    }
    spec.sandbox = SandboxOptions {
        sandbox,
        no_network: resolved.no_network,
        ro: args.ro.iter().map(|p| absolute(&spec.cwd, p)).collect(),
        rw: args.rw.iter().map(|p| absolute(&spec.cwd, p)).collect(),
        image: resolved.image.clone(),
    };

    let mut handle = match Run::new(spec).spawn() {
        Ok(h) => h,
        Err(e) if e.is_unavailable() => {
            eprintln!("warden: error: {e}");
            return 6;
        }
        Err(e) => return usage(e),
    };
    let mut renderer = Renderer::new(&resolved, agent, handle.run_dir());
    renderer.started_note(&resolved.limits);

    let canceller = handle.canceller();
    let signals = tokio::spawn(async move {
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
                eprintln!("warden: {name}: cancelling the run (send it again to kill at once)");
                canceller.cancel();
            } else {
                eprintln!("warden: {name} again: killing the run now");
                canceller.kill();
            }
        }
    });

    while let Some(ev) = handle.next_event().await {
        renderer.event(&ev);
    }
    let report = handle.wait().await;
    signals.abort();
    renderer.finished(&report);
    report
        .verdict
        .map_or(70, |v| u8::try_from(v.exit_code()).unwrap_or(70))
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
