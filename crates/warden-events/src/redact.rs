//! Hiding secret values in what warden writes and shows.
//!
//! The values come from the sandbox layer (everything given with `--env`,
//! and variables whose names look like keys, tokens or passwords and whose
//! values look like secrets). Every event, the report and the terminal go
//! through one [`Redactor`]; the raw `stdout.log` and `stderr.log` are the
//! agent's own bytes and are kept as they are.
//!
//! A secret is masked only as a whole token: where it begins, the
//! character before it must not be a word character (a letter, a digit or
//! `_`) if the secret's first character is one; the same at its end. So
//! with the secret `hunter42x`, `pw=hunter42x;`, `"hunter42x"` and
//! `Bearer hunter42x` are masked, `xhunter42x` and `hunter42x_old` are
//! not: a longer token that merely contains a secret is another value.
//! Values shorter than [`MIN_SECRET_LEN`] characters are never masked:
//! they would blank out ordinary words and numbers everywhere.

use std::borrow::Cow;

use memchr::memmem;

/// What a secret is replaced by.
pub const MASK: &str = "***";

/// The shortest value that is masked, in characters.
pub const MIN_SECRET_LEN: usize = 8;

#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Longest first, so a secret that contains another is masked whole.
    secrets: Vec<String>,
}

/// A letter, a digit or `_`: what a token is made of.
fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

impl Redactor {
    /// A redactor for `secrets`; those shorter than [`MIN_SECRET_LEN`]
    /// characters are dropped.
    pub fn new(mut secrets: Vec<String>) -> Self {
        secrets.retain(|s| s.chars().count() >= MIN_SECRET_LEN);
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Self { secrets }
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `s` with every whole-token occurrence of a secret replaced by
    /// [`MASK`].
    pub fn redact<'a>(&self, s: &'a str) -> Cow<'a, str> {
        let mut out: Cow<'a, str> = Cow::Borrowed(s);
        for secret in &self.secrets {
            if memmem::find(out.as_bytes(), secret.as_bytes()).is_some()
                && let Some(masked) = mask_tokens(&out, secret)
            {
                out = Cow::Owned(masked);
            }
        }
        out
    }

    pub fn redact_in_place(&self, s: &mut String) {
        if let Cow::Owned(r) = self.redact(s) {
            *s = r;
        }
    }
}

/// `text` with each whole-token occurrence of `secret` masked; `None` if
/// there is none.
fn mask_tokens(text: &str, secret: &str) -> Option<String> {
    let first_is_word = secret.chars().next().is_some_and(is_word);
    let last_is_word = secret.chars().next_back().is_some_and(is_word);
    let finder = memmem::Finder::new(secret.as_bytes());
    let mut out = String::new();
    let mut copied = 0;
    let mut from = 0;
    while let Some(found) = finder.find(&text.as_bytes()[from..]) {
        let start = from + found;
        let end = start + secret.len();
        let before_ok = !first_is_word || !text[..start].chars().next_back().is_some_and(is_word);
        let after_ok = !last_is_word || !text[end..].chars().next().is_some_and(is_word);
        if before_ok && after_ok {
            out.push_str(&text[copied..start]);
            out.push_str(MASK);
            copied = end;
            from = end;
        } else {
            // The next occurrence may start inside this one; a match
            // starts on a character boundary, as the secret is UTF-8.
            from = start + text[start..].chars().next().map_or(1, char::len_utf8);
        }
    }
    (copied > 0).then(|| {
        out.push_str(&text[copied..]);
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_whole_occurrence_is_masked_longest_first() {
        let r = Redactor::new(vec![
            "abc12345".into(),
            "abc12345-def".into(),
            String::new(),
        ]);
        assert_eq!(r.redact("x abc12345-def y abc12345 z"), "x *** y *** z");
        assert!(matches!(r.redact("nothing here"), Cow::Borrowed(_)));
        let mut s = String::from("key=abc12345");
        r.redact_in_place(&mut s);
        assert_eq!(s, "key=***");
    }

    #[test]
    fn a_secret_inside_a_longer_token_is_not_masked() {
        let r = Redactor::new(vec!["fakery12".into()]);
        assert_eq!(
            r.redact("xfakery12 fakery123 fakery12_a"),
            "xfakery12 fakery123 fakery12_a"
        );
        assert_eq!(
            r.redact("fakery12 'fakery12' \"fakery12\" k=fakery12; (fakery12)/fakery12.fakery12\n"),
            "*** '***' \"***\" k=***; (***)/***.***\n"
        );
        // One occurrence inside a word, the next one whole.
        assert_eq!(r.redact("afakery12 fakery12"), "afakery12 ***");
    }

    #[test]
    fn a_secret_that_starts_or_ends_with_punctuation_needs_no_boundary_there() {
        let r = Redactor::new(vec!["-----BEGIN KEY".into(), "pass/word9".into()]);
        assert_eq!(r.redact("x-----BEGIN KEY"), "x***");
        assert_eq!(r.redact("mypass/word9"), "mypass/word9");
        assert_eq!(r.redact("url:pass/word9@host"), "url:***@host");
    }

    #[test]
    fn short_values_are_never_masked() {
        let r = Redactor::new(vec!["user".into(), "ubuntu".into(), "fake".into()]);
        assert!(r.is_empty());
        assert_eq!(r.redact("user ubuntu fakery"), "user ubuntu fakery");
    }

    #[test]
    fn non_ascii_text_around_a_secret_is_kept_whole() {
        let r = Redactor::new(vec!["sk-ant-é12345".into()]);
        assert_eq!(r.redact("é sk-ant-é12345 é"), "é *** é");
        assert_eq!(r.redact("ésk-ant-é12345"), "ésk-ant-é12345");
    }
}
