//! `--memory`, `--pids` and `--cpus` in a container, against the real
//! engines: each enforced by the engine, and what happened at them counted
//! in the report as on the host. Skipped as `containers.rs` is, without `WARDEN_CI_IMAGE`.

use crate::containers::{ENGINES, contained, image, leftover};
use crate::support::Case;

/// The `spawned` event's limits.
fn spawned_limits(done: &crate::support::Finished) -> Vec<String> {
    let spawned = done.events_of("spawned");
    spawned[0]["limits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_container_past_its_memory_limit_is_oom_killed_and_the_reason_names_the_limit() {
    let Some(image) = image() else { return };
    for engine in ENGINES {
        let case = Case::new();
        // The string doubles until the kernel kills the shell at 32 MiB.
        // It waits first: warden finds the container's cgroup within a
        // second of its start (the engine's `inspect`, asked until the
        // container runs); a container OOM-killed before that is counted
        // as not known.
        let done = contained(
            &case,
            engine,
            &image,
            &["--memory", "32MiB"],
            "echo ready; sleep 2; x=a; while :; do x=$x$x; done",
        );
        let report = done.report();
        assert_eq!(report["verdict"], "agent_failed", "{engine}: {report:#}");
        let reason = report["reason"].as_str().unwrap();
        assert!(
            reason.starts_with(
                "the memory limit (--memory 32MiB) was reached: the kernel's OOM killer killed"
            ),
            "{engine}: {reason}"
        );
        let r = &report["resources"];
        assert!(r["oom_kills"].as_u64().unwrap() >= 1, "{engine}: {r:#}");
        assert!(
            r["oom_kills_at_limit"].as_u64().unwrap() >= 1,
            "{engine}: {r:#}"
        );
        assert_eq!(r["pids_limit_hits"], 0, "{engine}: no --pids");
        assert_eq!(report["oom_killed"], true, "{engine}");
        assert_eq!(spawned_limits(&done), [format!("memory 32MiB by {engine}")]);
        assert_eq!(
            leftover(engine, &done),
            None,
            "{engine}: the container stayed"
        );
    }
}

#[test]
fn forks_refused_at_a_container_s_process_limit_are_counted() {
    let Some(image) = image() else { return };
    for engine in ENGINES {
        let case = Case::new();
        // Fork bombs, started again by xargs as each collapses (dash exits
        // when a fork fails; xargs waits and tries again), for two
        // seconds: `timeout` ends its whole process group. The shell then
        // fails.
        let done = contained(
            &case,
            engine,
            &image,
            &["--pids", "8"],
            "yes | timeout 2 xargs -P 64 -n 1 sh -c 'f() { f & f; }; f' 2>/dev/null; exit 1",
        );
        let report = done.report();
        assert_eq!(report["verdict"], "agent_failed", "{engine}: {report:#}");
        let r = &report["resources"];
        assert!(
            r["pids_limit_hits"].as_u64().unwrap() > 0,
            "{engine}: {r:#}"
        );
        assert_eq!(r["oom_kills"], 0, "{engine}: no --memory");
        assert_eq!(report["pids_limit_hit"], true, "{engine}");
        let reason = report["reason"].as_str().unwrap();
        assert!(
            reason.contains("the process limit (--pids 8) was reached: a fork was refused"),
            "{engine}: {reason}"
        );
        assert_eq!(spawned_limits(&done), [format!("pids 8 by {engine}")]);
        assert_eq!(
            leftover(engine, &done),
            None,
            "{engine}: the container stayed"
        );
    }
}

#[test]
fn a_container_s_cpu_quota_is_what_was_asked() {
    let Some(image) = image() else { return };
    for engine in ENGINES {
        let case = Case::new();
        // cgroup v1's quota and period, or v2's `cpu.max` (both in one).
        let done = contained(
            &case,
            engine,
            &image,
            &["--cpus", "0.5"],
            "if [ -e /sys/fs/cgroup/cpu.max ]; then cat /sys/fs/cgroup/cpu.max; \
             else echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) \
             $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us); fi",
        );
        let report = done.report();
        assert_eq!(report["verdict"], "succeeded", "{engine}: {report:#}");
        let out = String::from_utf8(done.log("stdout.log")).unwrap();
        let nums: Vec<f64> = out.split_whitespace().map(|n| n.parse().unwrap()).collect();
        assert_eq!(nums.len(), 2, "{engine}: {out:?}");
        assert!(
            (nums[0] / nums[1] - 0.5).abs() < 1e-9,
            "{engine}: the quota is {out:?}"
        );
        let r = &report["resources"];
        assert_eq!(r["cpus"], 0.5, "{engine}");
        assert_eq!(r["enforced"][0]["by"], engine);
        // Nothing to count without a memory or process limit.
        assert_eq!(
            (&r["oom_kills"], &r["pids_limit_hits"]),
            (&0.into(), &0.into())
        );
        assert_eq!(spawned_limits(&done), [format!("cpus 0.5 by {engine}")]);
    }
}
