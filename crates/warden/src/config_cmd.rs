//! `warden config`: each setting in effect in a directory and where it
//! came from, read as `warden run` reads them there (the same discovery,
//! the same checks: a bad value or an unknown key is the same error).
//! There are no setting flags here, so a value comes from a `WARDEN_*`
//! variable, a config file (the project's, one named, or the user's), or
//! the default.

use serde_json::{Value, json};

use crate::args::ConfigArgs;
use crate::error::{CliError, Kind, Outcome, usage};
use crate::settings::table::Shown;
use crate::settings::{FileScope, RawSettings, SettingFlags, Source};

/// What `--json` prints is described by `schemas/config.schema.json`.
const SCHEMA_VERSION: u32 = 1;

pub(crate) fn config(args: &ConfigArgs) -> Outcome {
    let cwd = crate::request::working_dir(args.cwd.as_deref())?;
    let mut flags = SettingFlags::default();
    flags.config = args.config.clone();
    let raw = RawSettings::gather(&flags, &cwd).map_err(usage)?;
    let project = raw.project_root(&cwd);
    let files = raw.files().to_vec();
    let in_effect = raw.in_effect();
    let images = raw.agent_images_in_effect();
    // Every value checked, as a run would: a bad one is an error naming
    // its source, never shown as if it were in effect.
    raw.resolve().map_err(usage)?;

    let settings: Vec<Value> = in_effect
        .iter()
        .map(|(setting, winner)| {
            let (value, source, from) = match winner {
                Some((value, Source::Env(var))) => {
                    (Some(value.clone()), "environment", Some(var.clone()))
                }
                Some((value, Source::File(path, scope))) => (
                    Some(value.clone()),
                    file_source(*scope),
                    Some(path.display().to_string()),
                ),
                // No flag reaches `warden config`; a batch file's keys
                // neither.
                Some((value, Source::Flag(flag))) => {
                    (Some(value.clone()), "flag", Some(flag.clone()))
                }
                None => (default_text(setting.default), "default", None),
            };
            json!({
                "name": setting.name,
                "value": value,
                "source": source,
                "from": from,
                "variable": setting.env(),
            })
        })
        .collect();
    let doc = json!({
        "schema_version": SCHEMA_VERSION,
        "cwd": cwd,
        "project_root": project,
        "runs_dir": project.join(warden_run::defaults::RUNS_DIR),
        "files": files
            .iter()
            .map(|(path, scope)| json!({ "path": path, "scope": scope.as_str() }))
            .collect::<Vec<_>>(),
        "user_file": crate::settings::discover::user_file(),
        "settings": settings,
        "agent_images": images
            .iter()
            .map(|(agent, image, path)| json!({
                "agent": agent.name(),
                "image": image,
                "from": path.display().to_string(),
            }))
            .collect::<Vec<_>>(),
    });
    if args.json {
        let mut line = serde_json::to_vec(&doc).map_err(|e| {
            CliError::new(
                Kind::Internal,
                format_args!("could not write the settings as JSON: {e}"),
            )
        })?;
        line.push(b'\n');
        crate::render::console::raw(
            crate::render::console::Stream::Stdout,
            crate::render::console::Priority::Important,
            crate::render::github::json_line(line),
        );
        return Ok(0);
    }
    print_text(&doc);
    Ok(0)
}

fn file_source(scope: FileScope) -> &'static str {
    match scope {
        FileScope::Project => "project_file",
        FileScope::Named => "config_file",
        FileScope::User => "user_file",
    }
}

/// A default as the text a setting takes; `None` when it is not set.
fn default_text(shown: Shown) -> Option<String> {
    match shown {
        Shown::Value(v) | Shown::Described(v) => Some(v.to_string()),
        Shown::Off => Some("false".into()),
        Shown::Unset => None,
    }
}

/// The settings as TOML a `warden.toml` could hold, each with where it
/// came from; the files read first.
fn print_text(doc: &Value) {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let files = doc["files"].as_array().cloned().unwrap_or_default();
    if files.is_empty() {
        println!("# no warden.toml read");
    }
    for f in &files {
        let scope = match f["scope"].as_str() {
            Some("project") => "project file",
            Some("named") => "named file (--config, WARDEN_CONFIG)",
            _ => "user file",
        };
        println!("# {scope}: {}", text(&f["path"]));
    }
    println!("# run directories go in {}", text(&doc["runs_dir"]));
    for s in doc["settings"].as_array().into_iter().flatten() {
        let name = text(&s["name"]);
        let from = match (s["source"].as_str(), s["from"].as_str()) {
            (Some("environment"), Some(var)) => format!("environment variable {var}"),
            (Some("project_file"), Some(p)) => format!("project file {p}"),
            (Some("config_file"), Some(p)) => format!("named file {p}"),
            (Some("user_file"), Some(p)) => format!("user file {p}"),
            (Some("flag"), Some(f)) => format!("flag {f}"),
            _ => "default".into(),
        };
        match s["value"].as_str() {
            Some(v) => println!("{name} = {}  # {from}", toml::Value::String(v.to_string())),
            None => println!("# {name}: not set  # {from}"),
        }
    }
    for i in doc["agent_images"].as_array().into_iter().flatten() {
        println!(
            "agent.{}.image = {}  # {}",
            text(&i["agent"]),
            toml::Value::String(text(&i["image"])),
            text(&i["from"])
        );
    }
}
