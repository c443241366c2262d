//! Docker and Podman: `run --rm -i --init`, the work directory mounted at
//! the same path, the image from `--image`, killed with `rm -f`.
//!
//! Secrets never appear on the container's command line: each variable is
//! passed as `-e NAME` (no value), which makes the client read the value
//! from its own environment, where warden put it.

use std::ffi::OsString;

use crate::{Sandbox, SandboxError, SandboxOptions, Target, Wrapped};

pub fn wrap(options: &SandboxOptions, t: Target<'_>) -> Result<Wrapped, SandboxError> {
    let engine = match options.sandbox {
        Sandbox::Podman => "podman",
        _ => "docker",
    };
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
    if options.no_network {
        a.push("--network".into());
        a.push("none".into());
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
    a.push("-v".into());
    a.push(mount(t.workdir, false));
    for p in &options.ro {
        a.push("-v".into());
        a.push(mount(p, true));
    }
    for p in &options.rw {
        a.push("-v".into());
        a.push(mount(p, false));
    }
    // A credentials file the provider set-up names (a service account
    // key), read-only at the same path, so the variable still points at it.
    for var in t.needs.file_vars {
        let file = t
            .env
            .iter()
            .rev()
            .find(|(k, _)| k == var)
            .map(|(_, v)| std::path::PathBuf::from(v))
            .filter(|p| p.is_absolute() && p.is_file());
        if let Some(file) = file {
            a.push("-v".into());
            a.push(mount(&file, true));
        }
    }
    a.push("-w".into());
    a.push(t.workdir.into());
    for (k, _) in t.env {
        // The host's PATH and HOME mean nothing inside the image.
        if k == "PATH" || k == "HOME" {
            continue;
        }
        a.push("-e".into());
        a.push(k.clone());
    }
    a.push(image.into());
    a.push(t.program);
    a.extend(t.args);
    Ok(Wrapped {
        program: engine.into(),
        args: a,
        containment: Some("container"),
        on_kill: Some(vec![engine.into(), "rm".into(), "-f".into(), t.name.into()]),
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use warden_events::Agent;

    fn target<'a>(env: &'a [(OsString, OsString)]) -> Target<'a> {
        Target {
            needs: crate::needs(Agent::Claude),
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
        let w = wrap(&opts, target(&env)).unwrap();
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
    fn an_image_is_required() {
        let options = SandboxOptions {
            sandbox: Sandbox::Docker,
            ..SandboxOptions::default()
        };
        let e = wrap(&options, target(&[])).unwrap_err();
        assert!(e.to_string().contains("--image"), "{e}");
    }
}
