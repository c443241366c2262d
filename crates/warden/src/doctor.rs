//! `warden doctor`: what this machine can do, and what `auto` would pick.

use std::time::Duration;

use serde::Serialize;
use warden_events::Agent;
use warden_process::os::cgroup::Cgroup;
use warden_run::{Run, RunRequest, Verdict};
use warden_sandbox::probe;

use crate::args::DoctorArgs;
use crate::error::{CliError, Kind, Outcome};

/// One thing doctor checked: whether it is there, and what it found (a
/// path and version, or why not).
#[derive(Serialize)]
struct Check {
    ok: bool,
    detail: String,
}

impl Check {
    fn of(r: Result<String, String>) -> Self {
        match r {
            Ok(detail) => Self { ok: true, detail },
            Err(detail) => Self { ok: false, detail },
        }
    }
}

/// Everything doctor found.
struct Findings {
    schema_version: u32,
    version: &'static str,
    /// By agent name: its CLI's path and version, or how to install it.
    agents: Vec<(&'static str, Check)>,
    subreaper: bool,
    cgroup_v2: Check,
    user_namespaces: Check,
    bwrap: Check,
    docker: Check,
    podman: Check,
    /// What `--containment auto` and `--sandbox auto` pick here.
    auto_containment: &'static str,
    auto_sandbox: &'static str,
    /// Whether one supervised `true` succeeded, through the shim.
    supervised_run_works: bool,
    /// What a sandbox hides of the host's daemons: the directories it
    /// empties and every other unix socket bound on this host, which it
    /// covers (unless `--allow-socket` names one).
    daemon_dirs: Vec<std::path::PathBuf>,
    host_sockets: Vec<std::path::PathBuf>,
    /// By controller (`memory`, `pids`, `cpu`): where `--memory`,
    /// `--pids` and `--cpus` would be enforced here, or why they cannot.
    limits: Vec<(&'static str, Check)>,
}

pub(crate) async fn doctor(args: &DoctorArgs) -> Outcome {
    let f = find().await;
    let code = if f.supervised_run_works { 0 } else { 1 };
    if args.json {
        let mut doc = serde_json::json!({
            "schema_version": f.schema_version,
            "version": f.version,
            "agents": serde_json::Map::new(),
            "containment": {
                "subreaper": f.subreaper,
                "cgroup_v2": f.cgroup_v2,
                "user_namespaces": f.user_namespaces,
            },
            "sandboxes": {
                "host": Check { ok: true, detail: String::new() },
                "bwrap": f.bwrap,
                "docker": f.docker,
                "podman": f.podman,
            },
            "auto": { "containment": f.auto_containment, "sandbox": f.auto_sandbox },
            "supervised_run_works": f.supervised_run_works,
            "limits": serde_json::Map::new(),
            "sandbox_hides": {
                "daemon_dirs": f.daemon_dirs,
                "sockets": f.host_sockets,
            },
        });
        for (name, check) in &f.agents {
            doc["agents"][*name] = serde_json::json!(check);
        }
        for (name, check) in &f.limits {
            doc["limits"][*name] = serde_json::json!(check);
        }
        match serde_json::to_vec(&doc) {
            Ok(mut line) => {
                line.push(b'\n');
                crate::render::console::raw(
                    crate::render::console::Stream::Stdout,
                    crate::render::console::Priority::Important,
                    crate::render::github::json_line(line),
                );
            }
            Err(e) => {
                return Err(CliError::new(
                    Kind::Internal,
                    format_args!("could not write doctor's findings as JSON: {e}"),
                ));
            }
        }
        return Ok(code);
    }
    let row = |name: &str, state: &str| println!("  {name:<16} {state}");
    let said = |c: &Check, yes: &str| {
        if c.ok {
            if yes.is_empty() {
                c.detail.clone()
            } else {
                format!("{yes} ({})", c.detail)
            }
        } else {
            c.detail.clone()
        }
    };
    println!("warden {}", f.version);
    println!("agents:");
    for (name, check) in &f.agents {
        row(name, &check.detail);
    }
    println!("containment:");
    row("subreaper", if f.subreaper { "yes" } else { "no" });
    row("cgroup v2", &said(&f.cgroup_v2, ""));
    row("user namespaces", &said(&f.user_namespaces, ""));
    println!("sandboxes:");
    row("host", "yes");
    row("bwrap", &said(&f.bwrap, "usable"));
    row("docker", &said(&f.docker, "usable"));
    row("podman", &said(&f.podman, "usable"));
    println!("limits (on the host and under bwrap; a container's engine enforces its own):");
    for (name, check) in &f.limits {
        row(name, &check.detail);
    }
    println!("a sandbox hides these host daemons' sockets (--allow-socket PATH lets one through):");
    for dir in &f.daemon_dirs {
        row("emptied", &dir.display().to_string());
    }
    for socket in &f.host_sockets {
        row("socket", &socket.display().to_string());
    }
    if f.daemon_dirs.is_empty() && f.host_sockets.is_empty() {
        row("none", "no unix socket is bound to a path here");
    }
    println!("auto picks:");
    row("containment", f.auto_containment);
    row("sandbox", f.auto_sandbox);
    row(
        "a supervised run",
        if f.supervised_run_works {
            "works"
        } else {
            "FAILED"
        },
    );
    Ok(code)
}

async fn find() -> Findings {
    let path = std::env::var_os("PATH");
    let mut agents = Vec::new();
    for agent in Agent::ALL.into_iter().filter(|a| *a != Agent::Exec) {
        let (bin, product, install) = warden_agents::install_info(agent);
        let check = match warden_agents::find_on_path(bin, path.as_ref()) {
            Some(p) => {
                let version = probe::run(
                    &p.to_string_lossy(),
                    &["--version"],
                    Duration::from_secs(20),
                )
                .map(|v| v.lines().last().unwrap_or("").trim().to_string())
                .unwrap_or_else(|e| format!("version unknown: {e}"));
                Check {
                    ok: true,
                    detail: format!("{} ({product} {version})", p.display()),
                }
            }
            None => Check {
                ok: false,
                detail: format!("not found: {install}"),
            },
        };
        agents.push((agent.name(), check));
    }

    let subreaper = warden_process::os::become_subreaper().is_ok();
    let cgroup = Cgroup::create(&format!("warden-doctor-{}", std::process::id()));
    let cgroup_v2 = Check::of(match &cgroup {
        Ok(cg) => {
            let at = cg
                .path()
                .parent()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            cg.remove();
            Ok(format!("writable under {at}"))
        }
        Err(e) => Err(format!("no: {e}")),
    });
    let limits = limit_places(cgroup.is_ok());
    let user_namespaces = Check::of(probe::user_namespaces().map(|()| "yes".to_string()));
    let bwrap = Check::of(probe::bwrap().map_err(|e| format!("no: {e}")));
    let engine = |name| Check::of(probe::engine(name).map_err(|e| format!("no: {e}")));
    let docker = engine("docker");
    let podman = engine("podman");

    // The real thing: one supervised `true`, through the shim.
    let dir = std::env::temp_dir().join(format!("warden-doctor-{}", std::process::id()));
    let mut request = RunRequest::exec(["true"]);
    request.dir = Some(dir.clone());
    request.shim_exe = crate::shim_exe::path();
    let works = match Run::new(request).start().await {
        Ok(run) => run.wait().await.verdict == Verdict::Succeeded,
        Err(_) => false,
    };
    let _ = std::fs::remove_dir_all(&dir);

    let daemon_dirs = warden_sandbox::bwrap::daemon_dirs();
    let host_sockets: Vec<std::path::PathBuf> = warden_sandbox::sockets::host_unix_sockets()
        .into_iter()
        .collect();

    Findings {
        schema_version: 1,
        version: env!("CARGO_PKG_VERSION"),
        agents,
        subreaper,
        auto_containment: if cgroup.is_ok() {
            "cgroup"
        } else {
            "subreaper"
        },
        cgroup_v2,
        user_namespaces,
        auto_sandbox: if bwrap.ok { "bwrap" } else { "host" },
        bwrap,
        docker,
        podman,
        supervised_run_works: works,
        limits,
        daemon_dirs,
        host_sockets,
    }
}

/// Where each resource limit would be enforced for a run here: the
/// cgroup v2 controller, a cgroup v1 hierarchy, or nowhere (and why).
fn limit_places(v2_run_cgroup: bool) -> Vec<(&'static str, Check)> {
    use warden_process::Hierarchy;
    use warden_process::os::limits::Mounts;
    let mounts = Mounts::of_this_process();
    warden_process::Controller::ALL
        .into_iter()
        .map(|c| {
            let check = Check::of(match mounts.place(c, v2_run_cgroup) {
                Ok(Hierarchy::V2) => Ok(format!(
                    "{} enforced by cgroup v2 (under {})",
                    c.flag(),
                    mounts
                        .v2
                        .as_deref()
                        .unwrap_or(std::path::Path::new("?"))
                        .display()
                )),
                Ok(Hierarchy::V1) => Ok(format!(
                    "{} enforced by cgroup v1 (under {})",
                    c.flag(),
                    mounts
                        .v1_for(c)
                        .map(|h| h.own.display().to_string())
                        .unwrap_or_default()
                )),
                Err(why) => Err(format!("{} refused: {why}", c.flag())),
            });
            (c.name(), check)
        })
        .collect()
}
