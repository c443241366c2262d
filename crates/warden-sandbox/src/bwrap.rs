//! bubblewrap: the root read-only, the work directory and the agent's own
//! state writable, a private /tmp, the rest of HOME hidden (no `~/.ssh`,
//! no other credentials), warden's own records hidden, its own user and PID
//! namespaces with no capabilities, and optionally no network.
//!
//! What holds against a hostile agent, whoever runs warden (root
//! included):
//! - no capabilities at all (effective, permitted, bounding, ambient), and
//!   `no_new_privs`: an agent running as uid 0 cannot remount, unmount or
//!   mount anything, so the read-only root stays read-only and the tmpfs
//!   over HOME stays in place; it cannot create a user namespace to get
//!   capabilities back;
//! - `/proc/sys` read-only: uid 0 may write sysctls by file permission
//!   alone, no capability needed, and bwrap leaves it writable;
//! - its own PID namespace: warden, its shim and every other process of the
//!   host are out of sight and out of reach of signals and ptrace;
//! - a new session: no controlling terminal to push input into;
//! - the run directory and every `.warden` directory around the work dir
//!   (other runs' logs, batches, sessions, other worktrees) covered by an
//!   empty read-only tmpfs, the work dir itself bound back on top;
//! - the directories the caller names as warden's records (a session's, a
//!   batch's, a Slurm shared directory) covered the same way, wherever
//!   they lie;
//! - the host's daemons out of reach, network or not: the directories
//!   where they keep their sockets (`/run/user`, `/run/dbus`,
//!   `/run/munge`, ...) emptied, and every other unix socket bound on the
//!   host that would be visible inside covered with `/dev/null`, so none
//!   can be connected to, except those allowed with `--allow-socket`;
//! - with `--no-network`, a new network namespace (TCP/IP and abstract
//!   unix sockets) and /run (and a real /var/run) replaced by an empty
//!   tmpfs.
//!
//! Mount order matters: later mounts go on top of earlier ones, so mounts
//! are made parents first. HOME is replaced by an empty tmpfs, and the
//! directories the agent may use are bound back into it afterwards.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::{SandboxError, SandboxOptions, Target, Wrapped};

/// The namespaces and privileges of every bwrap sandbox warden starts; the
/// probe checks exactly these.
///
/// `--die-with-parent` is deliberately not used: with it, the agent's exit
/// makes bwrap's outer process exit, which SIGKILLs the namespace's init and
/// with it every process the agent left, before warden could see, name and
/// report them. warden's shim is the parent of the outer process (with a
/// parent-death signal) and kills every process of the run itself.
pub const ISOLATION: &[&str] = &[
    "--unshare-user",
    "--disable-userns",
    "--cap-drop",
    "ALL",
    "--unshare-pid",
    "--new-session",
];

/// The mounts every bwrap sandbox starts with, before its own.
const BASE_MOUNTS: &[(Kind, &str)] = &[
    (Kind::RoBind, "/"),
    (Kind::Dev, "/dev"),
    (Kind::Proc, "/proc"),
    (Kind::RoBind, "/proc/sys"),
    (Kind::Tmpfs, "/tmp"),
];

/// bwrap's arguments for a sandbox with only the isolation and the base
/// mounts: what the probe starts `true` in.
pub fn base_args() -> Vec<OsString> {
    let mut a: Vec<OsString> = ISOLATION.iter().map(OsString::from).collect();
    let base: Vec<Mount> = BASE_MOUNTS
        .iter()
        .map(|(kind, p)| Mount::new(*kind, p))
        .collect();
    push_mounts(&mut a, &base);
    a
}

/// What is mounted at a path inside the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The host's path, read-only.
    RoBind,
    /// The host's path, writable.
    Bind,
    /// An empty private tmpfs, writable.
    Tmpfs,
    /// An empty private tmpfs, made read-only once everything inside it is
    /// mounted.
    SealedTmpfs,
    /// bwrap's minimal /dev.
    Dev,
    /// A procfs of the agent's PID namespace.
    Proc,
    /// /dev/null over a host unix socket, so it cannot be connected to.
    Cover,
}

#[derive(Debug, Clone)]
struct Mount {
    kind: Kind,
    path: PathBuf,
}

impl Mount {
    fn new(kind: Kind, path: impl Into<PathBuf>) -> Self {
        Self {
            kind,
            path: path.into(),
        }
    }
}

/// Directories never hidden for the sockets in them: the system's own,
/// whose other files programs read (`/run/systemd/resolve` holds the
/// resolver's configuration); their sockets are covered one by one.
const KEPT_DIRS: &[&str] = &[
    "/",
    "/bin",
    "/boot",
    "/etc",
    "/home",
    "/lib",
    "/lib64",
    "/media",
    "/mnt",
    "/opt",
    "/root",
    "/run",
    "/run/systemd",
    "/run/systemd/resolve",
    "/sbin",
    "/srv",
    "/usr",
    "/var",
    "/var/lib",
    "/var/run",
    "/var/spool",
    "/var/tmp",
];

/// Whether `path` is seen inside the sandbox only through the read-only
/// root: no mount of the sandbox's own lies over it.
fn only_through_root(mounts: &[Mount], path: &Path) -> bool {
    mounts
        .iter()
        .filter(|m| path.starts_with(&m.path))
        .max_by_key(|m| m.path.components().count())
        .is_some_and(|m| m.kind == Kind::RoBind && m.path == Path::new("/"))
}

/// Whether the host's `path` can be seen inside the sandbox at the same
/// path: the mount on top of it (the deepest one that contains it) shows
/// the host's files.
fn shows_host(mounts: &[Mount], path: &Path) -> bool {
    mounts
        .iter()
        .filter(|m| path.starts_with(&m.path))
        .max_by_key(|m| m.path.components().count())
        .is_some_and(|m| matches!(m.kind, Kind::RoBind | Kind::Bind))
}

/// What the agent's provider set-up reads from the host, bound read-only
/// when the variable that asks for it passes into the sandbox: the file a
/// `file_vars` variable names (a service account key), and the `home_dirs`
/// path of a variable that is on (`~/.aws` for `AWS_PROFILE`).
fn provider_files(t: &Target<'_>) -> Vec<PathBuf> {
    let value = |var: &str| {
        t.env
            .iter()
            .rev()
            .find(|(k, _)| k == var)
            .map(|(_, v)| PathBuf::from(v))
            .filter(|v| !v.as_os_str().is_empty())
    };
    let mut out: Vec<PathBuf> = Vec::new();
    for var in t.needs.provider.file_vars {
        if let Some(p) = value(var).filter(|p| p.is_absolute() && p.is_file())
            && !out.contains(&p)
        {
            out.push(p);
        }
    }
    for (var, rel) in t.needs.provider.home_dirs {
        let p = t.home.join(rel);
        // `on`: `CLAUDE_CODE_USE_BEDROCK=0` asks for no `~/.aws`. Only what
        // is in the agent's environment counts, so a gated or asked-for
        // variable binds nothing until it passes.
        let wanted = value(var).is_some_and(|v| crate::env::on(&v.to_string_lossy()));
        if wanted && (p.is_dir() || p.is_file()) && !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

pub fn wrap(options: &SandboxOptions, t: Target<'_>) -> Result<Wrapped, SandboxError> {
    if t.workdir == t.home {
        return Err(SandboxError::WorkdirIsHome(t.workdir.to_path_buf()));
    }
    let mut a: Vec<OsString> = ISOLATION.iter().map(OsString::from).collect();
    if options.no_network {
        a.push("--unshare-net".into());
    }
    let mut writable: Vec<PathBuf> = t.needs.state_dirs.iter().map(|d| t.home.join(d)).collect();
    for var in t.needs.state_dir_vars {
        if let Some((_, v)) = t.env.iter().find(|(k, _)| k == var) {
            writable.push(PathBuf::from(v));
        }
    }
    for dir in &writable {
        std::fs::create_dir_all(dir).map_err(|e| SandboxError::Prepare {
            path: dir.clone(),
            message: e.to_string(),
        })?;
    }

    let mut mounts: Vec<Mount> = BASE_MOUNTS
        .iter()
        .map(|(kind, p)| Mount::new(*kind, p))
        .collect();
    if options.no_network {
        // Where the host keeps its daemons' sockets (docker, dbus, systemd,
        // the user's runtime dir): gone, not just read-only, since a
        // socket can be connected to through a read-only mount.
        mounts.push(Mount::new(Kind::Tmpfs, "/run"));
        if std::fs::symlink_metadata("/var/run").is_ok_and(|m| m.is_dir()) {
            mounts.push(Mount::new(Kind::Tmpfs, "/var/run"));
        }
    }
    if t.home != Path::new("/") {
        mounts.push(Mount::new(Kind::Tmpfs, t.home));
    }
    let hidden_roots: Vec<&Path> = mounts
        .iter()
        .filter(|m| m.kind == Kind::Tmpfs)
        .map(|m| m.path.as_path())
        .collect();
    let program_roots = program_roots(&t, &hidden_roots);
    mounts.extend(
        program_roots
            .into_iter()
            .map(|p| Mount::new(Kind::RoBind, p)),
    );
    mounts.extend(writable.into_iter().map(|d| Mount::new(Kind::Bind, d)));
    mounts.extend(
        provider_files(&t)
            .into_iter()
            .map(|p| Mount::new(Kind::RoBind, p)),
    );
    mounts.push(Mount::new(Kind::Bind, t.workdir));
    mounts.extend(options.ro.iter().map(|p| Mount::new(Kind::RoBind, p)));
    mounts.extend(options.rw.iter().map(|p| Mount::new(Kind::Bind, p)));

    // warden's records: out of the agent's sight and reach, so it cannot
    // rewrite its own logs, read and alter other runs', or rewrite what a
    // batch will run next.
    // Outermost first: one inside a record already covered is out of
    // sight with it (covering it again would leave its name behind, as
    // the mount point bwrap makes for it).
    let writable_roots: Vec<PathBuf> = mounts
        .iter()
        .filter(|m| m.kind == Kind::Bind)
        .map(|m| m.path.clone())
        .collect();
    let mut records: Vec<PathBuf> = records(&t, options)
        .into_iter()
        .map(|d| cover_for(d, &writable_roots, t.workdir))
        .collect();
    records.sort_by_key(|d| d.components().count());
    records.dedup();
    for dir in records {
        if dir != t.workdir && shows_host(&mounts, &dir) {
            mounts.push(Mount::new(Kind::SealedTmpfs, dir));
        }
    }
    // The host's daemons: a unix socket bound to a path is reached through
    // the file system, whatever the network namespace, so the directories
    // where daemons keep theirs are emptied and every other listening
    // socket the agent could see is covered; those the user allows are
    // bound back.
    for dir in daemon_dirs() {
        if shows_host(&mounts, &dir) {
            mounts.push(Mount::new(Kind::SealedTmpfs, dir));
        }
    }
    let allowed: Vec<PathBuf> = options
        .allow_sockets
        .iter()
        .map(|p| crate::real(p))
        .collect();
    let mut covers: Vec<PathBuf> = Vec::new();
    for socket in crate::sockets::host_unix_sockets() {
        if allowed.contains(&socket) || !shows_host(&mounts, &socket) {
            continue;
        }
        // bwrap cannot bind over a socket that is gone by the time it
        // starts (it would have to create the file in the read-only
        // root, and gives up), and daemons' sockets come and go (each
        // Slurm job step has one in slurmd's spool directory). So a
        // socket seen only through the read-only root is hidden with its
        // whole directory when nothing of the agent's lies there and it
        // is no system directory; one elsewhere is covered by itself.
        let dir = socket.parent().filter(|d| {
            only_through_root(&mounts, d)
                && !KEPT_DIRS.iter().any(|k| Path::new(k) == *d)
                && !mounts.iter().any(|m| m.path.starts_with(d))
        });
        let mount = match dir {
            Some(dir) => Mount::new(Kind::SealedTmpfs, dir),
            None => Mount::new(Kind::Cover, socket),
        };
        covers.push(mount.path.clone());
        mounts.push(mount);
    }
    for socket in allowed {
        if !shows_host(&mounts, &socket) {
            mounts.push(Mount::new(Kind::RoBind, socket));
        }
    }

    // Sorted so a parent is mounted before what lies inside it (a stable
    // sort: the base mounts keep their order): HOME's tmpfs hides HOME even
    // when HOME is inside the work dir, the work dir stays visible when it
    // is inside HOME or inside a hidden `.warden`.
    mounts.sort_by_key(|m| m.path.components().count());
    push_mounts(&mut a, &mounts);
    a.push("--chdir".into());
    a.push(t.workdir.into());
    a.push("--".into());
    // warden ends a run by sending SIGTERM to every process of it, bwrap's
    // outer process included, and that process dies of it at once (bwrap
    // forwards no signal): the run would see "exited" before the agent had
    // finished its clean-up, and name the agent as its own orphan. So the
    // outer process starts with SIGTERM ignored and the agent gets the
    // default back just before it starts; bwrap's init ignores a SIGTERM
    // from outside its namespace anyway. SIGKILL still reaches all.
    let (program, mut args) = if crate::probe::signal_env()
        && !t.program.as_encoded_bytes().contains(&b'=')
        && !t.program.as_encoded_bytes().starts_with(b"-")
    {
        a.extend(["env", "--default-signal=TERM"].map(OsString::from));
        let mut outer: Vec<OsString> = vec!["--ignore-signal=TERM".into(), "bwrap".into()];
        outer.append(&mut a);
        (OsString::from("env"), outer)
    } else {
        (OsString::from("bwrap"), a)
    };
    args.push(t.program);
    args.extend(t.args);
    Ok(Wrapped {
        program,
        args,
        containment: Some("pid_namespace"),
        on_kill: None,
        covers,
    })
}

/// Appends the bwrap arguments that make `mounts`, in order; sealed
/// tmpfs are made read-only last, once whatever lies inside them is
/// mounted (the remount is not recursive).
fn push_mounts(a: &mut Vec<OsString>, mounts: &[Mount]) {
    for m in mounts {
        let p = m.path.as_os_str();
        let args: &[&std::ffi::OsStr] = match m.kind {
            Kind::RoBind => &["--ro-bind".as_ref(), p, p],
            Kind::Bind => &["--bind".as_ref(), p, p],
            Kind::Tmpfs | Kind::SealedTmpfs => &["--tmpfs".as_ref(), p],
            Kind::Dev => &["--dev".as_ref(), p],
            Kind::Proc => &["--proc".as_ref(), p],
            Kind::Cover => &["--ro-bind".as_ref(), "/dev/null".as_ref(), p],
        };
        a.extend(args.iter().map(|x| x.to_os_string()));
    }
    for m in mounts.iter().filter(|m| m.kind == Kind::SealedTmpfs) {
        a.push("--remount-ro".into());
        a.push(m.path.clone().into());
    }
}

/// What covers the record `dir`. One that lies deeper than the top of a
/// directory the agent can write (its work directory, a `--rw` bind)
/// could be moved away by the agent, cover and all, by renaming a parent,
/// and a directory of its own put in its place; so the cover goes on the
/// parent just under that writable root instead, which the agent cannot
/// rename (a mount point). Not when that parent holds the work directory
/// itself.
fn cover_for(dir: PathBuf, writable_roots: &[PathBuf], workdir: &Path) -> PathBuf {
    let root = writable_roots
        .iter()
        .filter(|r| dir.starts_with(r) && dir != **r)
        .max_by_key(|r| r.components().count());
    let Some(root) = root else {
        return dir;
    };
    let Ok(rest) = dir.strip_prefix(root) else {
        return dir;
    };
    let mut parts = rest.components();
    match (parts.next(), parts.next()) {
        (Some(first), Some(_)) => {
            let top = root.join(first);
            if workdir.starts_with(&top) { dir } else { top }
        }
        _ => dir,
    }
}

/// warden's records around this run: its run directory, the directories
/// the caller names (a session's, a batch's, a Slurm shared directory),
/// and every `.warden` directory that holds the work dir or lies in it or
/// in one of its parents (other runs' logs, batches, sessions,
/// worktrees). A directory that `--ro` or `--rw` names itself is the
/// user's choice and stays visible.
pub(crate) fn records(t: &Target<'_>, options: &SandboxOptions) -> Vec<PathBuf> {
    let named: Vec<PathBuf> = options
        .ro
        .iter()
        .chain(&options.rw)
        .map(|p| crate::real(p))
        .collect();
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut add = |d: PathBuf| {
        if !dirs.contains(&d) && !named.contains(&crate::real(&d)) {
            dirs.push(d);
        }
    };
    if let Some(run_dir) = t.run_dir {
        add(run_dir.to_path_buf());
        for a in run_dir.ancestors() {
            if a.file_name().is_some_and(|n| n == ".warden") {
                add(a.to_path_buf());
            }
        }
    }
    // Only those that exist: a mount point that is not there cannot be
    // made in the read-only root. One named through a symlink is covered
    // where the link leads, which hides it under either name.
    for dir in &options.records {
        if std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
            add(dir.clone());
        }
        let real = crate::real(dir);
        if real.is_dir() {
            add(real);
        }
    }
    for a in t.workdir.ancestors() {
        if a.file_name().is_some_and(|n| n == ".warden") {
            add(a.to_path_buf());
        }
        let inside = a.join(".warden");
        if std::fs::symlink_metadata(&inside).is_ok_and(|m| m.is_dir()) {
            add(inside);
        }
    }
    dirs
}

/// Where the host's daemons keep their sockets (D-Bus, the users' runtime
/// directories with their session buses, ssh and gpg agents, podman and
/// systemd's user instance; munge, docker, containerd): emptied whole, so
/// that a daemon that binds its socket after the run started is out of
/// reach too. `/run/systemd` itself stays (its `resolve` directory holds
/// the resolver's configuration); its sockets are covered one by one.
pub fn daemon_dirs() -> Vec<PathBuf> {
    const NAMES: &[&str] = &["user", "dbus", "munge", "podman", "docker", "containerd"];
    let mut roots = vec![Path::new("/run")];
    if std::fs::symlink_metadata("/var/run").is_ok_and(|m| m.is_dir()) {
        roots.push(Path::new("/var/run"));
    }
    roots
        .into_iter()
        .flat_map(|r| NAMES.iter().map(move |n| r.join(n)))
        .filter(|d| std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir()))
        .collect()
}

/// Whether `pid` is bubblewrap's own init in a sandbox one PID namespace
/// below warden's: bwrap runs it next to the agent to reap orphans, it is
/// not something the agent left. The agent cannot fake one: it would need
/// a PID namespace of its own, which takes a capability or a user
/// namespace, and it has neither.
pub fn is_sandbox_init(pid: i32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let field = |s: &str, name: &str| -> Option<String> {
        s.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
    };
    let depth = |nspid: &str| nspid.split_whitespace().count();
    let Some(own) = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| field(&s, "NSpid:"))
    else {
        return false;
    };
    let (Some(name), Some(nspid)) = (field(&status, "Name:"), field(&status, "NSpid:")) else {
        return false;
    };
    name == "bwrap"
        && depth(&nspid) == depth(&own) + 1
        && nspid.split_whitespace().last() == Some("1")
}

/// Directories that would be hidden inside the sandbox (HOME, /tmp) but
/// hold the agent's own program or the `node` it runs on (an npm prefix
/// under HOME, nvm, a checkout in /tmp): bound back read-only so the agent
/// can start. For a path inside `node_modules`, the whole package tree
/// (the parent of the outermost `node_modules`, platform packages and all);
/// for one in a `bin` directory, its prefix; else its directory.
fn program_roots(t: &Target<'_>, hidden_roots: &[&Path]) -> Vec<PathBuf> {
    let hidden = |p: &Path| hidden_roots.iter().any(|r| p.starts_with(r));
    let path_var = t
        .env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone());
    let lookup = |name: &std::ffi::OsStr| -> Option<PathBuf> {
        let p = Path::new(name);
        if p.components().count() > 1 {
            return Some(if p.is_absolute() {
                p.to_path_buf()
            } else {
                t.workdir.join(p)
            });
        }
        std::env::split_paths(path_var.as_ref()?)
            .map(|d| d.join(p))
            .find(|c| c.is_file())
    };
    let mut roots: Vec<PathBuf> = Vec::new();
    let candidates = std::iter::once(lookup(&t.program))
        .chain(t.needs.runtimes.iter().map(|r| lookup(r.as_ref())));
    for found in candidates.flatten() {
        let canonical = std::fs::canonicalize(&found).unwrap_or_else(|_| found.clone());
        for p in [found, canonical] {
            if !hidden(&p) {
                continue;
            }
            let outermost_modules = p
                .ancestors()
                .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
                .last();
            let root = match outermost_modules {
                Some(m) => m.parent().unwrap_or(m).to_path_buf(),
                None => {
                    let dir = p.parent().unwrap_or(&p);
                    if dir.file_name().is_some_and(|n| n == "bin") {
                        dir.parent().unwrap_or(dir).to_path_buf()
                    } else {
                        dir.to_path_buf()
                    }
                }
            };
            // Never re-expose all of HOME, /tmp or /run.
            if !hidden_roots.contains(&root.as_path()) && !roots.contains(&root) {
                roots.push(root);
            }
        }
    }
    roots
}

#[cfg(test)]
mod tests {
    use super::*;
    use warden_events::Agent;

    /// The bwrap arguments for `exec true` in `workdir` with `home`.
    fn exec_args(options: &SandboxOptions, workdir: &Path, home: &Path) -> Vec<String> {
        strs(
            &wrap(
                options,
                Target {
                    needs: crate::needs(Agent::Exec),
                    program: "true".into(),
                    args: vec![],
                    workdir,
                    home,
                    env: &[],
                    name: "r",
                    run_dir: None,
                },
            )
            .unwrap()
            .args,
        )
    }

    fn strs(v: &[OsString]) -> Vec<String> {
        v.iter().map(|s| s.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn only_gcloud_s_credentials_file_is_bound_and_a_switch_set_to_0_binds_nothing() {
        let home = tempfile::tempdir().unwrap();
        let gcloud = home.path().join(".config/gcloud");
        std::fs::create_dir_all(&gcloud).unwrap();
        let adc = gcloud.join("application_default_credentials.json");
        std::fs::write(&adc, "{}").unwrap();
        std::fs::write(gcloud.join("credentials.db"), "").unwrap();
        std::fs::create_dir_all(home.path().join(".aws")).unwrap();
        let files = |env: &[(OsString, OsString)]| {
            provider_files(&Target {
                needs: crate::needs(Agent::Claude),
                program: "claude".into(),
                args: Vec::new(),
                workdir: Path::new("/work"),
                home: home.path(),
                env,
                name: "r1",
                run_dir: None,
            })
        };
        let on = [
            ("CLAUDE_CODE_USE_VERTEX".into(), "1".into()),
            ("CLAUDE_CODE_USE_BEDROCK".into(), "1".into()),
        ];
        assert_eq!(files(&on), vec![home.path().join(".aws"), adc.clone()]);
        let off = [
            ("CLAUDE_CODE_USE_VERTEX".into(), "false".into()),
            ("CLAUDE_CODE_USE_BEDROCK".into(), "0".into()),
        ];
        assert!(files(&off).is_empty(), "{:?}", files(&off));
    }

    #[test]
    fn home_is_hidden_then_state_and_workdir_are_bound_back() {
        let home = tempfile::tempdir().unwrap();
        let work = home.path().join("project");
        std::fs::create_dir_all(&work).unwrap();
        let options = SandboxOptions {
            no_network: true,
            ..SandboxOptions::default()
        };
        let w = wrap(
            &options,
            Target {
                needs: crate::needs(Agent::Claude),
                program: "claude".into(),
                args: vec!["-p".into()],
                workdir: &work,
                home: home.path(),
                env: &[],
                name: "r1",
                run_dir: None,
            },
        )
        .unwrap();
        let a = strs(&w.args);
        let pos = |needle: &str| a.iter().position(|x| x == needle).unwrap();
        let h = home.path().to_string_lossy().into_owned();
        let claude_dir = home.path().join(".claude").to_string_lossy().into_owned();
        for flag in [
            "--unshare-net",
            "--unshare-user",
            "--disable-userns",
            "--new-session",
        ] {
            assert!(a.contains(&flag.into()), "{flag} missing: {a:?}");
        }
        assert!(a.windows(2).any(|w| w == ["--cap-drop", "ALL"]), "{a:?}");
        assert!(
            pos("/proc") < a.iter().rposition(|x| x == "/proc/sys").unwrap(),
            "/proc/sys is made read-only after /proc is mounted"
        );
        assert!(
            pos(&h) < pos(&claude_dir),
            "HOME is hidden before .claude is bound back"
        );
        assert!(
            home.path().join(".claude").is_dir(),
            "the state dir is created so it can be bound"
        );
        if crate::probe::signal_env() {
            assert_eq!(w.program, "env");
            assert_eq!(&a[..2], ["--ignore-signal=TERM", "bwrap"]);
            assert_eq!(
                &a[a.len() - 5..],
                ["--", "env", "--default-signal=TERM", "claude", "-p"]
            );
        } else {
            assert_eq!(w.program, "bwrap");
            assert_eq!(&a[a.len() - 3..], ["--", "claude", "-p"]);
        }
    }

    #[test]
    fn a_home_inside_the_workdir_is_still_hidden() {
        let work = tempfile::tempdir().unwrap();
        let home = work.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let w = wrap(
            &SandboxOptions::default(),
            Target {
                needs: crate::needs(Agent::Exec),
                program: "true".into(),
                args: vec![],
                workdir: work.path(),
                home: &home,
                env: &[],
                name: "r",
                run_dir: None,
            },
        )
        .unwrap();
        let a = strs(&w.args);
        let bind_work = a
            .windows(2)
            .position(|x| x[0] == "--bind" && x[1] == work.path().to_string_lossy())
            .unwrap();
        let tmpfs_home = a
            .windows(2)
            .position(|x| x[0] == "--tmpfs" && x[1] == home.to_string_lossy())
            .unwrap();
        assert!(bind_work < tmpfs_home, "{a:?}");
    }

    #[test]
    fn an_agent_installed_under_home_stays_visible() {
        let home = tempfile::tempdir().unwrap();
        let pkg = home.path().join("tools/node_modules/@scope/cli/bin");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::create_dir_all(home.path().join("tools/node_modules/.bin")).unwrap();
        std::fs::write(pkg.join("cli.js"), "").unwrap();
        let link = home.path().join("tools/node_modules/.bin/cli");
        std::os::unix::fs::symlink(pkg.join("cli.js"), &link).unwrap();
        let work = home.path().join("project");
        std::fs::create_dir_all(&work).unwrap();
        let env = [(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))];
        let w = wrap(
            &SandboxOptions::default(),
            Target {
                needs: crate::needs(Agent::Pi),
                program: link.clone().into(),
                args: vec![],
                workdir: &work,
                home: home.path(),
                env: &env,
                name: "r",
                run_dir: None,
            },
        )
        .unwrap();
        let a = strs(&w.args);
        let tools = home.path().join("tools").to_string_lossy().into_owned();
        let at = a
            .windows(2)
            .position(|x| x[0] == "--ro-bind" && x[1] == tools)
            .expect("the package tree is bound");
        let hidden = a
            .windows(2)
            .position(|x| x[0] == "--tmpfs" && x[1] == home.path().to_string_lossy())
            .unwrap();
        assert!(hidden < at, "{a:?}");
    }

    #[test]
    fn the_home_directory_itself_cannot_be_the_workdir() {
        let home = tempfile::tempdir().unwrap();
        let e = wrap(
            &SandboxOptions::default(),
            Target {
                needs: crate::needs(Agent::Exec),
                program: "true".into(),
                args: vec![],
                workdir: home.path(),
                home: home.path(),
                env: &[],
                name: "r",
                run_dir: None,
            },
        )
        .unwrap_err();
        assert!(matches!(e, SandboxError::WorkdirIsHome(_)));
    }

    #[test]
    fn warden_records_are_sealed_and_a_worktree_inside_them_is_bound_back() {
        let repo = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let warden = repo.path().join(".warden");
        let work = warden.join("worktrees/feature");
        let run_dir = warden.join("sessions/s1/iteration-1");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(work.join(".warden/runs")).unwrap();
        std::fs::create_dir_all(&run_dir).unwrap();
        // The repository is in /tmp, hidden inside: make it visible.
        let options = SandboxOptions {
            ro: vec![repo.path().to_path_buf()],
            ..SandboxOptions::default()
        };
        let w = wrap(
            &options,
            Target {
                needs: crate::needs(Agent::Exec),
                program: "true".into(),
                args: vec![],
                workdir: &work,
                home: home.path(),
                env: &[],
                name: "r",
                run_dir: Some(&run_dir),
            },
        )
        .unwrap();
        let a = strs(&w.args);
        let s = |p: &std::path::Path| p.to_string_lossy().into_owned();
        let at = |flag: &str, p: &std::path::Path| {
            a.windows(2)
                .position(|x| x[0] == flag && x[1] == s(p))
                .unwrap_or_else(|| panic!("{flag} {} missing: {a:?}", p.display()))
        };
        let sealed = at("--tmpfs", &warden);
        assert!(sealed < at("--bind", &work), "the work dir is bound back");
        let inner = at("--tmpfs", &work.join(".warden"));
        assert!(inner > at("--bind", &work));
        for dir in [&warden, &work.join(".warden")] {
            assert!(at("--remount-ro", dir) > inner, "{a:?}");
        }
        assert!(
            !a.iter().any(|x| *x == s(&run_dir)),
            "the run dir is out of sight with the `.warden` it is in; covering it \
             again would leave its name there as a mount point: {a:?}"
        );
        assert!(
            !a.windows(2).any(|x| x[0] == "--tmpfs" && x[1] == s(&work)),
            "the work dir itself is never hidden: {a:?}"
        );
    }

    #[test]
    fn no_network_covers_the_host_sockets_the_agent_could_see() {
        let work = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let visible = work.path().join("daemon.sock");
        let hidden = home.path().join("hidden.sock");
        let _l1 = std::os::unix::net::UnixListener::bind(&visible).unwrap();
        let _l2 = std::os::unix::net::UnixListener::bind(&hidden).unwrap();
        let target = |net| {
            let options = SandboxOptions {
                no_network: net,
                ..SandboxOptions::default()
            };
            exec_args(&options, work.path(), home.path())
        };
        let covered = |a: &[String], p: &std::path::Path| {
            let p = std::fs::canonicalize(p)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            a.windows(3)
                .any(|x| x[0] == "--ro-bind" && x[1] == "/dev/null" && x[2] == p)
        };
        let cut = target(true);
        assert!(covered(&cut, &visible), "{cut:?}");
        assert!(!covered(&cut, &hidden), "under the hidden HOME: {cut:?}");
        assert!(cut.windows(2).any(|x| x == ["--tmpfs", "/run"]), "{cut:?}");
        let open = target(false);
        assert!(covered(&open, &visible), "network or not: {open:?}");
        assert!(
            !open.windows(2).any(|x| x == ["--tmpfs", "/run"]),
            "/run stays (the resolver's files) with the network on: {open:?}"
        );
    }

    #[test]
    fn an_allowed_socket_is_not_covered_and_one_under_a_hidden_dir_is_bound_back() {
        let work = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let allowed = work.path().join("allowed.sock");
        let other = work.path().join("other.sock");
        let _l1 = std::os::unix::net::UnixListener::bind(&allowed).unwrap();
        let _l2 = std::os::unix::net::UnixListener::bind(&other).unwrap();
        let real = |p: &Path| {
            std::fs::canonicalize(p)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        };
        let args = |no_network| {
            let options = SandboxOptions {
                no_network,
                allow_sockets: vec![allowed.clone()],
                ..SandboxOptions::default()
            };
            exec_args(&options, work.path(), home.path())
        };
        let a = args(false);
        let cover = |a: &[String], p: &str| {
            a.windows(3)
                .any(|x| x[0] == "--ro-bind" && x[1] == "/dev/null" && x[2] == p)
        };
        assert!(!cover(&a, &real(&allowed)), "{a:?}");
        assert!(cover(&a, &real(&other)), "{a:?}");
        // A socket the sandbox would hide (here: inside the hidden HOME's
        // place, /tmp is private) is bound back when allowed.
        let hidden_home = tempfile::tempdir().unwrap();
        let sock = hidden_home.path().join("agent.sock");
        let _l3 = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let w = wrap(
            &SandboxOptions {
                allow_sockets: vec![sock.clone()],
                ..SandboxOptions::default()
            },
            Target {
                needs: crate::needs(Agent::Exec),
                program: "true".into(),
                args: vec![],
                workdir: work.path(),
                home: home.path(),
                env: &[],
                name: "r",
                run_dir: None,
            },
        )
        .unwrap();
        let a = strs(&w.args);
        let s = real(&sock);
        assert!(
            a.windows(3)
                .any(|x| x[0] == "--ro-bind" && x[1] == s && x[2] == s),
            "{a:?}"
        );
    }

    #[test]
    fn a_socket_seen_through_the_root_is_hidden_with_its_directory_which_is_rechecked() {
        let work = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let spool = tempfile::tempdir_in("/var/tmp").unwrap();
        let spool_dir = std::fs::canonicalize(spool.path()).unwrap();
        let _l = std::os::unix::net::UnixListener::bind(spool_dir.join("node_1.0")).unwrap();
        let w = wrap(
            &SandboxOptions::default(),
            Target {
                needs: crate::needs(Agent::Exec),
                program: "true".into(),
                args: vec![],
                workdir: work.path(),
                home: home.path(),
                env: &[],
                name: "r",
                run_dir: None,
            },
        )
        .unwrap();
        let a = strs(&w.args);
        let d = spool_dir.to_string_lossy().into_owned();
        assert!(
            a.windows(2).any(|x| x[0] == "--tmpfs" && x[1] == d)
                && a.windows(2).any(|x| x[0] == "--remount-ro" && x[1] == d),
            "{a:?}"
        );
        assert!(w.covers.contains(&spool_dir), "{:?}", w.covers);
        assert!(!w.vanished());
        drop(spool);
        assert!(w.vanished(), "the directory is gone: build it again");
    }

    #[test]
    fn a_path_that_is_not_a_socket_is_refused_by_name() {
        let work = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let file = work.path().join("plain");
        std::fs::write(&file, "").unwrap();
        for (path, says) in [
            (file.clone(), "a regular file"),
            (work.path().join("none"), "No such file"),
        ] {
            let e = crate::wrap(
                &SandboxOptions {
                    sandbox: crate::Sandbox::Bwrap,
                    allow_sockets: vec![path.clone()],
                    ..SandboxOptions::default()
                },
                Target {
                    needs: crate::needs(Agent::Exec),
                    program: "true".into(),
                    args: vec![],
                    workdir: work.path(),
                    home: home.path(),
                    env: &[],
                    name: "r",
                    run_dir: None,
                },
            )
            .unwrap_err();
            let m = e.to_string();
            assert!(
                m.contains(&path.display().to_string()) && m.contains(says),
                "{m}"
            );
        }
    }

    #[test]
    fn a_record_deep_in_a_writable_tree_is_covered_at_its_top_there() {
        let roots = [PathBuf::from("/w"), PathBuf::from("/w/rw")];
        let w = Path::new("/w");
        // Deep inside the work directory: its top-level parent there.
        assert_eq!(
            cover_for("/w/runs/b1".into(), &roots, w),
            Path::new("/w/runs")
        );
        // Right under a writable root: itself (a mount point, not movable).
        assert_eq!(
            cover_for("/w/.warden".into(), &roots, w),
            Path::new("/w/.warden")
        );
        // The deepest writable root counts.
        assert_eq!(
            cover_for("/w/rw/a/b".into(), &roots, w),
            Path::new("/w/rw/a")
        );
        // Outside every writable root: itself.
        assert_eq!(
            cover_for("/var/tmp/b/c".into(), &roots, w),
            Path::new("/var/tmp/b/c")
        );
        // Never a parent of the work directory.
        let inner = Path::new("/w/sub/work");
        assert_eq!(
            cover_for("/w/sub/runs".into(), &[PathBuf::from("/w")], inner),
            Path::new("/w/sub/runs")
        );
    }

    #[test]
    fn named_records_are_sealed_wherever_they_lie_unless_bound_by_name() {
        let work = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let batch = work.path().join("bd");
        let shared = work.path().join("shared");
        let missing = work.path().join("not-made");
        std::fs::create_dir_all(batch.join("requests")).unwrap();
        std::fs::create_dir_all(&shared).unwrap();
        let link = work.path().join("link-to-bd");
        std::os::unix::fs::symlink(&batch, &link).unwrap();
        let args = |ro: Vec<PathBuf>| {
            let options = SandboxOptions {
                ro,
                records: vec![link.clone(), shared.clone(), missing.clone()],
                ..SandboxOptions::default()
            };
            exec_args(&options, work.path(), home.path())
        };
        let sealed = |a: &[String], p: &Path| {
            let p = p.to_string_lossy();
            a.windows(2).any(|x| x[0] == "--tmpfs" && x[1] == p)
                && a.windows(2).any(|x| x[0] == "--remount-ro" && x[1] == p)
        };
        let a = args(vec![]);
        let real_batch = std::fs::canonicalize(&batch).unwrap();
        assert!(
            sealed(&a, &real_batch),
            "the directory a symlink leads to: {a:?}"
        );
        assert!(sealed(&a, &shared), "{a:?}");
        assert!(!a.iter().any(|x| *x == missing.to_string_lossy()), "{a:?}");
        let a = args(vec![shared.clone()]);
        assert!(!sealed(&a, &shared), "--ro names it: {a:?}");
        assert!(sealed(&a, &real_batch), "{a:?}");
    }
}
