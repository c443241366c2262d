//! Every default of warden, in one place. The book's table of settings (docs/src/settings.md) is
//! written from this file; change both together.

use std::time::Duration;

/// Wall clock for one run (`--timeout`). Long enough for a real task;
/// short enough that a forgotten run does not burn a day.
pub const TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// No activity for this long kills the run as stalled (`--stall-timeout`).
/// Leaves headroom over the longest legitimate silence of the agent CLIs:
/// Claude Code lets a single Bash call run up to 10 minutes with no output.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// No activity at all since spawn for this long: a bad install, a login
/// prompt, or an agent waiting on stdin (`--startup-timeout`).
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(2 * 60);

/// After the agent's terminal event or the completion signal, a silence
/// this long means it is done but will not exit (`--completion-timeout`).
pub const COMPLETION_TIMEOUT: Duration = Duration::from_secs(60);

/// With `--on-fatal-error end`: how long after such an error the agent
/// still has to end by itself (its terminal event usually follows at
/// once) before warden ends the run.
pub const FATAL_ERROR_GRACE: Duration = Duration::from_secs(2);

/// After the agent exits, how long output is still read while its orphans
/// are terminated (`--drain-grace`).
pub const DRAIN_GRACE: Duration = Duration::from_secs(5);

/// Between SIGTERM and SIGKILL (`--kill-grace`).
pub const KILL_GRACE: Duration = Duration::from_secs(10);

/// The string an agent prints to say the task is done.
pub const COMPLETION_SIGNAL: &str = "<promise>COMPLETE</promise>";

/// Lines longer than this are kept in the log but not decoded, so memory
/// stays bounded whatever the agent writes.
pub const MAX_LINE: usize = 8 * 1024 * 1024;

/// Where run directories go, relative to the working directory.
pub const RUNS_DIR: &str = ".warden/runs";
/// Where a batch keeps its reports, under the directory it runs in.
pub const BATCHES_DIR: &str = ".warden/batches";

/// After the final SIGKILL, how long to wait for the kernel to confirm that
/// every process is gone before the report is written anyway. SIGKILL cannot
/// be ignored, so only a process stuck in the kernel (state D) gets here.
pub const FINAL_KILL_WAIT: Duration = Duration::from_secs(2);

/// Added to a tool call's own declared time limit when it stretches the
/// stall clock: the tool's output and the agent's reply take a moment.
pub const TOOL_TIMEOUT_MARGIN: Duration = Duration::from_secs(30);

/// The most text one event carries (a `text`, `stderr` or `thinking`
/// line); longer text is cut with a note, and is whole in the logs.
pub const EVENT_TEXT: usize = 64 * 1024;

/// The most text one event carries in the live feed (terminal, `--json`,
/// the library's `next_event`), so the feed's memory stays small.
pub const LIVE_EVENT_TEXT: usize = 4 * 1024;

/// The longest a question to git may take (the base commit, the commits of
/// a run, a work tree's state). A repository the agent damaged (a FIFO
/// where git expects a file) must not hang warden: git is killed then.
pub const GIT_QUERY_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest `git worktree add` / `git worktree remove` may take: they
/// check out every file of the repository.
pub const GIT_WORKTREE_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// The largest file warden reads from a work tree (`warden.toml`,
/// `.git/HEAD`); anything bigger is refused, not read into memory.
pub const MAX_WORK_TREE_FILE: u64 = 1024 * 1024;

/// A check's wall clock (`--check-timeout`): a test suite's worth.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// A check silent for this long is ended as stalled
/// (`--check-stall-timeout`): a compiler or a test runner that prints
/// nothing for five minutes is stuck more often than busy.
pub const CHECK_STALL_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// Each hook's wall clock (`--hook-timeout`): enough to install a
/// project's dependencies.
pub const HOOK_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// Each `{{$ CMD}}` of a prompt's wall clock
/// (`--prompt-command-timeout`): these gather context (`git log`, a
/// listing), they do not build.
pub const PROMPT_COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// How much of a failed check's output the next iteration is told: its
/// last lines, at most this many, and at most `CHECK_FEEDBACK_BYTES` of
/// them. The whole is in the check's logs.
pub const CHECK_FEEDBACK_LINES: usize = 60;
pub const CHECK_FEEDBACK_BYTES: usize = 8 * 1024;

/// The most a prompt's `{{$ CMD}}` puts in the prompt; the rest is cut
/// with a note (the whole is in its logs).
pub const PROMPT_COMMAND_OUTPUT: usize = 64 * 1024;
