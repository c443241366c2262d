//! `warden doctor`: what this machine can do, and what `auto` would pick.

use std::time::Duration;

use warden_events::Agent;
use warden_process::os::cgroup::Cgroup;
use warden_run::{Run, RunSpec, Verdict};
use warden_sandbox::probe;

fn row(name: &str, state: &str) {
    println!("  {name:<16} {state}");
}

pub(crate) async fn doctor() -> u8 {
    println!("warden {}", env!("CARGO_PKG_VERSION"));

    println!("agents:");
    let path = std::env::var_os("PATH");
    for agent in Agent::ALL.into_iter().filter(|a| *a != Agent::Exec) {
        let (bin, product, install) = warden_agents::install_info(agent);
        let state = match warden_agents::find_on_path(bin, path.as_ref()) {
            Some(p) => {
                let version = probe::run(
                    &p.to_string_lossy(),
                    &["--version"],
                    Duration::from_secs(20),
                )
                .map(|v| v.lines().last().unwrap_or("").trim().to_string())
                .unwrap_or_else(|e| format!("version unknown: {e}"));
                format!("{} ({product} {version})", p.display())
            }
            None => format!("not found: {install}"),
        };
        row(agent.name(), &state);
    }

    println!("containment:");
    let subreaper = warden_process::os::become_subreaper();
    row("subreaper", if subreaper.is_ok() { "yes" } else { "no" });
    let cgroup = Cgroup::create(&format!("warden-doctor-{}", std::process::id()));
    let cgroup_state = match &cgroup {
        Ok(cg) => {
            let at = cg
                .path()
                .parent()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            cg.remove();
            format!("writable under {at}")
        }
        Err(e) => format!("no: {e}"),
    };
    row("cgroup v2", &cgroup_state);
    row(
        "user namespaces",
        &match probe::user_namespaces() {
            Ok(()) => "yes".to_string(),
            Err(e) => e,
        },
    );

    println!("sandboxes:");
    row("host", "yes");
    let bwrap = probe::bwrap();
    row(
        "bwrap",
        &match &bwrap {
            Ok(v) => format!("usable ({v})"),
            Err(e) => format!("no: {e}"),
        },
    );
    for engine in ["docker", "podman"] {
        row(
            engine,
            &match probe::engine(engine) {
                Ok(v) => format!("usable ({v})"),
                Err(e) => format!("no: {e}"),
            },
        );
    }

    // The real thing: one supervised `true`, through the shim.
    let dir = std::env::temp_dir().join(format!("warden-doctor-{}", std::process::id()));
    let mut spec = RunSpec::exec(["true"]);
    spec.run_dir = Some(dir.clone());
    spec.shim_exe = crate::shim_exe::path();
    let works = match Run::new(spec).spawn().await {
        Ok(mut run) => {
            while run.next_event().await.is_some() {}
            let report = run.wait().await;
            report.verdict == Some(Verdict::Succeeded)
        }
        Err(_) => false,
    };
    let _ = std::fs::remove_dir_all(&dir);

    println!("auto picks:");
    row(
        "containment",
        if cgroup.is_ok() {
            "cgroup"
        } else {
            "subreaper"
        },
    );
    row("sandbox", if bwrap.is_ok() { "bwrap" } else { "host" });
    row("a supervised run", if works { "works" } else { "FAILED" });
    if works { 0 } else { 1 }
}
