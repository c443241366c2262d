//! The one-node Slurm cluster the Slurm tests submit to (started by
//! `.ci/slurm up DIR`, named by `WARDEN_SLURM_CONF`), and the checks that it
//! behaves as those tests assume: a job's end and exit code are visible to
//! `scontrol show job`, and a job's processes, setsid orphans included, die
//! with it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{Case, kill_leftovers};

/// How long a job may take from sbatch to its end. A job starts about a
/// second after submission on an idle cluster; the bound is for a loaded
/// machine.
const JOB_BOUND: Duration = Duration::from_secs(60);

/// A running cluster to submit to.
pub(crate) struct SlurmEnv {
    /// Its slurm.conf: every client command needs it (as `SLURM_CONF`).
    pub(crate) conf: PathBuf,
}

/// How a job ended, as `scontrol show job -o` says.
#[derive(Debug)]
pub(crate) struct JobEnd {
    /// `COMPLETED`, `FAILED`, `CANCELLED`, `TIMEOUT`, ...
    pub(crate) state: String,
    /// `exit:signal`, e.g. `3:0`.
    pub(crate) exit_code: String,
    /// The whole `scontrol show job -o` line, for failure messages.
    pub(crate) line: String,
}

/// The cluster named by `WARDEN_SLURM_CONF`, or None (with a message) when
/// it is unset; under `CI=true` an unset one fails the test, since
/// `.ci/run` always starts a cluster.
pub(crate) fn slurm() -> Option<SlurmEnv> {
    match std::env::var_os("WARDEN_SLURM_CONF") {
        Some(conf) if !conf.is_empty() => Some(SlurmEnv { conf: conf.into() }),
        _ => {
            let msg = "WARDEN_SLURM_CONF is not set: no Slurm cluster to submit to \
                       (start one with `.ci/slurm up /tmp/slurm-test` and set \
                       WARDEN_SLURM_CONF=/tmp/slurm-test/slurm.conf)";
            if std::env::var_os("CI").is_some_and(|v| v == "true") {
                panic!("{msg}; .ci/run starts one");
            }
            eprintln!("SKIPPED: {msg}");
            None
        }
    }
}

impl SlurmEnv {
    /// A Slurm client (`sbatch`, `scontrol`, `squeue`, ...) pointed at this
    /// cluster.
    pub(crate) fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("SLURM_CONF", &self.conf);
        cmd
    }

    /// Submits `script` (as `sbatch --wrap`) to run in `dir`, its output in
    /// `dir/slurm-<id>.out`; returns the job id.
    pub(crate) fn submit(&self, dir: &Path, script: &str) -> String {
        let out = self
            .command("sbatch")
            .arg("--parsable")
            .arg(format!("--chdir={}", dir.display()))
            .arg(format!("--output={}/slurm-%j.out", dir.display()))
            .arg(format!("--wrap={script}"))
            .output()
            .expect("run sbatch (is slurm-wlm installed?)");
        assert!(
            out.status.success(),
            "sbatch failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        // `--parsable` prints `id` or `id;cluster`.
        let text = String::from_utf8_lossy(&out.stdout);
        let id = text
            .trim()
            .split(';')
            .next()
            .unwrap_or_default()
            .to_string();
        assert!(
            !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()),
            "sbatch printed no job id: {text:?}"
        );
        id
    }

    /// Polls `scontrol show job -o ID` until the job has ended; fails the
    /// test if it has not within `limit`.
    pub(crate) fn wait_for_end(&self, id: &str, limit: Duration) -> JobEnd {
        let start = Instant::now();
        let mut line = String::new();
        while start.elapsed() < limit {
            let out = self
                .command("scontrol")
                .args(["show", "job", "-o", id])
                .output()
                .expect("run scontrol");
            line = String::from_utf8_lossy(&out.stdout).trim().to_string();
            let state = field(&line, "JobState").unwrap_or_default();
            if is_final(state) {
                return JobEnd {
                    state: state.to_string(),
                    exit_code: field(&line, "ExitCode").unwrap_or_default().to_string(),
                    line,
                };
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("job {id} did not end within {limit:?}; last seen: {line}");
    }
}

/// The value of `Key=` in a `scontrol -o` line.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

/// Whether a job in this state has ended for good.
fn is_final(state: &str) -> bool {
    matches!(
        state,
        "COMPLETED"
            | "FAILED"
            | "CANCELLED"
            | "TIMEOUT"
            | "NODE_FAIL"
            | "OUT_OF_MEMORY"
            | "PREEMPTED"
            | "BOOT_FAIL"
            | "DEADLINE"
    )
}

#[test]
fn slurm_cluster_reports_a_jobs_end_and_exit_code() {
    let Some(slurm) = slurm() else { return };
    let case = Case::new();
    let ok = slurm.submit(case.path(), "echo written > out.txt");
    let failing = slurm.submit(case.path(), "echo failing; exit 3");

    let end = slurm.wait_for_end(&ok, JOB_BOUND);
    assert_eq!(
        (end.state.as_str(), end.exit_code.as_str()),
        ("COMPLETED", "0:0"),
        "{}",
        end.line
    );
    let written = std::fs::read_to_string(case.path().join("out.txt"))
        .unwrap_or_else(|e| panic!("the job wrote no out.txt ({e}): {}", end.line));
    assert_eq!(written, "written\n");

    let end = slurm.wait_for_end(&failing, JOB_BOUND);
    assert_eq!(
        (end.state.as_str(), end.exit_code.as_str()),
        ("FAILED", "3:0"),
        "{}",
        end.line
    );
    let output = case.path().join(format!("slurm-{failing}.out"));
    assert_eq!(
        std::fs::read_to_string(&output).unwrap_or_default(),
        "failing\n",
        "the job's output in {}",
        output.display()
    );
}

#[test]
fn slurm_cluster_kills_a_setsid_orphan_when_its_job_ends() {
    let Some(slurm) = slurm() else { return };
    let case = Case::new();
    // A duration no other process has in its command line: the orphan's
    // name to look for.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let token = format!("600.{}{nanos:09}", std::process::id());
    // The job leaves the orphan in a session of its own and checks that it
    // runs, so that its absence later is the cluster's doing.
    let id = slurm.submit(
        case.path(),
        &format!(
            "setsid sleep {token} </dev/null >/dev/null 2>&1 & orphan=$!; sleep 0.3; \
             kill -0 $orphan && echo running > orphan.txt"
        ),
    );
    let end = slurm.wait_for_end(&id, JOB_BOUND);
    assert_eq!(
        (end.state.as_str(), end.exit_code.as_str()),
        ("COMPLETED", "0:0"),
        "{}",
        end.line
    );
    assert_eq!(
        std::fs::read_to_string(case.path().join("orphan.txt")).unwrap_or_default(),
        "running\n",
        "the orphan did not start, so the test proves nothing"
    );
    // The step's processes are killed as it ends; allow for a loaded machine.
    let start = Instant::now();
    let survivors = loop {
        let left = crate::support::processes()
            .into_iter()
            .filter(|p| p.cmdline.contains(&token))
            .count();
        if left == 0 || start.elapsed() > Duration::from_secs(10) {
            break left;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let killed = kill_leftovers(&token);
    assert_eq!(
        survivors, 0,
        "the setsid orphan outlived its job (is ProctrackType proctrack/cgroup?): {killed:?}"
    );
}

/// A one-node cluster of a test's own (`.ci/slurm up` on ports of its
/// own), for a test that breaks its cluster; stopped when dropped, with
/// every job step it left.
pub(crate) struct OwnCluster {
    dir: tempfile::TempDir,
    port: u16,
    pub(crate) env: SlurmEnv,
}

impl OwnCluster {
    /// Starts one whose slurmctld calls a silent node down after
    /// `slurmd_timeout_s`. None (with a message) where the shared cluster
    /// would be skipped too, or when not root (the daemons need it).
    pub(crate) fn up(slurmd_timeout_s: u32) -> Option<OwnCluster> {
        slurm()?;
        if !crate::support::is_root() {
            eprintln!("SKIPPED: starting a Slurm cluster needs root");
            return None;
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.ci/slurm");
        let mut last = String::new();
        // Two free ports in a row, found by asking the kernel for one; a
        // race with another listener is retried.
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .expect("a free port");
            if port == u16::MAX || std::net::TcpListener::bind(("127.0.0.1", port + 1)).is_err() {
                continue;
            }
            let dir = tempfile::tempdir().expect("temp dir");
            let out = Command::new("bash")
                .arg(&script)
                .args(["up".as_ref(), dir.path().as_os_str()])
                .env("SLURM_CI_PORT", port.to_string())
                .env("SLURM_CI_CPUS", "4")
                .env("SLURM_CI_SLURMD_TIMEOUT", slurmd_timeout_s.to_string())
                .output()
                .expect(".ci/slurm up");
            if out.status.success() {
                let conf = dir.path().join("slurm.conf");
                return Some(OwnCluster {
                    dir,
                    port,
                    env: SlurmEnv { conf },
                });
            }
            last = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        panic!("could not start a cluster of the test's own: {last}");
    }

    /// The pid of one of its daemons (`slurmd`, `slurmctld`).
    pub(crate) fn daemon(&self, name: &str) -> u32 {
        let text = std::fs::read_to_string(self.dir.path().join(format!("{name}.pid")))
            .unwrap_or_else(|e| panic!("{name}.pid: {e}"));
        text.trim().parse().expect("a pid")
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.ci/slurm");
        let _ = Command::new("bash")
            .arg(&script)
            .args(["down".as_ref(), self.dir.path().as_os_str()])
            .env("SLURM_CI_PORT", self.port.to_string())
            .output();
    }
}
