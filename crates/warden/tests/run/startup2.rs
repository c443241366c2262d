//! How the agent is started in the run's cgroup: cloned straight into it
//! (`clone3` with `CLONE_INTO_CGROUP`), and, where `clone3` is refused (a
//! seccomp filter answering ENOSYS, as container runtimes install), by the
//! shim joining the cgroup for the fork. The fallback is forced here with
//! such a filter, installed on the warden under test by the test itself:
//! nothing a user can set reaches it.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Instant;

use crate::support::*;

fn skip(why: &str) {
    eprintln!("skipped: {why}");
}

/// Whether strace can trace here (it is how these tests see which way the
/// agent was started).
fn strace_works() -> bool {
    Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "true"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Has `cmd` (and everything it starts) get ENOSYS from `clone3`, as under
/// a container runtime's default seccomp profile. x86-64 only.
fn refuse_clone3(cmd: &mut Command) {
    const SYS_CLONE3: u32 = 435;
    const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
    let stmt = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let jeq = |k: u32, jt: u8, jf: u8| libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    };
    let ld = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let ret = libc::BPF_RET | libc::BPF_K;
    // seccomp_data: nr at offset 0, arch at offset 4.
    let filter = [
        stmt(ld, 4),
        jeq(AUDIT_ARCH_X86_64, 0, 3),
        stmt(ld, 0),
        jeq(SYS_CLONE3, 0, 1),
        stmt(ret, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
        stmt(ret, libc::SECCOMP_RET_ALLOW),
    ];
    // SAFETY: prctl with plain integers and a pointer to a filter that
    // lives (moved into the closure) until the child execs; no allocation
    // between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let prog = libc::sock_fprog {
                len: filter.len() as u16,
                filter: filter.as_ptr() as *mut libc::sock_filter,
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &prog as *const libc::sock_fprog,
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Runs `warden run exec -- <agent>` under `strace -f`, with or without
/// `clone3`; returns the run and what strace saw.
fn run_traced(case: &Case, agent: &[&str], clone3: bool, trace: bool) -> (Finished, String) {
    let log = case.path().join("strace.txt");
    let mut args = vec!["run", "exec", "--", "sh", "-c"];
    args.extend(agent);
    let mut cmd = if trace {
        let mut cmd = Command::new("strace");
        cmd.args(["-f", "-qq", "-e", "trace=clone3,openat", "-o"])
            .arg(&log)
            .arg(WARDEN)
            .args(&args);
        let base = case.command(&[]);
        for (k, v) in base.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        cmd.current_dir(case.path());
        cmd
    } else {
        case.command(&args)
    };
    if !clone3 {
        refuse_clone3(&mut cmd);
    }
    let start = Instant::now();
    let out: Output = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run warden");
    let traced = std::fs::read_to_string(&log).unwrap_or_default();
    (case.finished(out, start), traced)
}

/// The cgroup v2 the agent said it was in (first line of its output).
fn agent_cgroup(run: &Finished) -> String {
    let out = String::from_utf8_lossy(&run.log("stdout.log")).into_owned();
    out.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or_else(|| panic!("the agent printed no cgroup v2: {out:?}\n{}", run.stderr))
        .to_string()
}

/// The lines where a cgroup's `cgroup.procs` was opened for writing: a
/// process moving itself into a cgroup.
fn migrations(traced: &str) -> Vec<&str> {
    traced
        .lines()
        .filter(|l| l.contains("cgroup.procs") && l.contains("O_WRONLY"))
        .collect()
}

fn clone3_into_cgroup(traced: &str) -> Vec<&str> {
    traced
        .lines()
        .filter(|l| l.contains("clone3(") && l.contains("CLONE_INTO_CGROUP"))
        .collect()
}

fn assert_run_cgroup(case: &Case, run: &Finished, cgroup: &str) {
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.report()["containment"], "cgroup", "{}", run.stderr);
    let leaf = Path::new(cgroup)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("");
    assert!(
        leaf.starts_with("warden-"),
        "the agent's first act found it outside the run's cgroup: {cgroup}"
    );
    case.assert_nothing_left();
}

#[test]
fn the_agent_is_cloned_into_the_run_cgroup_and_the_shim_never_joins_it() {
    if !is_root() {
        return skip("not root: no cgroup of warden's own");
    }
    if !strace_works() {
        return skip("strace is missing or cannot trace here");
    }
    let case = Case::new();
    // Its first act: read its own cgroup.
    let (run, traced) = run_traced(&case, &["exec cat /proc/self/cgroup"], true, true);
    assert_run_cgroup(&case, &run, &agent_cgroup(&run));
    let cloned = clone3_into_cgroup(&traced);
    assert!(
        cloned.iter().any(|l| !l.contains("= -1")),
        "the agent was not cloned into the run's cgroup: {cloned:?}"
    );
    assert_eq!(
        migrations(&traced),
        Vec::<&str>::new(),
        "a process of the run migrated between cgroups"
    );
}

#[test]
fn without_clone3_the_agent_still_starts_inside_the_run_cgroup() {
    if !is_root() {
        return skip("not root: no cgroup of warden's own");
    }
    if !cfg!(target_arch = "x86_64") {
        return skip("the seccomp filter that refuses clone3 is written for x86-64");
    }
    let trace = strace_works();
    let case = Case::new();
    let (run, traced) = run_traced(&case, &["exec cat /proc/self/cgroup"], false, trace);
    assert_run_cgroup(&case, &run, &agent_cgroup(&run));
    if trace {
        let cloned = clone3_into_cgroup(&traced);
        assert!(
            !cloned.is_empty() && cloned.iter().all(|l| l.contains("ENOSYS")),
            "clone3 into the cgroup was not tried and refused: {cloned:?}"
        );
        // Into the run's cgroup for the fork, and back out.
        assert_eq!(migrations(&traced).len(), 2, "{traced}");
    }
}

#[test]
fn orphans_are_contained_whichever_way_the_agent_was_started() {
    if !is_root() {
        return skip("not root: no cgroup of warden's own");
    }
    for clone3 in [true, false] {
        if !clone3 && !cfg!(target_arch = "x86_64") {
            continue;
        }
        let case = Case::new();
        // A daemon in a session of its own; the agent exits once it runs.
        let (run, _) = run_traced(
            &case,
            &[
                "(setsid sh -c 'echo $$ > up; exec sleep 30' </dev/null >/dev/null 2>&1 &); \
               while [ ! -s up ]; do sleep 0.01; done; sleep 0.05",
            ],
            clone3,
            false,
        );
        assert_eq!(run.code, 0, "clone3 {clone3}: {}", run.stderr);
        let report = run.report();
        assert_eq!(report["containment"], "cgroup", "clone3 {clone3}");
        assert_eq!(
            report["orphans_killed"], 1,
            "clone3 {clone3}: {report:#}\n{}",
            run.stderr
        );
        case.assert_nothing_left();
    }
}

#[test]
fn both_ways_fail_alike_for_a_missing_or_unexecutable_program() {
    if !is_root() {
        return skip("not root: no cgroup of warden's own");
    }
    if !cfg!(target_arch = "x86_64") {
        return skip("the seccomp filter that refuses clone3 is written for x86-64");
    }
    for program in ["no-such-program-xyz", "./not-executable"] {
        let mut seen = Vec::new();
        for clone3 in [true, false] {
            let case = Case::new();
            std::fs::write(case.path().join("not-executable"), "#!/bin/sh\n").unwrap();
            let mut cmd = case.command(&["run", "exec", "--", program]);
            if !clone3 {
                refuse_clone3(&mut cmd);
            }
            let start = Instant::now();
            let run = case.finished(cmd.output().expect("run warden"), start);
            assert_eq!(run.code, 6, "{program}, clone3 {clone3}: {}", run.stderr);
            let report = run.report();
            assert_eq!(report["verdict"], "spawn_failed", "{program}");
            seen.push(report["reason"].as_str().unwrap_or("").to_string());
            case.assert_nothing_left();
        }
        assert_eq!(
            seen[0], seen[1],
            "{program}: the two ways say different things"
        );
    }
}

/// A cgroup v2 made for a test under the test's own, removed when dropped
/// (its processes gone by then). Not named `warden-*`: warden's sweep of
/// cgroups it left behind must not take it.
struct TestCgroup(std::path::PathBuf);

impl TestCgroup {
    fn new(name: &str) -> Option<TestCgroup> {
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let rel = own.lines().find_map(|l| l.strip_prefix("0::"))?.to_string();
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let mount = mounts
            .lines()
            .find(|l| l.contains(" - cgroup2 "))?
            .split_whitespace()
            .nth(4)?
            .to_string();
        let dir = Path::new(&mount)
            .join(rel.trim_start_matches('/'))
            .join(format!("{name}.{}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        Some(TestCgroup(dir))
    }

    /// Has `cmd` start inside this cgroup.
    fn start_inside(&self, cmd: &mut Command) {
        use std::os::unix::ffi::OsStrExt;
        let procs = std::ffi::CString::new(self.0.join("cgroup.procs").as_os_str().as_bytes())
            .expect("a path without NUL");
        // SAFETY: open, write and close with a path made before the fork;
        // nothing allocates between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let ok = libc::write(fd, b"0".as_ptr().cast(), 1) == 1;
                libc::close(fd);
                if ok {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn a_cgroup_kill_written_earlier_on_wardens_cgroup_does_not_kill_the_agent() {
    if !is_root() {
        return skip("not root: no cgroup of warden's own");
    }
    let Some(cgroup) = TestCgroup::new("killed-once") else {
        return skip("no writable cgroup v2 here");
    };
    if !cgroup.0.join("cgroup.kill").exists() {
        return skip("cgroup.kill is missing (Linux 5.14 or later)");
    }
    // Killed while empty: nothing dies, but the kernel counts the kill.
    std::fs::write(cgroup.0.join("cgroup.kill"), "1").expect("write cgroup.kill");
    let trace = strace_works();
    for attempt in 1..=3 {
        let case = Case::new();
        let log = case.path().join("strace.txt");
        let args = ["run", "exec", "--containment", "cgroup", "--", "sh", "-c"];
        let mut cmd = if trace {
            let mut cmd = Command::new("strace");
            cmd.args(["-f", "-qq", "-e", "trace=clone3,openat", "-o"])
                .arg(&log)
                .arg(WARDEN)
                .args(args);
            for (k, v) in case.command(&[]).get_envs() {
                match v {
                    Some(v) => cmd.env(k, v),
                    None => cmd.env_remove(k),
                };
            }
            cmd.current_dir(case.path());
            cmd
        } else {
            case.command(&args)
        };
        cmd.arg("exec cat /proc/self/cgroup");
        cgroup.start_inside(&mut cmd);
        let start = Instant::now();
        let out = cmd
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run warden");
        let run = case.finished(out, start);
        assert_eq!(
            run.report()["verdict"],
            "succeeded",
            "attempt {attempt}: {}",
            run.stderr
        );
        let agent_cgroup = agent_cgroup(&run);
        assert_run_cgroup(&case, &run, &agent_cgroup);
        let parent = cgroup.0.file_name().unwrap().to_str().unwrap();
        assert!(
            agent_cgroup.contains(&format!("/{parent}/warden-")),
            "the agent ran in {agent_cgroup}, not a run cgroup under warden's"
        );
        if trace {
            let traced = std::fs::read_to_string(&log).unwrap_or_default();
            // Cloned into the cgroup and killed at birth, then started
            // the other way: into the run's cgroup for the fork, and out.
            assert!(
                !clone3_into_cgroup(&traced).is_empty(),
                "clone3 into the cgroup was not tried: {traced}"
            );
            assert_eq!(migrations(&traced).len(), 2, "{traced}");
        }
    }
}
