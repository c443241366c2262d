//! `warden report DIR`: a run (or a session) explained after the fact, on
//! the terminal, and with `--html FILE` as one self-contained page with a
//! timeline.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

use crate::args::ReportArgs;
use crate::render::ms;
use crate::timeline::{self, Timeline};

/// Opens a file of a run directory for reading: never through a link,
/// never a FIFO or a device (which could block `warden report` forever).
pub(crate) fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use rustix::fs::{CWD, FileType, Mode, OFlags, fstat, openat};
    let fd = openat(
        CWD,
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| {
        if e == rustix::io::Errno::LOOP {
            std::io::Error::other("it is a symbolic link, which warden never writes")
        } else {
            e.into()
        }
    })?;
    if FileType::from_raw_mode(fstat(&fd)?.st_mode) != FileType::RegularFile {
        return Err(std::io::Error::other(
            "it is not a regular file, which warden never writes",
        ));
    }
    Ok(std::fs::File::from(fd))
}

fn read_text(path: &Path) -> std::io::Result<String> {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut open_regular(path)?, &mut text)?;
    Ok(text)
}

fn read_json(path: &Path) -> Result<Value, String> {
    let text = read_text(path).map_err(|e| format!("could not read {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{} is not valid JSON: {e}", path.display()))
}

fn read_events(dir: &Path) -> Vec<Value> {
    read_text(&dir.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The byte count and SHA-256 of a file, read in pieces.
fn digest_of(path: &Path) -> std::io::Result<(u64, String)> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let mut f = open_regular(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut bytes = 0u64;
    loop {
        let n = match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        bytes += n as u64;
    }
    let sha = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok((bytes, sha))
}

/// What `warden report` found about a run's logs.
#[derive(Debug, Default)]
struct LogCheck {
    /// Logs that no longer are what warden wrote: one sentence each.
    changed: Vec<String>,
    /// Why the logs could not be checked at all, if so.
    unchecked: Option<String>,
}

/// Checks each log against the byte count and SHA-256 that `run.json`
/// recorded when warden finished writing it.
fn check_logs(dir: &Path, report: &Value) -> LogCheck {
    let mut check = LogCheck::default();
    let Some(logs) = report["logs"].as_object() else {
        check.unchecked = Some(if report["verdict"].is_null() {
            "the run is unfinished, so its logs have no recorded digests to check".into()
        } else {
            "run.json records no digests of the logs, so they cannot be checked".into()
        });
        return check;
    };
    for (name, want) in logs {
        let (Some(bytes), Some(sha)) = (want["bytes"].as_u64(), want["sha256"].as_str()) else {
            check
                .changed
                .push(format!("{name}: run.json's record of it is malformed"));
            continue;
        };
        // Only a plain file name: run.json must not send the check
        // elsewhere.
        if name.contains('/') || name == ".." || name == "." {
            check
                .changed
                .push(format!("`{name}`: not a file of the run directory"));
            continue;
        }
        match digest_of(&dir.join(name)) {
            Ok((n, got)) if n == bytes && got == sha => {}
            Ok((n, got)) => check.changed.push(format!(
                "{name} no longer matches what warden wrote: warden wrote {bytes} bytes (sha256 {}), the file now has {n} bytes (sha256 {})",
                &sha[..sha.len().min(16)],
                &got[..16]
            )),
            Err(e) => check
                .changed
                .push(format!("{name} can no longer be read as warden wrote it: {e}")),
        }
    }
    check
}

pub(crate) fn report(args: &ReportArgs) -> u8 {
    let silence = match crate::settings::parse_duration(&args.silence) {
        Some(d) => d.as_millis() as u64,
        None => {
            eprintln!(
                "warden: error: invalid value `{}` for --silence: expected a duration such as `30s` or `2m`",
                args.silence
            );
            return 2;
        }
    };
    let dir = &args.dir;
    // A run directory, or a session directory with one per iteration.
    let mut session: Option<Value> = None;
    let runs: Vec<std::path::PathBuf> = if dir.join("run.json").exists() {
        vec![dir.clone()]
    } else if dir.join("session.json").exists() {
        match read_json(&dir.join("session.json")) {
            Ok(s) => {
                if !args.json {
                    print_session(&s);
                }
                let runs = s["runs"]
                    .as_array()
                    .map(|r| {
                        r.iter()
                            .filter_map(|r| r["run_dir"].as_str().map(Into::into))
                            .collect()
                    })
                    .unwrap_or_default();
                session = Some(s);
                runs
            }
            Err(e) => {
                eprintln!("warden: error: {e}");
                return 2;
            }
        }
    } else {
        eprintln!(
            "warden: error: {} has no run.json or session.json: name a run directory (.warden/runs/<id>) or a session directory",
            dir.display()
        );
        return 2;
    };
    // What `warden run` exited with for this run (or session); read
    // before anything is printed, so a report that is not one is exit 2.
    let verdict_exit = match verdict_exit(session.as_ref(), &runs) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("warden: error: {e}");
            return 2;
        }
    };
    // The report's own findings win: a changed log (1) or an unreadable
    // file (2) say more than a verdict read from such a record.
    let or_verdict = |code: u8| if code == 0 { verdict_exit } else { code };
    if args.events {
        return or_verdict(print_events(&runs));
    }
    if args.json {
        return or_verdict(print_json(session, &runs));
    }
    let mut sections = Vec::new();
    let mut tampered = false;
    for run_dir in &runs {
        let report = match read_json(&run_dir.join("run.json")) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("warden: error: {e}");
                return 2;
            }
        };
        let events = read_events(run_dir);
        let t = timeline::build(&report, &events, silence);
        let check = check_logs(run_dir, &report);
        print_run(&report, &t, silence, &check);
        for c in &check.changed {
            tampered = true;
            eprintln!(
                "warden: error: {}: {c}; it was changed after the run, so it is not the record of what happened",
                run_dir.display()
            );
        }
        sections.push((report, t, check));
    }
    if let Some(out) = &args.html {
        let page = html(session.as_ref(), &sections, silence);
        if let Err(e) = std::fs::write(out, page) {
            eprintln!("warden: error: could not write {}: {e}", out.display());
            return 2;
        }
        println!("timeline written to {}", out.display());
    }
    or_verdict(if tampered { LOGS_CHANGED_EXIT } else { 0 })
}

/// `warden report`'s exit code for a run (or session) with no verdict:
/// still going, or its warden was killed. `EX_TEMPFAIL`: asked again once
/// the run has ended, the report will have its verdict.
const UNFINISHED_EXIT: u8 = 75;

/// The exit code `warden run` gave (or gives, once it ends) for this run
/// or session: its verdict's code, 74 when output was lost, and
/// [`UNFINISHED_EXIT`] when there is no verdict yet.
fn verdict_exit(session: Option<&Value>, runs: &[std::path::PathBuf]) -> Result<u8, String> {
    if let Some(s) = session {
        let s: warden_run::session::SessionReport = serde_json::from_value(s.clone())
            .map_err(|e| format!("session.json is not a session report of this warden: {e}"))?;
        return Ok(if s.verdict.is_none() && s.output_lost.is_none() {
            UNFINISHED_EXIT
        } else {
            s.warden_exit_code()
        });
    }
    let Some(dir) = runs.first() else {
        return Ok(UNFINISHED_EXIT);
    };
    let path = dir.join("run.json");
    let r: warden_run::Report = serde_json::from_value(read_json(&path)?)
        .map_err(|e| format!("{} is not a run report of this warden: {e}", path.display()))?;
    Ok(if r.verdict.is_none() && r.output_lost.is_none() {
        UNFINISHED_EXIT
    } else {
        r.warden_exit_code()
    })
}

/// `warden report --events`: every run's events, one JSON object a line,
/// with each `lines` event turned back into the line events it stands for.
/// The logs are checked first, as for the report: lines read from a log
/// changed after the run are not the record of what happened.
fn print_events(runs: &[std::path::PathBuf]) -> u8 {
    use std::io::{BufRead, Write};
    let mut code = 0;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(128 * 1024, stdout.lock());
    for run_dir in runs {
        let report = match read_json(&run_dir.join("run.json")) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("warden: error: {e}");
                return 2;
            }
        };
        for c in check_logs(run_dir, &report).changed {
            code = LOGS_CHANGED_EXIT;
            eprintln!(
                "warden: error: {}: {c}; it was changed after the run, so it is not the record of what happened",
                run_dir.display()
            );
        }
        let path = run_dir.join("events.jsonl");
        let file = match open_regular(&path) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("warden: error: could not read {}: {e}", path.display());
                return 2;
            }
        };
        // Each line names its run, as `--json` printed it: a session's
        // runs print to one stdout. `{"run_id":…,` spliced before the
        // event's own fields is byte for byte what `--json` wrote.
        let run_id = report["run_id"].as_str().unwrap_or_default();
        let mut prefix = b"{\"run_id\":".to_vec();
        prefix.extend_from_slice(serde_json::to_string(run_id).unwrap_or_default().as_bytes());
        prefix.push(b',');
        let mut logs = crate::logged_lines::Logs::new(run_dir);
        let mut written = Ok(());
        for line in std::io::BufReader::new(file).split(b'\n') {
            let line = match line {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("warden: error: could not read {}: {e}", path.display());
                    return 2;
                }
            };
            let event: Option<Value> = serde_json::from_slice(&line).ok();
            // Only a line that is a non-empty object without a `run_id`
            // of its own takes the prefix; anything else goes as it is.
            let named = line.first() == Some(&b'{')
                && event
                    .as_ref()
                    .and_then(Value::as_object)
                    .is_some_and(|m| !m.is_empty() && !m.contains_key("run_id"));
            match event.filter(|e| e["kind"] == "lines") {
                Some(e) => {
                    let r = logs.expand(&e, |s| {
                        if written.is_ok() {
                            written = serde_json::to_writer(
                                &mut out,
                                &warden_events::event::FeedLine {
                                    run_id: Some(run_id),
                                    stamped: s,
                                },
                            )
                            .map_err(std::io::Error::from)
                            .and_then(|()| out.write_all(b"\n"));
                        }
                    });
                    if let Err(e) = r {
                        code = LOGS_CHANGED_EXIT;
                        eprintln!("warden: error: {}: {e}", run_dir.display());
                    }
                }
                None => {
                    if written.is_ok() {
                        written = if named {
                            out.write_all(&prefix)
                                .and_then(|()| out.write_all(&line[1..]))
                        } else {
                            out.write_all(&line)
                        }
                        .and_then(|()| out.write_all(b"\n"));
                    }
                }
            }
            if written.is_err() {
                // The reader went away (`| head`): nothing more to say.
                return code;
            }
        }
    }
    if out.flush().is_err() {
        return code;
    }
    code
}

/// `warden report --json`: the reports read back as warden's own types (so
/// a file that is not one is an error, not a partial document), with what
/// the check of each run's logs found.
fn print_json(session: Option<Value>, runs: &[std::path::PathBuf]) -> u8 {
    let session = match session
        .map(serde_json::from_value::<warden_run::session::SessionReport>)
        .transpose()
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("warden: error: session.json is not a session report of this warden: {e}");
            return 2;
        }
    };
    let mut code = 0;
    let mut out = Vec::new();
    for run_dir in runs {
        let value = match read_json(&run_dir.join("run.json")) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("warden: error: {e}");
                return 2;
            }
        };
        let check = check_logs(run_dir, &value);
        let report = match serde_json::from_value::<warden_run::Report>(value) {
            Ok(r) => r,
            Err(e) => {
                eprintln!(
                    "warden: error: {} is not a run report of this warden: {e}",
                    run_dir.join("run.json").display()
                );
                return 2;
            }
        };
        for c in &check.changed {
            code = LOGS_CHANGED_EXIT;
            eprintln!(
                "warden: error: {}: {c}; it was changed after the run, so it is not the record of what happened",
                run_dir.display()
            );
        }
        out.push(serde_json::json!({
            "run_dir": run_dir,
            "report": report,
            "logs": {
                "match": check.unchecked.is_none() && check.changed.is_empty(),
                "changed": check.changed,
                "unchecked": check.unchecked,
            },
        }));
    }
    let doc = serde_json::json!({
        "schema_version": 1,
        "session": session,
        "runs": out,
    });
    // One line, made safe for a CI log as every `--json` line is.
    match serde_json::to_vec(&doc) {
        Ok(mut line) => {
            line.push(b'\n');
            crate::render::console::raw(
                crate::render::console::Stream::Stdout,
                crate::render::console::Priority::Important,
                crate::render::github::json_line(line),
            );
        }
        Err(e) => {
            eprintln!("warden: error: could not write the report as JSON: {e}");
            return 70;
        }
    }
    code
}

/// `warden report`'s exit code when a log no longer matches its digest.
const LOGS_CHANGED_EXIT: u8 = 1;

fn print_session(s: &Value) {
    println!(
        "session {}: {} after {} of {} iteration(s), stopped by {}",
        s["session_id"].as_str().unwrap_or("?"),
        s["verdict"].as_str().unwrap_or("no verdict"),
        s["iterations_run"],
        s["iterations_requested"],
        s["stopped_because"]
            .as_str()
            .unwrap_or("?")
            .replace('_', " ")
    );
    println!(
        "  in {}; tokens {}; cost {}; {} commit(s)",
        ms(s["duration_ms"].as_u64().unwrap_or(0)),
        tokens_text(&s["tokens"]),
        cost_text(&s["cost_usd"]),
        s["commits"].as_array().map_or(0, Vec::len)
    );
    if let Some(wt) = s["worktree"].as_object() {
        println!(
            "  worktree {} on branch {}",
            wt["path"].as_str().unwrap_or("?"),
            wt["branch"].as_str().unwrap_or("?")
        );
    }
    println!();
}

fn print_run(r: &Value, t: &Timeline, silence: u64, check: &LogCheck) {
    let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
    if t.finished {
        println!(
            "run {}  {}  {} in {}: {}",
            s("run_id"),
            s("agent"),
            r["verdict"].as_str().unwrap_or("?"),
            ms(t.duration),
            s("reason")
        );
    } else {
        println!(
            "run {}  {}  UNFINISHED: no verdict; the run is still going, or its warden was killed before it could finish (its events go up to {})",
            s("run_id"),
            s("agent"),
            ms(t.duration),
        );
    }
    println!(
        "  started {}; first activity after {}; longest silence {}{}",
        s("started_at"),
        t.first_activity.map_or("never".into(), ms),
        ms(t.longest_silence),
        if t.finished { "" } else { " so far" }
    );
    if t.silences.is_empty() {
        println!("  no silence of {} or more", ms(silence));
    } else {
        for (a, b) in &t.silences {
            println!(
                "  quiet from {} to {} ({})",
                ms(*a),
                ms(*b),
                ms(b.saturating_sub(*a))
            );
        }
    }
    if !check.changed.is_empty() {
        println!("  LOGS CHANGED AFTER THE RUN:");
        for c in &check.changed {
            println!("    {c}");
        }
    } else if let Some(why) = &check.unchecked {
        println!("  logs not checked: {why}");
    } else {
        println!("  logs as warden wrote them (sizes and SHA-256 checked)");
    }
    if let Some(lost) = r["output_lost"].as_str() {
        println!("  OUTPUT LOST: {lost}");
    }
    if !t.tools.is_empty() {
        let mut tools = t.tools.clone();
        tools.sort_by_key(|x| std::cmp::Reverse(x.end.saturating_sub(x.start)));
        println!("  {} tool call(s); the longest:", tools.len());
        for x in tools.iter().take(5) {
            println!(
                "    {} {} at {}{}: {}",
                x.name,
                ms(x.end.saturating_sub(x.start)),
                ms(x.start),
                if !x.finished {
                    " (never finished)"
                } else if x.failed {
                    " (failed)"
                } else {
                    ""
                },
                x.input.chars().take(80).collect::<String>()
            );
        }
    }
    if r["agent"] != "exec" {
        println!(
            "  model {}; tokens {}; cost {}",
            r["model"]
                .as_str()
                .filter(|m| !m.is_empty())
                .unwrap_or("not reported"),
            tokens_text(&r["tokens"]),
            cost_text(&r["cost_usd"])
        );
    }
    for m in t.marks.iter().filter(|m| m.kind != "info") {
        println!("  {} at {}: {}", m.kind, ms(m.at), m.text);
    }
    if let Some(commits) = r["commits"].as_array().filter(|c| !c.is_empty()) {
        println!("  {} commit(s):", commits.len());
        for c in commits {
            println!(
                "    {} {}",
                c["sha"]
                    .as_str()
                    .unwrap_or("")
                    .chars()
                    .take(10)
                    .collect::<String>(),
                c["subject"].as_str().unwrap_or("")
            );
        }
    }
    println!();
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The page: a session summary (for a session directory), then one
/// section per run, each an inline SVG timeline as wide as the page.
fn html(session: Option<&Value>, runs: &[(Value, Timeline, LogCheck)], silence: u64) -> String {
    let mut out = String::from(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>warden report</title>\n<style>\
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}h2{margin:8px 0}.ok{color:#1a7f37}.bad{color:#cf222e}\
table{border-collapse:collapse;margin:8px 0}td{padding:2px 10px 2px 0;vertical-align:top}svg.timeline{display:block;width:100%;height:auto;border:1px solid #ddd;background:#fafafa}\
.legend span{display:inline-block;margin-right:14px}.sw{display:inline-block;width:10px;height:10px;margin-right:4px}code{font-size:12px}\
</style></head><body>\n<h1>warden report</h1>\n",
    );
    if let Some(s) = session {
        session_summary(&mut out, s, runs);
    }
    for (r, t, check) in runs {
        section(&mut out, r, t, silence, check);
    }
    out.push_str("</body></html>\n");
    out
}

/// `text`'s first line, cut to `max` characters with an ellipsis.
fn shorten(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.chars().count() <= max && !text.contains('\n') {
        return line.to_string();
    }
    let mut cut: String = line.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

fn tokens_text(t: &Value) -> String {
    let n = |k: &str| t[k].as_u64().unwrap_or(0);
    format!(
        "{} in / {} out / {} cache read / {} cache write ({} in all)",
        n("input"),
        n("output"),
        n("cache_read"),
        n("cache_write"),
        timeline::tokens_total(t)
    )
}

fn cost_text(c: &Value) -> String {
    c.as_f64()
        .map_or("not reported by the agent".into(), |c| format!("${c:.4}"))
}

/// Commits as HTML list items (escaped), or a sentence when there are none.
fn commits_html(commits: &[&Value]) -> String {
    if commits.is_empty() {
        return "none".into();
    }
    let mut html = format!("{}<ul style=\"margin:0;padding-left:18px\">", commits.len());
    for c in commits {
        let sha: String = c["sha"].as_str().unwrap_or("").chars().take(10).collect();
        let _ = write!(
            html,
            "<li><code>{}</code> {}</li>",
            esc(&sha),
            esc(c["subject"].as_str().unwrap_or(""))
        );
    }
    html.push_str("</ul>");
    html
}

fn row(out: &mut String, key: &str, value_html: &str) {
    let _ = write!(out, "<tr><td>{key}</td><td>{value_html}</td></tr>");
}

fn session_summary(out: &mut String, s: &Value, runs: &[(Value, Timeline, LogCheck)]) {
    let verdict = s["verdict"].as_str().unwrap_or("no verdict");
    let class = if verdict == "succeeded" { "ok" } else { "bad" };
    let _ = writeln!(
        out,
        "<section class=\"session\"><h2>session {} <span class=\"{class}\">{}</span></h2><table>",
        esc(s["session_id"].as_str().unwrap_or("?")),
        esc(verdict)
    );
    row(
        out,
        "iterations",
        &format!("{} of {}", s["iterations_run"], s["iterations_requested"]),
    );
    row(
        out,
        "stopped because",
        &esc(&s["stopped_because"]
            .as_str()
            .unwrap_or("?")
            .replace('_', " ")),
    );
    row(
        out,
        "duration",
        &esc(&ms(s["duration_ms"].as_u64().unwrap_or(0))),
    );
    let mut each = String::from("<ol style=\"margin:0;padding-left:18px\">");
    for (r, t, _) in runs {
        let verdict = r["verdict"]
            .as_str()
            .filter(|_| t.finished)
            .unwrap_or("unfinished");
        let _ = write!(
            each,
            "<li><span class=\"{}\">{}</span> in {}: {}</li>",
            if verdict == "succeeded" { "ok" } else { "bad" },
            esc(verdict),
            esc(&ms(t.duration)),
            esc(r["reason"].as_str().unwrap_or(""))
        );
    }
    each.push_str("</ol>");
    row(out, "each iteration", &each);
    let tool_calls: u64 = runs
        .iter()
        .map(|(r, _, _)| r["tool_calls"].as_u64().unwrap_or(0))
        .sum();
    row(out, "tool calls", &tool_calls.to_string());
    row(out, "tokens", &esc(&tokens_text(&s["tokens"])));
    row(out, "cost", &esc(&cost_text(&s["cost_usd"])));
    let commits: Vec<&Value> = s["commits"]
        .as_array()
        .map(|c| c.iter().collect())
        .unwrap_or_default();
    row(out, "commits", &commits_html(&commits));
    if let Some(wt) = s["worktree"].as_object() {
        row(
            out,
            "worktree",
            &esc(&format!(
                "{} on branch {}",
                wt.get("path").and_then(Value::as_str).unwrap_or("?"),
                wt.get("branch").and_then(Value::as_str).unwrap_or("?")
            )),
        );
    }
    out.push_str("</table></section>\n");
}

/// The drawing's own width; the page scales it to its width.
const VIEW_WIDTH: f64 = 1200.0;
/// The column of row labels (wide enough for a shortened command).
const LABEL_WIDTH: f64 = 240.0;
/// Characters of a tool call's label.
const TOOL_LABEL: usize = 38;

fn section(out: &mut String, r: &Value, t: &Timeline, silence: u64, check: &LogCheck) {
    let verdict = match r["verdict"].as_str() {
        Some(v) if t.finished => v,
        _ => "unfinished",
    };
    let class = if verdict == "succeeded" { "ok" } else { "bad" };
    let _ = writeln!(
        out,
        "<section class=\"run\"><h2>{} <span class=\"{class}\">{}</span></h2>",
        esc(r["run_id"].as_str().unwrap_or("run")),
        esc(verdict)
    );
    for c in &check.changed {
        let _ = writeln!(
            out,
            "<p class=\"bad\"><strong>log changed after the run:</strong> {}</p>",
            esc(c)
        );
    }
    if let Some(lost) = r["output_lost"].as_str() {
        let _ = writeln!(
            out,
            "<p class=\"bad\"><strong>output lost:</strong> {}</p>",
            esc(lost)
        );
    }
    out.push_str("<table>");
    let why = if t.finished {
        r["reason"].as_str().unwrap_or("").to_string()
    } else {
        "no verdict: still going, or its warden was killed before it could finish".to_string()
    };
    let model = r["model"]
        .as_str()
        .filter(|m| !m.is_empty())
        .unwrap_or("not reported");
    let rows = [
        ("agent", r["agent"].as_str().unwrap_or("").to_string()),
        ("model", model.to_string()),
        ("why", why),
        ("duration", ms(t.duration)),
        ("longest silence", ms(t.longest_silence)),
        ("tool calls", t.tools.len().to_string()),
        ("tokens", tokens_text(&r["tokens"])),
        ("cost", cost_text(&r["cost_usd"])),
    ];
    for (k, v) in rows {
        row(out, k, &esc(&v));
    }
    let commits: Vec<&Value> = r["commits"]
        .as_array()
        .map(|c| c.iter().collect())
        .unwrap_or_default();
    row(out, "commits", &commits_html(&commits));
    out.push_str("</table>\n");

    let width = VIEW_WIDTH;
    let left = LABEL_WIDTH;
    let span = t.duration.max(1) as f64;
    let x = |ms: u64| left + (ms.min(t.duration) as f64 / span) * (width - left - 16.0);
    let tool_rows = t.tools.len().min(30);
    let height = 150.0 + tool_rows as f64 * 16.0;
    let _ = writeln!(
        out,
        "<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"100%\" viewBox=\"0 0 {width} {height}\" role=\"img\" aria-label=\"timeline\">"
    );
    // Time axis.
    for i in 0..=10 {
        let at = (u128::from(t.duration) * i / 10) as u64;
        let _ = writeln!(
            out,
            "<line x1=\"{0:.1}\" y1=\"18\" x2=\"{0:.1}\" y2=\"{1}\" stroke=\"#eee\"/><text x=\"{0:.1}\" y=\"12\" font-size=\"10\" text-anchor=\"middle\">{2}</text>",
            x(at),
            height - 4.0,
            esc(&ms(at))
        );
    }
    // Silences: one band each, inset so that two in a row (split by one
    // line of activity) are two bands.
    let _ = writeln!(
        out,
        "<text x=\"4\" y=\"40\" font-size=\"11\">silence ≥ {}</text>",
        esc(&ms(silence))
    );
    for (a, b) in &t.silences {
        let (xa, xb) = (x(*a), x(*b));
        let inset = ((xb - xa) / 4.0).min(1.5);
        let _ = writeln!(
            out,
            "<rect class=\"silence\" x=\"{:.1}\" y=\"28\" width=\"{:.1}\" height=\"18\" rx=\"2\" fill=\"#f6c445\" stroke=\"#bf8700\" stroke-width=\"0.5\" opacity=\"0.8\"><title>quiet {} from {} to {}</title></rect>",
            xa + inset,
            (xb - xa - 2.0 * inset).max(1.0),
            esc(&ms(b.saturating_sub(*a))),
            esc(&ms(*a)),
            esc(&ms(*b))
        );
    }
    // Activity ticks.
    let _ = writeln!(
        out,
        "<text x=\"4\" y=\"64\" font-size=\"11\">activity</text>"
    );
    for &a in &t.activity {
        let _ = writeln!(
            out,
            "<line class=\"activity\" x1=\"{0:.1}\" y1=\"52\" x2=\"{0:.1}\" y2=\"68\" stroke=\"#0969da\" stroke-width=\"1\"/>",
            x(a)
        );
    }
    // Marks, the gravest drawn last (on top); then the end of the run.
    let _ = writeln!(out, "<text x=\"4\" y=\"88\" font-size=\"11\">events</text>");
    let mut marks: Vec<&timeline::Mark> = t.marks.iter().collect();
    let rank = |k: &str| match k {
        "error" => 2,
        "warning" => 1,
        _ => 0,
    };
    marks.sort_by_key(|m| (rank(&m.kind), m.at));
    for m in marks {
        let color = match m.kind.as_str() {
            "error" => "#cf222e",
            "warning" => "#bf8700",
            _ => "#1a7f37",
        };
        let _ = writeln!(
            out,
            "<circle class=\"mark {}\" cx=\"{:.1}\" cy=\"84\" r=\"5\" fill=\"{color}\"><title>{} at {}: {}</title></circle>",
            esc(&m.kind),
            x(m.at),
            esc(&m.kind),
            esc(&ms(m.at)),
            esc(&m.text)
        );
    }
    let end_color = match verdict {
        "succeeded" => "#1a7f37",
        "unfinished" => "#8c959f",
        _ => "#cf222e",
    };
    let _ = writeln!(
        out,
        "<circle class=\"end\" cx=\"{:.1}\" cy=\"84\" r=\"6\" fill=\"{end_color}\" stroke=\"#fff\" stroke-width=\"1.5\"><title>end at {}: {}</title></circle>",
        x(t.duration),
        esc(&ms(t.duration)),
        esc(verdict)
    );
    // Tokens over time: a step each time the count changed.
    let _ = writeln!(
        out,
        "<text x=\"4\" y=\"116\" font-size=\"11\">tokens</text>"
    );
    if let Some(max) = t.tokens.iter().map(|(_, n)| *n).max().filter(|m| *m > 0) {
        let y = |n: u64| 126.0 - (n as f64 / max as f64) * 24.0;
        let mut d = format!("M{:.1} {:.1}", x(0), y(0));
        for (at, n) in &t.tokens {
            let _ = write!(d, " H{:.1} V{:.1}", x(*at), y(*n));
        }
        let _ = write!(d, " H{:.1}", x(t.duration));
        let _ = writeln!(
            out,
            "<path class=\"tokens\" d=\"{d}\" fill=\"none\" stroke=\"#8250df\" stroke-width=\"2\"><title>{max} tokens in all</title></path>"
        );
    }
    // Tool calls as bars, labelled with what they ran.
    for (i, tool) in t.tools.iter().take(30).enumerate() {
        let y = 140.0 + i as f64 * 16.0;
        let color = if !tool.finished {
            "#cf222e"
        } else if tool.failed {
            "#fa4549"
        } else {
            "#2da44e"
        };
        let label = if tool.input.trim().is_empty() {
            tool.name.clone()
        } else {
            format!("{}: {}", tool.name, tool.input.trim())
        };
        let full = if tool.input.is_empty() {
            tool.name.clone()
        } else {
            format!("{}: {}", tool.name, tool.input)
        };
        let _ = writeln!(
            out,
            "<text class=\"tool\" x=\"4\" y=\"{:.1}\" font-size=\"10\" font-family=\"monospace\"><title>{}</title>{}</text><rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"11\" fill=\"{color}\"><title>{} at {}: {}</title></rect>",
            y + 9.0,
            esc(&full),
            esc(&shorten(&label, TOOL_LABEL)),
            x(tool.start),
            y,
            (x(tool.end) - x(tool.start)).max(2.0),
            esc(&ms(tool.end.saturating_sub(tool.start))),
            esc(&ms(tool.start)),
            esc(&full)
        );
    }
    out.push_str("</svg>\n<p class=\"legend\"><span><i class=\"sw\" style=\"background:#f6c445\"></i>silence</span><span><i class=\"sw\" style=\"background:#0969da\"></i>activity</span><span><i class=\"sw\" style=\"background:#2da44e\"></i>tool call</span><span><i class=\"sw\" style=\"background:#cf222e\"></i>error / unfinished</span><span><i class=\"sw\" style=\"background:#8250df\"></i>tokens</span></p></section>\n");
}
