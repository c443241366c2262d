//! `warden batch --executor slurm` against the real one-node cluster
//! (`WARDEN_SLURM_CONF`; `.ci/run` starts it): every run a task of one
//! array job, warden supervising inside each, one batch.json with a
//! verdict for every run however its job ended.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::slurm_cluster::{OwnCluster, SlurmEnv, slurm};
use crate::support::{Case, kill};

/// The batch directory the test names (`--dir`), and its batch.json.
fn batch_json(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("batch.json")).expect("batch.json");
    serde_json::from_str(&text).expect("batch.json is JSON")
}

fn by_name<'a>(b: &'a Value, name: &str) -> &'a Value {
    b["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no run {name} in {b}"))
}

/// `warden batch FILE --executor slurm --dir DIR`, pointed at the cluster.
fn batch_command(
    case: &Case,
    env: &SlurmEnv,
    file: &str,
    dir: &Path,
    jobs: &str,
) -> std::process::Command {
    let mut cmd = case.command(&[
        "batch",
        file,
        "--executor",
        "slurm",
        "-j",
        jobs,
        "--dir",
        dir.to_str().unwrap(),
    ]);
    cmd.env("SLURM_CONF", &env.conf);
    cmd
}

/// `b.toml` of the case as a batch of two at a time, in the background.
fn spawn_batch(case: &Case, env: &SlurmEnv, dir: &Path) -> std::process::Child {
    batch_command(case, env, "b.toml", dir, "2")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("warden batch")
}

/// The job states Slurm shows for the array job of a batch.
fn job_states(env: &SlurmEnv, b: &Value) -> Vec<String> {
    let id = b["runs"][0]["job"]["id"].as_str().unwrap_or("");
    let array = id.split('_').next().unwrap_or("").to_string();
    let out = env
        .command("squeue")
        .args(["-h", "-j", &array, "-o", "%T"])
        .output()
        .expect("squeue");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_batch_of_twenty_runs_on_slurm_gets_a_verdict_for_every_run() {
    let Some(env) = slurm() else { return };
    let case = Case::new();
    let mut toml =
        String::from("[defaults]\nagent = \"exec\"\ntimeout = \"2m\"\nstall_timeout = \"400ms\"\n");
    for i in 0..16 {
        toml.push_str(&format!(
            "[[run]]\nname = \"ok-{i}\"\ncommand = [\"sh\", \"-c\", \"echo run {i}\"]\n"
        ));
    }
    toml.push_str(
        "[[run]]\nname = \"fails\"\ncommand = [\"sh\", \"-c\", \"echo bad; exit 3\"]\n\
         [[run]]\nname = \"fails-too\"\ncommand = [\"false\"]\n\
         [[run]]\nname = \"stalls\"\ncommand = [\"sh\", \"-c\", \"echo up; sleep 300\"]\n\
         [[run]]\nname = \"orphan\"\ncommand = [\"sh\", \"-c\", \"echo done; setsid sleep 600 & exit 0\"]\n",
    );
    std::fs::write(case.path().join("b.toml"), toml).unwrap();
    let dir = case.path().join("batch");
    let start = Instant::now();
    let out = batch_command(&case, &env, "b.toml", &dir, "20")
        .output()
        .expect("warden batch");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "two runs fail: {stderr}");
    let b = batch_json(&dir);
    assert_eq!(b["executor"], "slurm");
    assert_eq!(b["runs"].as_array().unwrap().len(), 20, "{b}");
    assert_eq!(b["succeeded"], 17, "{b}");
    assert_eq!(b["failed"], 3, "{b}");
    assert_eq!(b["never_ran"], serde_json::json!([]));
    for i in 0..16 {
        let r = by_name(&b, &format!("ok-{i}"));
        assert_eq!(r["verdict"], "succeeded", "{r}");
        assert_eq!(r["job"]["state"], "COMPLETED", "{r}");
        assert_eq!(r["job"]["started"], true);
        // The run's own logs, written by warden on the node.
        let run_dir = PathBuf::from(r["session"]["runs"][0]["run_dir"].as_str().unwrap());
        assert_eq!(
            std::fs::read_to_string(run_dir.join("stdout.log")).unwrap(),
            format!("run {i}\n")
        );
    }
    assert_eq!(by_name(&b, "fails")["verdict"], "agent_failed");
    assert_eq!(by_name(&b, "fails")["job"]["state"], "FAILED");
    // warden's stall clock, not Slurm's minute-grained limit, ended it.
    let stalled = by_name(&b, "stalls");
    assert_eq!(stalled["verdict"], "stalled", "{stalled}");
    // The orphan was found and killed by warden inside the job.
    let orphan = by_name(&b, "orphan");
    assert_eq!(orphan["verdict"], "succeeded");
    let run_dir = PathBuf::from(orphan["session"]["runs"][0]["run_dir"].as_str().unwrap());
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(report["orphans_killed"], 1, "{report}");
    assert!(
        stderr.contains("[ok-3] succeeded") && stderr.contains("[stalls] stalled"),
        "the view says how each ended: {stderr}"
    );
    // The runs are followed live from the shared directory: the view
    // says what warden on the node decided while the run was going.
    assert!(
        stderr.contains("[stalls] ending the run: stall timeout"),
        "the view follows the run's events: {stderr}"
    );
    assert!(start.elapsed() < Duration::from_secs(120));
    case.assert_nothing_left();
}

#[test]
fn ctrl_c_cancels_every_job_and_still_writes_batch_json() {
    let Some(env) = slurm() else { return };
    let case = Case::new();
    let mut toml = String::from("[defaults]\nagent = \"exec\"\ntimeout = \"2m\"\n");
    for i in 0..4 {
        toml.push_str(&format!(
            "[[run]]\nname = \"long-{i}\"\ncommand = [\"sh\", \"-c\", \"echo up; sleep 300\"]\n"
        ));
    }
    std::fs::write(case.path().join("b.toml"), toml).unwrap();
    let dir = case.path().join("batch");
    // Two at a time: two run, two wait in Slurm's queue.
    let child = spawn_batch(&case, &env, &dir);
    wait_for(
        &dir.join("long-0"),
        "stdout.log",
        "up",
        Duration::from_secs(60),
    );
    wait_for(
        &dir.join("long-1"),
        "stdout.log",
        "up",
        Duration::from_secs(60),
    );
    kill(child.id(), "INT");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let b = batch_json(&dir);
    assert_eq!(b["cancelled"], 4, "{b}");
    for i in 0..2 {
        let r = by_name(&b, &format!("long-{i}"));
        // warden inside the job took Slurm's SIGTERM as a cancel and wrote
        // its report.
        assert_eq!(r["verdict"], "cancelled", "{r}");
        assert_eq!(r["session"]["runs"][0]["verdict"], "cancelled", "{r}");
    }
    assert_eq!(
        b["never_ran"],
        serde_json::json!(["long-2", "long-3"]),
        "the queued ones never ran: {b}"
    );
    assert!(job_states(&env, &b).iter().all(|s| s == "CANCELLED"), "{b}");
    case.assert_nothing_left();
}

#[test]
fn a_job_cancelled_from_outside_gets_its_verdict() {
    let Some(env) = slurm() else { return };
    let case = Case::new();
    std::fs::write(
        case.path().join("b.toml"),
        "[defaults]\nagent = \"exec\"\ntimeout = \"2m\"\n\
         [[run]]\nname = \"victim\"\ncommand = [\"sh\", \"-c\", \"echo up; sleep 300\"]\n\
         [[run]]\nname = \"bystander\"\ncommand = [\"sh\", \"-c\", \"echo fine\"]\n",
    )
    .unwrap();
    let dir = case.path().join("batch");
    let child = spawn_batch(&case, &env, &dir);
    wait_for(
        &dir.join("victim"),
        "stdout.log",
        "up",
        Duration::from_secs(60),
    );
    // An admin cancels one task of this batch's job (other tests submit
    // to the same cluster at the same time).
    let job = std::fs::read_to_string(dir.join("slurm/1/job")).expect("the batch's job id");
    let task = format!("{}_0", job.trim());
    let status = env.command("scancel").arg(&task).status().unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let b = batch_json(&dir);
    let victim = by_name(&b, "victim");
    assert_eq!(victim["verdict"], "cancelled", "{victim}");
    assert_eq!(victim["job"]["state"], "CANCELLED", "{victim}");
    assert_eq!(by_name(&b, "bystander")["verdict"], "succeeded");
    case.assert_nothing_left();
}

#[test]
fn a_run_whose_node_daemon_is_killed_gets_a_verdict_from_slurm() {
    // A cluster of its own: this one loses its node.
    let Some(cluster) = OwnCluster::up(2) else {
        return;
    };
    let env = &cluster.env;
    let case = Case::new();
    std::fs::write(
        case.path().join("b.toml"),
        "[defaults]\nagent = \"exec\"\ntimeout = \"2m\"\n\
         [[run]]\nname = \"victim\"\ncommand = [\"sh\", \"-c\", \"echo up; sleep 300\"]\n",
    )
    .unwrap();
    let dir = case.path().join("batch");
    let start = Instant::now();
    let child = spawn_batch(&case, env, &dir);
    wait_for(
        &dir.join("victim"),
        "stdout.log",
        "up",
        Duration::from_secs(60),
    );
    // The node's daemon dies; slurmctld hears nothing from the node, calls
    // it down and fails its job (NODE_FAIL), which is never requeued.
    kill(cluster.daemon("slurmd"), "KILL");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let b = batch_json(&dir);
    let victim = by_name(&b, "victim");
    assert_eq!(victim["verdict"], "internal_error", "{victim}\n{stderr}");
    assert_eq!(victim["job"]["state"], "NODE_FAIL", "{victim}");
    assert_eq!(victim["job"]["started"], true, "{victim}");
    assert!(
        victim["error"]
            .as_str()
            .is_some_and(|e| e.contains("the node failed")),
        "{victim}"
    );
    assert_eq!(b["never_ran"], serde_json::json!([]), "it ran: {b}");
    assert_eq!(out.status.code(), Some(1), "a run failed: {stderr}");
    assert!(
        stderr.contains("[victim] internal_error") && stderr.contains("NODE_FAIL"),
        "the view says how it ended, though its run's end was never seen: {stderr}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(120),
        "{:?}",
        start.elapsed()
    );
    // The node's processes go with its cluster (a real node's would go
    // with the node).
    drop(cluster);
    case.assert_nothing_left();
}

/// Waits for `needle` in the log `file` of the (only) run of a batch
/// entry's session directory.
fn wait_for(entry_dir: &Path, file: &str, needle: &str, limit: Duration) {
    let until = Instant::now() + limit;
    loop {
        let found = std::fs::read_dir(entry_dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().is_dir())
            .any(|e| {
                std::fs::read_to_string(e.path().join(file)).is_ok_and(|t| t.contains(needle))
            });
        if found {
            return;
        }
        assert!(
            Instant::now() < until,
            "no `{needle}` in {}/*/{file} after {limit:?}",
            entry_dir.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_bad_executor_or_slurm_option_is_refused_by_name_before_anything_starts() {
    let case = Case::new();
    let runs = "[[run]]\nname = \"a\"\nagent = \"exec\"\ncommand = [\"true\"]\n";
    for (file, says) in [
        (
            format!("[defaults]\nexecutor = \"kube\"\n{runs}"),
            "unknown executor `kube`; known: local, slurm",
        ),
        (
            format!("[defaults]\nexecutor = \"slurm\"\n[slurm]\npartiton = \"x\"\n{runs}"),
            "unknown field `partiton`",
        ),
        (
            format!("[defaults]\nexecutor = \"slurm\"\n[slurm]\ntime_limit = \"soon\"\n{runs}"),
            "[slurm]",
        ),
        (format!("[slurmm]\nx = 1\n{runs}"), "unknown table `slurmm`"),
    ] {
        std::fs::write(case.path().join("b.toml"), &file).unwrap();
        let done = case.run(&["batch", "b.toml"]);
        assert_eq!(done.code, 2, "{file}: {}", done.stderr);
        assert!(done.stderr.contains(says), "{file}: {}", done.stderr);
        assert!(
            !case.path().join(".warden/batches").exists(),
            "nothing started: {file}"
        );
    }
}

#[test]
fn a_resumed_slurm_batch_waits_for_its_jobs_still_running_and_keeps_their_reports() {
    let Some(env) = slurm() else { return };
    let case = Case::new();
    std::fs::write(
        case.path().join("b.toml"),
        "[defaults]\nagent = \"exec\"\ntimeout = \"2m\"\n\
         [[run]]\nname = \"slow\"\ncommand = [\"sh\", \"-c\", \"echo up; sleep 3; echo done\"]\n\
         [[run]]\nname = \"quick\"\ncommand = [\"sh\", \"-c\", \"echo quick\"]\n",
    )
    .unwrap();
    let dir = case.path().join("batch");
    let child = spawn_batch(&case, &env, &dir);
    wait_for(
        &dir.join("slow"),
        "stdout.log",
        "up",
        Duration::from_secs(60),
    );
    // The submitting warden dies; its jobs go on.
    kill(child.id(), "KILL");
    let _ = child.wait_with_output();
    let mut resume = case.command(&["batch", "--resume", dir.to_str().unwrap()]);
    resume.env("SLURM_CONF", &env.conf);
    let out = resume.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("resuming: 0 of 2 run(s) to run again"),
        "{stderr}"
    );
    let b = batch_json(&dir);
    let slow = by_name(&b, "slow");
    assert_eq!(slow["verdict"], "succeeded", "{slow}");
    let run_dir = PathBuf::from(slow["session"]["runs"][0]["run_dir"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(run_dir.join("stdout.log")).unwrap(),
        "up\ndone\n",
        "the job ran to its end while no warden watched it"
    );
    assert!(!dir.join("attempts").exists(), "nothing ran twice");
    case.assert_nothing_left();
}

/// A batch of two runs on the cluster (one fails), exporting to a
/// receiver of its own with `extra` in its environment, ended (exit 1):
/// the case (its directory lives as long as it), the receiver, the batch
/// directory.
fn exporting_batch(
    env: &SlurmEnv,
    extra: &[(&str, &str)],
) -> (Case, warden_telemetry_backends::otlp::Receiver, PathBuf) {
    let case = Case::new();
    std::fs::write(
        case.path().join("b.toml"),
        "[defaults]\nagent = \"exec\"\ntimeout = \"2m\"\n\
         [[run]]\nname = \"one\"\ncommand = [\"echo\", \"one\"]\n\
         [[run]]\nname = \"two\"\ncommand = [\"sh\", \"-c\", \"exit 3\"]\n",
    )
    .unwrap();
    let rx = warden_telemetry_backends::otlp::Receiver::start_http();
    let dir = case.path().join("batch");
    let mut cmd = batch_command(&case, env, "b.toml", &dir, "2");
    crate::support::without_own_telemetry(&mut cmd);
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", rx.endpoint());
    cmd.envs(extra.iter().copied());
    let done = case.finished(cmd.output().unwrap(), Instant::now());
    assert_eq!(done.code, 1, "{}", done.stderr);
    (case, rx, dir)
}

#[test]
fn a_batch_on_slurm_is_one_trace_with_each_job_s_session_under_the_batch_span() {
    use warden_telemetry_backends::otlp::SpanTree;
    let Some(env) = slurm() else { return };
    let (_case, rx, dir) = exporting_batch(&env, &[]);
    // The batch's span from here; from each job, its session, iteration
    // and run.
    let spans = rx.wait_for_spans(7, Duration::from_secs(30));
    let tree = spans.render();
    let batch = spans.iter().find(|s| s.name.starts_with("batch ")).unwrap();
    assert!(batch.is_root(), "{tree}");
    assert_eq!(batch.str_attr("warden.executor"), Some("slurm"));
    let sessions = spans.children(batch);
    assert_eq!(
        sessions.len(),
        2,
        "a session per job under the batch\n{tree}"
    );
    for s in &sessions {
        assert_eq!(s.parent_is_remote, Some(true), "made in the job: {s:?}");
        let its = spans.children(s);
        assert_eq!(its.len(), 1, "{tree}");
        let runs = spans.children(its[0]);
        assert_eq!(runs.len(), 1, "{tree}");
        assert_eq!(runs[0].name, "invoke_agent exec");
    }
    assert!(spans.iter().all(|s| s.trace_id == batch.trace_id), "{tree}");
    let b = batch_json(&dir);
    assert_eq!(b["otel"]["span_id"], batch.span_id.as_str());
    assert_eq!(
        by_name(&b, "two")["session"]["otel"]["parent_span_id"],
        batch.span_id.as_str()
    );
}

#[test]
fn a_batch_on_slurm_has_each_job_count_its_run_in_the_metrics() {
    use warden_telemetry_backends::otlp::{AttrValue, MetricPoint, Number};
    let Some(env) = slurm() else { return };
    // Spans are not asked for: the metrics' settings go to the jobs alone.
    let (_case, rx, dir) = exporting_batch(&env, &[("OTEL_TRACES_EXPORTER", "none")]);
    let instance = |p: &MetricPoint| {
        p.resource
            .get("service.instance.id")
            .and_then(AttrValue::as_str)
            .expect("service.instance.id")
            .to_string()
    };
    // Each job's warden exports its own run's count, as a process of its
    // own; the submitting warden has no run of its own to count.
    rx.wait_for_metric("warden.runs", Duration::from_secs(30));
    let deadline = Instant::now() + Duration::from_secs(30);
    let runs = loop {
        let runs: Vec<MetricPoint> = rx
            .metrics()
            .into_iter()
            .filter(|p| p.name == "warden.runs")
            .collect();
        if runs.len() >= 2 || Instant::now() > deadline {
            break runs;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut verdicts: Vec<(String, f64)> = runs
        .iter()
        .map(|p| {
            let v = p.attributes.get("verdict").and_then(AttrValue::as_str);
            (
                v.unwrap_or("?").to_string(),
                p.value.map_or(0.0, Number::as_f64),
            )
        })
        .collect();
    verdicts.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        verdicts,
        [
            ("agent_failed".to_string(), 1.0),
            ("succeeded".to_string(), 1.0)
        ],
        "{runs:#?}"
    );
    let jobs: std::collections::BTreeSet<String> = runs.iter().map(instance).collect();
    assert_eq!(jobs.len(), 2, "one process per job: {runs:#?}");
    let gauge: Vec<MetricPoint> = rx
        .metrics()
        .into_iter()
        .filter(|p| {
            p.name == "warden.batch.runs"
                && p.attributes.get("state") == Some(&AttrValue::from("finished"))
        })
        .collect();
    assert_eq!(gauge.len(), 1, "{gauge:#?}");
    assert_eq!(gauge[0].value.map(Number::as_f64), Some(2.0));
    assert!(
        !jobs.contains(&instance(&gauge[0])),
        "the batch's own process"
    );
    assert!(rx.spans().is_empty(), "{:?}", rx.spans());
    assert_eq!(batch_json(&dir)["otel"], Value::Null);
}
