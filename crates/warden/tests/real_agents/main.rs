//! The real agent CLIs from npm, driven offline against the fake model
//! server, under the real `warden` binary.
//!
//! The CLIs are looked up in `$WARDEN_AGENTS_BIN`, else in
//! `<workspace>/.agents/node_modules/.bin` (where `.ci/install-agents`
//! puts the pinned versions). A CLI that is missing skips its tests with a
//! message; under CI (`CI=true`) a missing CLI fails them.
//!
//! Every CLI gets a throwaway HOME and configuration that point it at the
//! fake server on 127.0.0.1 and turn off telemetry, update checks and
//! anything else that would reach out.

#![allow(dead_code)]
// The helpers are `pub` for the test modules, not an API.
#![allow(unreachable_pub)]

#[path = "../run/support.rs"]
mod support;

mod budgets;
mod checks;
mod containers;
mod fields;
mod kit;
mod otel;
mod retries;
mod scenarios;
mod transient_retries;
mod verdicts;
mod views12;
