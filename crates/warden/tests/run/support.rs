//! The harness for warden's integration tests: runs the real `warden`
//! binary on real processes in a temporary directory, and finds any process
//! a run left behind by a marker in its environment.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const WARDEN: &str = env!("CARGO_BIN_EXE_warden");

/// Both containments the tests run under: the cgroup where this machine
/// lets warden make one, and the subreaper alone.
pub const CONTAINMENTS: &[&str] = &["auto", "subreaper"];

/// One test's sandbox: a temporary working directory and a unique marker
/// that every process started from it inherits.
pub struct Case {
    pub dir: tempfile::TempDir,
    pub mark: String,
    /// The case's XDG_STATE_HOME (where warden keeps batch keys): its own,
    /// outside its directory.
    pub state: tempfile::TempDir,
}

pub struct Finished {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    pub run_dir: PathBuf,
}

impl Finished {
    pub fn report(&self) -> Value {
        let text = std::fs::read_to_string(self.run_dir.join("run.json")).unwrap_or_else(|e| {
            panic!(
                "run.json missing in {}: {e}\nstderr:\n{}",
                self.run_dir.display(),
                self.stderr
            )
        });
        serde_json::from_str(&text).expect("run.json is JSON")
    }

    /// The run's events, with the plain lines an `exec` run's
    /// events.jsonl only points at read back as their `text` and `stderr`
    /// events (by `warden report --events`).
    pub fn events(&self) -> Vec<Value> {
        let raw = self.raw_events();
        if !raw.iter().any(|e| e["kind"] == "lines") {
            return raw;
        }
        let out = Command::new(WARDEN)
            .args(["report", "--events"])
            .arg(&self.run_dir)
            .output()
            .expect("run warden report --events");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("each event line is JSON"))
            .collect()
    }

    /// events.jsonl as it is on disk.
    pub fn raw_events(&self) -> Vec<Value> {
        std::fs::read_to_string(self.run_dir.join("events.jsonl"))
            .expect("events.jsonl")
            .lines()
            .map(|l| serde_json::from_str(l).expect("each event line is JSON"))
            .collect()
    }

    pub fn events_of(&self, kind: &str) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|e| e["kind"] == kind)
            .collect()
    }

    pub fn log(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.run_dir.join(name)).expect("log file")
    }

    pub fn verdict(&self) -> String {
        self.report()["verdict"]
            .as_str()
            .unwrap_or("null")
            .to_string()
    }
}

impl Case {
    pub fn new() -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let mark = format!(
            "wt-{}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos()
        );
        Self {
            dir: tempfile::tempdir().expect("tempdir"),
            mark,
            state: tempfile::tempdir().expect("tempdir"),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn run_dir(&self) -> PathBuf {
        self.dir.path().join("run")
    }

    /// `warden` with its args, in the case's directory, with the marker,
    /// and the run dir at `<dir>/run`.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(WARDEN);
        cmd.current_dir(self.path())
            .env("WARDEN_TEST_MARK", &self.mark)
            .env("WARDEN_RUN_DIR", self.run_dir())
            .env("XDG_STATE_HOME", self.state.path())
            // The user's own warden.toml, if any, stays out of the tests.
            .env("XDG_CONFIG_HOME", self.state.path())
            .env_remove("GITHUB_ACTIONS")
            // A test that sets GITHUB_ACTIONS must not append to the CI
            // job's own outputs.
            .env_remove("GITHUB_OUTPUT")
            .env_remove("GITHUB_STEP_SUMMARY")
            .args(args)
            .stdin(Stdio::null());
        for key in [
            "TIMEOUT",
            "STALL_TIMEOUT",
            "STARTUP_TIMEOUT",
            "COMPLETION_TIMEOUT",
            "DRAIN_GRACE",
            "KILL_GRACE",
            "CONFIG",
            "JSON",
            "QUIET",
            "CONTAINMENT",
        ] {
            cmd.env_remove(format!("WARDEN_{key}"));
        }
        cmd
    }

    /// Runs warden to the end.
    pub fn run(&self, args: &[&str]) -> Finished {
        let start = Instant::now();
        let out: Output = self.command(args).output().expect("run warden");
        self.finished(out, start)
    }

    pub fn finished(&self, out: Output, start: Instant) -> Finished {
        Finished {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            elapsed: start.elapsed(),
            run_dir: self.run_dir(),
        }
    }

    /// Starts warden in the background.
    pub fn spawn(&self, args: &[&str]) -> Child {
        self.command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn warden")
    }

    /// Live processes (not zombies) carrying this case's marker, other than
    /// the test itself.
    pub fn survivors(&self) -> Vec<(i32, String)> {
        let needle = format!("WARDEN_TEST_MARK={}", self.mark);
        processes()
            .into_iter()
            .filter(|p| p.environ.split(|b| *b == 0).any(|v| v == needle.as_bytes()))
            .map(|p| (p.pid, p.cmdline))
            .collect()
    }

    /// Waits up to `limit` for every marked process to be gone; returns
    /// what is left.
    pub fn survivors_after(&self, limit: Duration) -> Vec<(i32, String)> {
        let until = Instant::now() + limit;
        loop {
            let left = self.survivors();
            if left.is_empty() || Instant::now() > until {
                return left;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Asserts nothing of the run is left; kills leftovers so that one
    /// failure does not leak into other tests.
    pub fn assert_nothing_left(&self) {
        let left = self.survivors_after(Duration::from_millis(500));
        for (pid, _) in &left {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
        assert!(left.is_empty(), "processes of the run survived: {left:?}");
    }

    /// Waits until `file` (relative to the run dir) contains `needle`.
    pub fn wait_for_output(&self, file: &str, needle: &str, limit: Duration) {
        let until = Instant::now() + limit;
        let path = self.run_dir().join(file);
        while Instant::now() < until {
            if std::fs::read_to_string(&path).is_ok_and(|s| s.contains(needle)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("`{needle}` never appeared in {}", path.display());
    }
}

/// Sends a signal by name to a pid.
pub fn kill(pid: u32, signal: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .expect("kill")
        .success();
    assert!(ok, "kill -{signal} {pid} failed");
}

pub fn ms(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("expected milliseconds, got {v}"))
}

/// A live process (not a zombie, not the test itself).
pub struct Proc {
    pub pid: i32,
    pub cmdline: String,
    pub environ: Vec<u8>,
}

/// Every live process on the machine but the test.
pub fn processes() -> Vec<Proc> {
    let me = std::process::id() as i32;
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next().map(str::to_string));
        if state.as_deref().is_none_or(|s| s == "Z") {
            continue;
        }
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        found.push(Proc {
            pid,
            cmdline: String::from_utf8_lossy(&cmd).replace('\0', " "),
            environ: std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default(),
        });
    }
    found
}

/// A `sleep` command no other test runs, so its leftovers can be found
/// by name with [`kill_leftovers`]: the test process's id and a count,
/// each at a fixed width, so no token is a part of another.
pub fn unique_sleep() -> String {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 10_000;
    format!("sleep 9{:07}{n:04}", std::process::id() % 10_000_000)
}

/// Kills (SIGKILL) and returns every live process whose command line
/// contains `token`: leftovers found by name, for processes that do not
/// carry the marker (a sandbox's allowlisted environment drops it).
pub fn kill_leftovers(token: &str) -> Vec<(i32, String)> {
    let left: Vec<(i32, String)> = processes()
        .into_iter()
        .filter(|p| p.cmdline.contains(token))
        .map(|p| (p.pid, p.cmdline))
        .collect();
    for (pid, _) in &left {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    left
}

/// Whether the tests run as root (root-only cases skip with a message
/// otherwise).
/// Every `run.json` under `dir` (at any depth), read.
pub fn run_reports_under(dir: &Path) -> Vec<Value> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.file_name().is_some_and(|n| n == "run.json") {
                found.push(serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap());
            }
        }
    }
    found
}

pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Whether bubblewrap can make a PID namespace here.
pub fn bwrap_works() -> bool {
    Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "--unshare-pid", "true"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs git in `dir`; its stdout, trimmed. Fails the test if git fails.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A HOME for the test with a planted credential.
pub fn home_with_ssh_key(case: &Case) -> PathBuf {
    let home = case.path().join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_test"), "PRIVATE-KEY-MATERIAL").unwrap();
    home
}

/// `warden run exec --sandbox bwrap` of a shell script, with `home` as HOME.
pub fn run_in_bwrap(case: &Case, home: &Path, extra: &[&str], script: &str) -> Finished {
    let mut args = vec!["run", "exec", "--sandbox", "bwrap", "--kill-grace", "500ms"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    let mut cmd = case.command(&args);
    cmd.env("HOME", home);
    case.finished(cmd.output().unwrap(), Instant::now())
}

/// A repository with one commit (`README`, by "Test Agent") in the case's
/// directory; its HEAD.
pub fn repo(case: &Case) -> String {
    let d = case.path();
    git(d, &["init", "-q", "-b", "main"]);
    git(d, &["config", "user.name", "Test Agent"]);
    git(d, &["config", "user.email", "agent@example.com"]);
    std::fs::write(d.join("README"), "hello\n").unwrap();
    git(d, &["add", "README"]);
    git(d, &["commit", "-qm", "initial"]);
    git(d, &["rev-parse", "HEAD"])
}

/// Writes `text` to `path` as an executable (a stand-in CLI, a script).
pub fn write_script(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Runs the shell command `inner` in a pseudo-terminal whose size is
/// 0 x 0 (as one nobody sized), from the case's directory, through
/// `script`; returns what the terminal showed, ending `EXIT=<status>`.
/// `None` (with a message) where `script` (util-linux) is not installed.
pub fn in_unsized_terminal(case: &Case, inner: &str) -> Option<String> {
    let have_script = Command::new("sh")
        .args(["-c", "command -v script"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_script {
        eprintln!("SKIPPED: script (util-linux) is not installed");
        return None;
    }
    let inner = format!("stty rows 0 cols 0; {inner}; echo EXIT=$?");
    let out = Command::new("script")
        .args(["-qfc", &inner, "/dev/null"])
        .current_dir(case.path())
        .stdin(Stdio::null())
        .output()
        .expect("run script");
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A session of two `exec` iterations in the case's repository, each
/// committing one change (see [`repo`]).
pub fn two_committing_iterations(case: &Case) -> Finished {
    case.run(&[
        "run",
        "exec",
        "--iterations",
        "2",
        "--",
        "sh",
        "-c",
        "n=$(cat count 2>/dev/null || echo 0); echo $((n+1)) > count; git add count; git commit -qm it; echo done",
    ])
}

/// Leaves out of `cmd`'s environment the telemetry settings of the
/// test's own (the `OTEL_*` variables warden reads, `TRACEPARENT`): a test
/// of telemetry sets what it means to.
pub fn without_own_telemetry(cmd: &mut Command) {
    for v in warden_run::telemetry::ENV_VARS {
        cmd.env_remove(v);
    }
    cmd.env_remove("TRACEPARENT");
}
