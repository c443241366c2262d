//! The settings only a container has (its network, user, devices and
//! groups, the engine's own arguments): refused for any other sandbox,
//! where they would mean nothing, and checked against each other.

use std::path::{Path, PathBuf};

use warden_events::Agent;
use warden_sandbox::{SandboxNeeds, SandboxOptions};

/// What the check found: a message whose `{0}`, `{1}`, … name `fields`,
/// made a finding of the request by the caller.
#[derive(Debug)]
pub(super) struct Said {
    pub message: String,
    pub fields: Vec<&'static str>,
}

fn said(message: impl Into<String>, fields: &[&'static str]) -> Said {
    Said {
        message: message.into(),
        fields: fields.to_vec(),
    }
}

/// Checks the container-only settings of `options` for `agent` (whose
/// CLI needs `needs`); warns of the agent's state directories the
/// container's user cannot have.
pub(super) fn check(
    options: &SandboxOptions,
    agent: Agent,
    needs: &SandboxNeeds,
    cwd: &Path,
) -> Result<Vec<Said>, Said> {
    let given: [(&'static str, bool); 5] = [
        (
            "sandbox.container_network",
            options.container_network.is_some(),
        ),
        ("sandbox.engine_args", !options.engine_args.is_empty()),
        ("sandbox.container_user", !options.container_user.is_auto()),
        ("sandbox.devices", !options.devices.is_empty()),
        ("sandbox.group_add", !options.group_add.is_empty()),
    ];
    if !options.is_container()
        && let Some((field, _)) = given.iter().find(|(_, given)| *given)
    {
        return Err(said(
            format!(
                "{{0}} is for a container: set {{1}} to docker or podman (it is {})",
                options.sandbox
            ),
            &[field, "sandbox.sandbox"],
        ));
    }
    if let Some(network) = &options.container_network {
        if network.is_empty()
            || network.starts_with('-')
            || network.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(said(
                format!(
                    "{{0}} `{network}` is not a network: name `host`, `none`, `bridge`, or a network the engine has"
                ),
                &["sandbox.container_network"],
            ));
        }
        if options.no_network && network != "none" {
            return Err(said(
                format!(
                    "{{0}} cuts the network, and {{1}} {network} would give the container one: drop one of them"
                ),
                &["sandbox.no_network", "sandbox.container_network"],
            ));
        }
    }
    if let Some(arg) = warden_owned_arg(&options.engine_args) {
        return Err(said(
            format!(
                "{{0}} `{arg}` would change what warden itself gives the engine's `run` (`--rm -i --init`, \
                 the container's name, its `warden.*` labels, its id file, signals passed in, no terminal), \
                 which the supervision rests on: a detached or kept container outlives its run, a renamed \
                 one is never removed; drop it (the settings {{1}}, {{2}} and {{3}} cover the user, the \
                 network and the image)"
            ),
            &[
                "sandbox.engine_args",
                "sandbox.container_user",
                "sandbox.container_network",
                "sandbox.image",
            ],
        ));
    }
    let mut warnings = Vec::new();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    if let Some(home) = home
        && let Some((uid, dirs)) =
            warden_sandbox::container::state_dirs_left_out(options, needs, cwd, &home)
    {
        let dirs: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        warnings.push(said(
            format!(
                "the container runs as uid {uid} ({{0}}), which does not own {}: not mounted, so {agent} starts without the login and sessions kept there; give them to uid {uid}, or set {{0}} to image",
                dirs.join(", ")
            ),
            &["sandbox.container_user"],
        ));
    }
    Ok(warnings)
}

/// The first of `args` that would override a flag warden gives `run`
/// itself. The engine takes the last of two values, and the user's
/// arguments come after warden's: `-d` would leave the container running
/// unsupervised, `--rm=false` would keep it, `--name` or `--cidfile`
/// would hide it from the run's end, a `warden.*` label would forge its
/// owner, `--sig-proxy=false` would keep SIGTERM from the agent, and a
/// terminal or a detached stream would change the output.
fn warden_owned_arg(args: &[String]) -> Option<&str> {
    const LONG: &[&str] = &[
        "--detach",
        "--rm",
        "--cidfile",
        "--name",
        "--sig-proxy",
        "--init",
        "--init-path",
        "--tty",
        "--interactive",
        "--attach",
        "--detach-keys",
    ];
    // Short flags that take no value may be run together (`-dit`).
    const SHORT: &[char] = &['d', 't', 'i', 'a'];
    let mut label_value_next = false;
    for arg in args {
        if std::mem::take(&mut label_value_next) && arg.starts_with("warden.") {
            return Some(arg);
        }
        let (name, value) = match arg.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (arg.as_str(), None),
        };
        if LONG.contains(&name) {
            return Some(arg);
        }
        if name == "--label" || name == "-l" {
            match value {
                Some(v) if v.starts_with("warden.") => return Some(arg),
                Some(_) => {}
                None => label_value_next = true,
            }
            continue;
        }
        if let Some(flags) = arg.strip_prefix('-')
            && !flags.starts_with('-')
            && let Some(first) = flags.chars().next()
        {
            let cluster = flags.chars().all(|c| c.is_ascii_alphabetic());
            if SHORT.contains(&first)
                || (cluster && flags.len() <= 4 && flags.chars().any(|c| SHORT.contains(&c)))
            {
                return Some(arg);
            }
            if first == 'l' && flags[1..].trim_start_matches('=').starts_with("warden.") {
                return Some(arg);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{Finding, RequestError, invalid, sandbox_needs};
    use warden_sandbox::Sandbox;

    /// The check as the request makes it.
    fn checked(o: &SandboxOptions) -> Result<Vec<Finding>, RequestError> {
        check(
            o,
            Agent::Exec,
            &sandbox_needs(Agent::Exec),
            Path::new("/nonexistent"),
        )
        .map(|found| {
            found
                .into_iter()
                .map(|s| Finding::new(s.message, &s.fields))
                .collect()
        })
        .map_err(|s| invalid(s.message, &s.fields))
    }

    fn options(sandbox: Sandbox) -> SandboxOptions {
        SandboxOptions {
            sandbox,
            image: Some("img".into()),
            ..SandboxOptions::default()
        }
    }

    #[test]
    fn container_settings_are_refused_outside_a_container() {
        for sandbox in [Sandbox::Host, Sandbox::Bwrap] {
            let mut o = options(sandbox);
            o.engine_args = vec!["--shm-size=1g".into()];
            let e = checked(&o).unwrap_err().to_string();
            assert_eq!(
                e,
                format!(
                    "sandbox.engine_args is for a container: set sandbox.sandbox to docker or podman (it is {sandbox})"
                )
            );
            let mut o = options(sandbox);
            o.container_network = Some("host".into());
            assert!(
                checked(&o)
                    .unwrap_err()
                    .to_string()
                    .starts_with("sandbox.container_network is for a container")
            );
        }
        for sandbox in [Sandbox::Docker, Sandbox::Podman] {
            let mut o = options(sandbox);
            o.container_network = Some("host".into());
            o.engine_args = vec!["--cap-add".into(), "SYS_PTRACE".into()];
            checked(&o).unwrap();
        }
    }

    #[test]
    fn engine_args_may_not_override_what_warden_gives_run() {
        let mut o = options(Sandbox::Docker);
        for bad in [
            &["-d"][..],
            &["--detach"],
            &["-dit"],
            &["--rm=false"],
            &["--cidfile=/tmp/x"],
            &["--name", "other"],
            &["--sig-proxy=false"],
            &["-t"],
            &["--label", "warden.owner=forged"],
            &["--label=warden.run=x"],
            &["-lwarden.run=x"],
        ] {
            o.engine_args = bad.iter().map(|s| s.to_string()).collect();
            let e = checked(&o).unwrap_err().to_string();
            assert!(
                e.starts_with("sandbox.engine_args `") && e.contains("outlives its run"),
                "{bad:?}: {e}"
            );
        }
        for good in [
            &["--shm-size=1g"][..],
            &["--cap-add", "SYS_PTRACE"],
            &["-v", "/data:/data"],
            &["-v/data:/data"],
            &["--label", "team=a"],
            &["-e", "FOO=1"],
            &["--ulimit", "nofile=1024"],
        ] {
            o.engine_args = good.iter().map(|s| s.to_string()).collect();
            assert!(checked(&o).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn no_network_conflicts_with_any_network_but_none() {
        let mut o = options(Sandbox::Docker);
        o.no_network = true;
        o.container_network = Some("none".into());
        checked(&o).unwrap();
        o.container_network = Some("host".into());
        let e = checked(&o).unwrap_err();
        assert_eq!(
            e.to_string(),
            "sandbox.no_network cuts the network, and sandbox.container_network host would give the container one: drop one of them"
        );
        for bad in ["", "-x", "my net"] {
            o.no_network = false;
            o.container_network = Some(bad.into());
            assert!(
                checked(&o)
                    .unwrap_err()
                    .to_string()
                    .contains("is not a network"),
                "{bad:?}"
            );
        }
    }
}
