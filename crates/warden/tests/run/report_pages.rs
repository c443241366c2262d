//! `warden report` on every kind of directory, made by the real binary:
//! a run (an orphan left by `setsid sleep`, a stall under a short
//! `--stall-timeout`, a budget warning), a session (`--iterations`, and
//! `--retries` with its attempts), and a batch of exec runs. The text
//! and `--json` say it all; the HTML pages are rendered in headless
//! Chromium and the screenshot is checked for each mark's own colour,
//! inside a drawing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::{Case, WARDEN, write_script};

/// The colours `report_html` draws each mark with (kept in step with it).
const SILENCE: [u8; 3] = [0xf6, 0xc4, 0x45];
const STALL_WARNING: [u8; 3] = [0xe1, 0x6f, 0x24];
const ORPHAN: [u8; 3] = [0x8a, 0x46, 0x00];
const BUDGET_WARNING: [u8; 3] = [0xbf, 0x39, 0x89];
/// The drawings' background.
const BACKGROUND: [u8; 3] = [0xfa, 0xfa, 0xfa];

fn report(args: &[&str], dir: &Path) -> Output {
    Command::new(WARDEN)
        .arg("report")
        .arg(dir)
        .args(args)
        .output()
        .expect("run warden report")
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Writes the page of `dir` to `html` and returns it, checking that it
/// is self-contained and has a legend line for every colour it draws.
fn page(dir: &Path, html: &Path, code: i32) -> String {
    let out = report(&["--html", html.to_str().unwrap()], dir);
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}\n{}",
        text(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(html).expect("the page");
    self_contained(&page);
    page
}

fn self_contained(page: &str) {
    assert!(!page.contains("<script"), "no script");
    for external in ["http://", "https://", "<link ", "src="] {
        let hits = page
            .match_indices(external)
            .filter(|(i, _)| !page[..*i].ends_with("xmlns=\""))
            .count();
        assert_eq!(hits, 0, "the page loads something from outside: {external}");
    }
    // Every colour a drawing fills a mark with has its legend swatch.
    for fill in page.split("fill=\"#").skip(1) {
        let color = &fill[..6];
        assert!(
            page.contains(&format!("background:#{color}")),
            "#{color} is drawn with no legend"
        );
    }
}

fn chromium() -> bool {
    let found = Command::new("sh")
        .args(["-c", "command -v chromium"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        let why = "chromium is not installed: the HTML pages are not rendered";
        if std::env::var_os("CI").is_some_and(|v| v == "true") {
            panic!("{why} (.ci/run installs it)");
        }
        eprintln!("SKIPPED: {why}");
    }
    found
}

/// A screenshot of `html` by headless Chromium, decoded: width, height
/// and RGB pixels.
struct Shot {
    width: usize,
    height: usize,
    rgb: Vec<[u8; 3]>,
    path: PathBuf,
}

fn screenshot(case: &Case, html: &Path) -> Shot {
    let png = html.with_extension("png");
    let _ = std::fs::remove_file(&png);
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--force-color-profile=srgb",
            "--hide-scrollbars",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1200,2000",
        ])
        .arg(format!(
            "--user-data-dir={}",
            case.path().join("chromium-profile").display()
        ))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", html.display()))
        .output()
        .expect("run chromium");
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&png).unwrap_or_else(|e| {
            panic!(
                "no screenshot ({e}); chromium said:\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        }),
    ));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("a PNG of a sane size")];
    let info = reader.next_frame(&mut buf).expect("a PNG frame");
    let channels = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("unexpected PNG colour type {other:?}"),
    };
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    let rgb = buf[..info.buffer_size()]
        .chunks(channels)
        .map(|p| [p[0], p[1], p[2]])
        .collect();
    Shot {
        width: info.width as usize,
        height: info.height as usize,
        rgb,
        path: png,
    }
}

impl Shot {
    fn at(&self, x: usize, y: usize) -> [u8; 3] {
        self.rgb[y * self.width + x]
    }

    /// Pixels of `color` inside a drawing: with the drawings' background
    /// within a few pixels on the same row or column (a legend's swatch
    /// of the same colour stands on the page's white).
    fn drawn(&self, color: [u8; 3]) -> usize {
        const NEAR: usize = 10;
        let mut n = 0;
        for y in 0..self.height {
            for x in 0..self.width {
                if self.at(x, y) != color {
                    continue;
                }
                let near = (x.saturating_sub(NEAR)..(x + NEAR).min(self.width))
                    .any(|x2| self.at(x2, y) == BACKGROUND)
                    || (y.saturating_sub(NEAR)..(y + NEAR).min(self.height))
                        .any(|y2| self.at(x, y2) == BACKGROUND);
                n += usize::from(near);
            }
        }
        n
    }

    fn assert_drawn(&self, color: [u8; 3], what: &str) {
        assert!(
            self.drawn(color) > 0,
            "no {what} (#{:02x}{:02x}{:02x}) drawn in {}",
            color[0],
            color[1],
            color[2],
            self.path.display()
        );
    }

    fn assert_not_drawn(&self, color: [u8; 3], what: &str) {
        assert_eq!(
            self.drawn(color),
            0,
            "{what} drawn in {}, where there is none",
            self.path.display()
        );
    }
}

/// A run whose command leaves `setsid sleep 300` behind.
fn orphan_run(case: &Case) {
    let done = case.run(&[
        "run",
        "exec",
        "--",
        "sh",
        "-c",
        "echo hi; setsid sleep 300 & echo left",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(done.report()["orphans_killed"], 1, "{}", done.stderr);
}

/// A run that prints once and then says nothing: stalled after 1 s (one
/// process, so that ending it leaves no orphan to draw).
fn stalled_run(case: &Case) {
    let done = case.run(&[
        "run",
        "exec",
        "--stall-timeout",
        "1s",
        "--kill-grace",
        "200ms",
        "--",
        "sh",
        "-c",
        "echo hi; exec sleep 8",
    ]);
    assert_eq!(done.code, 3, "stalled: {}", done.stderr);
}

#[test]
fn a_run_report_says_which_orphans_were_killed_and_draws_them() {
    let case = Case::new();
    orphan_run(&case);
    case.assert_nothing_left();
    let out = report(&[], &case.run_dir());
    assert_eq!(out.status.code(), Some(0));
    let t = text(&out);
    assert!(
        // Caught as the shell's fork, as `setsid` or as `sleep` (before
        // or after each exec): each names the sleep.
        t.contains("1 orphan killed: pid ") && t.contains("sleep 300"),
        "{t}"
    );
    let json: Value = serde_json::from_slice(&report(&["--json"], &case.run_dir()).stdout)
        .expect("--json is JSON");
    assert_eq!(json["runs"][0]["report"]["orphans_killed"], 1);

    let html = case.path().join("orphan.html");
    let p = page(&case.run_dir(), &html, 0);
    assert!(p.contains("1 orphan killed") && p.contains("orphan killed</span>"));
    if chromium() {
        let shot = screenshot(&case, &html);
        shot.assert_drawn(ORPHAN, "orphan mark");
        shot.assert_not_drawn(STALL_WARNING, "stall warning");
    }
}

#[test]
fn the_silence_band_follows_the_runs_own_stall_timeout() {
    let case = Case::new();
    stalled_run(&case);
    let out = report(&[], &case.run_dir());
    assert_eq!(out.status.code(), Some(3), "the run's verdict's code");
    let t = text(&out);
    // The silence of about 1 s behind the stall is listed: the threshold
    // is the run's stall timeout, not 30 s.
    assert!(
        t.contains("stall timeout 1.0s") && t.contains("quiet from"),
        "{t}"
    );
    assert!(
        t.contains("warning at") && t.contains("no activity for"),
        "{t}"
    );
    // --silence still overrides it.
    let t = text(&report(&["--silence", "1m"], &case.run_dir()));
    assert!(t.contains("no silence of 1m00s or more"), "{t}");

    let html = case.path().join("stall.html");
    let p = page(&case.run_dir(), &html, 3);
    assert!(
        p.contains("silence of 1.0s or more (the run&#39;s stall timeout)")
            || p.contains("silence of 1.0s or more (the run's stall timeout)"),
        "the legend says where the threshold came from"
    );
    if chromium() {
        let shot = screenshot(&case, &html);
        shot.assert_drawn(SILENCE, "silence band");
        shot.assert_drawn(STALL_WARNING, "stall warning mark");
        shot.assert_not_drawn(ORPHAN, "orphan mark");
    }
}

/// A stand-in pi whose one model call costs $0.50.
fn half_dollar_pi(case: &Case) -> String {
    let bin = case.path().join("fake-pi");
    let lines = [
        r#"{"type":"agent_start"}"#,
        r#"{"type":"turn_start"}"#,
        r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"done"}],"stopReason":"stop","usage":{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"cost":{"total":0.5}}}}"#,
        r#"{"type":"agent_end","messages":[]}"#,
    ];
    let body: String = lines.iter().map(|l| format!("echo '{l}'\n")).collect();
    write_script(&bin, &format!("#!/bin/sh\ncat > /dev/null\n{body}"));
    bin.to_string_lossy().into_owned()
}

#[test]
fn a_budget_warning_is_in_the_report_and_on_the_page() {
    let case = Case::new();
    let bin = half_dollar_pi(&case);
    let done = case.run(&[
        "run",
        "pi",
        "do it",
        "--agent-bin",
        &bin,
        "--max-cost",
        "0.6",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let out = report(&[], &case.run_dir());
    let t = text(&out);
    assert!(
        t.contains("run cost budget $0.60: $0.50 reached")
            && t.contains("83% of the run cost budget $0.60 used: $0.50 spent"),
        "{t}"
    );
    let html = case.path().join("budget.html");
    let p = page(&case.run_dir(), &html, 0);
    assert!(p.contains("budget warning") && p.contains("83% of the run cost budget"));
    if chromium() {
        screenshot(&case, &html).assert_drawn(BUDGET_WARNING, "budget warning mark");
    }
}

#[test]
fn a_session_report_lists_its_iterations() {
    let case = Case::new();
    let done = case.run(&["run", "exec", "--iterations", "2", "--", "echo", "hi"]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let t = text(&report(&[], &case.run_dir()));
    assert!(
        t.contains("after 2 of 2 iteration(s)")
            && t.contains("iteration 1: succeeded")
            && t.contains("iteration 2: succeeded"),
        "{t}"
    );
    let html = case.path().join("session.html");
    let p = page(&case.run_dir(), &html, 0);
    assert!(
        p.contains("<th>iteration</th>") && p.matches("<section class=\"run\">").count() == 2,
        "a row and a section per iteration"
    );
    assert!(p.contains("budgets</td><td>none"), "no budget, said so");
}

#[test]
fn a_retried_session_says_each_attempt_and_why() {
    let case = Case::new();
    let count = case.path().join("count");
    let script = format!(
        "n=$(cat '{c}' 2>/dev/null || echo 0); echo $((n+1)) > '{c}'; \
         if [ $n -lt 1 ]; then echo started; exec sleep 30; fi; echo done",
        c = count.display()
    );
    let done = case.run(&[
        "run",
        "exec",
        "--retries",
        "2",
        "--retry-on",
        "stalled",
        "--retry-backoff",
        "1ms",
        "--stall-timeout",
        "500ms",
        "--kill-grace",
        "200ms",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let t = text(&report(&[], &case.run_dir()));
    for needle in [
        "iteration 1, attempt 1 of 3; retried because it ended by stalled",
        "iteration 1, attempt 2 of 3, not resumed (started afresh): retried after attempt 1 ended by stalled",
        "1 run(s) retried",
    ] {
        assert!(t.contains(needle), "`{needle}` in:\n{t}");
    }
    let html = case.path().join("retried.html");
    let p = page(&case.run_dir(), &html, 0);
    assert!(
        p.contains(
            "attempt 2 of 3, not resumed (started afresh): retried after attempt 1 ended by stalled"
        ) && p.contains("1 run(s) retried by warden"),
        "the session page says the attempts"
    );
    if chromium() {
        let shot = screenshot(&case, &html);
        shot.assert_drawn(SILENCE, "silence band of the stalled attempt");
        shot.assert_drawn(STALL_WARNING, "stall warning of the stalled attempt");
    }
}

#[test]
fn a_batch_report_has_a_row_per_entry_each_linked_to_its_page() {
    let case = Case::new();
    let toml = "[defaults]\nagent = \"exec\"\nkill_grace = \"200ms\"\n\n\
        [[run]]\nname = \"ok\"\ncommand = [\"sh\", \"-c\", \"echo hi\"]\n\
        [[run]]\nname = \"left behind\"\ncommand = [\"sh\", \"-c\", \"echo hi; setsid sleep 300 & echo left\"]\n\
        [[run]]\nname = \"quiet\"\nstall_timeout = \"1s\"\ncommand = [\"sh\", \"-c\", \"echo hi; sleep 8\"]\n";
    let file = crate::batch::write(&case, toml);
    let dir = case.path().join("batch");
    let done = case.run(&["batch", &file, "--dir", dir.to_str().unwrap()]);
    assert_eq!(done.code, 1, "one entry stalled: {}", done.stderr);
    case.assert_nothing_left();

    let out = report(&[], &dir);
    assert_eq!(out.status.code(), Some(1), "the batch's own exit code");
    let t = text(&out);
    assert!(t.contains("3 entries from"), "{t}");
    for needle in [
        "ok               succeeded",
        "left behind      succeeded",
        "quiet            stalled",
        "orphans killed 1",
        "why: no activity for 1s (stall timeout)",
        "entry left behind:",
        "1 orphan killed: pid ",
    ] {
        assert!(t.contains(needle), "`{needle}` in:\n{t}");
    }
    let json: Value =
        serde_json::from_slice(&report(&["--json"], &dir).stdout).expect("--json is JSON");
    assert_eq!(json["schema_version"], 1);
    assert_eq!(json["batch"]["runs"].as_array().unwrap().len(), 3);
    assert_eq!(json["entries"][1]["name"], "left behind");
    assert_eq!(json["entries"][1]["runs"][0]["report"]["orphans_killed"], 1);
    assert_eq!(
        json["entries"][2]["runs"][0]["report"]["verdict"],
        "stalled"
    );

    // A directory: index.html, each entry's page beside it.
    let pages = case.path().join("pages");
    std::fs::create_dir(&pages).unwrap();
    let index = pages.join("index.html");
    let out = report(&["--html", pages.to_str().unwrap()], &dir);
    assert_eq!(out.status.code(), Some(1));
    let p = std::fs::read_to_string(&index).expect("index.html");
    self_contained(&p);
    for (n, name) in [(1, "ok"), (2, "left_behind"), (3, "quiet")] {
        let href = format!("index-{n}-{name}.html");
        assert!(
            p.contains(&format!("<a href=\"{href}\">")),
            "a relative link to {href}"
        );
        let entry = std::fs::read_to_string(pages.join(&href)).expect("the entry's page");
        self_contained(&entry);
        assert!(entry.contains("<a href=\"index.html\">"), "a link back");
        assert!(entry.contains("<section class=\"run\">"));
    }
    assert_eq!(
        p.matches("<svg class=\"strip\"").count(),
        3,
        "a strip a row"
    );
    // A file: the entries' pages beside it, named after it.
    let file_page = case.path().join("all.html");
    page(&dir, &file_page, 1);
    assert!(case.path().join("all-3-quiet.html").exists());

    if chromium() {
        let shot = screenshot(&case, &index);
        shot.assert_drawn(SILENCE, "silence band in the stalled entry's strip");
        shot.assert_drawn(STALL_WARNING, "stall warning in the stalled entry's strip");
        shot.assert_drawn(ORPHAN, "orphan mark in the orphan's strip");
        let entry = pages.join("index-2-left_behind.html");
        screenshot(&case, &entry).assert_drawn(ORPHAN, "orphan mark on the entry's page");
    }
}

#[test]
fn a_directory_of_none_of_the_three_is_refused() {
    let case = Case::new();
    let out = report(&[], case.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no run.json, session.json or batch.json"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
