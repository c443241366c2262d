//! The `warden` command line: parse, resolve settings, run, render.
// The doc comments on flags are clap's help text, written for a terminal
// (`<id>`, `<name>`), not HTML.
#![allow(rustdoc::invalid_html_tags)]

// Every `eprintln!` and `println!` of this crate goes through the console
// queue (`render::console`): std's versions block while nobody reads and
// panic when the reader is gone, and either would stop a run. And every
// such line is neutralized for CI logs (`render::github`): text from the
// agent reaches many of them. These definitions shadow std's for every
// module declared below them.
/// `eprintln!` that never blocks a run and never panics: see the module.
macro_rules! eprintln {
    () => {
        $crate::render::console::line(
            $crate::render::console::Stream::Stderr,
            $crate::render::console::Priority::Droppable,
            "",
        )
    };
    ($($arg:tt)*) => {
        $crate::render::console::text(
            $crate::render::console::Stream::Stderr,
            &::std::format!($($arg)*),
        )
    };
}

/// `println!` that never panics: see the module.
macro_rules! println {
    () => {
        $crate::render::console::line(
            $crate::render::console::Stream::Stdout,
            $crate::render::console::Priority::Droppable,
            "",
        )
    };
    ($($arg:tt)*) => {
        $crate::render::console::text(
            $crate::render::console::Stream::Stdout,
            &::std::format!($($arg)*),
        )
    };
}

mod args;
mod batch;
mod cli;
mod config_cmd;
mod config_watch;
mod doctor;
mod error;
mod gc;
mod junit_file;
mod man;
mod metrics_endpoint;
mod prompt_input;
mod render;
mod replay;
mod report_cmd;
mod report_html;
mod request;
mod runner;
mod settings;
mod shim_exe;
mod signals;
mod timeline;
mod wakeups;

use std::process::ExitCode;

/// The most blocking threads warden keeps (see `main`).
const BLOCKING_THREADS: usize = 8;

use clap::Parser;

fn main() -> ExitCode {
    // A run's shim is this same program started again; it must become the
    // shim before anything else happens.
    // (SIGINT, SIGTERM and SIGHUP are already being counted since before
    // `main`, until it is decided what they do: see `signals`.)
    warden_process::run_if_shim();
    // An agent of the same user could otherwise ptrace-attach warden
    // (`gdb -p`), which stops it and lets it rewrite warden's memory. Not
    // dumpable: only a privileged process can attach (the shim does the
    // same for itself; the agent is dumpable again after its exec).
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);

    // A cluster's job gets its batch's key in its environment: out of it
    // before any thread or process is started, so none inherits it.
    // SAFETY: no other thread exists yet (the runtime is built below).
    unsafe { cli::take_batch_key() };

    let cli = args::Cli::parse();
    // One thread: the supervisors and the view hand events to each other
    // without waking another thread for each (which cost more than the
    // decoding); the work is I/O, and a run never blocks the thread long.
    // The blocking threads do the file system work and the forks of a
    // run's start, off the thread that drives the clocks. A few are enough
    // (the machine has few cores, and the kernel serializes much of a
    // fork); a batch starting hundreds of runs at once would otherwise
    // make a thread for each, each with its stack, and each fork would
    // copy them all.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(BLOCKING_THREADS)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            signals::default_actions();
            eprintln!("warden: error: could not start the async runtime: {e}");
            render::console::finish();
            return ExitCode::from(70);
        }
    };
    let code = runtime
        .block_on(cli::dispatch(cli))
        .unwrap_or_else(error::CliError::report);
    // The outcome is decided: nothing still running in the background may
    // hold up the exit.
    runtime.shutdown_background();
    render::console::finish();
    ExitCode::from(code)
}
