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
//!
//! [budget]              # what all the runs may spend together
//! max_cost = 5.0
//! ```
//!
//! Every run is checked before any starts; one run failing never stops the
//! others; Ctrl-C cancels them all and still writes every report.

use std::path::{Path, PathBuf};
use std::time::Duration;

use warden_events::Agent;
use warden_run::batch::{Batch, entry_dir_name};
use warden_run::executor::slurm::SlurmOptions;

use crate::args::BatchArgs;
use crate::config_watch::{ConfigWatch, Role};
use crate::error::{CliError, Outcome, usage};
use crate::render::Reporter;
use crate::render::batch::{BatchView, print_table};
use crate::settings::{RawSettings, SettingFlags};
use crate::signals::Signals;
use crate::wakeups::{Wake, Wakeups};

mod file;

/// A bad batch file, named.
fn err(file: &Path, msg: impl std::fmt::Display) -> CliError {
    usage(format_args!("{}: {msg}", file.display()))
}

/// How many runs at once when nothing says.
const DEFAULT_JOBS: usize = 4;

pub(crate) async fn batch(args: BatchArgs, signals: Signals) -> Outcome {
    crate::junit_file::check(args.junit.as_deref())?;
    if let Some(dir) = &args.resume {
        let dir = &absolute_dir(dir)?;
        let batch = Batch::resume(dir, args.jobs, args.rerun_failed)
            .await
            .map_err(CliError::from)?;
        for w in batch.warnings() {
            eprintln!("warden: warning: {w}");
        }
        let shown = batch
            .entries()
            .map(|(name, r)| (name.to_string(), r.agent, r.limits.armed_stall_timeout()))
            .collect();
        let note = format!(
            "resuming: {} of {} run(s) to run again",
            batch.to_run(),
            batch.len()
        );
        // The config files the runs' directories hold now: the runs to
        // come may write them.
        let named = std::env::var_os("WARDEN_CONFIG").map(PathBuf::from);
        let mut cwds: Vec<&Path> = batch.entries().map(|(_, r)| r.cwd.as_path()).collect();
        // Runs mostly share a directory: each file is read once.
        cwds.sort();
        cwds.dedup();
        let mut configs: Vec<ConfigWatch> = Vec::new();
        for cwd in cwds {
            match &named {
                Some(name) => configs.push(ConfigWatch::now(&cwd.join(name), Role::Named)),
                None => configs.extend(ConfigWatch::found_now(cwd)),
            }
        }
        return drive(batch, shown, &args, signals, Some(note), dir, configs).await;
    }
    let Some(file) = args.file.clone() else {
        return Err(usage("give a batch file, or --resume DIR"));
    };
    from_file(&file, &args, signals).await
}

/// `dir` from the current directory when relative.
fn absolute_dir(dir: &Path) -> Result<PathBuf, CliError> {
    std::path::absolute(dir).map_err(|e| {
        usage(format_args!(
            "{}: cannot make it absolute: {e}",
            dir.display()
        ))
    })
}

/// A batch read from its file.
async fn from_file(file: &Path, args: &BatchArgs, mut signals: Signals) -> Outcome {
    let jobs = args.jobs.unwrap_or(DEFAULT_JOBS);
    let text_of_file = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => return Err(err(file, format!("could not read it: {e}"))),
    };
    // What the next batch of this file runs: the runs may write it.
    let mut configs = vec![ConfigWatch::now(file, Role::BatchFile)];
    let file::Parsed {
        defaults,
        runs,
        budget,
        executor,
        slurm,
    } = file::parse(&text_of_file).map_err(|e| err(file, e))?;
    let cwd = match std::env::current_dir() {
        Ok(d) => d,
        Err(e) => return Err(err(file, format!("cannot read the current directory: {e}"))),
    };
    let executor = executor_of(args, executor.as_ref(), slurm).map_err(|e| err(file, e))?;
    // Absolute: a cluster's job starts elsewhere, and Slurm resolves its
    // paths inside the batch directory.
    let mut batch = match (&args.dir, &executor) {
        (Some(dir), _) => Batch::new(absolute_dir(dir)?, jobs),
        (
            None,
            Chosen::Slurm {
                shared_dir: Some(shared),
                ..
            },
        ) => Batch::under(&absolute_dir(shared)?, jobs),
        // At the project's root, as a run's directory is.
        (None, _) => Batch::in_default_dir(
            &RawSettings::gather(&SettingFlags::default(), &cwd)
                .map_or_else(|_| cwd.clone(), |r| r.project_root(&cwd)),
            jobs,
        ),
    }
    .source(file)
    .budget(budget);
    // A cluster's shared directory holds other batches: hidden from every
    // sandboxed agent also when `--dir` puts this batch elsewhere.
    if let Chosen::Slurm {
        shared_dir: Some(shared),
        ..
    } = &executor
    {
        batch = batch.hide(shared.clone());
    }
    if let Chosen::Slurm { options, .. } = executor {
        batch = batch.executor(std::sync::Arc::new(
            warden_run::executor::slurm::Slurm::new(*options),
        ));
    }

    // Check every run before starting any.
    let mut shown: Vec<(String, Agent, Option<Duration>)> = Vec::new();
    for (i, table) in runs.into_iter().enumerate() {
        let (keys, flags) = file::run(&defaults, table.clone(), i).map_err(|e| err(file, e))?;
        let name = keys.name(i);
        if let Err(e) = entry_dir_name(&name) {
            return Err(err(file, format!("run {}: {e}", i + 1)));
        }
        let agent = keys.agent(i, &name).map_err(|e| err(file, e))?;
        let run_cwd = keys.cwd(&cwd);
        // A bad value is named by its key in the file, not by the flag
        // it fills.
        let key_origin = |key: &str| {
            if table.contains_key(key) {
                format!("`{key}`")
            } else {
                format!("`{key}` in [defaults]")
            }
        };
        let resolved = match RawSettings::gather(&flags, &run_cwd).and_then(|r| {
            configs.extend(r.config_watch());
            r.name_flags_as(key_origin).resolve()
        }) {
            Ok(r) => r,
            Err(e) => return Err(err(file, format!("run `{name}`: {e}"))),
        };
        if let Some(why) =
            crate::prompt_input::prompt_source_is_stdin(keys.prompt(), keys.prompt_file(), agent)
        {
            let bound = resolved.limits.startup_timeout.or(resolved.limits.timeout);
            crate::prompt_input::read_stdin_prompt(why, &mut signals, bound).await?;
        }
        let mut request = keys
            .request(agent, &run_cwd, &resolved)
            .map_err(|e| e.context(format_args!("in run `{name}` of {}", file.display())))?;
        if !budget.is_empty() {
            // The batch's budget must be one this run's agent can show
            // being spent.
            request.batch_budget = Some(warden_run::budget::SharedBudget::new(
                warden_run::budget::BudgetScope::Batch,
                budget,
                warden_run::budget::Spent::default(),
            ));
        }
        // Checked once, with the batch's budget counted; the warnings said
        // here, by the run's name (Claude Code's cost only in its last
        // line, for a `max_cost`, say).
        let warnings = request.check().map_err(|e| {
            CliError::from(e).context(format_args!("in run `{name}` of {}", file.display()))
        })?;
        if !args.quiet {
            for w in warnings {
                let w = w.render(crate::request::flag_of);
                eprintln!("warden: warning: run `{name}`: {w}");
            }
        }
        // Every run of a batch is a session, in its own directory.
        shown.push((name.clone(), agent, request.limits.armed_stall_timeout()));
        if let Err(e) = batch.add(name, request) {
            return Err(err(file, e));
        }
    }
    drive(batch, shown, args, signals, None, file, configs).await
}

/// The settings of the batch's process rather than of its runs, from the
/// environment (`WARDEN_*`, `OTEL_*`) or warden.toml: the view's
/// `heartbeat` and OpenTelemetry export (a batch file's runs cannot set
/// them: there is one view and one exporter), and the config file they
/// came from.
fn process_settings() -> Result<(crate::settings::Resolved, Vec<ConfigWatch>), CliError> {
    let cwd = std::env::current_dir()
        .map_err(|e| usage(format_args!("cannot read the current directory: {e}")))?;
    let raw = RawSettings::gather(&SettingFlags::default(), &cwd).map_err(usage)?;
    let config = raw.config_watch();
    Ok((raw.resolve().map_err(usage)?, config))
}

/// Runs the batch to its end: one loop over its updates, the view's
/// tick and the signals; then the table, `batch.json`, the exit code.
async fn drive(
    batch: Batch,
    shown: Vec<(String, Agent, Option<Duration>)>,
    args: &BatchArgs,
    signals: Signals,
    note: Option<String>,
    about: &Path,
    mut configs: Vec<ConfigWatch>,
) -> Outcome {
    // The runs are the cluster's: the view follows them by their files.
    let remote = batch.executor_name() != "local";
    let (batch_id, batch_dir, entries, jobs) = (
        batch.id().to_string(),
        batch.dir().to_path_buf(),
        batch.len(),
        batch.jobs(),
    );
    let (process, config) = process_settings()?;
    configs.extend(config);
    let agents: Vec<Agent> = shown.iter().map(|(_, a, _)| *a).collect();
    // Bound first: a port in use stops the batch before anything starts.
    let listener = args
        .metrics_addr
        .map(crate::metrics_endpoint::bind)
        .transpose()?;
    let telemetry = crate::runner::start_telemetry(&process, &agents, listener.is_some())?;
    let endpoint = match (listener, &telemetry) {
        (Some(l), Some(t)) => Some(crate::metrics_endpoint::MetricsEndpoint::start(
            l,
            t.clone(),
        )?),
        _ => None,
    };
    if let Some(e) = &endpoint {
        // Always said, --quiet or not: with port 0 it is the only way to
        // know the port.
        eprintln!("warden: metrics: http://{}/metrics", e.addr());
    }
    let batch = match &telemetry {
        Some(t) => batch.telemetry(t.clone()),
        None => batch,
    };
    let mut running = batch
        .start()
        .await
        .map_err(|e| CliError::from(e).about(about.display()))?;

    let mut view = BatchView::new(args.quiet, shown, remote, process.heartbeat);
    if !view.wants_output_lines() {
        running.without_output_lines();
    }
    view.line(&format!(
        "batch {batch_id}: {entries} run(s), {jobs} at a time; reports in {}",
        batch_dir.display()
    ));
    if let Some(note) = note {
        view.line(&note);
    }
    // SIGINT, SIGTERM and SIGHUP (the terminal closed) cancel every run;
    // one that came while the runs were being checked does too.
    let canceller = running.canceller();
    let mut wake = Wakeups::new(signals);
    let on_wake = |view: &mut BatchView, w: Wake| match w {
        Wake::Tick => view.tick(),
        Wake::Signal { nth, name } => {
            view.notice(&if nth > 1 {
                format!("{name} again: killing every run now")
            } else {
                format!("{name}: cancelling every run (send it again to kill at once)")
            });
            canceller.cancel();
        }
    };
    loop {
        tokio::select! {
            update = running.next_update() => match update {
                Some(u) => view.update(&u),
                None => break,
            },
            w = wake.next() => on_wake(&mut view, w),
        }
    }
    let outcome = wake
        .while_waiting(running.wait(), |w| on_wake(&mut view, w))
        .await;
    view.clear();
    let report = &outcome.report;
    print_table(report);
    view.done(report, &batch_dir);
    if args.json {
        // One line, made safe for a CI log as every `--json` line is; the
        // reserve of the queue, so a slow reader still gets it whole.
        match serde_json::to_vec(report) {
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
    match &outcome.written {
        Ok(path) => eprintln!("warden: batch report: {}", path.display()),
        Err(e) => eprintln!(
            "warden: error: could not write {}: {e}",
            batch_dir.join("batch.json").display()
        ),
    }
    let code = match &args.junit {
        Some(path) => crate::junit_file::write(
            path,
            &warden_run::junit::batch(report, &warden_run::junit::log_tail),
            outcome.exit_code(),
        ),
        None => outcome.exit_code(),
    };
    // With the exit code as it ends (a JUnit file that could not be
    // written makes it 74).
    if let Some(out) = crate::render::github::output_file() {
        crate::render::github::write_outputs(
            &out,
            &warden_run::outputs::Outputs::for_batch(
                report,
                &batch_dir,
                outcome.written.as_deref().ok(),
                code,
            ),
        );
    }
    // Served to the last: a scrape now sees every run counted.
    if let Some(e) = endpoint {
        e.stop();
    }
    crate::runner::end_telemetry(telemetry);
    crate::config_watch::warn_changed(&configs);
    Ok(code)
}

/// The executor a batch asked for.
enum Chosen {
    Local,
    Slurm {
        options: Box<SlurmOptions>,
        /// `[slurm] shared_dir`: where the batch directory goes, on
        /// storage the nodes share.
        shared_dir: Option<std::path::PathBuf>,
    },
}

/// `--executor`, else `executor` in `[defaults]`, else local; with
/// `[slurm]`'s options read (and refused by name when unknown).
fn executor_of(
    args: &BatchArgs,
    in_file: Option<&toml::Value>,
    slurm: Option<toml::Table>,
) -> Result<Chosen, String> {
    let name = match (&args.executor, in_file) {
        (Some(n), _) => n.clone(),
        (None, Some(v)) => v
            .as_str()
            .ok_or("`executor` in [defaults] must be a string: local or slurm")?
            .to_string(),
        (None, None) => "local".into(),
    };
    match name.as_str() {
        "local" => Ok(Chosen::Local),
        "slurm" => {
            let mut table = slurm.unwrap_or_default();
            let shared_dir = match table.remove("shared_dir") {
                Some(toml::Value::String(d)) => Some(std::path::PathBuf::from(d)),
                Some(_) => return Err("`shared_dir` in [slurm] must be a path".into()),
                None => None,
            };
            let options: SlurmOptions = toml::Value::Table(table)
                .try_into()
                .map_err(|e| format!("[slurm]: {e}"))?;
            options.check().map_err(|e| format!("[slurm]: {e}"))?;
            Ok(Chosen::Slurm {
                options: Box::new(options),
                shared_dir,
            })
        }
        other => Err(format!("unknown executor `{other}`; known: local, slurm")),
    }
}
