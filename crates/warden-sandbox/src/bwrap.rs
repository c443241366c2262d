//! bubblewrap: the root read-only, the work directory and the agent's own
//! state writable, a private /tmp, the rest of HOME hidden (no `~/.ssh`,
//! no other credentials), its own PID namespace, and optionally no network.
//!
//! Mount order matters: later mounts go on top of earlier ones, so mounts
//! are made parents first. HOME is replaced by an empty tmpfs, and the
//! directories the agent may use are bound back into it afterwards.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use warden_events::Agent;

use crate::{SandboxError, SandboxOptions, Target, Wrapped};

/// Directories (relative to HOME) where each agent keeps its config and
/// state, bound writable so logins, sessions and settings persist.
pub fn state_dirs(agent: Agent) -> &'static [&'static str] {
    match agent {
        Agent::Claude => &[".claude"],
        Agent::Codex => &[".codex"],
        Agent::OpenCode => &[
            ".config/opencode",
            ".local/share/opencode",
            ".cache/opencode",
            ".local/state/opencode",
        ],
        Agent::Pi => &[".pi"],
        Agent::Gemini => &[".gemini"],
        Agent::Exec => &[],
    }
}

/// Variables that move an agent's state directory elsewhere.
fn state_dir_vars(agent: Agent) -> &'static [&'static str] {
    match agent {
        Agent::Claude => &["CLAUDE_CONFIG_DIR", "CLAUDE_CODE_TMPDIR"],
        Agent::Codex => &["CODEX_HOME"],
        Agent::Pi => &["PI_CODING_AGENT_DIR"],
        Agent::Gemini => &["GEMINI_CLI_HOME"],
        Agent::OpenCode | Agent::Exec => &[],
    }
}

pub fn wrap(options: &SandboxOptions, t: Target<'_>) -> Result<Wrapped, SandboxError> {
    if t.workdir == t.home {
        return Err(SandboxError::WorkdirIsHome(t.workdir.to_path_buf()));
    }
    let mut a: Vec<OsString> = Vec::new();
    let mut arg = |x: &str| a.push(x.into());
    for x in ["--die-with-parent", "--unshare-pid", "--new-session"] {
        arg(x);
    }
    if options.no_network {
        arg("--unshare-net");
    }
    for x in [
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
    ] {
        arg(x);
    }
    let mut writable: Vec<PathBuf> = state_dirs(t.agent).iter().map(|d| t.home.join(d)).collect();
    for var in state_dir_vars(t.agent) {
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
    // Every mount, then sorted so a parent is mounted before what lies
    // inside it: HOME's tmpfs hides HOME even when HOME is inside the work
    // dir, and the work dir stays visible when it is inside HOME.
    let program_roots = program_roots(&t);
    let mut mounts: Vec<(&str, &Path)> = Vec::new();
    if t.home != Path::new("/") {
        mounts.push(("--tmpfs", t.home));
    }
    mounts.extend(program_roots.iter().map(|p| ("--ro-bind", p.as_path())));
    mounts.extend(writable.iter().map(|d| ("--bind", d.as_path())));
    mounts.push(("--bind", t.workdir));
    mounts.extend(options.ro.iter().map(|p| ("--ro-bind", p.as_path())));
    mounts.extend(options.rw.iter().map(|p| ("--bind", p.as_path())));
    mounts.sort_by_key(|(_, p)| p.components().count());
    for (flag, p) in mounts {
        a.push(flag.into());
        a.push(p.into());
        if flag != "--tmpfs" {
            a.push(p.into());
        }
    }
    a.push("--chdir".into());
    a.push(t.workdir.into());
    a.push("--".into());
    a.push(t.program);
    a.extend(t.args);
    Ok(Wrapped {
        program: "bwrap".into(),
        args: a,
        containment: Some("pid_namespace"),
        on_kill: None,
    })
}

/// Directories that would be hidden inside the sandbox (HOME, /tmp) but
/// hold the agent's own program or the `node` it runs on (an npm prefix
/// under HOME, nvm, a checkout in /tmp): bound back read-only so the agent
/// can start. For a path inside `node_modules`, the whole package tree
/// (the parent of the outermost `node_modules`, platform packages and all);
/// for one in a `bin` directory, its prefix; else its directory.
fn program_roots(t: &Target<'_>) -> Vec<PathBuf> {
    let hidden = |p: &Path| p.starts_with(t.home) || p.starts_with("/tmp");
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
    let candidates = [
        lookup(&t.program),
        (t.agent != Agent::Exec)
            .then(|| lookup("node".as_ref()))
            .flatten(),
    ];
    for found in candidates.into_iter().flatten() {
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
            // Never re-expose all of HOME or /tmp.
            if root != t.home && root != Path::new("/tmp") && !roots.contains(&root) {
                roots.push(root);
            }
        }
    }
    roots
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strs(v: &[OsString]) -> Vec<String> {
        v.iter().map(|s| s.to_string_lossy().into_owned()).collect()
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
                agent: Agent::Claude,
                program: "claude".into(),
                args: vec!["-p".into()],
                workdir: &work,
                home: home.path(),
                env: &[],
                name: "r1",
            },
        )
        .unwrap();
        let a = strs(&w.args);
        let pos = |needle: &str| a.iter().position(|x| x == needle).unwrap();
        let h = home.path().to_string_lossy().into_owned();
        let claude_dir = home.path().join(".claude").to_string_lossy().into_owned();
        assert!(a.contains(&"--unshare-net".into()) && a.contains(&"--die-with-parent".into()));
        assert!(
            pos(&h) < pos(&claude_dir),
            "HOME is hidden before .claude is bound back"
        );
        assert!(
            home.path().join(".claude").is_dir(),
            "the state dir is created so it can be bound"
        );
        assert_eq!(&a[a.len() - 3..], ["--", "claude", "-p"]);
    }

    #[test]
    fn a_home_inside_the_workdir_is_still_hidden() {
        let work = tempfile::tempdir().unwrap();
        let home = work.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let w = wrap(
            &SandboxOptions::default(),
            Target {
                agent: Agent::Exec,
                program: "true".into(),
                args: vec![],
                workdir: work.path(),
                home: &home,
                env: &[],
                name: "r",
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
                agent: Agent::Pi,
                program: link.clone().into(),
                args: vec![],
                workdir: &work,
                home: home.path(),
                env: &env,
                name: "r",
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
                agent: Agent::Exec,
                program: "true".into(),
                args: vec![],
                workdir: home.path(),
                home: home.path(),
                env: &[],
                name: "r",
            },
        )
        .unwrap_err();
        assert!(matches!(e, SandboxError::WorkdirIsHome(_)));
    }
}
