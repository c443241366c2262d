//! A run's resource limits written into cgroups: the v2 controller where
//! it is enabled for the run's cgroup, else a cgroup of the run's own in
//! the v1 hierarchy of that controller.
//!
//! On a hybrid host (systemd's "hybrid" layout, many CI machines and
//! containers) `/sys/fs/cgroup` is a tmpfs holding one v1 hierarchy per
//! controller (`memory`, `pids`, `cpu,cpuacct`, ...) and a v2 tree at
//! `unified` with few controllers or none. There the run gets, next to
//! its v2 cgroup (which lists and kills its processes), one cgroup in each
//! v1 hierarchy a limit needs, named like the v2 one
//! (`warden-<run-id>.<pid>.<start>`) under warden's own cgroup of that
//! hierarchy. The agent joins them between its fork and its exec (see the
//! shim), so it never runs a single instruction of its own outside them;
//! whatever it starts is born inside. They are removed at the end of the
//! run, by the shim even when warden was killed. Stale ones of dead
//! wardens (killed with their shims) go like stale v2 ones
//! ([`super::cgroup::remove_stale`]), but only when a later run's limits
//! are put in place in the same hierarchy: a run without limits, or whose
//! limits fail, leaves them.
//!
//! What each limit writes:
//!
//! | limit | cgroup v2 | cgroup v1 |
//! |---|---|---|
//! | memory | `memory.max`, `memory.swap.max` = 0 | `memory.limit_in_bytes`, `memory.memsw.limit_in_bytes` (else `memory.swappiness` = 0) |
//! | pids | `pids.max` | `pids.max` |
//! | cpus | `cpu.max` = `quota 100000` | `cpu.cfs_period_us` = 100000, `cpu.cfs_quota_us` |
//!
//! and what the kernel did at them is read back, only from the cgroups of
//! the limit in question (the run's cgroup v2 has `memory.events` whenever
//! the controller is enabled there, limit or not): from `memory.events`
//! (v2, keys `oom_kill` and `oom`, the latter counting OOMs at this
//! cgroup's own limit) or `memory.oom_control` (v1, key `oom_kill`, with
//! `memory.failcnt` saying whether the limit was ever hit), and from
//! `pids.events`, key `max`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::resources::{Applied, Controller, Hierarchy, ResourceEvents, ResourceLimits};

/// The scheduling period the CPU quota is a share of: 100 ms, the
/// kernel's default.
const CPU_PERIOD_US: u64 = 100_000;

/// Why a limit cannot be put in place.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum LimitError {
    #[error("{limit} cannot be enforced here: {why}")]
    Unavailable { limit: String, why: String },
    #[error("could not set {limit}: {what} {}: {source}", .path.display())]
    Write {
        limit: String,
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

/// A cgroup v1 hierarchy: the controllers mounted together, and the
/// directory of this process's cgroup in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V1Hierarchy {
    pub controllers: Vec<String>,
    pub own: PathBuf,
}

/// The cgroups this process is in, as far as limits go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mounts {
    /// This process's cgroup v2 directory, the parent of run cgroups.
    pub v2: Option<PathBuf>,
    pub v1: Vec<V1Hierarchy>,
}

impl Mounts {
    /// Reads them from /proc.
    pub fn of_this_process() -> Self {
        let read = |p: &str| fs::read_to_string(p).unwrap_or_default();
        let mut m = Self::parse(&read("/proc/self/mountinfo"), &read("/proc/self/cgroup"));
        m.v2 = super::cgroup::own_cgroup_dir().ok();
        m
    }

    /// The v1 hierarchies from a mountinfo and a `/proc/PID/cgroup` text
    /// (`v2` is left for the caller).
    pub fn parse(mountinfo: &str, proc_cgroup: &str) -> Self {
        let mut v1 = Vec::new();
        for line in mountinfo.lines() {
            let Some((left, right)) = line.split_once(" - ") else {
                continue;
            };
            let mut r = right.split_whitespace();
            if r.next() != Some("cgroup") {
                continue;
            }
            let options = r.nth(1).unwrap_or("");
            let controllers: Vec<String> = options
                .split(',')
                .filter(|o| !matches!(*o, "rw" | "ro") && !o.contains('='))
                .map(str::to_string)
                .collect();
            let mut f = left.split_whitespace();
            let (Some(root), Some(mount_point)) = (f.nth(3), f.next()) else {
                continue;
            };
            let (root, mount_point) = (unescape(root), unescape(mount_point));
            // This process's line for the same set of controllers.
            let own = proc_cgroup.lines().find_map(|l| {
                let mut parts = l.splitn(3, ':');
                let (_, names, path) = (parts.next()?, parts.next()?, parts.next()?);
                let mut names: Vec<&str> = names.split(',').collect();
                let mut want: Vec<&str> = controllers.iter().map(String::as_str).collect();
                names.sort_unstable();
                want.sort_unstable();
                (names == want).then(|| path.to_string())
            });
            let Some(own) = own else { continue };
            if controllers.is_empty() {
                continue;
            }
            // Component by component (`/outer` is no prefix of
            // `/outerwear/job`). A cgroup outside the mount's root is not
            // visible through this mount: another mount may show it.
            let Ok(rel) = Path::new(&own).strip_prefix(Path::new(&root)) else {
                continue;
            };
            v1.push(V1Hierarchy {
                controllers,
                own: Path::new(&mount_point).join(rel),
            });
        }
        Self { v2: None, v1 }
    }

    /// The v1 hierarchy that has controller `c`, if one is mounted.
    pub fn v1_for(&self, c: Controller) -> Option<&V1Hierarchy> {
        self.v1
            .iter()
            .find(|h| h.controllers.iter().any(|n| n == c.name()))
    }

    /// Whether `c` is enabled for the children of this process's cgroup
    /// v2 (so a run cgroup made there has it).
    pub fn v2_enables(&self, c: Controller) -> bool {
        self.v2
            .as_deref()
            .and_then(|d| fs::read_to_string(d.join("cgroup.subtree_control")).ok())
            .is_some_and(|s| s.split_whitespace().any(|n| n == c.name()))
    }

    /// Where `c` would be enforced for a run, or why it cannot be.
    /// `v2_run_cgroup`: whether the run gets a cgroup v2 of its own (not
    /// with `--containment subreaper`).
    pub fn place(&self, c: Controller, v2_run_cgroup: bool) -> Result<Hierarchy, String> {
        if v2_run_cgroup && self.v2_enables(c) {
            return Ok(Hierarchy::V2);
        }
        if self.v1_for(c).is_some_and(|h| writable(&h.own)) {
            return Ok(Hierarchy::V1);
        }
        Err(self.why_not(c, v2_run_cgroup))
    }

    /// Says what is missing for `c`, in words a user can act on.
    fn why_not(&self, c: Controller, v2_run_cgroup: bool) -> String {
        let name = c.name();
        let v2 = match (&self.v2, v2_run_cgroup) {
            (None, _) => "this process is in no cgroup v2".to_string(),
            (Some(_), false) => {
                "--containment subreaper makes no cgroup v2 for the run".to_string()
            }
            (Some(d), true) => {
                let enabled = fs::read_to_string(d.join("cgroup.subtree_control"))
                    .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
                    .unwrap_or_default();
                format!(
                    "the cgroup v2 {} does not enable `{name}` for its children \
                     (cgroup.subtree_control: `{enabled}`)",
                    d.display()
                )
            }
        };
        let v1 = match self.v1_for(c) {
            Some(h) => format!(
                "the cgroup v1 `{name}` hierarchy at {} is not writable by this user",
                h.own.display()
            ),
            None => format!("no cgroup v1 `{name}` hierarchy is mounted"),
        };
        format!(
            "{v2}, and {v1}; run warden as root, in a container with its own writable cgroups, \
             or under a delegated cgroup (systemd-run --user -p Delegate=yes), or drop {}",
            c.flag()
        )
    }

    /// Checks that every limit asked for has a place; says where each
    /// would go.
    pub fn check(
        &self,
        limits: &ResourceLimits,
        v2_run_cgroup: bool,
    ) -> Result<Vec<(Controller, Hierarchy)>, LimitError> {
        limits
            .controllers()
            .into_iter()
            .map(|c| {
                self.place(c, v2_run_cgroup)
                    .and_then(|h| match (c, h) {
                        (Controller::Cpu, Hierarchy::V1) => self.v1_cpu_room(limits).map(|()| h),
                        _ => Ok(h),
                    })
                    .map(|h| (c, h))
                    .map_err(|why| LimitError::Unavailable {
                        limit: limits.describe(c),
                        why,
                    })
            })
            .collect()
    }

    /// A v1 CPU quota may not exceed the quota of the cgroup it is made in
    /// (as a share of its period): the kernel refuses it with EINVAL only
    /// when the run starts. Said here, up front, with the numbers.
    fn v1_cpu_room(&self, limits: &ResourceLimits) -> Result<(), String> {
        let (Some(h), Some(cpus)) = (self.v1_for(Controller::Cpu), limits.cpus) else {
            return Ok(());
        };
        let read = |f: &str| -> Option<i64> {
            fs::read_to_string(h.own.join(f)).ok()?.trim().parse().ok()
        };
        let (Some(quota), Some(period)) = (read("cpu.cfs_quota_us"), read("cpu.cfs_period_us"))
        else {
            return Ok(());
        };
        // -1: no quota above.
        if quota <= 0 || period <= 0 {
            return Ok(());
        }
        let wanted = i128::from(cpus.millis());
        if wanted * i128::from(period) > i128::from(quota) * 1000 {
            return Err(format!(
                "the cgroup v1 {} it would be made in allows at most {:.3} CPUs \
                 (cpu.cfs_quota_us {quota} per cpu.cfs_period_us {period}); \
                 ask for no more with --cpus",
                h.own.display(),
                quota as f64 / period as f64
            ));
        }
        Ok(())
    }
}

/// Whether this process may make a cgroup in `dir` (for tests elsewhere).
#[cfg(test)]
pub(crate) fn writable_dir(dir: &Path) -> bool {
    writable(dir)
}

/// Whether this process may make a cgroup in `dir`.
fn writable(dir: &Path) -> bool {
    rustix::fs::access(
        dir,
        rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
    )
    .is_ok()
}

/// The limits in force for one run, and the v1 cgroups made for them.
#[derive(Debug, Clone, Default)]
pub struct RunLimits {
    pub applied: Vec<Applied>,
    /// The v1 cgroups made for the run (the agent joins each before its
    /// exec; removed at the end).
    pub v1_dirs: Vec<PathBuf>,
}

impl RunLimits {
    /// Puts `limits` in place for a run: into its cgroup v2 `v2` where
    /// the controller is there, else into a v1 cgroup of its own named
    /// `name` (made here). On error, whatever was made is removed.
    pub fn apply(
        limits: &ResourceLimits,
        v2: Option<&Path>,
        name: &str,
        mounts: &Mounts,
    ) -> Result<Self, LimitError> {
        let mut made = Self::default();
        match made.apply_each(limits, v2, name, mounts) {
            Ok(()) => Ok(made),
            Err(e) => {
                made.remove();
                Err(e)
            }
        }
    }

    fn apply_each(
        &mut self,
        limits: &ResourceLimits,
        v2: Option<&Path>,
        name: &str,
        mounts: &Mounts,
    ) -> Result<(), LimitError> {
        for c in limits.controllers() {
            let limit = limits.describe(c);
            let in_v2 = v2.filter(|d| d.join(v2_file(c)).exists());
            let (hierarchy, dir) = match in_v2 {
                Some(d) => (Hierarchy::V2, d.to_path_buf()),
                None => {
                    let Some(h) = mounts.v1_for(c) else {
                        return Err(LimitError::Unavailable {
                            limit,
                            why: mounts.why_not(c, v2.is_some()),
                        });
                    };
                    let dir = h.own.join(name);
                    if !self.v1_dirs.contains(&dir) {
                        fs::create_dir(&dir).map_err(|source| LimitError::Write {
                            limit: limit.clone(),
                            what: "could not make the cgroup",
                            path: dir.clone(),
                            source,
                        })?;
                        self.v1_dirs.push(dir.clone());
                    }
                    (Hierarchy::V1, dir)
                }
            };
            let swap = write_limit(&dir, hierarchy, c, limits).map_err(|(path, source)| {
                LimitError::Write {
                    limit,
                    what: "writing",
                    path,
                    source,
                }
            })?;
            self.applied.push(Applied {
                controller: c,
                hierarchy,
                dir,
                swap,
            });
        }
        Ok(())
    }

    /// Every cgroup directory a limit went to (v2 and v1).
    pub fn dirs(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = Vec::new();
        for a in &self.applied {
            if !dirs.contains(&a.dir) {
                dirs.push(a.dir.clone());
            }
        }
        dirs
    }

    /// The cgroups of the memory limit and of the process limit.
    pub fn counted_dirs(&self) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let of = |c: Controller| {
            self.applied
                .iter()
                .filter(|a| a.controller == c)
                .map(|a| a.dir.clone())
                .collect()
        };
        (of(Controller::Memory), of(Controller::Pids))
    }

    /// What the kernel did at the limits so far.
    pub fn events(&self) -> ResourceEvents {
        let (memory, pids) = self.counted_dirs();
        events_at(&memory, &pids)
    }

    /// Removes the v1 cgroups, SIGKILLing anything still in them first
    /// (nothing should be: the run's sweep is over). Returns whether all
    /// are gone.
    pub fn remove(&self) -> bool {
        remove_v1(&self.v1_dirs)
    }
}

/// Removes v1 cgroups made for a run (by the shim, which knows only the
/// directories).
pub fn remove_v1(dirs: &[PathBuf]) -> bool {
    let mut all = true;
    for dir in dirs {
        for pid in procs_in(dir) {
            let _ = super::send(super::Target::Process(pid), super::Signal::Kill);
        }
        let mut gone = false;
        for _ in 0..50 {
            match fs::remove_dir(dir) {
                Ok(()) => gone = true,
                Err(e) if e.kind() == io::ErrorKind::NotFound => gone = true,
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(2)),
            }
            if gone {
                break;
            }
        }
        all &= gone;
    }
    all
}

fn procs_in(dir: &Path) -> Vec<i32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// The file whose presence says the v2 cgroup has controller `c`.
fn v2_file(c: Controller) -> &'static str {
    match c {
        Controller::Memory => "memory.max",
        Controller::Pids => "pids.max",
        Controller::Cpu => "cpu.max",
    }
}

/// Writes the limit of `c` into the cgroup `dir`. Returns, for memory,
/// how swap was kept out; the failing file and error otherwise.
pub fn write_limit(
    dir: &Path,
    hierarchy: Hierarchy,
    c: Controller,
    limits: &ResourceLimits,
) -> Result<Option<&'static str>, (PathBuf, io::Error)> {
    let put = |file: &str, value: String| {
        let path = dir.join(file);
        // The files exist in every cgroup of the controller: never create
        // one (a typo would then go unnoticed).
        fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|mut f| io::Write::write_all(&mut f, value.as_bytes()))
            .map_err(|e| (path, e))
    };
    let has = |file: &str| dir.join(file).exists();
    match (c, hierarchy) {
        (Controller::Memory, h) => {
            let bytes = limits.memory.unwrap_or(u64::MAX);
            match h {
                Hierarchy::V2 => {
                    put("memory.max", bytes.to_string())?;
                    if has("memory.swap.max") {
                        put("memory.swap.max", "0".into())?;
                        Ok(Some("swap.max"))
                    } else {
                        // No swap accounting: the kernel was built or
                        // booted without it, and swap cannot be charged.
                        Ok(Some("none"))
                    }
                }
                Hierarchy::V1 => {
                    // memsw (memory + swap) may never be below the memory
                    // limit: set the memory limit first.
                    put("memory.limit_in_bytes", bytes.to_string())?;
                    if has("memory.memsw.limit_in_bytes") {
                        put("memory.memsw.limit_in_bytes", bytes.to_string())?;
                        Ok(Some("memsw"))
                    } else {
                        put("memory.swappiness", "0".into())?;
                        Ok(Some("swappiness"))
                    }
                }
            }
        }
        (Controller::Pids, _) => {
            put("pids.max", limits.pids.unwrap_or(0).to_string())?;
            Ok(None)
        }
        (Controller::Cpu, h) => {
            let millis = u64::from(limits.cpus.map_or(0, |c| c.millis()));
            let quota = millis * CPU_PERIOD_US / 1000;
            match h {
                Hierarchy::V2 => put("cpu.max", format!("{quota} {CPU_PERIOD_US}"))?,
                Hierarchy::V1 => {
                    put("cpu.cfs_period_us", CPU_PERIOD_US.to_string())?;
                    put("cpu.cfs_quota_us", quota.to_string())?;
                }
            }
            Ok(None)
        }
    }
}

/// The OOM kills counted in the cgroups of the memory limit `memory`
/// (`memory.events` or `memory.oom_control`, where each exists) and the
/// refused forks in those of the process limit `pids` (`pids.events`).
pub fn events_at(memory: &[PathBuf], pids: &[PathBuf]) -> ResourceEvents {
    let mut ev = ResourceEvents::default();
    let count = |file: &Path, key: &str| -> u64 {
        fs::read_to_string(file)
            .ok()
            .and_then(|s| {
                s.lines().find_map(|l| {
                    let (k, v) = l.split_once(' ')?;
                    (k == key).then(|| v.trim().parse().ok()).flatten()
                })
            })
            .unwrap_or(0)
    };
    for dir in memory {
        ev.oom_kills += count(&dir.join("memory.events"), "oom_kill");
        // v2 counts an OOM at this cgroup's own limit apart (`oom`); its
        // `oom_kill` counts kills for any OOM, a parent's or the machine's.
        ev.oom_at_limit += count(&dir.join("memory.events"), "oom");
        let v1_kills = count(&dir.join("memory.oom_control"), "oom_kill");
        ev.oom_kills += v1_kills;
        // v1 has no such counter: kills in a cgroup whose usage reached
        // its limit are taken to be at the limit. Reached: a fail count
        // moved (memory, or memory and swap together), or the peak usage
        // is the limit (kernels differ on which counter moves).
        let plain = |f: &str| count_plain(&dir.join(f));
        let limit = plain("memory.limit_in_bytes");
        let reached = plain("memory.failcnt") > 0
            || plain("memory.memsw.failcnt") > 0
            || (limit > 0 && plain("memory.max_usage_in_bytes") >= limit);
        if reached {
            ev.oom_at_limit += v1_kills;
        }
    }
    for dir in pids {
        ev.pids_max += count(&dir.join("pids.events"), "max");
    }
    ev
}

/// A file holding one number (`memory.failcnt`); 0 when it cannot be read.
fn count_plain(file: &Path) -> u64 {
    fs::read_to_string(file)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Cpus;

    const MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 /outer /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw";

    const PROC_CGROUP: &str = "\
9:name=systemd:/
8:pids:/ci/job
4:memory:/outer/job
1:cpuacct,cpu:/
0::/";

    #[test]
    fn v1_hierarchies_are_found_with_this_process_s_cgroup_in_each() {
        let m = Mounts::parse(MOUNTINFO, PROC_CGROUP);
        let own = |c| m.v1_for(c).map(|h| h.own.clone());
        assert_eq!(
            own(Controller::Memory),
            Some("/sys/fs/cgroup/memory/job".into()),
            "the mount's root is taken off the path"
        );
        assert_eq!(
            own(Controller::Pids),
            Some("/sys/fs/cgroup/pids/ci/job".into())
        );
        assert_eq!(
            own(Controller::Cpu),
            Some("/sys/fs/cgroup/cpu,cpuacct".into()),
            "co-mounted controllers, in any order"
        );
        assert_eq!(m.v1.len(), 3, "name=systemd is no controller: {:?}", m.v1);
    }

    #[test]
    fn a_v1_cpu_quota_above_the_parent_s_is_refused_up_front() {
        let v1 = fake_cgroup(&[]);
        fs::write(v1.path().join("cpu.cfs_quota_us"), "100000\n").unwrap();
        fs::write(v1.path().join("cpu.cfs_period_us"), "100000\n").unwrap();
        let m = Mounts {
            v2: None,
            v1: vec![V1Hierarchy {
                controllers: vec!["cpu".into(), "cpuacct".into()],
                own: v1.path().into(),
            }],
        };
        let wants = |c: &str| ResourceLimits {
            cpus: Cpus::parse(c),
            ..ResourceLimits::default()
        };
        let e = m.check(&wants("1.5"), false).unwrap_err().to_string();
        assert!(
            e.contains("at most 1.000 CPUs") && e.contains("--cpus"),
            "{e}"
        );
        assert!(m.check(&wants("1"), false).is_ok());
        // No quota above (-1): anything goes.
        fs::write(v1.path().join("cpu.cfs_quota_us"), "-1\n").unwrap();
        assert!(m.check(&wants("64"), false).is_ok());
    }

    #[test]
    fn a_cgroup_outside_the_mount_s_root_is_not_placed_under_it() {
        for own in ["/outerwear/job", "/elsewhere/job"] {
            let cgroup = format!("4:memory:{own}\n");
            let m = Mounts::parse(MOUNTINFO, &cgroup);
            assert_eq!(m.v1_for(Controller::Memory), None, "{own}: {:?}", m.v1);
        }
    }

    fn limits() -> ResourceLimits {
        ResourceLimits {
            memory: Some(32 << 20),
            pids: Some(64),
            cpus: Cpus::parse("1.5"),
        }
    }

    /// A directory with the files of a cgroup of these controllers.
    fn fake_cgroup(files: &[&str]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for f in files {
            fs::write(d.path().join(f), "").unwrap();
        }
        d
    }

    fn read(d: &Path, f: &str) -> String {
        fs::read_to_string(d.join(f)).unwrap()
    }

    #[test]
    fn v1_files_get_the_limits_with_swap_off() {
        let d = fake_cgroup(&[
            "memory.limit_in_bytes",
            "memory.memsw.limit_in_bytes",
            "pids.max",
            "cpu.cfs_period_us",
            "cpu.cfs_quota_us",
        ]);
        let p = d.path();
        let l = limits();
        let swap = write_limit(p, Hierarchy::V1, Controller::Memory, &l).unwrap();
        assert_eq!(swap, Some("memsw"));
        write_limit(p, Hierarchy::V1, Controller::Pids, &l).unwrap();
        write_limit(p, Hierarchy::V1, Controller::Cpu, &l).unwrap();
        assert_eq!(read(p, "memory.limit_in_bytes"), "33554432");
        assert_eq!(read(p, "memory.memsw.limit_in_bytes"), "33554432");
        assert_eq!(read(p, "pids.max"), "64");
        assert_eq!(read(p, "cpu.cfs_period_us"), "100000");
        assert_eq!(read(p, "cpu.cfs_quota_us"), "150000");

        // Without swap accounting, swappiness 0 keeps the run out of swap.
        let d = fake_cgroup(&["memory.limit_in_bytes", "memory.swappiness"]);
        let swap = write_limit(d.path(), Hierarchy::V1, Controller::Memory, &l).unwrap();
        assert_eq!(swap, Some("swappiness"));
        assert_eq!(read(d.path(), "memory.swappiness"), "0");
    }

    #[test]
    fn v2_files_get_the_limits_with_swap_off() {
        let d = fake_cgroup(&["memory.max", "memory.swap.max", "pids.max", "cpu.max"]);
        let p = d.path();
        let l = limits();
        for c in Controller::ALL {
            write_limit(p, Hierarchy::V2, c, &l).unwrap();
        }
        assert_eq!(read(p, "memory.max"), "33554432");
        assert_eq!(read(p, "memory.swap.max"), "0");
        assert_eq!(read(p, "pids.max"), "64");
        assert_eq!(read(p, "cpu.max"), "150000 100000");
    }

    #[test]
    fn a_missing_control_file_is_an_error_naming_it_not_a_new_file() {
        let d = fake_cgroup(&[]);
        let (path, e) =
            write_limit(d.path(), Hierarchy::V1, Controller::Pids, &limits()).unwrap_err();
        assert!(path.ends_with("pids.max"), "{}", path.display());
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(!d.path().join("pids.max").exists());
    }

    #[test]
    fn applying_puts_each_limit_where_its_controller_is() {
        // v2 has pids only; memory and cpu go to v1 cgroups made for the run.
        let v2 = fake_cgroup(&["pids.max", "pids.events"]);
        let v1_memory = tempfile::tempdir().unwrap();
        let v1_cpu = tempfile::tempdir().unwrap();
        let mounts = Mounts {
            v2: None,
            v1: vec![
                V1Hierarchy {
                    controllers: vec!["memory".into()],
                    own: v1_memory.path().into(),
                },
                V1Hierarchy {
                    controllers: vec!["cpu".into(), "cpuacct".into()],
                    own: v1_cpu.path().into(),
                },
            ],
        };
        // A plain directory has no control files: the write fails, and
        // what was made is removed again.
        let e = RunLimits::apply(&limits(), Some(v2.path()), "warden-x.1.2", &mounts)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--memory 32MiB") && e.contains("memory.limit_in_bytes"),
            "{e}"
        );
        assert!(!v1_memory.path().join("warden-x.1.2").exists());

        let only_pids = ResourceLimits {
            pids: Some(10),
            ..ResourceLimits::default()
        };
        let r = RunLimits::apply(&only_pids, Some(v2.path()), "warden-x.1.2", &mounts).unwrap();
        assert_eq!(r.applied.len(), 1);
        assert_eq!(r.applied[0].hierarchy, Hierarchy::V2);
        assert!(r.v1_dirs.is_empty());
        assert_eq!(read(v2.path(), "pids.max"), "10");

        fs::write(v2.path().join("pids.events"), "max 7\n").unwrap();
        assert_eq!(r.events().pids_max, 7);

        // Memory with no v1 hierarchy and no v2 controller: refused, named.
        let none = Mounts::default();
        let e = RunLimits::apply(&limits(), None, "n", &none)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--memory 32MiB cannot be enforced here"),
            "{e}"
        );
        assert!(
            e.contains("no cgroup v1 `memory` hierarchy is mounted"),
            "{e}"
        );
    }

    #[test]
    fn the_check_names_the_limit_and_what_is_missing() {
        let m = Mounts::default();
        let e = m.check(&limits(), true).unwrap_err().to_string();
        assert!(e.contains("--memory 32MiB cannot be enforced here"), "{e}");
        assert!(e.contains("in no cgroup v2"), "{e}");
        assert!(
            m.check(&ResourceLimits::default(), true)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_controller_enabled_in_v2_goes_there_unless_the_run_has_no_v2_cgroup() {
        let v2 = fake_cgroup(&[]);
        fs::write(v2.path().join("cgroup.subtree_control"), "cpu memory\n").unwrap();
        let m = Mounts {
            v2: Some(v2.path().into()),
            v1: Vec::new(),
        };
        assert_eq!(m.place(Controller::Memory, true), Ok(Hierarchy::V2));
        assert_eq!(m.place(Controller::Cpu, true), Ok(Hierarchy::V2));
        let pids = m.place(Controller::Pids, true).unwrap_err();
        assert!(
            pids.contains("does not enable `pids`") && pids.contains("`cpu memory`"),
            "{pids}"
        );
        let e = m.place(Controller::Memory, false).unwrap_err();
        assert!(e.contains("--containment subreaper"), "{e}");
        assert!(e.contains("drop --memory"), "{e}");
        // With a writable v1 hierarchy, the same run falls back to it.
        let v1 = tempfile::tempdir().unwrap();
        let m = Mounts {
            v1: vec![V1Hierarchy {
                controllers: vec!["memory".into()],
                own: v1.path().into(),
            }],
            ..m
        };
        assert_eq!(m.place(Controller::Memory, false), Ok(Hierarchy::V1));
    }

    #[test]
    fn events_are_counted_from_v1_and_v2_files() {
        let v2 = fake_cgroup(&[]);
        fs::write(
            v2.path().join("memory.events"),
            "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n",
        )
        .unwrap();
        let v1 = fake_cgroup(&[]);
        fs::write(
            v1.path().join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
        )
        .unwrap();
        fs::write(v1.path().join("memory.failcnt"), "0\n").unwrap();
        fs::write(v1.path().join("memory.limit_in_bytes"), "33554432\n").unwrap();
        fs::write(v1.path().join("memory.max_usage_in_bytes"), "33554432\n").unwrap();
        fs::write(v1.path().join("pids.events"), "max 40\n").unwrap();
        let ev = events_at(&[v2.path().into(), v1.path().into()], &[v1.path().into()]);
        assert_eq!(
            ev,
            ResourceEvents {
                oom_kills: 3,
                oom_at_limit: 3,
                pids_max: 40
            }
        );
    }

    /// With only --pids applied, the run's cgroup v2 still has
    /// memory.events (the controller is enabled there): an OOM against a
    /// parent's limit must not be counted as the run's.
    #[test]
    fn each_limit_counts_only_in_its_own_cgroups() {
        let v2 = fake_cgroup(&[]);
        fs::write(
            v2.path().join("memory.events"),
            "max 0\noom 0\noom_kill 2\n",
        )
        .unwrap();
        fs::write(v2.path().join("pids.events"), "max 3\n").unwrap();
        let pids_only = RunLimits {
            applied: vec![Applied {
                controller: Controller::Pids,
                hierarchy: Hierarchy::V2,
                dir: v2.path().into(),
                swap: None,
            }],
            v1_dirs: Vec::new(),
        };
        assert_eq!(
            pids_only.events(),
            ResourceEvents {
                oom_kills: 0,
                oom_at_limit: 0,
                pids_max: 3
            }
        );
        // With --memory there too: the kills count, but not as the
        // limit's (`oom` did not move: the OOM was a parent's).
        let both = RunLimits {
            applied: vec![
                Applied {
                    controller: Controller::Memory,
                    hierarchy: Hierarchy::V2,
                    dir: v2.path().into(),
                    swap: None,
                },
                pids_only.applied[0].clone(),
            ],
            v1_dirs: Vec::new(),
        };
        assert_eq!(
            both.events(),
            ResourceEvents {
                oom_kills: 2,
                oom_at_limit: 0,
                pids_max: 3
            }
        );
    }
}
