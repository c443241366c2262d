//! warden's command line: its commands and their flags (clap). The
//! settings' flags come from the settings table.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::settings::SettingFlags;
use crate::settings::table::Group;

// Headings of `warden run --help` for the flags that are not settings
// (those are listed under their group's heading).
const AGENT: &str = Group::Agent.heading();
const SANDBOX: &str = Group::Sandbox.heading();
const SESSION: &str = Group::Session.heading();
const OUTPUT: &str = Group::Output.heading();
const CI: &str = Group::Ci.heading();

/// The examples at the end of `warden run --help` (and its man page).
pub(crate) const RUN_EXAMPLES: &str =
    "  warden run exec -- ./build.sh | tail -5     supervise any command; its stdout is yours
  warden run claude \"Fix the failing test\" > answer.md
  warden run codex -f task.md --stall-timeout 5m --timeout 30m
  warden run claude -f next-step.md --iterations 10 --worktree --check 'cargo test' --merge
  warden run claude -f task.md --sandbox bwrap --env ANTHROPIC_API_KEY --max-cost 2
  warden run --json exec -- make | jq -c 'select(.kind == \"finished\")'";

/// The examples of `warden batch`.
pub(crate) const BATCH_EXAMPLES: &str =
    "  warden batch runs.toml -j 8                     eight at a time, a table at the end
  warden batch runs.toml --junit junit.xml        and a JUnit report for CI
  warden batch runs.toml --executor slurm         each run a job of a Slurm array
  warden batch --resume .warden/batches/ID --rerun-failed";

/// The examples of `warden report`.
pub(crate) const REPORT_EXAMPLES: &str =
    "  warden report .warden/runs/RUN-ID                why it ended, what it did, its silences
  warden report .warden/runs/RUN-ID --html run.html
  warden report .warden/runs/RUN-ID --json | jq '.runs[0].report.verdict'";

/// The examples of `warden replay`.
pub(crate) const REPLAY_EXAMPLES: &str = "  warden replay claude .warden/runs/RUN-ID/stdout.log
  warden replay codex recorded.jsonl --json | jq -c 'select(.kind == \"tool_started\")'";

/// The examples of `warden doctor`.
pub(crate) const DOCTOR_EXAMPLES: &str = "  warden doctor                                   agent CLIs, sandboxes, containment, limits here
  warden doctor --json";

/// The examples of `warden gc`.
pub(crate) const GC_EXAMPLES: &str =
    "  warden gc --keep-runs 20 --dry-run              what would go, keeping the newest 20
  warden gc --keep-runs 20 --keep-days 7          keep 20, and anything younger than 7 days";

/// The examples of `warden config`.
pub(crate) const CONFIG_EXAMPLES: &str =
    "  warden config                                   each setting in effect here, and where it came from
  warden config --json | jq '.settings[] | select(.name == \"stall_timeout\")'
  WARDEN_TIMEOUT=90m warden config --cwd ../other-project";

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
    #[command(after_help = format!("Examples:\n{RUN_EXAMPLES}\n\nEvery setting also comes from its WARDEN_* variable or a warden.toml key of its name\n(found from here up to the git work tree's top; see `warden man run`)."))]
    Run(Box<RunArgs>),
    /// Decode a recorded stdout (a run's stdout.log) offline and summarize it.
    #[command(after_help = format!("Examples:\n{REPLAY_EXAMPLES}"))]
    Replay(ReplayArgs),
    /// What this machine can do: agent CLIs, sandboxes, containment.
    #[command(after_help = format!("Examples:\n{DOCTOR_EXAMPLES}"))]
    Doctor(DoctorArgs),
    /// Explain a finished run, session or batch from its directory; --html draws its pages.
    #[command(after_help = format!("Examples:\n{REPORT_EXAMPLES}"))]
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
    #[command(after_help = format!("Examples:\n{BATCH_EXAMPLES}"))]
    Batch(BatchArgs),
    /// Remove old run, session and batch directories and stale worktrees
    /// (never one in use); --dry-run lists what would go.
    #[command(after_help = format!("Examples:\n{GC_EXAMPLES}"))]
    Gc(GcArgs),
    /// Print each setting in effect here and where it came from: a
    /// WARDEN_* variable, which warden.toml (the project's or your own),
    /// or the default.
    #[command(after_help = format!("Examples:\n{CONFIG_EXAMPLES}"))]
    Config(ConfigArgs),
    /// Run one serialized request (what a cluster job of a batch runs).
    #[command(hide = true)]
    RunRequest {
        /// The request, as JSON (`warden_run::RunRequest`).
        file: PathBuf,
    },
}

#[derive(Debug, Args)]
pub(crate) struct BatchArgs {
    /// The batch file: `[defaults]`, then one `[[run]]` table per run.
    #[arg(required_unless_present = "resume")]
    pub file: Option<PathBuf>,
    /// How many runs at once (1 to 1024) [default: 4; on --resume, the
    /// batch's own].
    #[arg(short = 'j', long, value_name = "N", value_parser = jobs)]
    pub jobs: Option<usize>,
    /// Continue the batch in DIR whose warden stopped (killed, the machine
    /// restarted): runs that ended keep their reports, jobs still on a
    /// cluster are waited for, and only the rest run again.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["file", "dir", "executor"])]
    pub resume: Option<PathBuf>,
    /// With --resume: also run again the runs that ended without
    /// succeeding.
    #[arg(long, requires = "resume")]
    pub rerun_failed: bool,
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
    /// At the end, also write a JUnit XML report to FILE: one test case
    /// per entry (per run of an entry with iterations), for CI.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Where the runs run: `local` (this machine), or `slurm` (one Slurm
    /// job each; options in the file's `[slurm]` table) [default: the
    /// file's `executor`, else local].
    #[arg(long, value_name = "NAME")]
    pub executor: Option<String>,
    /// While the batch runs, serve its metrics (runs by verdict, their
    /// durations, tokens, cost, ...) in the Prometheus text format at
    /// http://ADDR/metrics. ADDR is IP:PORT, such as 127.0.0.1:9464; port
    /// 0 picks a free one. The URL is said on stderr at the start.
    #[arg(long, value_name = "ADDR", value_parser = crate::metrics_endpoint::parse_addr)]
    pub metrics_addr: Option<std::net::SocketAddr>,
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
pub(crate) struct GcArgs {
    /// Keep this many of the newest run, session and batch directories
    /// (each kind) [default: keep_runs in warden.toml, WARDEN_KEEP_RUNS].
    #[arg(long, value_name = "N")]
    pub keep_runs: Option<String>,
    /// Remove directories last changed more than this many days ago
    /// [default: keep_days in warden.toml, WARDEN_KEEP_DAYS].
    #[arg(long, value_name = "DAYS")]
    pub keep_days: Option<String>,
    /// List what would be removed and why; remove nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The project directory whose `.warden/` to clean [default: the
    /// current directory, and the top of its git repository].
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Read settings from this file instead of the nearest warden.toml
    /// (here, up to the git work tree's top).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print what was decided as one JSON document instead.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ConfigArgs {
    /// Look for warden.toml from DIR, as `warden run --cwd DIR` does
    /// [default: the current directory].
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Read settings from this file instead of the nearest warden.toml
    /// (here, up to the git work tree's top), as `warden run --config`.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print them as one JSON document instead
    /// (`schemas/config.schema.json`).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    /// Print what was found as one JSON document instead.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ReportArgs {
    /// A run directory (.warden/runs/<id>), a session directory or a
    /// batch directory (with its batch.json).
    pub dir: PathBuf,
    /// Also write the report as self-contained HTML: for a run or a
    /// session, the page FILE; for a batch, the batch's page FILE
    /// (FILE/index.html when FILE is a directory) and each entry's page
    /// beside it, named <stem>-<N>-<name>.html.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Silences at least this long are listed and marked [default: each
    /// run's own stall timeout, or 30s for a run without one].
    #[arg(long, value_name = "DURATION")]
    pub silence: Option<String>,
    /// Print the run's events as JSON lines instead (as `--json` showed
    /// them): each `lines` event of events.jsonl becomes the `text` or
    /// `stderr` events it stands for, read back from the logs.
    #[arg(long, conflicts_with = "html")]
    pub events: bool,
    /// Print the report as one JSON document instead: `run.json` (and
    /// `session.json`, or `batch.json` and each entry's runs) read back,
    /// and whether each run's logs still match what warden wrote.
    #[arg(long, conflicts_with_all = ["html", "events"])]
    pub json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The agent: claude, codex, opencode, pi, gemini, or exec (any command, given after `--`).
    pub agent: String,

    /// The prompt. Or use -f FILE; `-` reads it from stdin.
    pub prompt: Option<String>,

    /// The prompt, for one that starts with `-`.
    #[arg(
        help_heading = AGENT,
        long = "prompt",
        value_name = "TEXT",
        allow_hyphen_values = true,
        conflicts_with = "prompt"
    )]
    pub prompt_text: Option<String>,

    /// Read the prompt from this file (`-` for stdin).
    #[arg(help_heading = AGENT, short = 'f', long = "prompt-file", value_name = "FILE")]
    pub prompt_file: Option<PathBuf>,

    /// The model, passed to the agent's CLI.
    #[arg(help_heading = AGENT, long, value_name = "MODEL")]
    pub model: Option<String>,

    /// Reasoning effort, for CLIs that take one (codex, opencode, pi).
    #[arg(help_heading = AGENT, long, value_name = "LEVEL")]
    pub effort: Option<String>,

    /// Continue this session of the agent.
    #[arg(help_heading = AGENT, long, value_name = "SESSION")]
    pub resume: Option<String>,

    /// The agent CLI's executable, if it is not on PATH under its usual name.
    #[arg(help_heading = AGENT, long, value_name = "PATH")]
    pub agent_bin: Option<PathBuf>,

    /// Give the agent this variable (from warden's environment, or with a
    /// value); it passes into a sandbox and is masked in every report. Repeatable.
    #[arg(help_heading = SANDBOX, long = "env", value_name = "NAME[=VALUE]")]
    pub env: Vec<String>,

    /// Make PATH visible read-only inside the sandbox. Repeatable.
    #[arg(help_heading = SANDBOX, long = "ro", value_name = "PATH")]
    pub ro: Vec<PathBuf>,

    /// Make PATH writable inside the sandbox. Repeatable.
    #[arg(help_heading = SANDBOX, long = "rw", value_name = "PATH")]
    pub rw: Vec<PathBuf>,

    /// Work in a new git worktree on a new branch (named, or
    /// warden/<name>/<id>), made from HEAD or --base.
    #[arg(help_heading = SESSION, long, value_name = "BRANCH", num_args = 0..=1, default_missing_value = "")]
    pub worktree: Option<String>,

    /// The commit or ref the worktree starts from [default: HEAD].
    #[arg(help_heading = SESSION, long, value_name = "REF", requires = "worktree")]
    pub base: Option<String>,

    /// Keep the worktree at the end even when it is clean.
    #[arg(help_heading = SESSION, long, requires = "worktree")]
    pub keep_worktree: bool,

    /// Work in DIR instead of the current directory.
    #[arg(help_heading = SESSION, long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,

    /// Run up to N iterations, a fresh agent each, until one prints the completion signal.
    #[arg(help_heading = SESSION, long, value_name = "N", default_value_t = 1)]
    pub iterations: u32,

    /// A name for the session (used in branch names).
    #[arg(help_heading = SESSION, long, value_name = "NAME")]
    pub name: Option<String>,

    /// Fill {{NAME}} in the prompt file. Repeatable.
    #[arg(help_heading = SESSION, long = "arg", value_name = "NAME=VALUE")]
    pub arg: Vec<String>,

    /// Add a short note to the prompt: the deadline and the completion signal to print.
    #[arg(help_heading = SESSION, long)]
    pub preamble: bool,

    /// Take the last <TAG>…</TAG> of the agent's final text into the report's `output`.
    #[arg(help_heading = OUTPUT, long, value_name = "TAG")]
    pub output_tag: Option<String>,

    /// At the end, also write a JUnit XML report to FILE: one test case
    /// (one per run of a session), for CI.
    #[arg(help_heading = CI, long, value_name = "FILE")]
    pub junit: Option<PathBuf>,

    /// Validate the tagged output as JSON against this JSON Schema.
    #[arg(help_heading = OUTPUT, long, value_name = "FILE")]
    pub output_schema: Option<PathBuf>,

    /// When the output is missing or invalid, resume the agent's session with a correction, up to N times.
    #[arg(help_heading = OUTPUT, long, value_name = "N", default_value_t = 0)]
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

impl RunArgs {
    /// The prompt given as an argument or with `--prompt`.
    pub(crate) fn prompt_given(&self) -> Option<&str> {
        self.prompt.as_deref().or(self.prompt_text.as_deref())
    }
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
    /// Print the events as JSON lines (each valid by the event schema,
    /// at t_ms 0: a recording keeps no times), and the summary as one
    /// JSON object on stderr (schemas/replay.schema.json).
    #[arg(long)]
    pub json: bool,
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
