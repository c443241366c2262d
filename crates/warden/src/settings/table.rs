//! Every setting, once: one row names it, says what it takes, what it
//! defaults to and what it does, and fills its field of [`Resolved`]. The
//! flag (`--stall-timeout`), the variable (`WARDEN_STALL_TIMEOUT`), the
//! `warden.toml` key and the batch key (`stall_timeout`), the `--help`
//! line and the list of known keys are all derived from the row.

use super::{Kind, Resolved};

/// The default a setting shows in `--help` and the book.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shown {
    /// A value in the setting's own syntax that gives the default.
    Value(&'static str),
    /// Words for a default no value can spell (`.warden/runs/<run-id>`).
    Described(&'static str),
    /// A switch that is off.
    Off,
    /// Not set unless given.
    Unset,
}

/// The headings `warden run --help` lists the settings under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Group {
    /// The agent and its prompt (flags of `warden run` only).
    Agent,
    Clocks,
    Sandbox,
    Limits,
    Retries,
    Session,
    Output,
    Ci,
    Records,
    Telemetry,
}

impl Group {
    pub(crate) const fn heading(self) -> &'static str {
        match self {
            Group::Agent => "Agent",
            Group::Clocks => "Clocks",
            Group::Sandbox => "Sandbox",
            Group::Limits => "Budgets and resource limits",
            Group::Retries => "Retries",
            Group::Session => "Session: iterations, worktree, checks, hooks, merge",
            Group::Output => "Output",
            Group::Ci => "CI",
            Group::Records => "Run directories",
            Group::Telemetry => "Telemetry",
        }
    }
}

/// One setting. Its name is its `warden.toml` key and its batch key; the
/// flag is the name with dashes, the variable `WARDEN_` and the name in
/// capitals.
#[derive(Clone, Copy)]
pub(crate) struct Setting {
    pub name: &'static str,
    /// Where `--help` lists it.
    pub group: Group,
    pub kind: Kind,
    pub default: Shown,
    /// The `--help` line, without the default.
    pub doc: &'static str,
    /// The value's placeholder in `--help`; unused for a switch.
    pub value_name: &'static str,
    pub short: Option<char>,
    /// Whether a batch file may set it (a batch decides some for itself).
    pub in_batch: bool,
    /// Another long flag for it (`--otel` for `--otel-endpoint`).
    pub alias: Option<&'static str>,
}

impl Setting {
    /// The long flag, without its dashes: `stall-timeout`.
    pub(crate) fn flag(&self) -> String {
        self.name.replace('_', "-")
    }

    /// The environment variable: `WARDEN_STALL_TIMEOUT`.
    pub(crate) fn env(&self) -> String {
        format!("WARDEN_{}", self.name.to_ascii_uppercase())
    }

    /// The `--help` line: the doc, the default, then the variable.
    pub(crate) fn help(&self) -> String {
        let disables = if matches!(self.kind, Kind::Clock(_)) {
            "; 0 disables"
        } else {
            ""
        };
        let env = self.env();
        match self.default {
            Shown::Value(d) | Shown::Described(d) => {
                format!("{} [default: {d}{disables}] [env: {env}]", self.doc)
            }
            Shown::Off | Shown::Unset => format!("{} [env: {env}]", self.doc),
        }
    }
}

pub(crate) const SETTINGS: &[Setting] = &[
    Setting {
        name: "timeout",
        group: Group::Clocks,
        kind: Kind::Clock(|r, d| r.limits.timeout = d),
        default: Shown::Value("1h"),
        doc: "Wall clock for the run",
        value_name: "DURATION",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "stall_timeout",
        group: Group::Clocks,
        kind: Kind::Clock(|r, d| r.limits.stall_timeout = d),
        default: Shown::Value("15m"),
        doc: "Kill the run after this long with no activity",
        value_name: "DURATION",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "startup_timeout",
        group: Group::Clocks,
        kind: Kind::Clock(|r, d| r.limits.startup_timeout = d),
        default: Shown::Value("2m"),
        doc: "Kill the run if no activity at all comes this soon",
        value_name: "DURATION",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "completion_timeout",
        group: Group::Clocks,
        kind: Kind::Clock(|r, d| r.limits.completion_timeout = d),
        default: Shown::Value("60s"),
        doc: "After the agent says it is done, end the run after this much silence",
        value_name: "DURATION",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "completion_signal",
        group: Group::Clocks,
        kind: Kind::Text(|r, t| r.limits.completion_signal = t),
        default: Shown::Value("<promise>COMPLETE</promise>"),
        doc: "The string that says the task is done",
        value_name: "TEXT",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "on_fatal_error",
        group: Group::Clocks,
        kind: Kind::OnFatalError(|r, o| r.limits.on_fatal_error = o),
        default: Shown::Value("end"),
        doc: "When the agent reports an error no retry fixes (bad credentials, unknown model, \
              exhausted quota): end the run, or wait for the agent's own retries",
        value_name: "end|wait",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "drain_grace",
        group: Group::Clocks,
        kind: Kind::Grace(|r, d| r.limits.drain_grace = d),
        default: Shown::Value("5s"),
        doc: "After the agent exits, how long to keep reading its output",
        value_name: "DURATION",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "kill_grace",
        group: Group::Clocks,
        kind: Kind::Grace(|r, d| r.limits.kill_grace = d),
        default: Shown::Value("10s"),
        doc: "Between SIGTERM and SIGKILL",
        value_name: "DURATION",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "max_line",
        group: Group::Clocks,
        kind: Kind::Bytes(|r, b| r.limits.max_line = b),
        default: Shown::Value("8MiB"),
        doc: "Lines longer than this are logged but not decoded",
        value_name: "BYTES",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "containment",
        group: Group::Clocks,
        kind: Kind::Containment(|r, c| r.containment = c),
        default: Shown::Value("auto"),
        doc: "How to contain the run's processes: auto, cgroup or subreaper",
        value_name: "MODE",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "run_dir",
        group: Group::Records,
        kind: Kind::Path(|r, p| r.run_dir = Some(p)),
        default: Shown::Described(".warden/runs/<run-id>"),
        doc: "Where the run's artifacts go",
        value_name: "DIR",
        short: None,
        // Each run of a batch has its directory in the batch's.
        in_batch: false,
        alias: None,
    },
    Setting {
        name: "sandbox",
        group: Group::Sandbox,
        kind: Kind::Sandbox(|r, s| r.sandbox = s),
        default: Shown::Value("host"),
        doc: "Where the agent runs: host, bwrap, docker, podman, or auto (bwrap where it works)",
        value_name: "SANDBOX",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "no_network",
        group: Group::Sandbox,
        kind: Kind::Switch(|r, on| r.no_network = on),
        default: Shown::Off,
        doc: "Cut the network inside the sandbox (agents that call a model API need it)",
        value_name: "",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "allow_socket",
        group: Group::Sandbox,
        kind: Kind::Paths(|r, p| r.allow_sockets = p),
        default: Shown::Unset,
        doc: "Let the agent in a sandbox connect to this host unix socket (every other one is hidden). Repeatable",
        value_name: "PATH",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "image",
        group: Group::Sandbox,
        kind: Kind::Text(|r, t| r.image = Some(t)),
        default: Shown::Unset,
        doc: "The container image, for --sandbox docker or podman",
        value_name: "IMAGE",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "container_network",
        group: Group::Sandbox,
        kind: Kind::Text(|r, t| r.container_network = Some(t)),
        default: Shown::Unset,
        doc: "The container's network, for --sandbox docker or podman: host, none, bridge, or a \
              network the engine has (--no-network wins, and allows only none)",
        value_name: "NAME",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "engine_arg",
        group: Group::Sandbox,
        kind: Kind::Args(|r, a| r.engine_args = a),
        default: Shown::Unset,
        doc: "An argument for the engine's `run`, before the image, for --sandbox docker or \
              podman (what warden has no setting for; it can widen the container). Repeatable",
        value_name: "ARG",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "container_user",
        group: Group::Sandbox,
        kind: Kind::ContainerUser(|r, u| r.container_user = u),
        default: Shown::Value("auto"),
        doc: "Who the agent runs as in a container: auto (the work directory's owner, with a \
              HOME of its own; the image's user when that owner is root), image (the image's \
              user), or UID[:GID]",
        value_name: "USER",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "device",
        group: Group::Sandbox,
        kind: Kind::Words(|r, d| r.devices = d),
        default: Shown::Unset,
        doc: "A host device for the container, HOST[:CONTAINER[:PERMS]] (--sandbox docker or \
              podman). Repeatable",
        value_name: "DEVICE",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "group_add",
        group: Group::Sandbox,
        kind: Kind::Words(|r, g| r.group_add = g),
        default: Shown::Unset,
        doc: "A group (name or id) for the container's user (--sandbox docker or podman). \
              Repeatable",
        value_name: "GROUP",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "heartbeat",
        group: Group::Output,
        kind: Kind::Clock(|r, d| r.heartbeat = d),
        default: Shown::Value("30s"),
        doc: "Off a terminal: how often to say the run is alive, and how long it has been quiet",
        value_name: "DURATION",
        short: None,
        // A batch has its own view.
        in_batch: false,
        alias: None,
    },
    Setting {
        name: "otel_endpoint",
        group: Group::Telemetry,
        kind: Kind::Text(|r, t| r.otel_endpoint = Some(t)),
        default: Shown::Unset,
        doc: "Export OpenTelemetry traces and metrics to this OTLP collector, by its base URL (http://127.0.0.1:4318; the OTEL_EXPORTER_OTLP_* variables also turn export on)",
        value_name: "URL",
        short: None,
        // One exporter per warden process.
        in_batch: false,
        alias: Some("otel"),
    },
    Setting {
        name: "otel_protocol",
        group: Group::Telemetry,
        kind: Kind::OtlpProtocol(|r, p| r.otel_protocol = Some(p)),
        // Not set, the standard variable decides.
        default: Shown::Described("http/protobuf"),
        doc: "The OTLP protocol: http/protobuf or grpc (else OTEL_EXPORTER_OTLP_PROTOCOL)",
        value_name: "PROTOCOL",
        short: None,
        in_batch: false,
        alias: None,
    },
    Setting {
        name: "otel_agent",
        group: Group::Telemetry,
        kind: Kind::Switch(|r, on| r.otel_agent = on),
        default: Shown::Off,
        doc: "Make the agent CLI export its own traces to the same collector, nested under the run's span (Claude Code, Codex; exec gets the OTEL_* variables)",
        value_name: "",
        short: None,
        in_batch: false,
        alias: None,
    },
    Setting {
        name: "otel_flush",
        group: Group::Telemetry,
        kind: Kind::Grace(|r, d| r.otel_flush = Some(d)),
        // Not set, the library's bound (`telemetry::DEFAULT_FLUSH`).
        default: Shown::Described("5s"),
        doc: "The most the end of warden waits for its spans and metrics to reach the collector (both together)",
        value_name: "DURATION",
        short: None,
        in_batch: false,
        alias: None,
    },
    Setting {
        name: "json",
        group: Group::Output,
        kind: Kind::Switch(|r, on| r.json = on),
        default: Shown::Off,
        doc: "Write the events as JSON lines on stdout (instead of the command's output or the agent's answer)",
        value_name: "",
        short: None,
        in_batch: false,
        alias: None,
    },
    Setting {
        name: "quiet",
        group: Group::Output,
        kind: Kind::Switch(|r, on| r.quiet = on),
        default: Shown::Off,
        doc: "Show no status line and none of the agent's lines; warnings and the summary remain (an exec command's own output still passes through)",
        value_name: "",
        short: Some('q'),
        in_batch: false,
        alias: None,
    },
    Setting {
        name: "memory",
        group: Group::Limits,
        kind: Kind::Memory(|r, m| r.limits.resources.memory = m),
        default: Shown::Unset,
        doc: "Memory limit for all the run's processes together, swap off (cgroups; the \
              container engine in a container)",
        value_name: "SIZE",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "pids",
        group: Group::Limits,
        kind: Kind::Pids(|r, n| r.limits.resources.pids = n),
        default: Shown::Unset,
        doc: "Most processes and threads the run may have at once (cgroups)",
        value_name: "N",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "cpus",
        group: Group::Limits,
        kind: Kind::Cpus(|r, c| r.limits.resources.cpus = c),
        default: Shown::Unset,
        doc: "CPU quota for the run, in CPUs, e.g. 1.5 (cgroups)",
        value_name: "N.N",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "preserve_status",
        group: Group::Ci,
        kind: Kind::Switch(|r, on| r.preserve_status = on),
        default: Shown::Off,
        doc: "Exit with the command's own exit code when the verdict is succeeded or agent_failed (as timeout --preserve-status)",
        value_name: "",
        short: None,
        // A batch's exit code sums up many runs.
        in_batch: false,
        alias: None,
    },
    Setting {
        name: "keep_runs",
        group: Group::Records,
        kind: Kind::Count(|r, n| r.keep_runs = Some(u64::from(n))),
        default: Shown::Unset,
        doc: "Retention: keep this many of the newest run, session and batch directories (each kind); `warden gc` and the end of each `warden run` remove the rest",
        value_name: "N",
        short: None,
        // Retention is the project's, not one entry's.
        in_batch: false,
        alias: None,
    },
    Setting {
        name: "keep_days",
        group: Group::Records,
        kind: Kind::Count(|r, n| r.keep_days = Some(u64::from(n))),
        default: Shown::Unset,
        doc: "Retention: remove run, session and batch directories last changed more than this many days ago (`warden gc`, and the end of each `warden run`)",
        value_name: "DAYS",
        short: None,
        in_batch: false,
        alias: None,
    },
    Setting {
        name: "retries",
        group: Group::Retries,
        kind: Kind::Count(|r, n| r.retry.retries = n),
        default: Shown::Value("0"),
        doc: "Try a run that ended by a transient failure (see --retry-on) again, up to this many \
              times, resuming the agent's session where the CLI can",
        value_name: "N",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "retry_on",
        group: Group::Retries,
        kind: Kind::RetryOn(|r, on| r.retry.on = on),
        default: Shown::Value("rate_limited,server_error,overloaded,network,startup_timeout"),
        doc: "Which transient failures --retries retries: rate_limited, server_error, overloaded, \
              network, stalled, startup_timeout (or all, none)",
        value_name: "LIST",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "retry_backoff",
        group: Group::Retries,
        kind: Kind::Grace(|r, d| r.retry.backoff = d),
        default: Shown::Value("5s"),
        doc: "The first retry waits up to this long, each next one up to twice as long (at most \
              5m; full jitter), never less than a retry-after the agent reported",
        value_name: "DURATION",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "max_cost",
        group: Group::Limits,
        kind: Kind::Usd(|r, usd| r.limits.budget.max_cost_usd = Some(usd)),
        default: Shown::Unset,
        doc: "End the run (budget_exceeded) once the cost the agent reports passes this many \
              US dollars (Claude Code, OpenCode and pi report a cost)",
        value_name: "USD",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "max_tokens",
        group: Group::Limits,
        kind: Kind::Positive(|r, n| r.limits.budget.max_tokens = Some(n)),
        default: Shown::Unset,
        doc: "End the run (budget_exceeded) once its tokens.total (input, cache read and \
              write, output) passes this",
        value_name: "N",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "max_turns",
        group: Group::Limits,
        kind: Kind::Positive(|r, n| r.limits.budget.max_turns = Some(n)),
        default: Shown::Unset,
        doc: "End the run (budget_exceeded) once it makes more model calls than this",
        value_name: "N",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "session_max_cost",
        group: Group::Limits,
        kind: Kind::Usd(|r, usd| r.session_budget.max_cost_usd = Some(usd)),
        default: Shown::Unset,
        doc: "Like --max-cost, for the runs of a session together: the run that passes it \
              is ended, and no further one starts",
        value_name: "USD",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "session_max_tokens",
        group: Group::Limits,
        kind: Kind::Positive(|r, n| r.session_budget.max_tokens = Some(n)),
        default: Shown::Unset,
        doc: "Like --max-tokens, for the runs of a session together",
        value_name: "N",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "session_max_turns",
        group: Group::Limits,
        kind: Kind::Positive(|r, n| r.session_budget.max_turns = Some(n)),
        default: Shown::Unset,
        doc: "Like --max-turns, for the runs of a session together",
        value_name: "N",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "check",
        group: Group::Session,
        kind: Kind::Command(|r, c| r.check.command = c),
        default: Shown::Unset,
        doc: "After each iteration, run CMD (sh -c) in the same directory and sandbox, \
              supervised as a run: the session ends when it passes; its failure is told to the \
              next iteration; iterations run out with it failing: check_failed",
        value_name: "CMD",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "check_timeout",
        group: Group::Session,
        kind: Kind::Clock(|r, d| r.check.timeout = d),
        default: Shown::Value("10m"),
        doc: "Wall clock for each --check",
        value_name: "DURATION",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "check_stall_timeout",
        group: Group::Session,
        kind: Kind::Clock(|r, d| r.check.stall_timeout = d),
        default: Shown::Value("5m"),
        doc: "End a --check that prints nothing for this long (stalled)",
        value_name: "DURATION",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "check_feedback",
        group: Group::Session,
        kind: Kind::CheckFeedback(|r, f| r.check.feedback = f),
        default: Shown::Value("auto"),
        doc: "How a failed --check reaches the next iteration: `auto` (through \
              {{CHECK_OUTPUT}} where the prompt uses it, else a note appended to the prompt) \
              or `none`",
        value_name: "MODE",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "check_first",
        group: Group::Session,
        kind: Kind::Switch(|r, on| r.check.first = on),
        default: Shown::Off,
        doc: "Run --check once before the first iteration: if it passes, there is nothing to do",
        value_name: "",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "host_setup",
        group: Group::Session,
        kind: Kind::Command(|r, c| r.hooks.host_setup = Some(c)),
        default: Shown::Unset,
        doc: "Run CMD on the host (outside any sandbox) in the work directory, once, before \
              anything runs in the sandbox; failing: setup_failed",
        value_name: "CMD",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "setup",
        group: Group::Session,
        kind: Kind::Command(|r, c| r.hooks.setup = Some(c)),
        default: Shown::Unset,
        doc: "Run CMD in the sandbox, once, before the first iteration (installing \
              dependencies, say); failing: setup_failed, and no agent starts",
        value_name: "CMD",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "on_success",
        group: Group::Session,
        kind: Kind::Command(|r, c| r.hooks.on_success = Some(c)),
        default: Shown::Unset,
        doc: "Run CMD in the sandbox after a session that succeeded; failing: hook_failed",
        value_name: "CMD",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "finally",
        group: Group::Session,
        kind: Kind::Command(|r, c| r.hooks.finally = Some(c)),
        default: Shown::Unset,
        doc: "Run CMD in the sandbox at the end of the session, whatever its verdict",
        value_name: "CMD",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "hook_timeout",
        group: Group::Session,
        kind: Kind::Clock(|r, d| r.hooks.timeout = d),
        default: Shown::Value("5m"),
        doc: "Wall clock for each of --host-setup, --setup, --on-success and --finally",
        value_name: "DURATION",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "prompt_command_timeout",
        group: Group::Session,
        kind: Kind::Clock(|r, d| r.hooks.prompt_command_timeout = d),
        default: Shown::Value("30s"),
        doc: "Wall clock for each {{$ CMD}} of a prompt file",
        value_name: "DURATION",
        short: None,
        in_batch: true,
        alias: None,
    },
    Setting {
        name: "merge",
        group: Group::Session,
        kind: Kind::Switch(|r, on| r.merge = on),
        default: Shown::Off,
        doc: "With --worktree: once the session succeeded, merge its branch into the branch \
              checked out when it started (a fast-forward when possible); a conflict leaves \
              both as they were: merge_conflict",
        value_name: "",
        short: None,
        in_batch: true,
        alias: None,
    },
];

/// The row of the setting `name` (a `warden.toml` key).
pub(crate) fn find(name: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.name == name)
}

/// Every `warden.toml` key, for the message about an unknown one.
pub(crate) fn known_keys() -> String {
    SETTINGS
        .iter()
        .map(|s| s.name)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Default for Resolved {
    /// What a run gets when no source sets anything: the limits of
    /// `warden_run::defaults`, and the defaults of the CLI's own settings.
    fn default() -> Self {
        Resolved {
            limits: warden_run::Limits::default(),
            containment: warden_run::ContainmentChoice::Auto,
            sandbox: warden_run::SandboxChoice::Host,
            no_network: false,
            allow_sockets: Vec::new(),
            image: None,
            container_network: None,
            engine_args: Vec::new(),
            container_user: warden_sandbox::ContainerUser::Auto,
            devices: Vec::new(),
            group_add: Vec::new(),
            run_dir: None,
            json: false,
            quiet: false,
            heartbeat: Some(std::time::Duration::from_secs(30)),
            preserve_status: false,
            keep_runs: None,
            keep_days: None,
            retry: warden_run::retry::RetryPolicy::default(),
            session_budget: warden_run::budget::Budget::default(),
            check: warden_run::CheckRequest::default(),
            hooks: warden_run::HooksRequest::default(),
            merge: false,
            otel_endpoint: None,
            otel_protocol: None,
            otel_flush: None,
            otel_agent: false,
            agent_images: Vec::new(),
        }
    }
}
