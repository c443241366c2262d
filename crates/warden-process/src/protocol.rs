//! The messages a shim sends to warden over its control socket.
//!
//! One line each, plain text, so a stuck run can be debugged with `strace`.
//! warden writes only [`KILL_REQUEST`] to the shim ("kill everything now,
//! and tell me what you killed"); closing the socket (or dying, which
//! closes it) means the same and also "then exit".

/// What warden writes to the shim to have every process of the run
/// killed at once.
pub const KILL_REQUEST: &[u8] = b"kill\n";

/// What the shim reports about the agent process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShimMessage {
    /// The agent runs with this pid; `cgroup` says whether it was started
    /// inside the run's cgroup.
    Spawned { pid: i32, cgroup: bool },
    /// The agent could not be started.
    SpawnFailed { not_found: bool, message: String },
    /// The agent process exited.
    Exited {
        code: Option<i32>,
        signal: Option<i32>,
    },
    /// The agent has exited and no process of the run is left.
    Empty,
    /// A process the shim's sweep killed after the agent had exited (an
    /// orphan that a scan from warden could have missed); `escaped` if it
    /// had moved itself out of the run's cgroup.
    Killed {
        pid: i32,
        escaped: bool,
        cmdline: String,
    },
    /// What the kernel did at the run's resource limits, read from its
    /// cgroups just before the shim removed them: processes the OOM
    /// killer killed, forks refused at the process limit.
    Resources {
        oom_kills: u64,
        oom_at_limit: u64,
        pids_max: u64,
    },
}

impl ShimMessage {
    pub fn to_line(&self) -> String {
        match self {
            ShimMessage::Spawned { pid, cgroup } => {
                format!("spawned {pid} {}\n", if *cgroup { "cgroup" } else { "-" })
            }
            ShimMessage::SpawnFailed { not_found, message } => format!(
                "spawn_failed {} {}\n",
                if *not_found { "not_found" } else { "other" },
                message.replace('\n', " ")
            ),
            ShimMessage::Exited {
                code: Some(c),
                signal: _,
            } => format!("exited code {c}\n"),
            ShimMessage::Exited { code: None, signal } => {
                format!("exited signal {}\n", signal.unwrap_or(0))
            }
            ShimMessage::Empty => "empty\n".to_string(),
            ShimMessage::Killed {
                pid,
                escaped,
                cmdline,
            } => format!(
                "killed {pid} {} {}\n",
                if *escaped { "escaped" } else { "-" },
                cmdline.replace(['\n', '\r'], " ")
            ),
            ShimMessage::Resources {
                oom_kills,
                oom_at_limit,
                pids_max,
            } => format!("resources {oom_kills} {pids_max} {oom_at_limit}\n"),
        }
    }

    pub fn parse(line: &str) -> Option<Self> {
        let mut words = line.trim_end().splitn(3, ' ');
        match (words.next()?, words.next(), words.next()) {
            ("spawned", Some(pid), Some(cg)) => Some(ShimMessage::Spawned {
                pid: pid.parse().ok()?,
                cgroup: cg == "cgroup",
            }),
            ("spawn_failed", Some(kind), message) => Some(ShimMessage::SpawnFailed {
                not_found: kind == "not_found",
                message: message.unwrap_or_default().to_string(),
            }),
            ("exited", Some("code"), Some(n)) => Some(ShimMessage::Exited {
                code: Some(n.parse().ok()?),
                signal: None,
            }),
            ("exited", Some("signal"), Some(n)) => Some(ShimMessage::Exited {
                code: None,
                signal: Some(n.parse().ok()?),
            }),
            ("empty", None, None) => Some(ShimMessage::Empty),
            ("killed", Some(pid), Some(rest)) => {
                let (flag, cmdline) = rest.split_once(' ').unwrap_or((rest, ""));
                Some(ShimMessage::Killed {
                    pid: pid.parse().ok()?,
                    escaped: flag == "escaped",
                    cmdline: cmdline.to_string(),
                })
            }
            ("resources", Some(oom), Some(rest)) => {
                let (pids, at_limit) = rest.split_once(' ').unwrap_or((rest, "0"));
                Some(ShimMessage::Resources {
                    oom_kills: oom.parse().ok()?,
                    oom_at_limit: at_limit.parse().ok()?,
                    pids_max: pids.parse().ok()?,
                })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_round_trips() {
        for m in [
            ShimMessage::Spawned {
                pid: 42,
                cgroup: true,
            },
            ShimMessage::Spawned {
                pid: 7,
                cgroup: false,
            },
            ShimMessage::SpawnFailed {
                not_found: true,
                message: "No such file or directory (os error 2)".into(),
            },
            ShimMessage::Exited {
                code: Some(3),
                signal: None,
            },
            ShimMessage::Exited {
                code: None,
                signal: Some(9),
            },
            ShimMessage::Empty,
            ShimMessage::Killed {
                pid: 12,
                escaped: true,
                cmdline: "perl -e fork".into(),
            },
            ShimMessage::Resources {
                oom_kills: 1,
                oom_at_limit: 1,
                pids_max: 40,
            },
            ShimMessage::Killed {
                pid: 13,
                escaped: false,
                cmdline: "sleep 600".into(),
            },
        ] {
            assert_eq!(ShimMessage::parse(&m.to_line()), Some(m));
        }
        assert_eq!(ShimMessage::parse("nonsense"), None);
    }
}
