//! Where a run's prompt comes from: the argument, a file, or stdin (read
//! ahead, bounded and cancellable, before anything starts).

use std::io::{IsTerminal, Read};
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use warden_events::Agent;

use crate::error::{CliError, Kind, usage};
use crate::signals::Signals;

/// The prompt from stdin, read ahead of the plan by [`read_stdin_prompt`].
static STDIN_PROMPT: OnceLock<String> = OnceLock::new();

/// How long warden waits quietly for a prompt on stdin before it says so.
const STDIN_NOTICE: Duration = Duration::from_secs(1);

/// Whether a run given this prompt or prompt file takes its prompt from
/// stdin, and why.
pub(crate) fn prompt_source_is_stdin(
    prompt: Option<&str>,
    file: Option<&Path>,
    agent: Agent,
) -> Option<&'static str> {
    if agent == Agent::Exec {
        return None;
    }
    match (prompt, file) {
        (Some("-"), None) => Some("the prompt is `-`"),
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
) -> Result<(), CliError> {
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
            return Err(CliError::new(
                Kind::Cancelled,
                format_args!(
                    "{}: cancelled while waiting for the prompt on stdin; nothing was started",
                    before.last
                ),
            ));
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
pub(crate) fn read_prompt(
    prompt: Option<&str>,
    file: Option<&Path>,
) -> Result<Option<String>, String> {
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
    match (prompt, file) {
        (Some(_), Some(_)) => {
            Err("give the prompt as an argument or with -f FILE, not both".into())
        }
        (Some("-"), None) => from_stdin().map(Some),
        (Some(p), None) => Ok(Some(p.to_string())),
        (None, Some(f)) if f.as_os_str() == "-" => from_stdin().map(Some),
        (None, Some(f)) => std::fs::read_to_string(f)
            .map(Some)
            .map_err(|e| format!("could not read the prompt file {}: {e}", f.display())),
        (None, None) if !std::io::stdin().is_terminal() => from_stdin().map(Some),
        (None, None) => Ok(None),
    }
}
