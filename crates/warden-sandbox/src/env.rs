//! The agent's environment inside a sandbox: an allowlist, never the whole
//! host environment; and which values are secrets to hide in reports.

use std::ffi::OsString;

use warden_events::Agent;

/// Variables every sandboxed agent gets, if the host has them.
const BASE: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "TZ",
    "CI",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    "WARDEN_DEADLINE",
    "WARDEN_RUN_ID",
];

/// Prefixes of the variables each agent's CLI reads.
fn agent_prefixes(agent: Agent) -> &'static [&'static str] {
    match agent {
        Agent::Claude => &[
            "ANTHROPIC_",
            "CLAUDE_",
            "DISABLE_",
            "IS_SANDBOX",
            "API_TIMEOUT_MS",
            "BASH_DEFAULT_TIMEOUT_MS",
            "BASH_MAX_TIMEOUT_MS",
            "MAX_THINKING_TOKENS",
        ],
        Agent::Codex => &["OPENAI_", "CODEX_", "AZURE_OPENAI_"],
        Agent::OpenCode => &[
            "OPENCODE_",
            "ANTHROPIC_",
            "OPENAI_",
            "GEMINI_",
            "GOOGLE_",
            "OPENROUTER_",
            "GROQ_",
            "MISTRAL_",
            "XAI_",
            "DEEPSEEK_",
        ],
        Agent::Pi => &[
            "PI_",
            "ANTHROPIC_",
            "OPENAI_",
            "GEMINI_",
            "GOOGLE_",
            "OPENROUTER_",
            "GROQ_",
            "MISTRAL_",
            "XAI_",
            "DEEPSEEK_",
        ],
        Agent::Gemini => &["GEMINI_", "GOOGLE_"],
        Agent::Exec => &[],
    }
}

/// Whether `name` may pass into a sandbox for `agent` without being asked.
pub fn allowed(agent: Agent, name: &str) -> bool {
    BASE.contains(&name)
        || name.starts_with("LC_")
        || agent_prefixes(agent).iter().any(|p| name.starts_with(p))
}

/// A `--env` argument: a host variable by name, or a name and a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvArg {
    Name(String),
    Pair(String, String),
}

impl EnvArg {
    /// Parses `NAME` or `NAME=VALUE`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (name, value) = match s.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (s, None),
        };
        let valid = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(format!(
                "invalid --env `{s}`: expected NAME or NAME=VALUE, with a NAME of letters, digits and `_`, e.g. --env GITHUB_TOKEN"
            ));
        }
        Ok(match value {
            Some(v) => EnvArg::Pair(name.to_string(), v.to_string()),
            None => EnvArg::Name(name.to_string()),
        })
    }

    pub fn name(&self) -> &str {
        match self {
            EnvArg::Name(n) | EnvArg::Pair(n, _) => n,
        }
    }
}

/// Whether a variable's name says it holds a secret.
pub fn looks_secret(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    [
        "KEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "AUTH",
        "COOKIE",
        "SESSION",
    ]
    .iter()
    .any(|w| n.contains(w))
}

/// Values shorter than this are not redacted: they would blank out common
/// words and numbers everywhere.
pub const MIN_SECRET_LEN: usize = 4;

/// The agent's environment and the secret values in it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentEnv {
    /// Set on top of a cleared environment when `clear` is true, else on
    /// top of warden's own.
    pub vars: Vec<(OsString, OsString)>,
    pub clear: bool,
    pub secrets: Vec<String>,
}

/// Builds the agent's environment. `host` is warden's environment;
/// `fixed` what warden and the agent's command line set; `extra` the
/// user's `--env`. With `sandboxed`, only allowlisted host variables pass.
pub fn agent_env(
    agent: Agent,
    sandboxed: bool,
    host: &[(String, String)],
    fixed: &[(OsString, OsString)],
    extra: &[EnvArg],
) -> AgentEnv {
    let mut vars: Vec<(OsString, OsString)> = Vec::new();
    let mut secrets: Vec<String> = Vec::new();
    let mut push_secret = |v: &str| {
        if v.len() >= MIN_SECRET_LEN && !secrets.iter().any(|s| s == v) {
            secrets.push(v.to_string());
        }
    };
    let host_value = |name: &str| host.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    for (k, v) in host {
        let passes = !sandboxed || allowed(agent, k);
        if passes && looks_secret(k) {
            push_secret(v);
        }
        if sandboxed && passes {
            vars.push((k.into(), v.into()));
        }
    }
    for (k, v) in fixed {
        if looks_secret(&k.to_string_lossy()) {
            push_secret(&v.to_string_lossy());
        }
        vars.retain(|(n, _)| n != k);
        vars.push((k.clone(), v.clone()));
    }
    for e in extra {
        let value = match e {
            EnvArg::Pair(_, v) => Some(v.clone()),
            EnvArg::Name(n) => host_value(n),
        };
        // Everything given with --env is treated as a secret.
        if let Some(v) = value {
            push_secret(&v);
            vars.retain(|(n, _)| n != e.name());
            vars.push((e.name().into(), v.into()));
        }
    }
    AgentEnv {
        vars,
        clear: sandboxed,
        secrets,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> Vec<(String, String)> {
        [
            ("PATH", "/usr/bin"),
            ("HOME", "/home/u"),
            ("LC_ALL", "C"),
            ("ANTHROPIC_API_KEY", "sk-ant-123456"),
            ("AWS_SECRET_ACCESS_KEY", "aws-secret-value"),
            ("GITHUB_TOKEN", "ghp_abcdef"),
            ("EDITOR", "vim"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    fn names(e: &AgentEnv) -> Vec<String> {
        e.vars
            .iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn a_sandboxed_agent_gets_only_the_allowlist_and_its_own_keys() {
        let e = agent_env(
            Agent::Claude,
            true,
            &host(),
            &[("CI".into(), "true".into())],
            &[],
        );
        let n = names(&e);
        assert!(
            n.contains(&"PATH".into())
                && n.contains(&"LC_ALL".into())
                && n.contains(&"ANTHROPIC_API_KEY".into())
        );
        assert!(
            !n.contains(&"AWS_SECRET_ACCESS_KEY".into())
                && !n.contains(&"GITHUB_TOKEN".into())
                && !n.contains(&"EDITOR".into())
        );
        assert!(e.clear);
        assert_eq!(
            e.secrets,
            vec!["sk-ant-123456".to_string()],
            "only secrets that reach the agent are listed"
        );
    }

    #[test]
    fn env_flags_add_variables_and_are_always_secret() {
        let extra = [
            EnvArg::parse("GITHUB_TOKEN").unwrap(),
            EnvArg::parse("MODE=fast-lane").unwrap(),
        ];
        let e = agent_env(Agent::Codex, true, &host(), &[], &extra);
        let n = names(&e);
        assert!(n.contains(&"GITHUB_TOKEN".into()) && n.contains(&"MODE".into()));
        assert!(
            e.secrets.contains(&"ghp_abcdef".to_string())
                && e.secrets.contains(&"fast-lane".to_string())
        );
    }

    #[test]
    fn on_the_host_everything_passes_but_secret_values_are_known() {
        let e = agent_env(Agent::Exec, false, &host(), &[], &[]);
        assert!(!e.clear);
        assert!(
            e.vars.is_empty(),
            "the host environment is inherited, not copied"
        );
        assert!(
            e.secrets.contains(&"aws-secret-value".to_string())
                && e.secrets.contains(&"ghp_abcdef".to_string())
        );
    }

    #[test]
    fn bad_env_arguments_are_explained() {
        for bad in ["", "=x", "1ABC", "A-B=c", "A B"] {
            let e = EnvArg::parse(bad).unwrap_err();
            assert!(e.contains("NAME=VALUE"), "{e}");
        }
        assert_eq!(
            EnvArg::parse("A=b=c").unwrap(),
            EnvArg::Pair("A".into(), "b=c".into())
        );
    }
}
