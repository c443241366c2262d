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

mod flags;
mod table;

pub(crate) use flags::SettingFlags;
use table::known_keys;
pub(crate) use table::{SETTINGS, find};

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
    /// A flag without a value; `true` or `false` from the other sources.
    Switch(fn(&mut Resolved, bool)),
    Bytes(fn(&mut Resolved, usize)),
    Containment(fn(&mut Resolved, ContainmentChoice)),
    Sandbox(fn(&mut Resolved, SandboxChoice)),
    Path(fn(&mut Resolved, PathBuf)),
    /// What a fatal error of the agent does: `end` or `wait`.
    OnFatalError(fn(&mut Resolved, OnFatalError)),
}

/// A parsed value, ready to be put in its place.
type Setter = Box<dyn FnOnce(&mut Resolved)>;

impl Kind {
    fn expected(self) -> &'static str {
        match self {
            Kind::Clock(_) => {
                "a duration such as `15m`, `90s`, `250ms` or `1h30m` (`0` disables it)"
            }
            Kind::Grace(_) => "a duration such as `10s`, `500ms` or `1m` (`0` for none)",
            Kind::Text(_) => "a non-empty string such as `<promise>COMPLETE</promise>`",
            Kind::Switch(_) => "`true` or `false` (or `1` / `0`)",
            Kind::Bytes(_) => "a size in bytes such as `8MiB`, `512KiB` or `1048576`",
            Kind::Containment(_) => "one of `auto`, `cgroup`, `subreaper`",
            Kind::Sandbox(_) => "one of `auto`, `host`, `bwrap`, `docker`, `podman`",
            Kind::Path(_) => "a directory path such as `.warden/runs/my-run`",
            Kind::OnFatalError(_) => "`end` (end the run at once) or `wait` (let the agent retry)",
        }
    }

    /// A flag without a value.
    pub(crate) fn is_switch(self) -> bool {
        matches!(self, Kind::Switch(_))
    }

    /// Checks the text; only looks at it, never at the machine (whether a
    /// sandbox or a cgroup is there is for the run to find out).
    fn parse(self, s: &str) -> Result<Setter, Bad> {
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
            Kind::Text(set) => {
                let text = non_empty(s)?;
                Box::new(move |r| set(r, text))
            }
            Kind::Path(set) => {
                let path = PathBuf::from(non_empty(s)?);
                Box::new(move |r| set(r, path))
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

/// The default a setting shows in `--help` and the README.
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

/// One setting. Its name is its `warden.toml` key and its batch key; the
/// flag is the name with dashes, the variable `WARDEN_` and the name in
/// capitals.
#[derive(Clone, Copy)]
pub(crate) struct Setting {
    pub name: &'static str,
    pub kind: Kind,
    pub default: Shown,
    /// The `--help` line, without the default.
    pub doc: &'static str,
    /// The value's placeholder in `--help`; unused for a switch.
    pub value_name: &'static str,
    pub short: Option<char>,
    /// Whether a batch file may set it (a batch decides some for itself).
    pub in_batch: bool,
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

    /// The `--help` line: the doc, then the default.
    pub(crate) fn help(&self) -> String {
        let disables = if matches!(self.kind, Kind::Clock(_)) {
            "; 0 disables"
        } else {
            ""
        };
        match self.default {
            Shown::Value(d) | Shown::Described(d) => {
                format!("{} [default: {d}{disables}]", self.doc)
            }
            Shown::Off | Shown::Unset => self.doc.to_string(),
        }
    }
}

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
        for (name, value) in f.given() {
            let Some(setting) = find(name) else { continue };
            self.push(
                setting.name,
                value.to_string(),
                format!("--{}", setting.flag()),
            );
            if let Some(last) = self.values.get_mut(setting.name).and_then(|v| v.last_mut()) {
                last.from_flags = true;
            }
        }
    }

    fn add_env(&mut self, vars: impl Iterator<Item = (String, String)>) {
        let vars: HashMap<String, String> = vars.collect();
        for setting in SETTINGS {
            let var = setting.env();
            if let Some(v) = vars.get(&var) {
                self.push(setting.name, v.clone(), var);
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
            let Some(setting) = find(&k) else {
                return Err(SettingsError::UnknownKey {
                    key: k,
                    path: path.to_path_buf(),
                });
            };
            let origin = format!("`{}` in {}", setting.name, path.display());
            let value = match v {
                toml::Value::String(s) => s,
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                other => {
                    return Err(SettingsError::Invalid {
                        origin,
                        value: other.to_string(),
                        expected: setting.kind.expected(),
                    });
                }
            };
            self.push(setting.name, value, origin);
        }
        Ok(())
    }

    /// Validates every value and keeps the one with the highest
    /// precedence. Only the values are looked at: nothing on the machine
    /// is probed here (`sandbox = auto` stays `Auto` for the run to
    /// resolve).
    pub(crate) fn resolve(self) -> Result<Resolved, SettingsError> {
        let mut resolved = Resolved::default();
        for setting in SETTINGS {
            let mut winner = None;
            for s in self.values.get(setting.name).into_iter().flatten() {
                let set = setting.kind.parse(&s.value).map_err(|bad| match bad {
                    Bad::Invalid => SettingsError::Invalid {
                        origin: s.origin.clone(),
                        value: s.value.clone(),
                        expected: setting.kind.expected(),
                    },
                    Bad::TooLarge(limit) => SettingsError::TooLarge {
                        origin: s.origin.clone(),
                        value: s.value.clone(),
                        limit,
                    },
                })?;
                winner.get_or_insert(set);
            }
            if let Some(set) = winner {
                set(&mut resolved);
            }
        }
        Ok(resolved)
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

    /// A valid value of each kind that is no setting's default.
    fn sample(kind: Kind) -> &'static str {
        match kind {
            Kind::Clock(_) => "7s",
            Kind::Grace(_) => "3s",
            Kind::Text(_) => "sample-text",
            Kind::Path(_) => "some/dir",
            Kind::Switch(_) => "true",
            Kind::Bytes(_) => "4KiB",
            Kind::Containment(_) => "subreaper",
            Kind::Sandbox(_) => "bwrap",
            Kind::OnFatalError(_) => "wait",
        }
    }

    /// The flags `warden run` parses from this command line.
    fn parsed_flags(argv: &[&str]) -> SettingFlags {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{e}"));
        match cli.command {
            crate::cli::Command::Run(args) => args.settings,
            other => panic!("not a run: {other:?}"),
        }
    }

    #[test]
    fn each_setting_has_one_name_as_flag_variable_and_key() {
        use clap::CommandFactory;
        let cli = crate::cli::Cli::command();
        let run = cli.find_subcommand("run").expect("a run command");
        let mut names = std::collections::HashSet::new();
        for setting in SETTINGS {
            let name = setting.name;
            assert!(names.insert(name), "`{name}` is in the table twice");
            assert!(
                name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "`{name}`: a key is lower case words joined by `_`"
            );
            let arg = run
                .get_arguments()
                .find(|a| a.get_id() == name)
                .unwrap_or_else(|| panic!("no argument for `{name}`"));
            let flag = arg.get_long().expect("a long flag");
            assert_eq!(flag.replace('-', "_"), name, "the flag of `{name}`");
            assert_eq!(
                setting.env(),
                format!("WARDEN_{}", flag.replace('-', "_").to_uppercase())
            );

            // The same value through each source sets the same thing,
            // and something that is not the default.
            let value = sample(setting.kind);
            let long = format!("--{flag}");
            let mut argv = vec!["warden", "run", "exec", long.as_str()];
            if !setting.kind.is_switch() {
                argv.push(value);
            }
            let by_flag = raw(parsed_flags(&argv), &[], None).unwrap();
            let by_env = raw(SettingFlags::default(), &[(&setting.env(), value)], None).unwrap();
            let by_file = raw(
                SettingFlags::default(),
                &[],
                Some(&format!("{name} = {value:?}")),
            )
            .unwrap();
            let shown = |r: &Resolved| format!("{r:?}");
            assert_eq!(
                shown(&by_flag),
                shown(&by_env),
                "`{name}`: flag and variable"
            );
            assert_eq!(
                shown(&by_flag),
                shown(&by_file),
                "`{name}`: flag and warden.toml"
            );
            assert_ne!(
                shown(&by_flag),
                shown(&Resolved::default()),
                "`{name}` = {value:?} changed nothing"
            );
        }
    }

    #[test]
    fn the_default_each_setting_shows_is_its_default() {
        let default = format!("{:?}", Resolved::default());
        for setting in SETTINGS {
            let value = match setting.default {
                Shown::Value(v) => v,
                Shown::Off => "false",
                Shown::Described(_) | Shown::Unset => continue,
            };
            let r = raw(SettingFlags::default(), &[(&setting.env(), value)], None).unwrap();
            assert_eq!(
                format!("{r:?}"),
                default,
                "`{}` shows the default {value:?}, which is not its default",
                setting.name
            );
        }
    }

    #[test]
    fn resolving_looks_at_values_not_at_the_machine() {
        // Whether bwrap, docker or a cgroup is there is the run's to find
        // out: `auto` stays `auto`, a named sandbox or containment is
        // taken as asked, whatever this machine has.
        for (sandbox, want) in [
            ("auto", SandboxChoice::Auto),
            ("docker", SandboxChoice::Use(warden_run::Sandbox::Docker)),
            ("podman", SandboxChoice::Use(warden_run::Sandbox::Podman)),
        ] {
            let r = raw(SettingFlags::of(&[("sandbox", sandbox)]), &[], None).unwrap();
            assert_eq!(r.sandbox, want);
        }
        let r = raw(SettingFlags::of(&[("containment", "cgroup")]), &[], None).unwrap();
        assert_eq!(r.containment, ContainmentChoice::Cgroup);
    }

    #[test]
    fn the_readme_lists_every_setting_as_the_table_has_it() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
        let readme = std::fs::read_to_string(path).expect("the README");
        let section = readme
            .split("\n## Settings\n")
            .nth(1)
            .and_then(|s| s.split("\n## ").next())
            .expect("a Settings section");
        let rows: Vec<Vec<&str>> = section
            .lines()
            .filter(|l| l.starts_with("| `"))
            .map(|l| l.split(" | ").collect())
            .collect();
        assert_eq!(rows.len(), SETTINGS.len(), "one README row per setting");
        for setting in SETTINGS {
            let key = format!("`{}`", setting.name);
            let row = rows
                .iter()
                .find(|row| row.get(2) == Some(&key.as_str()))
                .unwrap_or_else(|| panic!("no README row for {key}"));
            let default = match setting.default {
                Shown::Value(v) | Shown::Described(v) => format!("`{v}`"),
                Shown::Off => "off".into(),
                Shown::Unset => "—".into(),
            };
            assert!(
                row[0].ends_with(&format!("`--{}`", setting.flag()))
                    || row[0].contains(&format!("`--{} ", setting.flag())),
                "README flag of `{}`: {row:?}",
                setting.name
            );
            assert_eq!(row[1], format!("`{}`", setting.env()), "{row:?}");
            assert_eq!(row[3], default, "README default of `{}`", setting.name);
        }
        // The batch keys, in `warden batch`'s section.
        let batch = readme
            .split("and the\nsettings (")
            .nth(1)
            .and_then(|s| s.split(')').next())
            .expect("the batch file's list of settings");
        let listed: std::collections::BTreeSet<&str> = batch
            .split(|c: char| c == ',' || c.is_whitespace())
            .map(|w| w.trim_matches('`'))
            .filter(|w| !w.is_empty())
            .collect();
        let in_batch: std::collections::BTreeSet<&str> = SETTINGS
            .iter()
            .filter(|s| s.in_batch)
            .map(|s| s.name)
            .collect();
        assert_eq!(listed, in_batch, "the settings a batch file may set");
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
        let flags = SettingFlags::of(&[("stall_timeout", "1m")]);
        let r = raw(flags, &env, file).unwrap();
        assert_eq!(r.limits.stall_timeout, Some(Duration::from_secs(60)));
        assert_eq!(r.limits.timeout, Some(Duration::from_secs(90 * 60)));
        assert_eq!(r.limits.kill_grace, Duration::from_secs(1));
        assert_eq!(r.limits.drain_grace, warden_run::defaults::DRAIN_GRACE);
    }

    #[test]
    fn zero_disables_a_clock() {
        let r = raw(SettingFlags::of(&[("timeout", "0")]), &[], None).unwrap();
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
        let flags = SettingFlags::of(&[("stall_timeout", "1m")]);
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
        let e = raw(SettingFlags::of(&[("sandbox", "jail")]), &[], None).unwrap_err();
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
                SettingFlags::of(&[("timeout", "101y")]),
                "--timeout is too large",
            ),
            (
                SettingFlags::of(&[("stall_timeout", "99999999999999999999999s")]),
                "--stall-timeout is too large",
            ),
            (
                SettingFlags::of(&[("kill_grace", "300000000000y")]),
                "--kill-grace is too large",
            ),
            (
                SettingFlags::of(&[("max_line", "99999999999999999999999")]),
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
        r.add_flags(&SettingFlags::of(&[("timeout", "soon")]));
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
