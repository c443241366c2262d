//! Running git: bounded in time, its process group killed with it, and
//! never a program the repository's configuration names (see `inert`).

use std::ffi::OsStr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use super::inert;
use crate::defaults;

#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
#[error("git {args}: {message}")]
pub struct GitError {
    pub args: String,
    pub message: String,
}

/// Runs git in `dir`, for at most [`defaults::GIT_QUERY_TIMEOUT`]; its
/// stdout, trimmed at the end.
pub async fn git<I, S>(dir: &Path, args: I) -> Result<String, GitError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    git_within(dir, args, defaults::GIT_QUERY_TIMEOUT).await
}

/// Runs git in `dir` for at most `limit`. git runs in a process group of
/// its own, which is killed when the time is up or when the returned
/// future is dropped (a cancelled run): a git that blocks on something
/// the agent planted (a FIFO at `.git/index`, a hook that never ends)
/// never holds warden, and never blocks the thread that drives the clocks.
///
/// git runs nothing the repository's configuration names (see the
/// private `inert` module): its configuration is listed first (within the same
/// `limit`), and every key that names a program is overridden.
pub async fn git_within<I, S>(dir: &Path, args: I, limit: Duration) -> Result<String, GitError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    git_with(dir, args, &[], limit).await
}

/// [`git_within`] with `extra` settings given after the overrides (what
/// one command needs, such as the one transport a fetch uses).
pub(super) async fn git_with<I, S>(
    dir: &Path,
    args: I,
    extra: &[(&str, &str)],
    limit: Duration,
) -> Result<String, GitError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
    let shown = shown(&args);
    let out = git_output(dir, args, extra, limit).await?;
    if !out.status.success() {
        return Err(GitError {
            args: shown,
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_string())
}

fn shown(args: &[std::ffi::OsString]) -> String {
    args.iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

/// [`git_with`], but what git printed and its status whatever the
/// status (a command whose failure says something, such as
/// `merge-tree`'s conflicts); `Err` only when git could not run or was
/// killed at its time limit.
pub(super) async fn git_output<I, S>(
    dir: &Path,
    args: I,
    extra: &[(&str, &str)],
    limit: Duration,
) -> Result<std::process::Output, GitError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
    let shown = shown(&args);
    let deadline = tokio::time::Instant::now() + limit;
    let listed = bounded(
        dir,
        [
            "config",
            "--list",
            "--includes",
            "--show-scope",
            "--name-only",
            "-z",
        ]
        .map(std::ffi::OsString::from),
        &inert::environment(&inert::overrides(b"")),
        deadline,
        limit,
    )
    .await
    .and_then(|out| {
        if out.status.success() {
            Ok(out.stdout)
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    })
    .map_err(|message| GitError {
        args: shown.clone(),
        message: format!("could not read the repository's configuration: {message}"),
    })?;
    if !inert::honoured(&listed) {
        return Err(GitError {
            args: shown,
            message: "this git ignores GIT_CONFIG_COUNT (it is older than 2.31), so warden cannot keep the programs the repository names (hooks, filters) from running: install git 2.31 or later".into(),
        });
    }
    let mut overrides = inert::overrides(&listed);
    overrides.extend(extra.iter().map(|(k, v)| (k.into(), v.into())));
    let env = inert::environment(&overrides);
    bounded(dir, args, &env, deadline, limit)
        .await
        .map_err(|message| GitError {
            args: shown,
            message,
        })
}

/// Runs git with `args` and `env` in `dir` until `deadline`: what it
/// printed and its status, or why it could not run or finish. `limit`:
/// the whole time allowed, for the message.
async fn bounded(
    dir: &Path,
    args: impl IntoIterator<Item = std::ffi::OsString>,
    env: &[(std::ffi::OsString, std::ffi::OsString)],
    deadline: tokio::time::Instant,
    limit: Duration,
) -> Result<std::process::Output, String> {
    let child = tokio::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .arg("--no-pager")
        .args(args)
        .env("LC_ALL", "C")
        // Never a prompt, never a lock another git would wait on.
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("could not run git: {e}"))?;
    let mut group = GroupKiller(child.id());
    let out = match tokio::time::timeout_at(deadline, child.wait_with_output()).await {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => return Err(format!("could not run git: {e}")),
        Err(_) => {
            return Err(format!(
                "git did not finish within {} and was killed (is a file in the repository a FIFO or a device?)",
                humantime::format_duration(limit)
            ));
        }
    };
    // git is reaped: its group id may be reused from now on.
    group.0 = None;
    Ok(out)
}

/// Kills a git's process group (git and whatever it started) unless git
/// finished: on a timeout, and when the future running it is dropped.
struct GroupKiller(Option<u32>);

impl Drop for GroupKiller {
    fn drop(&mut self) {
        if let Some(pid) = self
            .0
            .and_then(|p| rustix::process::Pid::from_raw(p as i32))
        {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}
