//! A JSON well-formedness check that is much cheaper than parsing.
//!
//! Most lines of some streams carry nothing warden records (Claude's
//! partial-message deltas are ~87% of its lines), yet whether a line is
//! well formed still counts as activity. [`object`] answers that without
//! building anything, at close to the speed of reading the bytes.
//!
//! It is strict, never lenient: when it says yes, `serde_json` would have
//! accepted the line too; when it says no (or meets something rare it does
//! not judge, such as surrogate escapes or deep nesting), the caller falls
//! back to the full parse, which decides.

/// Deeper than this is left to the full parse (serde_json's limit is 128).
const MAX_DEPTH: usize = 100;

/// Whether `line` is one JSON object, optionally followed by whitespace,
/// whose top-level members `member(key, value)` all accept (`key` raw,
/// without quotes; `value` the raw JSON text). Keys with escapes are
/// refused, so `member` sees every key exactly as serde would.
pub fn object(line: &[u8], mut member: impl FnMut(&[u8], &[u8]) -> bool) -> bool {
    if std::str::from_utf8(line).is_err() {
        return false;
    }
    let mut s = Skim { b: line, i: 0 };
    if s.peek() != Some(b'{') {
        return false;
    }
    s.i += 1;
    s.ws();
    if s.peek() == Some(b'}') {
        s.i += 1;
    } else {
        loop {
            s.ws();
            let key_start = s.i + 1;
            if s.peek() != Some(b'"') || !s.string() {
                return false;
            }
            let key = &line[key_start..s.i - 1];
            if key.contains(&b'\\') {
                return false;
            }
            s.ws();
            if s.peek() != Some(b':') {
                return false;
            }
            s.i += 1;
            s.ws();
            let value_start = s.i;
            if !s.value(1) || !member(key, &line[value_start..s.i]) {
                return false;
            }
            s.ws();
            match s.peek() {
                Some(b',') => s.i += 1,
                Some(b'}') => {
                    s.i += 1;
                    break;
                }
                _ => return false,
            }
        }
    }
    s.ws();
    s.i == line.len()
}

struct Skim<'a> {
    b: &'a [u8],
    i: usize,
}

impl Skim<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    fn value(&mut self, depth: usize) -> bool {
        match self.peek() {
            Some(b'"') => self.string(),
            Some(b'{') => self.container(depth, b'}', true),
            Some(b'[') => self.container(depth, b']', false),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => false,
        }
    }

    fn container(&mut self, depth: usize, close: u8, keyed: bool) -> bool {
        if depth >= MAX_DEPTH {
            return false;
        }
        self.i += 1;
        self.ws();
        if self.peek() == Some(close) {
            self.i += 1;
            return true;
        }
        loop {
            self.ws();
            if keyed {
                if self.peek() != Some(b'"') || !self.string() {
                    return false;
                }
                self.ws();
                if self.peek() != Some(b':') {
                    return false;
                }
                self.i += 1;
                self.ws();
            }
            if !self.value(depth + 1) {
                return false;
            }
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(c) if c == close => {
                    self.i += 1;
                    return true;
                }
                _ => return false,
            }
        }
    }

    fn literal(&mut self, word: &[u8]) -> bool {
        if self.b[self.i..].starts_with(word) {
            self.i += word.len();
            true
        } else {
            false
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
        self.i - start
    }

    fn number(&mut self) -> bool {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek() {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return false,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if self.digits() == 0 {
                return false;
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if self.digits() == 0 {
                return false;
            }
        }
        true
    }

    /// A string, from its opening quote to past its closing one. Plain
    /// runs are skipped eight bytes at a time.
    fn string(&mut self) -> bool {
        self.i += 1;
        loop {
            while let Some(chunk) = self.b.get(self.i..self.i + 8) {
                let w = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
                if special(w) {
                    break;
                }
                self.i += 8;
            }
            let Some(b) = self.peek() else { return false };
            self.i += 1;
            match b {
                b'"' => return true,
                b'\\' => {
                    let Some(e) = self.peek() else { return false };
                    self.i += 1;
                    match e {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'u' => {
                            let Some(hex) = self.b.get(self.i..self.i + 4) else {
                                return false;
                            };
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return false;
                            }
                            // Surrogates: serde judges pairs; leave them to it.
                            if matches!(hex[0], b'd' | b'D') && !matches!(hex[1], b'0'..=b'7') {
                                return false;
                            }
                            self.i += 4;
                        }
                        _ => return false,
                    }
                }
                0..0x20 => return false,
                _ => {}
            }
        }
    }
}

/// Whether any byte of `w` is a quote, a backslash or a control character.
fn special(w: u64) -> bool {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let zero = |x: u64| x.wrapping_sub(LO) & !x & HI;
    let quote = zero(w ^ (LO * u64::from(b'"')));
    let backslash = zero(w ^ (LO * u64::from(b'\\')));
    let control = w.wrapping_sub(LO * 0x20) & !w & HI;
    quote | backslash | control != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ok(s: &str) -> bool {
        object(s.as_bytes(), |_, _| true)
    }

    fn serde_ok(s: &str) -> bool {
        serde_json::from_str::<serde::de::IgnoredAny>(s).is_ok() && s.trim_start().starts_with('{')
    }

    #[test]
    fn accepts_what_serde_accepts_and_refuses_the_rest() {
        for s in [
            r#"{}"#,
            r#"{"a":1,"b":[true,false,null,-0.5e+3,"x\"\\\/\b\f\n\r\t\u00e9"],"c":{}}  "#,
            r#"{"type":"stream_event","event":{"type":"content_block_delta","delta":{"text":"héllo"}}}"#,
        ] {
            assert!(ok(s), "{s}");
        }
        for s in [
            "",
            "[]",
            r#"{"a":1"#,
            r#"{"a":1,}"#,
            r#"{"a":01}"#,
            r#"{"a":1.}"#,
            r#"{"a":"\x"}"#,
            "{\"a\":\"\t\"}",
            r#"{"a":"\ud83d\ude00"}"#,
            r#"{"a":tru}"#,
            r#"{"a":1} x"#,
            r#"{"a\"":1}"#,
        ] {
            assert!(!ok(s), "{s}");
        }
    }

    #[test]
    fn members_are_seen_raw() {
        let mut seen = Vec::new();
        assert!(object(br#"{"a":{"b":1},"c":"d"}"#, |k, v| {
            seen.push((k.to_vec(), v.to_vec()));
            true
        }));
        assert_eq!(
            seen,
            vec![
                (b"a".to_vec(), br#"{"b":1}"#.to_vec()),
                (b"c".to_vec(), br#""d""#.to_vec())
            ]
        );
        assert!(!object(br#"{"a":1}"#, |_, _| false));
    }

    proptest! {
        /// Whatever a mutation of a valid line does, a yes is never wrong.
        #[test]
        fn never_accepts_what_serde_refuses(
            cut in 0usize..120,
            at in 0usize..120,
            byte in prop::sample::select(b"{}[]\",:\\ 0-.eEtfnu\x01\x7fa\xc3".to_vec()),
        ) {
            let base = r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a \"b\"\n\u00e9 -1.5e3"}},"n":[1,-0.25,true,null]}"#;
            let mut b = base.as_bytes().to_vec();
            if at < b.len() {
                b[at] = byte;
            }
            b.truncate(b.len() - cut.min(b.len()));
            let s = String::from_utf8_lossy(&b).into_owned();
            if object(s.as_bytes(), |_, _| true) {
                prop_assert!(serde_ok(&s), "accepted {s}");
            }
        }
    }
}
