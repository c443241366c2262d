//! OpenAI Responses API (`POST /v1/responses`), as Codex uses it.

use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::sse::{self, End};
use crate::{Reply, ShellTool, Turn, Usage};

pub(crate) fn shell_tool(req: &Value) -> Option<ShellTool> {
    let tools = req.get("tools")?.as_array()?;
    crate::shell_tool(tools.iter().filter_map(|t| {
        Some((
            t.get("name")?.as_str()?,
            t.get("parameters").and_then(|s| s.get("properties")),
        ))
    }))
}

/// Responses counts cached tokens inside `input_tokens`, and reasoning
/// inside `output_tokens`.
fn usage(u: &Usage) -> Value {
    json!({"input_tokens": u.prompt(), "input_tokens_details": {"cached_tokens": u.cache_read}, "output_tokens": u.output, "output_tokens_details": {"reasoning_tokens": u.reasoning}, "total_tokens": u.total()})
}

pub(crate) fn reply(r: Reply<'_>) -> Response {
    let id = format!("resp_fake_{}", r.serial);
    let created = json!({"type": "response.created", "response": {"id": id, "object": "response", "created_at": 0, "status": "in_progress", "model": r.model, "output": []}});
    let item = match &r.turn {
        Turn::Status(code) => {
            let (kind, code_name) = match code {
                401 => ("invalid_request_error", "invalid_api_key"),
                429 => ("rate_limit_error", "rate_limit_exceeded"),
                _ => ("server_error", "server_error"),
            };
            return sse::error(
                *code,
                json!({"error": {"message": format!("fake model: HTTP {code}"), "type": kind, "code": code_name}}),
            );
        }
        Turn::Stall => {
            return sse::response(
                vec![sse::frame(Some("response.created"), &created)],
                End::Stall,
            );
        }
        Turn::Drop => {
            return sse::response(
                vec![sse::frame(Some("response.created"), &created)],
                End::Break,
            );
        }
        Turn::Shell(cmd) if r.tool.is_some() => {
            let tool = r.tool.as_ref().expect("checked");
            json!({"type": "function_call", "id": format!("fc_fake_{}", r.serial), "call_id": format!("call_fake_{}", r.serial), "name": tool.name, "arguments": tool.args(cmd).to_string(), "status": "completed"})
        }
        Turn::Shell(cmd) => message(&format!("(no shell tool offered for {cmd})"), r.serial),
        Turn::Text(t) => message(t, r.serial),
        Turn::SayThenShell(..) => unreachable!("comes as Shell and say"),
    };
    let done = json!({"type": "response.completed", "response": {"id": id, "object": "response", "created_at": 0, "status": "completed", "model": r.model, "output": [item], "usage": usage(&r.usage)}});
    if !r.stream {
        return axum::Json(done["response"].clone()).into_response();
    }
    let mut frames = vec![
        sse::frame(Some("response.created"), &created),
        sse::frame(
            Some("response.output_item.added"),
            &json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
        ),
    ];
    if item["type"] == "message" {
        let text = item["content"][0]["text"].clone();
        frames.push(sse::frame(Some("response.output_text.delta"), &json!({"type": "response.output_text.delta", "item_id": item["id"], "output_index": 0, "content_index": 0, "delta": text})));
    }
    frames.push(sse::frame(
        Some("response.output_item.done"),
        &json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
    ));
    frames.push(sse::frame(Some("response.completed"), &done));
    sse::response(frames, End::Done)
}

fn message(text: &str, serial: u64) -> Value {
    json!({"type": "message", "id": format!("msg_fake_{serial}"), "status": "completed", "role": "assistant", "content": [{"type": "output_text", "text": text, "annotations": []}]})
}
