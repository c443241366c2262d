//! The `warden` command line: parse, resolve settings, run, render.
// The doc comments on flags are clap's help text, written for a terminal
// (`<id>`, `<name>`), not HTML.
#![allow(rustdoc::invalid_html_tags)]

mod batch;
mod cli;
mod doctor;
mod plan;
mod render;
mod replay;
mod report_cmd;
mod runner;
mod settings;
mod timeline;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // A run's shim is this same program started again; it must become the
    // shim before anything else happens.
    warden_process::run_if_shim();

    let cli = cli::Cli::parse();
    // One thread: the supervisors and the view hand events to each other
    // without waking another thread for each (which cost more than the
    // decoding); the work is I/O, and a run never blocks the thread long.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("warden: error: could not start the async runtime: {e}");
            return ExitCode::from(70);
        }
    };
    let code = runtime.block_on(cli::dispatch(cli));
    ExitCode::from(code)
}
