//! The version of warden's file formats: `run.json`, `session.json`,
//! `batch.json` and every `events.jsonl` line carry it as
//! `schema_version`.
//!
//! A field removed, renamed or changed in meaning bumps it; a field added
//! does not (readers ignore fields they do not know).

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The format version this warden writes.
pub const SCHEMA_VERSION: u32 = 1;

/// The `schema_version` field: always [`SCHEMA_VERSION`], so no writer can
/// get it wrong. Reading a document of another version fails, saying so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SchemaVersion;

impl Serialize for SchemaVersion {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(SCHEMA_VERSION)
    }
}

impl<'de> Deserialize<'de> for SchemaVersion {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = u64::deserialize(d)?;
        if v == u64::from(SCHEMA_VERSION) {
            Ok(SchemaVersion)
        } else {
            Err(serde::de::Error::custom(format_args!(
                "schema_version {v} is not the one this warden reads \
                 ({SCHEMA_VERSION}): read it with the warden that wrote it"
            )))
        }
    }
}

impl JsonSchema for SchemaVersion {
    fn schema_name() -> Cow<'static, str> {
        "SchemaVersion".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "The format version: a field removed or changed in meaning bumps it, a field added does not.",
            "type": "integer",
            "const": SCHEMA_VERSION,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_current_version_reads_back() {
        assert_eq!(serde_json::to_string(&SchemaVersion).unwrap(), "1");
        assert!(serde_json::from_str::<SchemaVersion>("1").is_ok());
        let e = serde_json::from_str::<SchemaVersion>("2").unwrap_err();
        assert!(e.to_string().contains("schema_version 2"), "{e}");
    }
}
