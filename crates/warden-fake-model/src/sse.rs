//! Server-sent event bodies: a list of events, then the end, a stall or a
//! broken connection.

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, StreamExt};
use serde_json::Value;

/// How a stream ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    Done,
    Stall,
    Break,
}

/// One SSE frame; `event` is the `event:` line, if the API uses one.
pub(crate) fn frame(event: Option<&str>, data: &Value) -> Bytes {
    let mut s = String::new();
    if let Some(e) = event {
        s.push_str("event: ");
        s.push_str(e);
        s.push('\n');
    }
    s.push_str("data: ");
    s.push_str(&data.to_string());
    s.push_str("\n\n");
    Bytes::from(s)
}

pub(crate) fn raw(text: &str) -> Bytes {
    Bytes::copy_from_slice(text.as_bytes())
}

/// An event-stream response of `frames`, ending as `end` says.
pub(crate) fn response(frames: Vec<Bytes>, end: End) -> Response {
    let head = stream::iter(frames.into_iter().map(Ok::<Bytes, std::io::Error>));
    let body = match end {
        End::Done => Body::from_stream(head),
        End::Stall => Body::from_stream(head.chain(stream::pending())),
        End::Break => Body::from_stream(head.chain(stream::once(async {
            Err(std::io::Error::other("the fake model broke the connection"))
        }))),
    };
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// A JSON error body with an HTTP status.
pub(crate) fn error(status: u16, body: Value) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, axum::Json(body)).into_response()
}
