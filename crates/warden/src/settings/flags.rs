//! The settings as flags of `warden run`: one clap argument per row of
//! the table, built with clap's builder and read back by name, so that no
//! setting is spelled again as a field.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::{Arg, ArgAction, ArgMatches};

use super::{Kind, SETTINGS, Setting};

/// The id of the `--config` argument (not a setting: where settings come from).
const CONFIG: &str = "config";

/// The settings given as flags, as text (a switch given is `true`); they
/// are validated with every other source in [`super::RawSettings`], so a
/// bad value gets the same message wherever it came from.
#[derive(Debug, Default, Clone)]
pub(crate) struct SettingFlags {
    values: BTreeMap<&'static str, String>,
    /// Read settings from this file instead of the nearest `warden.toml`.
    pub config: Option<PathBuf>,
}

impl SettingFlags {
    /// Sets one setting, as if its flag had been given (a batch file fills
    /// its settings this way).
    pub(crate) fn set(&mut self, setting: &'static Setting, value: impl Into<String>) {
        self.values.insert(setting.name, value.into());
    }

    /// Every setting given, with its text.
    pub(crate) fn given(&self) -> impl Iterator<Item = (&'static str, &str)> + '_ {
        self.values.iter().map(|(name, v)| (*name, v.as_str()))
    }

    /// Flags from `(name, value)` pairs; a name not in the table is a bug
    /// of the caller.
    #[cfg(test)]
    pub(crate) fn of(pairs: &[(&str, &str)]) -> Self {
        let mut flags = SettingFlags::default();
        for (name, value) in pairs {
            let setting = super::find(name).unwrap_or_else(|| panic!("no setting `{name}`"));
            flags.set(setting, *value);
        }
        flags
    }
}

fn arg(setting: &Setting) -> Arg {
    let arg = Arg::new(setting.name)
        .long(setting.flag())
        .help(setting.help())
        .help_heading(setting.group.heading())
        .required(false);
    let arg = match setting.short {
        Some(c) => arg.short(c),
        None => arg,
    };
    let arg = match setting.alias {
        Some(a) => arg.visible_alias(a),
        None => arg,
    };
    if setting.kind.is_switch() {
        arg.action(ArgAction::SetTrue)
    } else if setting.kind.is_list() {
        arg.action(ArgAction::Append)
            .value_name(setting.value_name)
            .value_parser(clap::value_parser!(String))
            // `--engine-arg --shm-size=1g`: the value is itself a flag.
            .allow_hyphen_values(matches!(setting.kind, Kind::Args(_)))
    } else {
        arg.action(ArgAction::Set)
            .value_name(setting.value_name)
            .value_parser(clap::value_parser!(String))
    }
}

impl clap::Args for SettingFlags {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        SETTINGS.iter().fold(cmd, |cmd, s| cmd.arg(arg(s))).arg(
            Arg::new(CONFIG)
                .long("config")
                .value_name("FILE")
                .value_parser(clap::value_parser!(PathBuf))
                .action(ArgAction::Set)
                .help_heading(super::table::Group::Records.heading())
                .help("Read settings from this file instead of the nearest warden.toml (here, up to the git work tree's top)"),
        )
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl clap::FromArgMatches for SettingFlags {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut flags = SettingFlags {
            values: BTreeMap::new(),
            config: m.get_one::<PathBuf>(CONFIG).cloned(),
        };
        for s in SETTINGS {
            if s.kind.is_switch() {
                if m.get_flag(s.name) {
                    flags.set(s, "true");
                }
            } else if s.kind.is_list() {
                if let Some(vs) = m.get_many::<String>(s.name) {
                    let items: Vec<&str> = vs.map(String::as_str).collect();
                    flags.set(s, items.join(s.kind.list_separator()));
                }
            } else if let Some(v) = m.get_one::<String>(s.name) {
                flags.set(s, v.clone());
            }
        }
        Ok(flags)
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}
