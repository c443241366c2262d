//! Small helpers shared by the JSON-lines decoders.

use serde::Deserialize;
use serde_json::value::RawValue;

/// Parses one line as `T`, tolerating leading whitespace and a terminal
/// escape sequence some CLIs leak before the JSON. `None` for anything
/// that is not a JSON object of that shape.
pub fn parse<'a, T: Deserialize<'a>>(line: &'a [u8]) -> Option<T> {
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

/// The text of a JSON value that is either a string or an array of
/// `{"type":"text","text":...}` blocks (tool results, message content).
pub fn text_of(raw: &RawValue) -> Option<String> {
    #[derive(Deserialize)]
    struct Block<'a> {
        #[serde(borrow, default)]
        text: Option<std::borrow::Cow<'a, str>>,
    }
    let s = raw.get();
    match s.as_bytes().first()? {
        b'"' => serde_json::from_str::<String>(s).ok(),
        b'[' => {
            let blocks: Vec<Block<'_>> = serde_json::from_str(s).ok()?;
            let texts: Vec<_> = blocks.into_iter().filter_map(|b| b.text).collect();
            Some(texts.join("\n"))
        }
        _ => Some(s.to_string()),
    }
}

/// A one-line view of a tool's input: its `command` (or `cmd`) when it
/// has one, else the compact JSON.
pub fn input_view(raw: Option<&RawValue>) -> Option<String> {
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

/// A number field that some CLIs write as a float and others as an integer.
pub fn as_u64(v: Option<f64>) -> u64 {
    v.map_or(0, |f| {
        if f.is_finite() && f > 0.0 {
            f as u64
        } else {
            0
        }
    })
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
    fn text_of_strings_and_blocks() {
        let raw: Box<RawValue> = serde_json::from_str(
            r#"[{"type":"text","text":"a"},{"type":"image"},{"type":"text","text":"b"}]"#,
        )
        .unwrap();
        assert_eq!(text_of(&raw).unwrap(), "a\nb");
        let raw: Box<RawValue> = serde_json::from_str(r#""plain \"q\"""#).unwrap();
        assert_eq!(text_of(&raw).unwrap(), "plain \"q\"");
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
