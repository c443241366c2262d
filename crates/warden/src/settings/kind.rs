//! What a setting takes, and how its text is read: pure functions of the
//! text, which never look at the machine.

use std::path::PathBuf;
use std::time::Duration;

use warden_process::Cpus;
use warden_run::budget::Usd;
use warden_run::limits::{OnFatalError, clock};
use warden_run::retry::RetryOn;
use warden_run::{ContainmentChoice, SandboxChoice};

use super::Resolved;

/// What kind of value a setting takes, and the setter of the field of
/// [`Resolved`] it fills: the one place a setting is parsed and applied.
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    /// A clock: `0` disables it (the setter gets `None`).
    Clock(fn(&mut Resolved, Option<Duration>)),
    /// A grace period: `0` means none.
    Grace(fn(&mut Resolved, Duration)),
    /// Any non-empty text.
    Text(fn(&mut Resolved, String)),
    /// A shell command (run with `sh -c`): non-empty text.
    Command(fn(&mut Resolved, String)),
    /// A flag without a value; `true` or `false` from the other sources.
    Switch(fn(&mut Resolved, bool)),
    Bytes(fn(&mut Resolved, usize)),
    Containment(fn(&mut Resolved, ContainmentChoice)),
    Sandbox(fn(&mut Resolved, SandboxChoice)),
    Path(fn(&mut Resolved, PathBuf)),
    /// Paths separated by commas (a repeated flag, a TOML list).
    Paths(fn(&mut Resolved, Vec<PathBuf>)),
    /// Command-line arguments separated by white space (a repeated flag,
    /// a TOML list): commas are common inside one (`--mount
    /// type=bind,src=…`).
    Args(fn(&mut Resolved, Vec<String>)),
    /// What a fatal error of the agent does: `end` or `wait`.
    OnFatalError(fn(&mut Resolved, OnFatalError)),
    /// A whole number, 0 or more.
    Count(fn(&mut Resolved, u32)),
    /// Transient failures, by name, separated by commas.
    RetryOn(fn(&mut Resolved, Vec<RetryOn>)),
    /// A memory limit: a size, at least 1 MiB; `0` for none.
    Memory(fn(&mut Resolved, Option<u64>)),
    /// A process limit: a count; `0` for none.
    Pids(fn(&mut Resolved, Option<u64>)),
    /// A CPU quota in CPUs (`1.5`); `0` for none.
    Cpus(fn(&mut Resolved, Option<Cpus>)),
    /// A sum of US dollars greater than 0 (`0.50`, `$2`): a cost budget.
    Usd(fn(&mut Resolved, Usd)),
    /// A whole number of at least 1: a token or turn budget.
    Positive(fn(&mut Resolved, u64)),
    /// An OTLP protocol: `http/protobuf` or `grpc`.
    OtlpProtocol(fn(&mut Resolved, warden_run::telemetry::Protocol)),
    /// How a failed check reaches the next iteration: `auto` or `none`.
    CheckFeedback(fn(&mut Resolved, warden_run::CheckFeedback)),
}

/// A parsed value, ready to be put in its place.
pub(super) type Setter = Box<dyn FnOnce(&mut Resolved)>;

impl Kind {
    pub(super) fn expected(self) -> &'static str {
        match self {
            Kind::Clock(_) => {
                "a duration such as `15m`, `90s`, `250ms` or `1h30m` (`0` disables it)"
            }
            Kind::Grace(_) => "a duration such as `10s`, `500ms` or `1m` (`0` for none)",
            Kind::Text(_) => "a non-empty string such as `<promise>COMPLETE</promise>`",
            Kind::Command(_) => "a shell command such as `cargo test` (run with sh -c)",
            Kind::Switch(_) => "`true` or `false` (or `1` / `0`)",
            Kind::Bytes(_) => "a size in bytes such as `8MiB`, `512KiB` or `1048576`",
            Kind::Containment(_) => "one of `auto`, `cgroup`, `subreaper`",
            Kind::Sandbox(_) => "one of `auto`, `host`, `bwrap`, `docker`, `podman`",
            Kind::Path(_) => "a directory path such as `.warden/runs/my-run`",
            Kind::Paths(_) => {
                "paths separated by commas, such as `/run/munge/munge.socket.2` (the flag may be repeated)"
            }
            Kind::Args(_) => {
                "arguments separated by white space, such as `--shm-size=1g --cap-add=SYS_PTRACE` (the flag may be repeated)"
            }
            Kind::OnFatalError(_) => "`end` (end the run at once) or `wait` (let the agent retry)",
            Kind::Count(_) => "a whole number such as `0` or `3`",
            Kind::RetryOn(_) => {
                "names separated by commas, of rate_limited, server_error, overloaded, network, \
                 stalled, startup_timeout (or `all`, or `none`)"
            }
            Kind::Memory(_) => {
                "a size such as `2G`, `512MiB` or `1536M`, at least 1MiB (`0` for no limit)"
            }
            Kind::Pids(_) => "a number of processes such as `256` (`0` for no limit)",
            Kind::Cpus(_) => {
                "a number of CPUs such as `2`, `1.5` or `0.25`, at least 0.01 (`0` for no limit)"
            }
            Kind::Usd(_) => "a sum of US dollars greater than 0, such as `0.50` or `2`",
            Kind::Positive(_) => "a whole number of at least 1, such as `20`",
            Kind::OtlpProtocol(_) => "`http/protobuf` or `grpc`",
            Kind::CheckFeedback(_) => "`auto` or `none`",
        }
    }

    /// A flag without a value.
    pub(crate) fn is_switch(self) -> bool {
        matches!(self, Kind::Switch(_))
    }

    /// A flag that may be given more than once, its values joined by
    /// commas as in the other sources.
    pub(crate) fn is_list(self) -> bool {
        matches!(self, Kind::Paths(_) | Kind::Args(_))
    }

    /// What joins the items of a list (a repeated flag, a TOML list) into
    /// the one text every source gives.
    pub(crate) fn list_separator(self) -> &'static str {
        match self {
            Kind::Args(_) => " ",
            _ => ",",
        }
    }

    /// Checks the text; only looks at it, never at the machine (whether a
    /// sandbox or a cgroup is there is for the run to find out).
    pub(super) fn parse(self, s: &str) -> Result<Setter, Bad> {
        let t = s.trim();
        Ok(match self {
            Kind::Clock(set) => {
                let d = duration(t).map_err(|b| too_large_says(b, CLOCK_LIMIT))?;
                Box::new(move |r| set(r, clock(d)))
            }
            Kind::Grace(set) => {
                let d = duration(t)?;
                Box::new(move |r| set(r, d))
            }
            Kind::Bytes(set) => {
                let b = bytes(t)?;
                Box::new(move |r| set(r, b))
            }
            Kind::Text(set) | Kind::Command(set) => {
                let text = non_empty(s)?;
                Box::new(move |r| set(r, text))
            }
            Kind::Path(set) => {
                let path = PathBuf::from(non_empty(s)?);
                Box::new(move |r| set(r, path))
            }
            Kind::Paths(set) => {
                let paths: Vec<PathBuf> = s
                    .split(',')
                    .map(str::trim)
                    .map(|p| non_empty(p).map(PathBuf::from))
                    .collect::<Result<_, _>>()?;
                Box::new(move |r| set(r, paths))
            }
            Kind::Args(set) => {
                let args: Vec<String> = s.split_whitespace().map(str::to_string).collect();
                if args.is_empty() {
                    return Err(Bad::Invalid);
                }
                Box::new(move |r| set(r, args))
            }
            Kind::Switch(set) => {
                let on = match t.to_ascii_lowercase().as_str() {
                    "true" | "1" | "yes" | "on" => true,
                    "false" | "0" | "no" | "off" | "" => false,
                    _ => return Err(Bad::Invalid),
                };
                Box::new(move |r| set(r, on))
            }
            Kind::Sandbox(set) => {
                let choice: SandboxChoice = t.parse().map_err(|_| Bad::Invalid)?;
                Box::new(move |r| set(r, choice))
            }
            Kind::OnFatalError(set) => {
                let o: OnFatalError = t.parse().map_err(|_| Bad::Invalid)?;
                Box::new(move |r| set(r, o))
            }
            Kind::Count(set) => {
                let n: u32 = match t.parse() {
                    Ok(n) => n,
                    Err(_) if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) => {
                        return Err(Bad::TooLarge("the most is 4294967295"));
                    }
                    Err(_) => return Err(Bad::Invalid),
                };
                Box::new(move |r| set(r, n))
            }
            Kind::RetryOn(set) => {
                let list = RetryOn::parse_list(t).map_err(|_| Bad::Invalid)?;
                Box::new(move |r| set(r, list))
            }
            Kind::Memory(set) => {
                let limit = match t {
                    "0" => None,
                    _ => match bytes(t)? {
                        b if b < 1 << 20 => return Err(Bad::Invalid),
                        b => Some(b as u64),
                    },
                };
                Box::new(move |r| set(r, limit))
            }
            Kind::Pids(set) => {
                let n = whole_number(t)?;
                Box::new(move |r| set(r, (n > 0).then_some(n)))
            }
            Kind::Cpus(set) => {
                let limit = match t {
                    "0" => None,
                    _ => Some(Cpus::parse(t).ok_or(Bad::Invalid)?),
                };
                Box::new(move |r| set(r, limit))
            }
            Kind::Usd(set) => {
                let dollars: f64 = t
                    .strip_prefix('$')
                    .unwrap_or(t)
                    .parse()
                    .map_err(|_| Bad::Invalid)?;
                if dollars.is_nan() || dollars <= 0.0 {
                    return Err(Bad::Invalid);
                }
                let usd = Usd::from_dollars(dollars)
                    .ok_or(Bad::TooLarge("the most is 1000000000000 dollars"))?;
                Box::new(move |r| set(r, usd))
            }
            Kind::Positive(set) => match whole_number(t)? {
                0 => return Err(Bad::Invalid),
                n => Box::new(move |r| set(r, n)),
            },
            Kind::CheckFeedback(set) => {
                let f = match t {
                    "auto" => warden_run::CheckFeedback::Auto,
                    "none" => warden_run::CheckFeedback::None,
                    _ => return Err(Bad::Invalid),
                };
                Box::new(move |r| set(r, f))
            }
            Kind::OtlpProtocol(set) => {
                let p: warden_run::telemetry::Protocol = t.parse().map_err(|_| Bad::Invalid)?;
                Box::new(move |r| set(r, p))
            }
            Kind::Containment(set) => {
                let c = match t {
                    "auto" => ContainmentChoice::Auto,
                    "cgroup" => ContainmentChoice::Cgroup,
                    "subreaper" => ContainmentChoice::Subreaper,
                    _ => return Err(Bad::Invalid),
                };
                Box::new(move |r| set(r, c))
            }
        })
    }
}

fn non_empty(s: &str) -> Result<String, Bad> {
    if s.is_empty() {
        Err(Bad::Invalid)
    } else {
        Ok(s.to_string())
    }
}

/// Why a value was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bad {
    Invalid,
    /// Well formed, but past what the setting can hold: says the limit.
    TooLarge(&'static str),
}

const DURATION_LIMIT: &str = "the most is 100 years";
const CLOCK_LIMIT: &str = "the most is 100 years (`0` disables it)";

fn too_large_says(b: Bad, limit: &'static str) -> Bad {
    match b {
        Bad::TooLarge(_) => Bad::TooLarge(limit),
        other => other,
    }
}

/// `15m`, `90s`, `250ms`, `1h30m`, or `0`.
pub(crate) fn parse_duration(s: &str) -> Option<Duration> {
    duration(s).ok()
}

/// Past a hundred years a clock means "never": say 0 for that.
const LONGEST: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

fn duration(s: &str) -> Result<Duration, Bad> {
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    match humantime::parse_duration(s) {
        Ok(d) if d <= LONGEST => Ok(d),
        Ok(_) | Err(humantime::DurationError::NumberOverflow) => Err(Bad::TooLarge(DURATION_LIMIT)),
        Err(_) => Err(Bad::Invalid),
    }
}

/// `8MiB`, `512KiB`, `8M`, `1048576`; at least one byte.
pub(super) fn bytes(s: &str) -> Result<usize, Bad> {
    const TOO_LARGE: Bad = Bad::TooLarge("it does not fit in this machine's memory size");
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    if num.is_empty() {
        return Err(Bad::Invalid);
    }
    let mult: usize = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(Bad::Invalid),
    };
    // All digits: a failed parse can only be an overflow.
    let n: usize = num.parse().map_err(|_| TOO_LARGE)?;
    match n.checked_mul(mult) {
        Some(0) => Err(Bad::Invalid),
        Some(b) => Ok(b),
        None => Err(TOO_LARGE),
    }
}

/// A whole number written in decimal digits only (no sign, no spaces).
fn whole_number(t: &str) -> Result<u64, Bad> {
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Bad::Invalid);
    }
    t.parse()
        .map_err(|_| Bad::TooLarge("the most is 18446744073709551615"))
}
