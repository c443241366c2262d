//! A batch on the one-node Slurm cluster whose shared directory someone
//! else writes (a run's agent that reaches it): a request rewritten while
//! its task waits is refused by warden in the job, a report planted in an
//! entry's directory is not believed over Slurm's word, and `--env`
//! secrets are never in the shared directory in clear.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::batch_state::{batch_json, files_holding, rewrite_request, run_of};
use crate::slurm_cluster::{SlurmEnv, slurm};
use crate::support::Case;

/// `warden batch b.toml --executor slurm -j JOBS --dir DIR` on the cluster.
fn batch(case: &Case, env: &SlurmEnv, dir: &str, jobs: &str) -> std::process::Command {
    let mut cmd = case.command(&[
        "batch",
        "b.toml",
        "--executor",
        "slurm",
        "-j",
        jobs,
        "--dir",
        dir,
    ]);
    cmd.env("SLURM_CONF", &env.conf);
    cmd
}

fn wait_until(what: &str, limit: Duration, mut ready: impl FnMut() -> bool) {
    let until = Instant::now() + limit;
    while !ready() {
        assert!(Instant::now() < until, "{what} after {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_request_rewritten_while_its_task_waits_is_refused_and_never_runs() {
    let Some(env) = slurm() else { return };
    let case = Case::new();
    let (up, release, marker) = (
        case.path().join("up"),
        case.path().join("release"),
        case.path().join("marker"),
    );
    std::fs::write(
        case.path().join("b.toml"),
        format!(
            "[defaults]\nagent = \"exec\"\ntimeout = \"2m\"\n\
             [[run]]\nname = \"first\"\ncommand = [\"sh\", \"-c\", \"touch {up}; while [ ! -e {release} ]; do sleep 0.02; done\"]\n\
             [[run]]\nname = \"second\"\ncommand = [\"sh\", \"-c\", \"echo fine\"]\n",
            up = up.display(),
            release = release.display()
        ),
    )
    .unwrap();
    let dir = case.path().join("batch");
    // One at a time: the second task waits in Slurm's queue.
    let child = batch(&case, &env, dir.to_str().unwrap(), "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the first run is not up", Duration::from_secs(60), || {
        up.exists()
    });
    let request = dir.join("slurm/1/requests/1.json");
    rewrite_request(&request, &format!("touch {}", marker.display()));
    std::fs::write(&release, "").unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!marker.exists(), "the rewritten command ran: {stderr}");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let b = batch_json(&dir);
    assert_eq!(run_of(&b, "first")["verdict"], "succeeded", "{b}");
    let second = run_of(&b, "second");
    assert_eq!(second["verdict"], "internal_error", "{second}");
    let error = second["error"].as_str().unwrap();
    assert!(
        error.contains("slurm/1/requests/1.json") && error.contains("tampered"),
        "{error}"
    );
    // The job's own output says why it did not run it.
    let job_out = std::fs::read_to_string(dir.join("slurm/1/out/1.out")).unwrap();
    assert!(job_out.contains("not run"), "{job_out}");
    case.assert_nothing_left();
}

#[test]
fn a_report_planted_in_an_entry_s_directory_is_not_believed() {
    let Some(env) = slurm() else { return };
    let case = Case::new();
    // A report warden wrote for another batch's entry.
    std::fs::write(
        case.path().join("genuine.toml"),
        "[defaults]\nagent = \"exec\"\ntimeout = \"2m\"\n\
         [[run]]\nname = \"g\"\ncommand = [\"true\"]\n",
    )
    .unwrap();
    let genuine = case.path().join("genuine");
    let done = case.run(&["batch", "genuine.toml", "--dir", genuine.to_str().unwrap()]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let dir = case.path().join("batch");
    let g = genuine.join("g");
    // The first run plants: a genuine report (and its MAC) in `forged`'s
    // directory, text that is no report in `garbage`'s, and makes both
    // jobs fail before warden writes theirs (their requests rewritten).
    let plant = format!(
        "mkdir -p {d}/forged {d}/garbage; cp {g}/session.json {g}/session.json.mac {d}/forged/; \
         echo '{{not json' > {d}/garbage/session.json; \
         for i in 1 2; do sed -i 's/true/false/' {d}/slurm/1/requests/$i.json; done",
        d = dir.display(),
        g = g.display()
    );
    std::fs::write(
        case.path().join("b.toml"),
        format!(
            "[defaults]\nagent = \"exec\"\ntimeout = \"2m\"\n\
             [[run]]\nname = \"planter\"\ncommand = [\"sh\", \"-c\", {plant:?}]\n\
             [[run]]\nname = \"forged\"\ncommand = [\"true\"]\n\
             [[run]]\nname = \"garbage\"\ncommand = [\"true\"]\n"
        ),
    )
    .unwrap();
    let out = batch(&case, &env, dir.to_str().unwrap(), "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let b = batch_json(&dir);
    assert_eq!(run_of(&b, "planter")["verdict"], "succeeded", "{b}");
    for name in ["forged", "garbage"] {
        let r = run_of(&b, name);
        assert_eq!(r["verdict"], "internal_error", "{r}");
        assert_eq!(r["job"]["state"], "FAILED", "{r}");
        let error = r["error"].as_str().unwrap();
        assert!(
            error.contains(&format!("{name}/session.json")) && error.contains("not believed"),
            "{error}"
        );
    }
    assert_eq!(b["succeeded"], 1, "{b}");
    case.assert_nothing_left();
}

#[test]
fn env_secrets_reach_the_job_yet_never_the_shared_directory_in_clear() {
    let Some(env) = slurm() else { return };
    let case = Case::new();
    std::fs::write(
        case.path().join("b.toml"),
        "[defaults]\nagent = \"exec\"\ntimeout = \"2m\"\n\
         [[run]]\nname = \"needs\"\nenv = [\"API_KEY=secretvalue123\"]\n\
         command = [\"sh\", \"-c\", \"test \\\"$API_KEY\\\" = secret''value123 && test -z \\\"$WARDEN_BATCH_KEY\\\" && echo got it\"]\n",
    )
    .unwrap();
    // A relative --dir: made absolute (Slurm resolves the jobs' output
    // inside the batch directory).
    let out = batch(&case, &env, "batch", "1").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let dir = case.path().join("batch");
    let b = batch_json(&dir);
    let needs = run_of(&b, "needs");
    assert_eq!(needs["verdict"], "succeeded", "{needs}");
    let run_dir = Path::new(needs["session"]["runs"][0]["run_dir"].as_str().unwrap());
    assert!(run_dir.is_absolute(), "{needs}");
    assert_eq!(
        std::fs::read_to_string(run_dir.join("stdout.log")).unwrap(),
        "got it\n"
    );
    assert_eq!(
        files_holding(&dir, "secretvalue123"),
        Vec::<std::path::PathBuf>::new()
    );
    case.assert_nothing_left();
}

#[test]
fn a_job_that_failed_is_not_succeeded_because_of_an_earlier_report() {
    let Some(env) = slurm() else { return };
    let case = Case::new();
    let flag = case.path().join("flag");
    // Its first iteration succeeds (session.json, signed, says so); the
    // second is going when warden in the job is killed (the node's OOM
    // killer, an admin): Slurm says FAILED.
    std::fs::write(
        case.path().join("b.toml"),
        format!(
            "[defaults]\nagent = \"exec\"\ntimeout = \"2m\"\n\
             [[run]]\nname = \"victim\"\niterations = 2\n\
             command = [\"sh\", \"-c\", \"if [ -e {f} ]; then echo up; sleep 300; else touch {f}; fi\"]\n",
            f = flag.display()
        ),
    )
    .unwrap();
    let dir = case.path().join("batch");
    let child = batch(&case, &env, dir.to_str().unwrap(), "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let second = dir.join("victim/iteration-2/stdout.log");
    wait_until(
        "the second iteration is not up",
        Duration::from_secs(60),
        || std::fs::read_to_string(&second).is_ok_and(|t| t.contains("up")),
    );
    let request = dir.join("slurm/1/requests/0.json");
    let warden = crate::support::processes()
        .into_iter()
        .find(|p| {
            p.cmdline
                .ends_with(&format!("run-request {} ", request.display()))
        })
        .expect("warden in the job");
    crate::support::kill(warden.pid as u32, "KILL");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let b = batch_json(&dir);
    let victim = run_of(&b, "victim");
    assert_eq!(victim["job"]["state"], "FAILED", "{victim}");
    assert_eq!(victim["session"]["verdict"], "succeeded", "{victim}");
    assert_eq!(victim["verdict"], "internal_error", "{victim}");
    let error = victim["error"].as_str().unwrap();
    assert!(error.contains("not believed"), "{error}");
    case.assert_nothing_left();
}

/// `slurmctld` keeps each job's environment on disk (its
/// `StateSaveLocation`, read here as its owner, root): an agent that runs
/// as root in a sandbox that shows that directory read it there. The key
/// must never be in the job's environment: the job reads it from the key
/// file its script names.
#[test]
fn the_batch_key_is_never_in_the_environment_slurm_keeps_for_the_job() {
    let Some(env) = slurm() else { return };
    if !crate::support::is_root() {
        eprintln!("skipped: reading slurmctld's state needs its owner (root here)");
        return;
    }
    let conf = std::fs::read_to_string(&env.conf).unwrap();
    let state = conf
        .lines()
        .find_map(|l| l.trim().strip_prefix("StateSaveLocation="))
        .expect("StateSaveLocation in slurm.conf")
        .to_string();
    let case = Case::new();
    let seen = case.path().join("seen");
    let dir = case.path().join("batch");
    // The job's own command copies what slurmctld keeps of its job's
    // environment (the job whose script names this batch) while it runs.
    std::fs::write(
        case.path().join("b.toml"),
        format!(
            "[defaults]\nagent = \"exec\"\ntimeout = \"2m\"\n\
             [[run]]\nname = \"looks\"\n\
             command = [\"sh\", \"-c\", \"for d in {state}/hash.*/job.*; do grep -qF {dir} $d/script && cat $d/environment; done > {seen}; true\"]\n",
            dir = dir.display(),
            seen = seen.display()
        ),
    )
    .unwrap();
    let out = batch(&case, &env, dir.to_str().unwrap(), "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("plan.json")).unwrap()).unwrap();
    let key = std::fs::read_to_string(
        case.state
            .path()
            .join("warden/keys")
            .join(plan["batch_id"].as_str().unwrap()),
    )
    .unwrap();
    let seen = std::fs::read(&seen).unwrap();
    let seen = String::from_utf8_lossy(&seen);
    // It did read the job's environment: what the test asserts on is there.
    assert!(seen.contains("SLURM_CONF="), "{seen}");
    assert!(
        !seen.contains(key.trim()),
        "the batch's key is in slurmctld's state"
    );
    assert!(!seen.contains("WARDEN_BATCH_KEY="), "{seen}");
    case.assert_nothing_left();
}
