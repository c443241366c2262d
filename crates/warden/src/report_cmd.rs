//! `warden report DIR`: a run, a session or a batch explained after the
//! fact, on the terminal, and with `--html FILE` as self-contained pages
//! with a timeline (`report_html`).
//!
//! Every file is read as warden's own type (`run.json` as a [`Report`],
//! `session.json` as a [`SessionReport`], `batch.json` as a
//! [`BatchReport`], each `events.jsonl` line as a
//! [`Stamped`](warden_run::Stamped) event), so a field renamed or retyped
//! is an error that names the file, never a view that silently shows
//! nothing.

use std::fmt::Write as _;
use std::path::PathBuf;

use warden_events::Tokens;
use warden_run::git::Commit;
use warden_run::readback::{
    self, BatchRecord, EventLine, LogCheck, MissingRun, ReadRun, Record, Recorded,
};
use warden_run::session::SessionRun;
use warden_run::timeline::{Level, MarkKind};
use warden_run::{BatchReport, BatchRun, Report, SessionReport, Verdict};

use crate::args::ReportArgs;
use crate::render::github::neutralize;
pub(crate) use crate::render::lines::one_line;
use crate::render::lines::{step_finished_line, steps_in_order};
use crate::render::ms;
use crate::timeline::{self, Timeline};

/// The silence listed and drawn when neither `--silence` nor the run's
/// own stall timeout says (a run with its stall clock off).
const DEFAULT_SILENCE_MS: u64 = 30_000;

/// One run as the report shows it: its report, its timeline and the
/// check of its logs, with the silence threshold it was drawn with and,
/// in a session, its line of `session.json` (its attempt).
pub(crate) struct RunView {
    pub dir: PathBuf,
    pub report: Report,
    pub timeline: Timeline,
    pub check: LogCheck,
    /// Silences at least this long are listed and drawn.
    pub silence_ms: u64,
    /// Where the threshold came from, for the legend.
    pub silence_from: &'static str,
    /// Its line of `session.json`, in a session.
    pub in_session: Option<SessionRun>,
    /// How its attempt came about, in a session that retries.
    pub attempt: Option<String>,
}

/// A run or a session, as the report shows it: a run directory, a
/// session directory, or an entry of a batch.
pub(crate) struct Shown {
    pub session: Option<SessionReport>,
    pub runs: Vec<RunView>,
    /// The runs `session.json` lists that are not there to be read.
    pub missing: Vec<MissingRun>,
    /// For a batch entry: why its directory is not there, if so.
    pub gone: Option<String>,
}

/// The silence threshold of a run: `--silence` when given, else the
/// run's own stall timeout (so that the silence behind a stall is always
/// drawn), else 30 s.
fn silence_of(given: Option<u64>, r: &Report) -> (u64, &'static str) {
    if let Some(ms) = given {
        return (ms, "--silence");
    }
    match r.limits.stall_timeout_ms.filter(|ms| *ms > 0) {
        Some(ms) => (ms, "the run's stall timeout"),
        None => (
            DEFAULT_SILENCE_MS,
            "the default (the run has no stall timeout)",
        ),
    }
}

fn shown(record: Record, given: Option<u64>) -> Shown {
    let attempts: Vec<SessionRun> = record
        .session
        .as_ref()
        .map(|s| s.runs.clone())
        .unwrap_or_default();
    let runs = record
        .runs
        .into_iter()
        .map(|ReadRun { dir, report, index }| {
            let events = readback::read_events(&dir);
            let (silence_ms, silence_from) = silence_of(given, &report);
            let t = timeline::build(&report, &events, silence_ms);
            let check = readback::check_logs(&dir, &report);
            RunView {
                attempt: attempt_text(&attempts, index),
                in_session: attempts.get(index).cloned(),
                dir,
                report,
                timeline: t,
                check,
                silence_ms,
                silence_from,
            }
        })
        .collect();
    Shown {
        session: record.session,
        runs,
        missing: record.missing,
        gone: record.gone,
    }
}

/// How run `i` of a session came about, when the session retries (or
/// the run was retried): `attempt 2 of 3, resumed: retried after
/// attempt 1 ended by rate limited`. `None` for a run that was its
/// iteration's only possible attempt.
pub(crate) fn attempt_text(runs: &[SessionRun], i: usize) -> Option<String> {
    let run = runs.get(i)?;
    if run.attempt <= 1 && run.attempts <= 1 && run.retried_because.is_none() {
        return None;
    }
    let mut text = if run.attempts > 0 {
        format!("attempt {} of {}", run.attempt, run.attempts)
    } else {
        format!("attempt {}", run.attempt)
    };
    if run.attempt > 1 {
        let before = i
            .checked_sub(1)
            .and_then(|b| runs.get(b))
            .filter(|b| b.iteration == run.iteration);
        let why = before.and_then(|b| b.retried_because).map_or_else(
            || "retried".to_string(),
            |on| {
                format!(
                    "retried after attempt {} ended by {}",
                    run.attempt - 1,
                    on.words()
                )
            },
        );
        let how = if run.resumed {
            "resumed"
        } else {
            "not resumed (started afresh)"
        };
        let _ = write!(text, ", {how}: {why}");
    }
    if let Some(on) = run.retried_because {
        let _ = write!(
            text,
            "; retried because it ended by {}{}",
            on.words(),
            run.retry_delay_ms
                .map(|d| format!(", after a wait of {}", ms(d)))
                .unwrap_or_default()
        );
    }
    Some(text)
}

pub(crate) fn report(args: &ReportArgs) -> u8 {
    let given = match &args.silence {
        None => None,
        Some(s) => match crate::settings::parse_duration(s) {
            Some(d) => Some(d.as_millis() as u64),
            None => {
                eprintln!(
                    "warden: error: invalid value `{s}` for --silence: expected a duration such as `30s` or `2m`"
                );
                return 2;
            }
        },
    };
    // A run directory, a session directory with one per iteration, or a
    // batch directory with a session per entry. Every report is read
    // before anything is printed, so a directory that is not one is exit
    // 2 with nothing else said.
    let recorded = match readback::read_any(&args.dir) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("warden: error: {e}");
            return 2;
        }
    };
    let record = match recorded {
        Recorded::Runs(r) => *r,
        Recorded::Batch(b) => return report_batch(args, *b, given),
    };
    // What `warden run` exited with for this run (or session).
    let verdict_exit = verdict_exit(record.session.as_ref(), &record.runs);
    // The report's own findings win: a changed log or a missing run (1)
    // or an unreadable file (2) say more than a verdict read from such a
    // record.
    let incomplete = record.incomplete();
    let or_verdict = |code: u8| match code {
        0 if incomplete => MISSING_EXIT,
        0 => verdict_exit,
        _ => code,
    };
    if args.events {
        say_missing(&record.missing);
        return or_verdict(print_events(&record.runs));
    }
    if args.json {
        say_missing(&record.missing);
        return or_verdict(print_json(
            None,
            record.session.as_ref(),
            (&record.runs, &record.missing),
            Vec::new(),
        ));
    }
    let shown = shown(record, given);
    let tampered = print_shown(&shown, "");
    if let Some(out) = &args.html {
        let page = crate::report_html::page(&shown, None);
        if let Err(e) = std::fs::write(out, page) {
            eprintln!("warden: error: could not write {}: {e}", out.display());
            return 2;
        }
        println!("timeline written to {}", out.display());
    }
    or_verdict(if tampered { LOGS_CHANGED_EXIT } else { 0 })
}

/// Prints a run or a session (each line after `indent`); whether a log
/// was changed after its run.
fn print_shown(shown: &Shown, indent: &str) -> bool {
    if let Some(s) = &shown.session {
        print_session(s, &shown.runs, indent);
    }
    let mut tampered = false;
    for m in &shown.missing {
        print_missing(m, shown.session.as_ref(), indent);
    }
    say_missing(&shown.missing);
    for v in &shown.runs {
        print_run(v, indent);
        for c in &v.check.changed {
            tampered = true;
            eprintln!(
                "warden: error: {}: {c}; it was changed after the run, so it is not the record of what happened",
                v.dir.display()
            );
        }
    }
    tampered
}

/// `warden report BATCH_DIR`: the batch, a line per entry, then each
/// entry's session and runs; `--html` writes the batch's page and one
/// page per entry beside it.
fn report_batch(args: &ReportArgs, b: BatchRecord, given: Option<u64>) -> u8 {
    let runs: Vec<ReadRun> = b
        .entries
        .iter()
        .flatten()
        .flat_map(|r| r.runs.iter().cloned())
        .collect();
    let verdict_exit = b.batch.warden_exit_code();
    let incomplete = b.incomplete();
    let or_verdict = |code: u8| match code {
        0 if incomplete => MISSING_EXIT,
        0 => verdict_exit,
        _ => code,
    };
    let missing: Vec<MissingRun> = b
        .entries
        .iter()
        .flatten()
        .flat_map(|r| r.missing.iter().cloned())
        .collect();
    if args.events {
        say_missing(&missing);
        return or_verdict(print_events(&runs));
    }
    if args.json {
        say_missing(&missing);
        let entries = b
            .batch
            .runs
            .iter()
            .zip(&b.entries)
            .map(|(entry, record)| EntryJson {
                name: entry.name.clone(),
                runs: record.as_ref().map_or(&[][..], |r| &r.runs[..]),
                missing_runs: record.as_ref().map_or(&[][..], |r| &r.missing[..]),
                missing: record.as_ref().and_then(|r| r.gone.clone()),
            })
            .collect();
        return or_verdict(print_json(Some(&b.batch), None, (&[], &[]), entries));
    }
    let BatchRecord { batch, entries } = b;
    let shown: Vec<Option<Shown>> = entries
        .into_iter()
        .map(|e| e.map(|r| shown(r, given)))
        .collect();
    print_batch(&batch, &shown);
    let mut tampered = false;
    for (entry, s) in batch.runs.iter().zip(&shown) {
        println!("entry {}:", entry.name);
        match s {
            Some(s) => {
                if let Some(why) = &s.gone {
                    println!("  MISSING: {why}; its session is as batch.json records it");
                }
                tampered |= print_shown(s, "  ");
            }
            None => println!(
                "  never ran: {}\n",
                entry.error.as_deref().unwrap_or("no report")
            ),
        }
    }
    if let Some(out) = &args.html {
        match crate::report_html::write_batch(out, &batch, &shown) {
            Ok(index) => println!("batch report written to {}", index.display()),
            Err(e) => {
                eprintln!("warden: error: {e}");
                return 2;
            }
        }
    }
    or_verdict(if tampered { LOGS_CHANGED_EXIT } else { 0 })
}

/// A batch's summary and a line per entry.
fn print_batch(b: &BatchReport, shown: &[Option<Shown>]) {
    println!(
        "batch {}: {} entr{} from {} ({}): {} succeeded, {} failed, {} cancelled, {} never ran; in {}",
        b.batch_id,
        b.runs.len(),
        if b.runs.len() == 1 { "y" } else { "ies" },
        b.file.display(),
        b.executor,
        b.succeeded,
        b.failed,
        b.cancelled,
        b.never_ran.len(),
        ms(b.duration_ms)
    );
    for line in &b.budgets {
        println!("  {}", budget_text(line));
    }
    for (entry, s) in b.runs.iter().zip(shown) {
        let f = EntryFacts::of(entry, s.as_ref());
        println!(
            "  {:<16} {:<16} {:>8}  tokens {}  cost {}  orphans killed {}{}{}{}  why: {}",
            entry.name,
            f.verdict,
            ms(entry.duration_ms),
            f.tokens,
            f.cost,
            f.orphans_killed,
            if f.attempts > f.iterations {
                format!("  {} attempt(s)", f.attempts)
            } else {
                String::new()
            },
            if f.budget_warnings > 0 {
                format!("  {} budget warning(s)", f.budget_warnings)
            } else {
                String::new()
            },
            match s {
                Some(Shown { gone: Some(_), .. }) => "  MISSING".to_string(),
                Some(s) if !s.missing.is_empty() => format!("  {} run(s) MISSING", s.missing.len()),
                _ => String::new(),
            },
            neutralize(&one_line(&f.reason))
        );
    }
    println!();
}

/// What the batch's row says of an entry.
pub(crate) struct EntryFacts {
    pub verdict: String,
    pub reason: String,
    pub tokens: String,
    pub cost: String,
    pub orphans_killed: u64,
    pub budget_warnings: usize,
    /// Runs (attempts included) and iterations.
    pub attempts: usize,
    pub iterations: usize,
}

impl EntryFacts {
    pub(crate) fn of(entry: &BatchRun, shown: Option<&Shown>) -> Self {
        let session = entry.session.as_ref();
        let runs = shown.map_or(&[][..], |s| &s.runs[..]);
        Self {
            verdict: entry
                .verdict
                .map_or("never ran", Verdict::as_str)
                .to_string(),
            reason: entry
                .error
                .clone()
                .or_else(|| {
                    session
                        .and_then(|s| s.runs.last())
                        .map(|r| r.reason.clone())
                })
                .unwrap_or_default(),
            tokens: session.map_or("none".into(), |s| Tokens::shown(s.tokens.total())),
            cost: session
                .and_then(|s| s.cost_usd)
                .map_or("not reported".into(), |c| format!("${c:.4}")),
            orphans_killed: runs
                .iter()
                .map(|v| u64::from(v.report.orphans_killed))
                .sum(),
            budget_warnings: runs
                .iter()
                .map(|v| count_marks(&v.timeline, MarkKind::BudgetWarning))
                .sum(),
            attempts: runs.len(),
            iterations: session.map_or(0, |s| s.iterations_run as usize),
        }
    }
}

/// How many marks of `kind` a timeline has.
pub(crate) fn count_marks(t: &Timeline, kind: MarkKind) -> usize {
    t.marks.iter().filter(|m| m.kind == kind).count()
}

/// A budget line of a report: `run cost budget $0.60: $0.50 reached`.
pub(crate) fn budget_text(b: &warden_run::budget::BudgetLine) -> String {
    format!(
        "{}: {} reached",
        b.name_and_limit(),
        warden_run::budget::amount(b.budget, b.reached)
    )
}

/// The orphans a run left and warden killed: `1 orphan killed: pid 12
/// `sleep 300``; `None` when there were none.
pub(crate) fn orphans_text(r: &Report) -> Option<String> {
    if r.orphans_killed == 0 && r.orphans.is_empty() {
        return None;
    }
    let mut text = format!(
        "{} orphan{} killed",
        r.orphans_killed,
        if r.orphans_killed == 1 { "" } else { "s" }
    );
    let each: Vec<String> = r
        .orphans
        .iter()
        .map(|o| {
            format!(
                "pid {} `{}`{}",
                o.pid,
                o.cmdline,
                if o.held_pipe {
                    " (held the output pipe)"
                } else {
                    ""
                }
            )
        })
        .collect();
    if !each.is_empty() {
        let _ = write!(text, ": {}", each.join(", "));
    }
    Some(text)
}

/// `warden report`'s exit code for a run (or session) with no verdict:
/// still going, or its warden was killed. `EX_TEMPFAIL`: asked again once
/// the run has ended, the report will have its verdict.
const UNFINISHED_EXIT: u8 = 75;

/// The exit code `warden run` gave (or gives, once it ends) for this run
/// or session: its verdict's code, 74 when output was lost, and
/// [`UNFINISHED_EXIT`] when there is no verdict yet.
fn verdict_exit(session: Option<&SessionReport>, runs: &[ReadRun]) -> u8 {
    if let Some(s) = session {
        return if s.verdict.is_none() && s.output_lost.is_none() {
            UNFINISHED_EXIT
        } else {
            s.warden_exit_code()
        };
    }
    match runs.first().map(|r| &r.report) {
        Some(r) if r.verdict.is_some() || r.output_lost.is_some() => r.warden_exit_code(),
        _ => UNFINISHED_EXIT,
    }
}

/// `warden report --events`: every run's events, one JSON object a line,
/// with each `lines` event turned back into the line events it stands for.
/// The logs are checked first, as for the report: lines read from a log
/// changed after the run are not the record of what happened.
fn print_events(runs: &[ReadRun]) -> u8 {
    use std::io::Write;
    let mut code = 0;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(128 * 1024, stdout.lock());
    for ReadRun {
        dir: run_dir,
        report,
        ..
    } in runs
    {
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
/// the check of each run's logs found. For a batch: `batch.json` and each
/// entry's runs (its session is in `batch.json`).
fn print_json(
    batch: Option<&BatchReport>,
    session: Option<&SessionReport>,
    (runs, missing): (&[ReadRun], &[MissingRun]),
    entries: Vec<EntryJson<'_>>,
) -> u8 {
    let mut code = 0;
    let mut runs_json = |runs: &[ReadRun]| -> Vec<serde_json::Value> {
        let mut out = Vec::new();
        for ReadRun {
            dir: run_dir,
            report,
            ..
        } in runs
        {
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
        out
    };
    let doc = match batch {
        None => serde_json::json!({
            "schema_version": 1,
            "session": session,
            "runs": runs_json(runs),
            "missing_runs": missing_json(missing),
        }),
        Some(b) => {
            let entries: Vec<serde_json::Value> = entries
                .iter()
                .map(|e| {
                    serde_json::json!({
                        "name": e.name,
                        "missing": e.missing,
                        "runs": runs_json(e.runs),
                        "missing_runs": missing_json(e.missing_runs),
                    })
                })
                .collect();
            serde_json::json!({
                "schema_version": 1,
                "batch": b,
                "entries": entries,
            })
        }
    };
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

/// `warden report`'s exit code when a run, or a batch's entry, that the
/// report lists is not there to be read (moved, deleted, never copied):
/// what is there is shown, and the record is incomplete.
const MISSING_EXIT: u8 = 1;

/// A batch entry of `report --json`.
struct EntryJson<'a> {
    name: String,
    runs: &'a [ReadRun],
    missing_runs: &'a [MissingRun],
    /// Why the entry's directory is not there, if so.
    missing: Option<String>,
}

/// The runs that are not there, as `report --json` lists them.
fn missing_json(missing: &[MissingRun]) -> Vec<serde_json::Value> {
    missing
        .iter()
        .map(|m| {
            serde_json::json!({
                "index": m.index,
                "recorded_run_dir": m.recorded,
                "run_dir": m.dir,
                "why": m.why,
            })
        })
        .collect()
}

/// Names each run that is not there on stderr.
fn say_missing(missing: &[MissingRun]) {
    for m in missing {
        eprintln!(
            "warden: error: a run is missing (run {} of its session, recorded at {}), so it is not reported: {}",
            m.index + 1,
            m.recorded.display(),
            m.why
        );
    }
}

/// A run its session lists that is not there: said, never read from
/// where it was recorded.
fn print_missing(m: &MissingRun, session: Option<&SessionReport>, indent: &str) {
    let run = session.and_then(|s| s.runs.get(m.index));
    println!(
        "{indent}run {}  MISSING{}: {}; not read, nothing of it is checked",
        run.map_or("?", |r| r.run_id.as_str()),
        run.map(|r| format!(" (iteration {})", r.iteration))
            .unwrap_or_default(),
        m.why
    );
    println!();
}

/// A verdict as the report names it, or `none` when there is none.
pub(crate) fn verdict_or(v: Option<Verdict>, none: &'static str) -> &'static str {
    v.map_or(none, Verdict::as_str)
}

fn print_session(s: &SessionReport, runs: &[RunView], indent: &str) {
    println!(
        "{indent}session {}: {} after {} of {} iteration(s), stopped by {}",
        s.session_id,
        verdict_or(s.verdict, "no verdict"),
        s.iterations_run,
        s.iterations_requested,
        s.stopped_because.as_str().replace('_', " ")
    );
    println!(
        "{indent}  in {}; tokens {}; cost {}; {} commit(s)",
        ms(s.duration_ms),
        tokens_text(&s.tokens),
        cost_text(s.cost_usd),
        warden_run::git::count_shown(s.commits.as_deref())
    );
    if let Some(wt) = &s.worktree {
        println!(
            "{indent}  worktree {} on branch {}",
            wt.path.display(),
            wt.branch
        );
    }
    println!("{indent}  runs:");
    for (i, r) in s.runs.iter().enumerate() {
        println!(
            "{indent}    iteration {}{}: {} in {}: {}",
            r.iteration,
            attempt_text(&s.runs, i)
                .map(|a| format!(", {a}"))
                .unwrap_or_default(),
            verdict_or(r.verdict, "no verdict"),
            ms(r.duration_ms),
            neutralize(&one_line(&r.reason))
        );
    }
    let retried = s
        .runs
        .iter()
        .filter(|r| r.retried_because.is_some())
        .count();
    if retried > 0 {
        println!("{indent}  {retried} run(s) retried");
    }
    for b in &s.budgets {
        println!("{indent}  {}", budget_text(b));
    }
    if let Some(b) = &s.budget_exceeded {
        println!("{indent}  {}", b.exceeded());
    }
    let warnings: Vec<&str> = runs
        .iter()
        .flat_map(|v| &v.timeline.marks)
        .filter(|m| m.kind == MarkKind::BudgetWarning)
        .map(|m| m.text.as_str())
        .collect();
    for w in warnings {
        println!("{indent}  budget warning: {w}");
    }
    let orphans: u64 = runs
        .iter()
        .map(|v| u64::from(v.report.orphans_killed))
        .sum();
    if orphans > 0 {
        println!("{indent}  {orphans} orphan(s) killed in all");
    }
    let steps = steps_in_order(s);
    if !steps.is_empty() {
        println!("{indent}  checks and hooks:");
        for step in steps {
            println!("{indent}    {}", neutralize(&step_finished_line(step)));
        }
    }
    for line in merge_lines(s) {
        println!("{indent}  {}", neutralize(&line));
    }
    println!();
}

/// What the session's `--merge` did: merged, or the conflict.
pub(crate) fn merge_lines(s: &SessionReport) -> Vec<String> {
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
pub(crate) fn model_text(r: &Report) -> &str {
    r.reported
        .model
        .as_deref()
        .filter(|m| !m.is_empty())
        .unwrap_or("not reported")
}

fn print_run(v: &RunView, indent: &str) {
    let (r, t, check, silence) = (&v.report, &v.timeline, &v.check, v.silence_ms);
    if t.finished {
        println!(
            "{indent}run {}  {}  {} in {}: {}",
            r.run_id,
            r.agent,
            verdict_or(r.verdict, "?"),
            ms(t.duration),
            one_line(&r.reason)
        );
    } else {
        println!(
            "{indent}run {}  {}  UNFINISHED: no verdict; the run is still going, or its warden was killed before it could finish (its events go up to {})",
            r.run_id,
            r.agent,
            ms(t.duration),
        );
    }
    if let (Some(a), Some(run)) = (&v.attempt, &v.in_session) {
        println!("{indent}  iteration {}, {a}", run.iteration);
    }
    println!(
        "{indent}  started {}; first activity after {}; longest silence {}{}",
        r.started_at,
        t.first_activity.map_or("never".into(), ms),
        ms(t.longest_silence),
        if t.finished { "" } else { " so far" }
    );
    println!(
        "{indent}  clocks: stall timeout {}, startup timeout {}, timeout {}",
        r.limits.stall_timeout_ms.map_or("off".into(), ms),
        r.limits.startup_timeout_ms.map_or("off".into(), ms),
        r.limits.timeout_ms.map_or("off".into(), ms)
    );
    if t.silences.is_empty() {
        println!("{indent}  no silence of {} or more", ms(silence));
    } else {
        for (a, b) in &t.silences {
            println!(
                "{indent}  quiet from {} to {} ({})",
                ms(*a),
                ms(*b),
                ms(b.saturating_sub(*a))
            );
        }
    }
    if !check.changed.is_empty() {
        println!("{indent}  LOGS CHANGED AFTER THE RUN:");
        for c in &check.changed {
            println!("{indent}    {c}");
        }
    } else if let Some(why) = &check.unchecked {
        println!("{indent}  logs not checked: {why}");
    } else {
        println!("{indent}  logs as warden wrote them (sizes and SHA-256 checked)");
    }
    if let Some(lost) = &r.output_lost {
        println!("{indent}  OUTPUT LOST: {lost}");
    }
    match orphans_text(r) {
        Some(o) => println!("{indent}  {}", neutralize(&o)),
        None => println!("{indent}  no orphans: nothing of the run outlived it"),
    }
    if !t.tools.is_empty() {
        let mut tools = t.tools.clone();
        tools.sort_by_key(|x| std::cmp::Reverse(x.end_ms.saturating_sub(x.start_ms)));
        println!("{indent}  {} tool call(s); the longest:", tools.len());
        for x in tools.iter().take(5) {
            println!(
                "{indent}    {} {} at {}{}: {}",
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
            "{indent}  model {}; tokens {}; cost {}; {} API retr{} by the agent",
            model_text(r),
            tokens_text(&r.reported.tokens),
            cost_text(r.reported.cost_usd),
            r.reported.retries,
            if r.reported.retries == 1 { "y" } else { "ies" }
        );
    }
    for b in &r.budgets {
        println!("{indent}  {}", budget_text(b));
    }
    if let Some(b) = &r.budget_exceeded {
        println!("{indent}  {}", b.exceeded());
    }
    for m in t.marks.iter().filter(|m| m.level != Level::Info) {
        println!(
            "{indent}  {} at {}: {}",
            m.level.as_str(),
            ms(m.at_ms),
            neutralize(&one_line(&m.text))
        );
    }
    if r.commits.is_none() {
        println!("{indent}  commits unknown: git could not say (see the error)");
    }
    if let Some(commits) = r.commits.as_ref().filter(|c| !c.is_empty()) {
        println!("{indent}  {} commit(s):", commits.len());
        for c in commits {
            println!("{indent}    {} {}", short_sha(c), c.subject);
        }
    }
    println!();
}

/// A commit's sha cut to the 10 characters a view shows.
pub(crate) fn short_sha(c: &Commit) -> String {
    c.sha.chars().take(10).collect()
}

/// `text`'s first line, cut to `max` characters with an ellipsis.
pub(crate) fn shorten(text: &str, max: usize) -> String {
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
pub(crate) fn tokens_text(t: &Tokens) -> String {
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

pub(crate) fn cost_text(c: Option<f64>) -> String {
    c.map_or("not reported by the agent".into(), |c| format!("${c:.4}"))
}
