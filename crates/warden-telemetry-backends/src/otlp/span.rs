//! Received spans, flattened out of their export requests: one [`Span`]
//! per span, carrying its resource's and scope's identity with it, so a
//! test can filter and compare without walking the protocol's nesting.

use std::collections::BTreeMap;
use std::fmt;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1 as proto;

pub use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
pub use opentelemetry_proto::tonic::trace::v1::status::StatusCode;

/// Attributes by key. A key repeated on the wire keeps its last value.
pub type Attributes = BTreeMap<String, AttrValue>;

/// An attribute value.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    Str(String),
    Int(i64),
    Double(f64),
    Bool(bool),
    Array(Vec<AttrValue>),
    /// A value this receiver does not take apart (bytes, a key-value
    /// list, an empty value), in its debug form.
    Other(String),
}

impl AttrValue {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Self::Int(i) => Some(*i),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Self::Double(d) => Some(*d),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Self::Bool(b) => Some(*b),
            _ => None,
        }
    }
}

impl fmt::Display for AttrValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Str(s) => write!(f, "{s:?}"),
            Self::Int(i) => write!(f, "{i}"),
            Self::Double(d) => write!(f, "{d}"),
            Self::Bool(b) => write!(f, "{b}"),
            Self::Array(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
            Self::Other(s) => f.write_str(s),
        }
    }
}

impl From<&str> for AttrValue {
    fn from(s: &str) -> Self {
        Self::Str(s.to_string())
    }
}

impl From<String> for AttrValue {
    fn from(s: String) -> Self {
        Self::Str(s)
    }
}

impl From<i64> for AttrValue {
    fn from(i: i64) -> Self {
        Self::Int(i)
    }
}

impl From<f64> for AttrValue {
    fn from(d: f64) -> Self {
        Self::Double(d)
    }
}

impl From<bool> for AttrValue {
    fn from(b: bool) -> Self {
        Self::Bool(b)
    }
}

/// One received span.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Span {
    /// 32 lower-case hex digits.
    pub trace_id: String,
    /// 16 lower-case hex digits.
    pub span_id: String,
    /// 16 lower-case hex digits; empty for a root span.
    pub parent_span_id: String,
    /// Whether the parent lives in another process (a `TRACEPARENT` it
    /// was given, say), when the exporter said; `None` when it did not.
    pub parent_is_remote: Option<bool>,
    pub name: String,
    pub kind: SpanKind,
    pub start_unix_nano: u64,
    pub end_unix_nano: u64,
    pub attributes: Attributes,
    pub events: Vec<SpanEvent>,
    pub links: Vec<SpanLink>,
    pub status: Status,
    /// The attributes of the resource that sent it (`service.name`, ...).
    pub resource: Attributes,
    /// The instrumentation scope's name and version.
    pub scope: (String, String),
}

impl Span {
    pub fn attr(&self, key: &str) -> Option<&AttrValue> {
        self.attributes.get(key)
    }

    /// The string attribute `key`, if it is one.
    pub fn str_attr(&self, key: &str) -> Option<&str> {
        self.attr(key).and_then(AttrValue::as_str)
    }

    /// The integer attribute `key`, if it is one.
    pub fn int_attr(&self, key: &str) -> Option<i64> {
        self.attr(key).and_then(AttrValue::as_i64)
    }

    /// The events named `name`, in the order they were sent.
    pub fn events_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a SpanEvent> {
        self.events.iter().filter(move |e| e.name == name)
    }

    pub fn is_root(&self) -> bool {
        self.parent_span_id.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SpanEvent {
    pub name: String,
    pub time_unix_nano: u64,
    pub attributes: Attributes,
}

#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SpanLink {
    pub trace_id: String,
    pub span_id: String,
    pub attributes: Attributes,
}

#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Status {
    pub code: StatusCode,
    pub message: String,
}

/// Lower-case hex, as `TRACEPARENT` and the SDK's `Display` write ids.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

pub(crate) fn attributes(kvs: &[KeyValue]) -> Attributes {
    kvs.iter()
        .map(|kv| (kv.key.clone(), value(kv.value.as_ref())))
        .collect()
}

fn value(v: Option<&AnyValue>) -> AttrValue {
    use any_value::Value as V;
    match v.and_then(|v| v.value.as_ref()) {
        Some(V::StringValue(s)) => AttrValue::Str(s.clone()),
        Some(V::IntValue(i)) => AttrValue::Int(*i),
        Some(V::DoubleValue(d)) => AttrValue::Double(*d),
        Some(V::BoolValue(b)) => AttrValue::Bool(*b),
        Some(V::ArrayValue(a)) => {
            AttrValue::Array(a.values.iter().map(|v| value(Some(v))).collect())
        }
        Some(other) => AttrValue::Other(format!("{other:?}")),
        None => AttrValue::Other("(empty)".to_string()),
    }
}

/// The span flags' bits that say whether the parent is remote (OTLP
/// `SpanFlags`): the first says the second is meaningful.
const HAS_IS_REMOTE: u32 = proto::SpanFlags::ContextHasIsRemoteMask as u32;
const IS_REMOTE: u32 = proto::SpanFlags::ContextIsRemoteMask as u32;

pub(crate) fn flatten(requests: &[ExportTraceServiceRequest]) -> Vec<Span> {
    let mut out = Vec::new();
    for rs in requests.iter().flat_map(|r| &r.resource_spans) {
        let resource = rs
            .resource
            .as_ref()
            .map(|r| attributes(&r.attributes))
            .unwrap_or_default();
        for ss in &rs.scope_spans {
            let scope = ss
                .scope
                .as_ref()
                .map(|s| (s.name.clone(), s.version.clone()))
                .unwrap_or_default();
            for s in &ss.spans {
                out.push(Span {
                    trace_id: hex(&s.trace_id),
                    span_id: hex(&s.span_id),
                    parent_span_id: hex(&s.parent_span_id),
                    parent_is_remote: (s.flags & HAS_IS_REMOTE != 0)
                        .then_some(s.flags & IS_REMOTE != 0),
                    name: s.name.clone(),
                    kind: SpanKind::try_from(s.kind).unwrap_or(SpanKind::Unspecified),
                    start_unix_nano: s.start_time_unix_nano,
                    end_unix_nano: s.end_time_unix_nano,
                    attributes: attributes(&s.attributes),
                    events: s
                        .events
                        .iter()
                        .map(|e| SpanEvent {
                            name: e.name.clone(),
                            time_unix_nano: e.time_unix_nano,
                            attributes: attributes(&e.attributes),
                        })
                        .collect(),
                    links: s
                        .links
                        .iter()
                        .map(|l| SpanLink {
                            trace_id: hex(&l.trace_id),
                            span_id: hex(&l.span_id),
                            attributes: attributes(&l.attributes),
                        })
                        .collect(),
                    status: s
                        .status
                        .as_ref()
                        .map(|st| Status {
                            code: StatusCode::try_from(st.code).unwrap_or(StatusCode::Unset),
                            message: st.message.clone(),
                        })
                        .unwrap_or(Status {
                            code: StatusCode::Unset,
                            message: String::new(),
                        }),
                    resource: resource.clone(),
                    scope: scope.clone(),
                });
            }
        }
    }
    out
}

pub(crate) fn count(request: &ExportTraceServiceRequest) -> usize {
    request
        .resource_spans
        .iter()
        .flat_map(|rs| &rs.scope_spans)
        .map(|ss| ss.spans.len())
        .sum()
}
