//! How `warden run`'s arguments (or one `[[run]]` of a batch file) become
//! a [`RunRequest`]: files read, the sandbox probed when `auto`, then the
//! request checked as a whole by the library.

use std::path::{Path, PathBuf};

use warden_events::Agent;
use warden_run::WorktreeRequest;
use warden_run::{
    EnvArg, OutputRequest, Prompt, RunRequest, Sandbox, SandboxChoice, SandboxOptions,
};

use crate::args::RunArgs;
use crate::error::{CliError, usage};
use crate::prompt_input::read_prompt;

/// The request `args` describe, checked; its warnings printed (unless
/// quiet). A bad request is printed and its exit code returned.
pub(crate) fn build(
    args: &RunArgs,
    agent: Agent,
    cwd: &Path,
    resolved: &crate::settings::Resolved,
) -> Result<RunRequest, CliError> {
    let env = env(&args.env).map_err(usage)?;
    let mut template_args = std::collections::BTreeMap::new();
    for a in &args.arg {
        let (k, v) = warden_run::template::parse_arg(a).map_err(usage)?;
        template_args.insert(k, v);
    }
    let output = output(
        args.output_tag.as_deref(),
        args.output_schema.as_deref(),
        args.output_retries,
        cwd,
        &|key| format!("--{}", key.replace('_', "-")),
    )?;
    let (prompt, command, extra_args) = if agent == Agent::Exec {
        if args.prompt.is_some() || args.prompt_text.is_some() || args.prompt_file.is_some() {
            return Err(usage(
                "`exec` runs a command, not a prompt: put the command after `--`, e.g. warden run exec -- make test",
            ));
        }
        if !args.arg.is_empty() {
            return Err(usage(
                "--arg is for agents; `exec` runs the command after `--` as it is",
            ));
        }
        (None, args.rest.clone(), Vec::new())
    } else {
        let text = read_prompt(args.prompt_given(), args.prompt_file.as_deref())
            .map_err(usage)?
            .unwrap_or_default();
        let templated = args.prompt_file.is_some() || !args.arg.is_empty();
        (
            Some(prompt(
                text,
                templated,
                template_args,
                args.prompt_file
                    .as_deref()
                    .is_some_and(|f| f != Path::new("-")),
            )),
            Vec::new(),
            args.rest.clone(),
        )
    };
    let mut request = with_settings(agent, cwd, resolved);
    request.command = command;
    request.prompt = prompt;
    request.preamble = args.preamble;
    request.model = args.model.clone();
    request.effort = args.effort.clone();
    request.resume = args.resume.clone();
    request.agent_bin = args.agent_bin.clone();
    request.extra_args = extra_args;
    request.sandbox.ro = args.ro.iter().map(|p| absolute(cwd, p)).collect();
    request.sandbox.rw = args.rw.iter().map(|p| absolute(cwd, p)).collect();
    request.env = env;
    request.output = output;
    request.session.name.clone_from(&args.name);
    request.session.iterations = args.iterations;
    request.session.worktree = args.worktree.as_ref().map(|branch| WorktreeRequest {
        branch: Some(branch.clone()).filter(|b| !b.is_empty()),
        base: args.base.clone(),
        keep: args.keep_worktree,
    });
    match request.check() {
        Ok(warnings) => {
            if !resolved.quiet {
                for w in warnings {
                    eprintln!("warden: warning: {}", w.render(flag_of));
                }
            }
            Ok(request)
        }
        Err(e) => Err(e.into()),
    }
}

/// A request to run `agent` in `cwd` as the settings say (its limits,
/// containment, sandbox, retries and session budget), running nothing yet:
/// the caller adds the command or the prompt. A sandbox `auto` is probed
/// here, and what it found said unless quiet.
pub(crate) fn with_settings(
    agent: Agent,
    cwd: &Path,
    resolved: &crate::settings::Resolved,
) -> RunRequest {
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
    let mut request = RunRequest::exec(Vec::<String>::new());
    request.agent = agent;
    request.cwd = cwd.to_path_buf();
    request.dir = resolved.run_dir.clone();
    request.limits = resolved.limits.clone();
    request.containment = resolved.containment;
    request.sandbox = SandboxOptions {
        sandbox,
        no_network: resolved.no_network,
        ro: Vec::new(),
        rw: Vec::new(),
        image: resolved.image.clone(),
        allow_sockets: resolved
            .allow_sockets
            .iter()
            .map(|p| absolute(cwd, p))
            .collect(),
        records: Vec::new(),
        container_network: resolved.container_network.clone(),
        engine_args: resolved.engine_args.clone(),
    };
    request.retry = resolved.retry.clone();
    request.session.budget = resolved.session_budget;
    request.session.check = (!resolved.check.command.is_empty()).then(|| resolved.check.clone());
    request.session.hooks = resolved.hooks.clone();
    request.session.merge = resolved.merge;
    request.shim_exe = crate::shim_exe::path();
    request
}

/// `NAME` or `NAME=VALUE` each: the variables given to the agent.
pub(crate) fn env(given: &[String]) -> Result<Vec<EnvArg>, String> {
    given.iter().map(|e| EnvArg::parse(e)).collect()
}

/// The prompt: a template (filled from the arguments) when it came from a
/// file or has arguments, else the text as it is.
/// `commands`: the text came from a file the user named, so its
/// `{{$ CMD}}` run; text from standard input or the command line may be
/// anyone's (a workflow's issue body), and its commands are sent as text.
pub(crate) fn prompt(
    text: String,
    templated: bool,
    args: std::collections::BTreeMap<String, String>,
    commands: bool,
) -> Prompt {
    if templated {
        Prompt::Template {
            text,
            args,
            commands,
        }
    } else {
        Prompt::Text(text)
    }
}

/// The tagged output a run is asked for: the tag, the schema (read from
/// its file, relative to `cwd`) and the retries; a schema or retries
/// without a tag are refused, naming each by `name` (a flag, or a batch
/// file's key).
pub(crate) fn output(
    tag: Option<&str>,
    schema: Option<&Path>,
    retries: u32,
    cwd: &Path,
    name: &dyn Fn(&str) -> String,
) -> Result<Option<OutputRequest>, CliError> {
    let schema = match schema {
        Some(path) => Some(read_schema(&absolute(cwd, path))?),
        None => None,
    };
    match (tag, schema) {
        (Some(tag), schema) => {
            let mut output = OutputRequest::new(tag);
            output.schema = schema;
            output.retries = retries;
            Ok(Some(output))
        }
        (None, Some(_)) => Err(usage(format_args!(
            "{} needs {} TAG: the tag the agent wraps its output in",
            name("output_schema"),
            name("output_tag")
        ))),
        (None, None) if retries > 0 => Err(usage(format_args!(
            "{} needs {} TAG: a run is retried when its tagged output is missing or wrong",
            name("output_retries"),
            name("output_tag")
        ))),
        (None, None) => Ok(None),
    }
}

fn read_schema(path: &Path) -> Result<(PathBuf, serde_json::Value), CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
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
    Ok((path.to_path_buf(), value))
}

/// The directory a command works in: `--cwd` (relative to the current
/// directory, which must exist), else the current directory.
pub(crate) fn working_dir(cwd: Option<&Path>) -> Result<PathBuf, crate::error::CliError> {
    let here = std::env::current_dir()
        .map_err(|e| crate::error::usage(format_args!("cannot read the current directory: {e}")))?;
    match cwd {
        Some(d) => match absolute(&here, d).canonicalize() {
            Ok(d) if d.is_dir() => Ok(d),
            _ => Err(crate::error::usage(format_args!(
                "--cwd {}: no such directory",
                d.display()
            ))),
        },
        None => Ok(here),
    }
}

/// `p` against `cwd` when relative.
pub(crate) fn absolute(cwd: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        cwd.join(p)
    }
}

/// What the CLI calls a field of a [`warden_run::RunRequest`], for the
/// library's messages ([`warden_run::Finding`]): a setting's flag, from
/// the settings table; the flags and words of `warden run` for the rest.
pub(crate) fn flag_of(field: &str) -> String {
    let setting = match field {
        "session.iterations" => return "--iterations".into(),
        "output.retries" => return "--output-retries".into(),
        "prompt.args" => return "--arg".into(),
        "command" => return "the command after `--`".into(),
        "prompt" => return "a prompt".into(),
        "agent_bin" => return "--agent-bin".into(),
        "model" | "effort" | "resume" | "preamble" | "env" => {
            return format!("--{field}");
        }
        "sandbox.ro" => return "--ro".into(),
        "sandbox.rw" => return "--rw".into(),
        "sandbox.allow_sockets" => "allow_socket",
        "sandbox.engine_args" => "engine_arg",
        "limits.budget.max_cost_usd" => "max_cost",
        "session.budget.max_cost_usd" => "session_max_cost",
        "limits.budget.max_tokens" => "max_tokens",
        "limits.budget.max_turns" => "max_turns",
        "session.budget.max_tokens" => "session_max_tokens",
        "session.budget.max_turns" => "session_max_turns",
        "batch_budget.max_cost_usd" => return "the batch's `max_cost`".into(),
        "batch_budget.max_tokens" => return "the batch's `max_tokens`".into(),
        "batch_budget.max_turns" => return "the batch's `max_turns`".into(),
        "session.worktree" => return "--worktree".into(),
        "session.check.command" => "check",
        "session.hooks.host_setup" => "host_setup",
        "session.hooks.setup" => "setup",
        "session.hooks.on_success" => "on_success",
        "session.hooks.finally" => "finally",
        // `limits.timeout`, `sandbox.no_network`, `sandbox.sandbox`, ...:
        // the setting of the field's own name.
        other => other.rsplit('.').next().unwrap_or(other),
    };
    match crate::settings::table::find(setting) {
        Some(s) => format!("--{}", s.flag()),
        None => format!("`{field}`"),
    }
}

#[cfg(test)]
mod tests {
    /// Every field the library names in a message has a flag or words of
    /// the CLI's (a new one falls back to its path in backticks, which
    /// this names).
    #[test]
    fn every_field_the_library_names_reads_as_the_cli_says_it() {
        for (field, said) in [
            ("session.iterations", "--iterations"),
            ("sandbox.no_network", "--no-network"),
            ("sandbox.sandbox", "--sandbox"),
            ("sandbox.allow_sockets", "--allow-socket"),
            ("sandbox.container_network", "--container-network"),
            ("sandbox.engine_args", "--engine-arg"),
            ("limits.timeout", "--timeout"),
            ("limits.budget.max_cost_usd", "--max-cost"),
            ("session.budget.max_turns", "--session-max-turns"),
            ("batch_budget.max_tokens", "the batch's `max_tokens`"),
            ("agent_bin", "--agent-bin"),
            ("env", "--env"),
            ("limits.resources", "`limits.resources`"),
            ("session.merge", "--merge"),
            ("session.worktree", "--worktree"),
            ("session.check.command", "--check"),
            ("session.hooks.host_setup", "--host-setup"),
            ("session.hooks.finally", "--finally"),
        ] {
            assert_eq!(super::flag_of(field), said, "{field}");
        }
    }
}
