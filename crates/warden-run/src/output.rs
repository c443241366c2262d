//! Structured output: the last `<TAG>…</TAG>` in the agent's final text,
//! optionally parsed as JSON and validated against a JSON Schema.

use serde_json::Value;

#[non_exhaustive]
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OutputError {
    #[error("no <{tag}>…</{tag}> in the agent's final text")]
    NoTag { tag: String },
    #[error("the <{tag}> output is not valid JSON: {message}")]
    NotJson { tag: String, message: String },
    #[error("the <{tag}> output does not match the schema: {errors}")]
    Schema { tag: String, errors: String },
    #[error("the output schema {path} is not usable: {message}")]
    BadSchema { path: String, message: String },
    #[error(
        "the output schema {path} cannot be checked: this program was built without warden-run's `output-schema` feature (turn it on in its Cargo.toml)"
    )]
    SchemaNotBuilt { path: String },
}

/// The text of the last `<tag>…</tag>`, trimmed.
pub(crate) fn extract(text: &str, tag: &str) -> Result<String, OutputError> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let end = text
        .rfind(&close)
        .ok_or_else(|| OutputError::NoTag { tag: tag.into() })?;
    let start = text[..end]
        .rfind(&open)
        .ok_or_else(|| OutputError::NoTag { tag: tag.into() })?;
    Ok(text[start + open.len()..end].trim().to_string())
}

/// Parses the tag's content as JSON, without a surrounding ```json fence.
pub(crate) fn parse_json(raw: &str, tag: &str) -> Result<Value, OutputError> {
    let mut body = raw.trim();
    if let Some(rest) = body.strip_prefix("```") {
        let rest = rest.strip_prefix("json").unwrap_or(rest);
        body = rest.strip_suffix("```").unwrap_or(rest).trim();
    }
    serde_json::from_str(body).map_err(|e| OutputError::NotJson {
        tag: tag.into(),
        message: e.to_string(),
    })
}

/// A compiled JSON Schema (the `output-schema` feature; without it,
/// [`Schema::compile`] refuses every schema, naming the feature).
pub(crate) struct Schema {
    #[cfg(feature = "output-schema")]
    validator: jsonschema::Validator,
    #[cfg(not(feature = "output-schema"))]
    validator: std::convert::Infallible,
}

impl Schema {
    #[cfg(not(feature = "output-schema"))]
    pub(crate) fn compile(_schema: &Value, path: &str) -> Result<Self, OutputError> {
        Err(OutputError::SchemaNotBuilt { path: path.into() })
    }

    #[cfg(not(feature = "output-schema"))]
    pub(crate) fn check(&self, _value: &Value, _tag: &str) -> Result<(), OutputError> {
        match self.validator {}
    }

    #[cfg(feature = "output-schema")]
    pub(crate) fn compile(schema: &Value, path: &str) -> Result<Self, OutputError> {
        jsonschema::validator_for(schema)
            .map(|validator| Self { validator })
            .map_err(|e| OutputError::BadSchema {
                path: path.into(),
                message: e.to_string(),
            })
    }

    #[cfg(feature = "output-schema")]
    pub(crate) fn check(&self, value: &Value, tag: &str) -> Result<(), OutputError> {
        let errors: Vec<String> = self
            .validator
            .iter_errors(value)
            .map(|e| {
                let at = e.instance_path.to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("at {at}: {e}")
                }
            })
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(OutputError::Schema {
                tag: tag.into(),
                errors: errors.join("; "),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_last_tag_wins_and_fences_are_removed() {
        let text = "draft <result>{\"a\":1}</result> final <result>\n```json\n{\"a\": 2}\n```\n</result> bye";
        let raw = extract(text, "result").unwrap();
        assert_eq!(parse_json(&raw, "result").unwrap(), json!({"a": 2}));
        assert_eq!(
            extract("nothing", "result").unwrap_err().to_string(),
            "no <result>…</result> in the agent's final text"
        );
    }

    #[cfg(not(feature = "output-schema"))]
    #[test]
    fn without_the_feature_a_schema_is_refused_naming_it() {
        let e = Schema::compile(&json!({"type": "object"}), "s.json")
            .err()
            .expect("refused")
            .to_string();
        assert!(
            e.contains("s.json") && e.contains("`output-schema` feature"),
            "{e}"
        );
    }

    #[cfg(feature = "output-schema")]
    #[test]
    fn schema_errors_say_where_and_what() {
        let schema = Schema::compile(&json!({"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}}), "s.json").unwrap();
        assert!(schema.check(&json!({"ok": true}), "r").is_ok());
        let e = schema
            .check(&json!({"ok": "yes"}), "r")
            .unwrap_err()
            .to_string();
        assert!(e.contains("at /ok") && e.contains("boolean"), "{e}");
        let e = parse_json("{oops", "r").unwrap_err().to_string();
        assert!(e.starts_with("the <r> output is not valid JSON"), "{e}");
    }
}
