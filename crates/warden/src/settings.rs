//! Settings: flags, then `WARDEN_*` variables, then the project's
//! `warden.toml` (named, or found as `discover.rs` says), then the user's
//! own, then the defaults (in `warden_run::defaults`).
//!
//! Every source gives text; every value goes through the same parser, so a
//! bad value gets the same clear message wherever it came from, naming the
//! source (the flag, the variable, or the key and file), the value, and an
//! example of a good one. Every value present is checked, also one that a
//! higher source overrides: a typo in a CI variable should not wait for the
//! day the flag is dropped. Nothing bad is ever replaced by a default.
//!
//! Each setting is one row of [`SETTINGS`] (`table.rs`): its name gives its
//! flag, variable and key, its [`Kind`] (`kind.rs`) how its text is read
//! and which field of [`Resolved`] it fills. `flags.rs` turns the rows into
//! `warden run`'s arguments. Resolving only reads text: what the machine
//! has (a sandbox for `sandbox = auto`, a cgroup) is found out when the run
//! is planned and started, not here.
//!
//! To add a setting: add its row and the field of [`Resolved`] it fills
//! (with its default in `Resolved::default`), its line in the book's settings
//! table, and its effect in the settings test of `tests/run`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use warden_events::Agent;
use warden_run::{ContainmentChoice, Limits, SandboxChoice};

/// The `warden.toml` table of per-agent settings: `[agent.claude]`.
const AGENT_TABLE: &str = "agent";

pub(crate) mod discover;
mod flags;
mod kind;
pub(crate) mod table;

pub(crate) use flags::SettingFlags;
use kind::Bad;
pub(crate) use kind::{Kind, parse_duration};
use table::known_keys;
pub(crate) use table::{SETTINGS, Setting, find};

#[derive(Debug, thiserror::Error, PartialEq)]
pub(crate) enum SettingsError {
    #[error("invalid value `{value}` for {origin}: expected {expected}")]
    Invalid {
        origin: String,
        value: String,
        expected: &'static str,
    },
    #[error("the value `{value}` for {origin} is too large: {limit}")]
    TooLarge {
        origin: String,
        value: String,
        limit: &'static str,
    },
    #[error("unknown key `{key}` in {}; known keys: {}", .path.display(), known_keys())]
    UnknownKey { key: String, path: PathBuf },
    #[error("could not read the config file {}: {message}", .path.display())]
    Read { path: PathBuf, message: String },
    #[error("{what} in {}: {says}", .path.display())]
    AgentTable {
        what: String,
        path: PathBuf,
        says: String,
    },
}

/// The text of a config file; `None` if a `warden.toml` looked for is
/// simply not there (a file named with `--config` must exist). The work tree is the
/// agent's to change, so the file is read as one it may have planted:
/// only a regular file, bounded, without blocking on a FIFO. Anything
/// else that is there (a directory, a FIFO, a file warden may not read,
/// text that is not UTF-8) is an error: never silently the defaults.
fn read_config(path: &Path, named: bool) -> Result<Option<String>, SettingsError> {
    use warden_run::regular_file::{self, ReadError};
    match regular_file::read_text(path, warden_run::defaults::MAX_WORK_TREE_FILE) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.is_not_found() && !named => Ok(None),
        Err(e) => {
            let message = match &e {
                ReadError::Io(io) if io.kind() == std::io::ErrorKind::PermissionDenied => {
                    format!("{io}: make it readable by this user, or remove it")
                }
                ReadError::NotRegular { .. } | ReadError::NotUtf8 { .. } => {
                    format!("{e}: a config file is TOML text; remove or replace it")
                }
                _ => e.to_string(),
            };
            Err(SettingsError::Read {
                path: path.to_path_buf(),
                message,
            })
        }
    }
}

/// `value` (one path, or with `sep` paths joined by it) with each
/// relative path made relative to `dir` (a config file's directory).
/// Only a list is split: a single path may hold the separator in a name
/// (`run_dir = "a,b"` is the one directory `a,b`).
fn relative_to(dir: &Path, value: &str, sep: Option<&str>) -> String {
    let one = |item: &str| {
        let p = Path::new(item.trim());
        if item.trim().is_empty() || p.is_absolute() {
            item.to_string()
        } else {
            dir.join(p).to_string_lossy().into_owned()
        }
    };
    match sep {
        Some(sep) => value.split(sep).map(one).collect::<Vec<_>>().join(sep),
        None => one(value),
    }
}

/// A TOML error as its place and message, without the quoted line that
/// `toml` shows: `./warden.toml` may be a link the agent planted to a file
/// it cannot read itself (a key, `/etc/shadow`), and warden's error must
/// not print that file's lines.
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim().replace('\n', "; ");
    match e.span() {
        Some(span) => {
            let before = &text.as_bytes()[..span.start.min(text.len())];
            let line = before.iter().filter(|b| **b == b'\n').count() + 1;
            let column = before.iter().rev().take_while(|b| **b != b'\n').count() + 1;
            format!("TOML parse error at line {line}, column {column}: {message}")
        }
        None => format!("TOML parse error: {message}"),
    }
}

/// Where a setting's value came from (`warden config` says it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// A flag (or a batch file's key, which fills the flags).
    Flag(String),
    /// A `WARDEN_*` variable, by name.
    Env(String),
    /// A config file, and which one it is.
    File(PathBuf, FileScope),
}

/// Which config file a value came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum FileScope {
    /// The project's `warden.toml`, found from the current directory up.
    #[default]
    Project,
    /// The file `--config` or `WARDEN_CONFIG` named.
    Named,
    /// The user's own, `$XDG_CONFIG_HOME/warden/warden.toml`.
    User,
}

impl FileScope {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FileScope::Project => "project",
            FileScope::Named => "named",
            FileScope::User => "user",
        }
    }
}

#[derive(Debug, Clone)]
struct Sourced {
    value: String,
    origin: String,
    source: Source,
    /// Came from `SettingFlags` (which a batch file fills as well).
    from_flags: bool,
    /// Came from the config file's top level.
    from_file: bool,
}

/// Raw values from every source, highest precedence first.
#[derive(Debug, Default)]
pub(crate) struct RawSettings {
    values: HashMap<&'static str, Vec<Sourced>>,
    /// The config file in play, as it was read, and the nearer places
    /// looked in and found empty.
    config: Vec<crate::config_watch::ConfigWatch>,
    /// `[agent.NAME] image = "…"` of the config file, and the file.
    agent_images: Vec<(Agent, String)>,
    agent_image_files: Vec<PathBuf>,
    /// The kind of the file being read (`add_file`).
    reading: FileScope,
    /// The config files read, in the order read (nearest first).
    files: Vec<(PathBuf, FileScope)>,
    /// The project's `warden.toml` found by looking up from the current
    /// directory (not one named): its directory is the project's root.
    found: Option<PathBuf>,
}

/// Settings the rest of the program trusts.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    pub limits: Limits,
    pub containment: ContainmentChoice,
    pub sandbox: SandboxChoice,
    pub no_network: bool,
    /// `--allow-socket`: host unix sockets a sandboxed agent may reach.
    pub allow_sockets: Vec<PathBuf>,
    pub image: Option<String>,
    /// `--container-network`, `--engine-arg`: docker and podman only.
    pub container_network: Option<String>,
    pub engine_args: Vec<String>,
    /// `--container-user`, `--device`, `--group-add`: docker and podman.
    pub container_user: warden_sandbox::ContainerUser,
    pub devices: Vec<String>,
    pub group_add: Vec<String>,
    pub run_dir: Option<PathBuf>,
    pub json: bool,
    pub quiet: bool,
    /// The plain view's heartbeat; `None` when disabled.
    pub heartbeat: Option<Duration>,
    /// `--preserve-status`: exit with the command's own code.
    pub preserve_status: bool,
    /// Retention (`warden gc`): the newest directories kept per kind, and
    /// the age in days past which they go.
    pub keep_runs: Option<u64>,
    pub keep_days: Option<u64>,
    /// `--retries`, `--retry-on`, `--retry-backoff`.
    pub retry: warden_run::retry::RetryPolicy,
    /// The most a session's runs may spend together.
    pub session_budget: warden_run::budget::Budget,
    /// `--check` and its clocks and feedback; no check while its command
    /// is empty (its other settings may come from `warden.toml` for the
    /// runs that have one).
    pub check: warden_run::CheckRequest,
    /// `--setup`, `--host-setup`, `--on-success`, `--finally` and the
    /// clocks of those and of a prompt's commands.
    pub hooks: warden_run::HooksRequest,
    /// `--merge`.
    pub merge: bool,
    /// OpenTelemetry export (started by `runner::start_telemetry`).
    pub otel_endpoint: Option<String>,
    pub otel_protocol: Option<warden_run::telemetry::Protocol>,
    pub otel_flush: Option<Duration>,
    /// `--otel-agent`: the agent's own trace export switched on too.
    pub otel_agent: bool,
    /// `[agent.NAME] image = "…"`: each agent's image, unless a flag or
    /// a variable gave `image` for all of them.
    pub agent_images: Vec<(Agent, String)>,
}

impl Resolved {
    /// The container image for `agent`: a flag's or variable's, else the
    /// agent's own in `warden.toml`, else the file's `image`.
    pub(crate) fn image_for(&self, agent: Agent) -> Option<String> {
        self.agent_images
            .iter()
            .find(|(a, _)| *a == agent)
            .map(|(_, i)| i.clone())
            .or_else(|| self.image.clone())
    }
}

impl RawSettings {
    /// Reads the flags, the environment and the config file.
    pub(crate) fn gather(flags: &SettingFlags, cwd: &Path) -> Result<Self, SettingsError> {
        let mut raw = RawSettings::default();
        raw.add_flags(flags);
        raw.add_env(
            std::env::vars_os().filter_map(|(k, v)| {
                Some((k.into_string().ok()?, v.to_string_lossy().into_owned()))
            }),
        );
        let config = flags
            .config
            .clone()
            .or_else(|| std::env::var_os("WARDEN_CONFIG").map(PathBuf::from));
        let (paths, named) = match config {
            Some(path) => (vec![cwd.join(path)], true),
            None => (discover::candidates(cwd), false),
        };
        // Each place looked in is watched: a file the agent creates
        // nearer than the one read (or where none was) is what the next
        // warden started there reads.
        for path in paths {
            let text = read_config(&path, named)?;
            raw.config.push(crate::config_watch::ConfigWatch::new(
                &path,
                named,
                text.as_deref(),
            ));
            if let Some(text) = text {
                raw.reading = if named {
                    FileScope::Named
                } else {
                    FileScope::Project
                };
                raw.add_file(&text, &path)?;
                if !named {
                    raw.found = Some(path.clone());
                    raw.config.extend(
                        discover::git_marks(cwd, &path)
                            .iter()
                            .map(|m| crate::config_watch::ConfigWatch::git_mark(m)),
                    );
                }
                break;
            }
        }
        // The user's own file, beneath the project's: each of its keys
        // applies where no other source gives the setting.
        // A HOME this user may not search (warden started under another
        // uid with the caller's HOME) holds no file of this user's: it is
        // neither read nor watched.
        let searchable = |p: &Path| {
            !matches!(std::fs::symlink_metadata(p),
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied)
        };
        if let Some(path) = discover::user_file()
            && !raw.config.iter().any(|w| w.path() == path)
            && searchable(&path)
        {
            let text = read_config(&path, false)?;
            raw.config.push(crate::config_watch::ConfigWatch::user(
                &path,
                text.as_deref(),
            ));
            if let Some(text) = text {
                raw.reading = FileScope::User;
                raw.add_file(&text, &path)?;
            }
        }
        Ok(raw)
    }

    /// The directory whose `.warden/` holds the runs', sessions' and
    /// batches' directories: the project's `warden.toml`'s (found from
    /// `cwd` up, not one named), else the top of the git work tree `cwd`
    /// is in, else `cwd`. So a run started in a subdirectory of the
    /// project goes where one started at its top does.
    pub(crate) fn project_root(&self, cwd: &Path) -> PathBuf {
        self.found
            .as_deref()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .or_else(|| discover::work_tree_top(cwd))
            .unwrap_or_else(|| cwd.to_path_buf())
    }

    /// The config files read, nearest first, with their kind.
    pub(crate) fn files(&self) -> &[(PathBuf, FileScope)] {
        &self.files
    }

    /// Each setting's value in effect and where it came from; `None` for
    /// the default. Call [`RawSettings::resolve`] too: this does not
    /// check the values.
    pub(crate) fn in_effect(&self) -> Vec<(&'static Setting, Option<(String, Source)>)> {
        SETTINGS
            .iter()
            .map(|setting| {
                let winner = self
                    .values
                    .get(setting.name)
                    .and_then(|v| v.first())
                    .map(|s| (s.value.clone(), s.source.clone()));
                (setting, winner)
            })
            .collect()
    }

    /// `[agent.NAME] image` in effect, with the file each came from (none
    /// when a flag or variable gave `image` for every agent).
    pub(crate) fn agent_images_in_effect(&self) -> Vec<(Agent, String, PathBuf)> {
        if self.image_beats_agents() {
            return Vec::new();
        }
        self.agent_images
            .iter()
            .zip(&self.agent_image_files)
            .map(|((a, i), p)| (*a, i.clone(), p.clone()))
            .collect()
    }

    /// An image from a flag or a variable is every agent's; one from the
    /// file's top level is for the agents without their own.
    fn image_beats_agents(&self) -> bool {
        self.values
            .get("image")
            .and_then(|v| v.first())
            .is_some_and(|s| !s.from_file)
    }

    /// The config files these settings read, and the places looked in
    /// and found empty, to be looked at again when the work is done.
    pub(crate) fn config_watch(&self) -> Vec<crate::config_watch::ConfigWatch> {
        self.config.clone()
    }

    fn push(&mut self, name: &'static str, value: String, origin: String, source: Source) {
        self.values.entry(name).or_default().push(Sourced {
            value,
            origin,
            source,
            from_flags: false,
            from_file: false,
        });
    }

    /// Names the values that came in as flags by where they were really
    /// written: a batch file fills the same flags from its keys, and its
    /// errors must name the key (`timeout`), not a flag nobody typed.
    pub(crate) fn name_flags_as(mut self, origin: impl Fn(&str) -> String) -> Self {
        for (name, values) in &mut self.values {
            for v in values.iter_mut().filter(|v| v.from_flags) {
                v.origin = origin(name);
            }
        }
        self
    }

    fn add_flags(&mut self, f: &SettingFlags) {
        for (name, value) in f.given() {
            let Some(setting) = find(name) else { continue };
            let flag = format!("--{}", setting.flag());
            self.push(
                setting.name,
                value.to_string(),
                flag.clone(),
                Source::Flag(flag),
            );
            if let Some(last) = self.values.get_mut(setting.name).and_then(|v| v.last_mut()) {
                last.from_flags = true;
            }
        }
    }

    fn add_env(&mut self, vars: impl Iterator<Item = (String, String)>) {
        let vars: HashMap<String, String> = vars.collect();
        for setting in SETTINGS {
            let var = setting.env();
            if let Some(v) = vars.get(&var) {
                self.push(setting.name, v.clone(), var.clone(), Source::Env(var));
            }
        }
    }

    fn add_file(&mut self, text: &str, path: &Path) -> Result<(), SettingsError> {
        self.files.push((path.to_path_buf(), self.reading));
        // A nearer file read before this one gave every agent's image: this
        // file's images per agent lie beneath it.
        let images_given = self
            .values
            .get("image")
            .is_some_and(|v| v.iter().any(|s| s.from_file));
        let table: toml::Table =
            text.parse()
                .map_err(|e: toml::de::Error| SettingsError::Read {
                    path: path.to_path_buf(),
                    message: toml_error(text, &e),
                })?;
        for (k, v) in table {
            if k == AGENT_TABLE {
                self.add_agent_tables(v, path, images_given)?;
                continue;
            }
            let Some(setting) = find(&k) else {
                return Err(SettingsError::UnknownKey {
                    key: k,
                    path: path.to_path_buf(),
                });
            };
            let origin = format!("`{}` in {}", setting.name, path.display());
            let value = match v {
                toml::Value::String(s) => s,
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                // A list (`retry_on = ["stalled", "network"]`) as the
                // text a repeated flag gives (a comma list; arguments
                // separated by spaces).
                toml::Value::Array(a)
                    if a.iter()
                        .all(|v| v.as_str().is_some_and(|item| setting.kind.keeps_item(item))) =>
                {
                    a.iter()
                        .filter_map(toml::Value::as_str)
                        .collect::<Vec<_>>()
                        .join(setting.kind.list_separator())
                }
                other => {
                    return Err(SettingsError::Invalid {
                        origin,
                        value: other.to_string(),
                        expected: setting.kind.expected(),
                    });
                }
            };
            // A path in a file is relative to the file's directory, not to
            // wherever warden was started (a file found from a
            // subdirectory means the same paths as from the top).
            let value = match (setting.kind, path.parent()) {
                (Kind::Path(_), Some(dir)) => relative_to(dir, &value, None),
                (Kind::Paths(_), Some(dir)) => {
                    relative_to(dir, &value, Some(setting.kind.list_separator()))
                }
                _ => value,
            };
            let source = Source::File(path.to_path_buf(), self.reading);
            self.push(setting.name, value, origin, source);
            if let Some(last) = self.values.get_mut(setting.name).and_then(|v| v.last_mut()) {
                last.from_file = true;
            }
        }
        Ok(())
    }

    /// `[agent.claude]` and the like: settings of one agent's runs (only
    /// `image` for now). An agent warden does not know, or a key the
    /// table cannot have, is an error naming it.
    fn add_agent_tables(
        &mut self,
        v: toml::Value,
        path: &Path,
        images_given: bool,
    ) -> Result<(), SettingsError> {
        let bad = |what: String, says: String| SettingsError::AgentTable {
            what,
            path: path.to_path_buf(),
            says,
        };
        let toml::Value::Table(agents) = v else {
            return Err(bad(
                format!("`{AGENT_TABLE}`"),
                "it is a table per agent, such as [agent.claude] with image = \"IMAGE\"".into(),
            ));
        };
        let known = || {
            Agent::ALL
                .iter()
                .map(|a| a.name())
                .collect::<Vec<_>>()
                .join(", ")
        };
        for (name, keys) in agents {
            let what = format!("[{AGENT_TABLE}.{name}]");
            let agent: Agent = name.parse().map_err(|_| {
                bad(
                    what.clone(),
                    format!("no agent is named `{name}`; known agents: {}", known()),
                )
            })?;
            let toml::Value::Table(keys) = keys else {
                return Err(bad(
                    what,
                    "it must be a table, such as image = \"IMAGE\"".into(),
                ));
            };
            for (key, value) in keys {
                if key != "image" {
                    return Err(bad(what, format!("unknown key `{key}`; known keys: image")));
                }
                match value {
                    // The first file read is the nearer one: a later
                    // (the user's) gives an agent's image only where
                    // the nearer gave none.
                    toml::Value::String(image) if !image.trim().is_empty() => {
                        if !images_given && !self.agent_images.iter().any(|(a, _)| *a == agent) {
                            self.agent_images.push((agent, image));
                            self.agent_image_files.push(path.to_path_buf());
                        }
                    }
                    other => {
                        return Err(SettingsError::Invalid {
                            origin: format!("`image` in {what} of {}", path.display()),
                            value: other.to_string(),
                            expected: "a container image such as `ghcr.io/me/agent:1`",
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// Validates every value and keeps the one with the highest
    /// precedence. Only the values are looked at: nothing on the machine
    /// is probed here (`sandbox = auto` stays `Auto` for the run to
    /// resolve).
    pub(crate) fn resolve(self) -> Result<Resolved, SettingsError> {
        let mut resolved = Resolved::default();
        for setting in SETTINGS {
            let mut winner = None;
            for s in self.values.get(setting.name).into_iter().flatten() {
                let set = setting.kind.parse(&s.value).map_err(|bad| match bad {
                    Bad::Invalid => SettingsError::Invalid {
                        origin: s.origin.clone(),
                        value: s.value.clone(),
                        expected: setting.kind.expected(),
                    },
                    Bad::TooLarge(limit) => SettingsError::TooLarge {
                        origin: s.origin.clone(),
                        value: s.value.clone(),
                        limit,
                    },
                })?;
                winner.get_or_insert(set);
            }
            if let Some(set) = winner {
                set(&mut resolved);
            }
        }
        if !self.image_beats_agents() {
            resolved.agent_images = self.agent_images;
        }
        Ok(resolved)
    }
}

#[cfg(test)]
mod tests {
    use super::kind::bytes;
    use super::table::Shown;
    use super::*;

    fn raw(
        flags: SettingFlags,
        env: &[(&str, &str)],
        file: Option<&str>,
    ) -> Result<Resolved, SettingsError> {
        let mut r = RawSettings::default();
        r.add_flags(&flags);
        r.add_env(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        if let Some(text) = file {
            r.add_file(text, Path::new("/w/warden.toml"))?;
        }
        r.resolve()
    }

    #[test]
    fn a_file_read_later_gives_only_what_the_nearer_one_does_not() {
        let mut r = RawSettings::default();
        r.add_file(
            "kill_grace = \"1s\"\n[agent.claude]\nimage = \"near\"\n",
            Path::new("/w/warden.toml"),
        )
        .unwrap();
        r.add_file(
            "kill_grace = \"2s\"\nstall_timeout = \"3s\"\n\
             [agent.claude]\nimage = \"far\"\n[agent.codex]\nimage = \"far\"\n",
            Path::new("/home/u/.config/warden/warden.toml"),
        )
        .unwrap();
        let r = r.resolve().unwrap();
        assert_eq!(r.limits.kill_grace, Duration::from_secs(1));
        assert_eq!(r.limits.stall_timeout, Some(Duration::from_secs(3)));
        assert_eq!(r.image_for(Agent::Claude).as_deref(), Some("near"));
        assert_eq!(r.image_for(Agent::Codex).as_deref(), Some("far"));

        // The nearer file's image for every agent beats the farther
        // file's image for one.
        let mut r = RawSettings::default();
        r.add_file("image = \"near\"\n", Path::new("/w/warden.toml"))
            .unwrap();
        r.add_file(
            "[agent.claude]\nimage = \"far\"\n",
            Path::new("/home/u/.config/warden/warden.toml"),
        )
        .unwrap();
        let r = r.resolve().unwrap();
        assert_eq!(r.image_for(Agent::Claude).as_deref(), Some("near"));
    }

    /// A valid value of each kind that is no setting's default.
    fn sample(kind: Kind) -> &'static str {
        match kind {
            Kind::Clock(_) => "7s",
            Kind::Grace(_) => "3s",
            Kind::Text(_) => "sample-text",
            Kind::Command(_) => "make test",
            // Absolute: a relative one in a file is the file's directory's.
            Kind::Path(_) => "/some/dir",
            Kind::Switch(_) => "true",
            Kind::Bytes(_) => "4KiB",
            Kind::Paths(_) => "/run/a.sock,/run/b.sock",
            Kind::Args(_) => "--shm-size=1g --mount=type=tmpfs,dst=/x",
            Kind::Words(_) => "a,b",
            Kind::ContainerUser(_) => "1000:1000",
            Kind::Containment(_) => "subreaper",
            Kind::Sandbox(_) => "bwrap",
            Kind::OnFatalError(_) => "wait",
            Kind::Count(_) => "4",
            Kind::RetryOn(_) => "stalled,network",
            Kind::Memory(_) => "64MiB",
            Kind::Pids(_) => "50",
            Kind::Cpus(_) => "1.5",
            Kind::Usd(_) => "0.25",
            Kind::Positive(_) => "7",
            Kind::OtlpProtocol(_) => "grpc",
            Kind::CheckFeedback(_) => "none",
        }
    }

    #[test]
    fn retry_settings_come_from_every_source() {
        use warden_run::retry::RetryOn;
        let r = raw(
            SettingFlags::of(&[("retries", "2")]),
            &[("WARDEN_RETRY_BACKOFF", "250ms")],
            Some("retry_on = [\"stalled\", \"rate_limited\"]\nretries = 9\n"),
        )
        .unwrap();
        assert_eq!(r.retry.retries, 2, "the flag wins over the file");
        assert_eq!(r.retry.backoff, Duration::from_millis(250));
        assert_eq!(r.retry.on, [RetryOn::RateLimited, RetryOn::Stalled]);
        let d = raw(SettingFlags::default(), &[], None).unwrap();
        assert_eq!(d.retry, warden_run::retry::RetryPolicy::default());
        assert!(!d.retry.on.contains(&RetryOn::Stalled));
        let e = raw(
            SettingFlags::of(&[("retry_on", "stalled,later")]),
            &[],
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("--retry-on"), "{e}");
    }

    /// The flags `warden run` parses from this command line.
    fn parsed_flags(argv: &[&str]) -> SettingFlags {
        use clap::Parser;
        let cli = crate::args::Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{e}"));
        match cli.command {
            crate::args::Command::Run(args) => args.settings,
            other => panic!("not a run: {other:?}"),
        }
    }

    #[test]
    fn each_setting_has_one_name_as_flag_variable_and_key() {
        use clap::CommandFactory;
        let cli = crate::args::Cli::command();
        let run = cli.find_subcommand("run").expect("a run command");
        let mut names = std::collections::HashSet::new();
        for setting in SETTINGS {
            let name = setting.name;
            assert!(names.insert(name), "`{name}` is in the table twice");
            assert!(
                name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "`{name}`: a key is lower case words joined by `_`"
            );
            let arg = run
                .get_arguments()
                .find(|a| a.get_id() == name)
                .unwrap_or_else(|| panic!("no argument for `{name}`"));
            let flag = arg.get_long().expect("a long flag");
            assert_eq!(flag.replace('-', "_"), name, "the flag of `{name}`");
            assert_eq!(
                setting.env(),
                format!("WARDEN_{}", flag.replace('-', "_").to_uppercase())
            );

            // The same value through each source sets the same thing,
            // and something that is not the default.
            let value = sample(setting.kind);
            let long = format!("--{flag}");
            let mut argv = vec!["warden", "run", "exec", long.as_str()];
            if !setting.kind.is_switch() {
                argv.push(value);
            }
            let by_flag = raw(parsed_flags(&argv), &[], None).unwrap();
            let by_env = raw(SettingFlags::default(), &[(&setting.env(), value)], None).unwrap();
            let by_file = raw(
                SettingFlags::default(),
                &[],
                Some(&format!("{name} = {value:?}")),
            )
            .unwrap();
            let shown = |r: &Resolved| format!("{r:?}");
            assert_eq!(
                shown(&by_flag),
                shown(&by_env),
                "`{name}`: flag and variable"
            );
            assert_eq!(
                shown(&by_flag),
                shown(&by_file),
                "`{name}`: flag and warden.toml"
            );
            assert_ne!(
                shown(&by_flag),
                shown(&Resolved::default()),
                "`{name}` = {value:?} changed nothing"
            );
        }
    }

    #[test]
    fn the_default_each_setting_shows_is_its_default() {
        let default = format!("{:?}", Resolved::default());
        for setting in SETTINGS {
            let value = match setting.default {
                Shown::Value(v) => v,
                Shown::Off => "false",
                Shown::Described(_) | Shown::Unset => continue,
            };
            let r = raw(SettingFlags::default(), &[(&setting.env(), value)], None).unwrap();
            assert_eq!(
                format!("{r:?}"),
                default,
                "`{}` shows the default {value:?}, which is not its default",
                setting.name
            );
        }
    }

    #[test]
    fn resolving_looks_at_values_not_at_the_machine() {
        // Whether bwrap, docker or a cgroup is there is the run's to find
        // out: `auto` stays `auto`, a named sandbox or containment is
        // taken as asked, whatever this machine has.
        for (sandbox, want) in [
            ("auto", SandboxChoice::Auto),
            ("docker", SandboxChoice::Use(warden_run::Sandbox::Docker)),
            ("podman", SandboxChoice::Use(warden_run::Sandbox::Podman)),
        ] {
            let r = raw(SettingFlags::of(&[("sandbox", sandbox)]), &[], None).unwrap();
            assert_eq!(r.sandbox, want);
        }
        let r = raw(SettingFlags::of(&[("containment", "cgroup")]), &[], None).unwrap();
        assert_eq!(r.containment, ContainmentChoice::Cgroup);
    }

    #[test]
    fn the_book_lists_every_setting_as_the_table_has_it() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/src/settings.md");
        let readme = std::fs::read_to_string(path).expect("the book's settings chapter");
        // The chapter's own part, before its first section.
        let section = readme
            .strip_prefix("# Settings\n")
            .and_then(|s| s.split("\n## ").next())
            .expect("the Settings chapter");
        let rows: Vec<Vec<&str>> = section
            .lines()
            .filter(|l| l.starts_with("| `"))
            .map(|l| l.split(" | ").collect())
            .collect();
        assert_eq!(
            rows.len(),
            SETTINGS.len(),
            "one row per setting in docs/src/settings.md"
        );
        for setting in SETTINGS {
            let key = format!("`{}`", setting.name);
            let row = rows
                .iter()
                .find(|row| row.get(2) == Some(&key.as_str()))
                .unwrap_or_else(|| panic!("no row in docs/src/settings.md for {key}"));
            let default = match setting.default {
                Shown::Value(v) | Shown::Described(v) => format!("`{v}`"),
                Shown::Off => "off".into(),
                Shown::Unset => "—".into(),
            };
            assert!(
                row[0].ends_with(&format!("`--{}`", setting.flag()))
                    || row[0].contains(&format!("`--{} ", setting.flag())),
                "flag of `{}` in docs/src/settings.md: {row:?}",
                setting.name
            );
            assert_eq!(row[1], format!("`{}`", setting.env()), "{row:?}");
            assert_eq!(
                row[3], default,
                "default of `{}` in docs/src/settings.md",
                setting.name
            );
        }
        // The batch keys, in the batches chapter.
        let batches = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/src/batches.md");
        let batches = std::fs::read_to_string(batches).expect("the book's batches chapter");
        let batch = batches
            .split("and the\nsettings (")
            .nth(1)
            .and_then(|s| s.split(')').next())
            .expect("the batch file's list of settings");
        let listed: std::collections::BTreeSet<&str> = batch
            .split(|c: char| c == ',' || c.is_whitespace())
            .map(|w| w.trim_matches('`'))
            .filter(|w| !w.is_empty())
            .collect();
        let in_batch: std::collections::BTreeSet<&str> = SETTINGS
            .iter()
            .filter(|s| s.in_batch)
            .map(|s| s.name)
            .collect();
        assert_eq!(listed, in_batch, "the settings a batch file may set");
    }

    #[test]
    fn durations_parse_in_every_documented_form() {
        for (s, ms) in [
            ("15m", 900_000),
            ("90s", 90_000),
            ("500ms", 500),
            ("1h30m", 5_400_000),
            ("0", 0),
        ] {
            assert_eq!(parse_duration(s), Some(Duration::from_millis(ms)), "{s}");
        }
        assert_eq!(parse_duration("15"), None, "a unit is required");
        assert_eq!(parse_duration("soon"), None);
        assert_eq!(
            parse_duration("300000000000y"),
            None,
            "too long to be a clock"
        );
    }

    #[test]
    fn flag_beats_env_beats_file_beats_default() {
        let file = Some("stall_timeout = \"3m\"\ntimeout = \"2h\"\nkill_grace = \"1s\"");
        let env = [("WARDEN_STALL_TIMEOUT", "2m"), ("WARDEN_TIMEOUT", "90m")];
        let flags = SettingFlags::of(&[("stall_timeout", "1m")]);
        let r = raw(flags, &env, file).unwrap();
        assert_eq!(r.limits.stall_timeout, Some(Duration::from_secs(60)));
        assert_eq!(r.limits.timeout, Some(Duration::from_secs(90 * 60)));
        assert_eq!(r.limits.kill_grace, Duration::from_secs(1));
        assert_eq!(r.limits.drain_grace, warden_run::defaults::DRAIN_GRACE);
    }

    #[test]
    fn a_relative_path_in_a_file_is_the_files_directorys() {
        let r = raw(
            SettingFlags::default(),
            &[],
            Some("run_dir = \"out/runs\"\nallow_socket = [\"a.sock\", \"/run/b.sock\"]"),
        )
        .unwrap();
        assert_eq!(r.run_dir.as_deref(), Some(Path::new("/w/out/runs")));
        assert_eq!(
            r.allow_sockets,
            [PathBuf::from("/w/a.sock"), PathBuf::from("/run/b.sock")]
        );
        // From a flag or a variable, it stays relative (to the cwd).
        let r = raw(SettingFlags::of(&[("run_dir", "out")]), &[], None).unwrap();
        assert_eq!(r.run_dir.as_deref(), Some(Path::new("out")));
    }

    #[test]
    fn zero_disables_a_clock() {
        let r = raw(SettingFlags::of(&[("timeout", "0")]), &[], None).unwrap();
        assert_eq!(r.limits.timeout, None);
    }

    #[test]
    fn bad_values_name_their_source_value_and_an_example() {
        let e = raw(
            SettingFlags::default(),
            &[("WARDEN_STALL_TIMEOUT", "ten")],
            None,
        )
        .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("WARDEN_STALL_TIMEOUT") && msg.contains("`ten`") && msg.contains("15m"),
            "{msg}"
        );
        // Overridden by a flag, the bad variable is still an error.
        let flags = SettingFlags::of(&[("stall_timeout", "1m")]);
        assert!(raw(flags, &[("WARDEN_STALL_TIMEOUT", "ten")], None).is_err());
        let e = raw(SettingFlags::default(), &[], Some("kill_grace = \"fast\"")).unwrap_err();
        assert!(
            e.to_string().contains("`kill_grace` in /w/warden.toml"),
            "{e}"
        );
        let e = raw(SettingFlags::default(), &[], Some("containment = \"jail\"")).unwrap_err();
        assert!(e.to_string().contains("auto"), "{e}");
    }

    #[test]
    fn sandbox_settings_resolve_and_bad_names_are_explained() {
        let r = raw(
            SettingFlags::default(),
            &[("WARDEN_SANDBOX", "bwrap"), ("WARDEN_NO_NETWORK", "1")],
            Some("image = \"img:1\""),
        )
        .unwrap();
        assert_eq!(r.sandbox, SandboxChoice::Use(warden_run::Sandbox::Bwrap));
        assert!(r.no_network);
        assert_eq!(r.image.as_deref(), Some("img:1"));
        let e = raw(SettingFlags::of(&[("sandbox", "jail")]), &[], None).unwrap_err();
        assert!(
            e.to_string().contains("--sandbox") && e.to_string().contains("bwrap"),
            "{e}"
        );
    }

    #[test]
    fn an_agents_image_beats_the_files_image_and_loses_to_flag_and_variable() {
        let file = "image = \"all:1\"\n[agent.claude]\nimage = \"claude:1\"\n[agent.codex]\nimage = \"codex:1\"\n";
        let r = raw(SettingFlags::default(), &[], Some(file)).unwrap();
        assert_eq!(r.image_for(Agent::Claude).as_deref(), Some("claude:1"));
        assert_eq!(r.image_for(Agent::Codex).as_deref(), Some("codex:1"));
        assert_eq!(r.image_for(Agent::Exec).as_deref(), Some("all:1"));
        let r = raw(
            SettingFlags::default(),
            &[("WARDEN_IMAGE", "env:1")],
            Some(file),
        )
        .unwrap();
        assert_eq!(r.image_for(Agent::Claude).as_deref(), Some("env:1"));
        let r = raw(SettingFlags::of(&[("image", "flag:1")]), &[], Some(file)).unwrap();
        assert_eq!(r.image_for(Agent::Codex).as_deref(), Some("flag:1"));
        // Without a global image: the agent's, or none.
        let r = raw(
            SettingFlags::default(),
            &[],
            Some("[agent.pi]\nimage = \"pi:1\""),
        )
        .unwrap();
        assert_eq!(r.image_for(Agent::Pi).as_deref(), Some("pi:1"));
        assert_eq!(r.image_for(Agent::Claude), None);
        assert_eq!(
            raw(SettingFlags::default(), &[], None)
                .unwrap()
                .image_for(Agent::Claude),
            None
        );
    }

    #[test]
    fn an_agent_table_names_a_known_agent_and_only_its_keys() {
        for (file, says) in [
            (
                "[agent.claud]\nimage = \"x\"",
                "[agent.claud] in /w/warden.toml: no agent is named `claud`; known agents: claude, codex",
            ),
            (
                "[agent.claude]\ntimeout = \"1m\"",
                "[agent.claude] in /w/warden.toml: unknown key `timeout`; known keys: image",
            ),
            (
                "agent = \"claude\"",
                "`agent` in /w/warden.toml: it is a table per agent",
            ),
            (
                "[agent.claude]\nimage = 3",
                "invalid value `3` for `image` in [agent.claude] of /w/warden.toml",
            ),
        ] {
            let e = raw(SettingFlags::default(), &[], Some(file))
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(says), "{file:?}: {e}");
        }
    }

    #[test]
    fn engine_args_split_at_white_space_but_not_inside_a_toml_item() {
        let r = raw(
            SettingFlags::default(),
            &[],
            Some("engine_arg = [\"--mount=type=tmpfs,dst=/x\", \"--cap-add\", \"SYS_PTRACE\"]"),
        )
        .unwrap();
        assert_eq!(
            r.engine_args,
            ["--mount=type=tmpfs,dst=/x", "--cap-add", "SYS_PTRACE"]
        );
        let r = raw(
            SettingFlags::default(),
            &[("WARDEN_ENGINE_ARG", "--a=1  --b")],
            None,
        )
        .unwrap();
        assert_eq!(r.engine_args, ["--a=1", "--b"]);
        let e = raw(
            SettingFlags::default(),
            &[],
            Some("engine_arg = [\"--label=a b\"]"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("`engine_arg` in") && e.contains("without white space"),
            "{e}"
        );
    }

    #[test]
    fn unknown_file_key_is_an_error_listing_known_keys() {
        let e = raw(SettingFlags::default(), &[], Some("stal_timeout = \"1m\"")).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("`stal_timeout`") && msg.contains("stall_timeout"),
            "{msg}"
        );
    }

    #[test]
    fn values_over_the_limit_say_they_are_too_large() {
        for (flags, needle) in [
            (
                SettingFlags::of(&[("timeout", "101y")]),
                "--timeout is too large",
            ),
            (
                SettingFlags::of(&[("stall_timeout", "99999999999999999999999s")]),
                "--stall-timeout is too large",
            ),
            (
                SettingFlags::of(&[("kill_grace", "300000000000y")]),
                "--kill-grace is too large",
            ),
            (
                SettingFlags::of(&[("max_line", "99999999999999999999999")]),
                "--max-line is too large",
            ),
        ] {
            let e = raw(flags, &[], None).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
        let e = raw(SettingFlags::default(), &[], Some("timeout = \"200y\""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("too large") && e.contains("`timeout` in"), "{e}");
    }

    #[test]
    fn flags_can_be_named_as_the_batch_keys_they_came_from() {
        let mut r = RawSettings::default();
        r.add_flags(&SettingFlags::of(&[("timeout", "soon")]));
        r.add_env([("WARDEN_STALL_TIMEOUT".to_string(), "1m".to_string())].into_iter());
        let e = r
            .name_flags_as(|k| format!("`{k}`"))
            .resolve()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("for `timeout`") && !e.contains("--timeout"),
            "{e}"
        );
    }

    #[test]
    fn resource_limits_parse_and_zero_lifts_them() {
        let r = raw(
            SettingFlags::of(&[("memory", "2G"), ("cpus", "0.5")]),
            &[("WARDEN_PIDS", "256")],
            Some("memory = \"1G\"\ncpus = \"0\""),
        )
        .unwrap();
        let res = r.limits.resources;
        assert_eq!(res.memory, Some(2 << 30), "the flag wins");
        assert_eq!(res.pids, Some(256));
        assert_eq!(res.cpus.map(|c| c.millis()), Some(500));
        // `0` lifts a limit a lower source set.
        let r = raw(
            SettingFlags::of(&[("memory", "0")]),
            &[("WARDEN_PIDS", "0")],
            Some("memory = \"1G\"\npids = 10"),
        )
        .unwrap();
        assert_eq!(r.limits.resources.memory, None);
        assert_eq!(r.limits.resources.pids, None);
        for (name, bad, needle) in [
            ("memory", "lots", "at least 1MiB"),
            ("memory", "100", "at least 1MiB"),
            ("pids", "-3", "number of processes"),
            ("pids", "1.5", "number of processes"),
            ("cpus", "0.001", "at least 0.01"),
            ("cpus", "two", "number of CPUs"),
        ] {
            let e = raw(SettingFlags::of(&[(name, bad)]), &[], None)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("--{name}")) && e.contains(needle),
                "{name} = {bad}: {e}"
            );
        }
    }

    #[test]
    fn budgets_take_dollars_and_whole_numbers_and_refuse_the_rest() {
        let r = raw(
            SettingFlags::of(&[("max_cost", "$0.50"), ("max_turns", "3")]),
            &[("WARDEN_SESSION_MAX_TOKENS", "20000")],
            Some("session_max_cost = 2.5\nmax_tokens = 1000"),
        )
        .unwrap();
        let b = r.limits.budget;
        assert_eq!(b.max_cost_usd.map(|u| u.dollars()), Some(0.5));
        assert_eq!((b.max_tokens, b.max_turns), (Some(1000), Some(3)));
        assert_eq!(r.session_budget.max_tokens, Some(20000));
        assert_eq!(
            r.session_budget.max_cost_usd.map(|u| u.dollars()),
            Some(2.5)
        );
        for (name, bad) in [
            ("max_cost", "0"),
            ("max_cost", "-1"),
            ("max_cost", "lots"),
            ("max_cost", "NaN"),
            ("max_turns", "0"),
            ("max_turns", "2.5"),
            ("max_tokens", "-5"),
        ] {
            let e = raw(SettingFlags::of(&[(name, bad)]), &[], None)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("--{}", name.replace('_', "-"))) && e.contains("such as"),
                "{name} = {bad}: {e}"
            );
        }
        let e = raw(SettingFlags::of(&[("max_cost", "1e13")]), &[], None).unwrap_err();
        assert!(e.to_string().contains("too large"), "{e}");
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(bytes("8MiB").ok(), Some(8 << 20));
        assert_eq!(bytes("512k").ok(), Some(512 << 10));
        assert_eq!(bytes("100").ok(), Some(100));
        assert_eq!(bytes("0").ok(), None);
        assert_eq!(bytes("8 parsecs").ok(), None);
    }
}
