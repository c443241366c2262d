//! What every benchmark prints beside its figures: the spread of its
//! samples (min and median, never one of them alone) and the machine it
//! ran on (CPUs it may use, load before and after), so a figure can be
//! read against the conditions it was measured in.

#![allow(dead_code)] // each benchmark uses the part it needs

use std::time::Duration;

/// Samples of one measure, taken in turn with its reference's.
#[derive(Debug, Default, Clone)]
pub(crate) struct Samples(Vec<Duration>);

impl Samples {
    pub(crate) fn new() -> Self {
        Self(Vec::new())
    }

    pub(crate) fn push(&mut self, d: Duration) {
        self.0.push(d);
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn min(&self) -> Duration {
        self.0.iter().copied().min().unwrap_or_default()
    }

    pub(crate) fn median(&self) -> Duration {
        let mut v = self.0.clone();
        v.sort();
        match v.len() {
            0 => Duration::ZERO,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2,
        }
    }

    pub(crate) fn max(&self) -> Duration {
        self.0.iter().copied().max().unwrap_or_default()
    }

    /// "min / median" in milliseconds.
    pub(crate) fn ms(&self) -> String {
        format!("{} / {}", ms(self.min()), ms(self.median()))
    }
}

/// `d` in milliseconds, with the precision its size calls for.
pub(crate) fn ms(d: Duration) -> String {
    let m = d.as_secs_f64() * 1e3;
    if m < 10.0 {
        format!("{m:.2} ms")
    } else if m < 100.0 {
        format!("{m:.1} ms")
    } else {
        format!("{m:.0} ms")
    }
}

/// The ratio of two sample sets as "min / median" (`ours` over
/// `reference`, each figure against the same figure of the other).
pub(crate) fn ratio(ours: &Samples, reference: &Samples) -> String {
    let r = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(1e-12);
    format!(
        "{:.2}× / {:.2}×",
        r(ours.min(), reference.min()),
        r(ours.median(), reference.median())
    )
}

/// The one-minute load average, from /proc/loadavg.
pub(crate) fn load() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// The line every benchmark opens with: the CPUs this process may run on
/// and the load now. Call [`Machine::end`] at the end for the load then.
pub(crate) struct Machine {
    load_before: f64,
}

impl Machine {
    pub(crate) fn start() -> Self {
        let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
        let load_before = load();
        println!("machine: {cpus} CPUs usable, load {load_before:.2} at the start\n");
        Self { load_before }
    }

    /// Prints the load at the start and now, the conditions every figure
    /// above was measured in.
    pub(crate) fn end(self) {
        println!(
            "\nload: {:.2} at the start, {:.2} at the end (one-minute average; figures taken at a load above the CPU count are noisy)",
            self.load_before,
            load()
        );
    }
}
