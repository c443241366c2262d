//! Finding a marker string in a stream that arrives in arbitrary chunks.
//!
//! The completion signal must be found even when the agent's write is split
//! in the middle of it, and even when it is the last thing printed with no
//! newline after it. So it is matched on the byte stream, not on lines: the
//! matcher keeps the last `len - 1` bytes of what it saw, which is all a
//! match that straddles two chunks can need.

use memchr::memmem;

/// Finds one needle in a chunked stream; see the module docs.
#[derive(Debug, Clone)]
pub struct SignalMatcher {
    finder: memmem::Finder<'static>,
    tail: Vec<u8>,
    seen: bool,
}

impl SignalMatcher {
    /// A matcher for `needle`; an empty needle never matches.
    pub fn new(needle: &str) -> Self {
        Self {
            finder: memmem::Finder::new(needle.as_bytes()).into_owned(),
            tail: Vec::new(),
            seen: false,
        }
    }

    /// Whether the needle has been seen so far.
    pub fn seen(&self) -> bool {
        self.seen
    }

    /// Feeds a chunk; returns true the first time the needle is complete.
    pub fn push(&mut self, chunk: &[u8]) -> bool {
        let n = self.finder.needle().len();
        if self.seen || n == 0 {
            return false;
        }
        // A match across the boundary lies within the old tail and the
        // first n-1 bytes of the chunk.
        let head = &chunk[..chunk.len().min(n - 1)];
        let mut joint = std::mem::take(&mut self.tail);
        joint.extend_from_slice(head);
        if self.finder.find(&joint).is_some() || self.finder.find(chunk).is_some() {
            self.seen = true;
            return true;
        }
        // Keep the last n-1 bytes of everything seen.
        if chunk.len() >= n - 1 {
            joint.clear();
            joint.extend_from_slice(&chunk[chunk.len() - (n - 1)..]);
        } else {
            let keep = joint.len().min(n - 1);
            joint.drain(..joint.len() - keep);
        }
        self.tail = joint;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SIGNAL: &str = "<promise>COMPLETE</promise>";

    #[test]
    fn found_when_split_across_writes() {
        let mut m = SignalMatcher::new(SIGNAL);
        assert!(!m.push(b"work done <promise>COMP"));
        assert!(m.push(b"LETE</promise>\n"));
        assert!(m.seen());
        assert!(!m.push(SIGNAL.as_bytes()), "reported once only");
    }

    #[test]
    fn found_when_split_into_single_bytes() {
        let mut m = SignalMatcher::new(SIGNAL);
        let text = format!("xx{SIGNAL}");
        let hits = text.bytes().filter(|b| m.push(&[*b])).count();
        assert_eq!(hits, 1);
    }

    #[test]
    fn near_misses_do_not_match() {
        let mut m = SignalMatcher::new(SIGNAL);
        assert!(!m.push(b"<promise>COMPLETE</promise"));
        assert!(!m.push(b" > no"), "a gap breaks the match");
        let mut m = SignalMatcher::new("");
        assert!(!m.push(b"anything"));
    }

    proptest! {
        #[test]
        fn any_split_finds_it(prefix in ".{0,40}", suffix in ".{0,40}", cuts in proptest::collection::vec(0usize..120, 0..6)) {
            let text = format!("{prefix}{SIGNAL}{suffix}");
            let data = text.as_bytes();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(data.len())).collect();
            cuts.sort();
            let mut m = SignalMatcher::new(SIGNAL);
            let mut prev = 0;
            let mut hit = false;
            for c in cuts { hit |= m.push(&data[prev..c]); prev = c; }
            hit |= m.push(&data[prev..]);
            prop_assert!(hit);
        }
    }
}
