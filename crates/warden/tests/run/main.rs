//! End-to-end tests of `warden run exec`: the real binary, real processes,
//! real pipes and signals. Timeouts are tiny so the suite stays fast;
//! bounds on time are generous so a loaded machine does not fail them.

#![allow(dead_code)]
// The helpers are `pub` for the test modules, not an API.
#![allow(unreachable_pub)]

mod support;

mod action;
mod agents;
mod batch;
mod batch_ci;
mod batch_state;
mod budgets;
mod checks;
mod clocks;
mod config_cmd;
mod config_discovery;
mod containers;
mod containers_limits;
mod containers_setup;
mod containers_user;
mod docs_links;
mod endtoend;
mod gh_outputs;
mod help_man;
mod hooks_merge;
mod hostile_console;
mod hostile_files;
mod hostile_git;
mod hostile_procs;
mod hostile_records;
mod hostile_sandbox;
mod hostile_tree;
mod install_script;
mod json_out;
mod junit;
mod launch;
mod merge_checked;
mod metrics;
mod orphans;
mod otel;
mod output;
mod passthrough;
mod phases;
mod plain_words;
mod preserve_status;
mod replay;
mod report_moved;
mod report_pages;
mod resource_limits;
mod resume;
mod retention;
mod retries;
mod sandbox;
mod sandbox_env;
mod schemas;
mod session;
mod settings;
mod shim_exe;
mod signals;
mod slurm_batch;
mod slurm_cluster;
mod slurm_state;
mod startup;
mod startup2;
mod terminal;
mod transient_retries;
mod typed_report;
mod verdicts;
mod view;
mod views12;
mod views_steps;
