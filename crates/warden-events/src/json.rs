//! Small helpers shared by the JSON-lines decoders.

use memchr::memchr_iter;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::summary::{PREVIEW, ToolOutput};

/// Parses one line as `T`, tolerating leading whitespace and a terminal
/// escape sequence some CLIs leak before the JSON. `None` for anything
/// that is not a JSON object of that shape.
pub(crate) fn parse<'a, T: Deserialize<'a>>(line: &'a [u8]) -> Option<T> {
    let start = line.iter().position(|b| !b.is_ascii_whitespace())?;
    let mut line = &line[start..];
    if line[0] == 0x1b {
        line = &line[line.iter().position(|b| *b == b'{')?..];
    }
    if line[0] != b'{' {
        return None;
    }
    serde_json::from_slice(line).ok()
}

/// A tool's output from its JSON value (a string, or an array of text
/// blocks), without decoding all of it: a tool result can be megabytes,
/// and an event carries only its start and its size.
pub(crate) fn output_of(raw: &RawValue) -> ToolOutput {
    output_of_text(raw.get().as_bytes(), None, |t| (t, None))
}

/// [`output_of`] for the text of a JSON value known to be well formed
/// and UTF-8,
/// with the length of its text once unescaped when it is a string and
/// that is known; `text` gives the raw JSON a block's raw `text` stands
/// for (and the same length).
pub(crate) fn output_of_text<'t>(
    s: &'t [u8],
    size: Option<u64>,
    text: impl Fn(&'t [u8]) -> (&'t [u8], Option<u64>),
) -> ToolOutput {
    match s.first() {
        Some(b'"') => string_output(s, size),
        Some(b'[') => {
            let texts = texts_of_blocks(s).unwrap_or_else(|| texts_of_blocks_by_serde(s));
            let mut preview = String::new();
            let mut bytes = 0u64;
            for (i, t) in texts.into_iter().enumerate() {
                let (t, size) = text(t);
                let part = string_output(t, size);
                if i > 0 {
                    bytes += 1;
                    if preview.len() < PREVIEW {
                        preview.push('\n');
                    }
                }
                bytes += part.bytes;
                if preview.len() < PREVIEW {
                    preview.push_str(&part.preview);
                }
            }
            ToolOutput::with_size(crate::summary::preview(&preview, PREVIEW), bytes)
        }
        _ => ToolOutput::text(&String::from_utf8_lossy(s)),
    }
}

/// The raw `text` of each block of an array of blocks, as serde reads
/// them: every element must be a block, or there are none.
fn texts_of_blocks_by_serde(s: &[u8]) -> Vec<&[u8]> {
    #[derive(Deserialize)]
    struct Block<'a> {
        #[serde(borrow, default)]
        text: Option<&'a RawValue>,
    }
    let blocks: Vec<Block<'_>> = serde_json::from_slice(s).unwrap_or_default();
    blocks
        .into_iter()
        .filter_map(|b| b.text.map(|t| t.get().as_bytes()))
        .collect()
}

/// [`texts_of_blocks_by_serde`] in one fast pass, for the usual shape (an
/// array of objects whose keys have no escapes and say `text` at most
/// once each); `None` for any other, which serde then judges.
fn texts_of_blocks(s: &[u8]) -> Option<Vec<&[u8]>> {
    let mut texts: Vec<(usize, &[u8])> = Vec::new();
    let ok = crate::skim::array_of_objects(s, |i, key, value| {
        if key != b"text" {
            return true;
        }
        if texts.last().is_some_and(|(last, _)| *last == i) {
            return false;
        }
        texts.push((i, value));
        true
    });
    ok.then(|| {
        texts
            .into_iter()
            .filter(|(_, v)| *v != b"null")
            .map(|(_, v)| v)
            .collect()
    })
}

/// The output of a JSON string literal (`"..."`, quotes included).
fn string_output(lit: &[u8], size: Option<u64>) -> ToolOutput {
    let body = lit
        .strip_prefix(b"\"")
        .and_then(|b| b.strip_suffix(b"\""))
        .unwrap_or(lit);
    let (preview, cut) = unescape_prefix(body, PREVIEW);
    let mut preview = preview;
    if cut {
        preview.push('…');
    }
    ToolOutput::with_size(preview, size.unwrap_or_else(|| unescaped_len(body)))
}

/// Decodes the start of a JSON string body, up to about `max` bytes of
/// text; says whether it stopped before the end.
fn unescape_prefix(body: &[u8], max: usize) -> (String, bool) {
    let mut out: Vec<u8> = Vec::with_capacity(max + 4);
    let mut i = 0;
    while i < body.len() {
        if out.len() >= max {
            // Back to a character boundary.
            while !out.is_empty() && std::str::from_utf8(&out).is_err() {
                out.pop();
            }
            return (String::from_utf8_lossy(&out).into_owned(), true);
        }
        if body[i] != b'\\' {
            // A run of plain bytes, copied at once up to the limit (the
            // same bytes as one at a time).
            let room = (max - out.len()).min(body.len() - i);
            let run = memchr::memchr(b'\\', &body[i..i + room]).unwrap_or(room);
            out.extend_from_slice(&body[i..i + run]);
            i += run;
            continue;
        }
        let Some(&e) = body.get(i + 1) else { break };
        i += 2;
        let c = unescape(e, body, &mut i);
        let mut buf = [0u8; 4];
        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    }
    (String::from_utf8_lossy(&out).into_owned(), false)
}

/// The character of the escape `\e`, whose bytes after `e` start at
/// `*i` in `body` (`*i` is moved past what it reads): a `\u` escape takes
/// its four hex digits, and a high surrogate the low one after it; what is
/// not valid becomes U+FFFD.
fn unescape(e: u8, body: &[u8], i: &mut usize) -> char {
    match e {
        b'n' => '\n',
        b't' => '\t',
        b'r' => '\r',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'u' => {
            let hi = hex4(body.get(*i..*i + 4));
            *i += 4;
            let code = match hi {
                Some(h @ 0xD800..=0xDBFF) if body.get(*i..*i + 2) == Some(b"\\u") => {
                    let lo = hex4(body.get(*i + 2..*i + 6)).unwrap_or(0);
                    *i += 6;
                    0x10000 + ((h - 0xD800) << 10) + (lo.wrapping_sub(0xDC00) & 0x3FF)
                }
                Some(h) => h,
                None => 0xFFFD,
            };
            char::from_u32(code).unwrap_or('\u{fffd}')
        }
        other => other as char,
    }
}

fn hex4(b: Option<&[u8]>) -> Option<u32> {
    u32::from_str_radix(std::str::from_utf8(b?).ok()?, 16).ok()
}

/// The length in bytes of a JSON string body once decoded, found by
/// looking only at its escapes.
fn unescaped_len(body: &[u8]) -> u64 {
    // Fast path: with no `\\` and no `\u`, every backslash starts a
    // two-byte escape that decodes to one byte, and a plain count (which
    // the compiler vectorizes) is exact.
    if memchr::memmem::find(body, b"\\\\").is_none() && memchr::memmem::find(body, b"\\u").is_none()
    {
        return body.len() as u64 - count_backslashes(body);
    }
    let mut len = body.len() as u64;
    let mut next = 0;
    for p in memchr_iter(b'\\', body) {
        if p < next {
            continue;
        }
        if body.get(p + 1) == Some(&b'u') {
            let code = hex4(body.get(p + 2..p + 6)).unwrap_or(0xFFFD);
            if (0xD800..=0xDBFF).contains(&code) && body.get(p + 6..p + 8) == Some(b"\\u") {
                // A surrogate pair: 12 bytes of escape, 4 of UTF-8.
                len -= 8;
                next = p + 12;
            } else {
                let utf8 = char::from_u32(code).map_or(3, char::len_utf8) as u64;
                len -= 6 - utf8;
                next = p + 6;
            }
        } else {
            len -= 1;
            next = p + 2;
        }
    }
    len
}

/// Counts `\\` bytes, in blocks small enough for byte-wide counters so
/// the loop vectorizes.
fn count_backslashes(bytes: &[u8]) -> u64 {
    bytes
        .chunks(255)
        .map(|c| u64::from(c.iter().map(|&b| u8::from(b == b'\\')).sum::<u8>()))
        .sum()
}

/// A one-line view of a tool's input: its `command` (or `cmd`) when it
/// has one, else the compact JSON.
pub(crate) fn input_view(raw: Option<&RawValue>) -> Option<String> {
    #[derive(Deserialize)]
    struct Cmd {
        #[serde(default)]
        command: Option<serde_json::Value>,
        #[serde(default)]
        cmd: Option<serde_json::Value>,
    }
    let raw = raw?;
    if let Ok(c) = serde_json::from_str::<Cmd>(raw.get()) {
        match c.command.or(c.cmd) {
            Some(serde_json::Value::String(s)) => return Some(s),
            Some(serde_json::Value::Array(parts)) => {
                let words: Vec<String> = parts
                    .iter()
                    .map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_string))
                    .collect();
                return Some(words.join(" "));
            }
            _ => {}
        }
    }
    Some(raw.get().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leading_escape_sequence_is_skipped() {
        #[derive(Deserialize)]
        struct T {
            a: u8,
        }
        let t: T = parse(b"\x1b[?1004l{\"a\":1}").unwrap();
        assert_eq!(t.a, 1);
        assert!(parse::<T>(b"plain text").is_none());
        assert!(parse::<T>(b"   ").is_none());
    }

    #[test]
    fn outputs_are_previewed_and_sized_without_decoding_everything() {
        let text = format!("héllo \"q\"\n\t{}😀 end", "x".repeat(1000));
        let raw = serde_json::value::to_raw_value(&text).unwrap();
        let out = output_of(&raw);
        assert_eq!(out.bytes, text.len() as u64);
        assert!(text.starts_with(out.preview.trim_end_matches('…')));
        assert!(out.preview.ends_with('…'));
        let short = serde_json::value::to_raw_value("a\u{1F600}b\\").unwrap();
        let out = output_of(&short);
        assert_eq!(out.preview, "a😀b\\");
        assert_eq!(out.bytes, 7);
        let escaped: Box<RawValue> = serde_json::from_str(r#""\ud83d\ude00 \u00e9""#).unwrap();
        let out = output_of(&escaped);
        assert_eq!(out.preview, "😀 é");
        assert_eq!(out.bytes, "😀 é".len() as u64);
        let blocks: Box<RawValue> =
            serde_json::from_str(r#"[{"type":"text","text":"ab"},{"type":"text","text":"cd"}]"#)
                .unwrap();
        let out = output_of(&blocks);
        assert_eq!((out.preview.as_str(), out.bytes), ("ab\ncd", 5));
        // The usual shape takes the one pass.
        assert_eq!(
            texts_of_blocks(blocks.get().as_bytes()),
            Some(vec![&br#""ab""#[..], br#""cd""#])
        );
    }

    /// The byte-at-a-time decoding that runs of plain bytes replaced.
    fn unescape_prefix_byte_by_byte(body: &[u8], max: usize) -> (String, bool) {
        let mut out: Vec<u8> = Vec::with_capacity(max + 4);
        let mut i = 0;
        while i < body.len() {
            if out.len() >= max {
                // Back to a character boundary.
                while !out.is_empty() && std::str::from_utf8(&out).is_err() {
                    out.pop();
                }
                return (String::from_utf8_lossy(&out).into_owned(), true);
            }
            let b = body[i];
            if b != b'\\' {
                out.push(b);
                i += 1;
                continue;
            }
            let Some(&e) = body.get(i + 1) else { break };
            i += 2;
            let c = unescape(e, body, &mut i);
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
        (String::from_utf8_lossy(&out).into_owned(), false)
    }

    proptest::proptest! {
        /// Copying plain runs at once decodes the same prefix.
        #[test]
        fn prefixes_are_decoded_as_byte_by_byte(
            body in proptest::collection::vec(proptest::sample::select(vec![
                &b"a"[..], b"xyz ", b"\\n", b"\\\\", b"\\u00e9", b"\\ud83d\\ude00", b"\\ud83d",
                b"\\u12", b"\\", b"\xc3\xa9", b"\xe2\x82\xac", b"\xff",
            ]), 0..40),
            max in 0usize..40,
        ) {
            let body = body.concat();
            proptest::prop_assert_eq!(
                unescape_prefix(&body, max),
                unescape_prefix_byte_by_byte(&body, max)
            );
        }
    }

    proptest::proptest! {
        /// On any array (raw JSON values are well formed), the one pass
        /// finds the texts serde finds, or leaves the array to serde.
        #[test]
        fn blocks_are_read_in_one_pass_as_serde_reads_them(
            elements in proptest::collection::vec(proptest::sample::select(vec![
                r#"{"type":"text","text":"a \"b\"\n"}"#,
                r#"{"text":"x","type":"text"}"#,
                r#"{"text":null}"#,
                r#"{"text":5}"#,
                r#"{"text":{"a":[1]}}"#,
                r#"{"type":"image"}"#,
                r#"{}"#,
                r#"{"text":"a","text":"b"}"#,
                r#"{"te\u0078t":"escaped key"}"#,
                r#"["positional"]"#,
                r#"["a","b"]"#,
                r#""not a block""#,
                r#"null"#,
                r#" { "text" : "spaced" } "#,
            ]), 0..6),
        ) {
            let s = format!("[{}]", elements.join(","));
            if let Some(fast) = texts_of_blocks(s.as_bytes()) {
                proptest::prop_assert_eq!(fast, texts_of_blocks_by_serde(s.as_bytes()), "{}", s);
            }
        }
    }

    #[test]
    fn input_view_prefers_the_command() {
        let raw: Box<RawValue> =
            serde_json::from_str(r#"{"command":"cargo test","timeout":5}"#).unwrap();
        assert_eq!(input_view(Some(&raw)).unwrap(), "cargo test");
        let raw: Box<RawValue> = serde_json::from_str(r#"{"cmd":["bash","-lc","ls"]}"#).unwrap();
        assert_eq!(input_view(Some(&raw)).unwrap(), "bash -lc ls");
        let raw: Box<RawValue> = serde_json::from_str(r#"{"path":"a.rs"}"#).unwrap();
        assert_eq!(input_view(Some(&raw)).unwrap(), r#"{"path":"a.rs"}"#);
    }
}
