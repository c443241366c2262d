//! Wiring: each command's arguments to the library, its view and its
//! outcome. Nothing here is imported by another module of the CLI.

use warden_events::Agent;

use crate::args::{Cli, Command, RunArgs};
use crate::error::{CliError, Kind, Outcome, usage};
use crate::prompt_input::{prompt_source_is_stdin, read_stdin_prompt};
use crate::render::console::{self, Priority, Stream};
use crate::runner::{run_once, run_session_cli};
use crate::settings::RawSettings;
use warden_run::batch_key::{BatchKey, KEY_ENV, KEY_FILE_ENV, ReportSigner, Role};

/// The batch key a cluster's job was given ([`KEY_ENV`]), taken out of
/// warden's environment before anything else ran: nothing warden starts
/// inherits it.
static BATCH_KEY: std::sync::OnceLock<Result<BatchKey, String>> = std::sync::OnceLock::new();

/// Takes [`KEY_ENV`] and [`KEY_FILE_ENV`] out of the environment (the key
/// they give is kept for `run-request`).
///
/// # Safety
///
/// No other thread may exist: called first thing in `main`.
pub(crate) unsafe fn take_batch_key() {
    let value = std::env::var_os(KEY_ENV);
    let file = std::env::var_os(KEY_FILE_ENV);
    // SAFETY: the caller guarantees this is the only thread, so nothing
    // reads the environment meanwhile.
    unsafe {
        std::env::remove_var(KEY_ENV);
        std::env::remove_var(KEY_FILE_ENV);
    }
    let key = match (value, file) {
        (Some(value), _) => BatchKey::from_hex(value.to_string_lossy().trim())
            .map_err(|e| format!("{KEY_ENV}: {e}")),
        // A cluster's job: the key file its script names.
        (None, Some(file)) => BatchKey::load_file(std::path::Path::new(&file))
            .map_err(|e| {
                format!(
                    "{KEY_FILE_ENV}: {e}. A cluster's job reads its batch's key from the key file of the user who started the batch, at the same path: keep XDG_STATE_HOME (or HOME) on storage the nodes share"
                )
            }),
        (None, None) => return,
    };
    let _ = BATCH_KEY.set(key);
}
use crate::signals::Signals;

/// Runs the command; its exit code, or the error that stopped it.
pub(crate) async fn dispatch(cli: Cli) -> Outcome {
    // Only a run or a batch catches signals (see `for_a_run`); any other
    // command gets the default actions back before it does anything.
    if !matches!(
        cli.command,
        Command::Run(_) | Command::Batch(_) | Command::RunRequest { .. }
    ) {
        crate::signals::default_actions();
    }
    match cli.command {
        Command::Run(args) => run(*args, for_a_run()).await,
        Command::Batch(args) => crate::batch::batch(args, for_a_run()).await,
        Command::Replay(args) => crate::replay::replay(&args),
        Command::Doctor(args) => crate::doctor::doctor(&args).await,
        Command::Report(args) => Ok(crate::report_cmd::report(&args)),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            // Into memory first: clap_complete panics on a failed write.
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "warden", &mut script);
            console::raw(Stream::Stdout, Priority::Droppable, script);
            Ok(0)
        }
        Command::Man { command, dir } => man(command.as_deref(), dir.as_deref()),
        Command::Gc(args) => crate::gc::gc(&args).await,
        Command::Config(args) => crate::config_cmd::config(&args),
        Command::RunRequest { file } => run_request(&file, for_a_run()).await,
    }
}

/// What a cluster job of a batch runs: the serialized request, as a
/// session in the entry's directory, viewed as plain lines (the job's
/// output file), exiting with the session's code.
async fn run_request(file: &std::path::Path, signals: Signals) -> Outcome {
    const MAX_REQUEST: u64 = 16 << 20;
    let bytes = warden_run::regular_file::read(file, MAX_REQUEST).map_err(|e| {
        usage(format_args!(
            "could not read the request {}: {e}",
            file.display()
        ))
    })?;
    // From a batch, the job has the batch's key: the request runs only as
    // the submitting warden signed it, and its sealed values open.
    let key = match BATCH_KEY.get() {
        Some(Ok(k)) => Some(std::sync::Arc::new(k.clone())),
        Some(Err(e)) => return Err(usage(e)),
        None => None,
    };
    let index = file
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.parse::<usize>().ok());
    let bytes = match (&key, index) {
        (Some(k), Some(i)) => k
            .read_signed(file, Role::Request(i), MAX_REQUEST)
            .map_err(|e| usage(format_args!("{e}; not run")))?,
        (Some(_), None) => {
            return Err(usage(format_args!(
                "{}: a batch's request is named N.json, N its entry's index; not run",
                file.display()
            )));
        }
        (None, _) => bytes,
    };
    let mut request =
        warden_run::batch_key::open_request(key.as_deref(), index.unwrap_or(0), &bytes, file)
            .map_err(usage)?;
    if let (Some(key), Some(index)) = (key, index) {
        request.report_signer = Some(ReportSigner { key, index });
    }
    request.shim_exe = crate::shim_exe::path();
    let settings = crate::settings::Resolved {
        limits: request.limits.clone(),
        ..Default::default()
    };
    cancelled_before_start(&signals)?;
    // The batch's exporter settings and span, when it exports: the
    // session's spans nest under the batch's (made by the submitting
    // warden).
    // On a node, an exporter that cannot start is said and the run goes
    // on without it: telemetry never changes a run's outcome (the
    // submitting warden checked the settings before anything started).
    let telemetry = match &request.otel {
        Some(o) => o.start().unwrap_or_else(|e| {
            eprintln!("warden: warning: OpenTelemetry export is off for this run: {e}");
            None
        }),
        None => None,
    };
    let outcome = run_session_cli(
        request,
        settings,
        signals,
        &mut Vec::new(),
        None,
        telemetry.as_ref(),
    )
    .await;
    crate::runner::end_telemetry(telemetry);
    outcome
}

/// A run or a batch catches signals to cancel cleanly, and its output
/// must never make it wait. The signals are taken over first, while no
/// other thread exists that could take one in the handover.
fn for_a_run() -> Signals {
    let signals = Signals::install();
    console::for_a_run();
    signals
}

/// `warden man`: a page on stdout, or every page into a directory.
fn man(command: Option<&str>, dir: Option<&std::path::Path>) -> Outcome {
    let pages = crate::man::pages();
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir)
            .map_err(|e| usage(format_args!("could not create {}: {e}", dir.display())))?;
        for (name, page) in &pages {
            let path = dir.join(format!("{name}.1"));
            std::fs::File::create(&path)
                .and_then(|mut f| crate::man::render(name, page, &mut f))
                .map_err(|e| usage(format_args!("could not write {}: {e}", path.display())))?;
        }
        return Ok(0);
    }
    let wanted = command.map_or_else(|| "warden".to_string(), |c| format!("warden-{c}"));
    let Some((name, page)) = pages.iter().find(|(name, _)| *name == wanted) else {
        return Err(usage(format_args!(
            "no command `{}`; pages: {}",
            command.unwrap_or_default(),
            pages
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    };
    let mut page_text = Vec::new();
    crate::man::render(name, page, &mut page_text).map_err(|e| {
        CliError::new(
            Kind::Internal,
            format_args!("could not write the man page: {e}"),
        )
    })?;
    console::raw(Stream::Stdout, Priority::Droppable, page_text);
    Ok(0)
}

/// The error to stop with when a signal came before anything started.
pub(crate) fn cancelled_before_start(signals: &Signals) -> Result<(), CliError> {
    let r = signals.received();
    if r.count > 0 {
        return Err(CliError::new(
            Kind::Cancelled,
            format_args!(
                "{}: cancelled before the run started; nothing was started",
                r.last
            ),
        ));
    }
    Ok(())
}

async fn run(args: RunArgs, mut signals: Signals) -> Outcome {
    let agent: Agent = args.agent.parse().map_err(|e| {
        usage(format_args!(
            "{e}\n  for any command: warden run exec -- CMD [ARGS...]"
        ))
    })?;
    let cwd = crate::request::working_dir(args.cwd.as_deref())?;
    let raw = RawSettings::gather(&args.settings, &cwd).map_err(usage)?;
    let config = raw.config_watch();
    let project = raw.project_root(&cwd);
    let resolved = raw.resolve().map_err(usage)?;
    if args.iterations == 0 {
        return Err(usage("--iterations must be at least 1"));
    }
    // A check's clocks or feedback on the command line, and no check from
    // anywhere: the flag would do nothing. (In `warden.toml` they may wait
    // for the runs that have a check.)
    if resolved.check.command.is_empty()
        && let Some((name, _)) = args.settings.given().find(|(n, _)| n.starts_with("check_"))
    {
        return Err(usage(format_args!(
            "--{} needs --check CMD: it sets how the check runs, and no check is given",
            name.replace('_', "-")
        )));
    }
    let junit = crate::junit_file::check(args.junit.as_deref())?;
    if let Some(why) =
        prompt_source_is_stdin(args.prompt_given(), args.prompt_file.as_deref(), agent)
    {
        let bound = resolved.limits.startup_timeout.or(resolved.limits.timeout);
        read_stdin_prompt(why, &mut signals, bound).await?;
    }

    // What stays the same for every run of the session.
    let mut request = crate::request::build(&args, agent, &cwd, &resolved)?;
    // `.warden/` at the project's root, from whichever directory of it
    // warden was started in.
    request.project = Some(project.clone());
    let retention = (resolved.keep_runs, resolved.keep_days);
    let telemetry = crate::runner::start_telemetry(&resolved, &[agent], false)?;
    let mut ended = Vec::new();
    let outcome = if request.is_session() {
        cancelled_before_start(&signals)?;
        let t = telemetry.as_ref();
        run_session_cli(request, resolved, signals, &mut ended, junit.as_deref(), t).await
    } else {
        cancelled_before_start(&signals)?;
        let t = telemetry.as_ref();
        run_once(request, &resolved, signals, &mut ended, junit.as_deref(), t).await
    };
    crate::runner::end_telemetry(telemetry);
    crate::config_watch::warn_changed(config.as_slice());
    // Retention, when the settings ask for it: after the run, whose own
    // directory is the newest and no longer in use.
    if outcome.is_ok() {
        crate::gc::after_run(&cwd, &project, retention, ended).await;
    }
    outcome
}
