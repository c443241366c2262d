//! `warden report --html`: self-contained pages (inline CSS and SVG, no
//! script, nothing loaded from elsewhere).
//!
//! - A run or a session directory: one page, `FILE`: the session's summary
//!   (iterations, attempts, checks, budgets), then a section per run with
//!   its timeline.
//! - A batch directory: `FILE` is the batch's page (or `FILE/index.html`
//!   when `FILE` is a directory), with a row per entry, and each entry's
//!   page is written beside it as `<stem>-<N>-<name>.html` (`N` its place
//!   in the batch file, `name` its name with anything but letters, digits,
//!   `.`, `_` and `-` made `_`), linked from its row by a relative link.
//!
//! Every mark drawn has its own colour and a line in the legend beneath
//! its drawing; a legend lists only what its drawing has.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use warden_run::git::Commit;
use warden_run::readback::LogCheck;
use warden_run::timeline::{Mark, MarkKind};
use warden_run::{BatchReport, Report, SessionReport, Verdict};

use crate::render::lines::{step_finished_line, steps_in_order};
use crate::render::ms;
use crate::report_cmd::{
    EntryFacts, RunView, Shown, attempt_text, budget_text, cost_text, merge_lines, model_text,
    one_line, orphans_text, short_sha, shorten, tokens_text, verdict_or,
};
use crate::timeline::Timeline;

/// A silence band.
pub(crate) const SILENCE: &str = "#f6c445";
/// A line of activity.
const ACTIVITY: &str = "#0969da";
/// The token count over time.
const TOKENS: &str = "#8250df";
/// A tool call that finished, failed, or never finished.
const TOOL_OK: &str = "#2da44e";
const TOOL_FAILED: &str = "#fa4549";
const TOOL_OPEN: &str = "#cf222e";

/// Each mark's own colour.
pub(crate) fn mark_color(kind: MarkKind) -> &'static str {
    match kind {
        MarkKind::StallWarning => "#e16f24",
        MarkKind::Retry => "#1b7c83",
        MarkKind::BudgetWarning => "#bf3989",
        MarkKind::Orphan => "#8a4600",
        MarkKind::Error => "#d1242f",
        MarkKind::Ending => "#a40e26",
        MarkKind::Exit => "#6e7781",
        MarkKind::Done => "#4ac26b",
        MarkKind::Truncated => "#9a6700",
    }
}

/// The colour of the end of a run, by its verdict.
fn end_color(verdict: &str) -> &'static str {
    match verdict {
        "succeeded" => "#1a7f37",
        "unfinished" => "#8c959f",
        _ => "#cf222e",
    }
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}h2{margin:8px 0}.ok{color:#1a7f37}.bad{color:#cf222e}\
table{border-collapse:collapse;margin:8px 0}td,th{padding:2px 10px 2px 0;vertical-align:top;text-align:left}\
table.rows td,table.rows th{border-bottom:1px solid #eee;padding:4px 10px 4px 0}td:first-child,td.why{white-space:nowrap}\
svg.timeline{display:block;width:100%;height:auto;border:1px solid #ddd;background:#fafafa}svg.strip{display:block;background:#fafafa;border:1px solid #ddd}\
.legend span{display:inline-block;margin-right:14px}.sw{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}code{font-size:12px}";

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn head(title: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n<style>{STYLE}</style></head><body>\n",
        esc(title)
    )
}

/// The page of a run or a session; `back` links to the batch's page.
pub(crate) fn page(shown: &Shown, back: Option<(&str, &str)>) -> String {
    let mut out = head("warden report");
    if let Some((href, batch_id)) = back {
        let _ = writeln!(
            out,
            "<p><a href=\"{}\">← batch {}</a></p>",
            esc(href),
            esc(batch_id)
        );
    }
    out.push_str("<h1>warden report</h1>\n");
    if let Some(s) = &shown.session {
        session_summary(&mut out, s, &shown.runs);
    }
    for m in &shown.missing {
        let run = shown.session.as_ref().and_then(|s| s.runs.get(m.index));
        let _ = writeln!(
            out,
            "<section class=\"run missing\"><h2>{} <span class=\"bad\">missing</span></h2><p class=\"bad\"><strong>missing{}:</strong> {}; not read, nothing of it is checked</p></section>",
            esc(run.map_or("?", |r| r.run_id.as_str())),
            run.map(|r| format!(" (iteration {})", r.iteration))
                .unwrap_or_default(),
            esc(&m.why)
        );
    }
    for v in &shown.runs {
        section(&mut out, v);
    }
    out.push_str("</body></html>\n");
    out
}

/// A batch entry's name as part of a file name.
fn file_part(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Writes the batch's page at `out` (`out/index.html` for a directory)
/// and each entry's page beside it; the batch page's path.
pub(crate) fn write_batch(
    out: &Path,
    b: &BatchReport,
    shown: &[Option<Shown>],
) -> Result<PathBuf, String> {
    let index = if out.is_dir() || out.as_os_str().to_string_lossy().ends_with('/') {
        std::fs::create_dir_all(out)
            .map_err(|e| format!("could not create {}: {e}", out.display()))?;
        out.join("index.html")
    } else {
        out.to_path_buf()
    };
    let dir = index.parent().unwrap_or(Path::new(".")).to_path_buf();
    let index_name = index
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "index.html".into());
    let stem = index
        .file_stem()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "index".into());
    let write = |path: &Path, text: String| {
        std::fs::write(path, text).map_err(|e| format!("could not write {}: {e}", path.display()))
    };
    let mut links = Vec::with_capacity(b.runs.len());
    for (i, (entry, s)) in b.runs.iter().zip(shown).enumerate() {
        // An entry that never ran, or whose directory is missing, has no
        // page.
        let Some(s) = s.as_ref().filter(|s| s.gone.is_none()) else {
            links.push(None);
            continue;
        };
        let name = format!("{stem}-{}-{}.html", i + 1, file_part(&entry.name));
        write(&dir.join(&name), page(s, Some((&index_name, &b.batch_id))))?;
        links.push(Some(name));
    }
    write(&index, batch_page(b, shown, &links))?;
    Ok(index)
}

fn batch_page(b: &BatchReport, shown: &[Option<Shown>], links: &[Option<String>]) -> String {
    let mut out = head(&format!("warden batch {}", b.batch_id));
    let verdict = b.verdict().as_str();
    let _ = writeln!(
        out,
        "<h1>warden batch {} <span class=\"{}\">{}</span></h1><table>",
        esc(&b.batch_id),
        class_of(verdict),
        esc(verdict)
    );
    row(&mut out, "file", &esc(&b.file.display().to_string()));
    row(&mut out, "executor", &esc(&b.executor));
    row(
        &mut out,
        "entries",
        &esc(&format!(
            "{}: {} succeeded, {} failed, {} cancelled, {} never ran; {} at once",
            b.runs.len(),
            b.succeeded,
            b.failed,
            b.cancelled,
            b.never_ran.len(),
            b.jobs
        )),
    );
    row(&mut out, "duration", &esc(&ms(b.duration_ms)));
    for line in &b.budgets {
        row(&mut out, "budget", &esc(&budget_text(line)));
    }
    out.push_str("</table>\n<table class=\"rows\"><tr><th>#</th><th>entry</th><th>verdict</th><th>why</th><th>duration</th><th>tokens</th><th>cost</th><th>orphans killed</th><th>attempts</th><th>budget warnings</th><th>timeline</th></tr>\n");
    let mut kinds: Vec<MarkKind> = Vec::new();
    let mut any_silence = false;
    for (i, ((entry, s), link)) in b.runs.iter().zip(shown).zip(links).enumerate() {
        let f = EntryFacts::of(entry, s.as_ref());
        let mut name = match link {
            Some(href) => format!("<a href=\"{}\">{}</a>", esc(href), esc(&entry.name)),
            None => esc(&entry.name),
        };
        match s {
            Some(Shown {
                gone: Some(why), ..
            }) => {
                let _ = write!(
                    name,
                    " <span class=\"bad\">(missing: {}; not read)</span>",
                    esc(why)
                );
            }
            Some(s) if !s.missing.is_empty() => {
                let _ = write!(
                    name,
                    " <span class=\"bad\">({} run(s) missing)</span>",
                    s.missing.len()
                );
            }
            _ => {}
        }
        let reason = one_line(&f.reason);
        let strip = s.as_ref().map_or_else(String::new, |s| {
            for v in &s.runs {
                any_silence |= !v.timeline.silences.is_empty();
                for m in &v.timeline.marks {
                    if !kinds.contains(&m.kind) {
                        kinds.push(m.kind);
                    }
                }
            }
            strip(&s.runs)
        });
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{name}</td><td class=\"{}\">{}</td><td class=\"why\" title=\"{}\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{strip}</td></tr>",
            i + 1,
            class_of(&f.verdict),
            esc(&f.verdict),
            esc(&reason),
            esc(&shorten(&reason, 60)),
            esc(&ms(entry.duration_ms)),
            esc(&f.tokens),
            esc(&f.cost),
            f.orphans_killed,
            f.attempts,
            f.budget_warnings,
        );
    }
    out.push_str("</table>\n<p class=\"legend\">timeline strips, each entry's runs end to end: ");
    if any_silence {
        legend(
            &mut out,
            SILENCE,
            "silence of at least the run's stall timeout (or --silence)",
        );
    }
    kinds.sort();
    for k in kinds {
        legend(&mut out, mark_color(k), k.words());
    }
    legend(&mut out, "#d0d7de", "between two runs of an entry");
    out.push_str("</p>\n</body></html>\n");
    out
}

/// A small drawing of an entry's runs, end to end: silences, and the
/// marks that are not the run's plain exit.
fn strip(runs: &[RunView]) -> String {
    const W: f64 = 240.0;
    const H: f64 = 16.0;
    let total: u64 = runs.iter().map(|v| v.timeline.duration.max(1)).sum();
    let scale = W / total.max(1) as f64;
    let mut out = format!(
        "<svg class=\"strip\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\">"
    );
    let mut at = 0u64;
    for (i, v) in runs.iter().enumerate() {
        let t = &v.timeline;
        let x = |ms: u64| (at + ms.min(t.duration)) as f64 * scale;
        if i > 0 {
            let _ = write!(
                out,
                "<rect x=\"{:.1}\" y=\"0\" width=\"2\" height=\"{H}\" fill=\"#d0d7de\"/>",
                x(0)
            );
        }
        for (a, b) in &t.silences {
            let _ = write!(
                out,
                "<rect x=\"{:.1}\" y=\"3\" width=\"{:.1}\" height=\"10\" fill=\"{SILENCE}\"><title>quiet {}</title></rect>",
                x(*a),
                (x(*b) - x(*a)).max(1.0),
                esc(&ms(b.saturating_sub(*a)))
            );
        }
        let mut marks: Vec<&Mark> = t.marks.iter().collect();
        marks.sort_by_key(|m| (m.level, m.at_ms));
        for m in marks {
            let _ = write!(
                out,
                "<rect x=\"{:.1}\" y=\"1\" width=\"4\" height=\"14\" fill=\"{}\"><title>{}: {}</title></rect>",
                (x(m.at_ms) - 2.0).clamp(0.0, W - 4.0),
                mark_color(m.kind),
                esc(m.kind.words()),
                esc(&m.text)
            );
        }
        at += t.duration.max(1);
    }
    out.push_str("</svg>");
    out
}

fn class_of(verdict: &str) -> &'static str {
    if verdict == "succeeded" { "ok" } else { "bad" }
}

fn legend(out: &mut String, color: &str, what: &str) {
    let _ = write!(
        out,
        "<span><i class=\"sw\" style=\"background:{color}\"></i>{}</span>",
        esc(what)
    );
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

/// The budget warnings of some runs' timelines.
fn budget_warnings<'a>(runs: impl IntoIterator<Item = &'a Timeline>) -> Vec<&'a str> {
    runs.into_iter()
        .flat_map(|t| &t.marks)
        .filter(|m| m.kind == MarkKind::BudgetWarning)
        .map(|m| m.text.as_str())
        .collect()
}

fn session_summary(out: &mut String, s: &SessionReport, runs: &[RunView]) {
    let verdict = verdict_or(s.verdict, "no verdict");
    let _ = writeln!(
        out,
        "<section class=\"session\"><h2>session {} <span class=\"{}\">{}</span></h2><table>",
        esc(&s.session_id),
        class_of(verdict),
        esc(verdict)
    );
    if !s.name.is_empty() {
        row(out, "name", &esc(&s.name));
    }
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
    let mut each = String::from(
        "<table class=\"rows\"><tr><th>iteration</th><th>attempt</th><th>verdict</th><th>duration</th><th>tokens</th><th>cost</th><th>why</th></tr>",
    );
    for (i, r) in s.runs.iter().enumerate() {
        let verdict = verdict_or(r.verdict, "unfinished");
        let _ = write!(
            each,
            "<tr><td>{}{}</td><td>{}</td><td class=\"{}\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            r.iteration,
            if r.output_retry {
                " (output retry)"
            } else {
                ""
            },
            esc(&attempt_text(&s.runs, i).unwrap_or_else(|| "only attempt".into())),
            class_of(verdict),
            esc(verdict),
            esc(&ms(r.duration_ms)),
            warden_events::Tokens::shown(r.tokens.total()),
            esc(&r
                .cost_usd
                .map_or("not reported".into(), |c| format!("${c:.4}"))),
            esc(&one_line(&r.reason))
        );
    }
    each.push_str("</table>");
    row(out, "runs", &each);
    let retried = s
        .runs
        .iter()
        .filter(|r| r.retried_because.is_some())
        .count();
    row(
        out,
        "retries",
        &esc(&format!(
            "{retried} run(s) retried by warden; {} API retr(ies) by the agent",
            runs.iter()
                .map(|v| u64::from(v.report.reported.retries))
                .sum::<u64>()
        )),
    );
    let tool_calls: u64 = runs
        .iter()
        .map(|v| u64::from(v.report.reported.tool_calls))
        .sum();
    row(out, "tool calls", &tool_calls.to_string());
    row(out, "tokens", &esc(&tokens_text(&s.tokens)));
    row(out, "cost", &esc(&cost_text(s.cost_usd)));
    budget_rows(
        out,
        &s.budgets,
        s.budget_exceeded.as_ref(),
        &budget_warnings(runs.iter().map(|v| &v.timeline)),
    );
    let orphans: u64 = runs
        .iter()
        .map(|v| u64::from(v.report.orphans_killed))
        .sum();
    row(out, "orphans killed", &orphans.to_string());
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

fn budget_rows(
    out: &mut String,
    budgets: &[warden_run::budget::BudgetLine],
    exceeded: Option<&warden_run::budget::BudgetLine>,
    warnings: &[&str],
) {
    if budgets.is_empty() {
        row(out, "budgets", "none");
    }
    for b in budgets {
        row(out, "budget", &esc(&budget_text(b)));
    }
    if let Some(b) = exceeded {
        row(
            out,
            "budget exceeded",
            &format!("<span class=\"bad\">{}</span>", esc(&b.exceeded())),
        );
    }
    for w in warnings {
        row(
            out,
            "budget warning",
            &format!(
                "<i class=\"sw\" style=\"background:{}\"></i>{}",
                mark_color(MarkKind::BudgetWarning),
                esc(w)
            ),
        );
    }
}

/// The drawing's own width; the page scales it to its width.
const VIEW_WIDTH: f64 = 1200.0;
/// The column of row labels (wide enough for a shortened command).
const LABEL_WIDTH: f64 = 240.0;
/// Characters of a tool call's label.
const TOOL_LABEL: usize = 38;
/// The height of a lane of marks.
const LANE: f64 = 14.0;

fn section(out: &mut String, v: &RunView) {
    let (r, t, check): (&Report, &Timeline, &LogCheck) = (&v.report, &v.timeline, &v.check);
    let verdict = r
        .verdict
        .filter(|_| t.finished)
        .map_or("unfinished", Verdict::as_str);
    let _ = writeln!(
        out,
        "<section class=\"run\"><h2>{} <span class=\"{}\">{}</span></h2>",
        esc(&r.run_id),
        class_of(verdict),
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
    let mut rows = vec![
        ("agent", r.agent.clone()),
        ("model", model_text(r).to_string()),
        ("why", why),
    ];
    if let (Some(a), Some(run)) = (&v.attempt, &v.in_session) {
        rows.push(("attempt", format!("iteration {}, {a}", run.iteration)));
    }
    rows.extend([
        ("duration", ms(t.duration)),
        (
            "clocks",
            format!(
                "stall timeout {}, startup timeout {}, timeout {}",
                r.limits.stall_timeout_ms.map_or("off".into(), ms),
                r.limits.startup_timeout_ms.map_or("off".into(), ms),
                r.limits.timeout_ms.map_or("off".into(), ms)
            ),
        ),
        ("longest silence", ms(t.longest_silence)),
        ("tool calls", t.tools.len().to_string()),
        ("tokens", tokens_text(&r.reported.tokens)),
        ("cost", cost_text(r.reported.cost_usd)),
        ("retries by the agent", r.reported.retries.to_string()),
        (
            "orphans",
            orphans_text(r).unwrap_or_else(|| "none: nothing of the run outlived it".into()),
        ),
    ]);
    for (k, val) in rows {
        row(out, k, &esc(&val));
    }
    budget_rows(
        out,
        &r.budgets,
        r.budget_exceeded.as_ref(),
        &budget_warnings([t]),
    );
    row(out, "commits", &commits_html(r.commits.as_deref()));
    out.push_str("</table>\n");
    drawing(out, v, verdict);
}

/// The run's timeline, and its legend.
fn drawing(out: &mut String, v: &RunView, verdict: &str) {
    let t = &v.timeline;
    let width = VIEW_WIDTH;
    let left = LABEL_WIDTH;
    let span = t.duration.max(1) as f64;
    let x = |ms: u64| left + (ms.min(t.duration) as f64 / span) * (width - left - 16.0);
    let tool_rows = t.tools.len().min(30);
    // A lane per kind of mark, so that marks at the same moment are all
    // seen; then the end's.
    let mut kinds: Vec<MarkKind> = t.marks.iter().map(|m| m.kind).collect();
    kinds.sort();
    kinds.dedup();
    let lane_y = |i: usize| 84.0 + i as f64 * LANE;
    let below = LANE * kinds.len() as f64;
    let height = 150.0 + below + tool_rows as f64 * 16.0;
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
        esc(&ms(v.silence_ms))
    );
    for (a, b) in &t.silences {
        let (xa, xb) = (x(*a), x(*b));
        let inset = ((xb - xa) / 4.0).min(1.5);
        let _ = writeln!(
            out,
            "<rect class=\"silence\" x=\"{:.1}\" y=\"28\" width=\"{:.1}\" height=\"18\" rx=\"2\" fill=\"{SILENCE}\"><title>quiet {} from {} to {}</title></rect>",
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
            "<line class=\"activity\" x1=\"{0:.1}\" y1=\"52\" x2=\"{0:.1}\" y2=\"68\" stroke=\"{ACTIVITY}\" stroke-width=\"1\"/>",
            x(a)
        );
    }
    // Marks, the gravest drawn last (on top); then the end of the run.
    for (i, k) in kinds.iter().enumerate() {
        let _ = writeln!(
            out,
            "<text x=\"4\" y=\"{:.1}\" font-size=\"11\">{}</text>",
            lane_y(i) + 4.0,
            esc(k.words())
        );
    }
    let _ = writeln!(
        out,
        "<text x=\"4\" y=\"{:.1}\" font-size=\"11\">end</text>",
        lane_y(kinds.len()) + 4.0
    );
    let mut marks: Vec<&Mark> = t.marks.iter().collect();
    marks.sort_by_key(|m| (m.level, m.at_ms));
    for m in marks {
        let lane = kinds.iter().position(|k| *k == m.kind).unwrap_or(0);
        let _ = writeln!(
            out,
            "<circle class=\"mark {}\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"5\" fill=\"{}\"><title>{} at {}: {}</title></circle>",
            m.level.as_str(),
            x(m.at_ms),
            lane_y(lane),
            mark_color(m.kind),
            esc(m.kind.words()),
            esc(&ms(m.at_ms)),
            esc(&m.text)
        );
    }
    let _ = writeln!(
        out,
        "<circle class=\"end\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"6\" fill=\"{}\" stroke=\"#fff\" stroke-width=\"1.5\"><title>end at {}: {}</title></circle>",
        x(t.duration),
        lane_y(kinds.len()),
        end_color(verdict),
        esc(&ms(t.duration)),
        esc(verdict)
    );
    // Tokens over time: a step each time the count changed.
    let _ = writeln!(
        out,
        "<text x=\"4\" y=\"{:.1}\" font-size=\"11\">tokens</text>",
        116.0 + below
    );
    let mut drew_tokens = false;
    if let Some(max) = t.tokens.iter().map(|(_, n)| *n).max().filter(|m| *m > 0) {
        drew_tokens = true;
        let y = |n: u64| 126.0 + below - (n as f64 / max as f64) * 24.0;
        let mut d = format!("M{:.1} {:.1}", x(0), y(0));
        for (at, n) in &t.tokens {
            let _ = write!(d, " H{:.1} V{:.1}", x(*at), y(*n));
        }
        let _ = write!(d, " H{:.1}", x(t.duration));
        let _ = writeln!(
            out,
            "<path class=\"tokens\" d=\"{d}\" fill=\"none\" stroke=\"{TOKENS}\" stroke-width=\"2\"><title>{max} tokens in all</title></path>"
        );
    }
    // Tool calls as bars, labelled with what they ran.
    let mut tool_colors: Vec<(&str, &str)> = Vec::new();
    for (i, tool) in t.tools.iter().take(30).enumerate() {
        let y = 140.0 + below + i as f64 * 16.0;
        let (color, what) = if !tool.finished {
            (TOOL_OPEN, "tool call never finished")
        } else if tool.failed {
            (TOOL_FAILED, "tool call failed")
        } else {
            (TOOL_OK, "tool call")
        };
        if !tool_colors.contains(&(color, what)) {
            tool_colors.push((color, what));
        }
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
    out.push_str("</svg>\n<p class=\"legend\">");
    legend(
        out,
        SILENCE,
        &format!(
            "silence of {} or more ({})",
            ms(v.silence_ms),
            v.silence_from
        ),
    );
    legend(out, ACTIVITY, "activity (a line of output)");
    for k in kinds {
        legend(out, mark_color(k), k.words());
    }
    legend(out, end_color(verdict), &format!("end: {verdict}"));
    if drew_tokens {
        legend(out, TOKENS, "tokens so far");
    }
    for (color, what) in tool_colors {
        legend(out, color, what);
    }
    out.push_str("</p></section>\n");
}
