//! A message's content blocks, read in the same pass as its line.
//!
//! A tool result can be megabytes of escaped text; reading the content as
//! raw JSON and then parsing the blocks out of it walked that text once
//! more. [`Content`] takes the blocks as the line is parsed, with the
//! meaning the two steps had: the line is well formed whatever the
//! content is, and the blocks count only when the content is an array
//! whose every element is a [`Block`] (else there are none). The one shape
//! it does not judge (a block written as an array, which serde reads
//! field by field) is left [`Content::Unsure`], for the caller to read the
//! old way.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

/// Visitor methods that take a JSON value of the named kinds (`unit`,
/// `bool`, `i64`, `u64`, `f64`, `str`, `seq`, `map`) as `$value`; a
/// sequence or a map is read to its end (and so checked) first.
macro_rules! otherwise {
    ($de:lifetime, $value:expr; $($kind:ident)*) => {
        $(otherwise!(@ $de, $value; $kind);)*
    };
    (@ $de:lifetime, $value:expr; unit) => {
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok($value)
        }
    };
    (@ $de:lifetime, $value:expr; bool) => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok($value)
        }
    };
    (@ $de:lifetime, $value:expr; i64) => {
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok($value)
        }
    };
    (@ $de:lifetime, $value:expr; u64) => {
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok($value)
        }
    };
    (@ $de:lifetime, $value:expr; f64) => {
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok($value)
        }
    };
    (@ $de:lifetime, $value:expr; str) => {
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok($value)
        }
    };
    (@ $de:lifetime, $value:expr; seq) => {
        fn visit_seq<A: SeqAccess<$de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok($value)
        }
    };
    (@ $de:lifetime, $value:expr; map) => {
        fn visit_map<A: MapAccess<$de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok($value)
        }
    };
}

#[derive(Default)]
pub(super) enum Content<'a> {
    /// Absent, or not an array of blocks: no blocks.
    #[default]
    Nothing,
    Blocks(Vec<Block<'a>>),
    /// A shape read only by the full two-step parse.
    Unsure,
}

impl<'a> Content<'a> {
    /// The blocks; `line` is the line this content was read from, read
    /// again only when the content is [`Content::Unsure`].
    pub(super) fn blocks(&self, line: &'a [u8]) -> Vec<Block<'a>> {
        match self {
            Content::Nothing => Vec::new(),
            Content::Blocks(b) => b.clone(),
            Content::Unsure => {
                match crate::json::parse::<RawLine<'_>>(line).and_then(|l| l.message?.content) {
                    Some(raw) if raw.get().starts_with('[') => {
                        serde_json::from_str(raw.get()).unwrap_or_default()
                    }
                    _ => Vec::new(),
                }
            }
        }
    }
}

/// The line with its content as raw JSON, as the two-step reading had it.
#[derive(Deserialize)]
struct RawLine<'a> {
    #[serde(default, borrow)]
    message: Option<RawMessage<'a>>,
}

#[derive(Deserialize)]
struct RawMessage<'a> {
    #[serde(default, borrow)]
    content: Option<&'a RawValue>,
}

/// Whether the two-step reading accepted `line`, which the one pass
/// accepted: they differ only on invalid UTF-8 in a block's field that
/// neither reads (raw JSON is checked for UTF-8, a skipped value is not).
pub(super) fn two_step_accepts(line: &[u8]) -> bool {
    std::str::from_utf8(line).is_ok() || crate::json::parse::<RawLine<'_>>(line).is_some()
}

/// One content block; the derive is the full two-step reading, kept for
/// [`Content::Unsure`].
#[derive(Deserialize, Default, Clone)]
pub(super) struct Block<'a> {
    #[serde(rename = "type", borrow)]
    pub ty: Cow<'a, str>,
    #[serde(default, borrow)]
    pub text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub thinking: Option<Cow<'a, str>>,
    // tool_use
    #[serde(default, borrow)]
    pub id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub input: Option<&'a RawValue>,
    // tool_result
    #[serde(default, borrow)]
    pub tool_use_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub content: Option<&'a RawValue>,
    #[serde(default)]
    pub is_error: Option<bool>,
}

impl<'de: 'a, 'a> Deserialize<'de> for Content<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ContentVisitor)
    }
}

struct ContentVisitor;

impl<'de> Visitor<'de> for ContentVisitor {
    type Value = Content<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut blocks = Vec::new();
        let (mut bad, mut unsure) = (false, false);
        while let Some(e) = seq.next_element::<Element<'de>>()? {
            match e {
                Element::Block(b) if !bad => blocks.push(b),
                Element::Block(_) => {}
                Element::Bad => bad = true,
                Element::Unsure => unsure = true,
            }
        }
        Ok(match (unsure, bad) {
            (true, _) => Content::Unsure,
            (false, true) => Content::Nothing,
            (false, false) => Content::Blocks(blocks),
        })
    }

    otherwise!('de, Content::Nothing; map unit bool i64 u64 f64 str);
}

/// One element of a content array.
enum Element<'a> {
    Block(Block<'a>),
    /// Not a block (serde would have refused it, and with it every block).
    Bad,
    Unsure,
}

impl<'de: 'a, 'a> Deserialize<'de> for Element<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ElementVisitor)
    }
}

struct ElementVisitor;

impl<'de> Visitor<'de> for ElementVisitor {
    type Value = Element<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut b = Block::default();
        let mut ty = None;
        let mut bad = false;
        let mut seen = 0u16;
        while let Some(key) = map.next_key::<Key>()? {
            let bit = 1u16 << (key as u16);
            if key != Key::Other {
                bad |= seen & bit != 0;
                seen |= bit;
            }
            match key {
                Key::Type => {
                    let mut t = None;
                    text(&mut map, &mut t, &mut bad)?;
                    // `type` is required: null is refused.
                    match t {
                        Some(t) => ty = Some(t),
                        None => bad = true,
                    }
                }
                Key::Text => text(&mut map, &mut b.text, &mut bad)?,
                Key::Thinking => text(&mut map, &mut b.thinking, &mut bad)?,
                Key::Id => text(&mut map, &mut b.id, &mut bad)?,
                Key::Name => text(&mut map, &mut b.name, &mut bad)?,
                Key::ToolUseId => text(&mut map, &mut b.tool_use_id, &mut bad)?,
                Key::Input => b.input = map.next_value::<Option<&'de RawValue>>()?,
                Key::Content => b.content = map.next_value::<Option<&'de RawValue>>()?,
                Key::IsError => match map.next_value::<Flag>()? {
                    Flag::Bool(v) => b.is_error = Some(v),
                    Flag::Null => b.is_error = None,
                    Flag::Wrong => bad = true,
                },
                Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(match ty {
            Some(ty) if !bad => Element::Block(Block { ty, ..b }),
            _ => Element::Bad,
        })
    }

    otherwise!('de, Element::Unsure; seq);
    otherwise!('de, Element::Bad; unit bool i64 u64 f64 str);
}

/// A string field of a block into `slot`; `bad` when it is not one.
fn text<'de, A: MapAccess<'de>>(
    map: &mut A,
    slot: &mut Option<Cow<'de, str>>,
    bad: &mut bool,
) -> Result<(), A::Error> {
    match map.next_value::<Text<'de>>()? {
        Text::Str(s) => *slot = Some(s),
        Text::Null => *slot = None,
        Text::Wrong => *bad = true,
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Key {
    Type,
    Text,
    Thinking,
    Id,
    Name,
    Input,
    ToolUseId,
    Content,
    IsError,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E>(self, s: &str) -> Result<Key, E> {
                Ok(match s {
                    "type" => Key::Type,
                    "text" => Key::Text,
                    "thinking" => Key::Thinking,
                    "id" => Key::Id,
                    "name" => Key::Name,
                    "input" => Key::Input,
                    "tool_use_id" => Key::ToolUseId,
                    "content" => Key::Content,
                    "is_error" => Key::IsError,
                    _ => Key::Other,
                })
            }
        }
        d.deserialize_identifier(V)
    }
}

/// A string field, or what stands in its place.
enum Text<'a> {
    Str(Cow<'a, str>),
    Null,
    Wrong,
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Text::Str(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Text::Str(Cow::Owned(s.to_string())))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Text::Null)
            }
            otherwise!('de, Text::Wrong; bool i64 u64 f64 seq map);
        }
        d.deserialize_any(V)
    }
}

/// A boolean field, or what stands in its place.
enum Flag {
    Bool(bool),
    Null,
    Wrong,
}

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Flag;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, b: bool) -> Result<Flag, E> {
                Ok(Flag::Bool(b))
            }
            fn visit_unit<E>(self) -> Result<Flag, E> {
                Ok(Flag::Null)
            }
            otherwise!('de, Flag::Wrong; i64 u64 f64 str seq map);
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The blocks as the two-step reading found them.
    fn two_step(content: &str) -> Vec<Block<'_>> {
        let raw: &RawValue = serde_json::from_str(content).unwrap();
        if raw.get().starts_with('[') {
            serde_json::from_str(raw.get()).unwrap_or_default()
        } else {
            Vec::new()
        }
    }

    fn seen(blocks: &[Block<'_>]) -> String {
        let s = |v: &Option<Cow<'_, str>>| format!("{v:?}");
        let r = |v: &Option<&RawValue>| format!("{:?}", v.map(RawValue::get));
        blocks
            .iter()
            .map(|b| {
                format!(
                    "{}|{}|{}|{}|{}|{}|{}|{}|{:?}",
                    b.ty,
                    s(&b.text),
                    s(&b.thinking),
                    s(&b.id),
                    s(&b.name),
                    r(&b.input),
                    s(&b.tool_use_id),
                    r(&b.content),
                    b.is_error
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn one_pass_finds_the_blocks_the_two_steps_found() {
        for content in [
            r#"[{"type":"text","text":"a \"b\" \u00e9"}]"#,
            r#"[{"type":"tool_result","tool_use_id":"t","content":"x\ny","is_error":true,"extra":[1,{}]}]"#,
            r#"[{"type":"tool_use","id":"t","name":"Bash","input":{"command":"ls"}},{"type":"thinking","thinking":"hm"}]"#,
            r#"[{"type":"tool_result","content":null,"is_error":null,"text":null}]"#,
            r#"[{"type":"text","text":1},{"type":"text","text":"kept?"}]"#,
            r#"[{"type":"text"},{"text":"no type"}]"#,
            r#"[{"type":null}]"#,
            r#"[{"type":"text","type":"text"}]"#,
            r#"[{"type":"tool_result","is_error":"yes"}]"#,
            r#"[{"type":"text","name":{"a":1}}]"#,
            r#"[1]"#,
            r#"["text"]"#,
            r#"[]"#,
            r#""a string""#,
            r#"{"type":"text"}"#,
            r#"null"#,
            r#"3"#,
        ] {
            let line = format!(r#"{{"message":{{"content":{content}}}}}"#);
            #[derive(Deserialize)]
            struct L<'a> {
                #[serde(borrow)]
                message: M<'a>,
            }
            #[derive(Deserialize)]
            struct M<'a> {
                #[serde(borrow)]
                content: Content<'a>,
            }
            let l: L<'_> = serde_json::from_str(&line).expect(content);
            assert_eq!(
                seen(&l.message.content.blocks(line.as_bytes())),
                seen(&two_step(content)),
                "{content}"
            );
        }
    }

    /// A JSON value likely to hit the edges: the fields a block has, with
    /// values of every type, duplicates, and nesting.
    fn value() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            Just("null".to_string()),
            Just("true".to_string()),
            Just("3".to_string()),
            Just(r#""s""#.to_string()),
            Just(r#""e\u00e9\n""#.to_string()),
            Just("[]".to_string()),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            let key = prop::sample::select(vec![
                "type",
                "text",
                "thinking",
                "id",
                "name",
                "input",
                "tool_use_id",
                "content",
                "is_error",
                "other",
            ]);
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4)
                    .prop_map(|v| format!("[{}]", v.join(","))),
                prop::collection::vec((key, inner), 0..5).prop_map(|m| {
                    let members: Vec<String> = m
                        .into_iter()
                        .map(|(k, v)| format!(r#""{k}":{v}"#))
                        .collect();
                    format!("{{{}}}", members.join(","))
                }),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn one_pass_agrees_with_the_two_steps_on_any_content(content in value()) {
            let line = format!(r#"{{"message":{{"content":{content}}}}}"#);
            #[derive(Deserialize)]
            struct L<'a> {
                #[serde(borrow)]
                message: M<'a>,
            }
            #[derive(Deserialize)]
            struct M<'a> {
                #[serde(borrow)]
                content: Content<'a>,
            }
            let l: L<'_> = serde_json::from_str(&line).expect("well formed");
            proptest::prop_assert_eq!(
                seen(&l.message.content.blocks(line.as_bytes())),
                seen(&two_step(&content)),
                "{}", content
            );
        }
    }

    #[test]
    fn a_block_written_as_an_array_is_read_the_old_way() {
        let line = r#"{"message":{"content":[["text","hi"]]}}"#;
        #[derive(Deserialize)]
        struct L<'a> {
            #[serde(borrow)]
            message: M<'a>,
        }
        #[derive(Deserialize)]
        struct M<'a> {
            #[serde(borrow)]
            content: Content<'a>,
        }
        let l: L<'_> = serde_json::from_str(line).unwrap();
        assert!(matches!(l.message.content, Content::Unsure));
        let blocks = l.message.content.blocks(line.as_bytes());
        assert_eq!(seen(&blocks), seen(&two_step(r#"[["text","hi"]]"#)));
        assert_eq!(blocks.len(), 1);
    }
}
