//! A run's plan: everything `warden run` (or one run of a batch) decided
//! before anything starts, and how it becomes each run's [`RunSpec`].

use std::path::PathBuf;

use warden_agents::AgentRequest;
use warden_events::Agent;
use warden_run::session::IterationContext;
use warden_run::{EnvArg, RunSpec, Sandbox, SandboxChoice, SandboxOptions};

use crate::cli::{RunArgs, absolute, read_prompt, usage};

/// Everything needed to build one run's spec.
pub(crate) struct Plan {
    agent: Agent,
    /// The prompt as given; a template when it came from a file or with --arg.
    prompt: Option<String>,
    pub(crate) templated: bool,
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
        if !resolved.quiet {
            for warning in env_args
                .iter()
                .filter_map(|e| e.unmasked_warning(|n| std::env::var(n).ok()))
            {
                eprintln!("warden: warning: {warning}");
            }
        }
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
        spec.shim_exe = crate::shim_exe::path();
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
