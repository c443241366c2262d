//! Resource limits for a run's processes: memory, how many processes, how
//! much CPU. The values only; [`crate::os::limits`] writes them into the
//! run's cgroups.
//!
//! Each limit goes to the cgroup v2 controller where it is enabled for the
//! run's cgroup, else to a cgroup v1 hierarchy of that controller (hybrid
//! hosts mount `memory`, `pids` and `cpu` as v1 next to a v2 tree that has
//! few controllers or none). A limit no cgroup can enforce is refused: no
//! rlimit is the same thing (`RLIMIT_AS` bounds address space, not memory
//! in use, and breaks runtimes that reserve large heaps; `RLIMIT_NPROC`
//! counts every process of the user, not the run's).

use std::fmt;

/// The limits asked for; `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ResourceLimits {
    /// Memory in use by all the run's processes together, in bytes; swap
    /// is off for the run (the limit is memory and swap together).
    pub memory: Option<u64>,
    /// Processes (and threads) alive at once in the run.
    pub pids: Option<u64>,
    /// CPU time per wall-clock time, in CPUs (`1.5` is one and a half).
    pub cpus: Option<Cpus>,
}

impl ResourceLimits {
    /// Whether any limit is asked for.
    pub fn any(&self) -> bool {
        self.memory.is_some() || self.pids.is_some() || self.cpus.is_some()
    }

    /// The controllers the limits asked for need.
    pub fn controllers(&self) -> Vec<Controller> {
        let mut c = Vec::new();
        if self.memory.is_some() {
            c.push(Controller::Memory);
        }
        if self.pids.is_some() {
            c.push(Controller::Pids);
        }
        if self.cpus.is_some() {
            c.push(Controller::Cpu);
        }
        c
    }

    /// The limit asked for with `c`, as the user wrote it (`--memory 32MiB`).
    pub fn describe(&self, c: Controller) -> String {
        let value = match c {
            Controller::Memory => self.memory.map(format_bytes),
            Controller::Pids => self.pids.map(|p| p.to_string()),
            Controller::Cpu => self.cpus.map(|c| c.to_string()),
        };
        format!("{} {}", c.flag(), value.unwrap_or_default())
    }
}

/// A CPU quota, in thousandths of a CPU: `1.5` CPUs is 1500.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cpus(u32);

impl Cpus {
    /// The least quota the kernel takes: 1 ms per 100 ms period.
    pub const MIN_MILLIS: u32 = 10;
    /// More CPUs than any machine has; past this a value is a mistake.
    pub const MAX_MILLIS: u32 = 4096 * 1000;

    /// `millis` thousandths of a CPU, if within bounds.
    pub fn from_millis(millis: u32) -> Option<Self> {
        (Self::MIN_MILLIS..=Self::MAX_MILLIS)
            .contains(&millis)
            .then_some(Self(millis))
    }

    pub fn millis(self) -> u32 {
        self.0
    }

    /// As a number of CPUs.
    pub fn as_f64(self) -> f64 {
        f64::from(self.0) / 1000.0
    }

    /// Parses `1`, `1.5`, `0.25`: at most three decimals.
    pub fn parse(s: &str) -> Option<Self> {
        let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
        if whole.is_empty() && frac.is_empty()
            || !whole.bytes().all(|b| b.is_ascii_digit())
            || !frac.bytes().all(|b| b.is_ascii_digit())
            || frac.len() > 3
        {
            return None;
        }
        let whole: u32 = if whole.is_empty() {
            0
        } else {
            whole.parse().ok()?
        };
        let frac: u32 = format!("{frac:0<3}").parse().ok()?;
        Self::from_millis(whole.checked_mul(1000)?.checked_add(frac)?)
    }
}

impl fmt::Display for Cpus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (whole, frac) = (self.0 / 1000, self.0 % 1000);
        if frac == 0 {
            write!(f, "{whole}")
        } else {
            let frac = format!("{frac:03}");
            write!(f, "{whole}.{}", frac.trim_end_matches('0'))
        }
    }
}

impl serde::Serialize for Cpus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.as_f64())
    }
}

impl<'de> serde::Deserialize<'de> for Cpus {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = f64::deserialize(d)?;
        let millis = (n * 1000.0).round();
        if !(f64::from(Cpus::MIN_MILLIS)..=f64::from(Cpus::MAX_MILLIS)).contains(&millis) {
            return Err(serde::de::Error::custom(format!(
                "cpus must be between 0.01 and 4096, not {n}"
            )));
        }
        Ok(Cpus(millis as u32))
    }
}

/// A cgroup controller a limit needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Controller {
    Memory,
    Pids,
    Cpu,
}

impl Controller {
    pub const ALL: [Controller; 3] = [Controller::Memory, Controller::Pids, Controller::Cpu];

    /// The controller's name in cgroup files (`memory`, `pids`, `cpu`).
    pub fn name(self) -> &'static str {
        match self {
            Controller::Memory => "memory",
            Controller::Pids => "pids",
            Controller::Cpu => "cpu",
        }
    }

    /// The setting that asks for it.
    pub fn flag(self) -> &'static str {
        match self {
            Controller::Memory => "--memory",
            Controller::Pids => "--pids",
            Controller::Cpu => "--cpus",
        }
    }
}

/// Which cgroup hierarchy enforces a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hierarchy {
    V2,
    V1,
}

impl Hierarchy {
    /// `cgroup_v2` or `cgroup_v1`, as the report names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Hierarchy::V2 => "cgroup_v2",
            Hierarchy::V1 => "cgroup_v1",
        }
    }
}

/// One limit in force: the controller, where, and the cgroup directory
/// its value was written to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub controller: Controller,
    pub hierarchy: Hierarchy,
    pub dir: std::path::PathBuf,
    /// For memory: how swap was turned off (`memsw`, `swap.max`,
    /// `swappiness`, or `none` where there is no swap accounting).
    pub swap: Option<&'static str>,
}

/// What the kernel did at the limits, counted over the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResourceEvents {
    /// Processes the kernel's OOM killer killed in the cgroups of the
    /// run's memory limit, whatever the OOM was against (the limit, a
    /// parent cgroup's, the whole machine's memory).
    pub oom_kills: u64,
    /// Of those OOMs, the ones at the run's own memory limit (v2's
    /// `memory.events` key `oom`; v1: kills after the limit was hit).
    pub oom_at_limit: u64,
    /// Forks refused because the run was at its process limit.
    pub pids_max: u64,
}

impl ResourceEvents {
    /// The larger of each count (the same counters, read twice).
    pub fn max(self, other: Self) -> Self {
        Self {
            oom_kills: self.oom_kills.max(other.oom_kills),
            oom_at_limit: self.oom_at_limit.max(other.oom_at_limit),
            pids_max: self.pids_max.max(other.pids_max),
        }
    }
}

/// `32MiB`, `2GiB`, `1536KiB`, `100B`: the largest unit that divides it.
pub fn format_bytes(b: u64) -> String {
    for (unit, shift) in [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if b >= 1 << shift && b.is_multiple_of(1 << shift) {
            return format!("{}{unit}", b >> shift);
        }
    }
    format!("{b}B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus_parse_with_up_to_three_decimals() {
        assert_eq!(Cpus::parse("1.5").map(Cpus::millis), Some(1500));
        assert_eq!(Cpus::parse("2").map(Cpus::millis), Some(2000));
        assert_eq!(Cpus::parse("0.25").map(Cpus::millis), Some(250));
        assert_eq!(Cpus::parse(".5").map(Cpus::millis), Some(500));
        assert_eq!(Cpus::parse("0.01").map(Cpus::millis), Some(10));
        for bad in ["", ".", "0", "0.001", "1.2345", "-1", "1e3", "one", "99999"] {
            assert_eq!(Cpus::parse(bad), None, "{bad:?}");
        }
        assert_eq!(Cpus::parse("1.50").unwrap().to_string(), "1.5");
        assert_eq!(Cpus::parse("3").unwrap().to_string(), "3");
        assert_eq!(Cpus::parse("0.125").unwrap().to_string(), "0.125");
    }

    #[test]
    fn cpus_survive_json() {
        let l = ResourceLimits {
            memory: Some(32 << 20),
            pids: Some(64),
            cpus: Cpus::parse("1.5"),
        };
        let json = serde_json::to_string(&l).unwrap();
        assert_eq!(json, r#"{"memory":33554432,"pids":64,"cpus":1.5}"#);
        assert_eq!(serde_json::from_str::<ResourceLimits>(&json).unwrap(), l);
        assert!(serde_json::from_str::<ResourceLimits>(r#"{"cpus":0}"#).is_err());
    }

    #[test]
    fn sizes_are_written_in_the_largest_whole_unit() {
        assert_eq!(format_bytes(32 << 20), "32MiB");
        assert_eq!(format_bytes(2 << 30), "2GiB");
        assert_eq!(format_bytes(1536 << 10), "1536KiB");
        assert_eq!(format_bytes(1000), "1000B");
    }
}
