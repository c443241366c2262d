//! A run's resource limits (`--memory`, `--pids`, `--cpus`): whether this
//! machine can enforce them, what the report says about them, and how the
//! reason tells a run that died at one.
//!
//! On the host and under bwrap every process of the run is a descendant
//! of its shim and sits in the run's cgroups, where `warden_process`
//! writes the limits (cgroup v2 where the controller is enabled, v1
//! where not). In a container the processes are the engine's, so the
//! engine gets the limits as its own flags, and what happened at them is
//! read from the cgroups the engine made, while the container lives
//! ([`watch`]). A limit nothing here can enforce is refused before the
//! run starts: no rlimit is the same thing (see
//! `warden_process::resources`).

mod watch;
pub(crate) use watch::ContainerWatch;

use warden_process::os::limits::{LimitError, Mounts};
use warden_process::resources::{Applied, Controller, ResourceEvents, format_bytes};
use warden_process::{ContainmentChoice, ResourceLimits};
use warden_sandbox::Sandbox;
use warden_sandbox::container::ContainerLimits;

use crate::report::{EnforcedLimit, ResourcesReport};
use crate::verdict::Verdict;

/// Whether `limits` can be enforced for a run in `sandbox` with
/// `containment` on this machine; names the limit and what is missing if
/// not. Reads /proc and the cgroup file systems; for a container, asks
/// the engine (`info`), which may take a few seconds.
pub(crate) fn check(
    limits: &ResourceLimits,
    sandbox: Sandbox,
    containment: ContainmentChoice,
) -> Result<(), LimitError> {
    if !limits.any() {
        return Ok(());
    }
    if in_container(sandbox) {
        return match engine_info(sandbox) {
            Some(info) => engine_refuses(limits, sandbox, &info),
            // No engine to ask (or no answer): the engine's own start
            // fails or enforces; run.json's `enforced` does not vouch.
            None => Ok(()),
        };
    }
    Mounts::of_this_process()
        .check(limits, containment != ContainmentChoice::Subreaper)
        .map(|_| ())
}

/// The engine's own account of this host (`docker info --format
/// '{{json .}}'`, `podman info --format json`), within a few seconds; `None`
/// when it cannot be had. An answer is kept for the rest of the process:
/// a request is checked when it is read and again when its run starts,
/// and each asking costs a tenth of a second.
fn engine_info(sandbox: Sandbox) -> Option<serde_json::Value> {
    static ANSWERS: std::sync::Mutex<Vec<(Sandbox, serde_json::Value)>> =
        std::sync::Mutex::new(Vec::new());
    let known = |answers: &[(Sandbox, serde_json::Value)]| {
        answers
            .iter()
            .find(|(s, _)| *s == sandbox)
            .map(|(_, v)| v.clone())
    };
    if let Some(v) = known(&ANSWERS.lock().unwrap_or_else(|e| e.into_inner())) {
        return Some(v);
    }
    let info = ask_engine(sandbox)?;
    let mut answers = ANSWERS.lock().unwrap_or_else(|e| e.into_inner());
    if known(&answers).is_none() {
        answers.push((sandbox, info.clone()));
    }
    Some(info)
}

fn ask_engine(sandbox: Sandbox) -> Option<serde_json::Value> {
    let format = match sandbox {
        Sandbox::Docker => "{{json .}}",
        _ => "json",
    };
    let out = watch::engine_output(
        sandbox.name(),
        &["info", "--format", format],
        std::time::Duration::from_secs(10),
    )?;
    serde_json::from_str(&out).ok()
}

/// Refuses a limit the engine says it cannot enforce: it would drop it
/// with no more than a warning of its own (docker), or ignore it (rootless
/// podman on cgroup v1), and the run would go unlimited. What `info` does
/// not say is not held against the engine.
fn engine_refuses(
    limits: &ResourceLimits,
    sandbox: Sandbox,
    info: &serde_json::Value,
) -> Result<(), LimitError> {
    let engine = sandbox.name();
    let refuse = |c: Controller, why: String| LimitError::Unavailable {
        limit: limits.describe(c),
        why,
    };
    for c in limits.controllers() {
        if sandbox == Sandbox::Docker {
            // Swap off needs SwapLimit too (`--memory-swap`).
            let keys: &[&str] = match c {
                Controller::Memory => &["MemoryLimit", "SwapLimit"],
                Controller::Pids => &["PidsLimit"],
                Controller::Cpu => &["CpuCfsQuota"],
            };
            for key in keys {
                if info.get(key).and_then(serde_json::Value::as_bool) == Some(false) {
                    return Err(refuse(
                        c,
                        format!("`docker info` says {key}: false, so docker would not enforce it"),
                    ));
                }
            }
        } else {
            let host = &info["host"];
            let v1 = host["cgroupVersion"].as_str() == Some("v1");
            let rootless = host["security"]["rootless"].as_bool() == Some(true);
            if v1 && rootless {
                return Err(refuse(
                    c,
                    format!("rootless {engine} on cgroup v1 ignores resource limits"),
                ));
            }
            if let Some(have) = host["cgroupControllers"].as_array() {
                let name = c.name();
                if !have.iter().any(|n| n.as_str() == Some(name)) {
                    return Err(refuse(
                        c,
                        format!(
                            "`{engine} info` lists no `{name}` among its cgroup controllers, \
                             so {engine} would not enforce it"
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

fn in_container(sandbox: Sandbox) -> bool {
    matches!(sandbox, Sandbox::Docker | Sandbox::Podman)
}

/// The limits warden's own cgroups take for a run in `sandbox`: none in a
/// container (the engine enforces them).
pub(crate) fn for_cgroups(limits: &ResourceLimits, sandbox: Sandbox) -> ResourceLimits {
    if in_container(sandbox) {
        ResourceLimits::default()
    } else {
        *limits
    }
}

/// The limits as the container engine takes them.
pub(crate) fn for_container(limits: &ResourceLimits) -> ContainerLimits {
    ContainerLimits {
        memory: limits.memory,
        pids: limits.pids,
        cpu_millis: limits.cpus.map(|c| c.millis()),
    }
}

/// The report's `resources`: `None` when no limit was asked for.
pub(crate) fn report(
    limits: &ResourceLimits,
    sandbox: Sandbox,
    applied: &[Applied],
) -> Option<ResourcesReport> {
    if !limits.any() {
        return None;
    }
    let enforced = if in_container(sandbox) {
        limits
            .controllers()
            .into_iter()
            .map(|c| EnforcedLimit {
                controller: c.name().into(),
                by: sandbox.name().into(),
                cgroup: None,
                swap: (c == Controller::Memory).then(|| "engine".into()),
            })
            .collect()
    } else {
        applied
            .iter()
            .map(|a| EnforcedLimit {
                controller: a.controller.name().into(),
                by: a.hierarchy.as_str().into(),
                cgroup: Some(a.dir.clone()),
                swap: a.swap.map(Into::into),
            })
            .collect()
    };
    // In a container a limit's count is not known until its cgroup is
    // read; without the limit there is nothing to count, as on the host.
    let unknown = |asked: bool| (!(asked && in_container(sandbox))).then_some(0);
    Some(ResourcesReport {
        memory_bytes: limits.memory,
        pids: limits.pids,
        cpus: limits.cpus.map(|c| c.as_f64()),
        enforced,
        oom_kills: unknown(limits.memory.is_some()),
        oom_kills_at_limit: unknown(limits.memory.is_some()),
        pids_limit_hits: unknown(limits.pids.is_some()),
    })
}

/// The name of the run's container (in a container sandbox), which its
/// engine's `inspect` and `rm` take.
pub(crate) fn container_name(run_id: &str) -> String {
    format!("warden-{run_id}")
}

/// Starts counting what happens at a container's limits (`None`: not a
/// container, or no memory or process limit, so nothing to count).
pub(crate) fn watch_container(
    limits: &ResourceLimits,
    sandbox: Sandbox,
    name: String,
) -> Option<ContainerWatch> {
    if !in_container(sandbox) {
        return None;
    }
    ContainerWatch::start(sandbox.name(), name, limits)
}

/// Each limit in force and what enforces it, for the `spawned` event:
/// `memory 32MiB by cgroup_v1`, `cpus 1.5 by docker`.
pub(crate) fn described(r: Option<&ResourcesReport>) -> Vec<String> {
    let Some(r) = r else { return Vec::new() };
    r.enforced
        .iter()
        .map(|e| {
            let value = match e.controller.as_str() {
                "memory" => r.memory_bytes.map(format_bytes),
                "pids" => r.pids.map(|p| p.to_string()),
                _ => r.cpus.map(|c| c.to_string()),
            };
            let name = if e.controller == "cpu" {
                "cpus"
            } else {
                e.controller.as_str()
            };
            format!("{name} {} by {}", value.unwrap_or_default(), e.by)
        })
        .collect()
}

/// Puts what the kernel did at the limits into the report's section.
pub(crate) fn count(report: &mut Option<ResourcesReport>, events: ResourceEvents) {
    if let Some(r) = report {
        r.oom_kills = Some(events.oom_kills);
        r.oom_kills_at_limit = Some(events.oom_at_limit.min(events.oom_kills));
        r.pids_limit_hits = Some(events.pids_max);
    }
}

/// Puts what was counted at a container's limits into the report's
/// section: a limit's count stays `null` if its cgroup was never read.
pub(crate) fn count_container(report: &mut Option<ResourcesReport>, counted: watch::Counted) {
    let Some(r) = report else { return };
    if r.memory_bytes.is_some() {
        r.oom_kills = counted.memory.map(|(kills, _)| kills);
        r.oom_kills_at_limit = counted.memory.map(|(kills, at)| at.min(kills));
    }
    if r.pids.is_some() {
        r.pids_limit_hits = counted.pids;
    }
}

/// The reason of a run that ended with `verdict`, telling what happened
/// at its limits: a failed run whose process the OOM killer killed says
/// first that the memory limit was reached; a run that did not succeed
/// says when forks were refused at the process limit.
pub(crate) fn explain(verdict: Verdict, reason: String, r: Option<&ResourcesReport>) -> String {
    let Some(r) = r else { return reason };
    if verdict == Verdict::Succeeded {
        return reason;
    }
    let mut reason = reason;
    let oom_kills = r.oom_kills.unwrap_or(0);
    if oom_kills > 0 {
        let limit = r.memory_bytes.map(format_bytes).unwrap_or_default();
        let killed = match oom_kills {
            1 => "a process".to_string(),
            n => format!("{n} processes"),
        };
        // The limit is named only when its own counter moved: the kills
        // also count an OOM against a parent cgroup's limit or the
        // machine's memory, which is not the run's limit at all.
        let oom = if r.oom_kills_at_limit.is_some_and(|n| n > 0) {
            format!(
                "the memory limit (--memory {limit}) was reached: the kernel's OOM killer \
                 killed {killed} of the run"
            )
        } else {
            format!(
                "the kernel's OOM killer killed {killed} of the run (an OOM outside the run's \
                 memory limit: a parent cgroup's limit or the machine's memory)"
            )
        };
        reason = if verdict == Verdict::AgentFailed {
            format!("{oom}; {reason}")
        } else {
            format!("{reason}; {oom}")
        };
    }
    let pids_limit_hits = r.pids_limit_hits.unwrap_or(0);
    if pids_limit_hits > 0 {
        let limit = r.pids.map(|p| p.to_string()).unwrap_or_default();
        let times = match pids_limit_hits {
            1 => "once".to_string(),
            n => format!("{n} times"),
        };
        reason.push_str(&format!(
            "; the process limit (--pids {limit}) was reached: a fork was refused {times}"
        ));
    }
    reason
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(oom_kills: u64, pids_limit_hits: u64) -> ResourcesReport {
        ResourcesReport {
            memory_bytes: Some(32 << 20),
            pids: Some(20),
            cpus: None,
            enforced: Vec::new(),
            oom_kills: Some(oom_kills),
            oom_kills_at_limit: Some(oom_kills),
            pids_limit_hits: Some(pids_limit_hits),
        }
    }

    #[test]
    fn an_oom_kill_leads_the_reason_of_a_failed_run() {
        let why = explain(
            Verdict::AgentFailed,
            "killed by signal 9 (SIGKILL), not sent by warden".into(),
            Some(&section(1, 0)),
        );
        assert_eq!(
            why,
            "the memory limit (--memory 32MiB) was reached: the kernel's OOM killer killed a \
             process of the run; killed by signal 9 (SIGKILL), not sent by warden"
        );
        let why = explain(Verdict::Stalled, "no activity".into(), Some(&section(2, 3)));
        assert!(why.starts_with("no activity; the memory limit"), "{why}");
        assert!(why.contains("killed 2 processes"), "{why}");
        assert!(
            why.ends_with("(--pids 20) was reached: a fork was refused 3 times"),
            "{why}"
        );
    }

    #[test]
    fn an_oom_that_was_not_at_the_runs_limit_does_not_name_it() {
        let r = ResourcesReport {
            oom_kills_at_limit: Some(0),
            ..section(1, 0)
        };
        let why = explain(
            Verdict::AgentFailed,
            "exited with code 137".into(),
            Some(&r),
        );
        assert!(!why.contains("--memory"), "{why}");
        assert!(
            why.starts_with("the kernel's OOM killer killed a process of the run (an OOM outside"),
            "{why}"
        );
    }

    #[test]
    fn a_limit_the_engine_says_it_cannot_enforce_is_refused() {
        let all = ResourceLimits {
            memory: Some(1 << 30),
            pids: Some(64),
            cpus: warden_process::resources::Cpus::parse("1"),
        };
        let docker: serde_json::Value = serde_json::from_str(
            r#"{"MemoryLimit":true,"SwapLimit":false,"PidsLimit":true,"CpuCfsQuota":true,"CgroupVersion":"1"}"#,
        )
        .unwrap();
        let e = engine_refuses(&all, Sandbox::Docker, &docker)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--memory") && e.contains("SwapLimit: false"),
            "{e}"
        );
        let pids_only = ResourceLimits {
            pids: Some(64),
            ..ResourceLimits::default()
        };
        assert!(engine_refuses(&pids_only, Sandbox::Docker, &docker).is_ok());
        // Keys it does not give are not held against it.
        assert!(engine_refuses(&all, Sandbox::Docker, &serde_json::json!({})).is_ok());

        let rootless_v1 = serde_json::json!({"host": {"cgroupVersion": "v1",
            "security": {"rootless": true}}});
        let e = engine_refuses(&pids_only, Sandbox::Podman, &rootless_v1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("rootless podman on cgroup v1"), "{e}");
        let v2 = serde_json::json!({"host": {"cgroupVersion": "v2",
            "security": {"rootless": true}, "cgroupControllers": ["cpu", "pids"]}});
        assert!(engine_refuses(&pids_only, Sandbox::Podman, &v2).is_ok());
        let e = engine_refuses(&all, Sandbox::Podman, &v2)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no `memory`"), "{e}");
    }

    #[test]
    fn a_successful_run_or_one_without_limits_keeps_its_reason() {
        let ok = explain(
            Verdict::Succeeded,
            "exited with code 0".into(),
            Some(&section(1, 1)),
        );
        assert_eq!(ok, "exited with code 0");
        let none = explain(Verdict::AgentFailed, "exited with code 1".into(), None);
        assert_eq!(none, "exited with code 1");
    }

    #[test]
    fn a_container_s_limits_are_the_engine_s() {
        let limits = ResourceLimits {
            memory: Some(1 << 30),
            ..ResourceLimits::default()
        };
        assert!(!for_cgroups(&limits, Sandbox::Podman).any());
        assert_eq!(for_cgroups(&limits, Sandbox::Bwrap), limits);
        let r = report(&limits, Sandbox::Docker, &[]).unwrap();
        assert_eq!(r.enforced.len(), 1);
        assert_eq!(r.enforced[0].by, "docker");
        assert_eq!(r.enforced[0].swap.as_deref(), Some("engine"));
        // Not known until the container's cgroup is read.
        assert_eq!(r.oom_kills, None);
        assert_eq!(r.pids_limit_hits, Some(0), "no --pids, nothing to count");
        let mut counted = Some(r.clone());
        count_container(&mut counted, watch::Counted::default());
        assert_eq!(counted.as_ref().unwrap().oom_kills, None, "never read");
        count_container(
            &mut counted,
            watch::Counted {
                memory: Some((2, 1)),
                pids: Some(5),
            },
        );
        let c = counted.unwrap();
        assert_eq!(
            (c.oom_kills, c.oom_kills_at_limit, c.pids_limit_hits),
            (Some(2), Some(1), Some(0)),
            "a limit not asked for counts nothing"
        );
        let host = report(&limits, Sandbox::Host, &[]).unwrap();
        assert_eq!(host.oom_kills, Some(0));
        assert!(report(&ResourceLimits::default(), Sandbox::Host, &[]).is_none());
        assert_eq!(described(Some(&r)), ["memory 1GiB by docker"]);
        assert!(described(None).is_empty());
        // Nothing to check for the engine's limits on this machine.
        assert!(check(&limits, Sandbox::Docker, ContainmentChoice::Subreaper).is_ok());
    }
}
