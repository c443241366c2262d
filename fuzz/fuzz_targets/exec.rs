//! Fuzzes the exec decoder: arbitrary bytes must never panic, and the
//! buffered line never exceeds the limit.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    warden_fuzz_common::check(warden_events::Agent::Exec, data);
});

#[path = "common.rs"]
mod warden_fuzz_common;
