//! Properties of every decoder over arbitrary input: no panic, memory
//! bounded by `max_line`, and the same events whatever way the bytes are
//! split into reads.

use proptest::prelude::*;
use warden_events::{Agent, Event, LineKind, StreamDecoder};

const MAX_LINE: usize = 512;

/// Pieces that look like what agents write, so the decoders get past
/// "not JSON" often: real fixture lines cut and glued at random, plus
/// arbitrary bytes.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    let samples: Vec<Vec<u8>> = Agent::ALL
        .iter()
        .flat_map(|a| {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures")
                .join(a.name());
            std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .flatten()
                .flat_map(|f| {
                    std::fs::read(f.path())
                        .unwrap_or_default()
                        .split(|b| *b == b'\n')
                        .map(<[u8]>::to_vec)
                        .collect::<Vec<_>>()
                })
                .collect::<Vec<_>>()
        })
        .filter(|l| l.len() < 2000)
        .collect();
    prop_oneof![
        3 => proptest::sample::select(samples.clone()).prop_map(|mut l| { l.push(b'\n'); l }),
        1 => (proptest::sample::select(samples), any::<proptest::sample::Index>()).prop_map(|(l, i)| {
            let cut = i.index(l.len() + 1);
            l[..cut].to_vec()
        }),
        1 => proptest::collection::vec(any::<u8>(), 0..64),
        1 => Just(b"\n".to_vec()),
        1 => Just(vec![b'{'; 700]),
    ]
}

fn decode(agent: Agent, data: &[u8], cuts: &[usize]) -> (Vec<(LineKind, Vec<Event>)>, String) {
    let mut d = StreamDecoder::new(agent, MAX_LINE);
    let mut out = Vec::new();
    let mut prev = 0;
    let mut on_line = |k: LineKind, e: &mut Vec<Event>| out.push((k, e.clone()));
    for &c in cuts {
        d.push(&data[prev..c], &mut on_line);
        assert!(
            d.pending_bytes() <= MAX_LINE,
            "buffered {} bytes",
            d.pending_bytes()
        );
        prev = c;
    }
    d.push(&data[prev..], &mut on_line);
    d.finish(&mut on_line);
    let summary = serde_json::to_string(d.summary()).unwrap();
    (out, summary)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn every_decoder_gives_the_same_events_whatever_the_split(
        pieces in proptest::collection::vec(piece(), 0..40),
        cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..12),
    ) {
        let data: Vec<u8> = pieces.concat();
        let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(data.len() + 1)).collect();
        cuts.sort_unstable();
        for agent in Agent::ALL {
            let whole = decode(agent, &data, &[]);
            let split = decode(agent, &data, &cuts);
            prop_assert_eq!(&split, &whole, "{} differs when split at {:?}", agent, cuts);
        }
    }
}
