//! What people see: the live terminal view (driven in tmux), the plain
//! view's heartbeat, GitHub Actions output, `warden report` and its HTML
//! timeline (rendered in headless Chromium), completions and the man page.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{Case, WARDEN};

fn have(tool: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        let msg = format!("{tool} is not installed");
        if std::env::var_os("CI").is_some_and(|v| v == "true") {
            panic!("{msg} (.ci/run installs it)");
        }
        eprintln!("SKIPPED: {msg}");
    }
    found
}

/// A tmux session running one command in a pane of the given size.
struct Pane {
    name: String,
}

impl Pane {
    fn start(case: &Case, width: u32, command: &str) -> Pane {
        let name = format!("warden-{}", case.mark);
        let script = case.path().join("pane.sh");
        // The shell survives the Ctrl-C (a handler, not an ignore, so the
        // command still gets SIGINT) to report the exit status.
        std::fs::write(
            &script,
            format!(
                "trap ':' INT\ncd '{}'\n{command}\necho EXIT=$?\nsleep 60\n",
                case.path().display()
            ),
        )
        .unwrap();
        let ok = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-s",
                &name,
                "-x",
                &width.to_string(),
                "-y",
                "20",
            ])
            .arg(format!("sh {}", script.display()))
            .env_remove("NO_COLOR")
            .status()
            .unwrap()
            .success();
        assert!(ok, "tmux did not start");
        Pane { name }
    }

    fn capture(&self) -> String {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.name])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &str) {
        Command::new("tmux")
            .args(["send-keys", "-t", &self.name, keys])
            .status()
            .unwrap();
    }

    fn wait_for(&self, needle: &str, limit: Duration) -> String {
        let until = Instant::now() + limit;
        loop {
            let screen = self.capture();
            if screen.contains(needle) || Instant::now() > until {
                return screen;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.name])
            .status();
    }
}

fn status_lines(screen: &str) -> Vec<&str> {
    screen
        .lines()
        .filter(|l| l.contains("│ quiet") || l.contains(" quiet "))
        .collect()
}

fn no_garbage(screen: &str) {
    assert!(
        !screen.contains('\u{1b}'),
        "raw escape in the pane:\n{screen}"
    );
    for bad in ["[0m", "[33m", "[31m", "[2K", "[1A"] {
        assert!(
            !screen.contains(bad),
            "an escape sequence was printed as text ({bad}):\n{screen}"
        );
    }
}

#[test]
fn the_live_view_redraws_one_status_line_in_place_and_leaves_nothing() {
    if !have("tmux") {
        return;
    }
    let case = Case::new();
    let cmd = format!(
        "{WARDEN} run exec -- sh -c 'echo first-line; sleep 3; echo second-line; sleep 1.2'"
    );
    let pane = Pane::start(&case, 100, &cmd);
    let one = pane.wait_for("first-line", Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(600));
    let two = pane.capture();
    for screen in [&one, &two] {
        no_garbage(screen);
    }
    let (s1, s2) = (status_lines(&one), status_lines(&two));
    assert_eq!(s2.len(), 1, "one status line, not a trail of them:\n{two}");
    assert!(
        s2[0].contains("exec") && s2[0].contains("first-line"),
        "{two}"
    );
    assert!(s1.len() <= 1, "{one}");
    assert_ne!(
        s1.first(),
        s2.first(),
        "the status line is redrawn (its clocks move):\n{one}\n{two}"
    );
    let end = pane.wait_for("EXIT=", Duration::from_secs(15));
    assert!(end.contains("EXIT=0") && end.contains("succeeded"), "{end}");
    assert!(
        status_lines(&end).is_empty(),
        "the status line was left behind:\n{end}"
    );
    assert!(
        end.contains("out| second-line"),
        "finished lines scroll above: {end}"
    );
    no_garbage(&end);
}

#[test]
fn a_narrow_pane_gets_a_cut_status_line_and_ctrl_c_cleans_up() {
    if !have("tmux") {
        return;
    }
    let case = Case::new();
    let cmd = format!(
        "{WARDEN} run exec --kill-grace 500ms -- sh -c 'echo a-rather-long-line-of-output-here; sleep 600'"
    );
    let pane = Pane::start(&case, 30, &cmd);
    let screen = pane.wait_for("quiet", Duration::from_secs(10));
    no_garbage(&screen);
    let status = status_lines(&screen);
    assert_eq!(status.len(), 1, "{screen}");
    assert!(
        status[0].chars().count() <= 30,
        "the status line wraps in a narrow pane:\n{screen}"
    );
    pane.keys("C-c");
    let end = pane.wait_for("EXIT=", Duration::from_secs(15));
    assert!(end.contains("EXIT=130"), "{end}");
    assert!(
        status_lines(&end).is_empty(),
        "the status line was left behind after Ctrl-C:\n{end}"
    );
    no_garbage(&end);
    case.assert_nothing_left();
}

#[test]
fn off_a_terminal_lines_are_timestamped_with_a_heartbeat_about_silence() {
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--heartbeat",
        "300ms",
        "--",
        "sh",
        "-c",
        "echo start; sleep 1",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    // The command's output is its own, on stdout; the view's lines on
    // stderr.
    assert_eq!(done.stdout, "start\n");
    assert!(
        done.stderr
            .lines()
            .any(|l| l.starts_with("[00:00] warden: exec started")),
        "{}",
        done.stderr
    );
    let beats: Vec<&str> = done
        .stderr
        .lines()
        .filter(|l| l.contains("still running; last activity"))
        .collect();
    assert!(beats.len() >= 2, "{}", done.stderr);
    assert!(!done.stderr.contains('\u{1b}'), "no escapes off a terminal");
}

#[test]
fn github_actions_gets_annotations_a_step_summary_and_no_injected_commands() {
    let case = Case::new();
    let summary = case.path().join("summary.md");
    let mut cmd = case.command(&[
        "run",
        "exec",
        "--stall-timeout",
        "600ms",
        "--kill-grace",
        "200ms",
        "--",
        "sh",
        "-c",
        "echo '::error::injected by the agent'; echo '::add-mask::x'; sleep 600",
    ]);
    cmd.env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", &summary);
    let done = case.finished(cmd.output().unwrap(), Instant::now());
    assert_eq!(done.code, 3, "{}", done.stderr);
    let lines: Vec<&str> = done.stderr.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("::warning title=warden::no activity")),
        "{}",
        done.stderr
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("::error title=warden::stalled")),
        "{}",
        done.stderr
    );
    for l in &lines {
        assert!(
            !l.starts_with("::error::") && !l.starts_with("::add-mask::"),
            "a workflow command from the agent reached the log: {l}"
        );
    }
    assert!(
        done.stderr.contains("injected by the agent"),
        "the line is kept, made harmless"
    );
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(
        md.contains("stalled") && md.contains("| why |") && md.contains("longest silence"),
        "{md}"
    );
}

fn recorded_agent_run(case: &Case) -> PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../warden-events/tests/fixtures/claude/success_with_tools.jsonl");
    let bin = case.path().join("claude-stand-in");
    std::fs::write(
        &bin,
        format!(
            "#!/bin/sh\ncat > /dev/null\nhead -n 3 '{f}'\nsleep 0.6\ntail -n +4 '{f}'\n",
            f = fixture.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let done = case.run(&["run", "claude", "x", "--agent-bin", bin.to_str().unwrap()]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    done.run_dir
}

#[test]
fn report_explains_a_run_and_draws_a_self_contained_timeline() {
    let case = Case::new();
    let run_dir = recorded_agent_run(&case);
    let html = case.path().join("timeline.html");
    let out = Command::new(WARDEN)
        .args(["report"])
        .arg(&run_dir)
        .args(["--silence", "500ms", "--html"])
        .arg(&html)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("succeeded") && text.contains("quiet from") && text.contains("Bash"),
        "{text}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("<svg") && page.contains("Bash") && page.contains("quiet"),
        "timeline content"
    );
    for external in ["http://", "https://", "<script src", "<link "] {
        let hits: Vec<_> = page
            .match_indices(external)
            .filter(|(i, _)| !page[..*i].ends_with("xmlns=\""))
            .collect();
        assert!(
            hits.is_empty(),
            "the page loads something from outside: {external}"
        );
    }
    let bad = Command::new(WARDEN)
        .args(["report", "/nonexistent-run"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("session.json or batch.json"));

    if !have("chromium") {
        return;
    }
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report");
    std::fs::create_dir_all(&shots).unwrap();
    let png = shots.join("timeline.png");
    let _ = std::fs::remove_file(&png);
    let profile = case.path().join("chromium-profile");
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1100,700",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", html.display()))
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        png.metadata().is_ok_and(|m| m.len() > 5000),
        "no screenshot; chromium said:\n{log}"
    );
    let console: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .collect();
    assert!(console.is_empty(), "console errors: {console:?}");
    eprintln!("timeline screenshot: {}", png.display());
}

#[test]
fn report_reads_a_session_directory() {
    let case = Case::new();
    let done = case.run(&["run", "exec", "--iterations", "2", "--", "echo", "hi"]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let out = Command::new(WARDEN)
        .args(["report"])
        .arg(case.run_dir())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        text.contains("after 2 of 2 iteration(s)") && text.matches("run 20").count() == 2,
        "{text}"
    );
}

#[test]
fn completions_and_the_man_page_come_from_the_cli_definition() {
    let bash = Command::new(WARDEN)
        .args(["completions", "bash"])
        .output()
        .unwrap();
    let bash = String::from_utf8_lossy(&bash.stdout);
    assert!(
        bash.contains("--stall-timeout") && bash.contains("warden"),
        "{bash}"
    );
    let man = Command::new(WARDEN).arg("man").output().unwrap();
    let man = String::from_utf8_lossy(&man.stdout);
    assert!(man.starts_with(".ie") || man.contains(".TH"), "{man}");
    assert!(man.contains("warden"));
    let run = Command::new(WARDEN).args(["man", "run"]).output().unwrap();
    let run = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.contains("stall\\-timeout") || run.contains("stall-timeout"),
        "the run page has the run flags: {run}"
    );
    let dir = tempfile::tempdir().unwrap();
    assert!(
        Command::new(WARDEN)
            .args(["man", "--dir"])
            .arg(dir.path())
            .status()
            .unwrap()
            .success()
    );
    assert!(dir.path().join("warden-batch.1").exists() && dir.path().join("warden.1").exists());
}

#[test]
fn a_run_on_a_terminal_with_no_size_draws_as_on_80_columns() {
    let case = Case::new();
    let Some(text) = crate::support::in_unsized_terminal(
        &case,
        &format!(
            "'{WARDEN}' run exec --run-dir '{}' -- sh -c 'echo first; sleep 0.3; echo second'",
            case.run_dir().display()
        ),
    ) else {
        return;
    };
    assert!(!text.contains("panicked"), "{text}");
    assert!(text.contains("EXIT=0"), "{text}");
    assert!(text.contains("second"), "{text}");
}

#[test]
fn a_check_running_on_a_terminal_has_a_status_line_of_its_own_that_goes_with_it() {
    if !have("tmux") {
        return;
    }
    let case = Case::new();
    // The check waits for the test's word (the file `go`).
    let cmd = format!(
        "{WARDEN} run exec --check 'while [ ! -f go ]; do sleep 0.05; done' -- sh -c 'echo worked'"
    );
    let pane = Pane::start(&case, 120, &cmd);
    let name = "check `while [ ! -f go ]; do sleep 0.05; done` after iteration 1";
    let screen = pane.wait_for(&format!("{name} │"), Duration::from_secs(10));
    no_garbage(&screen);
    assert!(
        screen.contains(&format!("{name} started; its output goes to")),
        "{screen}"
    );
    let live: Vec<&str> = screen
        .lines()
        .filter(|l| l.contains(&format!("{name} │")))
        .collect();
    assert_eq!(live.len(), 1, "one status line for the check:\n{screen}");
    std::fs::write(case.path().join("go"), "").unwrap();
    let end = pane.wait_for("EXIT=", Duration::from_secs(15));
    assert!(end.contains("EXIT=0"), "{end}");
    assert!(end.contains(&format!("{name} passed in ")), "{end}");
    assert!(
        !end.contains(&format!("{name} │")),
        "the check's status line was left behind:\n{end}"
    );
    no_garbage(&end);
}

#[test]
fn off_a_terminal_a_long_check_gets_a_heartbeat() {
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--heartbeat",
        "300ms",
        "--check",
        "sleep 1",
        "--",
        "true",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let beats = done
        .stderr
        .lines()
        .filter(|l| l.contains("warden: check `sleep 1` after iteration 1 still running after "))
        .count();
    assert!(beats >= 2, "{}", done.stderr);
}
