//! Fuzzes all decoders at once: the first byte picks the agent.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Some((first, rest)) = data.split_first() {
        let agent = warden_events::Agent::ALL[usize::from(*first) % warden_events::Agent::ALL.len()];
        warden_fuzz_common::check(agent, rest);
    }
});

#[path = "common.rs"]
mod warden_fuzz_common;
