//! Hiding secret values in what warden writes and shows.
//!
//! The values come from the sandbox layer (everything given with `--env`,
//! and variables whose names look like keys, tokens or passwords). Every
//! event, the report and the terminal go through one [`Redactor`]; the raw
//! `stdout.log` and `stderr.log` are the agent's own bytes and are kept as
//! they are.

use std::borrow::Cow;

use memchr::memmem;

/// What a secret is replaced by.
pub const MASK: &str = "***";

#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Longest first, so a secret that contains another is masked whole.
    secrets: Vec<String>,
}

impl Redactor {
    pub fn new(mut secrets: Vec<String>) -> Self {
        secrets.retain(|s| !s.is_empty());
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Self { secrets }
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `s` with every secret replaced by [`MASK`].
    pub fn redact<'a>(&self, s: &'a str) -> Cow<'a, str> {
        let mut out: Cow<'a, str> = Cow::Borrowed(s);
        for secret in &self.secrets {
            if memmem::find(out.as_bytes(), secret.as_bytes()).is_some() {
                out = Cow::Owned(out.replace(secret.as_str(), MASK));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_occurrence_is_masked_longest_first() {
        let r = Redactor::new(vec!["abc".into(), "abcdef".into(), String::new()]);
        assert_eq!(r.redact("x abcdef y abc z"), "x *** y *** z");
        assert!(matches!(r.redact("nothing here"), Cow::Borrowed(_)));
        let mut s = String::from("key=abc");
        r.redact_in_place(&mut s);
        assert_eq!(s, "key=***");
    }
}
