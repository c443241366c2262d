//! A JSON well-formedness check that is much cheaper than parsing.
//!
//! Most lines of some streams carry nothing warden records (Claude's
//! partial-message deltas are ~87% of its lines), yet whether a line is
//! well formed still counts as activity. [`object`] answers that without
//! building anything. The same check finds big values at known paths for
//! [`crate::cut`] ([`values_at`]) and reads arrays of blocks
//! ([`array_of_objects`]). Long strings are read 64 bytes at a time with
//! vector compares, about 2.5 times as fast as serde_json walks them.
//!
//! It is strict, never lenient: when it says yes, `serde_json` would have
//! accepted the line too; when it says no (or meets something rare it does
//! not judge, such as surrogate escapes or deep nesting), the caller falls
//! back to the full parse, which decides.

mod masks;
use masks::Classify;

/// Deeper than this is left to the full parse (serde_json's limit is 128).
const MAX_DEPTH: usize = 100;

/// Whether `line` is one JSON object, optionally followed by whitespace,
/// whose top-level members `member(key, value)` all accept (`key` raw,
/// without quotes; `value` the raw JSON text). Keys with escapes are
/// refused, so `member` sees every key exactly as serde would.
pub(crate) fn object<'a>(
    line: &'a [u8],
    mut member: impl FnMut(&'a [u8], &'a [u8]) -> bool,
) -> bool {
    let mut s = Skim::new(line);
    s.members(&mut member)
        && {
            s.ws();
            s.i == line.len()
        }
        && s.utf8()
}

/// Whether `raw` is a JSON array whose every element is an object, each
/// member of which `member(index, key, value)` accepts (raw, as for
/// [`object`]; keys with escapes are refused). `raw` must already be known
/// to be UTF-8 (the text of a raw JSON value is): it is not checked again.
pub(crate) fn array_of_objects<'a>(
    raw: &'a [u8],
    mut member: impl FnMut(usize, &'a [u8], &'a [u8]) -> bool,
) -> bool {
    let mut s = Skim::new(raw);
    if s.peek() != Some(b'[') {
        return false;
    }
    s.i += 1;
    s.ws();
    if s.peek() == Some(b']') {
        s.i += 1;
    } else {
        let mut index = 0;
        loop {
            s.ws();
            if !s.members(&mut |k, v| member(index, k, v)) {
                return false;
            }
            index += 1;
            s.ws();
            match s.peek() {
                Some(b',') => s.i += 1,
                Some(b']') => {
                    s.i += 1;
                    break;
                }
                _ => return false,
            }
        }
    }
    s.ws();
    s.i == raw.len()
}

/// Where the JSON string that starts (with its quote) at `at` in `b` ends,
/// past its closing quote, judged as strictly as [`object`] judges one;
/// and whether it has a byte that is not ASCII (the caller then checks
/// that the text is UTF-8, which this does not).
pub(crate) fn string_at(b: &[u8], at: usize) -> Option<(usize, bool)> {
    let mut s = Skim::new(b);
    s.i = at;
    (s.peek() == Some(b'"') && s.string()).then_some((s.i, s.non_ascii))
}

/// Where the JSON number that starts at `at` in `b` ends, judged as
/// strictly as [`object`] judges one.
pub(crate) fn number_at(b: &[u8], at: usize) -> Option<usize> {
    let mut s = Skim::new(b);
    s.i = at;
    s.number().then_some(s.i)
}

/// A value [`values_at`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    /// Where it is in the line.
    pub range: std::ops::Range<usize>,
    /// For a string, the length in bytes of its text once unescaped.
    pub text_len: Option<u64>,
}

/// One step of a path into a JSON document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// The member of an object with this key (written without escapes).
    Key(&'static str),
    /// Any element of an array.
    Element,
}

/// Where in `line` the values found at `paths` (from the top-level object)
/// are, for those at least `min` bytes long, in the order they appear;
/// `None` unless `line` is one well-formed object, judged as strictly as
/// [`object`] does. A key written with escapes matches no step. When one
/// path is the start of another, the values found at the longer one
/// are taken, and a value at the shorter one only when it holds none of
/// them: the ranges never overlap.
pub(crate) fn values_at(line: &[u8], paths: &[&[Step]], min: usize) -> Option<Vec<Found>> {
    assert!(paths.len() <= 32, "at most 32 paths");
    if line.first() != Some(&b'{') {
        return None;
    }
    let mut s = Skim {
        paths,
        min,
        ..Skim::new(line)
    };
    let all = if paths.len() == 32 {
        u32::MAX
    } else {
        (1u32 << paths.len()) - 1
    };
    if !s.value(1, all) {
        return None;
    }
    s.ws();
    (s.i == line.len() && s.utf8()).then_some(s.found)
}

struct Skim<'a> {
    b: &'a [u8],
    i: usize,
    /// What [`values_at`] looks for, and what it found.
    paths: &'a [&'a [Step]],
    min: usize,
    found: Vec<Found>,
    /// How many bytes fewer the last string checked has once unescaped.
    shrink: u64,
    /// Whether a string had a byte that is not ASCII. Outside strings,
    /// only ASCII is accepted, so a line without one is UTF-8.
    non_ascii: bool,
    /// The last long string checked in this line (where it starts, its
    /// length with its quotes, and its `shrink`), so that a copy of it is
    /// known at once to be as well formed: Claude Code writes each tool
    /// result twice in one line.
    last_long: Option<(usize, usize, u64)>,
}

/// Strings at least this long (with their quotes) are remembered, and
/// compared with the next long string.
const REPEATED: usize = 1 << 10;

impl<'a> Skim<'a> {
    fn new(b: &'a [u8]) -> Self {
        Self {
            b,
            i: 0,
            paths: &[],
            min: 0,
            found: Vec::new(),
            shrink: 0,
            non_ascii: false,
            last_long: None,
        }
    }

    /// Whether the text accepted so far is UTF-8: checked only when a
    /// string had a byte that is not ASCII.
    fn utf8(&self) -> bool {
        !self.non_ascii || std::str::from_utf8(self.b).is_ok()
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    /// An object, each member handed raw to `member`; keys with escapes
    /// are refused.
    fn members(&mut self, member: &mut impl FnMut(&'a [u8], &'a [u8]) -> bool) -> bool {
        if self.peek() != Some(b'{') {
            return false;
        }
        self.i += 1;
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return true;
        }
        loop {
            self.ws();
            let key_start = self.i + 1;
            if self.peek() != Some(b'"') || !self.string() {
                return false;
            }
            let b = self.b;
            let key = &b[key_start..self.i - 1];
            // Each escape makes the text shorter than the string.
            if self.shrink != 0 {
                return false;
            }
            self.ws();
            if self.peek() != Some(b':') {
                return false;
            }
            self.i += 1;
            self.ws();
            let value_start = self.i;
            if !self.value(1, 0) || !member(key, &b[value_start..self.i]) {
                return false;
            }
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return true;
                }
                _ => return false,
            }
        }
    }

    /// A value at nesting `depth`; `live` has a bit for each of the
    /// [`values_at`] paths that lead here. Where none does, the value is
    /// only checked, by code that does not look for them (`FIND` false).
    fn value(&mut self, depth: usize, live: u32) -> bool {
        if live == 0 {
            self.value_of::<false>(depth, 0)
        } else {
            self.value_of::<true>(depth, live)
        }
    }

    fn value_of<const FIND: bool>(&mut self, depth: usize, live: u32) -> bool {
        match self.peek() {
            Some(b'"') => self.string(),
            Some(b'{') => self.container::<FIND>(depth, b'}', true, live),
            Some(b'[') => self.container::<FIND>(depth, b']', false, live),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => false,
        }
    }

    /// The paths of `live` whose step `level` is `key` (or any element,
    /// for `None`), and of those, the ones that end there.
    fn step(&self, live: u32, level: usize, key: Option<&[u8]>) -> (u32, u32) {
        let (mut next, mut end) = (0, 0);
        for (p, path) in self.paths.iter().enumerate() {
            if live & (1 << p) == 0 {
                continue;
            }
            let hit = match (path.get(level), key) {
                (Some(Step::Key(k)), Some(key)) => k.as_bytes() == key,
                (Some(Step::Element), None) => true,
                _ => false,
            };
            if hit {
                next |= 1 << p;
                if path.len() == level + 1 {
                    end |= 1 << p;
                }
            }
        }
        (next & !end, end)
    }

    fn container<const FIND: bool>(
        &mut self,
        depth: usize,
        close: u8,
        keyed: bool,
        live: u32,
    ) -> bool {
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
            let (mut next, mut end) = (0, 0);
            if keyed {
                let key_start = self.i + 1;
                if self.peek() != Some(b'"') || !self.string() {
                    return false;
                }
                if FIND {
                    (next, end) = self.step(live, depth - 1, Some(&self.b[key_start..self.i - 1]));
                }
                self.ws();
                if self.peek() != Some(b':') {
                    return false;
                }
                self.i += 1;
                self.ws();
            } else if FIND {
                (next, end) = self.step(live, depth - 1, None);
            }
            let start = self.i;
            if !self.value(depth + 1, next) {
                return false;
            }
            // A value holding one found already is not taken whole.
            if FIND
                && end != 0
                && self.i - start >= self.min
                && self.found.last().is_none_or(|f| f.range.start < start)
            {
                let text_len =
                    (self.b[start] == b'"').then(|| (self.i - start - 2) as u64 - self.shrink);
                self.found.push(Found {
                    range: start..self.i,
                    text_len,
                });
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

    /// A string, from its opening quote to past its closing one. Past
    /// its start, the text is read 64 bytes at a time: quotes, backslashes and control bytes
    /// become bit masks, which find the closing quote (one that no
    /// backslash escapes) without a branch per byte; only the escapes
    /// themselves are then looked at one by one.
    #[inline(always)]
    fn string(&mut self) -> bool {
        // Keys and short values usually end in their first bytes with
        // nothing to escape: that case is done here, without a call.
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
        {
            // Sixteen bytes at a time, for up to four times: past that,
            // the blocks of `long_string` are faster.
            let mut at = self.i + 1;
            while let Some(part) = self.b.get(at..at + 16)
                && at - self.i <= 64
            {
                let (quote, stop) = masks::sixteen(part.try_into().expect("16 bytes"));
                let before = if quote == 0 {
                    u32::MAX
                } else {
                    (quote & quote.wrapping_neg()) - 1
                };
                if stop & before != 0 {
                    break;
                }
                if quote != 0 {
                    self.shrink = 0;
                    self.i = at + quote.trailing_zeros() as usize + 1;
                    return true;
                }
                at += 16;
            }
        }
        // Near the end of the line, or where there are no vectors, a word.
        if let Some(word) = self.b.get(self.i + 1..self.i + 9) {
            let w = u64::from_le_bytes(word.try_into().expect("8 bytes"));
            let (quote, other) = plain(w);
            if quote != 0
                && other & ((quote & quote.wrapping_neg()) - 1) == 0
                && w & 0x8080_8080_8080_8080 == 0
            {
                self.shrink = 0;
                self.i += 1 + quote.trailing_zeros() as usize / 8 + 1;
                return true;
            }
        }
        self.long_string()
    }

    /// [`Skim::string`] past its first bytes. A string that is a copy of
    /// the last long one, byte for byte from its opening quote to its
    /// closing one, is as well formed and has as many escapes: it is only
    /// compared (memory speed), not checked again. Its bytes of the same
    /// line were checked for UTF-8 as the first's were.
    #[inline(never)]
    fn long_string(&mut self) -> bool {
        let start = self.i;
        if let Some((from, len, shrink)) = self.last_long
            && self.b.get(start..start + len) == Some(&self.b[from..from + len])
        {
            self.i = start + len;
            self.shrink = shrink;
            return true;
        }
        let ok = self.check_long_string();
        if ok && self.i - start >= REPEATED {
            self.last_long = Some((start, self.i - start, self.shrink));
        }
        ok
    }

    /// [`Skim::long_string`] for a string that is no copy.
    fn check_long_string(&mut self) -> bool {
        self.i += 1;
        self.shrink = 0;
        // Most strings (keys, short values) end within a few words: those
        // are read eight bytes at a time, escape by escape. Longer ones
        // go on 64 bytes at a time below, from an escape's end.
        let start = self.i;
        while self.i - start < WORDS_FIRST {
            let mut pad = [b'"'; 8];
            let word = match self.b.get(self.i..self.i + 8) {
                Some(w) => w,
                None => {
                    // The tail, padded with quotes: one found there is
                    // past the end of the line, an unterminated string.
                    let tail = self.b.get(self.i..).unwrap_or_default();
                    pad[..tail.len()].copy_from_slice(tail);
                    &pad
                }
            };
            let w = u64::from_le_bytes(word.try_into().expect("8 bytes"));
            self.non_ascii |= w & 0x8080_8080_8080_8080 != 0;
            let (quote, other) = plain(w);
            let first = quote | other;
            if first == 0 {
                self.i += 8;
                continue;
            }
            let at = self.i + first.trailing_zeros() as usize / 8;
            match self.b.get(at) {
                Some(b'"') => {
                    self.i = at + 1;
                    return true;
                }
                Some(b'\\') => match self.b.get(at + 1) {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                        self.shrink += 1;
                        self.i = at + 2;
                    }
                    Some(b'u') => match self.unicode_escape(at + 1) {
                        Some(utf8) => {
                            self.shrink += 6 - utf8 as u64;
                            self.i = at + 6;
                        }
                        None => return false,
                    },
                    _ => return false,
                },
                // A control byte, or the end of the line.
                _ => return false,
            }
        }
        self.blocks()
    }

    /// The rest of a string (from `self.i`, between escapes), 64 bytes
    /// at a time, with the widest compares this CPU has.
    fn blocks(&mut self) -> bool {
        #[cfg(target_arch = "x86_64")]
        if let Some(avx2) = masks::Avx2::detect() {
            // SAFETY: `detect` made an `Avx2`, so this CPU has what
            // `blocks_avx2` is compiled for.
            return unsafe { self.blocks_avx2(avx2) };
        }
        self.blocks_with(masks::Baseline)
    }

    /// [`Skim::blocks_with`] compiled for AVX2 (with POPCNT and BMI1).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,popcnt,bmi1")]
    fn blocks_avx2(&mut self, avx2: masks::Avx2) -> bool {
        self.blocks_with(avx2)
    }

    /// [`Skim::blocks`] with the masks `classify` finds; inlined into each
    /// caller, so that it is compiled with the instructions its caller is.
    #[inline(always)]
    fn blocks_with(&mut self, classify: impl Classify) -> bool {
        // Whether the first byte of the next block is escaped by a run of
        // backslashes that ended the block before (none before here: the
        // words above stop between escapes).
        let mut carry = 0u64;
        let mut pad = [b'"'; 64];
        loop {
            let at = self.i;
            let block: &[u8; 64] = match self.b.get(at..at + 64) {
                Some(b) => b.try_into().expect("64 bytes"),
                None => {
                    // The tail, padded with quotes: one found there is
                    // past the end of the line, an unterminated string.
                    let tail = self.b.get(at..).unwrap_or_default();
                    pad[..tail.len()].copy_from_slice(tail);
                    &pad
                }
            };
            let m = classify.masks(block);
            self.non_ascii |= m.high != 0;
            let escaped = escaped(m.backslash, &mut carry);
            let quotes = m.quote & !escaped;
            let inside = if quotes == 0 {
                u64::MAX
            } else {
                (1u64 << quotes.trailing_zeros()) - 1
            };
            if m.control & inside != 0 {
                return false;
            }
            // Escapes of one character are checked all at once; only the
            // rest (`\u`, or not an escape at all) one by one.
            let mut escapes = escaped & inside;
            if escapes != 0 {
                // Each one-character escape is two bytes for one.
                self.shrink += u64::from(escapes.count_ones());
                escapes &= !(m.quote | m.backslash | classify.escapable(block));
            }
            while escapes != 0 {
                let p = at + escapes.trailing_zeros() as usize;
                escapes &= escapes - 1;
                // Six bytes for one character (counted above as one byte
                // less), or not an escape at all.
                match self.unicode_escape(p) {
                    Some(utf8) => self.shrink += 5 - utf8 as u64,
                    None => return false,
                }
            }
            if quotes != 0 {
                self.i = at + quotes.trailing_zeros() as usize + 1;
                return self.i <= self.b.len();
            }
            self.i = at + 64;
            if self.i >= self.b.len() {
                return false;
            }
        }
    }

    /// When the escaped character at `p` (the one after a backslash)
    /// starts a `\u` escape serde accepts, the length in UTF-8 of the
    /// character it stands for. Surrogates are refused: serde judges
    /// pairs, so they are left to it.
    fn unicode_escape(&self, p: usize) -> Option<usize> {
        if self.b.get(p) != Some(&b'u') {
            return None;
        }
        let hex = std::str::from_utf8(self.b.get(p + 1..p + 5)?).ok()?;
        if !hex.bytes().all(|h| h.is_ascii_hexdigit()) {
            return None;
        }
        let code = u32::from_str_radix(hex, 16).ok()?;
        char::from_u32(code).map(char::len_utf8)
    }
}

/// The high bit of each byte of `w` that is a quote, and of each that is a
/// backslash or a control byte: exact, with no carry from one byte into
/// the next.
fn plain(w: u64) -> (u64, u64) {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    const ONES: u64 = 0x0101_0101_0101_0101;
    let zero = |x: u64| !(((x & LOW7) + LOW7) | x | LOW7);
    let quote = zero(w ^ (ONES * u64::from(b'"')));
    let backslash = zero(w ^ (ONES * u64::from(b'\\')));
    // Below 0x20: adding 0x60 to the low seven bits does not reach 0x80.
    let control = !((w & LOW7) + ONES * 0x60) & !w & HIGH;
    (quote, backslash | control)
}

/// How far into a string it is read a word at a time before the blocks.
const WORDS_FIRST: usize = 64;

/// The bytes of a block that a backslash escapes, given its backslashes
/// and whether its first byte is escaped (`carry`, updated for the next
/// block): in a run of backslashes they pair up, and the byte after an odd
/// run is escaped. This is simdjson's way of finding them with no loop.
fn escaped(backslash: u64, carry: &mut u64) -> u64 {
    const ODD: u64 = 0xAAAA_AAAA_AAAA_AAAA;
    if backslash == 0 {
        return std::mem::take(carry);
    }
    let potential = backslash & !*carry;
    let maybe = potential << 1;
    let codes = ((maybe | ODD).wrapping_sub(potential)) ^ ODD;
    let escaped = codes ^ (backslash | *carry);
    let escape = codes & backslash;
    *carry = escape >> 63;
    escaped
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

    /// Whether `line`, which holds the string body `b`, is a well-formed
    /// object to the scanner; a failure where serde judges it otherwise.
    /// A `\uD…` in `b` may make a lone surrogate, which serde takes and
    /// the scanner may refuse (never the other way round).
    fn judged_as_serde_judges(
        line: &[u8],
        b: &[u8],
    ) -> Result<bool, proptest::test_runner::TestCaseError> {
        use proptest::prelude::*;
        let ours = object(line, |_, _| true);
        let serde = std::str::from_utf8(line).is_ok_and(serde_ok);
        let surrogates = b
            .windows(3)
            .any(|w| w[0] == b'\\' && w[1] == b'u' && matches!(w[2], b'd' | b'D'));
        if surrogates {
            prop_assert!(!ours || serde);
        } else {
            prop_assert_eq!(ours, serde, "{}", String::from_utf8_lossy(line));
        }
        Ok(ours)
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

    /// Pieces of a string body that land anywhere against the 64-byte
    /// blocks: runs of backslashes, every escape, and what is not allowed.
    fn body() -> impl Strategy<Value = Vec<u8>> {
        let valid = prop::sample::select(vec![
            &b"a"[..],
            b"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz",
            b"\\\"",
            b"\\\\",
            b"\\\\\\\\",
            b"\\n",
            b"\\/",
            b"\\u00e9",
            b"\\uD7FF",
            b"\x7f",
            b"\xc3\xa9",
        ]);
        let invalid = prop::sample::select(vec![
            &b"\\ud83d\\ude00"[..],
            b"\\u12",
            b"\\x",
            b"\\",
            b"\"",
            b"\x01",
            b"\x1f",
            b"\xff",
        ]);
        let piece = prop_oneof![40 => valid, 1 => invalid];
        prop::collection::vec(piece, 0..60).prop_map(|p| p.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        /// The word test is exact for every byte value.
        #[test]
        fn words_are_classified_byte_by_byte(
            bytes in prop::array::uniform8(prop::sample::select(
                vec![0x00u8, 0x01, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x5b, 0x5c, 0x5d, 0x7f, 0x80, 0x9f, 0xa0, 0xa2, 0xdc, 0xff],
            )),
        ) {
            let w = u64::from_le_bytes(bytes);
            let (mut quote, mut other) = (0u64, 0u64);
            for (k, b) in w.to_le_bytes().into_iter().enumerate() {
                let bit = 0x80u64 << (8 * k);
                if b == b'"' {
                    quote |= bit;
                }
                if b == b'\\' || b < 0x20 {
                    other |= bit;
                }
            }
            prop_assert_eq!(plain(w), (quote, other));
        }

        /// On any string, at any offset, the check agrees with serde,
        /// except that it leaves surrogate escapes to serde.
        #[test]
        fn strings_are_judged_as_serde_judges_them(
            pad in 0usize..70,
            b in body(),
            end in prop::sample::select(vec![&b"\"}"[..], b"\",\"z\":[1]}", b"\"", b"\"} x"]),
        ) {
            let mut line = format!(r#"{{"{}":""#, "k".repeat(pad)).into_bytes();
            line.extend_from_slice(&b);
            line.extend_from_slice(end);
            judged_as_serde_judges(&line, &b)?;
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// A long string and a copy of it, or a copy with one byte
        /// changed, are judged as serde judges them, and their text's
        /// lengths are found alike.
        #[test]
        fn copies_of_long_strings_are_judged_as_serde_judges_them(
            b in body(),
            times in 1usize..40,
            at in any::<prop::sample::Index>(),
            byte in prop::option::of(prop::sample::select(b"\"\\nu\x01\xffa".to_vec())),
        ) {
            let first = b.repeat(times);
            let mut copy = first.clone();
            if let Some(byte) = byte && !copy.is_empty() {
                let i = at.index(copy.len());
                copy[i] = byte;
            }
            let mut line = br#"{"a":""#.to_vec();
            line.extend_from_slice(&first);
            line.extend_from_slice(br#"","b":""#);
            line.extend_from_slice(&copy);
            line.extend_from_slice(br#""}"#);
            let ours = judged_as_serde_judges(&line, &b)?;
            if ours {
                let paths: &[&[Step]] = &[&[Step::Key("a")], &[Step::Key("b")]];
                let found = values_at(&line, paths, 0).expect("well formed");
                let text = |f: &Found| f.text_len;
                prop_assert_eq!(found.len(), 2);
                if copy == first {
                    prop_assert_eq!(text(&found[0]), text(&found[1]));
                }
                let serde_len = |raw: &[u8]| serde_json::from_slice::<String>(raw).ok().map(|t| t.len() as u64);
                prop_assert_eq!(text(&found[1]), serde_len(&line[found[1].range.clone()]));
            }
        }
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
