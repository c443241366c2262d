//! `warden batch --resume DIR`: a batch whose warden was killed goes on
//! from its directory; what ended keeps its report, the rest runs again.

use std::time::Duration;

use serde_json::Value;

use crate::support::{Case, kill};

fn batch_json(dir: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("batch.json")).unwrap()).unwrap()
}

fn verdicts(b: &Value) -> Vec<(String, String)> {
    b["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["verdict"].as_str().unwrap_or("none").to_string(),
            )
        })
        .collect()
}

/// Whether the entry in `dir` has ended and its last `session.json` is
/// sealed: the file has a verdict and its MAC was written after it (the
/// file is written while the session runs, and a kill between the two
/// writes leaves a MAC of the version before, which a resume rightly
/// takes for a forgery).
fn ended(dir: &std::path::Path) -> bool {
    let json = dir.join("session.json");
    let done = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .is_some_and(|s| !s["verdict"].is_null());
    let modified = |p: &std::path::Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    done && modified(&dir.join("session.json.mac")) >= modified(&json)
}

#[test]
fn a_killed_batch_resumes_running_only_what_did_not_end() {
    let case = Case::new();
    let marker = case.path().join("marker");
    std::fs::write(
        case.path().join("b.toml"),
        format!(
            "[defaults]\nagent = \"exec\"\n\
             [[run]]\nname = \"quick\"\ncommand = [\"sh\", \"-c\", \"echo quick\"]\n\
             [[run]]\nname = \"fails\"\ncommand = [\"sh\", \"-c\", \"exit 3\"]\n\
             [[run]]\nname = \"long\"\ncommand = [\"sh\", \"-c\", \"if [ -e {m} ]; then echo again; else touch {m}; echo up; sleep 300; fi\"]\n",
            m = marker.display()
        ),
    )
    .unwrap();
    let dir = case.path().join("batch");
    let child = case.spawn(&["batch", "b.toml", "-j", "3", "--dir", dir.to_str().unwrap()]);
    // The long run is up, the others ended: warden is killed outright.
    let until = std::time::Instant::now() + Duration::from_secs(20);
    while !(marker.exists() && ended(&dir.join("quick")) && ended(&dir.join("fails"))) {
        assert!(
            std::time::Instant::now() < until,
            "the batch did not get going"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    kill(child.id(), "KILL");
    let _ = child.wait_with_output();
    assert!(!dir.join("batch.json").exists(), "killed before its end");

    let done = case.run(&["batch", "--resume", dir.to_str().unwrap()]);
    assert_eq!(done.code, 1, "one run fails: {}", done.stderr);
    assert!(
        done.stderr.contains("resuming: 1 of 3 run(s) to run again"),
        "{}",
        done.stderr
    );
    let b = batch_json(&dir);
    assert_eq!(
        verdicts(&b),
        [
            ("quick".into(), "succeeded".into()),
            ("fails".into(), "agent_failed".into()),
            ("long".into(), "succeeded".into())
        ]
    );
    // The interrupted attempt is kept aside, the new one has its place.
    assert!(dir.join("attempts/long.1").is_dir());
    let again = std::fs::read_to_string(
        std::fs::read_dir(dir.join("long"))
            .unwrap()
            .flatten()
            .find(|e| e.path().is_dir())
            .unwrap()
            .path()
            .join("stdout.log"),
    )
    .unwrap();
    assert_eq!(again, "again\n");

    // --rerun-failed: only the failed one runs again.
    let done = case.run(&["batch", "--resume", dir.to_str().unwrap(), "--rerun-failed"]);
    assert!(
        done.stderr.contains("resuming: 1 of 3 run(s) to run again"),
        "{}",
        done.stderr
    );
    assert!(dir.join("attempts/fails.1").is_dir());
    assert!(!dir.join("attempts/quick.1").exists());
    case.assert_nothing_left();
}

#[test]
fn resuming_what_is_not_a_batch_says_why() {
    let case = Case::new();
    let done = case.run(&["batch", "--resume", case.path().to_str().unwrap()]);
    assert_eq!(done.code, 2);
    assert!(
        done.stderr.contains("cannot resume the batch") && done.stderr.contains("plan.json"),
        "{}",
        done.stderr
    );
    let done = case.run(&["batch", "b.toml", "--resume", case.path().to_str().unwrap()]);
    assert_eq!(done.code, 2, "a file and --resume: {}", done.stderr);
}
