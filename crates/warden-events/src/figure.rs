//! Figures of spending (token counts, costs) as an agent's output gives
//! them, before they are believed.
//!
//! The output is the agent's to write: a figure may be negative, too large
//! for a float (`1e999`), or no number at all (`"NaN"`). A [`Figure`] holds
//! whatever came, so that such a value is neither a reason to drop the
//! whole line (its text and terminal event still count) nor counted: the
//! decoder hands it to [`crate::summary::Out::count`] or
//! [`crate::summary::Out::cost`], which keep what can be believed and give
//! a `usage_ignored` event for the rest.

use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::event::FigureProblem;

/// One figure as written: a number (perhaps infinite or negative), or a
/// value that is no number (a string, `true`, an object).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Figure {
    Number(f64),
    NotANumber,
}

impl Figure {
    /// The figure if it can be counted: a finite number of at least zero.
    pub fn check(self) -> Result<f64, FigureProblem> {
        match self {
            Figure::Number(f) if f.is_nan() => Err(FigureProblem::NotANumber),
            Figure::Number(f) if f.is_infinite() => Err(FigureProblem::Infinite),
            // `-0` is zero, no debt.
            Figure::Number(f) if f < 0.0 => Err(FigureProblem::Negative),
            Figure::Number(f) => Ok(f),
            Figure::NotANumber => Err(FigureProblem::NotANumber),
        }
    }

    /// The figure as a warning quotes it.
    pub fn shown(self) -> String {
        match self {
            Figure::Number(f) => f.to_string(),
            Figure::NotANumber => "not a number".into(),
        }
    }
}

impl<'de> Deserialize<'de> for Figure {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Taken raw: serde_json refuses a number beyond a float's range
        // (`1e999`), and that refusal would drop the whole line.
        let raw = Box::<RawValue>::deserialize(d)?;
        Ok(Self::of_raw(raw.get()))
    }
}

impl Figure {
    /// The figure that the raw JSON text of a value stands for.
    fn of_raw(text: &str) -> Self {
        let text = text.trim();
        let is_number = text
            .bytes()
            .next()
            .is_some_and(|b| b == b'-' || b.is_ascii_digit());
        match text.parse::<f64>() {
            Ok(f) if is_number => Figure::Number(f),
            _ => Figure::NotANumber,
        }
    }
}

/// A [`Figure`] whose raw text stays in the line it is read from, for a
/// decoder that parses lines from their bytes: a `Box<RawValue>` for each
/// figure cost more than the rest of parsing a usage. It is the same
/// figure, made from the same text.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawFigure<'a>(&'a RawValue);

impl<'de: 'a, 'a> Deserialize<'de> for RawFigure<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <&'a RawValue>::deserialize(d).map(RawFigure)
    }
}

impl RawFigure<'_> {
    pub(crate) fn figure(self) -> Figure {
        Figure::of_raw(self.0.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct T {
        #[serde(default)]
        n: Option<Figure>,
    }

    fn figure(json: &str) -> Option<Figure> {
        serde_json::from_str::<T>(&format!(r#"{{"n":{json}}}"#))
            .unwrap_or_else(|e| panic!("{json}: {e}"))
            .n
    }

    #[test]
    fn any_value_is_taken_and_only_a_finite_number_of_at_least_zero_counts() {
        assert_eq!(figure("12").map(Figure::check), Some(Ok(12.0)));
        assert_eq!(figure("0.25").map(Figure::check), Some(Ok(0.25)));
        assert_eq!(figure("-0").map(Figure::check), Some(Ok(-0.0)));
        assert_eq!(figure("null"), None);
        assert_eq!(
            figure("-100").map(Figure::check),
            Some(Err(FigureProblem::Negative))
        );
        assert_eq!(
            figure("1e999").map(Figure::check),
            Some(Err(FigureProblem::Infinite))
        );
        assert_eq!(
            figure("-1e999").map(Figure::check),
            Some(Err(FigureProblem::Infinite))
        );
        for not in [r#""NaN""#, r#""12""#, "true", "{}", "[1]", r#""inf""#] {
            assert_eq!(
                figure(not).map(Figure::check),
                Some(Err(FigureProblem::NotANumber)),
                "{not}"
            );
        }
        assert_eq!(figure("1e999").unwrap().shown(), "inf");
        assert_eq!(figure("-100").unwrap().shown(), "-100");
    }

    #[test]
    fn a_borrowed_figure_is_the_figure_of_the_same_text() {
        #[derive(Deserialize)]
        struct R<'a> {
            #[serde(default, borrow)]
            n: Option<RawFigure<'a>>,
        }
        for json in [
            "12", "0.25", "-0", "-100", "1e999", "-1e999", "\"7\"", "true", "{}", "[1]", "null",
        ] {
            let line = format!(r#"{{"n":{json}}}"#);
            let raw = serde_json::from_slice::<R<'_>>(line.as_bytes()).expect("a value");
            let (ours, theirs) = (raw.n.map(RawFigure::figure), figure(json));
            // NaN is no number equal to itself: compare what they say.
            assert_eq!(format!("{ours:?}"), format!("{theirs:?}"), "{json}");
        }
    }
}
