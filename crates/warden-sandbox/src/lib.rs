//! Where an agent runs, and what it is given there.
//!
//! A sandbox turns the agent's command line into the command line that
//! starts it inside the sandbox: `host` leaves it as it is; `bwrap` wraps
//! it in bubblewrap (read-only root, writable work dir and agent state,
//! private /tmp, the rest of HOME, warden's records and the host's unix
//! sockets hidden, its own user and PID namespaces without capabilities);
//! `docker` and `podman` run it in a container, with the records and
//! sockets inside its mounts covered. Inside any sandbox the
//! agent gets an allowlisted environment ([`mod@env`]), never the whole host
//! environment. This crate builds command lines and environments; it starts
//! nothing but the short probes in [`probe`].

#![forbid(unsafe_code)]

pub mod bwrap;
pub mod container;
pub mod env;
pub mod probe;
pub mod sockets;

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// The sandboxes warden knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sandbox {
    /// No isolation; full containment still applies.
    #[default]
    Host,
    Bwrap,
    Docker,
    Podman,
}

impl Sandbox {
    pub const NAMES: &'static str = "auto, host, bwrap, docker, podman";

    pub fn name(self) -> &'static str {
        match self {
            Sandbox::Host => "host",
            Sandbox::Bwrap => "bwrap",
            Sandbox::Docker => "docker",
            Sandbox::Podman => "podman",
        }
    }

    /// Whether `pid`, a process of the run, is one the sandbox itself runs
    /// next to the agent (bwrap's init in the agent's PID namespace): never
    /// an orphan of the agent.
    pub fn is_own_helper(self, pid: i32) -> bool {
        match self {
            Sandbox::Bwrap => bwrap::is_sandbox_init(pid),
            Sandbox::Podman => container::is_podman_helper(pid),
            Sandbox::Host | Sandbox::Docker => false,
        }
    }
}

impl fmt::Display for Sandbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the user asked for: a sandbox, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SandboxChoice {
    /// bwrap where it works, else host.
    Auto,
    #[default]
    Host,
    Use(Sandbox),
}

impl FromStr for SandboxChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "auto" => SandboxChoice::Auto,
            "host" => SandboxChoice::Host,
            "bwrap" => SandboxChoice::Use(Sandbox::Bwrap),
            "docker" => SandboxChoice::Use(Sandbox::Docker),
            "podman" => SandboxChoice::Use(Sandbox::Podman),
            other => {
                return Err(format!(
                    "unknown sandbox `{other}`; known: {}",
                    Sandbox::NAMES
                ));
            }
        })
    }
}

/// Everything a sandbox needs to wrap one agent.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxOptions {
    pub sandbox: Sandbox,
    /// Cut the network (agents that call a model API need it).
    pub no_network: bool,
    /// Extra paths visible read-only / writable inside.
    pub ro: Vec<PathBuf>,
    pub rw: Vec<PathBuf>,
    /// The container image (docker, podman).
    pub image: Option<String>,
    /// `--allow-socket`: host unix sockets the agent may connect to; every
    /// other path-bound socket of the host is hidden.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow_sockets: Vec<PathBuf>,
    /// warden's records around the run (its session's and batch's
    /// directories, a Slurm shared directory): hidden from the agent
    /// unless `ro` or `rw` names one of them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<PathBuf>,
    /// The container's network (docker, podman): `host`, `none`,
    /// `bridge`, or a network the engine has; the engine's default when
    /// `None`. `no_network` wins: with it, only `none` fits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_network: Option<String>,
    /// More arguments for the engine's `run` (docker, podman), before the
    /// image: for what warden has no setting for. They can widen the
    /// container as far as the engine allows (`--privileged`, a mount of
    /// `/`): whoever sets them is trusted with the host.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub engine_args: Vec<String>,
}

impl SandboxOptions {
    /// Whether the options run the agent in a container.
    pub fn is_container(&self) -> bool {
        matches!(self.sandbox, Sandbox::Docker | Sandbox::Podman)
    }
}

/// What an agent's CLI needs from a sandbox: its profile says it
/// (`warden_agents::Profile::sandbox`).
pub use warden_agents::SandboxNeeds;

/// One agent's command line, about to be wrapped.
#[derive(Debug, Clone)]
pub struct Target<'a> {
    pub needs: SandboxNeeds,
    pub program: OsString,
    pub args: Vec<OsString>,
    pub workdir: &'a std::path::Path,
    pub home: &'a std::path::Path,
    /// The environment the agent will have (already allowlisted).
    pub env: &'a [(OsString, OsString)],
    /// A name for the container (unique among running runs).
    pub name: &'a str,
    /// The run directory, where warden keeps the run's logs: kept out of
    /// the agent's reach where the sandbox can.
    pub run_dir: Option<&'a std::path::Path>,
}

/// The command line that starts the agent in its sandbox.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wrapped {
    pub program: OsString,
    pub args: Vec<OsString>,
    /// What the sandbox adds to the run's containment, for the report.
    pub containment: Option<&'static str>,
    /// A command that removes what the sandbox left behind (a container),
    /// run when warden ends the run and at its end.
    pub on_kill: Option<Vec<OsString>>,
    /// Host paths the sandbox mounts over that come and go (daemons'
    /// sockets and their directories): one gone by the time the sandbox
    /// starts makes it fail, so the caller builds the command line again
    /// when [`Wrapped::vanished`] says so, just before starting it.
    pub covers: Vec<PathBuf>,
}

impl Wrapped {
    /// Whether something this command line mounts over is no longer there.
    pub fn vanished(&self) -> bool {
        self.covers
            .iter()
            .any(|p| std::fs::symlink_metadata(p).is_err())
    }
}

#[non_exhaustive]
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SandboxError {
    #[error(
        "--sandbox {sandbox} needs --image IMAGE: the container image with the agent's CLI in it"
    )]
    MissingImage { sandbox: Sandbox },
    #[error("--sandbox bwrap cannot run here: {0}")]
    BwrapUnavailable(String),
    #[error("{engine} is not installed here (no `{engine}` on PATH)")]
    NoEngine { engine: &'static str },
    #[error(
        "--sandbox bwrap cannot hide your home directory when the work directory is {0}: run in a project directory inside it"
    )]
    WorkdirIsHome(PathBuf),
    #[error("--{flag} {path}: no such file or directory")]
    MissingPath { flag: &'static str, path: PathBuf },
    #[error("could not prepare {path}: {message}")]
    Prepare { path: PathBuf, message: String },
    #[error(
        "--allow-socket {path}: not a unix socket ({found}); name the socket a daemon listens on, e.g. --allow-socket /run/munge/munge.socket.2"
    )]
    NotASocket { path: PathBuf, found: String },
    #[error(
        "--sandbox {sandbox} cannot mount {path}: a path with `:` or `,` cannot be given to the container engine; move it or run with --sandbox bwrap"
    )]
    EnginePath { sandbox: Sandbox, path: PathBuf },
}

/// Wraps `target` for `options.sandbox`.
pub fn wrap(options: &SandboxOptions, target: Target<'_>) -> Result<Wrapped, SandboxError> {
    for (flag, paths) in [("ro", &options.ro), ("rw", &options.rw)] {
        if let Some(p) = paths.iter().find(|p| !p.exists()) {
            return Err(SandboxError::MissingPath {
                flag,
                path: p.clone(),
            });
        }
    }
    if options.sandbox != Sandbox::Host {
        for p in &options.allow_sockets {
            check_socket(p)?;
        }
    }
    match options.sandbox {
        Sandbox::Host => Ok(Wrapped {
            program: target.program,
            args: target.args,
            containment: None,
            on_kill: None,
            covers: Vec::new(),
        }),
        Sandbox::Bwrap => bwrap::wrap(options, target),
        Sandbox::Docker | Sandbox::Podman => container::wrap(options, target),
    }
}

/// That `path` is a unix socket (after symlinks), for `--allow-socket`.
fn check_socket(path: &std::path::Path) -> Result<(), SandboxError> {
    use std::os::unix::fs::FileTypeExt;
    // Never through a symbolic link: a name in the agent's reach (its work
    // tree) could be swapped for a link to another daemon's socket between
    // one run and the next, and that socket would then be let through.
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    if let Ok(resolved) = std::fs::canonicalize(path)
        && resolved != absolute
    {
        return Err(SandboxError::NotASocket {
            path: path.to_path_buf(),
            found: format!(
                "a name that passes through a symbolic link, to {}; give the socket's own path",
                resolved.display()
            ),
        });
    }
    let found = match std::fs::metadata(path) {
        Ok(m) if m.file_type().is_socket() => return Ok(()),
        Ok(m) if m.is_dir() => "a directory".to_string(),
        Ok(m) if m.is_file() => "a regular file".to_string(),
        Ok(m) if m.file_type().is_fifo() => "a FIFO".to_string(),
        Ok(m) if m.file_type().is_char_device() || m.file_type().is_block_device() => {
            "a device".to_string()
        }
        Ok(_) => "another kind of file".to_string(),
        Err(e) => e.to_string(),
    };
    Err(SandboxError::NotASocket {
        path: path.to_path_buf(),
        found,
    })
}

/// The path as the kernel sees it, when it exists: symlinks resolved, so
/// that a mount lands on the directory the name leads to.
pub(crate) fn real(path: &std::path::Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The needs of `agent`'s CLI, from its profile, for tests.
#[cfg(test)]
pub(crate) fn needs(agent: warden_events::Agent) -> SandboxNeeds {
    warden_agents::profile(agent).sandbox
}
