//! The report formats as a contract: the JSON Schemas in `schemas/` are
//! what the types generate, and the real files of a run, a session and a
//! batch (every `events.jsonl` line too) validate against them, as does
//! the real output of every `--json`: `run`, `replay` (event lines),
//! `report`, `doctor`, `gc`, `batch` and `config`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use warden_events::event::FeedLine;
use warden_run::BatchReport;
use warden_run::Report;
use warden_run::SessionReport;
use warden_run::Stamped;

use crate::support::{Case, repo, two_committing_iterations};

/// Set to write the schemas instead of checking them.
const UPDATE: &str = "WARDEN_UPDATE_SCHEMAS";

fn schema_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schemas")
}

/// Where the schemas say they are: versioned with `schema_version`.
const ID_BASE: &str = "https://warden.dev/schemas/v1/";

/// The schema of what warden writes (the serialize contract: a field
/// that is always written is required, `null` or not), with its `$id`.
fn schema_of<T: schemars::JsonSchema>(name: &str) -> String {
    let schema = schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<T>();
    let text = serde_json::to_string_pretty(&schema).expect("a schema is JSON");
    // `$id` on the line after `$schema` (the generator's order kept).
    let schema_line = text
        .lines()
        .position(|l| l.trim_start().starts_with("\"$schema\""))
        .expect("a root schema names its draft");
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines.insert(schema_line + 1, format!("  \"$id\": \"{ID_BASE}{name}\","));
    let mut t = lines.join("\n");
    t.push('\n');
    t
}

/// Each committed schema file and what the types generate for it.
fn generated() -> Vec<(&'static str, String)> {
    vec![
        ("run.schema.json", schema_of::<Report>("run.schema.json")),
        // An events.jsonl line, a `--json` line with its `run_id`, a
        // `replay --json` line.
        (
            "event.schema.json",
            schema_of::<FeedLine<'static>>("event.schema.json"),
        ),
        (
            "session.schema.json",
            schema_of::<SessionReport>("session.schema.json"),
        ),
        // batch.json, and `warden batch --json`.
        (
            "batch.schema.json",
            schema_of::<BatchReport>("batch.schema.json"),
        ),
        (
            "gc.schema.json",
            schema_of::<warden_run::gc::GcReport>("gc.schema.json"),
        ),
        (
            "report.schema.json",
            schema_of::<json_docs::ReportJson>("report.schema.json"),
        ),
        (
            "doctor.schema.json",
            schema_of::<json_docs::DoctorJson>("doctor.schema.json"),
        ),
        (
            "config.schema.json",
            schema_of::<json_docs::ConfigJson>("config.schema.json"),
        ),
        // The summary `replay --json` ends with, on stderr; its stdout
        // lines are events (`event.schema.json`).
        (
            "replay.schema.json",
            schema_of::<json_docs::ReplaySummary>("replay.schema.json"),
        ),
    ]
}

/// The documents the CLI builds itself (`report --json`, `doctor
/// --json`, `config --json`), as types: the binary's own code is out of
/// a test's reach, so their shape is written here, generates their
/// schemas, and the real output of each command is checked against it
/// (and read back into it: no field unknown here is accepted).
mod json_docs {
    use super::BTreeMap;
    use std::path::PathBuf;
    use warden_events::SchemaVersion;
    use warden_run::{Report, SessionReport};

    /// `warden report --json` (`schemas/report.schema.json`): the reports
    /// of a run, a session or a batch read back, and whether each run's
    /// logs are still what warden wrote.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(untagged)]
    pub enum ReportJson {
        Runs(Box<ReportOfRuns>),
        Batch(Box<ReportOfBatch>),
    }

    /// A run's or a session's directory.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct ReportOfRuns {
        pub schema_version: SchemaVersion,
        /// `session.json`, for a session directory; `null` for a run's.
        pub session: Option<SessionReport>,
        /// Each run read: its directory, its `run.json`, its logs' check.
        pub runs: Vec<ReportRun>,
        /// The runs `session.json` lists that are not there to be read
        /// (empty for a run directory): never read from where they were
        /// recorded.
        pub missing_runs: Vec<MissingRun>,
    }

    /// A batch's directory.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct ReportOfBatch {
        pub schema_version: SchemaVersion,
        /// `batch.json` (`schemas/batch.schema.json`).
        pub batch: warden_run::BatchReport,
        /// Each entry of the batch, by name, with its runs.
        pub entries: Vec<BatchEntry>,
    }

    /// One entry of a batch's `report --json`.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct BatchEntry {
        pub name: String,
        /// Why the entry's directory is not there (moved, deleted, never
        /// copied); `null` when it is, or the entry never ran.
        pub missing: Option<String>,
        /// Each run read, found under the batch directory.
        pub runs: Vec<ReportRun>,
        /// The runs its session lists that are not there to be read.
        pub missing_runs: Vec<MissingRun>,
    }

    /// A run a session lists that is not there: its directory is looked
    /// for under the directory given to `report`, by the last component
    /// of the one recorded, and never elsewhere.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct MissingRun {
        /// Its place (from 0) in its session's `runs`.
        pub index: usize,
        /// The directory `session.json` recorded, where it was then.
        pub recorded_run_dir: PathBuf,
        /// Where it was looked for; `null` when the recorded directory
        /// does not end in a plain name (`..`, `/`), which is refused.
        pub run_dir: Option<PathBuf>,
        /// Why it is missing, as a sentence.
        pub why: String,
    }

    /// One run of `warden report --json`.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct ReportRun {
        pub run_dir: PathBuf,
        /// Its `run.json` (`schemas/run.schema.json`).
        pub report: Report,
        pub logs: Logs,
    }

    /// Whether the run's logs are what `run.json` recorded.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Logs {
        /// Every log was checked and matches.
        #[serde(rename = "match")]
        pub matches: bool,
        /// Logs changed after the run: one sentence each.
        pub changed: Vec<String>,
        /// Why the logs could not be checked at all, if so.
        pub unchecked: Option<String>,
    }

    /// `warden doctor --json` (`schemas/doctor.schema.json`): what this
    /// machine can do.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct DoctorJson {
        pub schema_version: SchemaVersion,
        /// warden's version.
        pub version: String,
        /// By agent name: its CLI's path and version, or how to install it.
        pub agents: BTreeMap<String, Check>,
        pub containment: Containment,
        pub sandboxes: Sandboxes,
        /// What `--containment auto` and `--sandbox auto` pick here.
        pub auto: Auto,
        /// Whether one supervised `true` succeeded, through the shim.
        pub supervised_run_works: bool,
        /// By controller (`memory`, `pids`, `cpu`): where `--memory`,
        /// `--pids` and `--cpus` would be enforced, or why they cannot.
        pub limits: BTreeMap<String, Check>,
        pub sandbox_hides: SandboxHides,
    }

    /// One thing looked at: whether it works, and what was found.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Check {
        pub ok: bool,
        pub detail: String,
    }

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Containment {
        pub subreaper: bool,
        pub cgroup_v2: Check,
        pub user_namespaces: Check,
    }

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Sandboxes {
        pub host: Check,
        pub bwrap: Check,
        pub docker: Check,
        pub podman: Check,
    }

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Auto {
        pub containment: String,
        pub sandbox: String,
    }

    /// What a sandbox hides of the host's daemons.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct SandboxHides {
        /// The directories it empties.
        pub daemon_dirs: Vec<PathBuf>,
        /// Every other unix socket bound on this host, which it covers.
        pub sockets: Vec<PathBuf>,
    }

    /// `warden config --json` (`schemas/config.schema.json`): each setting
    /// in effect and where it came from.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct ConfigJson {
        pub schema_version: SchemaVersion,
        /// The directory the settings were looked for from.
        pub cwd: PathBuf,
        /// The project's root, whose `.warden/` holds the run, session and
        /// batch directories: the `warden.toml` found's directory, else
        /// the git work tree's top, else `cwd`.
        pub project_root: PathBuf,
        /// Where a run's directory goes unless `run_dir` says otherwise.
        pub runs_dir: PathBuf,
        /// The config files read, nearest first.
        pub files: Vec<ConfigFile>,
        /// Where the user's own file is looked for (read if it is there).
        pub user_file: Option<PathBuf>,
        /// Every setting, in the order of the settings table.
        pub settings: Vec<SettingLine>,
        /// `[agent.NAME] image` in effect.
        pub agent_images: Vec<AgentImage>,
    }

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct ConfigFile {
        pub path: PathBuf,
        pub scope: FileScope,
    }

    /// Which config file: the project's (found), one named (`--config`,
    /// `WARDEN_CONFIG`), or the user's own.
    #[derive(serde::Deserialize, schemars::JsonSchema, PartialEq, Debug)]
    #[serde(rename_all = "snake_case")]
    pub enum FileScope {
        Project,
        Named,
        User,
    }

    /// One setting in effect.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct SettingLine {
        /// Its `warden.toml` key.
        pub name: String,
        /// Its value as text; `null` when it is not set.
        pub value: Option<String>,
        pub source: SettingSource,
        /// The variable's name or the file's path; `null` for a default.
        pub from: Option<String>,
        /// Its `WARDEN_*` variable.
        pub variable: String,
    }

    /// Where a value came from.
    #[derive(serde::Deserialize, schemars::JsonSchema, PartialEq, Debug)]
    #[serde(rename_all = "snake_case")]
    pub enum SettingSource {
        Environment,
        ProjectFile,
        ConfigFile,
        UserFile,
        Flag,
        Default,
    }

    /// The summary of `warden replay --json` (`schemas/replay.schema.json`),
    /// one JSON object on stderr after the event lines on stdout: what the
    /// stream says of the run.
    #[derive(serde::Serialize, schemars::JsonSchema)]
    pub struct ReplaySummary {
        pub schema_version: SchemaVersion,
        /// The agent whose output was decoded.
        pub agent: String,
        /// Lines read (a last line without its newline too).
        pub lines: u64,
        pub malformed_lines: u64,
        pub oversized_lines: u64,
        /// What the verdict would be from the stream alone (the exit
        /// status is not in a recording): `succeeded`, `agent_failed` or
        /// `no_terminal_event`. An `exec` stream has no terminal event: its
        /// outcome is the verdict in the `run.json` beside the file, else
        /// `unknown`.
        pub outcome: String,
        /// The last terminal event's word, if one came: `true` for success.
        pub terminal: Option<bool>,
        /// What the agent reported, as `run.json` carries it.
        #[serde(flatten)]
        pub reported: warden_events::summary::AgentReport,
    }

    /// An agent's own container image, and the file that gave it.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct AgentImage {
        pub agent: String,
        pub image: String,
        pub from: String,
    }
}

#[test]
fn committed_schemas_are_what_the_types_generate() {
    let dir = schema_dir();
    if std::env::var_os(UPDATE).is_some() {
        std::fs::create_dir_all(&dir).expect("create schemas/");
        for (name, text) in generated() {
            std::fs::write(dir.join(name), text).expect("write a schema");
        }
        return;
    }
    let stale: Vec<String> = generated()
        .into_iter()
        .filter(|(name, text)| std::fs::read_to_string(dir.join(name)).ok().as_ref() != Some(text))
        .map(|(name, _)| format!("schemas/{name}"))
        .collect();
    assert!(
        stale.is_empty(),
        "{} differ from what the report types generate: if the change is \
         meant, regenerate them with `{UPDATE}=1 cargo test -p agent-warden --test run schemas` \
         (and bump SCHEMA_VERSION if a field was removed or changed in meaning)",
        stale.join(", ")
    );
}

pub(crate) fn validator(name: &str) -> jsonschema::Validator {
    let path = schema_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let schema: Value = serde_json::from_str(&text).expect("a schema is JSON");
    jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{name} is no schema: {e}"))
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub(crate) fn assert_valid(v: &jsonschema::Validator, doc: &Value, what: &str) {
    let errors: Vec<String> = v.iter_errors(doc).map(|e| e.to_string()).collect();
    assert!(
        errors.is_empty(),
        "{what} breaks its schema: {errors:?}\n{doc}"
    );
}

/// A run's `run.json` and every `events.jsonl` line against their
/// schemas, and read back into their types.
fn check_run_dir(dir: &Path) -> Vec<Value> {
    let report = read_json(&dir.join("run.json"));
    assert_valid(&validator("run.schema.json"), &report, "run.json");
    assert_eq!(report["schema_version"], 1);
    serde_json::from_value::<Report>(report).expect("run.json reads back as a Report");
    let events = validator("event.schema.json");
    let text = std::fs::read_to_string(dir.join("events.jsonl")).expect("events.jsonl");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("each event line is JSON"))
        .collect();
    for line in &lines {
        assert_valid(&events, line, "an events.jsonl line");
        assert_eq!(line["schema_version"], 1, "{line}");
        serde_json::from_value::<Stamped>(line.clone())
            .unwrap_or_else(|e| panic!("{line} does not read back as an event: {e}"));
    }
    lines
}

#[test]
fn a_real_run_matches_its_schemas() {
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--",
        "sh",
        "-c",
        "echo one; echo two; echo oops >&2; exit 3",
    ]);
    assert_eq!(done.verdict(), "agent_failed", "{}", done.stderr);
    let lines = check_run_dir(&done.run_dir);
    for kind in ["spawned", "lines", "exited", "finished"] {
        assert!(
            lines.iter().any(|l| l["kind"] == kind),
            "the run wrote a `{kind}` event to check: {lines:?}"
        );
    }
}

#[test]
fn a_real_session_matches_its_schema() {
    let case = Case::new();
    repo(&case);
    let done = two_committing_iterations(&case);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let session = read_json(&case.run_dir().join("session.json"));
    assert_valid(&validator("session.schema.json"), &session, "session.json");
    assert_eq!(session["schema_version"], 1);
    let runs = session["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2, "{session}");
    for r in runs {
        check_run_dir(Path::new(r["run_dir"].as_str().expect("run_dir")));
    }
    serde_json::from_value::<SessionReport>(session)
        .expect("session.json reads back as a SessionReport");
    // `warden report --json` of the session: the session and its runs.
    let out = case
        .command(&["report", case.run_dir().to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json_doc(&out, "report --json of a session");
    assert_valid(&validator("report.schema.json"), &doc, "report --json");
    assert!(doc["session"].is_object(), "{doc}");
    assert_eq!(doc["runs"].as_array().map(Vec::len), Some(2), "{doc}");
}

#[test]
fn a_real_batch_matches_its_schema() {
    let case = Case::new();
    let file = case.path().join("runs.toml");
    std::fs::write(
        &file,
        "[defaults]\nagent = \"exec\"\n\n\
         [[run]]\nname = \"good\"\ncommand = [\"sh\", \"-c\", \"echo fine\"]\n\n\
         [[run]]\nname = \"bad\"\ncommand = [\"sh\", \"-c\", \"exit 7\"]\n",
    )
    .unwrap();
    let dir = case.path().join("batch");
    let done = case.run(&[
        "batch",
        file.to_str().unwrap(),
        "--dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(done.code, 1, "one run failed: {}", done.stderr);
    let batch = read_json(&dir.join("batch.json"));
    assert_valid(&validator("batch.schema.json"), &batch, "batch.json");
    assert_eq!(batch["schema_version"], 1);
    assert_eq!(batch["runs"].as_array().map(Vec::len), Some(2), "{batch}");
    serde_json::from_value::<BatchReport>(batch).expect("batch.json reads back as a BatchReport");
}

/// The schemas are strict enough to fail the tests above.
#[test]
fn the_schemas_reject_broken_documents() {
    let case = Case::new();
    let done = case.run(&["run", "exec", "--", "sh", "-c", "echo hi"]);
    let report = done.report();
    let run = validator("run.schema.json");
    assert_valid(&run, &report, "run.json");
    let broken = |key: &str, value: Value| {
        let mut doc = report.clone();
        doc[key] = value;
        doc
    };
    for (key, value) in [
        ("verdict", Value::from(5)),
        ("verdict", Value::from("fine")),
        ("schema_version", Value::from(2)),
        ("duration_ms", Value::from(-1)),
    ] {
        assert!(
            !run.is_valid(&broken(key, value.clone())),
            "a run.json with {key}: {value} passed"
        );
    }
    let mut missing = report.clone();
    missing.as_object_mut().unwrap().remove("verdict");
    assert!(
        !run.is_valid(&missing),
        "a run.json without a verdict passed"
    );

    let events = validator("event.schema.json");
    let line = done.raw_events().remove(0);
    assert_valid(&events, &line, "an events.jsonl line");
    let mut unknown = line.clone();
    unknown["kind"] = Value::from("no_such_event");
    assert!(!events.is_valid(&unknown), "an unknown event kind passed");
    let mut no_version = line;
    no_version.as_object_mut().unwrap().remove("schema_version");
    assert!(
        !events.is_valid(&no_version),
        "an event without schema_version passed"
    );
}

/// `--json` prints the same events, so the same schema holds for it.
#[test]
fn the_json_feed_matches_the_event_schema() {
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--json",
        "--",
        "sh",
        "-c",
        "echo one; echo two >&2",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let events = validator("event.schema.json");
    let lines: Vec<Value> = done
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("each --json line is JSON"))
        .collect();
    assert!(
        lines.iter().any(|l| l["kind"] == "text") && lines.iter().any(|l| l["kind"] == "stderr"),
        "the feed has the line events: {lines:?}"
    );
    for line in &lines {
        assert_valid(&events, line, "a --json line");
    }
}

/// `warden gc --json` against its schema, with an item in it.
#[test]
fn gc_json_matches_its_schema() {
    let case = Case::new();
    // Into .warden/runs, where gc looks.
    let mut run = case.command(&["run", "exec", "-q", "--", "true"]);
    run.env_remove("WARDEN_RUN_DIR");
    assert!(run.status().unwrap().success());
    let mut cmd = case.command(&["gc", "--keep-runs", "0", "--dry-run", "--json"]);
    cmd.env_remove("WARDEN_RUN_DIR");
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("gc --json is one JSON document");
    assert_valid(&validator("gc.schema.json"), &doc, "gc --json");
    assert_eq!(doc["schema_version"], 1);
    assert!(
        doc["items"].as_array().is_some_and(|i| !i.is_empty()),
        "the run would go: {doc}"
    );
}

/// A command's stdout as one JSON document.
fn json_doc(out: &std::process::Output, what: &str) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{what} is not one JSON document: {e}\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// `warden report --json` of a run, against its schema.
#[test]
fn report_json_matches_its_schema() {
    let case = Case::new();
    let done = case.run(&["run", "exec", "-q", "--", "sh", "-c", "echo hi"]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let out = case
        .command(&["report", done.run_dir.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json_doc(&out, "report --json");
    assert_valid(&validator("report.schema.json"), &doc, "report --json");
    assert_eq!(doc["schema_version"], 1);
    let r: json_docs::ReportJson =
        serde_json::from_value(doc).expect("report --json reads back as its type");
    let json_docs::ReportJson::Runs(r) = r else {
        panic!("a run's report --json is no batch's");
    };
    assert_eq!(r.runs.len(), 1);
    assert!(r.runs[0].logs.matches);
    // `--events`: event lines, as `run --json` printed them.
    let out = case
        .command(&["report", done.run_dir.to_str().unwrap(), "--events"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = validator("event.schema.json");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.lines().count() > 2, "{text}");
    for line in text.lines() {
        let line: Value = serde_json::from_str(line).expect("each --events line is JSON");
        assert_valid(&events, &line, "a report --events line");
    }
}

/// `warden doctor --json` against its schema.
#[test]
fn doctor_json_matches_its_schema() {
    let case = Case::new();
    let out = case.command(&["doctor", "--json"]).output().unwrap();
    let doc = json_doc(&out, "doctor --json");
    assert_valid(&validator("doctor.schema.json"), &doc, "doctor --json");
    assert_eq!(doc["schema_version"], 1);
    let d: json_docs::DoctorJson =
        serde_json::from_value(doc).expect("doctor --json reads back as its type");
    assert!(d.sandboxes.host.ok);
}

/// `warden config --json` against its schema.
#[test]
fn config_json_matches_its_schema() {
    let case = Case::new();
    std::fs::write(
        case.path().join("warden.toml"),
        "stall_timeout = \"3m\"\n[agent.claude]\nimage = \"c:1\"\n",
    )
    .unwrap();
    let mut cmd = case.command(&["config", "--json"]);
    cmd.env("WARDEN_TIMEOUT", "90m");
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json_doc(&out, "config --json");
    assert_valid(&validator("config.schema.json"), &doc, "config --json");
    assert_eq!(doc["schema_version"], 1);
    let c: json_docs::ConfigJson =
        serde_json::from_value(doc).expect("config --json reads back as its type");
    let source = |name: &str| {
        &c.settings
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no {name}"))
            .source
    };
    assert_eq!(*source("timeout"), json_docs::SettingSource::Environment);
    assert_eq!(
        *source("stall_timeout"),
        json_docs::SettingSource::ProjectFile
    );
    assert_eq!(*source("kill_grace"), json_docs::SettingSource::Default);
    assert_eq!(c.agent_images.len(), 1);
}

/// `warden batch --json` prints batch.json's content: its schema holds.
#[test]
fn batch_json_matches_the_batch_schema() {
    let case = Case::new();
    let file = case.path().join("runs.toml");
    std::fs::write(
        &file,
        "[defaults]\nagent = \"exec\"\n\n\
         [[run]]\nname = \"good\"\ncommand = [\"sh\", \"-c\", \"echo fine\"]\n",
    )
    .unwrap();
    let dir = case.path().join("batch");
    let out = case
        .command(&[
            "batch",
            file.to_str().unwrap(),
            "--dir",
            dir.to_str().unwrap(),
            "--json",
            "-q",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json_doc(&out, "batch --json");
    assert_valid(&validator("batch.schema.json"), &doc, "batch --json");
    assert_eq!(doc["schema_version"], 1);
    // The batch's directory read back by `report --json`.
    let out = case
        .command(&["report", dir.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json_doc(&out, "report --json of a batch");
    assert_valid(
        &validator("report.schema.json"),
        &doc,
        "report --json of a batch",
    );
    let r: json_docs::ReportJson = serde_json::from_value(doc).expect("reads back");
    let json_docs::ReportJson::Batch(b) = r else {
        panic!("a batch's report --json is a batch's");
    };
    assert_eq!(b.entries.len(), 1);
    assert_eq!(b.entries[0].name, "good");
    assert_eq!(b.entries[0].runs.len(), 1);
}

/// Every line of `warden replay --json` is an event line by the event
/// schema, and its summary (on stderr) is valid by its own, for an
/// agent's recording and for a run's `stdout.log`.
#[test]
fn replay_json_lines_match_the_event_schema() {
    let case = Case::new();
    let events = validator("event.schema.json");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../warden-events/tests/fixtures/claude/success_with_tools.jsonl");
    let done = case.run(&["run", "exec", "-q", "--", "sh", "-c", "echo one; echo two"]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let stdout_log = done.run_dir.join("stdout.log");
    for (agent, file) in [
        ("claude", fixture.as_path()),
        ("exec", stdout_log.as_path()),
    ] {
        let out = case
            .command(&["replay", agent, file.to_str().unwrap(), "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("each replay --json line is JSON"))
            .collect();
        assert!(!lines.is_empty(), "{agent}: no events");
        for line in &lines {
            assert_valid(&events, line, "a replay --json line");
        }
        // The summary: one JSON object, stderr's last line.
        let err = String::from_utf8(out.stderr).unwrap();
        let summary: Value = serde_json::from_str(err.lines().last().expect("a summary"))
            .expect("the summary is JSON");
        assert_valid(
            &validator("replay.schema.json"),
            &summary,
            "replay's summary",
        );
        assert_eq!(summary["outcome"], "succeeded", "{summary}");
        assert_eq!(summary["agent"], agent, "{summary}");
    }
}
