//! OpenAI Chat Completions (`POST /v1/chat/completions`), as pi and
//! OpenCode use it.

use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::sse::{self, End};
use crate::{Reply, ShellTool, Turn, Usage};

pub(crate) fn shell_tool(req: &Value) -> Option<ShellTool> {
    let tools = req.get("tools")?.as_array()?;
    crate::shell_tool(tools.iter().filter_map(|t| {
        let f = t.get("function")?;
        Some((
            f.get("name")?.as_str()?,
            f.get("parameters").and_then(|s| s.get("properties")),
        ))
    }))
}

/// Chat Completions counts cached tokens inside `prompt_tokens`, and
/// reasoning inside `completion_tokens`.
fn usage(u: &Usage) -> Value {
    json!({"prompt_tokens": u.prompt(), "completion_tokens": u.output, "total_tokens": u.total(), "prompt_tokens_details": {"cached_tokens": u.cache_read}, "completion_tokens_details": {"reasoning_tokens": u.reasoning}})
}

pub(crate) fn reply(r: Reply<'_>) -> Response {
    let id = format!("chatcmpl-fake-{}", r.serial);
    let chunk = |delta: Value, finish: Value, usage: Value| {
        let mut c = json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": r.model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        if !usage.is_null() {
            c["usage"] = usage;
        }
        c
    };
    let first = chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
        Value::Null,
    );
    let (delta, finish) = match &r.turn {
        Turn::Status(code) => {
            return sse::error(
                *code,
                json!({"error": {"message": format!("fake model: HTTP {code}"), "type": if *code == 401 { "invalid_request_error" } else { "server_error" }, "code": if *code == 401 { "invalid_api_key" } else { "error" }}}),
            );
        }
        Turn::Stall => return sse::response(vec![sse::frame(None, &first)], End::Stall),
        Turn::Drop => return sse::response(vec![sse::frame(None, &first)], End::Break),
        Turn::Shell(cmd) if r.tool.is_some() => {
            let tool = r.tool.as_ref().expect("checked");
            (
                json!({"tool_calls": [{"index": 0, "id": format!("call_fake_{}", r.serial), "type": "function", "function": {"name": tool.name, "arguments": tool.args(cmd).to_string()}}]}),
                "tool_calls",
            )
        }
        Turn::Shell(cmd) => (
            json!({"content": format!("(no shell tool offered for {cmd})")}),
            "stop",
        ),
        Turn::Text(t) => (json!({"content": t}), "stop"),
        Turn::SayThenShell(..) => unreachable!("comes as Shell and say"),
    };
    if !r.stream {
        let mut message = delta.clone();
        message["role"] = json!("assistant");
        return axum::Json(json!({"id": id, "object": "chat.completion", "created": 0, "model": r.model, "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage(&r.usage)})).into_response();
    }
    let frames = vec![
        sse::frame(None, &first),
        sse::frame(None, &chunk(delta, Value::Null, Value::Null)),
        sse::frame(None, &chunk(json!({}), json!(finish), Value::Null)),
        sse::frame(
            None,
            &json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": r.model, "choices": [], "usage": usage(&r.usage)}),
        ),
        sse::raw("data: [DONE]\n\n"),
    ];
    sse::response(frames, End::Done)
}
