//! `warden report DIR`: a run (or a session) explained after the fact, on
//! the terminal, and with `--html FILE` as one self-contained page with a
//! timeline.
//!
//! Every file is read as warden's own type (`run.json` as a [`Report`],
//! `session.json` as a [`SessionReport`], each `events.jsonl` line as a
//! [`Stamped`](warden_run::Stamped) event), so a field renamed or retyped is an error that names
//! the file, never a view that silently shows nothing.

use std::fmt::Write as _;
use std::path::PathBuf;

use warden_events::Tokens;
use warden_run::SessionReport;
use warden_run::git::Commit;
use warden_run::readback::{self, EventLine, LogCheck};
use warden_run::timeline::{Level, Mark};
use warden_run::{Report, Verdict};

use crate::args::ReportArgs;
use crate::render::github::neutralize;
use crate::render::lines::{one_line, step_finished_line, steps_in_order};
use crate::render::ms;
use crate::timeline::{self, Timeline};

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
    // A run directory, or a session directory with one per iteration.
    // Every report is read before anything is printed, so a directory
    // that is not a run is exit 2 with nothing else said.
    let (session, runs) = match readback::read_record(&args.dir) {
        Ok(r) => (r.session, r.runs),
        Err(e) => {
            eprintln!("warden: error: {e}");
            return 2;
        }
    };
    // What `warden run` exited with for this run (or session).
    let verdict_exit = verdict_exit(session.as_ref(), &runs);
    // The report's own findings win: a changed log (1) or an unreadable
    // file (2) say more than a verdict read from such a record.
    let or_verdict = |code: u8| if code == 0 { verdict_exit } else { code };
    if args.events {
        return or_verdict(print_events(&runs));
    }
    if args.json {
        return or_verdict(print_json(session.as_ref(), &runs));
    }
    if let Some(s) = &session {
        print_session(s);
    }
    let mut sections = Vec::new();
    let mut tampered = false;
    for (run_dir, report) in runs {
        let events = readback::read_events(&run_dir);
        let t = timeline::build(&report, &events, silence);
        let check = readback::check_logs(&run_dir, &report);
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
fn verdict_exit(session: Option<&SessionReport>, runs: &[(PathBuf, Report)]) -> u8 {
    if let Some(s) = session {
        return if s.verdict.is_none() && s.output_lost.is_none() {
            UNFINISHED_EXIT
        } else {
            s.warden_exit_code()
        };
    }
    match runs.first() {
        Some((_, r)) if r.verdict.is_some() || r.output_lost.is_some() => r.warden_exit_code(),
        _ => UNFINISHED_EXIT,
    }
}

/// `warden report --events`: every run's events, one JSON object a line,
/// with each `lines` event turned back into the line events it stands for.
/// The logs are checked first, as for the report: lines read from a log
/// changed after the run are not the record of what happened.
fn print_events(runs: &[(PathBuf, Report)]) -> u8 {
    use std::io::Write;
    let mut code = 0;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(128 * 1024, stdout.lock());
    for (run_dir, report) in runs {
        for c in readback::check_logs(run_dir, report).changed {
            code = LOGS_CHANGED_EXIT;
            eprintln!(
                "warden: error: {}: {c}; it was changed after the run, so it is not the record of what happened",
                run_dir.display()
            );
        }
        // Each line names its run, as `--json` printed it: a session's
        // runs print to one stdout. `{"run_id":…,` spliced before the
        // event's own fields is byte for byte what `--json` wrote.
        let run_id = report.run_id.as_str();
        let mut prefix = b"{\"run_id\":".to_vec();
        prefix.extend_from_slice(serde_json::to_string(run_id).unwrap_or_default().as_bytes());
        prefix.push(b',');
        let mut written = Ok(());
        let read = readback::read_event_lines(run_dir, |line| {
            written = match line {
                EventLine::Expanded(s) => serde_json::to_writer(
                    &mut out,
                    &warden_events::event::FeedLine {
                        run_id: Some(run_id),
                        stamped: s,
                    },
                )
                .map_err(std::io::Error::from)
                .and_then(|()| out.write_all(b"\n")),
                EventLine::Copied { line, named } => if named {
                    out.write_all(&prefix)
                        .and_then(|()| out.write_all(&line[1..]))
                } else {
                    out.write_all(line)
                }
                .and_then(|()| out.write_all(b"\n")),
                EventLine::Broken(e) => {
                    code = LOGS_CHANGED_EXIT;
                    eprintln!("warden: error: {}: {e}", run_dir.display());
                    Ok(())
                }
            };
            written.is_ok()
        });
        if let Err(e) = read {
            eprintln!("warden: error: {e}");
            return 2;
        }
        if written.is_err() {
            // The reader went away (`| head`): nothing more to say.
            return code;
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
fn print_json(session: Option<&SessionReport>, runs: &[(PathBuf, Report)]) -> u8 {
    let mut code = 0;
    let mut out = Vec::new();
    for (run_dir, report) in runs {
        let check = readback::check_logs(run_dir, report);
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
                "match": check.matches(),
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

/// A verdict as the report names it, or `none` when there is none.
fn verdict_or(v: Option<Verdict>, none: &'static str) -> &'static str {
    v.map_or(none, Verdict::as_str)
}

fn print_session(s: &SessionReport) {
    println!(
        "session {}: {} after {} of {} iteration(s), stopped by {}",
        s.session_id,
        verdict_or(s.verdict, "no verdict"),
        s.iterations_run,
        s.iterations_requested,
        s.stopped_because.as_str().replace('_', " ")
    );
    println!(
        "  in {}; tokens {}; cost {}; {} commit(s)",
        ms(s.duration_ms),
        tokens_text(&s.tokens),
        cost_text(s.cost_usd),
        warden_run::git::count_shown(s.commits.as_deref())
    );
    if let Some(wt) = &s.worktree {
        println!("  worktree {} on branch {}", wt.path.display(), wt.branch);
    }
    let steps = steps_in_order(s);
    if !steps.is_empty() {
        println!("  checks and hooks:");
        for step in steps {
            println!("    {}", neutralize(&step_finished_line(step)));
        }
    }
    for line in merge_lines(s) {
        println!("  {}", neutralize(&line));
    }
    println!();
}

/// What the session's `--merge` did: merged, or the conflict.
fn merge_lines(s: &SessionReport) -> Vec<String> {
    let mut out = Vec::new();
    if let (Some(into), Some(commit)) = (&s.merged_into, &s.merge_commit) {
        out.push(format!("merged into {into} at {commit}"));
    }
    if !s.merge_conflicts.is_empty() {
        out.push(format!(
            "merge conflict in {}: both branches are as they were",
            s.merge_conflicts.join(", ")
        ));
    }
    out
}

/// The model a report names, or what to say when it names none.
fn model_text(r: &Report) -> &str {
    r.reported
        .model
        .as_deref()
        .filter(|m| !m.is_empty())
        .unwrap_or("not reported")
}

fn print_run(r: &Report, t: &Timeline, silence: u64, check: &LogCheck) {
    if t.finished {
        println!(
            "run {}  {}  {} in {}: {}",
            r.run_id,
            r.agent,
            verdict_or(r.verdict, "?"),
            ms(t.duration),
            one_line(&r.reason)
        );
    } else {
        println!(
            "run {}  {}  UNFINISHED: no verdict; the run is still going, or its warden was killed before it could finish (its events go up to {})",
            r.run_id,
            r.agent,
            ms(t.duration),
        );
    }
    println!(
        "  started {}; first activity after {}; longest silence {}{}",
        r.started_at,
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
    if let Some(lost) = &r.output_lost {
        println!("  OUTPUT LOST: {lost}");
    }
    if !t.tools.is_empty() {
        let mut tools = t.tools.clone();
        tools.sort_by_key(|x| std::cmp::Reverse(x.end_ms.saturating_sub(x.start_ms)));
        println!("  {} tool call(s); the longest:", tools.len());
        for x in tools.iter().take(5) {
            println!(
                "    {} {} at {}{}: {}",
                x.name,
                ms(x.end_ms.saturating_sub(x.start_ms)),
                ms(x.start_ms),
                if !x.finished {
                    " (never finished)"
                } else if x.failed {
                    " (failed)"
                } else {
                    ""
                },
                x.input
                    .as_deref()
                    .unwrap_or_default()
                    .chars()
                    .take(80)
                    .collect::<String>()
            );
        }
    }
    if r.agent != "exec" {
        println!(
            "  model {}; tokens {}; cost {}",
            model_text(r),
            tokens_text(&r.reported.tokens),
            cost_text(r.reported.cost_usd)
        );
    }
    for m in t.marks.iter().filter(|m| m.level != Level::Info) {
        println!(
            "  {} at {}: {}",
            m.level.as_str(),
            ms(m.at_ms),
            one_line(&m.text)
        );
    }
    if r.commits.is_none() {
        println!("  commits unknown: git could not say (see the error)");
    }
    if let Some(commits) = r.commits.as_ref().filter(|c| !c.is_empty()) {
        println!("  {} commit(s):", commits.len());
        for c in commits {
            println!("    {} {}", short_sha(c), c.subject);
        }
    }
    println!();
}

/// A commit's sha cut to the 10 characters a view shows.
fn short_sha(c: &Commit) -> String {
    c.sha.chars().take(10).collect()
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The page: a session summary (for a session directory), then one
/// section per run, each an inline SVG timeline as wide as the page.
fn html(
    session: Option<&SessionReport>,
    runs: &[(Report, Timeline, LogCheck)],
    silence: u64,
) -> String {
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

/// The counts, `?` where one is not known (the CLI does not report it,
/// or the run ended before it reported any).
fn tokens_text(t: &Tokens) -> String {
    if t.total().is_none() {
        return "not reported".into();
    }
    format!(
        "{} in / {} out / {} cache read / {} cache write ({} in all)",
        Tokens::shown(t.input),
        Tokens::shown(t.output),
        Tokens::shown(t.cache_read),
        Tokens::shown(t.cache_write),
        Tokens::shown(t.total())
    )
}

fn cost_text(c: Option<f64>) -> String {
    c.map_or("not reported by the agent".into(), |c| format!("${c:.4}"))
}

/// Commits as HTML list items (escaped), or a sentence when there are none.
fn commits_html(commits: Option<&[Commit]>) -> String {
    let Some(commits) = commits else {
        return "unknown: git could not say (see the error)".into();
    };
    if commits.is_empty() {
        return "none".into();
    }
    let mut html = format!("{}<ul style=\"margin:0;padding-left:18px\">", commits.len());
    for c in commits {
        let _ = write!(
            html,
            "<li><code>{}</code> {}</li>",
            esc(&short_sha(c)),
            esc(&c.subject)
        );
    }
    html.push_str("</ul>");
    html
}

fn row(out: &mut String, key: &str, value_html: &str) {
    let _ = write!(out, "<tr><td>{key}</td><td>{value_html}</td></tr>");
}

fn session_summary(out: &mut String, s: &SessionReport, runs: &[(Report, Timeline, LogCheck)]) {
    let verdict = verdict_or(s.verdict, "no verdict");
    let class = if verdict == "succeeded" { "ok" } else { "bad" };
    let _ = writeln!(
        out,
        "<section class=\"session\"><h2>session {} <span class=\"{class}\">{}</span></h2><table>",
        esc(&s.session_id),
        esc(verdict)
    );
    row(
        out,
        "iterations",
        &format!("{} of {}", s.iterations_run, s.iterations_requested),
    );
    row(
        out,
        "stopped because",
        &esc(&s.stopped_because.as_str().replace('_', " ")),
    );
    row(out, "duration", &esc(&ms(s.duration_ms)));
    let mut each = String::from("<ol style=\"margin:0;padding-left:18px\">");
    for (r, t, _) in runs {
        let verdict = r
            .verdict
            .filter(|_| t.finished)
            .map_or("unfinished", Verdict::as_str);
        let _ = write!(
            each,
            "<li><span class=\"{}\">{}</span> in {}: {}</li>",
            if verdict == "succeeded" { "ok" } else { "bad" },
            esc(verdict),
            esc(&ms(t.duration)),
            esc(&r.reason)
        );
    }
    each.push_str("</ol>");
    row(out, "each iteration", &each);
    let tool_calls: u64 = runs
        .iter()
        .map(|(r, _, _)| u64::from(r.reported.tool_calls))
        .sum();
    row(out, "tool calls", &tool_calls.to_string());
    row(out, "tokens", &esc(&tokens_text(&s.tokens)));
    row(out, "cost", &esc(&cost_text(s.cost_usd)));
    row(out, "commits", &commits_html(s.commits.as_deref()));
    if let Some(wt) = &s.worktree {
        row(
            out,
            "worktree",
            &esc(&format!("{} on branch {}", wt.path.display(), wt.branch)),
        );
    }
    let steps = steps_in_order(s);
    if !steps.is_empty() {
        let mut each = String::from("<ol style=\"margin:0;padding-left:18px\">");
        for step in steps {
            let _ = write!(
                each,
                "<li><span class=\"{}\">{}</span> {}</li>",
                if step.passed { "ok" } else { "bad" },
                if step.passed { "passed" } else { "failed" },
                esc(&step_finished_line(step))
            );
        }
        each.push_str("</ol>");
        row(out, "checks and hooks", &each);
    }
    for line in merge_lines(s) {
        let class = if s.merge_conflicts.is_empty() {
            "ok"
        } else {
            "bad"
        };
        row(
            out,
            "merge",
            &format!("<span class=\"{class}\">{}</span>", esc(&line)),
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

fn section(out: &mut String, r: &Report, t: &Timeline, silence: u64, check: &LogCheck) {
    let verdict = r
        .verdict
        .filter(|_| t.finished)
        .map_or("unfinished", Verdict::as_str);
    let class = if verdict == "succeeded" { "ok" } else { "bad" };
    let _ = writeln!(
        out,
        "<section class=\"run\"><h2>{} <span class=\"{class}\">{}</span></h2>",
        esc(&r.run_id),
        esc(verdict)
    );
    for c in &check.changed {
        let _ = writeln!(
            out,
            "<p class=\"bad\"><strong>log changed after the run:</strong> {}</p>",
            esc(c)
        );
    }
    if let Some(lost) = &r.output_lost {
        let _ = writeln!(
            out,
            "<p class=\"bad\"><strong>output lost:</strong> {}</p>",
            esc(lost)
        );
    }
    out.push_str("<table>");
    let why = if t.finished {
        r.reason.clone()
    } else {
        "no verdict: still going, or its warden was killed before it could finish".to_string()
    };
    let rows = [
        ("agent", r.agent.clone()),
        ("model", model_text(r).to_string()),
        ("why", why),
        ("duration", ms(t.duration)),
        ("longest silence", ms(t.longest_silence)),
        ("tool calls", t.tools.len().to_string()),
        ("tokens", tokens_text(&r.reported.tokens)),
        ("cost", cost_text(r.reported.cost_usd)),
    ];
    for (k, v) in rows {
        row(out, k, &esc(&v));
    }
    row(out, "commits", &commits_html(r.commits.as_deref()));
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
    let mut marks: Vec<&Mark> = t.marks.iter().collect();
    marks.sort_by_key(|m| (m.level, m.at_ms));
    for m in marks {
        let color = match m.level {
            Level::Error => "#cf222e",
            Level::Warning => "#bf8700",
            Level::Info => "#1a7f37",
        };
        let _ = writeln!(
            out,
            "<circle class=\"mark {}\" cx=\"{:.1}\" cy=\"84\" r=\"5\" fill=\"{color}\"><title>{} at {}: {}</title></circle>",
            m.level.as_str(),
            x(m.at_ms),
            m.level.as_str(),
            esc(&ms(m.at_ms)),
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
        let input = tool.input.as_deref().unwrap_or_default();
        let label = if input.trim().is_empty() {
            tool.name.clone()
        } else {
            format!("{}: {}", tool.name, input.trim())
        };
        let full = if input.is_empty() {
            tool.name.clone()
        } else {
            format!("{}: {}", tool.name, input)
        };
        let _ = writeln!(
            out,
            "<text class=\"tool\" x=\"4\" y=\"{:.1}\" font-size=\"10\" font-family=\"monospace\"><title>{}</title>{}</text><rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"11\" fill=\"{color}\"><title>{} at {}: {}</title></rect>",
            y + 9.0,
            esc(&full),
            esc(&shorten(&label, TOOL_LABEL)),
            x(tool.start_ms),
            y,
            (x(tool.end_ms) - x(tool.start_ms)).max(2.0),
            esc(&ms(tool.end_ms.saturating_sub(tool.start_ms))),
            esc(&ms(tool.start_ms)),
            esc(&full)
        );
    }
    out.push_str("</svg>\n<p class=\"legend\"><span><i class=\"sw\" style=\"background:#f6c445\"></i>silence</span><span><i class=\"sw\" style=\"background:#0969da\"></i>activity</span><span><i class=\"sw\" style=\"background:#2da44e\"></i>tool call</span><span><i class=\"sw\" style=\"background:#cf222e\"></i>error / unfinished</span><span><i class=\"sw\" style=\"background:#8250df\"></i>tokens</span></p></section>\n");
}
