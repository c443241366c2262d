//! Flags and commands.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use tokio::signal::unix::{SignalKind, signal};
use warden_run::{Run, RunSpec};

use crate::render::Renderer;
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
    Run(RunArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The agent: `exec` runs any command given after `--`.
    pub agent: String,

    /// The command and its arguments (for `exec`), after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,

    #[command(flatten)]
    pub settings: SettingFlags,
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
    /// After the completion signal, end the run after this much silence [default: 60s].
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
    /// Write the events as JSON lines on stdout.
    #[arg(long)]
    pub json: bool,
    /// Do not echo the command's output; warnings and the summary remain.
    #[arg(short, long)]
    pub quiet: bool,
    /// Read settings from this file instead of ./warden.toml.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

pub async fn dispatch(cli: Cli) -> u8 {
    match cli.command {
        Command::Run(args) => run(args).await,
    }
}

const AGENTS: &[&str] = &["exec"];

async fn run(args: RunArgs) -> u8 {
    if !AGENTS.contains(&args.agent.as_str()) {
        eprintln!(
            "warden: error: unknown agent `{}`; known agents: {}\n  for any command: warden run exec -- CMD [ARGS...]",
            args.agent,
            AGENTS.join(", ")
        );
        return 2;
    }
    if args.command.is_empty() {
        eprintln!(
            "warden: error: no command given for `exec`\n  put it after `--`, e.g.: warden run exec -- sh -c 'echo hello'"
        );
        return 2;
    }
    let cwd = match std::env::current_dir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("warden: error: cannot read the current directory: {e}");
            return 2;
        }
    };
    let resolved = match RawSettings::gather(&args.settings, &cwd).and_then(|raw| raw.resolve()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("warden: error: {e}");
            return 2;
        }
    };

    let mut spec = RunSpec::exec(&args.command);
    spec.agent = args.agent.clone();
    spec.cwd = cwd;
    spec.limits = resolved.limits.clone();
    spec.containment = resolved.containment;
    spec.run_dir = resolved.run_dir.clone();

    let mut handle = match Run::new(spec).spawn() {
        Ok(h) => h,
        Err(e) => {
            eprintln!("warden: error: {e}");
            return 2;
        }
    };
    let mut renderer = Renderer::new(&resolved, &args.agent, handle.run_dir());
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
