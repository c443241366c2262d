//! How to start each agent CLI headless: its command line, its
//! environment, and how it gets the prompt.
//!
//! Every CLI here is started so that it can never wait on a person: the
//! prompt is written to its stdin, which is then closed (never an
//! argument: no size limit, nothing in `ps`, no shell), permission
//! prompts bypassed, `CI=true`, machine-readable output on stdout. This
//! crate only builds command lines; it starts nothing.

#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use warden_events::Agent;

/// What the user asked for, for any agent.
#[derive(Debug, Clone, Default)]
pub struct AgentRequest {
    pub prompt: String,
    pub model: Option<String>,
    pub effort: Option<String>,
    pub resume: Option<String>,
    /// Passed to the CLI as they are, after warden's own arguments.
    pub extra_args: Vec<OsString>,
    /// The CLI's executable, when not the usual name on PATH.
    pub program: Option<PathBuf>,
}

/// A command line ready to start.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    /// Written to stdin, which is then closed; `None`: /dev/null.
    pub stdin: Option<Vec<u8>>,
}

#[non_exhaustive]
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AgentError {
    #[error("`{agent}` runs a command, not a prompt: put the command after `--`")]
    ExecTakesNoPrompt { agent: Agent },
    #[error("no prompt for {agent}: give it as an argument, with -f FILE, or on stdin")]
    MissingPrompt { agent: Agent },
    #[error("{agent} does not take {flag} (no such option in its CLI)")]
    Unsupported { agent: Agent, flag: &'static str },
    #[error("{} (`{program}`) is not on PATH; install it with `{install}`, or name its executable with --agent-bin", .agent_name)]
    NotInstalled {
        agent_name: &'static str,
        program: String,
        install: String,
    },
}

/// The usual executable name, the product name, and how to install it.
pub fn install_info(agent: Agent) -> (&'static str, &'static str, String) {
    let p = profile(agent);
    (p.program, p.product, p.install())
}

/// Builds the command line for `agent`. `path` is the PATH to look the
/// executable up in; a missing CLI is an error that says how to install it.
pub fn invocation(
    agent: Agent,
    req: &AgentRequest,
    path: Option<&OsString>,
) -> Result<Invocation, AgentError> {
    if agent == Agent::Exec {
        return Err(AgentError::ExecTakesNoPrompt { agent });
    }
    if req.prompt.trim().is_empty() {
        return Err(AgentError::MissingPrompt { agent });
    }
    let unsupported = |flag| Err(AgentError::Unsupported { agent, flag });
    let profile = profile(agent);
    let (name, product) = (profile.program, profile.product);
    let program: OsString = match &req.program {
        Some(p) => p.clone().into(),
        None => match find_on_path(name, path) {
            Some(p) => p.into(),
            None => {
                return Err(AgentError::NotInstalled {
                    agent_name: product,
                    program: name.to_string(),
                    install: profile.install(),
                });
            }
        },
    };
    let mut args: Vec<OsString> = profile.headless.iter().map(Into::into).collect();
    let mut env: Vec<(OsString, OsString)> = vec![("CI".into(), "true".into())];
    env.extend(profile.env.iter().map(|(k, v)| (k.into(), v.into())));
    if let Some(m) = &req.model {
        args.extend(["--model".into(), m.into()]);
    }
    if let Some(e) = &req.effort {
        match profile.effort {
            Effort::Flag(flag) => args.extend([flag.into(), e.into()]),
            Effort::Config(key) => args.extend(["-c".into(), format!("{key}={e}").into()]),
            Effort::None => return unsupported("--effort"),
        }
    }
    if let Some(session) = &req.resume {
        match profile.resume {
            Some(word) => args.extend([word.into(), session.into()]),
            None => return unsupported("--resume"),
        }
    }
    args.extend(profile.trailing.iter().map(Into::into));
    // Claude Code refuses its bypass flag as root unless told the machine
    // is a sandbox.
    if agent == Agent::Claude && rustix::process::geteuid().is_root() {
        env.push(("IS_SANDBOX".into(), "1".into()));
    }
    // The prompt always goes on stdin, closed after it: no argument-size
    // limit, nothing in `ps`, and a prompt starting with `-` cannot be
    // taken for an option (OpenCode reads stdin when given no message).
    let stdin = Some(req.prompt.clone().into_bytes());
    args.extend(req.extra_args.iter().cloned());
    Ok(Invocation {
        program,
        args,
        env,
        stdin,
    })
}

/// How a CLI takes reasoning effort.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effort {
    /// It has no such option: `--effort` is refused.
    None,
    /// `FLAG LEVEL`
    Flag(&'static str),
    /// `-c KEY=LEVEL`
    Config(&'static str),
}

/// Everything warden knows about one agent CLI, in one place: how to find
/// and install it, its headless command line, how it takes the options
/// warden passes on, and what it needs from a sandbox.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    pub agent: Agent,
    /// The usual executable name on PATH.
    pub program: &'static str,
    /// The product's name, for messages.
    pub product: &'static str,
    /// The npm package it is installed from.
    pub npm_package: &'static str,
    /// The fixed arguments that make it headless, with machine-readable
    /// output on stdout.
    pub headless: &'static [&'static str],
    pub effort: Effort,
    /// The word before a session to resume (a flag, or Codex's
    /// subcommand); `None` if it cannot resume one.
    pub resume: Option<&'static str>,
    /// Whether warden can resume its session to send a correction (the
    /// CLI resumes by id and reports the id in its stream).
    pub can_resume: bool,
    /// After the options (Codex's `-`: the prompt is on stdin).
    pub trailing: &'static [&'static str],
    /// Set for every run, on top of `CI=true`.
    pub env: &'static [(&'static str, &'static str)],
    /// What it needs from a sandbox.
    pub sandbox: SandboxNeeds,
    /// How long the CLI may take to print its first line on top of a
    /// stall timeout, before that line: its start (loading, reading its
    /// settings, its first request). About ten times what it took against
    /// a local model server (first line after 0.4-0.7 s for Codex,
    /// 1.0-1.3 s Claude Code, 1.6-1.9 s pi, 2.7-3.6 s Gemini CLI, 5.6-7.1 s
    /// OpenCode, on 2 busy cores); none for a command of the user's.
    pub first_line_allowance: std::time::Duration,
}

/// What an agent's CLI needs from a sandbox: the sandbox (`warden-sandbox`)
/// lets in what this names, and nothing else of the host.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SandboxNeeds {
    /// Prefixes of the host variables it reads: these pass into a sandbox.
    pub env_prefixes: &'static [&'static str],
    /// Directories (relative to HOME) where it keeps config and state,
    /// bound writable so logins, sessions and settings persist.
    pub state_dirs: &'static [&'static str],
    /// Variables that move its state directory elsewhere (bound writable
    /// too, when set).
    pub state_dir_vars: &'static [&'static str],
    /// Programs it runs on (`node`): found on PATH and kept visible.
    pub runtimes: &'static [&'static str],
    /// What its documented provider set-ups (Bedrock, Vertex AI, Azure,
    /// telemetry, ...) need from a sandbox beyond `env_prefixes`.
    pub provider: ProviderEnv,
}

impl SandboxNeeds {
    /// Nothing: what a plain command gets.
    pub const NONE: SandboxNeeds = SandboxNeeds {
        env_prefixes: &[],
        state_dirs: &[],
        state_dir_vars: &[],
        runtimes: &[],
        provider: ProviderEnv::NONE,
    };
}

/// What a CLI's documented provider set-ups need inside a sandbox: the
/// variables they read, the files and directories those name, and what
/// to warn about when something the user set up does not get in.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProviderEnv {
    /// Variables passed by exact name (those not under a prefix of
    /// `env_prefixes`: `AWS_REGION`, `CLOUD_ML_REGION`, ...).
    pub names: &'static [&'static str],
    /// Variables that name a file the CLI reads (a service account key):
    /// when set, the file is bound read-only at the same path.
    pub file_vars: &'static [&'static str],
    /// `(variable, path under HOME)`: when the variable is in the agent's
    /// environment and on (set, and not `0` or `false`), the file or
    /// directory (`~/.aws` for `AWS_PROFILE`) is bound read-only.
    pub home_dirs: &'static [(&'static str, &'static str)],
    /// `(switch, names)`: variables (a name ending in `_` is a prefix)
    /// that pass only while the switch is on (`AWS_SECRET_ACCESS_KEY`
    /// with `CLAUDE_CODE_USE_BEDROCK=1`), whatever else would let them
    /// through: a host holding cloud credentials for something else (a
    /// CI job's deploy keys) must not hand them to an agent that was
    /// never set up to use them.
    pub gated: &'static [(&'static str, &'static [&'static str])],
    /// Cloud credentials the CLI can read but that have no switch to
    /// say they are meant for it: they pass only with `--env NAME`, and
    /// a set one that does not is warned about.
    pub asked: &'static [&'static str],
    /// `(switch, prefix)`: when the switch is set (`CLAUDE_CODE_USE_BEDROCK`),
    /// a host variable with the prefix (`AWS_`) that does not pass is
    /// warned about.
    pub families: &'static [(&'static str, &'static str)],
    /// Its settings files (under HOME): a host variable they name that
    /// does not pass is warned about.
    pub config_files: &'static [&'static str],
}

impl ProviderEnv {
    /// Nothing beyond the prefixes.
    pub const NONE: ProviderEnv = ProviderEnv {
        names: &[],
        file_vars: &[],
        home_dirs: &[],
        gated: &[],
        asked: &[],
        families: &[],
        config_files: &[],
    };
}

/// The keys of the model providers the multi-provider CLIs read.
const PROVIDER_PREFIXES: [&str; 9] = [
    "ANTHROPIC_",
    "OPENAI_",
    "GEMINI_",
    "GOOGLE_",
    "OPENROUTER_",
    "GROQ_",
    "MISTRAL_",
    "XAI_",
    "DEEPSEEK_",
];

const fn with_providers(own: &'static str) -> [&'static str; 10] {
    let mut all = [own; 10];
    let mut i = 0;
    while i < PROVIDER_PREFIXES.len() {
        all[i + 1] = PROVIDER_PREFIXES[i];
        i += 1;
    }
    all
}

/// The cloud credentials OpenCode and pi can read (through the AWS SDK's
/// credential chain, Google's application default credentials): passed
/// only with `--env NAME`.
const CLOUD_CREDENTIALS: [&str; 7] = [
    "AWS_PROFILE",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "GOOGLE_APPLICATION_CREDENTIALS",
];

const OPENCODE_PREFIXES: [&str; 10] = with_providers("OPENCODE_");
const PI_PREFIXES: [&str; 10] = with_providers("PI_");

/// One profile per agent CLI; `exec` runs its command as it is.
static PROFILES: [Profile; 6] = [
    Profile {
        agent: Agent::Claude,
        program: "claude",
        product: "Claude Code",
        npm_package: "@anthropic-ai/claude-code",
        headless: &[
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            // The partial messages carry each message's final usage; the
            // whole messages only its first (1 output token), and without
            // a `result` (Ctrl-C, a forced end) that is all there would be.
            "--include-partial-messages",
            "--dangerously-skip-permissions",
        ],
        effort: Effort::None,
        resume: Some("--resume"),
        can_resume: true,
        trailing: &[],
        env: &[
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
            ("DISABLE_AUTOUPDATER", "1"),
        ],
        sandbox: SandboxNeeds {
            env_prefixes: &[
                "ANTHROPIC_",
                "CLAUDE_",
                "DISABLE_",
                "IS_SANDBOX",
                "API_TIMEOUT_MS",
                "BASH_DEFAULT_TIMEOUT_MS",
                "BASH_MAX_TIMEOUT_MS",
                "MAX_THINKING_TOKENS",
            ],
            state_dirs: &[".claude"],
            state_dir_vars: &["CLAUDE_CONFIG_DIR", "CLAUDE_CODE_TMPDIR"],
            runtimes: &["node"],
            // Each provider set-up's variables pass only with its switch on.
            provider: ProviderEnv {
                names: &[],
                file_vars: &["GOOGLE_APPLICATION_CREDENTIALS"],
                home_dirs: &[
                    ("AWS_PROFILE", ".aws"),
                    ("CLAUDE_CODE_USE_BEDROCK", ".aws"),
                    (
                        "CLAUDE_CODE_USE_VERTEX",
                        ".config/gcloud/application_default_credentials.json",
                    ),
                ],
                gated: &[
                    // Amazon Bedrock: the region, a profile, access keys with a
                    // session token, or a Bedrock API key
                    // (ANTHROPIC_BEDROCK_BASE_URL is under ANTHROPIC_).
                    (
                        "CLAUDE_CODE_USE_BEDROCK",
                        &[
                            "AWS_REGION",
                            "AWS_PROFILE",
                            "AWS_ACCESS_KEY_ID",
                            "AWS_SECRET_ACCESS_KEY",
                            "AWS_SESSION_TOKEN",
                            "AWS_BEARER_TOKEN_BEDROCK",
                        ],
                    ),
                    // Vertex AI (ANTHROPIC_VERTEX_PROJECT_ID is under ANTHROPIC_),
                    // with a region per model.
                    (
                        "CLAUDE_CODE_USE_VERTEX",
                        &[
                            "CLOUD_ML_REGION",
                            "VERTEX_REGION_",
                            "GOOGLE_APPLICATION_CREDENTIALS",
                            "GOOGLE_CLOUD_PROJECT",
                            "GCLOUD_PROJECT",
                        ],
                    ),
                    // Its own telemetry reads the standard OpenTelemetry
                    // variables (OTEL_EXPORTER_OTLP_HEADERS carries the
                    // collector's credentials).
                    ("CLAUDE_CODE_ENABLE_TELEMETRY", &["OTEL_"]),
                ],
                asked: &[],
                families: &[
                    ("CLAUDE_CODE_USE_BEDROCK", "AWS_"),
                    ("CLAUDE_CODE_USE_VERTEX", "GOOGLE_"),
                    ("CLAUDE_CODE_USE_VERTEX", "CLOUD_ML_"),
                ],
                config_files: &[".claude/settings.json"],
            },
        },
        first_line_allowance: std::time::Duration::from_secs(20),
    },
    Profile {
        agent: Agent::Codex,
        program: "codex",
        product: "Codex",
        npm_package: "@openai/codex",
        headless: &[
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
        ],
        effort: Effort::Config("model_reasoning_effort"),
        resume: Some("resume"),
        can_resume: true,
        trailing: &["-"],
        env: &[],
        sandbox: SandboxNeeds {
            env_prefixes: &["OPENAI_", "CODEX_", "AZURE_OPENAI_"],
            state_dirs: &[".codex"],
            state_dir_vars: &["CODEX_HOME"],
            runtimes: &["node"],
            // A custom provider names its key's variable in config.toml
            // (`env_key`): warned about when it does not pass.
            provider: ProviderEnv {
                config_files: &[".codex/config.toml"],
                ..ProviderEnv::NONE
            },
        },
        first_line_allowance: std::time::Duration::from_secs(15),
    },
    Profile {
        agent: Agent::OpenCode,
        program: "opencode",
        product: "OpenCode",
        npm_package: "opencode-ai",
        // OpenCode says it is retrying a model request only in its log:
        // `--print-logs` puts the log on stderr, where warden counts the
        // retries (INFO is the level that shows a request being sent
        // again).
        headless: &[
            "run",
            "--format",
            "json",
            "--print-logs",
            "--log-level",
            "INFO",
        ],
        effort: Effort::Flag("--variant"),
        resume: Some("--session"),
        // Its sessions live in a database, not in per-session files, so
        // a finished run's session is not resumed for a correction.
        can_resume: false,
        trailing: &[],
        env: &[],
        sandbox: SandboxNeeds {
            env_prefixes: &OPENCODE_PREFIXES,
            state_dirs: &[
                ".config/opencode",
                ".local/share/opencode",
                ".cache/opencode",
                ".local/state/opencode",
            ],
            state_dir_vars: &[],
            runtimes: &["node"],
            // Its providers page: Amazon Bedrock (keys, a profile, a bearer
            // token, EKS web identity), Google Vertex AI (GOOGLE_CLOUD_PROJECT
            // is under GOOGLE_; VERTEX_LOCATION), Azure (AZURE_RESOURCE_NAME).
            // Every name here is read by the pinned OpenCode binary (its
            // strings hold each one), AWS_SESSION_TOKEN for temporary
            // credentials included. It has no switch that says a cloud
            // set-up is meant for it, so the cloud credentials (and the
            // files and directories they name) pass only when asked for.
            provider: ProviderEnv {
                names: &[
                    "AWS_REGION",
                    "AWS_BEARER_TOKEN_BEDROCK",
                    "VERTEX_LOCATION",
                    "AZURE_RESOURCE_NAME",
                ],
                file_vars: &[
                    "GOOGLE_APPLICATION_CREDENTIALS",
                    "AWS_WEB_IDENTITY_TOKEN_FILE",
                ],
                home_dirs: &[("AWS_PROFILE", ".aws")],
                gated: &[],
                asked: &CLOUD_CREDENTIALS,
                families: &[],
                config_files: &[
                    ".config/opencode/opencode.json",
                    ".config/opencode/opencode.jsonc",
                ],
            },
        },
        first_line_allowance: std::time::Duration::from_secs(60),
    },
    Profile {
        agent: Agent::Pi,
        program: "pi",
        product: "pi",
        npm_package: "@mariozechner/pi-coding-agent",
        headless: &["--mode", "json"],
        effort: Effort::Flag("--thinking"),
        resume: Some("--session"),
        can_resume: true,
        trailing: &[],
        env: &[("PI_OFFLINE", "1")],
        sandbox: SandboxNeeds {
            env_prefixes: &PI_PREFIXES,
            state_dirs: &[".pi"],
            state_dir_vars: &["PI_CODING_AGENT_DIR"],
            runtimes: &["node"],
            // Its docs/providers.md: the API-key table, Amazon Bedrock (a
            // profile, keys, a bearer token, a proxy; its ECS and IRSA
            // credentials need AWS_CONTAINER_CREDENTIALS_* and AWS_ROLE_ARN,
            // which are not passed), Azure OpenAI, Cloudflare, Vertex AI
            // (GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION are under
            // GOOGLE_). It has no switch that says a cloud set-up is meant for
            // it, so the cloud credentials (and the files and directories they
            // name) pass only when asked for; its Bedrock goes through the AWS
            // SDK's credential chain, which reads them.
            provider: ProviderEnv {
                names: &[
                    "AWS_BEARER_TOKEN_BEDROCK",
                    "AWS_REGION",
                    "AWS_BEDROCK_FORCE_CACHE",
                    "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
                    "AWS_BEDROCK_SKIP_AUTH",
                    "AWS_BEDROCK_FORCE_HTTP1",
                    "AZURE_OPENAI_API_KEY",
                    "AZURE_OPENAI_BASE_URL",
                    "AZURE_OPENAI_RESOURCE_NAME",
                    "AZURE_OPENAI_API_VERSION",
                    "AZURE_OPENAI_DEPLOYMENT_NAME_MAP",
                    "CEREBRAS_API_KEY",
                    "CLOUDFLARE_API_KEY",
                    "CLOUDFLARE_ACCOUNT_ID",
                    "CLOUDFLARE_GATEWAY_ID",
                    "AI_GATEWAY_API_KEY",
                    "ZAI_API_KEY",
                    "OPENCODE_API_KEY",
                    "HF_TOKEN",
                    "FIREWORKS_API_KEY",
                    "KIMI_API_KEY",
                    "MINIMAX_API_KEY",
                    "MINIMAX_CN_API_KEY",
                ],
                file_vars: &[
                    "GOOGLE_APPLICATION_CREDENTIALS",
                    "AWS_WEB_IDENTITY_TOKEN_FILE",
                ],
                home_dirs: &[("AWS_PROFILE", ".aws")],
                gated: &[],
                asked: &CLOUD_CREDENTIALS,
                families: &[],
                config_files: &[".pi/agent/models.json", ".pi/agent/settings.json"],
            },
        },
        first_line_allowance: std::time::Duration::from_secs(20),
    },
    Profile {
        agent: Agent::Gemini,
        program: "gemini",
        product: "Gemini CLI",
        npm_package: "@google/gemini-cli",
        headless: &["--output-format", "stream-json", "--yolo"],
        effort: Effort::None,
        resume: Some("--resume"),
        // Not resumed for a correction: its resumption by the id its
        // stream reports is not covered by warden's tests.
        can_resume: false,
        trailing: &[],
        env: &[],
        sandbox: SandboxNeeds {
            env_prefixes: &["GEMINI_", "GOOGLE_"],
            state_dirs: &[".gemini"],
            state_dir_vars: &["GEMINI_CLI_HOME"],
            runtimes: &["node"],
            // Vertex AI: GOOGLE_CLOUD_PROJECT, GOOGLE_CLOUD_LOCATION,
            // GOOGLE_GENAI_USE_VERTEXAI and GOOGLE_APPLICATION_CREDENTIALS,
            // all under GOOGLE_; the key file and gcloud's application default
            // credentials must be readable.
            // The key file and gcloud's application default credentials
            // only with GOOGLE_GENAI_USE_VERTEXAI on: a Google service
            // account key on the host is not necessarily meant for it.
            provider: ProviderEnv {
                file_vars: &["GOOGLE_APPLICATION_CREDENTIALS"],
                home_dirs: &[(
                    "GOOGLE_GENAI_USE_VERTEXAI",
                    ".config/gcloud/application_default_credentials.json",
                )],
                gated: &[(
                    "GOOGLE_GENAI_USE_VERTEXAI",
                    &["GOOGLE_APPLICATION_CREDENTIALS"],
                )],
                config_files: &[".gemini/settings.json"],
                ..ProviderEnv::NONE
            },
        },
        first_line_allowance: std::time::Duration::from_secs(30),
    },
    Profile {
        agent: Agent::Exec,
        program: "",
        product: "a command",
        npm_package: "",
        headless: &[],
        effort: Effort::None,
        resume: None,
        can_resume: false,
        trailing: &[],
        env: &[],
        sandbox: SandboxNeeds::NONE,
        first_line_allowance: std::time::Duration::from_secs(0),
    },
];

impl Profile {
    /// How to install it (nothing for `exec`).
    pub fn install(&self) -> String {
        if self.npm_package.is_empty() {
            String::new()
        } else {
            format!("npm install -g {}", self.npm_package)
        }
    }
}

/// The profile of `agent`'s CLI.
pub fn profile(agent: Agent) -> &'static Profile {
    PROFILES
        .iter()
        .find(|p| p.agent == agent)
        .expect("every agent has a profile")
}

/// Every profile, `exec` last.
pub fn profiles() -> &'static [Profile] {
    &PROFILES
}

/// The first executable file called `name` in `path`.
pub fn find_on_path(name: &str, path: Option<&OsString>) -> Option<PathBuf> {
    if name.contains('/') {
        return Path::new(name).is_file().then(|| PathBuf::from(name));
    }
    let path = path?;
    std::env::split_paths(path)
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_fake_bin(name: &str) -> (tempfile::TempDir, OsString) {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join(name);
        std::fs::write(&bin, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.path().as_os_str().to_owned();
        (dir, path)
    }

    fn req(prompt: &str) -> AgentRequest {
        AgentRequest {
            prompt: prompt.into(),
            ..AgentRequest::default()
        }
    }

    fn strs(v: &[OsString]) -> Vec<String> {
        v.iter().map(|s| s.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn claude_is_headless_with_prompt_on_stdin() {
        let (_d, path) = with_fake_bin("claude");
        let mut r = req("fix it");
        r.model = Some("opus".into());
        r.resume = Some("abc".into());
        r.extra_args = vec!["--max-turns".into(), "3".into()];
        let inv = invocation(Agent::Claude, &r, Some(&path)).unwrap();
        assert_eq!(
            strs(&inv.args),
            [
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--include-partial-messages",
                "--dangerously-skip-permissions",
                "--model",
                "opus",
                "--resume",
                "abc",
                "--max-turns",
                "3"
            ]
        );
        assert_eq!(inv.stdin.as_deref(), Some(&b"fix it"[..]));
        assert!(inv.env.contains(&("CI".into(), "true".into())));
        assert!(
            !strs(&inv.args).contains(&"fix it".to_string()),
            "the prompt never appears in ps"
        );
    }

    #[test]
    fn codex_reads_the_prompt_from_stdin_and_takes_effort() {
        let (_d, path) = with_fake_bin("codex");
        let mut r = req("task");
        r.effort = Some("high".into());
        r.resume = Some("t-1".into());
        let inv = invocation(Agent::Codex, &r, Some(&path)).unwrap();
        let args = strs(&inv.args);
        assert_eq!(args[0], "exec");
        assert!(
            args.windows(2)
                .any(|w| w == ["-c", "model_reasoning_effort=high"])
        );
        assert!(args.windows(2).any(|w| w == ["resume", "t-1"]));
        assert_eq!(args.last().unwrap(), "-");
    }

    #[test]
    fn every_agent_gets_the_prompt_on_stdin_never_as_an_argument() {
        let prompt = "-rf 'q' \"$(x)\" `y`\nline";
        for agent in [
            Agent::Claude,
            Agent::Codex,
            Agent::OpenCode,
            Agent::Pi,
            Agent::Gemini,
        ] {
            let (name, _, _) = install_info(agent);
            let (_d, path) = with_fake_bin(name);
            let inv = invocation(agent, &req(prompt), Some(&path)).unwrap();
            assert_eq!(inv.stdin.as_deref(), Some(prompt.as_bytes()), "{agent}");
            assert!(
                !strs(&inv.args).iter().any(|a| a.contains("$(x)")),
                "{agent}: {:?}",
                inv.args
            );
        }
    }

    #[test]
    fn unsupported_options_and_missing_prompt_are_errors() {
        let (_d, path) = with_fake_bin("gemini");
        let mut r = req("x");
        r.effort = Some("high".into());
        let e = invocation(Agent::Gemini, &r, Some(&path)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "gemini does not take --effort (no such option in its CLI)"
        );
        let e = invocation(Agent::Gemini, &req("  "), Some(&path)).unwrap_err();
        assert!(e.to_string().contains("no prompt"));
    }

    #[test]
    fn missing_cli_names_the_package_to_install() {
        let empty = OsString::from("/nonexistent-dir");
        let e = invocation(Agent::Pi, &req("x"), Some(&empty)).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("npm install -g @mariozechner/pi-coding-agent")
                && msg.contains("--agent-bin"),
            "{msg}"
        );
    }
}
