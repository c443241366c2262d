//! Questions a test asks of the spans it received: which span is named
//! so, what are its children, does it hang under the parent it was given.
//! The panics show the whole tree, so a failing test says what did
//! arrive rather than only what did not.

use std::collections::HashSet;
use std::fmt::Write as _;

use super::span::{Span, SpanKind};

/// The span tree of a slice of received spans (from
/// [`Receiver::spans`](super::Receiver::spans)). Children are ordered by
/// start time, then name.
pub trait SpanTree {
    /// The spans named `name`, by start time.
    fn named(&self, name: &str) -> Vec<&Span>;

    /// The one span named `name`. Panics, showing the tree, when there is
    /// none or more than one.
    fn one(&self, name: &str) -> &Span;

    /// The spans whose parent is `parent`, in the same trace.
    fn children(&self, parent: &Span) -> Vec<&Span>;

    /// The parent of `span`, if it was received.
    fn parent(&self, span: &Span) -> Option<&Span>;

    /// The spans whose parent was not received: roots, and spans whose
    /// parent is in another process (a `TRACEPARENT`) or was lost.
    fn tops(&self) -> Vec<&Span>;

    /// The tree, one span a line, indented two spaces a level:
    /// `name [kind]`. A line at the margin whose span has a parent (a top
    /// whose parent was not received, or the first of a cycle) ends with
    /// `<- parent <span id>`.
    fn render(&self) -> String;

    /// Panics, showing the tree, unless `child`'s parent is `parent`.
    fn assert_child_of(&self, child: &Span, parent: &Span);
}

impl SpanTree for [Span] {
    fn named(&self, name: &str) -> Vec<&Span> {
        sorted(self.iter().filter(|s| s.name == name))
    }

    fn one(&self, name: &str) -> &Span {
        match self.named(name).as_slice() {
            [one] => one,
            found => panic!(
                "expected one span named {name:?}, found {}; the spans received:\n{}",
                found.len(),
                self.render()
            ),
        }
    }

    fn children(&self, parent: &Span) -> Vec<&Span> {
        sorted(
            self.iter()
                .filter(|s| s.trace_id == parent.trace_id && s.parent_span_id == parent.span_id),
        )
    }

    fn parent(&self, span: &Span) -> Option<&Span> {
        if span.parent_span_id.is_empty() {
            return None;
        }
        self.iter()
            .find(|p| p.trace_id == span.trace_id && p.span_id == span.parent_span_id)
    }

    fn tops(&self) -> Vec<&Span> {
        sorted(self.iter().filter(|s| self.parent(s).is_none()))
    }

    fn render(&self) -> String {
        let mut out = String::new();
        let mut drawn = HashSet::new();
        for top in self.tops() {
            draw(self, top, 0, &mut drawn, &mut out);
        }
        // Spans whose parents form a cycle are under no top; they are
        // drawn after, so that nothing received is hidden (and `drawn`
        // stops the recursion going round the cycle).
        for span in self {
            if !drawn.contains(&std::ptr::from_ref(span)) {
                draw(self, span, 0, &mut drawn, &mut out);
            }
        }
        if out.is_empty() {
            out.push_str("(no spans)\n");
        }
        out
    }

    fn assert_child_of(&self, child: &Span, parent: &Span) {
        assert!(
            child.trace_id == parent.trace_id && child.parent_span_id == parent.span_id,
            "expected {:?} ({}) to be a child of {:?} ({} in trace {}), but its parent is {:?} in trace {}; the spans received:\n{}",
            child.name,
            child.span_id,
            parent.name,
            parent.span_id,
            parent.trace_id,
            child.parent_span_id,
            child.trace_id,
            self.render()
        );
    }
}

fn sorted<'a>(spans: impl Iterator<Item = &'a Span>) -> Vec<&'a Span> {
    let mut v: Vec<&Span> = spans.collect();
    v.sort_by(|a, b| (a.start_unix_nano, &a.name).cmp(&(b.start_unix_nano, &b.name)));
    v
}

fn draw<'a>(
    all: &'a [Span],
    span: &'a Span,
    depth: usize,
    drawn: &mut HashSet<*const Span>,
    out: &mut String,
) {
    if !drawn.insert(std::ptr::from_ref(span)) {
        return;
    }
    let kind = kind_name(span.kind);
    let _ = write!(
        out,
        "{:indent$}{} [{kind}]",
        "",
        span.name,
        indent = depth * 2
    );
    if depth == 0 && !span.parent_span_id.is_empty() {
        let _ = write!(out, " <- parent {}", span.parent_span_id);
    }
    out.push('\n');
    for child in all.children(span) {
        draw(all, child, depth + 1, drawn, out);
    }
}

fn kind_name(kind: SpanKind) -> &'static str {
    match kind {
        SpanKind::Unspecified => "unspecified",
        SpanKind::Internal => "internal",
        SpanKind::Server => "server",
        SpanKind::Client => "client",
        SpanKind::Producer => "producer",
        SpanKind::Consumer => "consumer",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::otlp::span::{Status, StatusCode};

    fn span(id: &str, parent: &str, name: &str, start: u64) -> Span {
        Span {
            trace_id: "t".repeat(32),
            span_id: id.to_string(),
            parent_span_id: parent.to_string(),
            parent_is_remote: None,
            name: name.to_string(),
            kind: SpanKind::Internal,
            start_unix_nano: start,
            end_unix_nano: start + 1,
            attributes: Default::default(),
            events: Vec::new(),
            links: Vec::new(),
            status: Status {
                code: StatusCode::Unset,
                message: String::new(),
            },
            resource: Default::default(),
            scope: Default::default(),
        }
    }

    #[test]
    fn children_are_drawn_under_their_parent_by_start_time_whatever_the_arrival_order() {
        let spans = [
            span("c2", "r", "second", 30),
            span("g", "c1", "grandchild", 25),
            span("c1", "r", "first", 20),
            span("r", "", "root", 10),
        ];
        assert_eq!(
            spans.render(),
            "root [internal]\n  first [internal]\n    grandchild [internal]\n  second [internal]\n"
        );
        let root = spans.one("root");
        assert!(root.is_root());
        let names: Vec<_> = spans.children(root).iter().map(|s| &s.name).collect();
        assert_eq!(names, ["first", "second"]);
        assert_eq!(
            spans.parent(spans.one("grandchild")).map(|s| &s.name[..]),
            Some("first")
        );
        assert_eq!(spans.tops(), [root]);
    }

    #[test]
    fn a_span_whose_parent_was_not_received_is_a_top_that_names_the_parent() {
        let spans = [span("a", "remote", "run", 1), span("b", "a", "tool", 2)];
        assert_eq!(
            spans.render(),
            "run [internal] <- parent remote\n  tool [internal]\n"
        );
        assert!(spans.parent(spans.one("run")).is_none());
    }

    #[test]
    fn spans_in_a_parent_cycle_are_still_drawn_once_each() {
        let spans = [span("a", "b", "x", 1), span("b", "a", "y", 2)];
        assert!(spans.tops().is_empty());
        assert_eq!(spans.render(), "x [internal] <- parent b\n  y [internal]\n");
    }

    #[test]
    fn asking_for_one_span_of_a_name_that_two_have_shows_the_tree() {
        let spans = [span("a", "", "run", 1), span("b", "", "run", 2)];
        let message = std::panic::catch_unwind(|| {
            spans.one("run");
        })
        .expect_err("two spans named run");
        let message = message.downcast_ref::<String>().expect("a formatted panic");
        assert!(message.contains("found 2"), "{message}");
        assert!(
            message.contains("run [internal]\nrun [internal]\n"),
            "{message}"
        );
    }

    #[test]
    fn a_child_of_another_parent_fails_the_assertion() {
        let spans = [span("a", "", "run", 1), span("b", "", "tool", 2)];
        let wrong = std::panic::catch_unwind(|| spans.assert_child_of(&spans[1], &spans[0]));
        assert!(wrong.is_err());
        let right = [span("a", "", "run", 1), span("b", "a", "tool", 2)];
        right.assert_child_of(&right[1], &right[0]);
    }
}
