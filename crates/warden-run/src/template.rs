//! Prompt templates: `{{NAME}}` placeholders filled from `--arg NAME=VALUE`
//! and from warden's built-ins (`BRANCH`, `BASE`, `ITERATION`, ...), and
//! `{{$ CMD}}` commands, whose output (run before the agent) replaces them.

use std::collections::BTreeMap;

#[non_exhaustive]
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TemplateError {
    #[error("the prompt uses {{{{{name}}}}} but no value was given: add --arg {name}=VALUE")]
    Missing { name: String },
    #[error("invalid --arg `{0}`: expected NAME=VALUE, e.g. --arg ISSUE=42")]
    BadArg(String),
    #[error("the prompt has an unclosed `{{{{` near: {0}")]
    Unclosed(String),
}

/// Parses `NAME=VALUE`.
pub fn parse_arg(s: &str) -> Result<(String, String), TemplateError> {
    match s.split_once('=') {
        Some((n, v)) if is_name(n) => Ok((n.to_string(), v.to_string())),
        _ => Err(TemplateError::BadArg(s.to_string())),
    }
}

fn is_name(n: &str) -> bool {
    !n.is_empty()
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// One piece of a template.
enum Piece<'a> {
    /// Text sent as it is (braces that are no placeholder included).
    Text(&'a str),
    /// `{{NAME}}`.
    Value(&'a str),
    /// `{{$ CMD}}`: replaced by the output of CMD, run before the agent.
    Command(&'a str),
}

/// The template's pieces, in order. Only the template's own text is cut
/// so: a value put in its place is never read again, so text that comes
/// through `--arg` is never taken for a placeholder or run.
fn pieces(template: &str) -> Result<Vec<Piece<'_>>, TemplateError> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        if start > 0 {
            out.push(Piece::Text(&rest[..start]));
        }
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            let near: String = rest[start..].chars().take(30).collect();
            return Err(TemplateError::Unclosed(near));
        };
        let inner = after[..end].trim();
        out.push(match inner.strip_prefix('$') {
            Some(cmd) if !cmd.trim().is_empty() => Piece::Command(cmd.trim()),
            _ if is_name(inner) => Piece::Value(inner),
            _ => Piece::Text(&rest[start..start + 2 + end + 2]),
        });
        rest = &after[end + 2..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    Ok(out)
}

/// The placeholders a template uses, in order of first use.
pub fn placeholders(template: &str) -> Result<Vec<String>, TemplateError> {
    let mut out: Vec<String> = Vec::new();
    for piece in pieces(template)? {
        if let Piece::Value(name) = piece
            && !out.iter().any(|n| n == name)
        {
            out.push(name.to_string());
        }
    }
    Ok(out)
}

/// The commands a template runs (`{{$ CMD}}`), in order of first use.
pub fn commands(template: &str) -> Result<Vec<String>, TemplateError> {
    let mut out: Vec<String> = Vec::new();
    for piece in pieces(template)? {
        if let Piece::Command(cmd) = piece
            && !out.iter().any(|c| c == cmd)
        {
            out.push(cmd.to_string());
        }
    }
    Ok(out)
}

/// Fills every `{{NAME}}` from `values`, and every `{{$ CMD}}` from
/// `outputs` (left as it is where `outputs` has no output for it); text
/// that is not a placeholder is left as it is.
pub fn render(
    template: &str,
    values: &BTreeMap<String, String>,
    outputs: &BTreeMap<String, String>,
) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(template.len());
    for piece in pieces(template)? {
        match piece {
            Piece::Text(t) => out.push_str(t),
            Piece::Value(name) => match values.get(name) {
                Some(v) => out.push_str(v),
                None => {
                    return Err(TemplateError::Missing {
                        name: name.to_string(),
                    });
                }
            },
            Piece::Command(cmd) => match outputs.get(cmd) {
                Some(o) => out.push_str(o),
                None => {
                    out.push_str("{{$ ");
                    out.push_str(cmd);
                    out.push_str("}}");
                }
            },
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vals(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn placeholders_are_filled_and_other_braces_kept() {
        let t = "Fix issue {{ISSUE}} on {{ BRANCH }}; json: {{\"a\": 1}} {{ISSUE}}";
        let r = render(
            t,
            &vals(&[("ISSUE", "42"), ("BRANCH", "b")]),
            &BTreeMap::new(),
        )
        .unwrap();
        assert_eq!(r, "Fix issue 42 on b; json: {{\"a\": 1}} 42");
        assert_eq!(placeholders(t).unwrap(), vec!["ISSUE", "BRANCH"]);
    }

    #[test]
    fn a_missing_value_names_the_placeholder() {
        let e = render("do {{TASK}}", &vals(&[]), &vals(&[])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the prompt uses {{TASK}} but no value was given: add --arg TASK=VALUE"
        );
        assert!(matches!(
            render("x {{oops", &vals(&[]), &vals(&[])),
            Err(TemplateError::Unclosed(_))
        ));
    }

    #[test]
    fn commands_are_found_in_the_template_and_never_in_its_values() {
        let t = "Log:\n{{$ git log -3 }}\nTask: {{TASK}} {{$}} {{$ git log -3}}";
        assert_eq!(commands(t).unwrap(), vec!["git log -3"]);
        assert_eq!(placeholders(t).unwrap(), vec!["TASK"]);
        let r = render(
            t,
            &vals(&[("TASK", "{{$ rm -rf /}}")]),
            &vals(&[("git log -3", "abc")]),
        )
        .unwrap();
        assert_eq!(r, "Log:\nabc\nTask: {{$ rm -rf /}} {{$}} abc");
        let kept = render("{{$ date}}", &vals(&[]), &vals(&[])).unwrap();
        assert_eq!(kept, "{{$ date}}");
    }

    #[test]
    fn args_parse() {
        assert_eq!(parse_arg("A=b=c").unwrap(), ("A".into(), "b=c".into()));
        assert!(parse_arg("noequals").is_err());
        assert!(parse_arg("=x").is_err());
    }
}
