//! `warden report` of a batch or a session directory that was moved or
//! copied, or that lost an entry or a run: every run is found under the
//! directory given (by the names of the directories recorded), never at
//! the absolute paths `batch.json` and `session.json` recorded; what is
//! not there is shown as missing (text, `--json`, `--html`) and `report`
//! exits 1.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::schemas::{assert_valid, validator};
use crate::support::{Case, WARDEN};

fn report(args: &[&str], dir: &Path) -> Output {
    Command::new(WARDEN)
        .arg("report")
        .arg(dir)
        .args(args)
        .output()
        .expect("run warden report")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `report --json` of `dir`, checked against its schema.
fn json(dir: &Path, code: i32) -> Value {
    let out = report(&["--json"], dir);
    assert_eq!(out.status.code(), Some(code), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("--json is JSON");
    assert_valid(&validator("report.schema.json"), &doc, "report --json");
    doc
}

/// Every `run_dir` of a `report --json` document.
fn run_dirs(doc: &Value) -> Vec<String> {
    let runs = |v: &Value| -> Vec<String> {
        v["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["run_dir"].as_str().unwrap().to_string())
            .collect()
    };
    match doc["entries"].as_array() {
        Some(entries) => entries.iter().flat_map(runs).collect(),
        None => runs(doc),
    }
}

/// A batch of two entries that both succeed (`ok`, and `two` with two
/// iterations), in `<case>/batch`.
fn batch(case: &Case) -> std::path::PathBuf {
    let toml = "[defaults]\nagent = \"exec\"\n\n\
        [[run]]\nname = \"ok\"\ncommand = [\"sh\", \"-c\", \"echo hi\"]\n\
        [[run]]\nname = \"two\"\niterations = 2\ncommand = [\"sh\", \"-c\", \"echo yo\"]\n";
    let file = crate::batch::write(case, toml);
    let dir = case.path().join("batch");
    let done = case.run(&["batch", &file, "--dir", dir.to_str().unwrap()]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    dir
}

fn cp(from: &Path, to: &Path) {
    let ok = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap()
        .success();
    assert!(ok, "cp -a");
}

#[test]
fn a_moved_batch_is_reported_from_where_it_is() {
    let case = Case::new();
    let dir = batch(&case);
    let moved = case.path().join("elsewhere/moved");
    std::fs::create_dir(case.path().join("elsewhere")).unwrap();
    std::fs::rename(&dir, &moved).unwrap();

    let out = report(&[], &moved);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let t = stdout(&out);
    assert_eq!(
        t.matches("logs as warden wrote them").count(),
        3,
        "every run is read and checked:\n{t}"
    );
    assert!(!t.contains("MISSING"), "{t}");
    let doc = json(&moved, 0);
    let dirs = run_dirs(&doc);
    assert_eq!(dirs.len(), 3, "{doc}");
    for d in &dirs {
        assert!(
            d.starts_with(moved.to_str().unwrap()),
            "{d} is under {moved:?}"
        );
    }
    let html = case.path().join("pages/");
    let out = report(&["--html", html.to_str().unwrap()], &moved);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(html.join("index-2-two.html").is_file());
}

#[test]
fn a_copy_with_an_entry_deleted_never_reads_the_original() {
    let case = Case::new();
    let dir = batch(&case);
    let copy = case.path().join("copy");
    cp(&dir, &copy);
    std::fs::remove_dir_all(copy.join("two")).unwrap();
    // Were the original read, its changed log would be said.
    std::fs::write(dir.join("two/iteration-1/stdout.log"), "changed\n").unwrap();

    let out = report(&[], &copy);
    let (t, err) = (stdout(&out), stderr(&out));
    assert_eq!(
        out.status.code(),
        Some(1),
        "a missing entry: exit 1\n{t}\n{err}"
    );
    assert!(
        !t.contains("LOGS CHANGED") && !err.contains("changed after"),
        "{t}\n{err}"
    );
    assert!(
        !t.contains(&format!("{}/", dir.display())),
        "nothing of the original is shown:\n{t}"
    );
    assert_eq!(
        t.matches("logs as warden wrote them").count(),
        1,
        "only the entry that is there is checked:\n{t}"
    );
    let gone = format!("{} is not there", copy.join("two").display());
    assert!(
        t.contains(&format!("MISSING: {gone}")) && t.contains("MISSING (iteration 2)"),
        "{t}"
    );
    assert!(err.contains(&gone), "{err}");

    let doc = json(&copy, 1);
    assert_eq!(doc["entries"][1]["missing"], Value::from(gone.clone()));
    assert_eq!(doc["entries"][1]["runs"], serde_json::json!([]));
    assert_eq!(doc["entries"][1]["missing_runs"][1]["index"], 1);
    assert_eq!(
        doc["entries"][1]["missing_runs"][0]["run_dir"],
        Value::from(copy.join("two/iteration-1").display().to_string())
    );
    assert_eq!(doc["entries"][0]["missing"], Value::Null);
    for d in run_dirs(&doc) {
        assert!(d.starts_with(copy.to_str().unwrap()), "{d}");
    }

    // A link in its place is not followed (it leads out of the copy).
    std::os::unix::fs::symlink(dir.join("two"), copy.join("two")).unwrap();
    let out = report(&[], &copy);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("is a link, not a directory: it is not followed"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_missing_entry_or_run_is_shown_as_missing_and_the_page_is_written() {
    let case = Case::new();
    let dir = batch(&case);
    std::fs::remove_dir_all(dir.join("ok")).unwrap();

    let out = report(&[], &dir);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stdout(&out).contains("MISSING"), "{}", stdout(&out));
    let pages = case.path().join("pages/");
    let out = report(&["--html", pages.to_str().unwrap()], &dir);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let index = std::fs::read_to_string(pages.join("index.html")).expect("the batch's page");
    assert!(
        index.contains(&format!(
            "<td>ok <span class=\"bad\">(missing: {} is not there; not read)</span></td>",
            dir.join("ok").display()
        )),
        "a row, no link, saying it is missing:\n{index}"
    );
    assert!(!pages.join("index-1-ok.html").exists(), "no page");
    assert!(index.contains("<a href=\"index-2-two.html\">two</a>"));

    // One run of an entry gone: the entry has its page, the run is
    // said to be missing there.
    std::fs::remove_dir_all(dir.join("two/iteration-1")).unwrap();
    let out = report(&["--html", pages.to_str().unwrap()], &dir);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let index = std::fs::read_to_string(pages.join("index.html")).unwrap();
    assert!(
        index.contains(
            "<a href=\"index-2-two.html\">two</a> <span class=\"bad\">(1 run(s) missing)</span>"
        ),
        "{index}"
    );
    let entry = std::fs::read_to_string(pages.join("index-2-two.html")).unwrap();
    assert_eq!(entry.matches("<section class=\"run\">").count(), 1);
    assert!(
        entry.contains("<section class=\"run missing\">")
            && entry.contains(&format!(
                "{} is not there",
                dir.join("two/iteration-1").display()
            )),
        "{entry}"
    );
    let doc = json(&dir, 1);
    assert_eq!(doc["entries"][1]["missing"], Value::Null);
    assert_eq!(doc["entries"][1]["runs"].as_array().unwrap().len(), 1);
    assert_eq!(doc["entries"][1]["missing_runs"][0]["index"], 0);
}

#[test]
fn a_moved_session_is_reported_from_where_it_is() {
    let case = Case::new();
    let done = case.run(&["run", "exec", "-q", "--iterations", "2", "--", "echo", "hi"]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let moved = case.path().join("moved");
    std::fs::rename(case.run_dir(), &moved).unwrap();

    let out = report(&[], &moved);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).matches("logs as warden wrote them").count(),
        2,
        "{}",
        stdout(&out)
    );
    let doc = json(&moved, 0);
    assert_eq!(doc["missing_runs"], serde_json::json!([]));
    for d in run_dirs(&doc) {
        assert!(d.starts_with(moved.to_str().unwrap()), "{d}");
    }
    let out = report(&["--events"], &moved);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // A run gone: shown as missing, the other still reported; exit 1.
    std::fs::remove_dir_all(moved.join("iteration-1")).unwrap();
    let out = report(&[], &moved);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let t = stdout(&out);
    assert!(
        t.contains("MISSING (iteration 1)") && t.matches("logs as warden wrote them").count() == 1,
        "{t}"
    );
    let doc = json(&moved, 1);
    assert_eq!(doc["runs"].as_array().unwrap().len(), 1);
    assert_eq!(doc["missing_runs"][0]["index"], 0);
    let html = case.path().join("s.html");
    let out = report(&["--html", html.to_str().unwrap()], &moved);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        std::fs::read_to_string(&html)
            .unwrap()
            .contains("run missing")
    );

    // A recorded directory whose name would lead out is refused by name.
    let path = moved.join("session.json");
    let mut session: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    session["runs"][1]["run_dir"] = Value::from("/etc/..");
    std::fs::write(&path, serde_json::to_vec(&session).unwrap()).unwrap();
    let doc = json(&moved, 1);
    assert_eq!(doc["runs"], serde_json::json!([]));
    assert_eq!(doc["missing_runs"][1]["run_dir"], Value::Null);
    assert!(
        doc["missing_runs"][1]["why"]
            .as_str()
            .unwrap()
            .contains("`/etc/..` does not end in a directory name"),
        "{doc}"
    );
}
