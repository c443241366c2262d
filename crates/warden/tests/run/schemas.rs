//! The report formats as a contract: the JSON Schemas in `schemas/` are
//! what the types generate, and the real files of a run, a session and a
//! batch (every `events.jsonl` line too) validate against them.

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

/// The schema of what warden writes (the serialize contract: a field
/// that is always written is required, `null` or not).
fn schema_of<T: schemars::JsonSchema>() -> String {
    let schema = schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<T>();
    let mut t = serde_json::to_string_pretty(&schema).expect("a schema is JSON");
    t.push('\n');
    t
}

/// Each committed schema file and what the types generate for it.
fn generated() -> Vec<(&'static str, String)> {
    vec![
        ("run.schema.json", schema_of::<Report>()),
        // An events.jsonl line, or a `--json` line with its `run_id`.
        ("event.schema.json", schema_of::<FeedLine<'static>>()),
        ("session.schema.json", schema_of::<SessionReport>()),
        ("batch.schema.json", schema_of::<BatchReport>()),
        ("gc.schema.json", schema_of::<warden_run::gc::GcReport>()),
    ]
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
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("gc --json is one JSON document");
    assert_valid(&validator("gc.schema.json"), &doc, "gc --json");
    assert_eq!(doc["schema_version"], 1);
    assert!(
        doc["items"].as_array().is_some_and(|i| !i.is_empty()),
        "the run would go: {doc}"
    );
}
