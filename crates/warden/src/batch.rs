//! `warden batch FILE.toml -j N`: many runs, N at a time, one view, one
//! `batch.json`.
//!
//! ```toml
//! [defaults]            # any run key, and any setting (timeout, sandbox, ...)
//! agent = "claude"
//! stall_timeout = "5m"
//!
//! [[run]]
//! name = "issue-1"
//! prompt = "Fix issue 1"
//!
//! [[run]]
//! name = "issue-2"
//! prompt_file = "tasks/issue.md"
//! args = { ISSUE = "2" }
//! worktree = true
//! iterations = 3
//! ```
//!
//! Every run is checked before any starts; one run failing never stops the
//! others; Ctrl-C cancels them all and still writes every report.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use tokio::sync::Semaphore;
use warden_events::Agent;
use warden_run::batch_report::{BatchReport, BatchRun};
use warden_run::session::{
    SessionControl, SessionEvent, SessionOptions, SessionReport, WorktreeRequest, run_session,
};

use crate::cli::{BatchArgs, RunArgs};
use crate::plan::{Plan, safe_name};

/// What warden itself keeps in a batch directory, so no run is named so.
const BATCH_FILES: &[&str] = &["batch.json"];

/// The directory of the run `name` in its batch: one plain component, so
/// it can never be outside the batch directory, nor the batch directory
/// itself.
fn run_dir_name(name: &str) -> Result<String, String> {
    let dir = safe_name(name);
    if dir.is_empty() || dir == "." || dir == ".." {
        return Err(format!(
            "the name `{name}` cannot name a directory: use letters, digits, `-`, `_` or `.`, not only dots"
        ));
    }
    if BATCH_FILES.contains(&dir.as_str()) {
        return Err(format!(
            "the name `{name}` is taken by warden's own `{dir}`: pick another"
        ));
    }
    if dir.len() > 200 {
        return Err(format!(
            "the name `{name}` is too long for a directory name (at most 200 bytes)"
        ));
    }
    Ok(dir)
}
use crate::render::{ViewState, live, ms};
use crate::settings::{self, RawSettings, SettingFlags};
use crate::signals::Signals;

/// Keys of a run (or of `[defaults]`) besides the settings (those of the
/// settings table a batch may set).
const RUN_KEYS: &[&str] = &[
    "name",
    "agent",
    "prompt",
    "prompt_file",
    "args",
    "model",
    "effort",
    "resume",
    "agent_bin",
    "extra_args",
    "command",
    "worktree",
    "base",
    "keep_worktree",
    "iterations",
    "env",
    "ro",
    "rw",
    "cwd",
    "output_tag",
    "output_schema",
    "output_retries",
    "preamble",
];

struct Entry {
    name: String,
    agent: Agent,
    plan: Plan,
    options: SessionOptions,
}

fn err(file: &Path, msg: impl std::fmt::Display) -> u8 {
    eprintln!("warden: error: {}: {msg}", file.display());
    2
}

fn text(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

fn strings(v: &toml::Value) -> Option<Vec<String>> {
    v.as_array()?.iter().map(text).collect()
}

/// Turns one merged run table into the arguments `warden run` would get.
fn to_args(table: &toml::Table, index: usize) -> Result<(RunArgs, SettingFlags), String> {
    let mut a = RunArgs {
        iterations: 1,
        ..RunArgs::default()
    };
    let mut f = SettingFlags::default();
    for (k, v) in table {
        let bad = |what: &str| format!("`{k}` must be {what}");
        let s = || text(v).ok_or_else(|| bad("a string"));
        let list = || strings(v).ok_or_else(|| bad("a list of strings"));
        match k.as_str() {
            "name" => {}
            "agent" => a.agent = s()?,
            "prompt" => a.prompt_text = Some(s()?),
            "prompt_file" => a.prompt_file = Some(s()?.into()),
            "args" => {
                let t = v
                    .as_table()
                    .ok_or_else(|| bad("a table of NAME = \"value\""))?;
                for (name, value) in t {
                    a.arg.push(format!(
                        "{name}={}",
                        text(value).ok_or_else(|| bad("a table of strings"))?
                    ));
                }
            }
            "model" => a.model = Some(s()?),
            "effort" => a.effort = Some(s()?),
            "resume" => a.resume = Some(s()?),
            "agent_bin" => a.agent_bin = Some(s()?.into()),
            "extra_args" => a.rest = list()?,
            "command" => a.rest = list()?,
            "worktree" => match v {
                toml::Value::Boolean(true) => a.worktree = Some(String::new()),
                toml::Value::Boolean(false) => a.worktree = None,
                toml::Value::String(b) => a.worktree = Some(b.clone()),
                _ => return Err(bad("true, false or a branch name")),
            },
            "base" => a.base = Some(s()?),
            "keep_worktree" => a.keep_worktree = v.as_bool().ok_or_else(|| bad("true or false"))?,
            "iterations" => {
                let n = v
                    .as_integer()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| bad("a whole number of at least 1"))?;
                a.iterations = u32::try_from(n)
                    .map_err(|_| format!("`{k}` = {n} is too large: at most {}", u32::MAX))?;
            }
            "output_retries" => {
                let n = v
                    .as_integer()
                    .filter(|n| *n >= 0)
                    .ok_or_else(|| bad("a whole number"))?;
                a.output_retries = u32::try_from(n)
                    .map_err(|_| format!("`{k}` = {n} is too large: at most {}", u32::MAX))?;
            }
            "env" => a.env = list()?,
            "ro" => a.ro = list()?.into_iter().map(Into::into).collect(),
            "rw" => a.rw = list()?.into_iter().map(Into::into).collect(),
            "cwd" => a.cwd = Some(s()?.into()),
            "output_tag" => a.output_tag = Some(s()?),
            "output_schema" => a.output_schema = Some(s()?.into()),
            "preamble" => a.preamble = v.as_bool().ok_or_else(|| bad("true or false"))?,
            other => match settings::find(other).filter(|s| s.in_batch) {
                // `false` is as if the key were not there: it does not
                // override the environment or warden.toml.
                Some(setting) if setting.kind.is_switch() => {
                    if v.as_bool().ok_or_else(|| bad("true or false"))? {
                        f.set(setting, "true");
                    }
                }
                Some(setting) => f.set(setting, s()?),
                None => {
                    let known: Vec<&str> = RUN_KEYS
                        .iter()
                        .copied()
                        .chain(
                            settings::SETTINGS
                                .iter()
                                .filter(|s| s.in_batch)
                                .map(|s| s.name),
                        )
                        .collect();
                    return Err(format!(
                        "run {}: unknown key `{other}`; known keys: {}",
                        index + 1,
                        known.join(", ")
                    ));
                }
            },
        }
    }
    if a.agent.is_empty() {
        return Err(format!(
            "run {} has no `agent` (set it in the run or in [defaults])",
            index + 1
        ));
    }
    // A batch has its own view: no run echoes its agent's output.
    if let Some(quiet) = settings::find("quiet") {
        f.set(quiet, "true");
    }
    Ok((a, f))
}

pub(crate) async fn batch(args: BatchArgs, mut signals: Signals) -> u8 {
    let file = &args.file;
    if args.jobs == 0 {
        return err(file, "-j must be at least 1");
    }
    let text_of_file = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => return err(file, format!("could not read it: {e}")),
    };
    let doc: toml::Table = match text_of_file.parse() {
        Ok(d) => d,
        Err(e) => return err(file, e),
    };
    for key in doc.keys() {
        if key != "defaults" && key != "run" {
            return err(
                file,
                format!("unknown table `{key}`: a batch file has [defaults] and [[run]] tables"),
            );
        }
    }
    let defaults = doc
        .get("defaults")
        .and_then(toml::Value::as_table)
        .cloned()
        .unwrap_or_default();
    let Some(runs) = doc
        .get("run")
        .and_then(toml::Value::as_array)
        .filter(|r| !r.is_empty())
    else {
        return err(file, "no [[run]] tables: add at least one");
    };
    let cwd = match std::env::current_dir() {
        Ok(d) => d,
        Err(e) => return err(file, format!("cannot read the current directory: {e}")),
    };
    let batch_id = warden_run::new_run_id(std::time::SystemTime::now());
    let batch_dir = args
        .dir
        .clone()
        .unwrap_or_else(|| cwd.join(".warden/batches").join(&batch_id));

    // Check every run before starting any.
    let mut entries: Vec<Entry> = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        let Some(table) = run.as_table() else {
            return err(file, format!("run {} is not a table", i + 1));
        };
        let mut merged = defaults.clone();
        merged.extend(table.clone());
        let name = match merged.get("name") {
            Some(n) if table.contains_key("name") => match text(n) {
                Some(n) => n,
                None => return err(file, format!("run {}: `name` must be a string", i + 1)),
            },
            _ => format!("run-{}", i + 1),
        };
        let dir_name = match run_dir_name(&name) {
            Ok(d) => d,
            Err(e) => return err(file, format!("run {}: {e}", i + 1)),
        };
        if let Some(other) = entries
            .iter()
            .find(|e| run_dir_name(&e.name).is_ok_and(|d| d == dir_name))
        {
            return err(
                file,
                if other.name == name {
                    format!("two runs are named `{name}`: names must be unique")
                } else {
                    format!(
                        "the runs `{}` and `{name}` would share the directory `{dir_name}` (a name keeps letters, digits, `-`, `_` and `.`; anything else becomes `-`): give them names that differ there",
                        other.name
                    )
                },
            );
        }
        let (run_args, flags) = match to_args(&merged, i) {
            Ok(x) => x,
            Err(e) => return err(file, e),
        };
        let agent: Agent = match run_args.agent.parse() {
            Ok(a) => a,
            Err(e) => return err(file, format!("run `{name}`: {e}")),
        };
        let run_cwd = match &run_args.cwd {
            Some(d) => cwd.join(d),
            None => cwd.clone(),
        };
        // A bad value is named by its key in the file, not by the flag
        // it fills.
        let key_origin = |key: &str| {
            if table.contains_key(key) {
                format!("`{key}`")
            } else {
                format!("`{key}` in [defaults]")
            }
        };
        let resolved = match RawSettings::gather(&flags, &run_cwd)
            .and_then(|r| r.name_flags_as(key_origin).resolve())
        {
            Ok(r) => r,
            Err(e) => return err(file, format!("run `{name}`: {e}")),
        };
        if let Some(why) = crate::cli::prompt_source_is_stdin(&run_args, agent) {
            let bound = resolved.limits.startup_timeout.or(resolved.limits.timeout);
            if let Err(code) = crate::cli::read_stdin_prompt(why, &mut signals, bound).await {
                return code;
            }
        }
        let plan = match Plan::new(&run_args, agent, &run_cwd, &resolved) {
            Ok(p) => p,
            Err(code) => {
                eprintln!("warden: (in run `{name}` of {})", file.display());
                return code;
            }
        };
        let options = SessionOptions {
            name: name.clone(),
            iterations: run_args.iterations,
            cwd: run_cwd,
            worktree: run_args.worktree.as_ref().map(|b| WorktreeRequest {
                branch: Some(b.clone()).filter(|b| !b.is_empty()),
                base: run_args.base.clone(),
                keep: run_args.keep_worktree,
            }),
            session_dir: Some(batch_dir.join(&dir_name)),
            output_retries: run_args.output_retries,
            can_resume: matches!(agent, Agent::Claude | Agent::Codex | Agent::Pi),
        };
        entries.push(Entry {
            name,
            agent,
            plan,
            options,
        });
    }
    let held = match warden_run::held_dir::HeldDir::create_empty(&batch_dir) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("warden: error: {}: {e}", file.display());
            return match e.io().and_then(std::io::Error::raw_os_error) {
                Some(code) if code == rustix::io::Errno::NOSPC.raw_os_error() => {
                    warden_run::report::OUTPUT_LOST_EXIT
                }
                _ => 2,
            };
        }
    };

    let started = Instant::now();
    let view = BatchView::new(args.quiet, entries.len());
    view.line(&format!(
        "batch {batch_id}: {} run(s), {} at a time; reports in {}",
        entries.len(),
        args.jobs,
        batch_dir.display()
    ));
    let controls: Vec<SessionControl> = entries.iter().map(|_| SessionControl::default()).collect();
    let stopping = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // SIGINT, SIGTERM and SIGHUP (the terminal closed) cancel every run;
    // one that came while the runs were being checked does too.
    let signals = {
        let controls = controls.clone();
        let stopping = stopping.clone();
        let view = view.clone();
        tokio::spawn(async move {
            let mut acted = 0;
            loop {
                let now = signals.received();
                while acted < now.count {
                    acted += 1;
                    let again = stopping.swap(true, std::sync::atomic::Ordering::SeqCst);
                    view.line(&if again {
                        format!("{} again: killing every run now", now.last)
                    } else {
                        format!(
                            "{}: cancelling every run (send it again to kill at once)",
                            now.last
                        )
                    });
                    for c in &controls {
                        c.cancel();
                    }
                }
                if signals.changed().await.is_none() {
                    return;
                }
            }
        })
    };
    let ticker = {
        let view = view.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_millis(250));
            loop {
                every.tick().await;
                view.tick();
            }
        })
    };

    let sem = Arc::new(Semaphore::new(args.jobs));
    let mut tasks = Vec::new();
    for (entry, control) in entries.into_iter().zip(controls) {
        let sem = sem.clone();
        let view = view.clone();
        let stopping = stopping.clone();
        tasks.push(tokio::spawn(async move {
            let _permit = sem.acquire_owned().await.expect("semaphore");
            let t0 = Instant::now();
            if stopping.load(std::sync::atomic::Ordering::SeqCst) {
                return BatchRun {
                    name: entry.name,
                    agent: entry.agent.name().into(),
                    verdict: Some("cancelled".into()),
                    duration_ms: 0,
                    session: None,
                    error: Some("cancelled before it started".into()),
                };
            }
            let name = entry.name.clone();
            let limits_stall = entry.plan_stall();
            let result = run_session(
                entry.options,
                control,
                |ctx| entry.plan.spec(ctx),
                |ev| view.event(&name, entry.agent, limits_stall, &ev),
            )
            .await;
            let duration_ms = t0.elapsed().as_millis() as u64;
            match result {
                Ok(s) => {
                    view.finished(&name, &s);
                    BatchRun {
                        name,
                        agent: entry.agent.name().into(),
                        verdict: s.verdict.map(|v| v.as_str().to_string()),
                        duration_ms,
                        session: Some(s),
                        error: None,
                    }
                }
                Err(e) => {
                    view.line(&format!("[{name}] could not start: {e}"));
                    BatchRun {
                        name,
                        agent: entry.agent.name().into(),
                        verdict: None,
                        duration_ms,
                        session: None,
                        error: Some(e.to_string()),
                    }
                }
            }
        }));
    }
    let mut results = Vec::new();
    for t in tasks {
        match t.await {
            Ok(r) => results.push(r),
            Err(e) => results.push(BatchRun {
                name: "?".into(),
                agent: "?".into(),
                verdict: None,
                duration_ms: 0,
                session: None,
                error: Some(format!("internal error: {e}")),
            }),
        }
    }
    ticker.abort();
    signals.abort();
    view.clear();

    let count = |v: &str| {
        results
            .iter()
            .filter(|r| r.verdict.as_deref() == Some(v))
            .count()
    };
    let report = BatchReport {
        schema_version: warden_events::SchemaVersion,
        batch_id,
        file: file.clone(),
        jobs: args.jobs,
        duration_ms: started.elapsed().as_millis() as u64,
        succeeded: count("succeeded"),
        cancelled: count("cancelled"),
        failed: results.len() - count("succeeded") - count("cancelled"),
        runs: results,
    };
    let path = batch_dir.join("batch.json");
    let written = serde_json::to_vec_pretty(&report)
        .map_err(std::io::Error::from)
        .and_then(|mut bytes| {
            bytes.push(b'\n');
            held.write_atomic("batch.json", &bytes)
        });
    print_table(&report);
    if args.json {
        // One line, made safe for a CI log as every `--json` line is; the
        // reserve of the queue, so a slow reader still gets it whole.
        match serde_json::to_vec(&report) {
            Ok(mut line) => {
                line.push(b'\n');
                crate::render::console::raw(
                    crate::render::console::Stream::Stdout,
                    crate::render::console::Priority::Important,
                    crate::render::github::json_line(line),
                );
            }
            Err(e) => eprintln!("warden: error: could not print the batch report as JSON: {e}"),
        }
    }
    let lost = report
        .runs
        .iter()
        .any(|r| r.session.as_ref().is_some_and(|s| s.output_lost.is_some()));
    match written {
        Ok(()) => eprintln!("warden: batch report: {}", path.display()),
        Err(e) => {
            eprintln!("warden: error: could not write {}: {e}", path.display());
            return warden_run::report::OUTPUT_LOST_EXIT;
        }
    }
    if lost {
        warden_run::report::OUTPUT_LOST_EXIT
    } else if report.cancelled > 0 {
        130
    } else if report.failed > 0 {
        1
    } else {
        0
    }
}

impl Entry {
    fn plan_stall(&self) -> Option<Duration> {
        self.plan.stall()
    }
}

fn print_table(r: &BatchReport) {
    let rows: Vec<[String; 6]> = r
        .runs
        .iter()
        .map(|run| {
            let s = run.session.as_ref();
            [
                run.name.clone(),
                run.verdict.clone().unwrap_or_else(|| "not run".into()),
                ms(run.duration_ms),
                s.map_or("-".into(), |s| {
                    format!("{}/{}", s.tokens.input, s.tokens.output)
                }),
                s.and_then(|s| s.cost_usd)
                    .map_or("-".into(), |c| format!("${c:.4}")),
                s.map_or("-".into(), |s| s.commits.len().to_string()),
            ]
        })
        .collect();
    let head = [
        "run",
        "verdict",
        "duration",
        "tokens in/out",
        "cost",
        "commits",
    ];
    let mut widths: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let parts: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        eprintln!("  {}", parts.join("  ").trim_end());
    };
    eprintln!();
    line(head.to_vec());
    for row in &rows {
        line(row.iter().map(String::as_str).collect());
    }
    eprintln!(
        "\nwarden: batch {}: {} succeeded, {} failed, {} cancelled, in {}",
        r.batch_id,
        r.succeeded,
        r.failed,
        r.cancelled,
        ms(r.duration_ms)
    );
}

/// One view for every run: a status line each on a terminal, prefixed
/// lines elsewhere.
#[derive(Clone)]
struct BatchView {
    inner: Arc<Mutex<ViewInner>>,
}

struct ViewInner {
    quiet: bool,
    multi: Option<MultiProgress>,
    started: Instant,
    runs: BTreeMap<String, (ViewState, Option<ProgressBar>)>,
}

impl BatchView {
    fn new(quiet: bool, _n: usize) -> Self {
        // A terminal that says it has no size (a pseudo-terminal nobody
        // sized) cannot hold status lines: it gets the plain lines.
        let sized = rustix::termios::tcgetwinsize(std::io::stderr())
            .is_ok_and(|w| w.ws_col > 0 && w.ws_row > 0);
        let tty =
            std::io::stderr().is_terminal() && crate::signals::in_foreground() && !quiet && sized;
        Self {
            inner: Arc::new(Mutex::new(ViewInner {
                quiet,
                multi: tty.then(|| {
                    MultiProgress::with_draw_target(crate::render::console::QueuedTerm::target())
                }),
                started: Instant::now(),
                runs: BTreeMap::new(),
            })),
        }
    }

    fn line(&self, text: &str) {
        let v = self.inner.lock().expect("lock");
        v.line(text);
    }

    fn tick(&self) {
        let v = self.inner.lock().expect("lock");
        let width = cols();
        for (name, (state, bar)) in &v.runs {
            if let Some(b) = bar {
                b.set_message(live::fit(
                    &format!("[{name}] {}", live::status(state, true)),
                    width.saturating_sub(3),
                ));
                b.tick();
            }
        }
    }

    fn event(&self, name: &str, agent: Agent, stall: Option<Duration>, ev: &SessionEvent<'_>) {
        let mut v = self.inner.lock().expect("lock");
        match ev {
            SessionEvent::IterationStarted { iteration, .. } => {
                let mut state = ViewState::new(agent, &warden_run::Limits::default());
                state.stall_timeout = stall;
                if *iteration > 1 {
                    state.iteration = Some((*iteration, 0));
                }
                let bar = v.multi.as_ref().map(|m| {
                    let b = m.add(ProgressBar::new_spinner());
                    b.set_style(ProgressStyle::with_template("{spinner} {msg}").expect("template"));
                    // No steady tick of its own: that is a thread per bar,
                    // each redrawing every bar; the view's one ticker turns
                    // every spinner.
                    b
                });
                let note = if *iteration > 1 {
                    format!(" (iteration {iteration})")
                } else {
                    String::new()
                };
                v.line(&format!("[{name}] started{note}"));
                v.runs.insert(name.to_string(), (state, bar));
            }
            SessionEvent::Event(e) => {
                let line = match &e.event {
                    warden_events::Event::ToolStarted {
                        name: tool, input, ..
                    } => Some(format!(
                        "[{name}] tool {tool}: {}",
                        input
                            .as_deref()
                            .unwrap_or("")
                            .chars()
                            .take(80)
                            .collect::<String>()
                    )),
                    warden_events::Event::StallWarning { silent_ms, .. } => Some(format!(
                        "[{name}] warning: no activity for {}",
                        ms(*silent_ms)
                    )),
                    warden_events::Event::Error { message, .. } => {
                        Some(format!("[{name}] agent error: {message}"))
                    }
                    warden_events::Event::Terminating { reason } => {
                        Some(format!("[{name}] ending: {reason}"))
                    }
                    _ => None,
                };
                if let Some((state, _)) = v.runs.get_mut(name) {
                    state.observe(e);
                }
                if let Some(l) = line {
                    v.line(&l);
                }
            }
            SessionEvent::IterationFinished { report, .. } => {
                if let Some((_, Some(bar))) = v.runs.remove(name) {
                    bar.finish_and_clear();
                    if let Some(m) = &v.multi {
                        m.remove(&bar);
                    }
                }
                v.line(&format!(
                    "[{name}] {} in {}: {}",
                    report.verdict.map_or("unknown", |x| x.as_str()),
                    ms(report.duration_ms),
                    report.reason
                ));
            }
            SessionEvent::Worktree(wt) => v.line(&format!(
                "[{name}] worktree {} on {}",
                wt.path.display(),
                wt.branch
            )),
            // A kind of session event this view does not know shows nothing.
            _ => {}
        }
    }

    fn finished(&self, name: &str, s: &SessionReport) {
        if s.iterations_requested > 1 || s.worktree.is_some() {
            self.line(&format!(
                "[{name}] session done: stopped by {}",
                s.stopped_because.replace('_', " ")
            ));
        }
    }

    fn clear(&self) {
        let v = self.inner.lock().expect("lock");
        if let Some(m) = &v.multi {
            let _ = m.clear();
        }
    }
}

impl ViewInner {
    fn line(&self, text: &str) {
        if self.quiet {
            return;
        }
        match &self.multi {
            Some(m) => {
                let _ = m.println(crate::render::github::neutralize(text));
            }
            None => {
                let s = self.started.elapsed().as_secs();
                eprintln!("[{:02}:{:02}] {text}", s / 60, s % 60);
            }
        }
    }
}

fn cols() -> usize {
    usize::from(crate::render::console::terminal_size().0)
}
