//! Prompt templates: `{{NAME}}` placeholders filled from `--arg NAME=VALUE`
//! and from warden's built-ins (`BRANCH`, `BASE`, `ITERATION`, ...).

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

/// The placeholders a template uses, in order of first use.
pub fn placeholders(template: &str) -> Result<Vec<String>, TemplateError> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            let near: String = rest[start..].chars().take(30).collect();
            return Err(TemplateError::Unclosed(near));
        };
        let name = after[..end].trim();
        if is_name(name) && !out.iter().any(|n| n == name) {
            out.push(name.to_string());
        }
        rest = &after[end + 2..];
    }
    Ok(out)
}

/// Fills every `{{NAME}}`; text that is not a placeholder name is left as
/// it is. Returns the text and the names of `values` it never used.
pub fn render(template: &str, values: &BTreeMap<String, String>) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            let near: String = rest[start..].chars().take(30).collect();
            return Err(TemplateError::Unclosed(near));
        };
        let name = after[..end].trim();
        if is_name(name) {
            match values.get(name) {
                Some(v) => out.push_str(v),
                None => {
                    return Err(TemplateError::Missing {
                        name: name.to_string(),
                    });
                }
            }
        } else {
            out.push_str(&rest[start..start + 2 + end + 2]);
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
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
        let r = render(t, &vals(&[("ISSUE", "42"), ("BRANCH", "b")])).unwrap();
        assert_eq!(r, "Fix issue 42 on b; json: {{\"a\": 1}} 42");
        assert_eq!(placeholders(t).unwrap(), vec!["ISSUE", "BRANCH"]);
    }

    #[test]
    fn a_missing_value_names_the_placeholder() {
        let e = render("do {{TASK}}", &vals(&[])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the prompt uses {{TASK}} but no value was given: add --arg TASK=VALUE"
        );
        assert!(matches!(
            render("x {{oops", &vals(&[])),
            Err(TemplateError::Unclosed(_))
        ));
    }

    #[test]
    fn args_parse() {
        assert_eq!(parse_arg("A=b=c").unwrap(), ("A".into(), "b=c".into()));
        assert!(parse_arg("noequals").is_err());
        assert!(parse_arg("=x").is_err());
    }
}
