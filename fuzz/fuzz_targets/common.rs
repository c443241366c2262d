//! What every decoder fuzz target checks on one input.

use warden_events::{Agent, StreamDecoder};

const MAX_LINE: usize = 4096;

/// Decodes `data` whole and split in two at a point taken from the data,
/// and requires the same events both ways and bounded buffering.
pub fn check(agent: Agent, data: &[u8]) {
    let cut = data.first().map_or(0, |b| usize::from(*b) * data.len() / 256);
    let whole = run(agent, &[data]);
    let split = run(agent, &[&data[..cut], &data[cut..]]);
    assert_eq!(whole, split, "events depend on how the bytes were split");
}

fn run(agent: Agent, chunks: &[&[u8]]) -> Vec<String> {
    let mut d = StreamDecoder::new(agent, MAX_LINE);
    let mut out = Vec::new();
    let mut on_line = |k: warden_events::LineKind, e: &mut Vec<warden_events::Event>| {
        out.push(format!("{k:?} {e:?}"));
    };
    for c in chunks {
        d.push(c, &mut on_line);
        assert!(d.pending_bytes() <= MAX_LINE);
    }
    d.finish(&mut on_line);
    out
}
