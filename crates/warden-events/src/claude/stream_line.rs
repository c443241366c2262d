//! The lines of partial messages (`--include-partial-messages`), read
//! from their bytes.
//!
//! With partial messages, about 87% of Claude Code's lines are
//! `stream_event`s, and almost all of them carry an API event warden does
//! not read (text and tool-input deltas, block starts and stops,
//! `message_stop`, pings). Whether such a line is well formed still counts
//! as activity, so each is checked by [`skim`](crate::skim), much faster
//! than serde parses it, and nothing else is done with it. Only an event
//! that may carry usage (`message_start`, `message_delta`, or one whose
//! type is not plain to see) goes to serde, alone, not its whole line. A
//! quiet line is then kept as a shape, which the lines like it are
//! compared with, more cheaply still ([`super::shape`]).
//!
//! The line must be one the full parse ([`super::Claude::parsed`]) would
//! read the same way; anything this does not vouch for goes there.

use super::line_field;

/// A `stream_event` line (with `--include-partial-messages`, most lines of
/// a stream) read from its bytes by [`skim`](crate::skim) alone, with what
/// the full parse would have taken from it. Most carry an API event that
/// warden does not read (text and tool-input deltas, block starts and
/// stops, `message_stop`, pings), and are only checked, never parsed; only
/// an event that may carry usage is handed, raw, to serde.
pub(super) struct StreamLine<'a> {
    /// The text of `session_id`, and of `parent_tool_use_id` (UTF-8, as
    /// the check found the line).
    pub(super) session_id: Option<&'a [u8]>,
    pub(super) parent: Option<&'a [u8]>,
    /// The raw event, unless it is one warden does not read.
    pub(super) event: Option<&'a [u8]>,
}

impl<'a> StreamLine<'a> {
    /// `Some` only for a line the full parse would accept as a
    /// `stream_event`, read the same way: one JSON object whose `type` is
    /// `"stream_event"`, in any order with its other fields, no field of
    /// [`Line`](super::Line) twice, `session_id` and `parent_tool_use_id`
    /// `null` or strings (without escapes, so that their text is their
    /// raw bytes), and no other field of [`Line`](super::Line) but
    /// `event`. Anything else (another type, an unusual field, an escape)
    /// goes to the full parse.
    pub(super) fn of(line: &'a [u8]) -> Option<Self> {
        // Lines of other types are told apart by their start, as Claude
        // Code writes them; in another order, by the check below.
        if line.starts_with(br#"{"type":""#) && !line.starts_with(br#"{"type":"stream_event""#) {
            return None;
        }
        let (mut ty, mut event, mut session, mut parent) = (None, None, None, None);
        let once = |slot: &mut Option<&'a [u8]>, value: &'a [u8]| slot.replace(value).is_none();
        // A line of another type is left as soon as its type is seen.
        let well_formed = crate::skim::object(line, |key, value| match key {
            b"type" => matches!(value, br#""stream_event""#) && once(&mut ty, value),
            b"event" => once(&mut event, value),
            b"session_id" => once(&mut session, value),
            b"parent_tool_use_id" => once(&mut parent, value),
            key => !line_field(key),
        });
        if !well_formed || ty.is_none() {
            return None;
        }
        Some(Self {
            session_id: plain_string(session)?,
            parent: plain_string(parent)?,
            event: event.filter(|e| !quiet_event(e)),
        })
    }
}

/// The text of a raw optional string field, absent or `null` or a string
/// without escapes (so that its text is its bytes); `None` for any other
/// value (which the full parse reads, or refuses).
fn plain_string(raw: Option<&[u8]>) -> Option<Option<&[u8]>> {
    match raw {
        None | Some(b"null") => Some(None),
        Some(raw) => {
            let text = raw.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
            // Short: a plain loop is quicker than a search.
            let escaped = text.iter().fold(false, |e, b| e | (*b == b'\\'));
            (!escaped).then_some(Some(text))
        }
    }
}

/// Whether the raw API event `event` (well-formed JSON) is sure to carry
/// nothing [`super::Claude::stream_event`] reads: it starts with a `type`
/// other than the two that carry usage, written without escapes. Any
/// other event, in whatever shape, is left to serde.
fn quiet_event(event: &[u8]) -> bool {
    let Some(rest) = event.strip_prefix(br#"{"type":""#) else {
        return false;
    };
    match rest.first() {
        // A type that does not start with `m`, however it goes on (the
        // string is well formed, and its first character is written as
        // it is): most, such as `content_block_delta`.
        Some(c) if *c != b'm' && *c != b'\\' => true,
        _ => {
            let Some(end) = rest.iter().position(|b| matches!(b, b'"' | b'\\')) else {
                return false;
            };
            rest[end] == b'"' && !matches!(&rest[..end], b"message_start" | b"message_delta")
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::claude::Claude;
    use crate::event::Event;
    use crate::summary::{Out, Summary};

    /// What decoding `lines` in turn gave: for each line, whether it was
    /// well formed and its events; then the summary.
    type Decoded = (Vec<(bool, Vec<Event>)>, Summary);

    /// `lines` decoded as the decoder does, or (`full`) each by the full
    /// parse alone.
    fn decode(lines: &[Vec<u8>], full: bool) -> Decoded {
        let mut claude = Claude::default();
        let mut summary = Summary::default();
        let mut each = Vec::new();
        for line in lines {
            summary.line += 1;
            let mut events = Vec::new();
            let mut out = Out {
                summary: &mut summary,
                events: &mut events,
            };
            let ok = if full {
                claude.parsed(line, &mut out)
            } else {
                crate::decoder::Decode::line(&mut claude, line, &mut out)
            };
            each.push((ok, events));
        }
        (each, summary)
    }

    fn assert_same(lines: &[&str]) {
        let lines: Vec<Vec<u8>> = lines.iter().map(|l| l.as_bytes().to_vec()).collect();
        let (fast, full) = (decode(&lines, false), decode(&lines, true));
        for (i, (f, p)) in fast.0.iter().zip(&full.0).enumerate() {
            assert_eq!(
                f,
                p,
                "line {} read otherwise: {}",
                i + 1,
                lines[i].escape_ascii()
            );
        }
        assert_eq!(fast.1, full.1, "the summaries differ");
    }

    /// Whether `line` is read here, and whether its event is handed on.
    fn read(line: &str) -> Option<bool> {
        StreamLine::of(line.as_bytes()).map(|s| s.event.is_some())
    }

    const START: &str = r#"{"type":"stream_event","event":{"type":"message_start","message":{"model":"claude-sonnet-4-5","id":"msg_1","type":"message","role":"assistant","content":[],"usage":{"input_tokens":812,"cache_creation_input_tokens":0,"cache_read_input_tokens":12400,"output_tokens":1}}},"session_id":"s1","parent_tool_use_id":null,"uuid":"u1"}"#;
    const DELTA: &str = r#"{"type":"stream_event","event":{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"input_tokens":812,"output_tokens":61}},"session_id":"s1","parent_tool_use_id":null,"uuid":"u2"}"#;

    #[test]
    fn quiet_events_are_checked_and_the_rest_handed_on() {
        let quiet = [
            r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a \"b\""}},"session_id":"s","parent_tool_use_id":null,"uuid":"u"}"#,
            r#"{"type":"stream_event","event":{"type":"message_stop"},"parent_tool_use_id":"toolu_1"}"#,
            // Fields in another order, and escaped quotes in a text delta
            // that look like a usage-bearing event.
            r#"{"uuid":"u","event":{"type":"content_block_delta","delta":{"text":"\",\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}"}},"type":"stream_event"}"#,
        ];
        for l in quiet {
            assert_eq!(read(l), Some(false), "{l}");
        }
        let handed_on = [
            START,
            DELTA,
            // The event's type is not first, is written with an escape,
            // or the event is no object: serde decides.
            r#"{"type":"stream_event","event":{"usage":{"output_tokens":9},"type":"message_delta"}}"#,
            r#"{"type":"stream_event","event":{"type":"message\u005fdelta","usage":{"output_tokens":9}}}"#,
            r#"{"type":"stream_event","event":{"type":"\u006dessage_delta","usage":{"output_tokens":9}}}"#,
            r#"{"type":"stream_event","event":{"type" :"message_delta","usage":{"output_tokens":9}}}"#,
            r#"{"type":"stream_event","event":[]}"#,
            r#"{"event":{"type":"message_delta","usage":{"output_tokens":9}},"type":"stream_event"}"#,
        ];
        for l in handed_on {
            assert_eq!(read(l), Some(true), "{l}");
        }
        let full_parse = [
            // The full parse refuses these, and must be the one to say so.
            r#"{"type":"stream_event","event":{"type":"ping"},"session_id":"a","session_id":"b"}"#,
            r#"{"type":"stream_event","event":{"type":"ping"},"type":"x"}"#,
            r#"{"type":"stream_event","event":{"type":"ping"},"event":{"type":"ping"}}"#,
            r#"{"type":"stream_event","event":{"type":"ping"},"session_id":1}"#,
            r#"{"type":"stream_event","event":{"type":"ping"},"usage":[]}"#,
            r#"{"type":"stream_event","event":{"type":"ping"}"#,
            r#"{"type":"stream_event","event":{"type":"ping"}} x"#,
            // Another type, or one written otherwise.
            r#"{"type":"stream_event_x","event":{"type":"ping"}}"#,
            r#"{"event":{"type":"ping"},"type":"stream\u005fevent"}"#,
            r#"{"event":{"type":"ping"}}"#,
            // Escapes in the fields the full parse reads as text.
            r#"{"type":"stream_event","event":{"type":"ping"},"parent_tool_use_id":"toolu\u005f1"}"#,
            r#"{"type":"stream_event","event":{"type":"ping"},"session_id":"s\"1"}"#,
            // Other fields of the line, read by the full parse.
            r#"{"type":"stream_event","event":{"type":"ping"},"message":{"id":"m"}}"#,
            r#"{"type":"stream_event","event":{"type":"ping"},"model":"m"}"#,
            " {\"type\":\"stream_event\",\"event\":{\"type\":\"ping\"}}",
        ];
        for l in full_parse {
            assert_eq!(read(l), None, "{l}");
        }
    }

    #[test]
    fn usage_of_partial_messages_is_counted_as_the_full_parse_counts_it() {
        let stop = r#"{"type":"stream_event","event":{"type":"message_stop"},"session_id":"s1","parent_tool_use_id":null}"#;
        let sub_start = START.replace("msg_1", "msg_2").replace(
            r#""parent_tool_use_id":null"#,
            r#""parent_tool_use_id":"toolu_9""#,
        );
        let sub_delta = r#"{"parent_tool_use_id":"toolu_9","event":{"type":"message_delta","usage":{"output_tokens":7}},"type":"stream_event"}"#;
        let lines = [START, stop, &sub_start, DELTA, sub_delta];
        assert_same(&lines);
        let (_, summary) = decode(
            &lines
                .iter()
                .map(|l| l.as_bytes().to_vec())
                .collect::<Vec<_>>(),
            false,
        );
        assert_eq!(summary.reported.session_id.as_deref(), Some("s1"));
        assert_eq!(
            summary.reported.tokens.output,
            Some(61 + 7),
            "the message_delta lines carry the final output counts"
        );
    }

    #[test]
    fn a_message_delta_past_the_line_limit_is_not_counted() {
        use crate::{Agent, LineKind, StreamDecoder};
        let long_delta = DELTA.replace("tool_use", &"x".repeat(600));
        let stream = format!("{START}\n{long_delta}\n{DELTA}\n");
        let mut d = StreamDecoder::new(Agent::Claude, 512);
        let mut kinds = Vec::new();
        d.push(stream.as_bytes(), |k, _| kinds.push(k));
        d.finish(|k, _| kinds.push(k));
        assert_eq!(
            kinds,
            [
                LineKind::WellFormed,
                LineKind::Oversized {
                    len: long_delta.len() as u64
                },
                LineKind::WellFormed
            ]
        );
        assert_eq!(d.summary().reported.tokens.output, Some(61));
        // Cut short by the end of the stream, the line is not well formed.
        let mut d = StreamDecoder::new(Agent::Claude, 512);
        let mut kinds = Vec::new();
        d.push(START.as_bytes(), |k, _| kinds.push(k));
        d.push(b"\n", |k, _| kinds.push(k));
        d.push(&DELTA.as_bytes()[..DELTA.len() - 1], |k, _| kinds.push(k));
        d.finish(|k, _| kinds.push(k));
        assert_eq!(kinds, [LineKind::WellFormed, LineKind::Malformed]);
        assert_eq!(d.summary().reported.tokens.output, Some(1));
    }

    /// One field of a line, as `"key":value`.
    fn field() -> impl Strategy<Value = String> {
        let session = prop::sample::select(vec![
            r#""session_id":"s1""#,
            r#""session_id":"s2""#,
            r#""session_id":null"#,
            r#""session_id":"""#,
            r#""session_id":"s\u0031""#,
            r#""session_id":1"#,
        ]);
        let parent = prop::sample::select(vec![
            r#""parent_tool_use_id":null"#,
            r#""parent_tool_use_id":"toolu_1""#,
            r#""parent_tool_use_id":"toolu_2""#,
            r#""parent_tool_use_id":"toolu\u005f1""#,
            r#""parent_tool_use_id":[]"#,
        ]);
        let other = prop::sample::select(vec![
            r#""uuid":"u""#,
            r#""uuid":{"type":"message_delta","usage":{"output_tokens":5}}"#,
            r#""model":"m""#,
            r#""usage":{"output_tokens":3}"#,
            r#""subtype":"init""#,
            r#""event":{"type":"ping"}"#,
            r#""type":"stream_event""#,
        ]);
        prop_oneof![
            4 => session.prop_map(str::to_string),
            4 => parent.prop_map(str::to_string),
            1 => other.prop_map(str::to_string),
        ]
    }

    /// An API event: the ones that carry usage, in several shapes, and
    /// deltas whose text looks like them.
    fn event() -> impl Strategy<Value = String> {
        let figure = prop::sample::select(vec![
            "0", "5", "61", "812", "-1", "1.5", "1e3", "\"7\"", "null",
        ]);
        let usage = prop::collection::vec(
            (
                prop::sample::select(vec![
                    "input_tokens",
                    "output_tokens",
                    "cache_read_input_tokens",
                    "cache_creation_input_tokens",
                    "service_tier",
                ]),
                figure,
            ),
            0..4,
        )
        .prop_map(|fs| {
            let fs: Vec<String> = fs.iter().map(|(k, v)| format!(r#""{k}":{v}"#)).collect();
            format!("{{{}}}", fs.join(","))
        });
        let id = prop::sample::select(vec!["msg_1", "msg_2", "msg_3"]);
        let model = prop::sample::select(vec!["claude-sonnet-4-5", "<synthetic>"]);
        let start = (id, model, usage.clone()).prop_map(|(id, model, u)| {
            format!(
                r#"{{"type":"message_start","message":{{"model":"{model}","id":"{id}","content":[],"usage":{u}}}}}"#
            )
        });
        let delta = usage.clone().prop_map(|u| {
            format!(
                r#"{{"type":"message_delta","delta":{{"stop_reason":"end_turn"}},"usage":{u}}}"#
            )
        });
        let reordered = usage.prop_map(|u| format!(r#"{{"usage":{u},"type":"message_delta"}}"#));
        let quiet = prop::sample::select(vec![
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\"},\"type\":\"message_delta\",\"usage\":{\"output_tokens\":99}"}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"usage\": {\"output_tokens\": 9"}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"message_stop"}"#,
            r#"{"type":"ping"}"#,
            r#"{"type":"message\u005fdelta","usage":{"output_tokens":42}}"#,
            r#"{"type":"\u006dessage_delta","usage":{"output_tokens":42}}"#,
            r#"{"type":"","usage":{"output_tokens":42}}"#,
            r#"{"type":"message_delta","type":"ping","usage":{"output_tokens":42}}"#,
            r#"{"type":"ping","type":"message_delta","usage":{"output_tokens":42}}"#,
            r#"{"type":"message_start"}"#,
            r#"[]"#,
            r#"null"#,
        ])
        .prop_map(str::to_string);
        prop_oneof![3 => start, 3 => delta, 1 => reordered, 4 => quiet]
    }

    /// A line of a stream with partial messages: mostly `stream_event`s,
    /// with fields in any order, sometimes cut short or with a byte
    /// changed; now and then another kind of line.
    fn line() -> impl Strategy<Value = Vec<u8>> {
        let stream_event = (
            event(),
            prop::collection::vec(field(), 0..4),
            any::<prop::sample::Index>(),
        )
            .prop_flat_map(|(e, fields, at)| {
                let mut all = fields;
                all.insert(0, r#""type":"stream_event""#.to_string());
                all.insert(1, format!(r#""event":{e}"#));
                let keep_order = Just(all.clone());
                let shuffled = Just(all).prop_shuffle();
                (prop_oneof![keep_order, shuffled], Just(at))
            })
            .prop_map(|(fields, _)| format!("{{{}}}", fields.join(",")).into_bytes());
        let other = prop::sample::select(vec![
            r#"{"type":"system","subtype":"init","session_id":"s1","model":"claude-sonnet-4-5"}"#,
            r#"{"type":"assistant","message":{"id":"msg_1","model":"claude-sonnet-4-5","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":3,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"s1"}"#,
            r#"{"type":"assistant","message":{"id":"msg_2","model":"claude-sonnet-4-5","content":[],"usage":{"output_tokens":2}},"parent_tool_use_id":"toolu_1","session_id":"s1"}"#,
        ])
        .prop_map(|l| l.as_bytes().to_vec());
        let whole = prop_oneof![6 => stream_event, 1 => other];
        (whole, any::<prop::sample::Index>(), 0u8..8, any::<u8>()).prop_map(
            |(mut l, at, how, byte)| {
                let at = at.index(l.len());
                match how {
                    0 => l.truncate(at),
                    1 => l[at] = byte,
                    _ => {}
                }
                l
            },
        )
    }

    /// A run of partial messages of one shape, as Claude Code writes
    /// them, with every hole (text, index, ids) drawn from well-formed
    /// and broken values, now and then another event or a byte changed.
    fn run_of_one_shape() -> impl Strategy<Value = Vec<Vec<u8>>> {
        let text = prop::collection::vec(
            prop::sample::select(vec![
                &b"plain words "[..],
                br#"\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}"#,
                br#"\n\t\\"#,
                br#"\u00e9"#,
                b"\xc3\xa9",
                br#"\ud83d\ude00"#,
                b"\"",
                b"\x01",
                br#"\x"#,
                b"\xff",
            ]),
            0..6,
        )
        .prop_map(|p| p.concat());
        let index = prop::sample::select(vec![
            "0", "1", "12", "-3", "1.5e2", "01", "1.", "-", "\"0\"",
        ]);
        let session =
            prop::sample::select(vec![r#""s1""#, r#""s\u0031""#, "\"\"", "\"\"", "null", "7"]);
        let parent = prop::sample::select(vec!["null", r#""toolu_1""#, r#""toolu\u005f1""#, "1"]);
        let ty = prop::sample::select(vec![
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "message_delta",
            "message_start",
            "content_block_stop",
        ]);
        let line = (ty, index, text, session, parent, any::<u16>(), 0u8..12, any::<prop::sample::Index>())
            .prop_map(|(ty, index, text, session, parent, uuid, how, at)| {
                let mut l = format!(
                    r#"{{"type":"stream_event","event":{{"type":"{ty}","index":{index},"delta":{{"type":"text_delta","text":""#
                )
                .into_bytes();
                l.extend_from_slice(&text);
                l.extend_from_slice(
                    format!(
                        r#""}},"usage":{{"output_tokens":{uuid}}}}},"session_id":{session},"parent_tool_use_id":{parent},"uuid":"e{uuid}"}}"#
                    )
                    .as_bytes(),
                );
                let at = at.index(l.len());
                match how {
                    0 => l.truncate(at),
                    1 => l[at] = b'"',
                    _ => {}
                }
                l
            });
        // With the session known from the start, or only from a line of
        // the run (while a session id of `""` leaves it unknown).
        (prop::collection::vec(line, 1..30), any::<bool>()).prop_map(|(mut lines, init)| {
            if init {
                let init = br#"{"type":"system","subtype":"init","session_id":"s1"}"#;
                lines.insert(0, init.to_vec());
            }
            lines
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        /// Lines of a shape seen before, whatever their holes hold, read
        /// as the full parse reads them.
        #[test]
        fn runs_of_one_shape_read_as_the_full_parse_reads_them(lines in run_of_one_shape()) {
            let (fast, full) = (decode(&lines, false), decode(&lines, true));
            for (i, (f, p)) in fast.0.iter().zip(&full.0).enumerate() {
                prop_assert_eq!(f, p, "line {} read otherwise: {}", i + 1, lines[i].escape_ascii());
            }
            prop_assert_eq!(fast.1, full.1);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Whatever the lines, reading `stream_event`s from their bytes
        /// gives the events and the summary that the full parse gives.
        #[test]
        fn the_same_as_the_full_parse(lines in prop::collection::vec(line(), 1..24)) {
            let (fast, full) = (decode(&lines, false), decode(&lines, true));
            for (i, (f, p)) in fast.0.iter().zip(&full.0).enumerate() {
                prop_assert_eq!(f, p, "line {} read otherwise: {}", i + 1, lines[i].escape_ascii());
            }
            prop_assert_eq!(fast.1, full.1);
        }
    }
}
