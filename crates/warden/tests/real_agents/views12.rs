//! Every view tells the same story for every CLI: the supervisor's
//! `status` snapshots agree with `run.json`, and `warden report` (text
//! and HTML) shows `run.json`'s numbers and names each command a tool ran.

use std::process::Command;

use warden_fake_model::Turn;

use crate::kit::Kit;
use crate::support::{WARDEN, ms};

fn views_agree(agent: &'static str) {
    let script = vec![
        Turn::Shell("sleep 1; echo views-tool-ran".into()),
        Turn::Text("all done".into()),
    ];
    let Some(kit) = Kit::new(agent, script) else {
        return;
    };
    let done = kit.run("run the command", &["--timeout", "120s"]);
    let why = format!("{agent}: exit {}\n{}", done.code, done.stderr);
    assert_eq!(done.code, 0, "{why}");
    let r = done.report();
    let status = done.events_of("status");
    let last = status
        .last()
        .unwrap_or_else(|| panic!("no status events\n{why}"));
    assert_eq!(last["last_activity_ms"], r["last_activity_ms"], "{why}");
    assert_eq!(last["activity_lines"], r["activity_lines"], "{why}");
    for k in ["input", "output", "cache_read", "cache_write", "reasoning"] {
        assert_eq!(
            last["tokens"][k], r["tokens"][k],
            "{agent}: the live views' tokens ({k}) are the report's\n{why}"
        );
    }
    // OpenCode prints a tool call only once it has finished: it is never
    // seen open.
    assert!(
        agent == "opencode"
            || status.iter().any(|s| s["tool"]["input"]
                .as_str()
                .is_some_and(|i| i.contains("views-tool-ran"))),
        "{agent}: a status names the open tool call's command\n{why}"
    );
    assert!(
        status
            .iter()
            .all(|s| ms(&s["longest_silence_ms"]) <= ms(&r["longest_silence_ms"])),
        "{why}"
    );

    let html = kit.case.path().join("timeline.html");
    let out = Command::new(WARDEN)
        .arg("report")
        .arg(&done.run_dir)
        .args(["--silence", "5s", "--html"])
        .arg(&html)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let longest = ms(&r["longest_silence_ms"]);
    let shown = if longest < 1000 {
        format!("{longest}ms")
    } else {
        format!("{:.1}s", longest as f64 / 1000.0)
    };
    assert!(
        text.contains(&format!("longest silence {shown}")),
        "{agent}: report shows run.json's longest silence ({longest} ms):\n{text}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.match_indices("<text class=\"tool\"")
            .any(|(i, _)| page[i..]
                .split("</text>")
                .next()
                .unwrap_or("")
                .contains("views-tool-ran")),
        "{agent}: the tool row names the command"
    );
}

#[test]
fn claude_views_agree_with_the_report() {
    views_agree("claude");
}

#[test]
fn codex_views_agree_with_the_report() {
    views_agree("codex");
}

#[test]
fn pi_views_agree_with_the_report() {
    views_agree("pi");
}

#[test]
fn opencode_views_agree_with_the_report() {
    views_agree("opencode");
}

#[test]
fn gemini_views_agree_with_the_report() {
    views_agree("gemini");
}
