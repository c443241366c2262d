//! Flags and commands.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use warden_events::Agent;

use crate::render::console::{self, Priority, Stream};
use crate::replay;
use crate::runner::{run_once, run_session_cli};
use crate::settings::{RawSettings, SettingFlags};
use crate::signals::Signals;

#[derive(Debug, Parser)]
#[command(
    name = "warden",
    version,
    about = "Run AI coding agents headless and supervise every run: it never hangs, never leaks a process, never loses output, and always says why it ended."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run an agent (or any command with `exec`) under supervision.
    Run(Box<RunArgs>),
    /// Decode a recorded stdout (a run's stdout.log) offline and summarize it.
    Replay(ReplayArgs),
    /// What this machine can do: agent CLIs, sandboxes, containment.
    Doctor(DoctorArgs),
    /// Explain a finished run (or session) from its directory; --html draws its timeline.
    Report(ReportArgs),
    /// Print shell completions (bash, zsh, fish, elvish, powershell).
    Completions { shell: clap_complete::Shell },
    /// Print a man page (roff): warden's, or a command's (`warden man run`).
    Man {
        /// The command whose page to print (run, batch, report, ...).
        command: Option<String>,
        /// Write every page (warden.1, warden-run.1, ...) into DIR instead.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Run many agents from a TOML file, N at a time.
    Batch(BatchArgs),
}

#[derive(Debug, Args)]
pub(crate) struct BatchArgs {
    /// The batch file: `[defaults]`, then one `[[run]]` table per run.
    pub file: PathBuf,
    /// How many runs at once (1 to 1024).
    #[arg(short = 'j', long, value_name = "N", default_value_t = 4, value_parser = jobs)]
    pub jobs: usize,
    /// Where the batch directory goes [default: .warden/batches/<id>].
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Only the summary, no progress lines.
    #[arg(short, long)]
    pub quiet: bool,
    /// At the end, print batch.json's content on stdout as one JSON
    /// document (the live view stays on stderr).
    #[arg(long)]
    pub json: bool,
}

/// The most runs a batch starts at once: each is a process tree with its
/// pipes and clocks, and a number past this is a typo, not a plan.
pub(crate) const MAX_JOBS: usize = 1024;

fn jobs(s: &str) -> Result<usize, String> {
    let n: u128 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a whole number; e.g. -j 4"))?;
    match usize::try_from(n) {
        Ok(0) => Err("at least 1 run must be allowed at once; e.g. -j 4".into()),
        Ok(n) if n <= MAX_JOBS => Ok(n),
        _ => Err(format!("{s} is too large: at most {MAX_JOBS} runs at once")),
    }
}

#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    /// Print what was found as one JSON document instead.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ReportArgs {
    /// A run directory (.warden/runs/<id>) or a session directory.
    pub dir: PathBuf,
    /// Also write the timeline as one self-contained HTML file.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Silences at least this long are listed and marked.
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub silence: String,
    /// Print the run's events as JSON lines instead (as `--json` showed
    /// them): each `lines` event of events.jsonl becomes the `text` or
    /// `stderr` events it stands for, read back from the logs.
    #[arg(long, conflicts_with = "html")]
    pub events: bool,
    /// Print the report as one JSON document instead: `run.json` (and
    /// `session.json`) read back, and whether each run's logs still match
    /// what warden wrote.
    #[arg(long, conflicts_with_all = ["html", "events"])]
    pub json: bool,
}

#[derive(Debug, Args, Default)]
pub(crate) struct RunArgs {
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

    // Every setting (`--timeout`, `--sandbox`, ...), built from the
    // settings table; each also comes from `WARDEN_<NAME>` and `warden.toml`.
    #[command(flatten)]
    pub settings: SettingFlags,
}

#[derive(Debug, Args)]
pub(crate) struct ReplayArgs {
    /// The agent whose output this is.
    pub agent: String,
    /// The recorded stdout, e.g. .warden/runs/<run-id>/stdout.log.
    pub file: PathBuf,
    /// The recorded stderr (stderr.log): the retries some agents
    /// (Gemini CLI, OpenCode) announce only there are counted too.
    #[arg(long, value_name = "FILE")]
    pub stderr: Option<PathBuf>,
    /// Print the events as JSON lines, then the summary object.
    #[arg(long)]
    pub json: bool,
}

pub(crate) async fn dispatch(cli: Cli) -> u8 {
    // Only a run or a batch catches signals (see `for_a_run`); any other
    // command gets the default actions back before it does anything.
    if !matches!(cli.command, Command::Run(_) | Command::Batch(_)) {
        crate::signals::default_actions();
    }
    match cli.command {
        Command::Run(args) => run(*args, for_a_run()).await,
        Command::Batch(args) => crate::batch::batch(args, for_a_run()).await,
        Command::Replay(args) => replay::replay(&args),
        Command::Doctor(args) => crate::doctor::doctor(&args).await,
        Command::Report(args) => crate::report_cmd::report(&args),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            // Into memory first: clap_complete panics on a failed write.
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "warden", &mut script);
            console::raw(Stream::Stdout, Priority::Droppable, script);
            0
        }
        Command::Man { command, dir } => man(command.as_deref(), dir.as_deref()),
    }
}

/// A run or a batch catches signals to cancel cleanly, and its output
/// must never make it wait. The signals are taken over first, while no
/// other thread exists that could take one in the handover.
fn for_a_run() -> Signals {
    let signals = Signals::install();
    console::for_a_run();
    signals
}

/// The man pages: `warden` and one per command (`warden-run`, ...).
fn man(command: Option<&str>, dir: Option<&std::path::Path>) -> u8 {
    use clap::CommandFactory;
    let top = Cli::command();
    let mut pages: Vec<(String, clap::Command)> = vec![("warden".into(), top.clone())];
    for sub in top.get_subcommands() {
        let name = format!("warden-{}", sub.get_name());
        pages.push((name.clone(), sub.clone().name(name)));
    }
    let render = |page: &clap::Command, out: &mut dyn std::io::Write| {
        clap_mangen::Man::new(page.clone()).render(out)
    };
    if let Some(dir) = dir {
        if let Err(e) = std::fs::create_dir_all(dir) {
            return usage(format_args!("could not create {}: {e}", dir.display()));
        }
        for (name, page) in &pages {
            let path = dir.join(format!("{name}.1"));
            let written = std::fs::File::create(&path).and_then(|mut f| render(page, &mut f));
            if let Err(e) = written {
                return usage(format_args!("could not write {}: {e}", path.display()));
            }
        }
        return 0;
    }
    let mut page_text = Vec::new();
    let wanted = command.map_or_else(|| "warden".to_string(), |c| format!("warden-{c}"));
    match pages.iter().find(|(name, _)| *name == wanted) {
        Some((_, page)) => match render(page, &mut page_text) {
            Ok(()) => {
                console::raw(Stream::Stdout, Priority::Droppable, page_text);
                0
            }
            Err(e) => {
                eprintln!("warden: error: could not write the man page: {e}");
                70
            }
        },
        None => usage(format_args!(
            "no command `{}`; pages: {}",
            command.unwrap_or_default(),
            pages
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Prints a usage error and gives its exit code.
pub(crate) fn usage(msg: impl std::fmt::Display) -> u8 {
    eprintln!("warden: error: {msg}");
    2
}

/// The prompt from stdin, read ahead of the plan by [`read_stdin_prompt`].
static STDIN_PROMPT: OnceLock<String> = OnceLock::new();

/// How long warden waits quietly for a prompt on stdin before it says so.
const STDIN_NOTICE: Duration = Duration::from_secs(1);

/// Whether these arguments take the prompt from stdin, and why.
pub(crate) fn prompt_source_is_stdin(args: &RunArgs, agent: Agent) -> Option<&'static str> {
    if agent == Agent::Exec {
        return None;
    }
    let prompt = args.prompt.as_ref().or(args.prompt_text.as_ref());
    match (prompt, &args.prompt_file) {
        (Some(p), None) if p == "-" => Some("the prompt is `-`"),
        (None, Some(f)) if f.as_os_str() == "-" => Some("-f -"),
        (None, None) if !std::io::stdin().is_terminal() => {
            Some("no prompt argument or -f FILE given")
        }
        _ => None,
    }
}

/// Reads the prompt from stdin before anything starts, so that the wait is
/// visible (a notice after a second), bounded (by `bound`: the startup
/// timeout) and cancellable (by any signal). A CI step whose stdin is a
/// pipe that nobody closes would otherwise wait forever, in silence.
pub(crate) async fn read_stdin_prompt(
    why: &str,
    signals: &mut Signals,
    bound: Option<Duration>,
) -> Result<(), u8> {
    if STDIN_PROMPT.get().is_some() {
        return Ok(());
    }
    let (tx, mut rx) = tokio::sync::oneshot::channel();
    // A thread of its own, not the runtime's blocking pool: a read from a
    // pipe cannot be cancelled, and one left behind must not hold up the
    // exit.
    let reader = std::thread::Builder::new()
        .name("warden-stdin".into())
        .spawn(move || {
            let mut bytes = Vec::new();
            let read = std::io::stdin().lock().read_to_end(&mut bytes);
            let _ = tx.send(read.map(|_| bytes));
        });
    if let Err(e) = reader {
        return Err(usage(format_args!(
            "could not start reading the prompt from stdin: {e}"
        )));
    }
    let waited = |d: Duration| humantime::format_duration(d).to_string();
    let notice = tokio::time::sleep(STDIN_NOTICE);
    let limit = async {
        match bound {
            Some(b) => tokio::time::sleep(b).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(notice, limit);
    let mut noticed = false;
    loop {
        let before = signals.received();
        if before.count > 0 {
            eprintln!(
                "warden: {}: cancelled while waiting for the prompt on stdin; nothing was started",
                before.last
            );
            return Err(130);
        }
        tokio::select! {
            read = &mut rx => {
                let text = match read {
                    Ok(Ok(bytes)) => String::from_utf8(bytes)
                        .map_err(|_| usage("the prompt on stdin is not UTF-8 text"))?,
                    Ok(Err(e)) => {
                        return Err(usage(format_args!("could not read the prompt from stdin: {e}")));
                    }
                    Err(_) => return Err(usage("could not read the prompt from stdin")),
                };
                let _ = STDIN_PROMPT.set(text);
                return Ok(());
            }
            () = &mut notice, if !noticed => {
                noticed = true;
                eprintln!(
                    "warden: reading the prompt from stdin ({why}); it ends when stdin is closed{}",
                    bound.map(|b| format!("; giving up after {}", waited(b))).unwrap_or_default()
                );
            }
            () = &mut limit => {
                return Err(usage(format_args!(
                    "no prompt on stdin after {} (the startup timeout): stdin stayed open ({why})\n  give the prompt as an argument or with -f FILE, close stdin (`</dev/null`), or raise --startup-timeout",
                    bound.map(waited).unwrap_or_default()
                )));
            }
            _ = signals.changed() => {}
        }
    }
}

/// The prompt from the argument, the file, or stdin.
pub(crate) fn read_prompt(args: &RunArgs) -> Result<Option<String>, String> {
    let from_stdin = || -> Result<String, String> {
        if let Some(p) = STDIN_PROMPT.get() {
            return Ok(p.clone());
        }
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

/// Exit code 130 and a word when a signal came before anything started.
pub(crate) fn cancelled_before_start(signals: &Signals) -> Option<u8> {
    let r = signals.received();
    (r.count > 0).then(|| {
        eprintln!(
            "warden: {}: cancelled before the run started; nothing was started",
            r.last
        );
        130
    })
}

async fn run(args: RunArgs, mut signals: Signals) -> u8 {
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
    if let Some(why) = prompt_source_is_stdin(&args, agent) {
        let bound = resolved.limits.startup_timeout.or(resolved.limits.timeout);
        if let Err(code) = read_stdin_prompt(why, &mut signals, bound).await {
            return code;
        }
    }

    // What stays the same for every run of the session.
    let request = match crate::request::build(&args, agent, &cwd, &resolved) {
        Ok(r) => r,
        Err(code) => return code,
    };
    if request.is_session() {
        if let Some(code) = cancelled_before_start(&signals) {
            return code;
        }
        return run_session_cli(request, resolved, signals).await;
    }
    let spec = match request.spec(&request.iteration_context().await) {
        Ok(s) => s,
        Err(e) => return usage(e),
    };
    if let Some(code) = cancelled_before_start(&signals) {
        return code;
    }
    run_once(spec, &resolved, signals).await
}

pub(crate) fn absolute(cwd: &std::path::Path, p: &std::path::Path) -> PathBuf {
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
        for setting in crate::settings::SETTINGS {
            let flag = setting.flag();
            assert!(
                run.get_arguments()
                    .any(|a| a.get_long() == Some(flag.as_str())),
                "--{flag} is missing"
            );
        }
    }
}
