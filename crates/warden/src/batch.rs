//! `warden batch FILE.toml -j N`: many runs, N at a time, one view, one
//! `batch.json`.
//!
//! ```toml
//! [defaults]            # any run key, and any setting (timeout, sandbox, ...)
//! agent = "claude"
//! stall_timeout = "5m"
//!
//! [[run]]
//! name = "issue-1"
//! prompt = "Fix issue 1"
//!
//! [[run]]
//! name = "issue-2"
//! prompt_file = "tasks/issue.md"
//! args = { ISSUE = "2" }
//! worktree = true
//! iterations = 3
//!
//! [budget]              # what all the runs may spend together
//! max_cost = 5.0
//! ```
//!
//! Every run is checked before any starts; one run failing never stops the
//! others; Ctrl-C cancels them all and still writes every report.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Deserializer, Unexpected, Visitor};
use warden_events::Agent;
use warden_run::batch::{Batch, entry_dir_name};
use warden_run::budget::{Budget, Usd};
use warden_run::executor::slurm::SlurmOptions;
use warden_run::{RunRequest, WorktreeRequest};

use crate::args::BatchArgs;
use crate::config_watch::{ConfigWatch, Role};
use crate::error::{CliError, Outcome, usage};
use crate::render::Reporter;
use crate::render::batch::{BatchView, print_table};
use crate::settings::{self, RawSettings, Resolved, SettingFlags};
use crate::signals::Signals;
use crate::wakeups::{Wake, Wakeups};

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
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RunKeys {
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
#[derive(Deserialize, Default)]
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
                    _ => write!(f, "a whole number of at least {MIN}, such as 20"),
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
        if message.starts_with("unknown field") {
            return Refused::UnknownKey(key);
        }
        // serde's "invalid type: X, expected Y" as "must be Y, not X".
        let says = match message
            .strip_prefix("invalid type: ")
            .or_else(|| message.strip_prefix("invalid value: "))
            .and_then(|m| m.split_once(", expected "))
        {
            Some((got, want)) => format!(" must be {want}, not {got}"),
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

/// A bad batch file, named.
fn err(file: &Path, msg: impl std::fmt::Display) -> CliError {
    usage(format_args!("{}: {msg}", file.display()))
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
                .map(|l| l.join(","))
        });
        match text {
            Some(text) => flags.set(setting, text),
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
    /// The run's agent, named in the run or in `[defaults]`.
    fn agent(&self) -> Result<Agent, String> {
        match &self.agent {
            Some(Text(a)) => a.parse().map_err(|e| format!("{e}")),
            None => Err("has no `agent` (set it in the run or in [defaults])".into()),
        }
    }

    fn prompt_file(&self) -> Option<&Path> {
        self.prompt_file.as_ref().map(|Text(f)| Path::new(f))
    }

    /// The request this run describes, with the settings `resolved`; not
    /// checked yet (the batch adds its budget first).
    fn request(
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
            request.prompt = Some(crate::request::prompt(text, templated, self.args.0));
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

/// How many runs at once when nothing says.
const DEFAULT_JOBS: usize = 4;

pub(crate) async fn batch(args: BatchArgs, signals: Signals) -> Outcome {
    crate::junit_file::check(args.junit.as_deref())?;
    if let Some(dir) = &args.resume {
        let dir = &absolute_dir(dir)?;
        let batch = Batch::resume(dir, args.jobs, args.rerun_failed)
            .await
            .map_err(CliError::from)?;
        for w in batch.warnings() {
            eprintln!("warden: warning: {w}");
        }
        let shown = batch
            .entries()
            .map(|(name, r)| (name.to_string(), r.agent, r.limits.armed_stall_timeout()))
            .collect();
        let note = format!(
            "resuming: {} of {} run(s) to run again",
            batch.to_run(),
            batch.len()
        );
        // The config files the runs' directories hold now: the runs to
        // come may write them.
        let (name, role) = match std::env::var_os("WARDEN_CONFIG") {
            Some(p) => (PathBuf::from(p), Role::Named),
            None => (PathBuf::from("warden.toml"), Role::Found),
        };
        let mut paths: Vec<PathBuf> = batch.entries().map(|(_, r)| r.cwd.join(&name)).collect();
        // Runs mostly share a directory: each file is read once.
        paths.sort();
        paths.dedup();
        let configs = paths.iter().map(|p| ConfigWatch::now(p, role)).collect();
        return drive(batch, shown, &args, signals, Some(note), dir, configs).await;
    }
    let Some(file) = args.file.clone() else {
        return Err(usage("give a batch file, or --resume DIR"));
    };
    from_file(&file, &args, signals).await
}

/// `dir` from the current directory when relative.
fn absolute_dir(dir: &Path) -> Result<PathBuf, CliError> {
    std::path::absolute(dir).map_err(|e| {
        usage(format_args!(
            "{}: cannot make it absolute: {e}",
            dir.display()
        ))
    })
}

/// A batch read from its file.
async fn from_file(file: &Path, args: &BatchArgs, mut signals: Signals) -> Outcome {
    let jobs = args.jobs.unwrap_or(DEFAULT_JOBS);
    let text_of_file = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => return Err(err(file, format!("could not read it: {e}"))),
    };
    // What the next batch of this file runs: the runs may write it.
    let mut configs = vec![ConfigWatch::now(file, Role::BatchFile)];
    let doc: toml::Table = match text_of_file.parse() {
        Ok(d) => d,
        Err(e) => return Err(err(file, e)),
    };
    let BatchFile {
        mut defaults,
        run: runs,
        budget,
        slurm,
    } = match read::<BatchFile>(doc) {
        Ok(f) => f,
        Err(Refused::UnknownKey(key)) => {
            return Err(err(
                file,
                format!(
                    "unknown table `{key}`: a batch file has [defaults], [[run]], [budget] and [slurm] tables"
                ),
            ));
        }
        Err(Refused::Bad { key, says }) => return Err(err(file, format!("`{key}`{says}"))),
    };
    let budget = match budget {
        Some(t) => batch_budget(t).map_err(|e| err(file, e))?,
        None => Budget::default(),
    };
    // Where the runs run is the batch's, not a run's; and a name is each
    // run's own.
    let executor_key = defaults.remove("executor");
    defaults.remove("name");
    if runs.is_empty() {
        return Err(err(file, "no [[run]] tables: add at least one"));
    }
    let cwd = match std::env::current_dir() {
        Ok(d) => d,
        Err(e) => return Err(err(file, format!("cannot read the current directory: {e}"))),
    };
    let executor = executor_of(args, executor_key.as_ref(), slurm).map_err(|e| err(file, e))?;
    // Absolute: a cluster's job starts elsewhere, and Slurm resolves its
    // paths inside the batch directory.
    let mut batch = match (&args.dir, &executor) {
        (Some(dir), _) => Batch::new(absolute_dir(dir)?, jobs),
        (
            None,
            Chosen::Slurm {
                shared_dir: Some(shared),
                ..
            },
        ) => Batch::under(&absolute_dir(shared)?, jobs),
        (None, _) => Batch::in_default_dir(&cwd, jobs),
    }
    .source(file)
    .budget(budget);
    // A cluster's shared directory holds other batches: hidden from every
    // sandboxed agent also when `--dir` puts this batch elsewhere.
    if let Chosen::Slurm {
        shared_dir: Some(shared),
        ..
    } = &executor
    {
        batch = batch.hide(shared.clone());
    }
    if let Chosen::Slurm { options, .. } = executor {
        batch = batch.executor(std::sync::Arc::new(
            warden_run::executor::slurm::Slurm::new(*options),
        ));
    }

    // Check every run before starting any.
    let mut shown: Vec<(String, Agent, Option<Duration>)> = Vec::new();
    for (i, table) in runs.into_iter().enumerate() {
        let mut merged = defaults.clone();
        merged.extend(table.clone());
        let (keys, flags) = split(merged, i).map_err(|e| err(file, e))?;
        let name = match &keys.name {
            Some(Text(n)) => n.clone(),
            None => format!("run-{}", i + 1),
        };
        if let Err(e) = entry_dir_name(&name) {
            return Err(err(file, format!("run {}: {e}", i + 1)));
        }
        let agent = match keys.agent() {
            Ok(a) => a,
            Err(e) if keys.agent.is_none() => return Err(err(file, format!("run {} {e}", i + 1))),
            Err(e) => return Err(err(file, format!("run `{name}`: {e}"))),
        };
        let run_cwd = match &keys.cwd {
            Some(Text(d)) => cwd.join(d),
            None => cwd.clone(),
        };
        // A bad value is named by its key in the file, not by the flag
        // it fills.
        let key_origin = |key: &str| {
            if table.contains_key(key) {
                format!("`{key}`")
            } else {
                format!("`{key}` in [defaults]")
            }
        };
        let resolved = match RawSettings::gather(&flags, &run_cwd).and_then(|r| {
            configs.extend(r.config_watch());
            r.name_flags_as(key_origin).resolve()
        }) {
            Ok(r) => r,
            Err(e) => return Err(err(file, format!("run `{name}`: {e}"))),
        };
        let prompt = keys.prompt.as_ref().map(|Text(p)| p.as_str());
        if let Some(why) =
            crate::prompt_input::prompt_source_is_stdin(prompt, keys.prompt_file(), agent)
        {
            let bound = resolved.limits.startup_timeout.or(resolved.limits.timeout);
            crate::prompt_input::read_stdin_prompt(why, &mut signals, bound).await?;
        }
        let mut request = keys
            .request(agent, &run_cwd, &resolved)
            .map_err(|e| e.context(format_args!("in run `{name}` of {}", file.display())))?;
        if !budget.is_empty() {
            // The batch's budget must be one this run's agent can show
            // being spent.
            request.batch_budget = Some(warden_run::budget::SharedBudget::new(
                warden_run::budget::BudgetScope::Batch,
                budget,
                warden_run::budget::Spent::default(),
            ));
        }
        // Checked once, with the batch's budget counted.
        let warnings = request.check().map_err(|e| {
            CliError::from(e).context(format_args!("in run `{name}` of {}", file.display()))
        })?;
        // `build` says none (a batch's runs are quiet: the batch has its
        // own view): said here, with the batch's budget counted (Claude
        // Code's cost only in its last line, for a `max_cost`, say).
        if !args.quiet {
            for w in warnings {
                eprintln!("warden: warning: run `{name}`: {w}");
            }
        }
        // Every run of a batch is a session, in its own directory.
        shown.push((name.clone(), agent, request.limits.armed_stall_timeout()));
        if let Err(e) = batch.add(name, request) {
            return Err(err(file, e));
        }
    }
    drive(batch, shown, args, signals, None, file, configs).await
}

/// The settings of the batch's process rather than of its runs, from the
/// environment (`WARDEN_*`, `OTEL_*`) or warden.toml: the view's
/// `heartbeat` and OpenTelemetry export (a batch file's runs cannot set
/// them: there is one view and one exporter), and the config file they
/// came from.
fn process_settings() -> Result<(crate::settings::Resolved, Option<ConfigWatch>), CliError> {
    let cwd = std::env::current_dir()
        .map_err(|e| usage(format_args!("cannot read the current directory: {e}")))?;
    let raw = RawSettings::gather(&SettingFlags::default(), &cwd).map_err(usage)?;
    let config = raw.config_watch();
    Ok((raw.resolve().map_err(usage)?, config))
}

/// Runs the batch to its end: one loop over its updates, the view's
/// tick and the signals; then the table, `batch.json`, the exit code.
async fn drive(
    batch: Batch,
    shown: Vec<(String, Agent, Option<Duration>)>,
    args: &BatchArgs,
    signals: Signals,
    note: Option<String>,
    about: &Path,
    mut configs: Vec<ConfigWatch>,
) -> Outcome {
    // The runs are the cluster's: the view follows them by their files.
    let remote = batch.executor_name() != "local";
    let (batch_id, batch_dir, entries, jobs) = (
        batch.id().to_string(),
        batch.dir().to_path_buf(),
        batch.len(),
        batch.jobs(),
    );
    let (process, config) = process_settings()?;
    configs.extend(config);
    let agents: Vec<Agent> = shown.iter().map(|(_, a, _)| *a).collect();
    // Bound first: a port in use stops the batch before anything starts.
    let listener = args
        .metrics_addr
        .map(crate::metrics_endpoint::bind)
        .transpose()?;
    let telemetry = crate::runner::start_telemetry(&process, &agents, listener.is_some())?;
    let endpoint = match (listener, &telemetry) {
        (Some(l), Some(t)) => Some(crate::metrics_endpoint::MetricsEndpoint::start(
            l,
            t.clone(),
        )?),
        _ => None,
    };
    if let Some(e) = &endpoint {
        // Always said, --quiet or not: with port 0 it is the only way to
        // know the port.
        eprintln!("warden: metrics: http://{}/metrics", e.addr());
    }
    let batch = match &telemetry {
        Some(t) => batch.telemetry(t.clone()),
        None => batch,
    };
    let mut running = batch
        .start()
        .await
        .map_err(|e| CliError::from(e).about(about.display()))?;

    let mut view = BatchView::new(args.quiet, shown, remote, process.heartbeat);
    view.line(&format!(
        "batch {batch_id}: {entries} run(s), {jobs} at a time; reports in {}",
        batch_dir.display()
    ));
    if let Some(note) = note {
        view.line(&note);
    }
    // SIGINT, SIGTERM and SIGHUP (the terminal closed) cancel every run;
    // one that came while the runs were being checked does too.
    let canceller = running.canceller();
    let mut wake = Wakeups::new(signals);
    let on_wake = |view: &mut BatchView, w: Wake| match w {
        Wake::Tick => view.tick(),
        Wake::Signal { nth, name } => {
            view.notice(&if nth > 1 {
                format!("{name} again: killing every run now")
            } else {
                format!("{name}: cancelling every run (send it again to kill at once)")
            });
            canceller.cancel();
        }
    };
    loop {
        tokio::select! {
            update = running.next_update() => match update {
                Some(u) => view.update(&u),
                None => break,
            },
            w = wake.next() => on_wake(&mut view, w),
        }
    }
    let outcome = wake
        .while_waiting(running.wait(), |w| on_wake(&mut view, w))
        .await;
    view.clear();
    let report = &outcome.report;
    print_table(report);
    view.done(report, &batch_dir);
    if args.json {
        // One line, made safe for a CI log as every `--json` line is; the
        // reserve of the queue, so a slow reader still gets it whole.
        match serde_json::to_vec(report) {
            Ok(mut line) => {
                line.push(b'\n');
                crate::render::console::raw(
                    crate::render::console::Stream::Stdout,
                    crate::render::console::Priority::Important,
                    crate::render::github::json_line(line),
                );
            }
            Err(e) => eprintln!("warden: error: could not print the batch report as JSON: {e}"),
        }
    }
    match &outcome.written {
        Ok(path) => eprintln!("warden: batch report: {}", path.display()),
        Err(e) => eprintln!(
            "warden: error: could not write {}: {e}",
            batch_dir.join("batch.json").display()
        ),
    }
    let code = match &args.junit {
        Some(path) => crate::junit_file::write(
            path,
            &warden_run::junit::batch(report, &warden_run::junit::stderr_tail),
            outcome.exit_code(),
        ),
        None => outcome.exit_code(),
    };
    // With the exit code as it ends (a JUnit file that could not be
    // written makes it 74).
    if let Some(out) = crate::render::github::output_file() {
        crate::render::github::write_outputs(
            &out,
            &warden_run::outputs::Outputs::for_batch(
                report,
                &batch_dir,
                outcome.written.as_deref().ok(),
                code,
            ),
        );
    }
    // Served to the last: a scrape now sees every run counted.
    if let Some(e) = endpoint {
        e.stop();
    }
    crate::runner::end_telemetry(telemetry);
    crate::config_watch::warn_changed(&configs);
    Ok(code)
}

/// The executor a batch asked for.
enum Chosen {
    Local,
    Slurm {
        options: Box<SlurmOptions>,
        /// `[slurm] shared_dir`: where the batch directory goes, on
        /// storage the nodes share.
        shared_dir: Option<std::path::PathBuf>,
    },
}

/// `--executor`, else `executor` in `[defaults]`, else local; with
/// `[slurm]`'s options read (and refused by name when unknown).
fn executor_of(
    args: &BatchArgs,
    in_file: Option<&toml::Value>,
    slurm: Option<toml::Table>,
) -> Result<Chosen, String> {
    let name = match (&args.executor, in_file) {
        (Some(n), _) => n.clone(),
        (None, Some(v)) => v
            .as_str()
            .ok_or("`executor` in [defaults] must be a string: local or slurm")?
            .to_string(),
        (None, None) => "local".into(),
    };
    match name.as_str() {
        "local" => Ok(Chosen::Local),
        "slurm" => {
            let mut table = slurm.unwrap_or_default();
            let shared_dir = match table.remove("shared_dir") {
                Some(toml::Value::String(d)) => Some(std::path::PathBuf::from(d)),
                Some(_) => return Err("`shared_dir` in [slurm] must be a path".into()),
                None => None,
            };
            let options: SlurmOptions = toml::Value::Table(table)
                .try_into()
                .map_err(|e| format!("[slurm]: {e}"))?;
            options.check().map_err(|e| format!("[slurm]: {e}"))?;
            Ok(Chosen::Slurm {
                options: Box::new(options),
                shared_dir,
            })
        }
        other => Err(format!("unknown executor `{other}`; known: local, slurm")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> toml::Table {
        text.parse().expect("TOML")
    }

    fn run(text: &str) -> Result<(RunKeys, SettingFlags), String> {
        split(table(text), 1)
    }

    #[test]
    fn an_unknown_key_is_refused_by_name_with_every_key_a_run_may_have() {
        let Err(e) = run("agent = \"exec\"\nstal_timeout = \"1m\"") else {
            panic!("a typo accepted");
        };
        assert!(
            e.starts_with("run 2: unknown key `stal_timeout`; known keys: name, agent, prompt,"),
            "{e}"
        );
        assert!(e.contains("preamble, timeout, stall_timeout"), "{e}");
        // Settings a batch decides for itself are no run's keys.
        assert!(!e.contains("heartbeat") && !e.contains("run_dir"), "{e}");
        let Err(e) = run("heartbeat = \"1s\"") else {
            panic!("a batch's own setting taken from a run");
        };
        assert!(e.contains("unknown key `heartbeat`"), "{e}");
    }

    #[test]
    fn a_bad_value_names_its_key_what_it_must_be_and_what_it_was() {
        for (text, says) in [
            (
                "iterations = 0",
                "run 2: `iterations` must be a whole number of at least 1, such as 20, not integer `0`",
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
        ] {
            match run(text) {
                Ok(_) => panic!("{text} accepted"),
                Err(e) => assert!(e.starts_with(says) || e.contains(says), "{text}: {e}"),
            }
        }
    }

    #[test]
    fn run_keys_and_settings_are_read_as_the_command_line_has_them() {
        let (keys, flags) = run(
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
        let (keys, _) = run("worktree = true").unwrap();
        assert_eq!(keys.worktree, Some(Worktree::Branch(None)));
        let (keys, _) = run("worktree = false").unwrap();
        assert_eq!(keys.worktree, Some(Worktree::Off));
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
    fn the_readme_lists_the_keys_of_a_run_as_the_batch_file_reads_them() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
        let readme = std::fs::read_to_string(path).expect("the README");
        let listed: Vec<&str> = readme
            .split("\nRun keys: ")
            .nth(1)
            .and_then(|s| s.split(", and the\nsettings").next())
            .expect("the README's list of run keys")
            .split(',')
            .map(|k| k.split('`').nth(1).expect("a key in backquotes"))
            .collect();
        assert_eq!(listed, fields_of::<RunKeys>());
    }
}
