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
