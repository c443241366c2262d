//! The agent's environment inside a sandbox: an allowlist, never the whole
//! host environment; and which values are secrets to hide in reports.

use std::ffi::OsString;

use crate::SandboxNeeds;

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

/// Variables that lead to a host daemon (its socket, or the bus, agent or
/// engine address it listens on): never passed into a sandbox unless
/// given with `--env`, whatever prefix an agent's profile lets through,
/// since a daemon on the host acts outside the sandbox for whoever
/// reaches it.
pub const DAEMON_VARS: &[&str] = &[
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS",
    "DOCKER_HOST",
    "CONTAINER_HOST",
    "XDG_RUNTIME_DIR",
    "SLURM_CONF",
];

/// Whether a switch-like variable's value turns it on: set, and not `0`
/// or `false` (`CLAUDE_CODE_USE_BEDROCK=0` is off).
pub fn on(value: &str) -> bool {
    !value.is_empty() && value != "0" && !value.eq_ignore_ascii_case("false")
}

/// Whether `name` is `pattern`, or starts with it when it ends in `_`.
fn matches(pattern: &str, name: &str) -> bool {
    if pattern.ends_with('_') {
        name.starts_with(pattern)
    } else {
        name == pattern
    }
}

/// Why `name` does not pass although something lets it through, if so: a
/// cloud credential the agent gets only when asked for, or one whose
/// provider set-up's switch is off. These come before the prefixes and
/// names: `GOOGLE_APPLICATION_CREDENTIALS` is under pi's `GOOGLE_`.
enum Held {
    Asked,
    SwitchOff,
}

fn held(needs: &SandboxNeeds, host: &[(String, String)], name: &str) -> Option<Held> {
    if needs.provider.asked.iter().any(|p| matches(p, name)) {
        return Some(Held::Asked);
    }
    let mut switch = None;
    for (s, names) in needs.provider.gated {
        if names.iter().any(|p| matches(p, name)) {
            if host.iter().any(|(k, v)| k == s && on(v)) {
                return None;
            }
            switch = Some(Held::SwitchOff);
        }
    }
    switch
}

/// Whether `name` may pass into a sandbox for `agent` without being
/// asked; `host` is warden's environment, where the provider set-ups'
/// switches are read.
pub fn allowed(needs: &SandboxNeeds, host: &[(String, String)], name: &str) -> bool {
    if DAEMON_VARS.contains(&name) || held(needs, host, name).is_some() {
        return false;
    }
    BASE.contains(&name)
        || name.starts_with("LC_")
        || needs.provider.names.contains(&name)
        || needs.env_prefixes.iter().any(|p| name.starts_with(p))
        || needs
            .provider
            .gated
            .iter()
            .any(|(_, names)| names.iter().any(|p| matches(p, name)))
}

/// The largest settings file read for the names it mentions.
const MAX_CONFIG: u64 = 1 << 20;

/// What the agent's set-up refers to that will not reach it, one line
/// each, naming the variable first: a `--env NAME` that warden's
/// environment does not have; in a sandbox, a host variable of a provider
/// family whose switch is on (`AWS_DEFAULT_REGION` with
/// `CLAUDE_CODE_USE_BEDROCK=1`), or named in the agent's settings files,
/// that does not pass; a credentials file that a passed variable names
/// but that does not exist. `home` is where the settings files are.
pub fn dropped(
    needs: &SandboxNeeds,
    sandboxed: bool,
    host: &[(String, String)],
    extra: &[EnvArg],
    home: Option<&std::path::Path>,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let host_value = |name: &str| {
        host.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    for e in extra {
        if let EnvArg::Name(n) = e
            && host_value(n).is_none()
        {
            out.push(format!(
                "{n}: given with --env but not set in warden's environment, so the agent does not get it"
            ));
        }
    }
    if !sandboxed {
        return out;
    }
    for e in extra {
        if DAEMON_VARS.contains(&e.name()) {
            out.push(format!(
                "{}: given with --env, but the host socket it leads to stays hidden in the sandbox unless --allow-socket names it",
                e.name()
            ));
        }
    }
    let given = |name: &str| extra.iter().any(|e| e.name() == name);
    let passes = |name: &str| allowed(needs, host, name) || given(name);
    let mut said: Vec<String> = Vec::new();
    // A cloud credential of an agent with no switch for its cloud set-up.
    for (name, _) in host {
        if !given(name) && matches!(held(needs, host, name), Some(Held::Asked)) {
            said.push(name.clone());
            out.push(format!(
                "{name}: a cloud credential, not passed into the sandbox unless asked for; --env {name} passes it"
            ));
        }
    }
    for (switch, prefix) in needs.provider.families {
        if !host_value(switch).is_some_and(on) {
            continue;
        }
        for (name, _) in host {
            if name.starts_with(prefix) && !passes(name) && !said.contains(name) {
                said.push(name.clone());
                out.push(format!(
                    "{name}: set with {switch}, but not passed into the sandbox (not among the variables this agent's documented set-ups read); --env {name} passes it"
                ));
            }
        }
    }
    if let Some(home) = home {
        for file in needs.provider.config_files {
            let path = home.join(file);
            let Some(text) = read_small(&path) else {
                continue;
            };
            for (name, _) in host {
                if !passes(name) && !said.contains(name) && names(&text, name) {
                    said.push(name.clone());
                    // No `--env` advice: the agent can write this file, so
                    // a name in it may be the agent's own bait for a host
                    // secret (`$GITHUB_TOKEN` planted in its settings).
                    out.push(format!(
                        "{name}: named in {}, but not passed into the sandbox (the agent can write that file: pass the variable with --env only if you put it there)",
                        path.display()
                    ));
                }
            }
        }
    }
    for var in needs.provider.file_vars {
        if let Some(v) = host_value(var).filter(|_| passes(var))
            && !v.is_empty()
        {
            let path = std::path::Path::new(v);
            // Never the value itself: it may be the key, not a path to it.
            if !path.is_absolute() {
                out.push(format!(
                    "{var}: its value ({} characters) is not an absolute path; the sandbox binds only an absolute one, so the agent may not find it",
                    v.chars().count()
                ));
            } else if !path.is_file() {
                out.push(format!(
                    "{var}: {v} is not a file here, so the agent cannot read it"
                ));
            }
        }
    }
    out
}

/// Whether `text` names the variable `name` as a whole word.
fn names(text: &str, name: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(name).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + name.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

/// A settings file's text: a regular file of at most [`MAX_CONFIG`]
/// bytes. The agent's state directory is writable by the agent, so what
/// is there is first reached with `O_PATH` (which opens nothing: a FIFO
/// or a device planted in its place is never opened) and opened for
/// reading, without blocking, only once it is known to be a regular file.
fn read_small(path: &std::path::Path) -> Option<String> {
    use rustix::fs::{Mode, OFlags};
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let probe = rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).ok()?;
    let probe = std::fs::File::from(probe);
    if !probe.metadata().ok()?.is_file() {
        return None;
    }
    let through = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&probe));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlags::NONBLOCK | OFlags::CLOEXEC).bits() as i32)
        .open(through)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    file.take(MAX_CONFIG).read_to_string(&mut text).ok()?;
    Some(text)
}

/// A `--env` argument: a host variable by name, or a name and a value.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
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

    /// A warning when this looks like a secret (by its name) whose value
    /// is too short to be masked in reports, starting with the variable's
    /// name; `host` gives a variable's value for `--env NAME`.
    pub fn unmasked_warning(&self, host: impl Fn(&str) -> Option<String>) -> Option<String> {
        let value = match self {
            EnvArg::Pair(_, v) => v.clone(),
            EnvArg::Name(n) => host(n)?,
        };
        let short = !value.is_empty() && value.chars().count() < MIN_SECRET_LEN;
        (short && looks_secret(self.name())).then(|| {
            format!(
                "{}: its value has fewer than {MIN_SECRET_LEN} characters, too few to be masked in reports",
                self.name()
            )
        })
    }
}

/// Words that, as a part of a variable's name, say it holds a secret.
const SECRET_WORDS: &[&str] = &[
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    // OTEL_EXPORTER_OTLP_HEADERS: `Authorization=Bearer ...`.
    "HEADERS",
];

/// Whether a variable's name says it holds a secret: one of its
/// `_`-separated parts is, or ends with, a `SECRET_WORDS` word (a plural
/// too): `ANTHROPIC_API_KEY`, `APIKEY`, `AWS_SESSION_TOKEN`, `NPM_AUTH`.
/// A word inside a longer part is not enough: `GIT_AUTHOR_NAME`,
/// `XAUTHORITY`, `KEYBOARD` and `GIT_CONFIG_KEY_0` name no secret.
/// `SESSION` alone is not a secret word: it names desktop sessions and bus
/// addresses far more often (`XDG_SESSION_CLASS`, `DESKTOP_SESSION`,
/// `DBUS_SESSION_BUS_ADDRESS`), and a session token's name says `TOKEN`.
pub fn looks_secret(name: &str) -> bool {
    // `GIT_CONFIG_KEY_<n>` holds the name of a git setting, not a key.
    if name.starts_with("GIT_CONFIG_KEY_") {
        return false;
    }
    name.to_ascii_uppercase().split('_').any(|part| {
        let singular = part.strip_suffix('S').unwrap_or(part);
        SECRET_WORDS
            .iter()
            .any(|w| part.ends_with(w) || singular.ends_with(w))
    })
}

/// Values shorter than this are never masked, not even those given with
/// `--env`: they would blank out ordinary words and numbers everywhere
/// (`--env DEBUG=1`, `--env MODE=fast`). Re-exported from the masker,
/// which holds to the same floor.
pub use warden_events::redact::MIN_SECRET_LEN;

/// Whether the value of a variable whose name looks secret can be a
/// secret, rather than a setting that happens to have such a name: at
/// least [`MIN_SECRET_LEN`] characters, no white space, not a path (it
/// starts with `/`, `~` or `.`), and not a plain word: it has a digit, or
/// both upper- and lower-case letters. So `XDG_SESSION_CLASS=user`,
/// `SSH_AUTH_SOCK=/run/user/1000/ssh` and `AUTH_MODE=interactive` are not
/// masked; `sk-ant-api03-...`, `ghp_...` and `AKIA...` are.
pub fn can_be_secret(value: &str) -> bool {
    let chars = value.chars().count();
    let upper = value.chars().any(|c| c.is_uppercase());
    let lower = value.chars().any(|c| c.is_lowercase());
    let digit = value.chars().any(|c| c.is_ascii_digit());
    chars >= MIN_SECRET_LEN
        && !value.chars().any(char::is_whitespace)
        && !value.starts_with(['/', '~', '.'])
        && (digit || (upper && lower))
}

/// The agent's environment and the secret values in it.
#[non_exhaustive]
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
    needs: &SandboxNeeds,
    sandboxed: bool,
    host: &[(String, String)],
    fixed: &[(OsString, OsString)],
    extra: &[EnvArg],
) -> AgentEnv {
    let mut vars: Vec<(OsString, OsString)> = Vec::new();
    let mut secrets: Vec<String> = Vec::new();
    // `explicit`: given with --env, so the user says it is a secret; only
    // the floor on length applies. Found by name: it must look like one.
    let mut push_secret = |v: &str, explicit: bool| {
        let masked = if explicit {
            v.chars().count() >= MIN_SECRET_LEN
        } else {
            can_be_secret(v)
        };
        if masked && !secrets.iter().any(|s| s == v) {
            secrets.push(v.to_string());
        }
    };
    let host_value = |name: &str| host.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    for (k, v) in host {
        let passes = !sandboxed || allowed(needs, host, k);
        if passes && looks_secret(k) {
            push_secret(v, false);
        }
        if sandboxed && passes {
            vars.push((k.into(), v.into()));
        }
    }
    for (k, v) in fixed {
        if looks_secret(&k.to_string_lossy()) {
            push_secret(&v.to_string_lossy(), false);
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
            push_secret(&v, true);
            vars.retain(|(n, _)| n != e.name());
            vars.push((e.name().into(), v.into()));
        }
    }
    add_git_config(&mut vars, host, sandboxed);
    AgentEnv {
        vars,
        clear: sandboxed,
        secrets,
    }
}

/// git settings every agent's git gets. Without them, a `git commit` that
/// triggers automatic maintenance leaves it running detached in the
/// background, where it outlives the agent and is killed as its orphan.
/// Run in the foreground, it is part of the commit, as it should be.
pub const GIT_CONFIG: &[(&str, &str)] = &[
    ("maintenance.autoDetach", "false"),
    ("gc.autoDetach", "false"),
];

/// Appends [`GIT_CONFIG`] through `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/
/// `GIT_CONFIG_VALUE_n`, after any the agent already gets (from the host,
/// or from `--env`), which are kept. A count git cannot read is left alone:
/// git refuses it with its own message, which is the user's to see.
fn add_git_config(
    vars: &mut Vec<(OsString, OsString)>,
    host: &[(String, String)],
    sandboxed: bool,
) {
    const COUNT: &str = "GIT_CONFIG_COUNT";
    let set = vars
        .iter()
        .rev()
        .find(|(k, _)| k == COUNT)
        .map(|(_, v)| v.to_string_lossy().into_owned());
    // On the host the agent inherits warden's environment; in a sandbox
    // only what `vars` holds.
    let inherited = (!sandboxed)
        .then(|| {
            host.iter()
                .find(|(k, _)| k == COUNT)
                .map(|(_, v)| v.clone())
        })
        .flatten();
    let first: usize = match set.or(inherited) {
        None => 0,
        Some(n) if n.trim().is_empty() => 0,
        Some(n) => match n.trim().parse() {
            Ok(n) => n,
            Err(_) => return,
        },
    };
    for (i, (key, value)) in GIT_CONFIG.iter().enumerate() {
        let n = first + i;
        for (name, v) in [("KEY", key), ("VALUE", value)] {
            let name = OsString::from(format!("GIT_CONFIG_{name}_{n}"));
            vars.retain(|(k, _)| *k != name);
            vars.push((name, OsString::from(v)));
        }
    }
    vars.retain(|(k, _)| k != COUNT);
    vars.push((COUNT.into(), (first + GIT_CONFIG.len()).to_string().into()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use warden_events::Agent;

    fn host() -> Vec<(String, String)> {
        [
            ("PATH", "/usr/bin"),
            ("HOME", "/home/u"),
            ("LC_ALL", "C"),
            ("ANTHROPIC_API_KEY", "sk-ant-123456"),
            ("AWS_SECRET_ACCESS_KEY", "aws-Secret-Value9"),
            ("GITHUB_TOKEN", "ghp_abcdef123"),
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
            &crate::needs(Agent::Claude),
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
        // Claude Code's Bedrock set-up reads it, but Bedrock is not on.
        assert!(!n.contains(&"AWS_SECRET_ACCESS_KEY".into()));
        assert!(!n.contains(&"GITHUB_TOKEN".into()) && !n.contains(&"EDITOR".into()));
        assert!(e.clear);
        assert_eq!(
            e.secrets,
            vec!["sk-ant-123456".to_string()],
            "only secrets that reach the agent are listed"
        );
        // Codex documents no AWS set-up: the key stays out.
        let e = agent_env(&crate::needs(Agent::Codex), true, &host(), &[], &[]);
        let n = names(&e);
        assert!(
            !n.contains(&"AWS_SECRET_ACCESS_KEY".into())
                && !n.contains(&"ANTHROPIC_API_KEY".into())
        );
        assert!(e.secrets.is_empty(), "{:?}", e.secrets);
    }

    fn with(extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut h = host();
        h.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        h.push((
            "OTEL_EXPORTER_OTLP_HEADERS".into(),
            "authorization=Bearer%20Abc123xyz".into(),
        ));
        h.push(("GOOGLE_APPLICATION_CREDENTIALS".into(), "/k/sa.json".into()));
        h.push(("CLOUD_ML_REGION".into(), "us-east5".into()));
        h
    }

    #[test]
    fn cloud_credentials_pass_only_with_their_provider_switch_on() {
        let claude = crate::needs(Agent::Claude);
        let gated = [
            "AWS_SECRET_ACCESS_KEY",
            "OTEL_EXPORTER_OTLP_HEADERS",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "CLOUD_ML_REGION",
        ];
        for off in [
            &[][..],
            &[("CLAUDE_CODE_USE_BEDROCK", "0")][..],
            &[
                ("CLAUDE_CODE_USE_VERTEX", "false"),
                ("CLAUDE_CODE_ENABLE_TELEMETRY", ""),
            ][..],
        ] {
            let n = names(&agent_env(&claude, true, &with(off), &[], &[]));
            for g in gated {
                assert!(!n.contains(&g.to_string()), "{g} passed with {off:?}");
            }
        }
        let on = with(&[
            ("CLAUDE_CODE_USE_BEDROCK", "1"),
            ("CLAUDE_CODE_USE_VERTEX", "1"),
            ("CLAUDE_CODE_ENABLE_TELEMETRY", "1"),
        ]);
        let e = agent_env(&claude, true, &on, &[], &[]);
        let n = names(&e);
        for g in gated {
            assert!(
                n.contains(&g.to_string()),
                "{g} did not pass with its switch"
            );
        }
        assert!(
            e.secrets
                .contains(&"authorization=Bearer%20Abc123xyz".to_string()),
            "the OTLP headers are masked: {:?}",
            e.secrets
        );
        // Only Bedrock on: Vertex's and telemetry's stay out.
        let n = names(&agent_env(
            &claude,
            true,
            &with(&[("CLAUDE_CODE_USE_BEDROCK", "1")]),
            &[],
            &[],
        ));
        assert!(n.contains(&"AWS_SECRET_ACCESS_KEY".into()));
        assert!(!n.contains(&"OTEL_EXPORTER_OTLP_HEADERS".into()));
        assert!(!n.contains(&"GOOGLE_APPLICATION_CREDENTIALS".into()));
    }

    #[test]
    fn agents_with_no_cloud_switch_get_cloud_credentials_only_when_asked() {
        for agent in [Agent::OpenCode, Agent::Pi] {
            let needs = crate::needs(agent);
            let host = with(&[("AWS_ACCESS_KEY_ID", "AKIA0000EXAMPLE")]);
            let n = names(&agent_env(&needs, true, &host, &[], &[]));
            for k in [
                "AWS_ACCESS_KEY_ID",
                "AWS_SECRET_ACCESS_KEY",
                "GOOGLE_APPLICATION_CREDENTIALS",
            ] {
                assert!(!n.contains(&k.to_string()), "{agent:?}: {k} passed");
            }
            let d = dropped(&needs, true, &host, &[], None);
            assert!(
                d.iter().any(
                    |l| l.starts_with("AWS_SECRET_ACCESS_KEY: a cloud credential")
                        && l.ends_with("--env AWS_SECRET_ACCESS_KEY passes it")
                ),
                "{agent:?}: {d:?}"
            );
            let extra = [EnvArg::parse("AWS_SECRET_ACCESS_KEY").unwrap()];
            let n = names(&agent_env(&needs, true, &host, &[], &extra));
            assert!(n.contains(&"AWS_SECRET_ACCESS_KEY".into()), "{agent:?}");
            let d = dropped(&needs, true, &host, &extra, None);
            assert!(
                !d.iter().any(|l| l.starts_with("AWS_SECRET_ACCESS_KEY")),
                "{d:?}"
            );
        }
    }

    #[test]
    fn a_credentials_value_that_is_not_a_path_is_never_echoed() {
        let key = r#"{"type":"service_account","private_key":"-----BEGIN"}"#;
        let host: Vec<(String, String)> = [
            ("GOOGLE_GENAI_USE_VERTEXAI", "true"),
            ("GOOGLE_APPLICATION_CREDENTIALS", key),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let d = dropped(&crate::needs(Agent::Gemini), true, &host, &[], None);
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(!d[0].contains("private_key"), "{d:?}");
        assert!(
            d[0].contains(&format!("({} characters)", key.len())),
            "{d:?}"
        );
    }

    #[test]
    fn daemon_addresses_never_pass_unless_given_and_then_the_socket_is_named() {
        let host: Vec<(String, String)> = DAEMON_VARS
            .iter()
            .map(|k| (k.to_string(), "/run/user/0/bus".to_string()))
            .collect();
        for agent in [Agent::Claude, Agent::Codex, Agent::Pi, Agent::Exec] {
            let needs = crate::needs(agent);
            for name in DAEMON_VARS {
                assert!(!allowed(&needs, &host, name), "{agent:?} {name}");
            }
            let env = agent_env(&needs, true, &host, &[], &[]);
            assert!(
                !env.vars
                    .iter()
                    .any(|(k, _)| DAEMON_VARS.iter().any(|d| k == d)),
                "{:?}",
                env.vars
            );
        }
        let extra = [EnvArg::parse("SSH_AUTH_SOCK").unwrap()];
        let needs = crate::needs(Agent::Exec);
        let env = agent_env(&needs, true, &host, &[], &extra);
        assert!(env.vars.iter().any(|(k, _)| k == "SSH_AUTH_SOCK"));
        let d = dropped(&needs, true, &host, &extra, None);
        assert!(
            d.iter()
                .any(|l| l.starts_with("SSH_AUTH_SOCK: given with --env")
                    && l.contains("--allow-socket")),
            "{d:?}"
        );
    }

    #[test]
    fn what_does_not_pass_but_is_referred_to_is_named() {
        let host: Vec<(String, String)> = [
            ("CLAUDE_CODE_USE_BEDROCK", "1"),
            ("AWS_REGION", "us-west-2"),
            ("AWS_DEFAULT_REGION", "eu-central-1"),
            ("CORP_KEY", "corp-Key-123"),
            ("CORP_KEY_OLD", "x"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".claude")).unwrap();
        std::fs::write(
            home.path().join(".claude/settings.json"),
            r#"{"apiKeyHelper": "echo $CORP_KEY"}"#,
        )
        .unwrap();
        let extra = [EnvArg::parse("MISSING_ONE").unwrap()];
        let d = dropped(
            &crate::needs(Agent::Claude),
            true,
            &host,
            &extra,
            Some(home.path()),
        );
        let starts = |p: &str| d.iter().filter(|l| l.starts_with(p)).count();
        assert_eq!(starts("MISSING_ONE: given with --env"), 1, "{d:?}");
        assert_eq!(
            starts("AWS_DEFAULT_REGION: set with CLAUDE_CODE_USE_BEDROCK"),
            1,
            "{d:?}"
        );
        assert_eq!(starts("CORP_KEY: named in"), 1, "{d:?}");
        // The agent can write its settings: no advice to pass what they name.
        assert!(
            d.iter()
                .filter(|l| l.starts_with("CORP_KEY"))
                .all(|l| !l.contains("--env CORP_KEY") && l.contains("the agent can write")),
            "{d:?}"
        );
        assert_eq!(starts("CORP_KEY_OLD"), 0, "a whole word only: {d:?}");
        assert_eq!(starts("AWS_REGION"), 0, "it passes: {d:?}");
        // Switched off, or on the host: nothing but the missing --env.
        let off: Vec<(String, String)> = host
            .iter()
            .filter(|(k, _)| k != "CLAUDE_CODE_USE_BEDROCK")
            .cloned()
            .collect();
        let d = dropped(&crate::needs(Agent::Claude), true, &off, &[], None);
        assert!(d.is_empty(), "{d:?}");
        let d = dropped(
            &crate::needs(Agent::Claude),
            false,
            &host,
            &extra,
            Some(home.path()),
        );
        assert_eq!(d.len(), 1, "{d:?}");
    }

    #[test]
    fn env_flags_add_variables_and_are_always_secret() {
        let extra = [
            EnvArg::parse("GITHUB_TOKEN").unwrap(),
            EnvArg::parse("MODE=fast-lane").unwrap(),
        ];
        let e = agent_env(&crate::needs(Agent::Codex), true, &host(), &[], &extra);
        let n = names(&e);
        assert!(n.contains(&"GITHUB_TOKEN".into()) && n.contains(&"MODE".into()));
        assert!(
            e.secrets.contains(&"ghp_abcdef123".to_string())
                && e.secrets.contains(&"fast-lane".to_string())
        );
    }

    #[test]
    fn on_the_host_everything_passes_but_secret_values_are_known() {
        let e = agent_env(&crate::needs(Agent::Exec), false, &host(), &[], &[]);
        assert!(!e.clear);
        assert!(
            e.vars
                .iter()
                .all(|(k, _)| k.to_string_lossy().starts_with("GIT_CONFIG_")),
            "the host environment is inherited, not copied"
        );
        assert!(
            e.secrets.contains(&"aws-Secret-Value9".to_string())
                && e.secrets.contains(&"ghp_abcdef123".to_string())
        );
    }

    #[test]
    fn only_names_with_a_secret_word_as_a_part_look_secret() {
        for yes in [
            "ANTHROPIC_API_KEY",
            "APIKEY",
            "GITHUB_TOKEN",
            "AWS_SESSION_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "NPM_AUTH",
            "DB_PASSWORD",
            "MY_CREDENTIALS",
            "GPG_PASSPHRASE",
            "SSH_KEYS",
            "session_cookie",
        ] {
            assert!(looks_secret(yes), "{yes}");
        }
        for no in [
            "XDG_SESSION_CLASS",
            "DESKTOP_SESSION",
            "DBUS_SESSION_BUS_ADDRESS",
            "GIT_AUTHOR_NAME",
            "XAUTHORITY",
            "KEYBOARD_LAYOUT",
            "GIT_CONFIG_KEY_0",
            "PATH",
        ] {
            assert!(!looks_secret(no), "{no}");
        }
    }

    #[test]
    fn only_values_that_can_be_secrets_are_masked_for_their_name() {
        for yes in [
            "sk-ant-api03-AbC",
            "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
            "AKIAIOSFODNN7EXAMPLE",
            "hunter42",
            "CorrectHorse",
        ] {
            assert!(can_be_secret(yes), "{yes}");
        }
        for no in [
            "user",
            "ubuntu",
            "fake1",
            "ubuntu-wayland",
            "interactive",
            "/run/user/1000/keyring/ssh",
            "~/.ssh/id_ed25519",
            "two words 12345678",
        ] {
            assert!(!can_be_secret(no), "{no}");
        }
        let host: Vec<(String, String)> = [
            ("XDG_SESSION_CLASS", "user"),
            ("DESKTOP_SESSION", "ubuntu"),
            ("SSH_AUTH_SOCK", "/run/user/1000/keyring/ssh"),
            ("NPM_TOKEN", "npm_5Fz8Qw2Lk9"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let extra = [
            EnvArg::parse("MODE=fast").unwrap(),
            EnvArg::parse("PHRASE=correcthorse").unwrap(),
        ];
        let e = agent_env(&crate::needs(Agent::Exec), false, &host, &[], &extra);
        assert_eq!(
            e.secrets,
            vec!["npm_5Fz8Qw2Lk9".to_string(), "correcthorse".to_string()],
            "a short --env value is not masked; a long one is, word or not"
        );
    }

    fn var<'a>(e: &'a AgentEnv, name: &str) -> Option<&'a str> {
        e.vars
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.to_str())
    }

    #[test]
    fn git_never_detaches_maintenance_and_the_users_git_config_is_kept() {
        // Nothing set: ours from 0, on the host and in a sandbox.
        for sandboxed in [false, true] {
            let e = agent_env(&crate::needs(Agent::Exec), sandboxed, &host(), &[], &[]);
            assert_eq!(var(&e, "GIT_CONFIG_COUNT"), Some("2"));
            assert_eq!(var(&e, "GIT_CONFIG_KEY_0"), Some("maintenance.autoDetach"));
            assert_eq!(var(&e, "GIT_CONFIG_VALUE_0"), Some("false"));
            assert_eq!(var(&e, "GIT_CONFIG_KEY_1"), Some("gc.autoDetach"));
            assert_eq!(var(&e, "GIT_CONFIG_VALUE_1"), Some("false"));
        }
        // The host's own, inherited on the host: appended after them.
        let mut host = host();
        host.push(("GIT_CONFIG_COUNT".into(), "1".into()));
        host.push(("GIT_CONFIG_KEY_0".into(), "user.name".into()));
        host.push(("GIT_CONFIG_VALUE_0".into(), "Jane".into()));
        let e = agent_env(&crate::needs(Agent::Exec), false, &host, &[], &[]);
        assert_eq!(var(&e, "GIT_CONFIG_COUNT"), Some("3"));
        assert_eq!(var(&e, "GIT_CONFIG_KEY_0"), None, "inherited, not replaced");
        assert_eq!(var(&e, "GIT_CONFIG_KEY_1"), Some("maintenance.autoDetach"));
        assert_eq!(var(&e, "GIT_CONFIG_KEY_2"), Some("gc.autoDetach"));
        // In a sandbox the host's do not pass, unless given with --env.
        let e = agent_env(&crate::needs(Agent::Exec), true, &host, &[], &[]);
        assert_eq!(var(&e, "GIT_CONFIG_COUNT"), Some("2"));
        let extra = [
            EnvArg::parse("GIT_CONFIG_COUNT").unwrap(),
            EnvArg::parse("GIT_CONFIG_KEY_0").unwrap(),
            EnvArg::parse("GIT_CONFIG_VALUE_0").unwrap(),
        ];
        let e = agent_env(&crate::needs(Agent::Exec), true, &host, &[], &extra);
        assert_eq!(var(&e, "GIT_CONFIG_COUNT"), Some("3"));
        assert_eq!(var(&e, "GIT_CONFIG_KEY_0"), Some("user.name"));
        assert_eq!(var(&e, "GIT_CONFIG_KEY_2"), Some("gc.autoDetach"));
        // A count git cannot read is git's to refuse.
        let e = agent_env(
            &crate::needs(Agent::Exec),
            false,
            &host,
            &[("GIT_CONFIG_COUNT".into(), "many".into())],
            &[],
        );
        assert_eq!(var(&e, "GIT_CONFIG_COUNT"), Some("many"));
    }

    #[test]
    fn a_short_value_of_a_secret_name_is_warned_about() {
        let none = |_: &str| None;
        let w = EnvArg::parse("API_TOKEN=abc")
            .unwrap()
            .unmasked_warning(none);
        assert!(w.is_some_and(|w| w.contains("API_TOKEN") && w.contains("8 characters")));
        assert!(
            EnvArg::parse("DEBUG=1")
                .unwrap()
                .unmasked_warning(none)
                .is_none()
        );
        assert!(
            EnvArg::parse("API_TOKEN=long-enough-1")
                .unwrap()
                .unmasked_warning(none)
                .is_none()
        );
        let w = EnvArg::parse("DB_PASSWORD")
            .unwrap()
            .unmasked_warning(|_| Some("pw".into()));
        assert!(w.is_some());
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
