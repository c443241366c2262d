//! Settings: flags, then `WARDEN_*` variables, then `warden.toml`, then the
//! defaults (in `warden_run::defaults`).
//!
//! Every source gives text; every value goes through the same parser, so a
//! bad value gets the same clear message wherever it came from, naming the
//! source (the flag, the variable, or the key and file), the value, and an
//! example of a good one. Every value present is checked, also one that a
//! higher source overrides: a typo in a CI variable should not wait for the
//! day the flag is dropped. Nothing bad is ever replaced by a default.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use warden_run::limits::{OnFatalError, clock};
use warden_run::{ContainmentChoice, Limits, SandboxChoice};

use crate::cli::SettingFlags;

/// What kind of value a setting takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A clock: `0` disables it.
    Clock,
    /// A grace period: `0` means none.
    Grace,
    Text,
    Bool,
    Bytes,
    Containment,
    Sandbox,
    Path,
    /// What a fatal error of the agent does: `end` or `wait`.
    OnFatalError,
}

impl Kind {
    fn expected(self) -> &'static str {
        match self {
            Kind::Clock => "a duration such as `15m`, `90s`, `250ms` or `1h30m` (`0` disables it)",
            Kind::Grace => "a duration such as `10s`, `500ms` or `1m` (`0` for none)",
            Kind::Text => "a non-empty string such as `<promise>COMPLETE</promise>`",
            Kind::Bool => "`true` or `false` (or `1` / `0`)",
            Kind::Bytes => "a size in bytes such as `8MiB`, `512KiB` or `1048576`",
            Kind::Containment => "one of `auto`, `cgroup`, `subreaper`",
            Kind::Sandbox => "one of `auto`, `host`, `bwrap`, `docker`, `podman`",
            Kind::Path => "a directory path such as `.warden/runs/my-run`",
            Kind::OnFatalError => "`end` (end the run at once) or `wait` (let the agent retry)",
        }
    }
}

/// One setting: its name as a `warden.toml` key (the flag is the same with
/// dashes, the variable `WARDEN_` and the name in capitals).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Key {
    pub name: &'static str,
    pub kind: Kind,
}

pub(crate) const KEYS: &[Key] = &[
    Key {
        name: "timeout",
        kind: Kind::Clock,
    },
    Key {
        name: "stall_timeout",
        kind: Kind::Clock,
    },
    Key {
        name: "startup_timeout",
        kind: Kind::Clock,
    },
    Key {
        name: "completion_timeout",
        kind: Kind::Clock,
    },
    Key {
        name: "completion_signal",
        kind: Kind::Text,
    },
    Key {
        name: "on_fatal_error",
        kind: Kind::OnFatalError,
    },
    Key {
        name: "drain_grace",
        kind: Kind::Grace,
    },
    Key {
        name: "kill_grace",
        kind: Kind::Grace,
    },
    Key {
        name: "max_line",
        kind: Kind::Bytes,
    },
    Key {
        name: "containment",
        kind: Kind::Containment,
    },
    Key {
        name: "run_dir",
        kind: Kind::Path,
    },
    Key {
        name: "sandbox",
        kind: Kind::Sandbox,
    },
    Key {
        name: "no_network",
        kind: Kind::Bool,
    },
    Key {
        name: "image",
        kind: Kind::Text,
    },
    Key {
        name: "heartbeat",
        kind: Kind::Clock,
    },
    Key {
        name: "json",
        kind: Kind::Bool,
    },
    Key {
        name: "quiet",
        kind: Kind::Bool,
    },
];

#[derive(Debug, thiserror::Error, PartialEq)]
pub(crate) enum SettingsError {
    #[error("invalid value `{value}` for {origin}: expected {expected}")]
    Invalid {
        origin: String,
        value: String,
        expected: &'static str,
    },
    #[error("the value `{value}` for {origin} is too large: {limit}")]
    TooLarge {
        origin: String,
        value: String,
        limit: &'static str,
    },
    #[error("unknown key `{key}` in {}; known keys: {}", .path.display(), known_keys())]
    UnknownKey { key: String, path: PathBuf },
    #[error("could not read the config file {}: {message}", .path.display())]
    Read { path: PathBuf, message: String },
}

/// The text of a config file; `None` if `./warden.toml` is simply not
/// there (a file named with `--config` must exist). The work tree is the
/// agent's to change, so the file is read as one it may have planted:
/// only a regular file, bounded, without blocking on a FIFO. Anything
/// else that is there (a directory, a FIFO, a file warden may not read,
/// text that is not UTF-8) is an error: never silently the defaults.
fn read_config(path: &Path, named: bool) -> Result<Option<String>, SettingsError> {
    use warden_run::regular_file::{self, ReadError};
    match regular_file::read_text(path, warden_run::defaults::MAX_WORK_TREE_FILE) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.is_not_found() && !named => Ok(None),
        Err(e) => {
            let message = match &e {
                ReadError::Io(io) if io.kind() == std::io::ErrorKind::PermissionDenied => {
                    format!("{io}: make it readable by this user, or remove it")
                }
                ReadError::NotRegular { .. } | ReadError::NotUtf8 { .. } => {
                    format!("{e}: a config file is TOML text; remove or replace it")
                }
                _ => e.to_string(),
            };
            Err(SettingsError::Read {
                path: path.to_path_buf(),
                message,
            })
        }
    }
}

/// A TOML error as its place and message, without the quoted line that
/// `toml` shows: `./warden.toml` may be a link the agent planted to a file
/// it cannot read itself (a key, `/etc/shadow`), and warden's error must
/// not print that file's lines.
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim().replace('\n', "; ");
    match e.span() {
        Some(span) => {
            let before = &text.as_bytes()[..span.start.min(text.len())];
            let line = before.iter().filter(|b| **b == b'\n').count() + 1;
            let column = before.iter().rev().take_while(|b| **b != b'\n').count() + 1;
            format!("TOML parse error at line {line}, column {column}: {message}")
        }
        None => format!("TOML parse error: {message}"),
    }
}

fn known_keys() -> String {
    KEYS.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")
}

#[derive(Debug, Clone)]
struct Sourced {
    value: String,
    origin: String,
    /// Came from `SettingFlags` (which a batch file fills as well).
    from_flags: bool,
}

/// Raw values from every source, highest precedence first.
#[derive(Debug, Default)]
pub(crate) struct RawSettings {
    values: HashMap<&'static str, Vec<Sourced>>,
}

/// Settings the rest of the program trusts.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    pub limits: Limits,
    pub containment: ContainmentChoice,
    pub sandbox: SandboxChoice,
    pub no_network: bool,
    pub image: Option<String>,
    pub run_dir: Option<PathBuf>,
    pub json: bool,
    pub quiet: bool,
    /// The plain view's heartbeat; `None` when disabled.
    pub heartbeat: Option<Duration>,
}

impl RawSettings {
    /// Reads the flags, the environment and the config file.
    pub(crate) fn gather(flags: &SettingFlags, cwd: &Path) -> Result<Self, SettingsError> {
        let mut raw = RawSettings::default();
        raw.add_flags(flags);
        raw.add_env(
            std::env::vars_os().filter_map(|(k, v)| {
                Some((k.into_string().ok()?, v.to_string_lossy().into_owned()))
            }),
        );
        let config = flags
            .config
            .clone()
            .or_else(|| std::env::var_os("WARDEN_CONFIG").map(PathBuf::from));
        let (path, named) = match config {
            Some(path) => (cwd.join(path), true),
            None => (cwd.join("warden.toml"), false),
        };
        if let Some(text) = read_config(&path, named)? {
            raw.add_file(&text, &path)?;
        }
        Ok(raw)
    }

    fn push(&mut self, name: &'static str, value: String, origin: String) {
        self.values.entry(name).or_default().push(Sourced {
            value,
            origin,
            from_flags: false,
        });
    }

    /// Names the values that came in as flags by where they were really
    /// written: a batch file fills the same flags from its keys, and its
    /// errors must name the key (`timeout`), not a flag nobody typed.
    pub(crate) fn name_flags_as(mut self, origin: impl Fn(&str) -> String) -> Self {
        for (name, values) in &mut self.values {
            for v in values.iter_mut().filter(|v| v.from_flags) {
                v.origin = origin(name);
            }
        }
        self
    }

    fn add_flags(&mut self, f: &SettingFlags) {
        let texts = [
            ("timeout", &f.timeout),
            ("stall_timeout", &f.stall_timeout),
            ("startup_timeout", &f.startup_timeout),
            ("completion_timeout", &f.completion_timeout),
            ("completion_signal", &f.completion_signal),
            ("on_fatal_error", &f.on_fatal_error),
            ("drain_grace", &f.drain_grace),
            ("kill_grace", &f.kill_grace),
            ("max_line", &f.max_line),
            ("containment", &f.containment),
            ("run_dir", &f.run_dir),
            ("sandbox", &f.sandbox),
            ("image", &f.image),
            ("heartbeat", &f.heartbeat),
        ];
        let mut from_flag = |name, value| {
            self.push(name, value, format!("--{}", name.replace('_', "-")));
            if let Some(last) = self.values.get_mut(name).and_then(|v| v.last_mut()) {
                last.from_flags = true;
            }
        };
        for (name, value) in texts {
            if let Some(v) = value {
                from_flag(name, v.clone());
            }
        }
        for (name, on) in [
            ("json", f.json),
            ("quiet", f.quiet),
            ("no_network", f.no_network),
        ] {
            if on {
                from_flag(name, "true".into());
            }
        }
    }

    fn add_env(&mut self, vars: impl Iterator<Item = (String, String)>) {
        let vars: HashMap<String, String> = vars.collect();
        for key in KEYS {
            let var = format!("WARDEN_{}", key.name.to_ascii_uppercase());
            if let Some(v) = vars.get(&var) {
                self.push(key.name, v.clone(), var);
            }
        }
    }

    fn add_file(&mut self, text: &str, path: &Path) -> Result<(), SettingsError> {
        let table: toml::Table =
            text.parse()
                .map_err(|e: toml::de::Error| SettingsError::Read {
                    path: path.to_path_buf(),
                    message: toml_error(text, &e),
                })?;
        for (k, v) in table {
            let Some(key) = KEYS.iter().find(|key| key.name == k) else {
                return Err(SettingsError::UnknownKey {
                    key: k,
                    path: path.to_path_buf(),
                });
            };
            let origin = format!("`{}` in {}", key.name, path.display());
            let value = match v {
                toml::Value::String(s) => s,
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                other => {
                    return Err(SettingsError::Invalid {
                        origin,
                        value: other.to_string(),
                        expected: key.kind.expected(),
                    });
                }
            };
            self.push(key.name, value, origin);
        }
        Ok(())
    }

    /// Validates every value and keeps the one with the highest precedence.
    pub(crate) fn resolve(self) -> Result<Resolved, SettingsError> {
        let mut parsed: HashMap<&'static str, Value> = HashMap::new();
        for key in KEYS {
            for (i, s) in self.values.get(key.name).into_iter().flatten().enumerate() {
                let v = parse(key.kind, &s.value).map_err(|bad| match bad {
                    Bad::Invalid => SettingsError::Invalid {
                        origin: s.origin.clone(),
                        value: s.value.clone(),
                        expected: key.kind.expected(),
                    },
                    Bad::TooLarge(limit) => SettingsError::TooLarge {
                        origin: s.origin.clone(),
                        value: s.value.clone(),
                        limit,
                    },
                })?;
                if i == 0 {
                    parsed.insert(key.name, v);
                }
            }
        }
        let mut limits = Limits::default();
        let clock_of = |name, default: Option<Duration>| match parsed.get(name) {
            Some(Value::Duration(d)) => clock(*d),
            _ => default,
        };
        limits.timeout = clock_of("timeout", limits.timeout);
        limits.stall_timeout = clock_of("stall_timeout", limits.stall_timeout);
        limits.startup_timeout = clock_of("startup_timeout", limits.startup_timeout);
        limits.completion_timeout = clock_of("completion_timeout", limits.completion_timeout);
        if let Some(Value::Duration(d)) = parsed.get("drain_grace") {
            limits.drain_grace = *d;
        }
        if let Some(Value::Duration(d)) = parsed.get("kill_grace") {
            limits.kill_grace = *d;
        }
        if let Some(Value::Text(t)) = parsed.get("completion_signal") {
            limits.completion_signal = t.clone();
        }
        if let Some(Value::OnFatalError(o)) = parsed.get("on_fatal_error") {
            limits.on_fatal_error = *o;
        }
        if let Some(Value::Bytes(b)) = parsed.get("max_line") {
            limits.max_line = *b;
        }
        let containment = match parsed.get("containment") {
            Some(Value::Containment(c)) => *c,
            _ => ContainmentChoice::Auto,
        };
        let run_dir = match parsed.get("run_dir") {
            Some(Value::Text(p)) => Some(PathBuf::from(p)),
            _ => None,
        };
        let flag = |name| matches!(parsed.get(name), Some(Value::Bool(true)));
        let sandbox = match parsed.get("sandbox") {
            Some(Value::Sandbox(s)) => *s,
            _ => SandboxChoice::Host,
        };
        let image = match parsed.get("image") {
            Some(Value::Text(t)) => Some(t.clone()),
            _ => None,
        };
        Ok(Resolved {
            limits,
            containment,
            sandbox,
            no_network: flag("no_network"),
            image,
            run_dir,
            json: flag("json"),
            quiet: flag("quiet"),
            heartbeat: match parsed.get("heartbeat") {
                Some(Value::Duration(d)) => clock(*d),
                _ => Some(Duration::from_secs(30)),
            },
        })
    }
}

#[derive(Debug, Clone)]
enum Value {
    Duration(Duration),
    Text(String),
    Bool(bool),
    Bytes(usize),
    Containment(ContainmentChoice),
    Sandbox(SandboxChoice),
    OnFatalError(OnFatalError),
}

/// Why a value was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bad {
    Invalid,
    /// Well formed, but past what the setting can hold: says the limit.
    TooLarge(&'static str),
}

fn parse(kind: Kind, s: &str) -> Result<Value, Bad> {
    let t = s.trim();
    match kind {
        Kind::Clock => duration(t)
            .map(Value::Duration)
            .map_err(|b| too_large_says(b, CLOCK_LIMIT)),
        Kind::Grace => duration(t).map(Value::Duration),
        Kind::Bytes => bytes(t).map(Value::Bytes),
        _ => parse_other(kind, s).ok_or(Bad::Invalid),
    }
}

const DURATION_LIMIT: &str = "the most is 100 years";
const CLOCK_LIMIT: &str = "the most is 100 years (`0` disables it)";

fn too_large_says(b: Bad, limit: &'static str) -> Bad {
    match b {
        Bad::TooLarge(_) => Bad::TooLarge(limit),
        other => other,
    }
}

fn parse_other(kind: Kind, s: &str) -> Option<Value> {
    let t = s.trim();
    match kind {
        Kind::Clock | Kind::Grace | Kind::Bytes => None,
        Kind::Text | Kind::Path => (!s.is_empty()).then(|| Value::Text(s.to_string())),
        Kind::Bool => match t.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Some(Value::Bool(true)),
            "false" | "0" | "no" | "off" | "" => Some(Value::Bool(false)),
            _ => None,
        },
        Kind::Sandbox => t.parse().ok().map(Value::Sandbox),
        Kind::OnFatalError => t.parse().ok().map(Value::OnFatalError),
        Kind::Containment => match t {
            "auto" => Some(Value::Containment(ContainmentChoice::Auto)),
            "cgroup" => Some(Value::Containment(ContainmentChoice::Cgroup)),
            "subreaper" => Some(Value::Containment(ContainmentChoice::Subreaper)),
            _ => None,
        },
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
fn bytes(s: &str) -> Result<usize, Bad> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(
        flags: SettingFlags,
        env: &[(&str, &str)],
        file: Option<&str>,
    ) -> Result<Resolved, SettingsError> {
        let mut r = RawSettings::default();
        r.add_flags(&flags);
        r.add_env(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        if let Some(text) = file {
            r.add_file(text, Path::new("/w/warden.toml"))?;
        }
        r.resolve()
    }

    #[test]
    fn durations_parse_in_every_documented_form() {
        for (s, ms) in [
            ("15m", 900_000),
            ("90s", 90_000),
            ("500ms", 500),
            ("1h30m", 5_400_000),
            ("0", 0),
        ] {
            assert_eq!(parse_duration(s), Some(Duration::from_millis(ms)), "{s}");
        }
        assert_eq!(parse_duration("15"), None, "a unit is required");
        assert_eq!(parse_duration("soon"), None);
        assert_eq!(
            parse_duration("300000000000y"),
            None,
            "too long to be a clock"
        );
    }

    #[test]
    fn flag_beats_env_beats_file_beats_default() {
        let file = Some("stall_timeout = \"3m\"\ntimeout = \"2h\"\nkill_grace = \"1s\"");
        let env = [("WARDEN_STALL_TIMEOUT", "2m"), ("WARDEN_TIMEOUT", "90m")];
        let flags = SettingFlags {
            stall_timeout: Some("1m".into()),
            ..SettingFlags::default()
        };
        let r = raw(flags, &env, file).unwrap();
        assert_eq!(r.limits.stall_timeout, Some(Duration::from_secs(60)));
        assert_eq!(r.limits.timeout, Some(Duration::from_secs(90 * 60)));
        assert_eq!(r.limits.kill_grace, Duration::from_secs(1));
        assert_eq!(r.limits.drain_grace, warden_run::defaults::DRAIN_GRACE);
    }

    #[test]
    fn zero_disables_a_clock() {
        let r = raw(
            SettingFlags {
                timeout: Some("0".into()),
                ..Default::default()
            },
            &[],
            None,
        )
        .unwrap();
        assert_eq!(r.limits.timeout, None);
    }

    #[test]
    fn bad_values_name_their_source_value_and_an_example() {
        let e = raw(
            SettingFlags::default(),
            &[("WARDEN_STALL_TIMEOUT", "ten")],
            None,
        )
        .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("WARDEN_STALL_TIMEOUT") && msg.contains("`ten`") && msg.contains("15m"),
            "{msg}"
        );
        // Overridden by a flag, the bad variable is still an error.
        let flags = SettingFlags {
            stall_timeout: Some("1m".into()),
            ..Default::default()
        };
        assert!(raw(flags, &[("WARDEN_STALL_TIMEOUT", "ten")], None).is_err());
        let e = raw(SettingFlags::default(), &[], Some("kill_grace = \"fast\"")).unwrap_err();
        assert!(
            e.to_string().contains("`kill_grace` in /w/warden.toml"),
            "{e}"
        );
        let e = raw(SettingFlags::default(), &[], Some("containment = \"jail\"")).unwrap_err();
        assert!(e.to_string().contains("auto"), "{e}");
    }

    #[test]
    fn sandbox_settings_resolve_and_bad_names_are_explained() {
        let r = raw(
            SettingFlags::default(),
            &[("WARDEN_SANDBOX", "bwrap"), ("WARDEN_NO_NETWORK", "1")],
            Some("image = \"img:1\""),
        )
        .unwrap();
        assert_eq!(r.sandbox, SandboxChoice::Use(warden_run::Sandbox::Bwrap));
        assert!(r.no_network);
        assert_eq!(r.image.as_deref(), Some("img:1"));
        let e = raw(
            SettingFlags {
                sandbox: Some("jail".into()),
                ..Default::default()
            },
            &[],
            None,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("--sandbox") && e.to_string().contains("bwrap"),
            "{e}"
        );
    }

    #[test]
    fn unknown_file_key_is_an_error_listing_known_keys() {
        let e = raw(SettingFlags::default(), &[], Some("stal_timeout = \"1m\"")).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("`stal_timeout`") && msg.contains("stall_timeout"),
            "{msg}"
        );
    }

    #[test]
    fn values_over_the_limit_say_they_are_too_large() {
        for (flags, needle) in [
            (
                SettingFlags {
                    timeout: Some("101y".into()),
                    ..Default::default()
                },
                "--timeout is too large",
            ),
            (
                SettingFlags {
                    stall_timeout: Some("99999999999999999999999s".into()),
                    ..Default::default()
                },
                "--stall-timeout is too large",
            ),
            (
                SettingFlags {
                    kill_grace: Some("300000000000y".into()),
                    ..Default::default()
                },
                "--kill-grace is too large",
            ),
            (
                SettingFlags {
                    max_line: Some("99999999999999999999999".into()),
                    ..Default::default()
                },
                "--max-line is too large",
            ),
        ] {
            let e = raw(flags, &[], None).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
        let e = raw(SettingFlags::default(), &[], Some("timeout = \"200y\""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("too large") && e.contains("`timeout` in"), "{e}");
    }

    #[test]
    fn flags_can_be_named_as_the_batch_keys_they_came_from() {
        let mut r = RawSettings::default();
        r.add_flags(&SettingFlags {
            timeout: Some("soon".into()),
            ..Default::default()
        });
        r.add_env([("WARDEN_STALL_TIMEOUT".to_string(), "1m".to_string())].into_iter());
        let e = r
            .name_flags_as(|k| format!("`{k}`"))
            .resolve()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("for `timeout`") && !e.contains("--timeout"),
            "{e}"
        );
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(bytes("8MiB").ok(), Some(8 << 20));
        assert_eq!(bytes("512k").ok(), Some(512 << 10));
        assert_eq!(bytes("100").ok(), Some(100));
        assert_eq!(bytes("0").ok(), None);
        assert_eq!(bytes("8 parsecs").ok(), None);
    }
}
