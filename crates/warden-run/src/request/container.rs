//! The settings only a container has (its network, the engine's own
//! arguments): refused for any other sandbox, where they would mean
//! nothing, and checked against each other.

use warden_sandbox::SandboxOptions;

use super::{RequestError, invalid};

/// Checks the container-only settings of `options`.
pub(super) fn check(options: &SandboxOptions) -> Result<(), RequestError> {
    let given: [(&'static str, bool); 2] = [
        (
            "sandbox.container_network",
            options.container_network.is_some(),
        ),
        ("sandbox.engine_args", !options.engine_args.is_empty()),
    ];
    if !options.is_container()
        && let Some((field, _)) = given.iter().find(|(_, given)| *given)
    {
        return Err(invalid(
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
            return Err(invalid(
                format!(
                    "{{0}} `{network}` is not a network: name `host`, `none`, `bridge`, or a network the engine has"
                ),
                &["sandbox.container_network"],
            ));
        }
        if options.no_network && network != "none" {
            return Err(invalid(
                format!(
                    "{{0}} cuts the network, and {{1}} {network} would give the container one: drop one of them"
                ),
                &["sandbox.no_network", "sandbox.container_network"],
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use warden_sandbox::Sandbox;

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
            let e = check(&o).unwrap_err().to_string();
            assert_eq!(
                e,
                format!(
                    "sandbox.engine_args is for a container: set sandbox.sandbox to docker or podman (it is {sandbox})"
                )
            );
            let mut o = options(sandbox);
            o.container_network = Some("host".into());
            assert!(
                check(&o)
                    .unwrap_err()
                    .to_string()
                    .starts_with("sandbox.container_network is for a container")
            );
        }
        for sandbox in [Sandbox::Docker, Sandbox::Podman] {
            let mut o = options(sandbox);
            o.container_network = Some("host".into());
            o.engine_args = vec!["--cap-add".into(), "SYS_PTRACE".into()];
            check(&o).unwrap();
        }
    }

    #[test]
    fn no_network_conflicts_with_any_network_but_none() {
        let mut o = options(Sandbox::Docker);
        o.no_network = true;
        o.container_network = Some("none".into());
        check(&o).unwrap();
        o.container_network = Some("host".into());
        let e = check(&o).unwrap_err();
        assert_eq!(
            e.to_string(),
            "sandbox.no_network cuts the network, and sandbox.container_network host would give the container one: drop one of them"
        );
        for bad in ["", "-x", "my net"] {
            o.no_network = false;
            o.container_network = Some(bad.into());
            assert!(
                check(&o)
                    .unwrap_err()
                    .to_string()
                    .contains("is not a network"),
                "{bad:?}"
            );
        }
    }
}
