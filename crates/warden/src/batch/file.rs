//! The batch file's format: each table read by serde into a type of its
//! own, `[defaults]` merged into each `[[run]]` first so that a run is
//! read, and checked, once; a run's settings go through the settings
//! table (with the environment and warden.toml), its own keys become a
//! [`RunRequest`] directly.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::Deserialize;
use serde::de::{self, Deserializer, Unexpected, Visitor};
use warden_events::Agent;
use warden_run::budget::{Budget, Usd};
use warden_run::{RunRequest, WorktreeRequest};

use crate::error::{CliError, usage};
use crate::settings::{self, Resolved, SettingFlags};

/// A batch file, its tables checked and its budget read.
pub(super) struct Parsed {
    /// What every run has unless it says otherwise.
    pub defaults: toml::Table,
    pub runs: Vec<toml::Table>,
    pub budget: Budget,
    /// `executor` in `[defaults]`: where the runs run is the batch's.
    pub executor: Option<toml::Value>,
    pub slurm: Option<toml::Table>,
}

/// Reads a batch file's text; an error says what is wrong, and where.
pub(super) fn parse(text: &str) -> Result<Parsed, String> {
    let doc: toml::Table = text.parse().map_err(|e: toml::de::Error| e.to_string())?;
    let BatchFile {
        mut defaults,
        run: runs,
        budget,
        slurm,
    } = read::<BatchFile>(doc).map_err(|e| match e {
        Refused::UnknownKey(key) => format!(
            "unknown table `{key}`: a batch file has [defaults], [[run]], [budget] and [slurm] tables"
        ),
        Refused::Bad { key, says } => format!("`{key}`{says}"),
    })?;
    let budget = match budget {
        Some(t) => batch_budget(t)?,
        None => Budget::default(),
    };
    if runs.is_empty() {
        return Err("no [[run]] tables: add at least one".into());
    }
    // A name is each run's own.
    defaults.remove("name");
    Ok(Parsed {
        executor: defaults.remove("executor"),
        defaults,
        runs,
        budget,
        slurm,
    })
}

/// Run `index` (from 0) of the file: its own keys, and its settings as
/// flags, `[defaults]` merged in.
pub(super) fn run(
    defaults: &toml::Table,
    run: toml::Table,
    index: usize,
) -> Result<(RunKeys, SettingFlags), String> {
    let mut merged = defaults.clone();
    merged.extend(run);
    split(merged, index)
}

/// A batch file: its tables, each read as its own type below (the
/// `[defaults]` merged into each `[[run]]` first, so that a run is read,
/// and checked, once).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchFile {
    #[serde(default)]
    defaults: toml::Table,
    #[serde(default)]
    run: Vec<toml::Table>,
    budget: Option<toml::Table>,
    slurm: Option<toml::Table>,
}

/// The keys of a run (or of `[defaults]`) besides the settings, which are
/// those of the settings table a batch may set.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RunKeys {
    name: Option<Text>,
    agent: Option<Text>,
    prompt: Option<Text>,
    prompt_file: Option<Text>,
    /// Fill `{{NAME}}` in the prompt.
    #[serde(default)]
    args: Args,
    model: Option<Text>,
    effort: Option<Text>,
    resume: Option<Text>,
    agent_bin: Option<Text>,
    /// For an agent: more arguments for its CLI.
    extra_args: Option<List>,
    /// For `exec`: the command and its arguments.
    command: Option<List>,
    worktree: Option<Worktree>,
    base: Option<Text>,
    keep_worktree: Option<Switch>,
    iterations: Option<Whole<1, { u32::MAX as u64 }>>,
    #[serde(default)]
    env: List,
    #[serde(default)]
    ro: List,
    #[serde(default)]
    rw: List,
    cwd: Option<Text>,
    output_tag: Option<Text>,
    output_schema: Option<Text>,
    output_retries: Option<Whole<0, { u32::MAX as u64 }>>,
    preamble: Option<Switch>,
}

/// The batch file's `[budget]`: what all the runs may spend together.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BudgetKeys {
    /// US dollars.
    max_cost: Option<Dollars>,
    /// `tokens.total`.
    max_tokens: Option<Whole<1, { u64::MAX }>>,
    max_turns: Option<Whole<1, { u64::MAX }>>,
}

impl BudgetKeys {
    fn budget(&self) -> Budget {
        let mut b = Budget::default();
        b.max_cost_usd = self.max_cost.map(|d| d.0);
        b.max_tokens = self.max_tokens.map(|n| n.0);
        b.max_turns = self.max_turns.map(|n| n.0);
        b
    }
}

/// A value read as text, as the command line would have it: a string, or
/// a number or `true`/`false` written bare (`name = 1` names the run "1").
#[derive(Debug, Clone, PartialEq)]
struct Text(String);

/// A list of values read as text.
#[derive(Debug, Clone, Default, PartialEq)]
struct List(Vec<String>);

/// `args`: the values of a prompt template's `{{NAME}}`s.
#[derive(Debug, Clone, Default, PartialEq)]
struct Args(BTreeMap<String, String>);

/// `true` or `false`.
#[derive(Debug, Clone, Copy)]
struct Switch(bool);

/// A whole number from `MIN` to `MAX`.
#[derive(Debug, Clone, Copy)]
struct Whole<const MIN: u64, const MAX: u64>(u64);

/// A sum of US dollars greater than 0.
#[derive(Debug, Clone, Copy)]
struct Dollars(Usd);

/// `worktree`: `true` (a new branch warden names), `false`, or the branch.
#[derive(Debug, Clone, PartialEq)]
enum Worktree {
    Off,
    Branch(Option<String>),
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Text;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Text, E> {
                Ok(Text(s.to_string()))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Text, E> {
                Ok(Text(n.to_string()))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Text, E> {
                Ok(Text(n.to_string()))
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<Text, E> {
                Ok(Text(n.to_string()))
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> Result<Text, E> {
                Ok(Text(b.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for List {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = List;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of strings")
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<List, A::Error> {
                let mut list = Vec::new();
                while let Some(Text(t)) = seq.next_element()? {
                    list.push(t);
                }
                Ok(List(list))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Args {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Args;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a table of NAME = \"value\"")
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Args, A::Error> {
                let mut args = BTreeMap::new();
                while let Some((name, Text(value))) = map.next_entry::<String, Text>()? {
                    // The name as `--arg NAME=VALUE` takes it.
                    warden_run::template::parse_arg(&format!("{name}="))
                        .ok()
                        .filter(|(n, _)| *n == name)
                        .ok_or_else(|| {
                            de::Error::custom(format_args!(
                                "`{name}` is not a NAME: letters, digits, `_` and `-`"
                            ))
                        })?;
                    args.insert(name, value);
                }
                Ok(Args(args))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Switch {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Switch;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("true or false")
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> Result<Switch, E> {
                Ok(Switch(b))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de, const MIN: u64, const MAX: u64> Deserialize<'de> for Whole<MIN, MAX> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<const MIN: u64, const MAX: u64>;
        impl<const MIN: u64, const MAX: u64> Visitor<'_> for V<MIN, MAX> {
            type Value = Whole<MIN, MAX>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                match MIN {
                    0 => f.write_str("a whole number"),
                    _ => write!(f, "a whole number of at least {MIN}"),
                }
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Self::Value, E> {
                if n < MIN {
                    Err(E::invalid_value(Unexpected::Unsigned(n), &self))
                } else if n > MAX {
                    Err(E::custom(format_args!("{n} is too large: at most {MAX}")))
                } else {
                    Ok(Whole(n))
                }
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Self::Value, E> {
                match u64::try_from(n) {
                    Ok(n) => self.visit_u64(n),
                    Err(_) => Err(E::invalid_value(Unexpected::Signed(n), &self)),
                }
            }
        }
        d.deserialize_any(V::<MIN, MAX>)
    }
}

impl<'de> Deserialize<'de> for Dollars {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Dollars;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a sum of US dollars greater than 0, such as 5.0")
            }
            fn visit_f64<E: de::Error>(self, d: f64) -> Result<Dollars, E> {
                Some(d)
                    .filter(|d| *d > 0.0)
                    .and_then(Usd::from_dollars)
                    .map(Dollars)
                    .ok_or_else(|| E::invalid_value(Unexpected::Float(d), &self))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Dollars, E> {
                if n <= 0 {
                    return Err(E::invalid_value(Unexpected::Signed(n), &self));
                }
                self.visit_f64(n as f64)
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Dollars, E> {
                self.visit_f64(n as f64)
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Worktree {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Worktree;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("true, false or a branch name")
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> Result<Worktree, E> {
                Ok(if b {
                    Worktree::Branch(None)
                } else {
                    Worktree::Off
                })
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Worktree, E> {
                // An empty name is warden's, as `--worktree` alone.
                Ok(Worktree::Branch(
                    Some(s.to_string()).filter(|s| !s.is_empty()),
                ))
            }
        }
        d.deserialize_any(V)
    }
}

/// What went wrong reading a table as `T`: the key (its path inside the
/// table, `args.ISSUE`) and what is wrong with it, in the file's words.
enum Refused {
    UnknownKey(String),
    Bad { key: String, says: String },
}

/// Reads `table` as `T`, saying which key was wrong and how.
fn read<T: serde::de::DeserializeOwned>(table: toml::Table) -> Result<T, Refused> {
    serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
        let key = e.path().to_string();
        let message = e.into_inner().message().trim().to_string();
        // What `deny_unknown_fields` says (serde's words).
        if message.starts_with("unknown field") {
            return Refused::UnknownKey(key);
        }
        // serde's "invalid type: X, expected Y" as "must be Y, not X".
        let says = match message
            .strip_prefix("invalid type: ")
            .or_else(|| message.strip_prefix("invalid value: "))
            .and_then(|m| m.split_once(", expected "))
        {
            Some((got, want)) => {
                // In TOML's words: `[[run]]` is an array of tables.
                let want = match want {
                    "a map" => "a table",
                    "a sequence" => "an array",
                    other => other,
                };
                format!(" must be {want}, not {got}")
            }
            None => format!(": {message}"),
        };
        Refused::Bad { key, says }
    })
}

/// The keys a derived `T` declares, as serde has them: the list an
/// unknown key is answered with is the one the struct reads.
fn fields_of<T: serde::de::DeserializeOwned>() -> &'static [&'static str] {
    /// A deserializer that only notes the fields it is asked for.
    struct Fields<'a>(&'a mut &'static [&'static str]);
    impl<'de> Deserializer<'de> for Fields<'_> {
        type Error = de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("only a struct's fields are read"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(de::Error::custom("only a struct's fields are read"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf option unit unit_struct newtype_struct seq tuple
            tuple_struct map enum identifier ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Fields(&mut fields));
    fields
}

/// The keys a run may have: its own, and the settings a batch may set.
fn run_keys() -> Vec<&'static str> {
    fields_of::<RunKeys>()
        .iter()
        .copied()
        .chain(
            settings::SETTINGS
                .iter()
                .filter(|s| s.in_batch)
                .map(|s| s.name),
        )
        .collect()
}

/// A scalar as the text its flag would take.
fn scalar_text(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// One run, `[defaults]` merged in, as the run's own keys and its settings
/// (as flags: the settings table reads them with the environment and
/// warden.toml, each value once).
fn split(merged: toml::Table, index: usize) -> Result<(RunKeys, SettingFlags), String> {
    let mut flags = SettingFlags::default();
    let mut own = toml::Table::new();
    for (k, v) in merged {
        let Some(setting) = settings::find(&k).filter(|s| s.in_batch) else {
            own.insert(k, v);
            continue;
        };
        if setting.kind.is_switch() {
            // `false` is as if the key were not there: it does not
            // override the environment or warden.toml.
            match v {
                toml::Value::Boolean(true) => flags.set(setting, "true"),
                toml::Value::Boolean(false) => {}
                _ => return Err(format!("run {}: `{k}` must be true or false", index + 1)),
            }
            continue;
        }
        // A list (`retry_on`) as the comma list its flag takes.
        let text = scalar_text(&v).or_else(|| {
            v.as_array()?
                .iter()
                .map(scalar_text)
                .collect::<Option<Vec<_>>>()
                .filter(|l| l.iter().all(|item| setting.kind.keeps_item(item)))
                .map(|l| l.join(setting.kind.list_separator()))
        });
        match text {
            Some(text) => flags.set(setting, text),
            None if v.is_array() => {
                return Err(format!(
                    "run {}: `{k}`: expected {}",
                    index + 1,
                    setting.kind.expected()
                ));
            }
            None => return Err(format!("run {}: `{k}` must be a string", index + 1)),
        }
    }
    // A batch has its own view: no run echoes its agent's output.
    if let Some(quiet) = settings::find("quiet") {
        flags.set(quiet, "true");
    }
    let keys = read::<RunKeys>(own).map_err(|e| match e {
        Refused::UnknownKey(key) => format!(
            "run {}: unknown key `{key}`; known keys: {}",
            index + 1,
            run_keys().join(", ")
        ),
        Refused::Bad { key, says } => format!("run {}: `{key}`{says}", index + 1),
    })?;
    Ok((keys, flags))
}

impl RunKeys {
    /// The run's name: its `name`, else `run-N`.
    pub(super) fn name(&self, index: usize) -> String {
        match &self.name {
            Some(Text(n)) => n.clone(),
            None => format!("run-{}", index + 1),
        }
    }

    /// The run's agent, named in the run or in `[defaults]`.
    pub(super) fn agent(&self, index: usize, name: &str) -> Result<Agent, String> {
        match &self.agent {
            Some(Text(a)) => a.parse().map_err(|e| format!("run `{name}`: {e}")),
            None => Err(format!(
                "run {} has no `agent` (set it in the run or in [defaults])",
                index + 1
            )),
        }
    }

    /// Where the run works: its `cwd`, from `here`.
    pub(super) fn cwd(&self, here: &Path) -> std::path::PathBuf {
        match &self.cwd {
            Some(Text(d)) => here.join(d),
            None => here.to_path_buf(),
        }
    }

    pub(super) fn prompt(&self) -> Option<&str> {
        self.prompt.as_ref().map(|Text(p)| p.as_str())
    }

    pub(super) fn prompt_file(&self) -> Option<&Path> {
        self.prompt_file.as_ref().map(|Text(f)| Path::new(f))
    }

    /// The request this run describes, with the settings `resolved`; not
    /// checked yet (the batch adds its budget first).
    pub(super) fn request(
        self,
        agent: Agent,
        cwd: &Path,
        resolved: &Resolved,
    ) -> Result<RunRequest, CliError> {
        let paths = |List(l): List| {
            l.iter()
                .map(|p| crate::request::absolute(cwd, Path::new(p)))
                .collect::<Vec<_>>()
        };
        let output_retries = self.output_retries.map_or(0, |Whole(n)| n as u32);
        let output = crate::request::output(
            self.output_tag.as_ref().map(|Text(t)| t.as_str()),
            self.output_schema.as_ref().map(|Text(p)| Path::new(p)),
            output_retries,
            cwd,
            &|key| format!("`{key}`"),
        )?;
        let mut request = crate::request::with_settings(agent, cwd, resolved);
        if agent == Agent::Exec {
            if self.prompt.is_some() || self.prompt_file.is_some() {
                return Err(usage(
                    "`exec` runs a command, not a prompt: give it as `command`, e.g. command = [\"make\", \"test\"]",
                ));
            }
            if !self.args.0.is_empty() {
                return Err(usage(
                    "`args` is for agents; `exec` runs its `command` as it is",
                ));
            }
            request.command = self.command.or(self.extra_args).unwrap_or_default().0;
        } else {
            if self.prompt.is_some() && self.prompt_file.is_some() {
                return Err(usage("give `prompt` or `prompt_file`, not both"));
            }
            let text = crate::prompt_input::read_prompt(
                self.prompt.as_ref().map(|Text(p)| p.as_str()),
                self.prompt_file(),
            )
            .map_err(usage)?
            .unwrap_or_default();
            let templated = self.prompt_file.is_some() || !self.args.0.is_empty();
            let from_file = self.prompt_file().is_some_and(|f| f != Path::new("-"));
            request.prompt = Some(crate::request::prompt(
                text,
                templated,
                self.args.0,
                from_file,
            ));
            request.extra_args = self.extra_args.or(self.command).unwrap_or_default().0;
        }
        request.preamble = self.preamble.is_some_and(|Switch(on)| on);
        request.model = self.model.map(|Text(t)| t);
        request.effort = self.effort.map(|Text(t)| t);
        request.resume = self.resume.map(|Text(t)| t);
        request.agent_bin = self.agent_bin.map(|Text(p)| p.into());
        request.sandbox.ro = paths(self.ro);
        request.sandbox.rw = paths(self.rw);
        request.env = crate::request::env(&self.env.0).map_err(usage)?;
        request.output = output;
        request.session.iterations = self.iterations.map_or(1, |Whole(n)| n as u32);
        request.session.worktree = match self.worktree {
            None | Some(Worktree::Off) => None,
            Some(Worktree::Branch(branch)) => Some(WorktreeRequest {
                branch,
                base: self.base.map(|Text(b)| b),
                keep: self.keep_worktree.is_some_and(|Switch(on)| on),
            }),
        };
        Ok(request)
    }
}

/// The batch file's `[budget]`.
fn batch_budget(table: toml::Table) -> Result<Budget, String> {
    match read::<BudgetKeys>(table) {
        Ok(keys) => Ok(keys.budget()),
        Err(Refused::UnknownKey(key)) => Err(format!(
            "[budget]: unknown key `{key}`; known keys: {}",
            fields_of::<BudgetKeys>().join(", ")
        )),
        Err(Refused::Bad { key, says }) => Err(format!("[budget] `{key}`{says}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> toml::Table {
        text.parse().expect("TOML")
    }

    fn one_run(text: &str) -> Result<(RunKeys, SettingFlags), String> {
        split(table(text), 1)
    }

    #[test]
    fn an_unknown_key_is_refused_by_name_with_every_key_a_run_may_have() {
        let Err(e) = one_run("agent = \"exec\"\nstal_timeout = \"1m\"") else {
            panic!("a typo accepted");
        };
        assert!(
            e.starts_with("run 2: unknown key `stal_timeout`; known keys: name, agent, prompt,"),
            "{e}"
        );
        assert!(e.contains("preamble, timeout, stall_timeout"), "{e}");
        // Settings a batch decides for itself are no run's keys.
        assert!(!e.contains("heartbeat") && !e.contains("run_dir"), "{e}");
        let Err(e) = one_run("heartbeat = \"1s\"") else {
            panic!("a batch's own setting taken from a run");
        };
        assert!(e.contains("unknown key `heartbeat`"), "{e}");
    }

    #[test]
    fn a_bad_value_names_its_key_what_it_must_be_and_what_it_was() {
        for (text, says) in [
            (
                "iterations = 0",
                "run 2: `iterations` must be a whole number of at least 1, not integer `0`",
            ),
            (
                "iterations = 4294967297",
                "run 2: `iterations`: 4294967297 is too large: at most 4294967295",
            ),
            (
                "output_retries = -1",
                "run 2: `output_retries` must be a whole number, not integer `-1`",
            ),
            (
                "preamble = 1",
                "run 2: `preamble` must be true or false, not integer `1`",
            ),
            (
                "worktree = 3",
                "run 2: `worktree` must be true, false or a branch name, not integer `3`",
            ),
            (
                "env = \"A\"",
                "run 2: `env` must be a list of strings, not string \"A\"",
            ),
            (
                "model = [1]",
                "run 2: `model` must be a string, not sequence",
            ),
            (
                "args = { ISSUE = [] }",
                "run 2: `args.ISSUE` must be a string",
            ),
            (
                "args = 2",
                "run 2: `args` must be a table of NAME = \"value\"",
            ),
            ("args = { \"A B\" = \"x\" }", "`A B` is not a NAME"),
            (
                "no_network = \"yes\"",
                "run 2: `no_network` must be true or false",
            ),
            ("timeout = { a = 1 }", "run 2: `timeout` must be a string"),
            (
                "args = [\"A=1\"]",
                "run 2: `args` must be a table of NAME = \"value\"",
            ),
        ] {
            match one_run(text) {
                Ok(_) => panic!("{text} accepted"),
                Err(e) => assert!(e.starts_with(says) || e.contains(says), "{text}: {e}"),
            }
        }
    }

    #[test]
    fn run_keys_and_settings_are_read_as_the_command_line_has_them() {
        let (keys, flags) = one_run(
            "agent = \"claude\"\nname = 7\nargs = { ISSUE = 2 }\nworktree = \"fix\"\nkeep_worktree = true\n\
             iterations = 3\nextra_args = [\"--x\", 1]\ntimeout = \"5m\"\nretry_on = [\"stalled\", \"network\"]\n\
             no_network = false\nsandbox = \"bwrap\"\nmax_cost = 0.5",
        )
        .unwrap();
        assert_eq!(keys.name, Some(Text("7".into())));
        assert_eq!(keys.args.0.get("ISSUE").map(String::as_str), Some("2"));
        assert_eq!(keys.worktree, Some(Worktree::Branch(Some("fix".into()))));
        assert_eq!(keys.iterations.map(|w| w.0), Some(3));
        assert_eq!(keys.extra_args, Some(List(vec!["--x".into(), "1".into()])));
        let given: Vec<(&str, &str)> = flags.given().collect();
        assert_eq!(
            given,
            [
                ("max_cost", "0.5"),
                ("quiet", "true"),
                ("retry_on", "stalled,network"),
                ("sandbox", "bwrap"),
                ("timeout", "5m"),
            ],
            "`false` sets nothing; a batch's runs are quiet"
        );
        let (keys, _) = one_run("worktree = true").unwrap();
        assert_eq!(keys.worktree, Some(Worktree::Branch(None)));
        let (keys, _) = one_run("worktree = false").unwrap();
        assert_eq!(keys.worktree, Some(Worktree::Off));
    }

    #[test]
    fn the_tables_of_the_file_are_checked_before_any_run() {
        for (text, says) in [
            (
                "[runs]\n",
                "unknown table `runs`: a batch file has [defaults], [[run]]",
            ),
            ("run = 3\n", "`run` must be an array, not integer `3`"),
            (
                "defaults = 1\n[[run]]\n",
                "`defaults` must be a table, not integer `1`",
            ),
            (
                "[defaults]\nagent = \"exec\"\n",
                "no [[run]] tables: add at least one",
            ),
            (
                "[budget]\nmax_turns = 0\n[[run]]\n",
                "[budget] `max_turns` must be",
            ),
            ("[[run]\n", "TOML parse error"),
        ] {
            match parse(text) {
                Ok(_) => panic!("{text} accepted"),
                Err(e) => assert!(e.starts_with(says), "{text}: {e}"),
            }
        }
        let parsed = parse(
            "[defaults]\nexecutor = \"slurm\"\nname = \"all\"\nagent = \"exec\"\n[[run]]\n[slurm]\npartition = \"p\"\n",
        )
        .unwrap();
        assert_eq!(parsed.executor, Some(toml::Value::from("slurm")));
        assert!(parsed.slurm.is_some());
        let (keys, _) = run(&parsed.defaults, parsed.runs[0].clone(), 0).unwrap();
        assert_eq!(keys.name(0), "run-1", "a name in [defaults] names no run");
        assert_eq!(keys.agent(0, "run-1"), Ok(Agent::Exec));
    }

    #[test]
    fn the_budget_table_takes_dollars_and_whole_numbers_and_refuses_the_rest() {
        let b = batch_budget(table("max_cost = 5\nmax_tokens = 2000\nmax_turns = 40")).unwrap();
        assert_eq!(b.max_cost_usd.map(|u| u.dollars()), Some(5.0));
        assert_eq!((b.max_tokens, b.max_turns), (Some(2000), Some(40)));
        for (text, says) in [
            (
                "max_cost = -1",
                "[budget] `max_cost` must be a sum of US dollars greater than 0, such as 5.0, not integer `-1`",
            ),
            (
                "max_cost = \"5\"",
                "[budget] `max_cost` must be a sum of US dollars",
            ),
            (
                "max_turns = 2.5",
                "[budget] `max_turns` must be a whole number of at least 1",
            ),
            (
                "max_money = 1",
                "[budget]: unknown key `max_money`; known keys: max_cost, max_tokens, max_turns",
            ),
        ] {
            let e = batch_budget(table(text)).unwrap_err();
            assert!(e.starts_with(says), "{text}: {e}");
        }
    }

    #[test]
    fn the_book_lists_the_keys_of_a_run_as_the_batch_file_reads_them() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/src/batches.md");
        let readme = std::fs::read_to_string(path).expect("the book's batches chapter");
        let listed: Vec<&str> = readme
            .split("\nRun keys: ")
            .nth(1)
            .and_then(|s| s.split(", and the\nsettings").next())
            .expect("the batches chapter's list of run keys")
            .split(',')
            .map(|k| k.split('`').nth(1).expect("a key in backquotes"))
            .collect();
        assert_eq!(listed, fields_of::<RunKeys>());
    }
}
