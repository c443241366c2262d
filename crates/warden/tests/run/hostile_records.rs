//! warden's records out of a bwrap agent's reach wherever they lie: a
//! batch directory given with `--dir` inside the work tree, a session's
//! directory elsewhere under the read-only root, and the host daemons an
//! agent could use to act outside the sandbox (Slurm's munge).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::Value;

use crate::support::{Case, WARDEN, home_with_ssh_key, is_root};

/// The stdout.log of each run of a session or batch entry, by its
/// session.json.
fn run_logs(session_dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(session_dir.join("session.json")).expect("session.json");
    let s: Value = serde_json::from_str(&text).unwrap();
    s["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let dir = PathBuf::from(r["run_dir"].as_str().unwrap());
            String::from_utf8_lossy(&std::fs::read(dir.join("stdout.log")).unwrap()).into_owned()
        })
        .collect()
}

/// What the agent tries on a directory of warden's: list it, read what is
/// in it and below, and write a file in it and over what is there.
fn spy(dir: &str) -> String {
    format!(
        "echo \"LISTED[$(ls -A {dir} 2>/dev/null | tr '\\n' ' ')]\"; \
         find {dir} -type f 2>/dev/null | while read f; do echo \"FOUND $f\"; sed 's/^/READ /' \"$f\"; done; \
         (echo TAMPERED > {dir}/planted) 2>/dev/null && echo WROTE-PLANTED; \
         for f in $(find {dir} -name '*.json' 2>/dev/null); do (echo TAMPERED > \"$f\") 2>/dev/null && echo \"WROTE $f\"; done; \
         echo finished"
    )
}

fn assert_saw_nothing(text: &str) {
    assert!(text.contains("finished"), "{text}");
    assert!(
        text.contains("LISTED[]"),
        "the agent listed warden's records:\n{text}"
    );
    for tell in ["FOUND ", "READ ", "WROTE"] {
        assert!(!text.contains(tell), "{tell}:\n{text}");
    }
}

#[test]
fn a_bwrap_agent_in_a_batch_cannot_read_or_write_a_batch_directory_inside_its_work_tree() {
    let case = Case::new();
    let home = home_with_ssh_key(&case);
    let secret = "sekrit-Value-0123456789";
    let toml = format!(
        "[defaults]\nagent = \"exec\"\nsandbox = \"bwrap\"\nkill_grace = \"500ms\"\n\n\
         [[run]]\nname = \"victim\"\ncommand = [\"true\"]\nenv = [\"API_KEY={secret}\"]\n\n\
         [[run]]\nname = \"spy\"\ncommand = [\"sh\", \"-c\", {script:?}]\n",
        script = spy("bd")
    );
    let file = case.path().join("runs.toml");
    std::fs::write(&file, toml).unwrap();
    let mut cmd = case.command(&["batch", "runs.toml", "-j", "1", "--dir", "bd"]);
    cmd.env("HOME", &home).env_remove("WARDEN_RUN_DIR");
    let done = case.finished(cmd.output().unwrap(), Instant::now());
    assert_eq!(done.code, 0, "{}\n{}", done.stdout, done.stderr);
    let bd = case.path().join("bd");
    let logs = run_logs(&bd.join("spy"));
    let text = logs.join("\n");
    assert_saw_nothing(&text);
    assert!(!text.contains(secret), "another entry's secret:\n{text}");
    assert!(!bd.join("planted").exists());
    // Nothing of the batch's was changed.
    let mut stack = vec![bd.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let bytes = std::fs::read(&p).unwrap();
                assert!(
                    !String::from_utf8_lossy(&bytes).starts_with("TAMPERED"),
                    "{} was rewritten",
                    p.display()
                );
            }
        }
    }
}

/// A directory under /var/tmp: outside the work tree and HOME, seen
/// through the read-only root (not the sandbox's private /tmp).
struct VarTmp(PathBuf);

impl VarTmp {
    fn new(tag: &str) -> Self {
        let d = PathBuf::from(format!(
            "/var/tmp/warden-test-{tag}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos()
        ));
        std::fs::create_dir_all(&d).unwrap();
        Self(d)
    }
}

impl Drop for VarTmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// warden as `nobody` (through setpriv) when `unprivileged`, else as the
/// test's user; HOME and every directory the run writes belong to it.
fn warden_as(case: &Case, home: &Path, unprivileged: bool, owned: &[&Path]) -> Command {
    let mut cmd = if unprivileged {
        let nobody = 65534;
        for entry in [case.path(), home, &home.join(".ssh")].iter().chain(owned) {
            std::os::unix::fs::chown(entry, Some(nobody), Some(nobody)).unwrap();
        }
        std::fs::set_permissions(
            case.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let mut c = Command::new("/usr/bin/setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(WARDEN);
        c
    } else {
        Command::new(WARDEN)
    };
    cmd.current_dir(case.path())
        .env("HOME", home)
        .env_remove("WARDEN_RUN_DIR")
        .env_remove("GITHUB_ACTIONS")
        .env_remove("GITHUB_OUTPUT")
        .env_remove("GITHUB_STEP_SUMMARY")
        .stdin(std::process::Stdio::null());
    cmd
}

fn session_and_run_dirs_elsewhere_are_hidden(unprivileged: bool) {
    let case = Case::new();
    let home = home_with_ssh_key(&case);
    let place = VarTmp::new(if unprivileged { "nobody" } else { "root" });
    let session = place.0.join("session");
    let single = place.0.join("single");
    let session_arg = session.display().to_string();
    // Each iteration spies on the session's directory: the second would
    // find the first's logs there.
    let script = format!("echo SECRET-OF-AN-ITERATION; {}", spy(&session_arg));
    let mut cmd = warden_as(&case, &home, unprivileged, &[&place.0]);
    cmd.args(["run", "exec", "--sandbox", "bwrap", "--kill-grace", "500ms"])
        .args(["--iterations", "2", "--run-dir", &session_arg])
        .args(["--", "sh", "-c", &script]);
    let done = case.finished(cmd.output().unwrap(), Instant::now());
    assert_eq!(done.code, 0, "{}", done.stderr);
    let logs = run_logs(&session);
    assert_eq!(logs.len(), 2, "{logs:?}");
    for text in &logs {
        assert_saw_nothing(text);
    }
    assert!(!session.join("planted").exists());

    // A single run's own directory, given with --run-dir outside the tree.
    let single_arg = single.display().to_string();
    let mut cmd = warden_as(&case, &home, unprivileged, &[]);
    cmd.args(["run", "exec", "--sandbox", "bwrap", "--kill-grace", "500ms"])
        .args(["--run-dir", &single_arg])
        .args(["--", "sh", "-c", &spy(&single_arg)]);
    let done = case.finished(cmd.output().unwrap(), Instant::now());
    assert_eq!(done.code, 0, "{}", done.stderr);
    let text =
        String::from_utf8_lossy(&std::fs::read(single.join("stdout.log")).unwrap()).into_owned();
    assert_saw_nothing(&text);
}

#[test]
fn a_session_directory_outside_the_work_tree_is_hidden_from_a_bwrap_agent_as_root() {
    if !is_root() {
        eprintln!("skipped: writes under /var/tmp as root");
        return;
    }
    session_and_run_dirs_elsewhere_are_hidden(false);
}

#[test]
fn a_session_directory_outside_the_work_tree_is_hidden_from_a_bwrap_agent_as_nobody() {
    if !is_root() || !Path::new("/usr/bin/setpriv").is_file() {
        eprintln!("skipped: needs root and setpriv to become nobody");
        return;
    }
    session_and_run_dirs_elsewhere_are_hidden(true);
}

#[test]
fn a_directory_the_user_binds_by_name_stays_visible() {
    let case = Case::new();
    let home = home_with_ssh_key(&case);
    let place = VarTmp::new("bound");
    let session = place.0.join("session");
    let session_arg = session.display().to_string();
    let mut cmd = warden_as(&case, &home, false, &[]);
    cmd.args(["run", "exec", "--sandbox", "bwrap", "--kill-grace", "500ms"])
        .args(["--iterations", "2", "--run-dir", &session_arg])
        .args(["--ro", &session_arg])
        .args([
            "--",
            "sh",
            "-c",
            "ls -A \"$0\" | sed 's/^/SAW /'",
            &session_arg,
        ]);
    let done = case.finished(cmd.output().unwrap(), Instant::now());
    assert_eq!(done.code, 0, "{}", done.stderr);
    let logs = run_logs(&session);
    assert!(logs[1].contains("SAW iteration-1"), "{logs:?}");
}

/// Slurm's munge socket, if a cluster runs here.
const MUNGE: &str = "/run/munge/munge.socket.2";

#[test]
fn a_bwrap_agent_with_the_network_on_cannot_submit_a_slurm_job() {
    let Some(slurm) = crate::slurm_cluster::slurm() else {
        return;
    };
    if !Path::new(MUNGE).exists() {
        eprintln!("skipped: no munge socket at {MUNGE}");
        return;
    }
    sbatch_from_bwrap(&slurm, false);
    if is_root() && Path::new("/usr/bin/setpriv").is_file() {
        sbatch_from_bwrap(&slurm, true);
    } else {
        eprintln!("skipped as nobody: needs root and setpriv");
    }
}

/// `sbatch` from inside bwrap, with munge's socket hidden and then
/// allowed, warden run by root or (`unprivileged`) by nobody.
fn sbatch_from_bwrap(slurm: &crate::slurm_cluster::SlurmEnv, unprivileged: bool) {
    let case = Case::new();
    let home = home_with_ssh_key(&case);
    // A readable copy of the cluster's configuration (its paths are
    // absolute): the cluster's own directory may be closed to nobody, as
    // `mktemp -d` makes it.
    let conf_place = VarTmp::new("slurm-conf");
    let conf_path = conf_place.0.join("slurm.conf");
    std::fs::copy(&slurm.conf, &conf_path).unwrap();
    for (path, mode) in [(&conf_place.0, 0o755), (&conf_path, 0o644)] {
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap();
    }
    let conf = conf_path.display().to_string();
    let conf_dir = conf_place.0.display().to_string();
    // The job does nothing; the submission is what counts.
    let script = "sbatch --wrap true -o /dev/null -J warden-sandbox-test 2>&1 | sed 's/^/SBATCH /'; echo finished";
    let submit = |run: &str, extra: &[&str]| -> String {
        let run_dir = case.path().join(run);
        let mut cmd = warden_as(&case, &home, unprivileged, &[]);
        cmd.args(["run", "exec", "--sandbox", "bwrap", "--kill-grace", "500ms"])
            .args(["--ro", &conf_dir, "--env", "SLURM_CONF"])
            .arg("--run-dir")
            .arg(&run_dir)
            .args(extra)
            .args(["--", "sh", "-c", script])
            // SLURM_CONF passes into the sandbox only when asked for.
            .env("SLURM_CONF", &conf);
        let done = case.finished(cmd.output().unwrap(), Instant::now());
        let log =
            String::from_utf8_lossy(&std::fs::read(run_dir.join("stdout.log")).unwrap_or_default())
                .into_owned();
        assert_eq!(done.code, 0, "{run}: {}\n{log}", done.stderr);
        log
    };
    let who = if unprivileged { "nobody" } else { "root" };
    let said = submit("hidden", &[]);
    assert!(said.contains("finished"), "{who}: {said}");
    assert!(
        !said.contains("Submitted batch job"),
        "{who}: a job was submitted from inside the sandbox:\n{said}"
    );
    assert!(
        said.contains("SBATCH "),
        "{who}: sbatch said nothing:\n{said}"
    );
    // The same with munge's socket allowed does submit: what stopped it
    // above was the hidden socket, not the set-up.
    let said = submit("allowed", &["--allow-socket", MUNGE]);
    assert!(
        said.contains("Submitted batch job"),
        "{who}: with --allow-socket {MUNGE} the submission works:\n{said}"
    );
}

#[test]
fn a_bwrap_agent_on_slurm_cannot_read_or_write_the_shared_directory() {
    let Some(slurm) = crate::slurm_cluster::slurm() else {
        return;
    };
    // The batch in the shared directory, then elsewhere (`--dir`) with the
    // shared directory still holding other batches.
    for elsewhere in [false, true] {
        shared_directory_is_hidden(&slurm, elsewhere);
    }
}

fn shared_directory_is_hidden(slurm: &crate::slurm_cluster::SlurmEnv, elsewhere: bool) {
    let case = Case::new();
    let dir = elsewhere.then(|| case.path().join("bd"));
    let home = home_with_ssh_key(&case);
    // The cluster's shared directory inside the work tree: every batch
    // made there, this one's requests included, is in the agent's view
    // unless hidden.
    let shared = case.path().join("shared");
    std::fs::create_dir_all(shared.join("an-older-batch")).unwrap();
    std::fs::write(shared.join("an-older-batch/plan.json"), "{}").unwrap();
    let secret = "sekrit-Value-9876543210";
    let toml = format!(
        "[defaults]\nagent = \"exec\"\nsandbox = \"bwrap\"\nkill_grace = \"500ms\"\ntimeout = \"2m\"\n\n\
         [slurm]\nshared_dir = {shared:?}\n\n\
         [[run]]\nname = \"victim\"\ncommand = [\"sh\", \"-c\", \"sleep 1\"]\nenv = [\"API_KEY={secret}\"]\n\n\
         [[run]]\nname = \"spy\"\ncommand = [\"sh\", \"-c\", {script:?}]\n",
        shared = shared.display().to_string(),
        script = spy("shared")
    );
    std::fs::write(case.path().join("b.toml"), toml).unwrap();
    let mut args = vec!["batch", "b.toml", "--executor", "slurm", "-j", "2"];
    if let Some(d) = &dir {
        args.extend(["--dir", d.to_str().unwrap()]);
    }
    let mut cmd = case.command(&args);
    cmd.env("HOME", &home)
        .env("SLURM_CONF", &slurm.conf)
        .env_remove("WARDEN_RUN_DIR");
    let done = case.finished(cmd.output().unwrap(), Instant::now());
    assert_eq!(done.code, 0, "{dir:?}: {}\n{}", done.stdout, done.stderr);
    let batch = match dir {
        Some(d) => d,
        None => std::fs::read_dir(&shared)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| !p.ends_with("an-older-batch"))
            .expect("the batch's directory in the shared one"),
    };
    let text = run_logs(&batch.join("spy")).join("\n");
    assert_saw_nothing(&text);
    assert!(!text.contains(secret), "another entry's secret:\n{text}");
    assert!(!shared.join("planted").exists());
    assert_eq!(
        std::fs::read_to_string(shared.join("an-older-batch/plan.json")).unwrap(),
        "{}"
    );
}

/// A batch directory two levels down in the work tree (`--dir runs/b1`):
/// renaming its parent would move the cover with it and leave the real
/// directory open to the next entry, at a new name. The cover is on
/// `runs`, which the agent cannot rename.
#[test]
fn a_batch_directory_deep_in_the_work_tree_cannot_be_moved_out_from_under_its_cover() {
    let case = Case::new();
    let home = home_with_ssh_key(&case);
    let toml = "[defaults]\nagent = \"exec\"\nsandbox = \"bwrap\"\nkill_grace = \"500ms\"\n\n\
         [[run]]\nname = \"mover\"\ncommand = [\"sh\", \"-c\", \"mv runs runs.x && mkdir -p runs/b1 && echo moved\"]\n\n\
         [[run]]\nname = \"reader\"\ncommand = [\"sh\", \"-c\", \"cat runs.x/b1/plan.json; ls runs.x/b1; echo forged > runs.x/b1/mover/iteration-1/stdout.log; echo done\"]\n";
    std::fs::write(case.path().join("runs.toml"), toml).unwrap();
    std::fs::create_dir(case.path().join("runs")).unwrap();
    let mut cmd = case.command(&["batch", "runs.toml", "-j", "1", "--dir", "runs/b1"]);
    cmd.env("HOME", &home).env_remove("WARDEN_RUN_DIR");
    let done = case.finished(cmd.output().unwrap(), Instant::now());
    let bd = case.path().join("runs/b1");
    assert!(bd.join("plan.json").is_file(), "{}", done.stderr);
    assert!(
        !case.path().join("runs.x").exists(),
        "the agent moved the batch directory's parent: {}",
        done.stderr
    );
    let reader = run_logs(&bd.join("reader")).join("\n");
    assert!(
        !reader.contains("batch_id"),
        "the reader saw the plan:\n{reader}"
    );
    let mover_log = run_logs(&bd.join("mover")).join("\n");
    assert!(!mover_log.contains("forged"), "{mover_log}");
    assert!(!mover_log.contains("moved"), "{mover_log}");
}
