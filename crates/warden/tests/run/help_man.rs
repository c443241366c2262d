//! `--help` and the man pages read like a manual: options under headings
//! with their variables and defaults, examples at the end, and the man
//! pages' EXIT STATUS, ENVIRONMENT, FILES and EXAMPLES, rendered by the
//! system's `man` where there is one.

use std::process::Command;

use crate::support::{Case, WARDEN};

#[test]
fn run_help_groups_the_options_with_their_variables_and_ends_with_examples() {
    let case = Case::new();
    let done = case.run(&["run", "--help"]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let help = &done.stdout;
    for heading in [
        "Agent:",
        "Clocks:",
        "Sandbox:",
        "Budgets and resource limits:",
        "Retries:",
        "Output:",
        "CI:",
        "Telemetry:",
        "Run directories:",
    ] {
        assert!(
            help.lines().any(|l| l == heading),
            "no heading {heading}:\n{help}"
        );
    }
    let stall = help
        .split("--stall-timeout <DURATION>")
        .nth(1)
        .expect("--stall-timeout is listed");
    let stall: String = stall
        .split("\n      --")
        .next()
        .unwrap()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        stall.contains("[default: 15m; 0 disables] [env: WARDEN_STALL_TIMEOUT]"),
        "{stall}"
    );
    let examples = help.split("Examples:").nth(1).expect("examples at the end");
    assert!(examples.contains("warden run exec --"), "{examples}");
}

#[test]
fn each_man_page_has_exit_status_environment_files_and_examples() {
    let case = Case::new();
    let dir = case.path().join("man");
    let done = case.run(&["man", "--dir", dir.to_str().unwrap()]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let mut pages: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    pages.sort();
    let names: Vec<String> = pages
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for want in [
        "warden.1",
        "warden-run.1",
        "warden-batch.1",
        "warden-report.1",
    ] {
        assert!(names.iter().any(|n| n == want), "{names:?}");
    }
    let man = Command::new("man").arg("--version").output().is_ok();
    for page in &pages {
        let roff = std::fs::read_to_string(page).unwrap();
        for section in [".SH \"EXIT STATUS\"", ".SH ENVIRONMENT", ".SH FILES"] {
            assert!(roff.contains(section), "{}: no {section}", page.display());
        }
        if !man {
            continue;
        }
        // The page as a reader sees it, and without a warning from groff.
        let out = Command::new("man")
            .args(["-l", page.to_str().unwrap()])
            .env("MANWIDTH", "100")
            .output()
            .unwrap();
        // groff itself, with every warning on (a character it cannot
        // read, a bad request).
        let groff = Command::new("groff")
            .args(["-man", "-ww", "-z", page.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            groff.stderr.is_empty(),
            "{}: {}",
            page.display(),
            String::from_utf8_lossy(&groff.stderr)
        );
        let text = plain(&String::from_utf8_lossy(&out.stdout));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.stderr.is_empty(),
            "{}: {}",
            page.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains("EXIT STATUS") && text.contains("FILES"),
            "{text}"
        );
    }
    let run = std::fs::read_to_string(dir.join("warden-run.1")).unwrap();
    assert!(run.contains(".SH EXAMPLES"));
    assert!(run.is_ascii(), "every other character as a roff escape");
    // Each command's page says its own exit codes.
    let exit_status = |page: &str| {
        let text = std::fs::read_to_string(dir.join(page)).unwrap();
        let from = text
            .split(".SH \"EXIT STATUS\"")
            .nth(1)
            .unwrap()
            .to_string();
        from.split(".SH ").next().unwrap().to_string()
    };
    let config = exit_status("warden-config.1");
    assert!(!config.contains("budget_exceeded"), "{config}");
    let batch = exit_status("warden-batch.1");
    assert!(
        batch.contains("budget_exceeded") && !batch.contains("merge_conflict"),
        "{batch}"
    );
    assert!(run.contains("WARDEN_STALL_TIMEOUT"));
    assert!(run.contains("budget_exceeded"));
    // The man command of the binary prints the same page.
    let one = Command::new(WARDEN).args(["man", "run"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&one.stdout), run);
}

/// Text without the overstrikes `man` makes bold and underlined text of
/// (`N\x08N`, `_\x08x`).
fn plain(text: &str) -> String {
    let mut out: Vec<char> = Vec::new();
    for c in text.chars() {
        if c == '\u{8}' {
            out.pop();
        } else {
            out.push(c);
        }
    }
    out.into_iter().collect()
}
