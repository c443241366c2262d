//! Gemini API (`POST /v1beta/models/{model}:streamGenerateContent`), as
//! Gemini CLI uses it.

use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::sse::{self, End};
use crate::{Reply, ShellTool, Turn};

pub(crate) fn shell_tool(req: &Value) -> Option<ShellTool> {
    let tools = req.get("tools")?.as_array()?;
    crate::shell_tool(
        tools
            .iter()
            .filter_map(|t| t.get("functionDeclarations").and_then(Value::as_array))
            .flatten()
            .filter_map(|f| {
                let params = f
                    .get("parameters")
                    .or_else(|| f.get("parametersJsonSchema"));
                Some((
                    f.get("name")?.as_str()?,
                    params.and_then(|p| p.get("properties")),
                ))
            }),
    )
}

pub(crate) fn reply(r: Reply<'_>) -> Response {
    let body = |parts: Value, finish: Option<&str>| {
        let mut cand = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
        if let Some(f) = finish {
            cand["finishReason"] = json!(f);
        }
        // Gemini counts cached tokens inside the prompt, and thoughts
        // apart from the candidates.
        let u = &r.usage;
        json!({"candidates": [cand], "usageMetadata": {"promptTokenCount": u.prompt(), "cachedContentTokenCount": u.cache_read, "candidatesTokenCount": u.output.saturating_sub(u.reasoning), "thoughtsTokenCount": u.reasoning, "totalTokenCount": u.total()}, "modelVersion": r.model})
    };
    let parts = match &r.turn {
        Turn::Status(code) => {
            let status = match code {
                401 => "UNAUTHENTICATED",
                403 => "PERMISSION_DENIED",
                429 => "RESOURCE_EXHAUSTED",
                _ => "INTERNAL",
            };
            return sse::error(
                *code,
                json!({"error": {"code": code, "message": format!("fake model: HTTP {code}"), "status": status}}),
            );
        }
        Turn::Stall => {
            return sse::response(
                vec![sse::frame(None, &body(json!([{"text": "thinking"}]), None))],
                End::Stall,
            );
        }
        Turn::Drop => {
            return sse::response(
                vec![sse::frame(None, &body(json!([{"text": "thinking"}]), None))],
                End::Break,
            );
        }
        Turn::Shell(cmd) if r.tool.is_some() => {
            let tool = r.tool.as_ref().expect("checked");
            json!([{"functionCall": {"name": tool.name, "args": tool.args(cmd)}}])
        }
        Turn::Shell(cmd) => json!([{"text": format!("(no shell tool offered for {cmd})")}]),
        Turn::Text(t) => json!([{"text": t}]),
        Turn::SayThenShell(..) => unreachable!("comes as Shell and say"),
    };
    let full = body(parts, Some("STOP"));
    if !r.stream {
        return axum::Json(full).into_response();
    }
    sse::response(vec![sse::frame(None, &full)], End::Done)
}
