//! Resource limits (`--memory`, `--pids`, `--cpus`) enforced through the
//! run's cgroups, with real processes that go past them: v2 controllers
//! where the host enables them, v1 hierarchies where it does not (the
//! hybrid hosts CI runs on). Root only: cgroups are root's to make here.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Case, bwrap_works, is_root};

fn skip_unless_root(what: &str) -> bool {
    if !is_root() {
        eprintln!("SKIPPED {what}: needs root to make cgroups");
        return true;
    }
    false
}

/// The `enforced` entry of `controller` in a report.
fn enforced<'a>(r: &'a Value, controller: &str) -> &'a Value {
    r["resources"]["enforced"]
        .as_array()
        .unwrap_or_else(|| panic!("no resources.enforced in {}", r["resources"]))
        .iter()
        .find(|e| e["controller"] == controller)
        .unwrap_or_else(|| panic!("no `{controller}` in {}", r["resources"]))
}

fn cgroup_of(r: &Value, controller: &str) -> PathBuf {
    PathBuf::from(
        enforced(r, controller)["cgroup"]
            .as_str()
            .expect("the limit's cgroup"),
    )
}

/// Waits for the first `run.json` (written when the run has started) to
/// name its limits.
fn started_report(case: &Case) -> Value {
    let path = case.run_dir().join("run.json");
    let until = Instant::now() + Duration::from_secs(20);
    while Instant::now() < until {
        if let Some(r) = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .filter(|r| !r["resources"].is_null())
        {
            return r;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("run.json never named the run's limits");
}

/// The live descendants of `pid`.
fn descendants(pid: i32) -> Vec<i32> {
    let mut found = Vec::new();
    let mut queue = vec![pid];
    while let Some(p) = queue.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let children = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            for c in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                found.push(c);
                queue.push(c);
            }
        }
    }
    found
}

/// Whether `pid` is a live process (not a zombie).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rfind(')')
            .and_then(|i| s[i + 1..].split_whitespace().next().map(|st| st != "Z"))
            .unwrap_or(false)
    })
}

fn pids_in(cgroup: &std::path::Path) -> Vec<i32> {
    std::fs::read_to_string(cgroup.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Touches 200 MiB, far past a 32 MiB limit.
const HOG: &str = "perl -e '$x = \"x\" x (200*1024*1024); print \"survived\\n\"'";

#[test]
fn a_process_past_the_memory_limit_is_oom_killed_and_the_report_says_so() {
    if skip_unless_root("the memory limit test") {
        return;
    }
    let case = Case::new();
    let done = case.run(&["run", "exec", "--memory", "32M", "--", "sh", "-c", HOG]);
    let r = done.report();
    assert_eq!(done.code, 1, "{}", done.stderr);
    assert_eq!(r["verdict"], "agent_failed");
    assert_eq!(r["oom_killed"], true, "{}", r["resources"]);
    assert!(r["resources"]["oom_kills"].as_u64() >= Some(1));
    // The run's own limit was reached: counted apart from other OOMs.
    assert!(
        r["resources"]["oom_kills_at_limit"].as_u64() >= Some(1),
        "{}",
        r["resources"]
    );
    let reason = r["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("the memory limit (--memory 32MiB) was reached"),
        "{reason}"
    );
    assert_eq!(r["resources"]["memory_bytes"], 32 << 20);
    let mem = enforced(&r, "memory");
    assert!(
        mem["by"] == "cgroup_v1" || mem["by"] == "cgroup_v2",
        "{mem}"
    );
    assert!(
        mem["swap"] == "memsw" || mem["swap"] == "swap.max" || mem["swap"] == "swappiness",
        "swap is kept out: {mem}"
    );
    assert!(
        !String::from_utf8_lossy(&done.log("stdout.log")).contains("survived"),
        "the hog was not stopped"
    );
    let cg = cgroup_of(&r, "memory");
    assert!(!cg.exists(), "the run's cgroup {} was left", cg.display());
    // The limit is shown when the run starts, and is in its first event.
    let by = mem["by"].as_str().unwrap();
    let said = format!("memory 32MiB by {by}");
    assert!(
        done.stderr.contains(&format!("limits: {said}")),
        "{}",
        done.stderr
    );
    let spawned = &done.events_of("spawned")[0];
    assert_eq!(spawned["limits"], serde_json::json!([said]), "{spawned}");
    case.assert_nothing_left();
}

#[test]
fn a_fork_bomb_stays_at_the_pids_limit_and_the_run_ends_with_nothing_left() {
    if skip_unless_root("the pids limit test") {
        return;
    }
    let case = Case::new();
    let limit = 20;
    let done = case.run(&[
        "run",
        "exec",
        "--pids",
        &limit.to_string(),
        "--kill-grace",
        "200ms",
        "--",
        "sh",
        "-c",
        "i=0; while [ $i -lt 200 ]; do sleep 30 & i=$((i+1)); done; wait",
    ]);
    let r = done.report();
    // dash gives up at the first fork refused.
    assert_eq!(r["verdict"], "agent_failed", "{}", done.stderr);
    assert_eq!(r["pids_limit_hit"], true, "{}", r["resources"]);
    assert_eq!(r["oom_killed"], false);
    let reason = r["reason"].as_str().unwrap();
    assert!(
        reason.contains("the process limit (--pids 20) was reached"),
        "{reason}"
    );
    let orphans = r["orphans"].as_array().unwrap().len();
    assert!(
        orphans < limit,
        "{orphans} sleeps outlived the shell: the run had more than {limit} processes"
    );
    assert!(orphans > 0, "the loop forked nothing");
    assert!(
        String::from_utf8_lossy(&done.log("stderr.log")).contains("fork"),
        "the shell did not say a fork failed"
    );
    assert!(!cgroup_of(&r, "pids").exists(), "the pids cgroup was left");
    case.assert_nothing_left();
}

/// Starts a run that waits for `go` in its directory, reads its limits
/// from the first run.json, checks that the agent is in each limit's
/// cgroup and that the cgroup's file holds the quota, then lets it end.
fn quota_is_in_force(case: &Case, sandbox: &[&str]) -> Value {
    let mut args = vec!["run", "exec", "--cpus", "0.5", "--pids", "64"];
    args.extend_from_slice(sandbox);
    args.extend_from_slice(&[
        "--",
        "sh",
        "-c",
        "while [ ! -e go ]; do sleep 0.02; done; echo went",
    ]);
    let child = case.spawn(&args);
    let r = started_report(case);
    let cpu = enforced(&r, "cpu");
    let dir = cgroup_of(&r, "cpu");
    let quota = match cpu["by"].as_str() {
        Some("cgroup_v1") => std::fs::read_to_string(dir.join("cpu.cfs_quota_us")).unwrap(),
        Some("cgroup_v2") => std::fs::read_to_string(dir.join("cpu.max")).unwrap(),
        other => panic!("the cpu limit is enforced by {other:?}"),
    };
    assert!(
        quota.trim() == "50000" || quota.trim() == "50000 100000",
        "the quota in {}: {quota:?}",
        dir.display()
    );
    let agent = r["pid"].as_i64().expect("the agent's pid") as i32;
    // The agent and everything it started (under bwrap: bwrap, the
    // namespace's init and the shell) are in each limit's cgroup.
    // Between two of the loop's `sleep`s the shell may have no child:
    // look again until one is seen.
    let until = Instant::now() + Duration::from_secs(10);
    let mut tree = descendants(agent);
    while tree.is_empty() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
        tree = descendants(agent);
    }
    assert!(!tree.is_empty(), "the agent {agent} started nothing");
    for controller in ["cpu", "pids"] {
        let members = pids_in(&cgroup_of(&r, controller));
        for pid in std::iter::once(agent).chain(tree.iter().copied()) {
            // The loop's short `sleep`s may be gone by now.
            assert!(
                members.contains(&pid) || !alive(pid),
                "process {pid} of the run is not in its {controller} cgroup: {members:?}"
            );
        }
    }
    std::fs::write(case.path().join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!dir.exists(), "the cpu cgroup {} was left", dir.display());
    r
}

#[test]
fn the_cpu_quota_is_written_to_the_cgroup_the_agent_runs_in() {
    if skip_unless_root("the cpu quota test") {
        return;
    }
    let case = Case::new();
    let r = quota_is_in_force(&case, &[]);
    assert_eq!(r["resources"]["cpus"], 0.5);
    case.assert_nothing_left();
}

#[test]
fn under_bwrap_every_process_is_in_the_limited_cgroups_and_oom_is_reported() {
    if skip_unless_root("the bwrap limits test") {
        return;
    }
    if !bwrap_works() {
        eprintln!("SKIPPED: bubblewrap cannot make a PID namespace here");
        return;
    }
    let case = Case::new();
    let r = quota_is_in_force(&case, &["--sandbox", "bwrap"]);
    assert_eq!(r["sandbox"], "bwrap");
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--sandbox",
        "bwrap",
        "--memory",
        "32M",
        "--",
        "sh",
        "-c",
        HOG,
    ]);
    let r = done.report();
    assert_eq!(r["verdict"], "agent_failed", "{}", done.stderr);
    assert_eq!(r["oom_killed"], true, "{}", r["resources"]);
    assert!(
        r["reason"]
            .as_str()
            .unwrap()
            .starts_with("the memory limit (--memory 32MiB) was reached"),
        "{}",
        r["reason"]
    );
    assert!(!cgroup_of(&r, "memory").exists());
    assert!(
        crate::support::kill_leftovers("200*1024*1024").is_empty(),
        "the hog survived"
    );

    // Inside bwrap, even as root, the agent can neither raise its limit
    // nor leave the limited cgroup.
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--sandbox",
        "bwrap",
        "--pids",
        "50",
        "--",
        "sh",
        "-c",
        "p=$(grep :pids: /proc/self/cgroup | cut -d: -f3); \
         (echo max > /sys/fs/cgroup/pids$p/pids.max) 2>/dev/null && echo RAISED || echo kept; \
         (echo $$ > /sys/fs/cgroup/pids/cgroup.procs) 2>/dev/null && echo MOVED || echo stayed",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let out = String::from_utf8_lossy(&done.log("stdout.log")).into_owned();
    assert!(out.contains("kept") && out.contains("stayed"), "{out}");
}

#[test]
fn a_limit_this_user_cannot_enforce_is_refused_before_anything_starts() {
    if skip_unless_root("the refusal test (it drops to user nobody)") {
        return;
    }
    // As `nobody`, no cgroup on this host is writable: the limit must be
    // refused with exit 2, naming it, not silently dropped.
    let case = Case::new();
    let mut cmd = std::process::Command::new("setpriv");
    cmd.args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
        .arg(crate::support::WARDEN)
        .args([
            "run", "exec", "--memory", "64M", "--", "sh", "-c", "echo ran",
        ])
        .current_dir("/")
        .env("WARDEN_TEST_MARK", &case.mark)
        .stdin(std::process::Stdio::null());
    let out = match cmd.output() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("SKIPPED: setpriv (util-linux) cannot run here: {e}");
            return;
        }
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--memory 64MiB cannot be enforced here"),
        "{stderr}"
    );
    assert!(stderr.contains("memory"), "{stderr}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("ran"),
        "the command ran"
    );
    case.assert_nothing_left();
}

#[test]
fn doctor_says_where_each_limit_would_be_enforced() {
    let case = Case::new();
    let done = case.run(&["doctor", "--json"]);
    let doc: Value = serde_json::from_str(&done.stdout)
        .unwrap_or_else(|e| panic!("doctor --json is one JSON document ({e}): {}", done.stdout));
    for controller in ["memory", "pids", "cpu"] {
        let check = &doc["limits"][controller];
        let detail = check["detail"].as_str().unwrap_or_else(|| panic!("{doc}"));
        if check["ok"] == true {
            assert!(
                detail.contains("enforced by cgroup v1")
                    || detail.contains("enforced by cgroup v2"),
                "{controller}: {detail}"
            );
        } else {
            assert!(detail.contains("refused"), "{controller}: {detail}");
        }
        if is_root() {
            // This user can make cgroups: the test of each limit above
            // needs it.
            assert_eq!(check["ok"], true, "{controller} as root: {detail}");
        }
    }
}

/// The pid of the parent of `pid` (the agent's shim).
fn parent_of(pid: i32) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap()
}

fn gone_within(dir: &std::path::Path, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if !dir.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

#[test]
fn the_limit_cgroups_of_a_killed_warden_are_removed_by_its_shim_or_the_next_run() {
    if skip_unless_root("the cgroup clean-up test") {
        return;
    }
    let args = ["run", "exec", "--pids", "50", "--", "sleep", "30"];

    // warden SIGKILLed: its shim removes the run's v1 cgroups.
    let case = Case::new();
    let mut child = case.spawn(&args);
    let r = started_report(&case);
    let dir = cgroup_of(&r, "pids");
    assert!(dir.exists());
    crate::support::kill(child.id(), "KILL");
    let _ = child.wait();
    assert!(
        gone_within(&dir, Duration::from_secs(10)),
        "the shim left {}",
        dir.display()
    );
    case.assert_nothing_left();

    // warden and its shim SIGKILLed at once: the cgroup stays, empty,
    // until the next run with a limit removes it.
    let case = Case::new();
    let mut child = case.spawn(&args);
    let r = started_report(&case);
    let dir = cgroup_of(&r, "pids");
    let shim = parent_of(r["pid"].as_i64().unwrap() as i32);
    let killed = std::process::Command::new("kill")
        .args(["-9", &child.id().to_string(), &shim.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let _ = child.wait();
    // The agent dies with its shim (parent-death signal).
    case.assert_nothing_left();
    assert!(
        dir.exists(),
        "nothing was left to clean up: the test proves nothing"
    );
    let next = Case::new();
    let done = next.run(&["run", "exec", "--pids", "50", "--", "true"]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(
        !dir.exists(),
        "the next run left the stale cgroup {}",
        dir.display()
    );
}

#[test]
fn a_batch_run_takes_its_memory_limit_from_the_batch_file() {
    if skip_unless_root("the batch memory limit test") {
        return;
    }
    let case = Case::new();
    std::fs::write(
        case.path().join("runs.toml"),
        "[defaults]\nagent = \"exec\"\n\n\
         [[run]]\nname = \"hog\"\nmemory = \"32M\"\n\
         command = [\"perl\", \"-e\", \"$x = 'x' x (200*1024*1024)\"]\n\n\
         [[run]]\nname = \"free\"\ncommand = [\"true\"]\n",
    )
    .unwrap();
    let mut cmd = case.command(&["batch", "runs.toml", "--dir", "b"]);
    cmd.env_remove("WARDEN_RUN_DIR");
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let batch: Value =
        serde_json::from_str(&std::fs::read_to_string(case.path().join("b/batch.json")).unwrap())
            .unwrap_or_else(|e| panic!("batch.json ({e}): {stderr}"));
    let text = batch.to_string();
    let reports = crate::support::run_reports_under(&case.path().join("b"));
    assert_eq!(reports.len(), 2, "{text}");
    let hog = reports
        .iter()
        .find(|r| r["resources"]["memory_bytes"] == 32 << 20)
        .unwrap_or_else(|| panic!("no run with the limit: {reports:?}"));
    assert_eq!(hog["oom_killed"], true, "{hog}");
    assert_eq!(hog["verdict"], "agent_failed");
    let free = reports.iter().find(|r| r["resources"].is_null()).unwrap();
    assert_eq!(
        free["verdict"], "succeeded",
        "a limit of one run is not the other's"
    );
    case.assert_nothing_left();
}
