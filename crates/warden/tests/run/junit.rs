//! `--junit FILE`: the JUnit XML of a run, a session and a batch, each
//! validated with xmllint against junit-10.xsd, the schema Jenkins reads
//! JUnit files with (fetched by `.ci/install-junit-xsd`; without it, or
//! without xmllint, the tests say so and skip, except under CI=true).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{Case, kill};

/// The XSD and xmllint, or `None` (after saying why) off CI.
pub(crate) fn validator() -> Option<PathBuf> {
    let xsd = match std::env::var_os("WARDEN_JUNIT_XSD") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.agents/junit/junit-10.xsd"),
    };
    let xmllint = Command::new("xmllint").arg("--version").output().is_ok();
    if xsd.is_file() && xmllint {
        return Some(xsd);
    }
    let why = format!(
        "JUnit validation needs xmllint (libxml2-utils) and {} (.ci/install-junit-xsd)",
        xsd.display()
    );
    if std::env::var_os("CI").is_some_and(|v| v == "true") {
        panic!("{why}");
    }
    eprintln!("skipped: {why}");
    None
}

/// Validates `file` against the XSD; returns its text.
pub(crate) fn valid(file: &Path, xsd: &Path) -> String {
    let out = Command::new("xmllint")
        .args(["--noout", "--schema"])
        .arg(xsd)
        .arg(file)
        .output()
        .expect("xmllint");
    assert!(
        out.status.success(),
        "{} is not valid JUnit: {}\n{}",
        file.display(),
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(file).unwrap_or_default()
    );
    std::fs::read_to_string(file).unwrap()
}

fn junit_arg(path: &Path) -> String {
    format!("--junit={}", path.display())
}

#[test]
fn a_failed_run_is_a_valid_junit_failure_with_its_stderr_tail() {
    let Some(xsd) = validator() else { return };
    let case = Case::new();
    let file = case.path().join("out/junit.xml");
    std::fs::create_dir(case.path().join("out")).unwrap();
    // Markup and a control character (a colour's ESC) from the agent.
    let done = case.run(&[
        "run",
        "exec",
        &junit_arg(&file),
        "--",
        "sh",
        "-c",
        "for i in $(seq 1 200); do echo \"noise $i\" >&2; done; printf 'fatal: <bad> & \\033[31mred\\033[0m\\n' >&2; exit 3",
    ]);
    assert_eq!(done.code, 1, "{}", done.stderr);
    assert!(done.stderr.contains("JUnit report:"), "{}", done.stderr);
    let xml = valid(&file, &xsd);
    assert!(
        xml.contains(
            r#"<testsuite name="warden run exec" tests="1" failures="1" errors="0" skipped="0""#
        ),
        "{xml}"
    );
    assert!(
        xml.contains(r#"<failure type="agent_failed" message=""#),
        "{xml}"
    );
    assert!(
        xml.contains("fatal: &lt;bad&gt; &amp; [31mred[0m</failure>"),
        "{xml}"
    );
    assert!(!xml.contains('\u{1b}'), "ESC is not XML 1.0: {xml}");
    // The tail: the last lines, not the whole log.
    assert!(
        xml.contains("noise 200") && !xml.contains("noise 100\n"),
        "{xml}"
    );
    assert!(
        xml.contains(&format!(
            "<system-out>{}</system-out>",
            case.run_dir().display()
        )),
        "{xml}"
    );
    let leftovers: Vec<_> = std::fs::read_dir(case.path().join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers, ["junit.xml"], "no temporary file is left");
}

#[test]
fn a_cancelled_run_is_skipped() {
    let Some(xsd) = validator() else { return };
    let case = Case::new();
    let file = case.path().join("junit.xml");
    let child = case.spawn(&[
        "run",
        "exec",
        &junit_arg(&file),
        "--",
        "sh",
        "-c",
        "echo up; sleep 600",
    ]);
    case.wait_for_output("stdout.log", "up", Duration::from_secs(10));
    kill(child.id(), "INT");
    let done = case.finished(child.wait_with_output().unwrap(), Instant::now());
    assert_eq!(done.code, 130, "{}", done.stderr);
    let xml = valid(&file, &xsd);
    assert!(xml.contains(r#"skipped="1""#), "{xml}");
    assert!(xml.contains("<skipped message="), "{xml}");
    case.assert_nothing_left();
}

#[test]
fn a_session_has_one_valid_case_per_iteration() {
    let Some(xsd) = validator() else { return };
    let case = Case::new();
    let file = case.path().join("junit.xml");
    // Iteration 1 succeeds, iteration 2 fails (and ends the session).
    let done = case.run(&[
        "run",
        "exec",
        "--iterations",
        "3",
        &junit_arg(&file),
        "--",
        "sh",
        "-c",
        "n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; \
         [ $n -eq 2 ] && { echo 'iteration two broke' >&2; exit 1; }; exit 0",
    ]);
    assert_eq!(done.code, 1, "{}", done.stderr);
    let xml = valid(&file, &xsd);
    assert!(
        xml.contains(r#"tests="2" failures="1" errors="0" skipped="0""#),
        "{xml}"
    );
    assert!(xml.contains(r#"<testcase name="iteration-1""#), "{xml}");
    assert!(xml.contains(r#"<testcase name="iteration-2""#), "{xml}");
    assert!(xml.contains("iteration two broke"), "{xml}");
}

#[test]
fn a_batch_has_one_valid_case_per_entry_and_per_iteration() {
    let Some(xsd) = validator() else { return };
    let case = Case::new();
    let file = case.path().join("junit.xml");
    let toml = "[defaults]\nagent = \"exec\"\nkill_grace = \"500ms\"\n\n\
        [[run]]\nname = \"ok\"\ncommand = [\"true\"]\n\
        [[run]]\nname = \"broken\"\ncommand = [\"sh\", \"-c\", \"echo 'it broke' >&2; exit 7\"]\n\
        [[run]]\nname = \"loop\"\niterations = 2\ncommand = [\"true\"]\n\
        [[run]]\nname = \"hang\"\ncommand = [\"sh\", \"-c\", \"echo up; sleep 600\"]\n\
        [[run]]\nname = \"after\"\ncommand = [\"true\"]\n";
    let batch_file = crate::batch::write(&case, toml);
    let dir = case.path().join("batch");
    let child = case.spawn(&[
        "batch",
        &batch_file,
        "-j",
        "1",
        "--dir",
        dir.to_str().unwrap(),
        &junit_arg(&file),
    ]);
    let until = Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(dir.join("hang/iteration-1/stdout.log"))
        .is_ok_and(|s| s.contains("up"))
    {
        assert!(Instant::now() < until, "the hanging entry never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    kill(child.id(), "INT");
    let done = case.finished(child.wait_with_output().unwrap(), Instant::now());
    assert_eq!(done.code, 130, "{}", done.stderr);
    let xml = valid(&file, &xsd);
    assert!(
        xml.contains(
            r#"<testsuite name="warden batch runs" tests="6" failures="1" errors="0" skipped="2""#
        ),
        "{xml}"
    );
    for name in [
        "ok",
        "broken",
        "loop/iteration-1",
        "loop/iteration-2",
        "hang",
        "after",
    ] {
        assert!(
            xml.contains(&format!(r#"<testcase name="{name}""#)),
            "{name}: {xml}"
        );
    }
    assert!(xml.contains(r#"<failure type="agent_failed""#), "{xml}");
    assert!(xml.contains("it broke"), "{xml}");
    case.assert_nothing_left();
}

#[test]
fn a_junit_file_in_a_missing_directory_is_refused_before_the_run() {
    let case = Case::new();
    let file = case.path().join("nowhere/junit.xml");
    let done = case.run(&[
        "run",
        "exec",
        &junit_arg(&file),
        "--",
        "sh",
        "-c",
        "echo ran > ran",
    ]);
    assert_eq!(done.code, 2, "{}", done.stderr);
    assert!(done.stderr.contains("does not exist"), "{}", done.stderr);
    assert!(!case.path().join("ran").exists(), "nothing may run");
}
