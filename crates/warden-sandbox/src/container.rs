//! Docker and Podman: `run --rm -i --init`, the work directory mounted at
//! the same path, the image from `--image`, killed with `rm -f`.
//!
//! The container sees only what is mounted into it. warden's records
//! (the run's, session's and batch's directories, `.warden`) and the
//! host's unix sockets that lie inside a mount are covered: an empty
//! read-only tmpfs over a directory, `/dev/null` over a socket. A socket
//! allowed with `--allow-socket` is mounted at its path.
//!
//! Secrets never appear on the container's command line: each variable is
//! passed as `-e NAME` (no value), which makes the client read the value
//! from its own environment, where warden put it.

use std::ffi::OsString;

use crate::{ContainerUser, Sandbox, SandboxError, SandboxOptions, Target, Wrapped};

/// The engine's client for a container sandbox: `podman` for Podman,
/// `docker` for the rest.
fn engine(sandbox: Sandbox) -> &'static str {
    match sandbox {
        Sandbox::Podman => "podman",
        _ => "docker",
    }
}

pub fn wrap(options: &SandboxOptions, t: Target<'_>) -> Result<Wrapped, SandboxError> {
    let engine = engine(options.sandbox);
    let image =
        options
            .image
            .as_deref()
            .filter(|i| !i.is_empty())
            .ok_or(SandboxError::MissingImage {
                sandbox: options.sandbox,
            })?;
    let mut a: Vec<OsString> = Vec::new();
    for x in ["run", "--rm", "-i", "--init", "--name", t.name] {
        a.push(x.into());
    }
    // `--no-network` wins over a network named (the request refuses one
    // other than `none` with it).
    let network = if options.no_network {
        Some("none")
    } else {
        options.container_network.as_deref()
    };
    if let Some(network) = network {
        a.push("--network".into());
        a.push(network.into());
    }
    // Who the agent runs as, and a HOME it can write: an image rarely
    // has a passwd entry for the work tree's owner, whose HOME would then
    // be `/`.
    let user = user(options, t.workdir);
    let home = user.map(|_| std::path::Path::new(CONTAINER_HOME));
    if let Some((uid, gid)) = user {
        a.push("--user".into());
        a.push(
            match gid {
                Some(gid) => format!("{uid}:{gid}"),
                None => uid.to_string(),
            }
            .into(),
        );
        a.push("--tmpfs".into());
        a.push(format!("{CONTAINER_HOME}:exec,mode=1777").into());
        a.push("-e".into());
        a.push(format!("HOME={CONTAINER_HOME}").into());
    }
    for (host, inside) in state_mounts(options, &t, user, home)? {
        a.push("-v".into());
        let mut m = OsString::from(&host);
        m.push(":");
        m.push(&inside);
        a.push(m);
    }
    for d in &options.devices {
        a.push("--device".into());
        a.push(d.into());
    }
    for g in &options.group_add {
        a.push("--group-add".into());
        a.push(g.into());
    }
    let mount = |src: &std::path::Path, ro: bool| {
        let mut m = OsString::from(src);
        m.push(":");
        m.push(src);
        if ro {
            m.push(":ro");
        }
        m
    };
    // What is mounted from the host: the work dir, `--ro`, `--rw`, and a
    // credentials file the provider set-up names (a service account key),
    // read-only at the same path, so the variable still points at it.
    let mut binds: Vec<(std::path::PathBuf, bool)> = vec![(t.workdir.to_path_buf(), false)];
    binds.extend(options.ro.iter().map(|p| (p.clone(), true)));
    binds.extend(options.rw.iter().map(|p| (p.clone(), false)));
    for var in t.needs.provider.file_vars {
        let file = t
            .env
            .iter()
            .rev()
            .find(|(k, _)| k == var)
            .map(|(_, v)| std::path::PathBuf::from(v))
            .filter(|p| p.is_absolute() && p.is_file());
        if let Some(file) = file {
            binds.push((file, true));
        }
    }
    let allowed: Vec<std::path::PathBuf> = options
        .allow_sockets
        .iter()
        .map(|p| crate::real(p))
        .collect();
    binds.extend(allowed.iter().map(|p| (p.clone(), false)));
    for (p, ro) in &binds {
        a.push("-v".into());
        a.push(mount(p, *ro));
    }
    // Nothing else of the host is in the container, but a mount may hold
    // warden's records (a batch directory inside the work dir) or a
    // daemon's socket: covered, the engine mounting the deeper path on
    // top of the bind.
    let inside_a_bind = |p: &std::path::Path| {
        binds
            .iter()
            .any(|(b, _)| p.starts_with(b) || p.starts_with(crate::real(b)))
    };
    let mut covered: Vec<std::path::PathBuf> = Vec::new();
    for dir in crate::bwrap::records(&t, options) {
        let real = crate::real(&dir);
        for d in [dir, real] {
            if d != t.workdir && inside_a_bind(&d) && !covered.contains(&d) {
                engine_path(options, &d)?;
                a.push("--tmpfs".into());
                let mut spec = OsString::from(&d);
                // Podman fills a tmpfs with what lies under it unless told
                // not to: the records it is there to hide.
                spec.push(match options.sandbox {
                    Sandbox::Podman => ":ro,notmpcopyup",
                    _ => ":ro",
                });
                a.push(spec);
                covered.push(d);
            }
        }
    }
    let mut socket_covers: Vec<std::path::PathBuf> = Vec::new();
    for socket in crate::sockets::host_unix_sockets() {
        if !allowed.contains(&socket) && inside_a_bind(&socket) {
            socket_covers.push(socket.clone());
            engine_path(options, &socket)?;
            a.push("-v".into());
            let mut spec = OsString::from("/dev/null:");
            spec.push(&socket);
            spec.push(":ro");
            a.push(spec);
        }
    }
    a.push("-w".into());
    a.push(t.workdir.into());
    for (k, v) in t.env {
        // The host's PATH and HOME mean nothing inside the image (a HOME
        // warden gives the container is set above).
        if k == "PATH" || k == "HOME" {
            continue;
        }
        a.push("-e".into());
        if client_vars(options.sandbox).iter().any(|c| k == c) {
            // The client's own copy of this variable is warden's (it
            // says which engine removes the container when the run ends);
            // the agent's value, given with `--env`, goes in by value.
            let mut kv = k.clone();
            kv.push("=");
            kv.push(v);
            a.push(kv);
        } else {
            a.push(k.clone());
        }
    }
    // The user's own arguments last, just before the image, where the
    // engine reads the options of `run` up to the first positional one.
    a.extend(options.engine_args.iter().map(OsString::from));
    a.push(image.into());
    a.push(t.program);
    a.extend(t.args);
    Ok(Wrapped {
        program: engine.into(),
        args: a,
        containment: Some("container"),
        on_kill: Some(vec![engine.into(), "rm".into(), "-f".into(), t.name.into()]),
        covers: socket_covers,
    })
}

/// The container's HOME when warden picks its user: a path no image
/// has, so the engine makes the tmpfs with the mode asked (over a
/// directory of the image, both engines keep that directory's mode).
pub const CONTAINER_HOME: &str = "/home/warden";

/// The user and group ids the container runs as (`--user`), or `None`
/// for the image's own user.
fn user(options: &SandboxOptions, workdir: &std::path::Path) -> Option<(u32, Option<u32>)> {
    use std::os::unix::fs::MetadataExt;
    match options.container_user {
        ContainerUser::Image => None,
        ContainerUser::Id { uid, gid } => Some((uid, gid)),
        ContainerUser::Auto => {
            let owner = std::fs::metadata(workdir).ok()?;
            // Rootless Podman maps the container's root to the user who
            // runs it: the image's root already writes as that user, and
            // any other id would be one of its subordinate ids.
            let rootless = options.sandbox == Sandbox::Podman && own_uid() != Some(0);
            (owner.uid() != 0 && !rootless).then_some((owner.uid(), Some(owner.gid())))
        }
    }
}

/// The agent's state directories under `home` that a container will not
/// get because the user it runs as (`user`'s pick) does not own them:
/// that user's id and the directories, for a warning before the run.
pub fn state_dirs_left_out(
    options: &SandboxOptions,
    needs: &crate::SandboxNeeds,
    workdir: &std::path::Path,
    home: &std::path::Path,
) -> Option<(u32, Vec<std::path::PathBuf>)> {
    use std::os::unix::fs::MetadataExt;
    if !options.is_container() || !home.is_absolute() || home == std::path::Path::new("/") {
        return None;
    }
    let (uid, _) = user(options, workdir)?;
    let dirs: Vec<std::path::PathBuf> = needs
        .state_dirs
        .iter()
        .map(|d| home.join(d))
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.is_dir() && m.uid() != uid))
        .collect();
    (!dirs.is_empty()).then_some((uid, dirs))
}

/// warden's own effective user id (the owner of `/proc/self`).
fn own_uid() -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").ok().map(|m| m.uid())
}

/// The agent CLI's own state directories (`~/.claude`, `~/.codex`, or
/// where `CLAUDE_CONFIG_DIR` and friends point), as `(host, container)`
/// paths to mount writable, so that its logins and sessions last from
/// one run to the next (`--resume`), as under bwrap. With the image's
/// user they go to the host's paths (the image's HOME is its own: the
/// same as the host's when both are `/root`); with a user warden picked,
/// under the container's HOME (a variable's directory at its own path),
/// and only those that user owns on the host: another user's could not
/// be written (root's `~/.claude` is no use to uid 1000). A missing one is
/// made, as bwrap does, when it is for warden's own user.
fn state_mounts(
    options: &SandboxOptions,
    t: &Target<'_>,
    user: Option<(u32, Option<u32>)>,
    home: Option<&std::path::Path>,
) -> Result<Vec<(std::path::PathBuf, std::path::PathBuf)>, SandboxError> {
    use std::os::unix::fs::MetadataExt;
    use std::path::{Path, PathBuf};
    let mut dirs: Vec<(PathBuf, PathBuf)> = Vec::new();
    if t.home.is_absolute() && t.home != Path::new("/") {
        for d in t.needs.state_dirs {
            let inside = home.unwrap_or(t.home).join(d);
            dirs.push((t.home.join(d), inside));
        }
    }
    for var in t.needs.state_dir_vars {
        if let Some((_, v)) = t.env.iter().rev().find(|(k, _)| k == var) {
            let p = PathBuf::from(v);
            if p.is_absolute() {
                dirs.push((p.clone(), p));
            }
        }
    }
    let mine = user.is_none_or(|(uid, _)| Some(uid) == own_uid());
    let mut out = Vec::new();
    for (host, inside) in dirs {
        if mine && std::fs::symlink_metadata(&host).is_err() {
            std::fs::create_dir_all(&host).map_err(|e| SandboxError::Prepare {
                path: host.clone(),
                message: e.to_string(),
            })?;
        }
        let usable = std::fs::metadata(&host)
            .is_ok_and(|m| m.is_dir() && user.is_none_or(|(uid, _)| m.uid() == uid));
        if usable && !out.iter().any(|(_, i)| *i == inside) {
            engine_path(options, &host)?;
            engine_path(options, &inside)?;
            out.push((host, inside));
        }
    }
    Ok(out)
}

/// That `path` can be written in a `-v` or `--tmpfs` argument, whose
/// fields are separated by `:` (and, in some engines' option lists, `,`).
fn engine_path(options: &SandboxOptions, path: &std::path::Path) -> Result<(), SandboxError> {
    let bytes = path.as_os_str().as_encoded_bytes();
    if bytes.contains(&b':') || bytes.contains(&b',') {
        return Err(SandboxError::EnginePath {
            sandbox: options.sandbox,
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

/// The resource limits of a run, for the container engine to enforce:
/// the container's processes are the engine's children, not warden's, so
/// warden's cgroups never hold them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ContainerLimits {
    /// Bytes; swap off (`--memory-swap` the same).
    pub memory: Option<u64>,
    pub pids: Option<u64>,
    /// Thousandths of a CPU.
    pub cpu_millis: Option<u32>,
}

/// Adds the engine's flags for `limits` (`--memory`, `--memory-swap`,
/// `--pids-limit`, `--cpus`, the same for docker and podman) to a
/// container's command line, right after `run`.
pub fn add_limits(w: &mut Wrapped, limits: &ContainerLimits) {
    let mut flags: Vec<OsString> = Vec::new();
    if let Some(bytes) = limits.memory {
        // Memory and swap together equal to memory alone: no swap.
        for f in ["--memory", "--memory-swap"] {
            flags.push(f.into());
            flags.push(format!("{bytes}b").into());
        }
    }
    if let Some(pids) = limits.pids {
        flags.push("--pids-limit".into());
        flags.push(pids.to_string().into());
    }
    if let Some(m) = limits.cpu_millis {
        flags.push("--cpus".into());
        flags.push(format!("{}.{:03}", m / 1000, m % 1000).into());
    }
    let at = usize::from(w.args.first().is_some_and(|a| a == "run"));
    w.args.splice(at..at, flags);
}

/// The variables of warden's own environment that tell an engine's
/// client where its engine is and how to reach it (`DOCKER_HOST`,
/// `CONTAINER_HOST`, a config directory, rootless Podman's runtime
/// directory and bus). The client is started in the agent's allowlisted
/// environment, which leaves them out; they are given to the client only:
/// what reaches the container is what `-e NAME` names, and these never
/// are.
pub fn client_vars(sandbox: Sandbox) -> &'static [&'static str] {
    match sandbox {
        Sandbox::Docker => &[
            "DOCKER_HOST",
            "DOCKER_CONTEXT",
            "DOCKER_CONFIG",
            "DOCKER_CERT_PATH",
            "DOCKER_TLS_VERIFY",
            "DOCKER_API_VERSION",
            "DOCKER_DEFAULT_PLATFORM",
            "DOCKER_CONTENT_TRUST",
            "DOCKER_CONTENT_TRUST_SERVER",
            "XDG_RUNTIME_DIR",
        ],
        Sandbox::Podman => &[
            "CONTAINER_HOST",
            "CONTAINER_CONNECTION",
            "CONTAINER_SSHKEY",
            "CONTAINER_PASSPHRASE",
            "CONTAINERS_CONF",
            "CONTAINERS_CONF_OVERRIDE",
            "CONTAINERS_REGISTRIES_CONF",
            "CONTAINERS_STORAGE_CONF",
            "REGISTRY_AUTH_FILE",
            "XDG_RUNTIME_DIR",
            "DBUS_SESSION_BUS_ADDRESS",
        ],
        Sandbox::Host | Sandbox::Bwrap => &[],
    }
}

/// Adds what names a run's container to its command line, right after
/// `run`: each label (`--label KEY=VALUE`) and the file the client
/// writes the container's id to once the engine has created it
/// (`--cidfile`), which tells an engine that failed before any container
/// existed from an agent that failed in one.
pub fn add_run_flags(w: &mut Wrapped, labels: &[(&str, String)], cidfile: &std::path::Path) {
    let mut flags: Vec<OsString> = Vec::new();
    for (k, v) in labels {
        flags.push("--label".into());
        flags.push(format!("{k}={v}").into());
    }
    flags.push("--cidfile".into());
    flags.push(cidfile.into());
    let at = usize::from(w.args.first().is_some_and(|a| a == "run"));
    w.args.splice(at..at, flags);
}

/// Whether `line` (without its newline) is one the engine's client wrote
/// itself rather than the container: Docker's `WARNING: ...` (what the
/// daemon said of the container it created, printed before the container
/// starts) and Podman's log lines at warning and error level (`time="..."
/// level=warning msg="..."`, or `WARN[0000] ...` on a terminal; Podman
/// logs errors it goes on after, such as events it could not write, at
/// the error level). Only the shape is known: a container can print the
/// same.
pub fn is_engine_line(sandbox: Sandbox, line: &[u8]) -> bool {
    match sandbox {
        Sandbox::Docker => line.starts_with(b"WARNING: "),
        Sandbox::Podman => {
            let logged = line.starts_with(b"time=\"")
                && [&b"\" level=warning msg="[..], b"\" level=error msg="]
                    .iter()
                    .any(|l| line.windows(l.len()).any(|w| w == *l));
            let on_terminal = (line.starts_with(b"WARN[") || line.starts_with(b"ERRO["))
                && line.get(5..).is_some_and(|r| r.contains(&b']'));
            logged || on_terminal
        }
        Sandbox::Host | Sandbox::Bwrap => false,
    }
}

/// Whether `start`, the beginning of a line still being written, could
/// end up an engine's line ([`is_engine_line`]).
pub fn may_be_engine_line(sandbox: Sandbox, start: &[u8]) -> bool {
    let prefixes: &[&[u8]] = match sandbox {
        Sandbox::Docker => &[b"WARNING: "],
        Sandbox::Podman => &[b"time=\"", b"WARN[", b"ERRO["],
        Sandbox::Host | Sandbox::Bwrap => &[],
    };
    prefixes
        .iter()
        .any(|p| p.starts_with(start) || start.starts_with(p))
}

/// Why a container engine failed before it created the container, said
/// for a person: the engine's own words (its last error line, and the
/// line that says the image was not found, each cut to 200 characters)
/// and what fixes it. `output` is what the client wrote (its stderr).
pub fn engine_failure(sandbox: Sandbox, image: &str, output: &[u8]) -> String {
    let engine = engine(sandbox);
    let text = String::from_utf8_lossy(output);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty()
                && !l.starts_with("Run '")
                && !is_engine_line(sandbox, l.as_bytes())
                && !l.starts_with("WARNING: ")
        })
        .collect();
    let error = lines
        .iter()
        .rev()
        .find(|l| l.starts_with("docker: ") || l.starts_with("Error: "))
        .or(lines.last())
        .copied();
    let not_found = lines
        .iter()
        .find(|l| l.starts_with("Unable to find image") || l.starts_with("Trying to pull"))
        .copied();
    // Judged on the engine's error lines only: a warning before them
    // (Docker's about a config file it could not read) is not the cause.
    let all = lines.join("\n").to_ascii_lowercase();
    let fix = if all.contains("permission denied") {
        match sandbox {
            Sandbox::Podman => {
                "warden cannot use the engine's socket: give this user access to it \
                 (or run rootless podman without CONTAINER_HOST)"
                    .to_string()
            }
            _ => "warden cannot use the daemon's socket: add yourself to the docker group, \
                  or use --sandbox podman"
                .to_string(),
        }
    } else if all.contains("cannot connect to the docker daemon")
        || all.contains("cannot connect to podman")
        || all.contains("is the docker daemon running")
        || all.contains("error during connect")
    {
        match sandbox {
            Sandbox::Podman => "start the Podman service (`podman system service`), or unset \
                                CONTAINER_HOST to run podman locally"
                .to_string(),
            _ => "start the daemon (`systemctl start docker`, or `dockerd`), or point \
                  DOCKER_HOST at a running one"
                .to_string(),
        }
    } else if not_found.is_some()
        || [
            "no such image",
            "image not known",
            "pull access denied",
            "manifest unknown",
        ]
        .iter()
        .any(|p| all.contains(p))
    {
        format!(
            "build or pull the image first (`{engine} pull {image}`, `{engine} build`, or \
             `{engine} load`): it is not on this machine and could not be pulled"
        )
    } else {
        "see the engine's message".to_string()
    };
    let cut = |l: &str| -> String {
        let mut s: String = l.chars().filter(|c| !c.is_control()).take(200).collect();
        if l.chars().count() > 200 {
            s.push('…');
        }
        s
    };
    let said = match (not_found, error) {
        (Some(n), Some(e)) if n != e => format!("\"{}\" / \"{}\"", cut(n), cut(e)),
        (_, Some(e)) => format!("\"{}\"", cut(e)),
        (Some(n), None) => format!("\"{}\"", cut(n)),
        (None, None) => "no message".to_string(),
    };
    format!("{engine} could not create the container: {said}; {fix}")
}

/// Why a container that the engine created never ran the agent, from
/// the client's exit `code` and the start of its stderr (`head`), or
/// `None`: the runtime refused to start it (a mount, a device or an engine
/// argument it cannot apply), or the container's init could not execute
/// the agent's program (not in the image). Told by the engine's or the
/// init's own words as the first line and the code they exit with; an
/// agent that prints the same first and exits so is taken at its word,
/// and its run ends `spawn_failed` rather than `agent_failed`: a failure
/// either way, with the line it wrote quoted.
pub fn start_failure(sandbox: Sandbox, image: &str, code: i32, head: &[u8]) -> Option<String> {
    let engine = engine(sandbox);
    let text = String::from_utf8_lossy(head);
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !is_engine_line(sandbox, l.as_bytes()))?;
    let runtime = match sandbox {
        Sandbox::Podman => first.starts_with("Error: OCI runtime"),
        _ => {
            first.starts_with("docker: Error response from daemon:")
                && (first.contains("OCI runtime") || first.contains("failed to create"))
        }
    };
    let init = match sandbox {
        Sandbox::Podman => {
            first.starts_with("ERROR (catatonit:") && first.contains("failed to exec")
        }
        _ => {
            first.starts_with("[FATAL tini (")
                && first.contains("exec ")
                && first.contains(" failed")
        }
    };
    let quoted: String = first
        .chars()
        .filter(|c| !c.is_control())
        .take(300)
        .collect();
    if runtime && matches!(code, 125..=127) {
        return Some(format!(
            "{engine} created the container but could not start it: \"{quoted}\"; check what the \
             run mounts and passes to the engine (--ro, --rw, --device, --engine-arg)"
        ));
    }
    let init_code = match sandbox {
        Sandbox::Podman => matches!(code, 1 | 126 | 127),
        _ => matches!(code, 126 | 127),
    };
    if init && init_code {
        return Some(format!(
            "the agent's program could not be started in the image {image}: \"{quoted}\"; \
             install it in the image, or name its path there with --agent-bin"
        ));
    }
    None
}

/// Whether `pid` is one of Podman's own processes, which its client
/// leaves in the run's process tree: `conmon`, which holds the container
/// and its output, and `podman container cleanup`, which removes it. Told
/// by the executable, and only in warden's own mount namespace: a process
/// of the container lives in another, whatever its file is named.
pub(crate) fn is_podman_helper(pid: i32) -> bool {
    let proc = std::path::PathBuf::from(format!("/proc/{pid}"));
    let ours = std::fs::read_link("/proc/self/ns/mnt");
    let theirs = std::fs::read_link(proc.join("ns/mnt"));
    if !matches!((&ours, &theirs), (Ok(a), Ok(b)) if a == b) {
        return false;
    }
    std::fs::read_link(proc.join("exe")).is_ok_and(|exe| {
        exe.file_name()
            .is_some_and(|n| n == "conmon" || n == "podman")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use warden_events::Agent;

    fn target<'a>(env: &'a [(OsString, OsString)]) -> Target<'a> {
        Target {
            // No state directories: nothing of this machine's HOME is
            // made or mounted (the tests that want them say so).
            needs: crate::needs(Agent::Exec),
            program: "claude".into(),
            args: vec!["-p".into()],
            workdir: Path::new("/work/repo"),
            home: Path::new("/root"),
            env,
            name: "warden-run1",
            run_dir: None,
        }
    }

    #[test]
    fn a_credentials_file_is_mounted_read_only_at_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("sa.json");
        std::fs::write(&key, "{}").unwrap();
        let env = [(
            OsString::from("GOOGLE_APPLICATION_CREDENTIALS"),
            key.clone().into_os_string(),
        )];
        let opts = SandboxOptions {
            sandbox: Sandbox::Docker,
            image: Some("img".into()),
            ..SandboxOptions::default()
        };
        let mut t = target(&env);
        t.needs = crate::needs(Agent::Claude);
        t.home = dir.path();
        let w = wrap(&opts, t).unwrap();
        let want = format!("{}:{}:ro", key.display(), key.display());
        assert!(
            w.args
                .windows(2)
                .any(|p| p[0] == "-v" && p[1] == want.as_str()),
            "{:?}",
            w.args
        );
    }

    #[test]
    fn the_command_mounts_the_workdir_and_passes_secrets_by_name_only() {
        let env = [
            (
                OsString::from("ANTHROPIC_API_KEY"),
                OsString::from("sk-ant-secret"),
            ),
            (OsString::from("PATH"), OsString::from("/usr/bin")),
        ];
        let options = SandboxOptions {
            sandbox: Sandbox::Podman,
            image: Some("ghcr.io/me/agent:1".into()),
            no_network: true,
            ro: vec!["/data".into()],
            ..SandboxOptions::default()
        };
        let w = wrap(&options, target(&env)).unwrap();
        let line: Vec<String> = std::iter::once(w.program.clone())
            .chain(w.args.clone())
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            line.join(" "),
            "podman run --rm -i --init --name warden-run1 --network none -v /work/repo:/work/repo -v /data:/data:ro -w /work/repo -e ANTHROPIC_API_KEY ghcr.io/me/agent:1 claude -p"
        );
        assert!(
            !line.iter().any(|a| a.contains("sk-ant-secret")),
            "a secret on the command line"
        );
        assert_eq!(
            w.on_kill.unwrap(),
            vec!["podman", "rm", "-f", "warden-run1"]
        );
    }

    #[test]
    fn limits_go_to_the_engine_with_swap_off() {
        let options = SandboxOptions {
            sandbox: Sandbox::Docker,
            image: Some("img:1".into()),
            ..SandboxOptions::default()
        };
        let mut w = wrap(&options, target(&[])).unwrap();
        add_limits(
            &mut w,
            &ContainerLimits {
                memory: Some(32 << 20),
                pids: Some(64),
                cpu_millis: Some(1500),
            },
        );
        let line: Vec<String> = std::iter::once(w.program.clone())
            .chain(w.args.clone())
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            line.join(" "),
            "docker run --memory 33554432b --memory-swap 33554432b --pids-limit 64 --cpus 1.500 --rm -i --init --name warden-run1 -v /work/repo:/work/repo -w /work/repo img:1 claude -p"
        );
        let before = w.clone();
        add_limits(&mut w, &ContainerLimits::default());
        assert_eq!(w, before, "no limits, no flags");
    }

    #[test]
    fn records_and_sockets_inside_a_mount_are_covered_and_an_allowed_socket_is_mounted() {
        let work = tempfile::tempdir().unwrap();
        let work = std::fs::canonicalize(work.path()).unwrap();
        let batch = work.join("bd");
        let run_dir = work.join(".warden/runs/r1");
        std::fs::create_dir_all(batch.join("requests")).unwrap();
        std::fs::create_dir_all(&run_dir).unwrap();
        let outside = tempfile::tempdir().unwrap();
        let daemon = work.join("daemon.sock");
        let allowed = work.join("allowed.sock");
        let _l1 = std::os::unix::net::UnixListener::bind(&daemon).unwrap();
        let _l2 = std::os::unix::net::UnixListener::bind(&allowed).unwrap();
        let options = SandboxOptions {
            sandbox: Sandbox::Docker,
            image: Some("img".into()),
            records: vec![batch.clone(), outside.path().to_path_buf()],
            allow_sockets: vec![allowed.clone()],
            ..SandboxOptions::default()
        };
        let mut t = target(&[]);
        t.workdir = &work;
        t.run_dir = Some(&run_dir);
        let w = crate::wrap(&options, t).unwrap();
        let a: Vec<String> = w
            .args
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        let has = |flag: &str, v: String| a.windows(2).any(|x| x[0] == flag && x[1] == v);
        for dir in [&batch, &run_dir, &work.join(".warden")] {
            assert!(has("--tmpfs", format!("{}:ro", dir.display())), "{a:?}");
        }
        assert!(
            !a.iter()
                .any(|x| x.contains(&*outside.path().to_string_lossy())),
            "a record outside every mount is not in the container at all: {a:?}"
        );
        assert!(
            has("-v", format!("/dev/null:{}:ro", daemon.display())),
            "{a:?}"
        );
        assert!(
            has("-v", format!("{}:{}", allowed.display(), allowed.display())),
            "{a:?}"
        );
        assert!(
            !a.iter()
                .any(|x| x == &format!("/dev/null:{}:ro", allowed.display())),
            "{a:?}"
        );
        // A record the engine could not be told about is refused by name.
        let odd = work.join("a:b");
        std::fs::create_dir_all(&odd).unwrap();
        let mut t = target(&[]);
        t.workdir = &work;
        let e = crate::wrap(
            &SandboxOptions {
                records: vec![odd.clone()],
                ..options.clone()
            },
            t,
        )
        .unwrap_err();
        assert!(e.to_string().contains(&*odd.to_string_lossy()), "{e}");
    }

    #[test]
    fn a_network_and_the_engine_args_go_before_the_image() {
        let options = SandboxOptions {
            sandbox: Sandbox::Docker,
            image: Some("img".into()),
            container_network: Some("host".into()),
            engine_args: vec![
                "--shm-size=1g".into(),
                "--cap-add".into(),
                "SYS_PTRACE".into(),
            ],
            ..SandboxOptions::default()
        };
        let w = wrap(&options, target(&[])).unwrap();
        let line: Vec<String> = w
            .args
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        let line = line.join(" ");
        assert!(line.contains(" --network host "), "{line}");
        assert!(
            line.ends_with(" --shm-size=1g --cap-add SYS_PTRACE img claude -p"),
            "{line}"
        );
        // `--no-network` wins: the container gets none.
        let w = wrap(
            &SandboxOptions {
                no_network: true,
                container_network: Some("none".into()),
                ..options
            },
            target(&[]),
        )
        .unwrap();
        let networks = w.args.iter().filter(|a| *a == "--network").count();
        assert_eq!(networks, 1, "{:?}", w.args);
        assert!(
            w.args
                .windows(2)
                .any(|p| p[0] == "--network" && p[1] == "none")
        );
    }

    #[test]
    fn the_work_trees_owner_runs_the_container_with_a_home_and_its_own_state() {
        use std::os::unix::fs::chown;
        if own_uid() != Some(0) {
            eprintln!("skipped: giving files to another user needs root");
            return;
        }
        let work = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let state = home.path().join(".claude");
        std::fs::create_dir(&state).unwrap();
        chown(work.path(), Some(1000), Some(1000)).unwrap();
        chown(&state, Some(1000), Some(1000)).unwrap();
        let line = |user: ContainerUser| {
            let options = SandboxOptions {
                sandbox: Sandbox::Docker,
                image: Some("img".into()),
                container_user: user,
                ..SandboxOptions::default()
            };
            let mut t = target(&[]);
            t.workdir = work.path();
            t.home = home.path();
            t.needs = crate::needs(Agent::Claude);
            let w = wrap(&options, t).unwrap();
            w.args
                .iter()
                .map(|s| s.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        };
        let auto = line(ContainerUser::Auto);
        let own_state = format!("-v {}:/home/warden/.claude ", state.display());
        for part in [
            " --user 1000:1000 ",
            " --tmpfs /home/warden:exec,mode=1777 -e HOME=/home/warden ",
            own_state.as_str(),
        ] {
            assert!(auto.contains(part), "{part:?} in {auto}");
        }
        assert_eq!(
            line(ContainerUser::Id {
                uid: 1000,
                gid: None
            }),
            auto.replace("--user 1000:1000", "--user 1000")
        );
        // The image's user keeps its HOME; the state goes to the host's path.
        let image = line(ContainerUser::Image);
        assert!(
            !image.contains("--user") && !image.contains("HOME="),
            "{image}"
        );
        assert!(
            image.contains(&format!("-v {0}:{0} ", state.display())),
            "{image}"
        );
        let options = SandboxOptions {
            sandbox: Sandbox::Docker,
            ..SandboxOptions::default()
        };
        let needs = crate::needs(Agent::Claude);
        assert_eq!(
            state_dirs_left_out(&options, &needs, work.path(), home.path()),
            None
        );
        // Another user's state directory is no use to the container's,
        // and is said.
        chown(&state, Some(0), Some(0)).unwrap();
        let auto = line(ContainerUser::Auto);
        assert!(
            auto.contains("--user 1000:1000") && !auto.contains(".claude"),
            "{auto}"
        );
        assert_eq!(
            state_dirs_left_out(&options, &needs, work.path(), home.path()),
            Some((1000, vec![state.clone()]))
        );
        // A work tree root owns: the image's user.
        chown(work.path(), Some(0), Some(0)).unwrap();
        assert!(!line(ContainerUser::Auto).contains("--user"));
    }

    #[test]
    fn container_users_read_and_write_back() {
        for (text, user) in [
            ("auto", ContainerUser::Auto),
            ("image", ContainerUser::Image),
            (
                "1000",
                ContainerUser::Id {
                    uid: 1000,
                    gid: None,
                },
            ),
            (
                "1000:50",
                ContainerUser::Id {
                    uid: 1000,
                    gid: Some(50),
                },
            ),
        ] {
            assert_eq!(text.parse::<ContainerUser>(), Ok(user));
            assert_eq!(user.to_string(), text);
        }
        for bad in ["", "root", "1000:", ":1", "-1", "+5", "1000:x"] {
            assert!(bad.parse::<ContainerUser>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn devices_and_groups_go_to_the_engine_and_a_missing_device_is_named() {
        let options = SandboxOptions {
            sandbox: Sandbox::Podman,
            image: Some("img".into()),
            devices: vec!["/dev/zero:/dev/warden-zero:r".into()],
            group_add: vec!["44".into(), "video".into()],
            ..SandboxOptions::default()
        };
        let w = crate::wrap(&options, target(&[])).unwrap();
        let a: Vec<String> = w
            .args
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        let line = a.join(" ");
        assert!(
            line.contains("--device /dev/zero:/dev/warden-zero:r"),
            "{line}"
        );
        assert!(line.contains("--group-add 44 --group-add video"), "{line}");
        let e = crate::wrap(
            &SandboxOptions {
                devices: vec!["/dev/no-such-device:/dev/x".into()],
                ..options
            },
            target(&[]),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "--device /dev/no-such-device: no such file or directory"
        );
    }

    #[test]
    fn labels_and_the_cidfile_go_right_after_run() {
        let options = SandboxOptions {
            sandbox: Sandbox::Docker,
            image: Some("img:1".into()),
            ..SandboxOptions::default()
        };
        let mut w = wrap(&options, target(&[])).unwrap();
        add_run_flags(
            &mut w,
            &[
                ("warden.run", "r1".into()),
                ("warden.owner", "m:b:1:2:3".into()),
            ],
            Path::new("/tmp/warden-cid-1/id"),
        );
        let a: Vec<String> = w
            .args
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            a[..8].join(" "),
            "run --label warden.run=r1 --label warden.owner=m:b:1:2:3 --cidfile /tmp/warden-cid-1/id --rm"
        );
    }

    #[test]
    fn the_engines_own_lines_are_told_by_their_shape() {
        let d = Sandbox::Docker;
        let p = Sandbox::Podman;
        assert!(is_engine_line(
            d,
            b"WARNING: IPv4 forwarding is disabled. Networking will not work."
        ));
        assert!(!is_engine_line(d, b"warning: something of the agent's"));
        assert!(is_engine_line(
            p,
            br#"time="2026-12-02T05:57:14Z" level=warning msg="Failed, retrying in 1s""#
        ));
        assert!(is_engine_line(p, b"WARN[0000] cannot set rlimits"));
        assert!(!is_engine_line(p, br#"time="x" level=info msg="y""#));
        assert!(is_engine_line(
            p,
            br#"time="x" level=error msg="Unable to write pod event: ...""#
        ));
        assert!(!is_engine_line(p, b"WARNING: a docker line under podman"));
        assert!(may_be_engine_line(d, b"WARN"));
        assert!(may_be_engine_line(d, b"WARNING: half a li"));
        assert!(!may_be_engine_line(d, b"hello"));
        assert!(may_be_engine_line(p, b"time=\"2026"));
        assert!(!may_be_engine_line(p, b"tim e"));
    }

    #[test]
    fn an_engine_failure_quotes_the_engine_and_says_what_fixes_it() {
        let d = Sandbox::Docker;
        let p = Sandbox::Podman;
        let why = engine_failure(
            d,
            "img:1",
            b"docker: Cannot connect to the Docker daemon at unix:///nope.sock. Is the docker daemon running?\n\nRun 'docker run --help' for more information\n",
        );
        assert!(
            why.starts_with("docker could not create the container: \"docker: Cannot connect"),
            "{why}"
        );
        assert!(why.contains("start the daemon"), "{why}");
        let why = engine_failure(
            d,
            "img:1",
            b"WARNING: Error loading config file: open /root/.docker/config.json: permission denied\n\
              docker: permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock: Head ...\n",
        );
        assert!(why.contains("docker group"), "{why}");
        assert!(!why.contains("config file"), "{why}");
        let why = engine_failure(
            d,
            "localhost/nope:1",
            b"Unable to find image 'localhost/nope:1' locally\ndocker: Error response from daemon: Get \"http://localhost/v2/\": dial tcp 127.0.0.1:80: connect: connection refused.\n",
        );
        assert!(
            why.contains(
                "\"Unable to find image 'localhost/nope:1' locally\" / \"docker: Error response"
            ),
            "{why}"
        );
        assert!(why.contains("docker pull localhost/nope:1"), "{why}");
        let why = engine_failure(
            p,
            "localhost/nope:1",
            b"Trying to pull localhost/nope:1...\ntime=\"x\" level=warning msg=\"Failed, retrying in 1s\"\nError: initializing source docker://localhost/nope:1: pinging container registry localhost\n",
        );
        assert!(
            why.starts_with("podman could not create the container: \"Trying to pull"),
            "{why}"
        );
        assert!(why.contains("podman pull localhost/nope:1"), "{why}");
        assert!(!why.contains("retrying"), "{why}");
        let why = engine_failure(
            p,
            "img",
            b"Cannot connect to Podman. Please verify your connection\nError: unable to connect to Podman socket: dial unix /nope.sock: connect: no such file or directory\n",
        );
        assert!(why.contains("Podman service"), "{why}");
        let long = format!("docker: {}\n", "x".repeat(1000));
        let why = engine_failure(d, "img", long.as_bytes());
        assert!(why.len() < 600, "{why}");
    }

    #[test]
    fn only_the_engines_variables_are_given_to_its_client() {
        assert!(client_vars(Sandbox::Docker).contains(&"DOCKER_HOST"));
        assert!(client_vars(Sandbox::Podman).contains(&"CONTAINER_HOST"));
        assert!(client_vars(Sandbox::Bwrap).is_empty());
    }

    #[test]
    fn a_container_that_never_ran_the_agent_is_told_by_the_engines_words() {
        let d = Sandbox::Docker;
        let p = Sandbox::Podman;
        let docker_oci = b"docker: Error response from daemon: failed to create shim task: OCI runtime create failed: runc create failed: error mounting\n\nRun 'docker run --help' for more information\n";
        let why = start_failure(d, "img", 125, docker_oci).unwrap();
        assert!(
            why.starts_with(
                "docker created the container but could not start it: \"docker: Error response"
            ),
            "{why}"
        );
        assert_eq!(
            start_failure(d, "img", 1, docker_oci),
            None,
            "not the engine's code"
        );
        let podman_oci = b"Error: OCI runtime error: runc: runc create failed: unable to start container process\n";
        assert!(start_failure(p, "img", 126, podman_oci).is_some());
        let tini = b"[FATAL tini (7)] exec no-such-cli failed: No such file or directory\n";
        let why = start_failure(d, "img:1", 127, tini).unwrap();
        assert!(
            why.contains("could not be started in the image img:1"),
            "{why}"
        );
        let catatonit = b"ERROR (catatonit:7): failed to exec pid1: No such file or directory\n";
        assert!(start_failure(p, "img", 1, catatonit).is_some());
        // The agent's own words first, then the engine's: the agent's.
        let later = b"starting\n[FATAL tini (7)] exec x failed: y\n";
        assert_eq!(start_failure(d, "img", 127, later), None);
        assert_eq!(
            start_failure(
                d,
                "img",
                125,
                b"docker: Error response from daemon: Cannot connect\n"
            ),
            None,
            "no container at all is the creation's failure, not the start's"
        );
    }

    #[test]
    fn an_image_is_required() {
        let options = SandboxOptions {
            sandbox: Sandbox::Docker,
            ..SandboxOptions::default()
        };
        let e = wrap(&options, target(&[])).unwrap_err();
        assert!(e.to_string().contains("--image"), "{e}");
    }
}
