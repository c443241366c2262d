//! Anthropic Messages API (`POST /v1/messages`), as Claude Code uses it.

use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::sse::{self, End};
use crate::{Reply, ShellTool, Turn, Usage};

pub(crate) fn shell_tool(req: &Value) -> Option<ShellTool> {
    let tools = req.get("tools")?.as_array()?;
    crate::shell_tool(tools.iter().filter_map(|t| {
        Some((
            t.get("name")?.as_str()?,
            t.get("input_schema").and_then(|s| s.get("properties")),
        ))
    }))
}

/// Anthropic counts input without the cached parts, and thinking as
/// output.
fn usage(u: &Usage, output: u64) -> Value {
    json!({"input_tokens": u.input, "output_tokens": output, "cache_creation_input_tokens": u.cache_write, "cache_read_input_tokens": u.cache_read})
}

pub(crate) fn reply(r: Reply<'_>) -> Response {
    let id = format!("msg_fake_{}", r.serial);
    let start = json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant", "model": r.model, "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage(&r.usage, 1)}});
    let say = r.say.as_deref();
    let (block, delta, stop_reason) = match &r.turn {
        Turn::Status(code) => {
            let kind = match code {
                401 => "authentication_error",
                403 => "permission_error",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                _ => "api_error",
            };
            return sse::error(
                *code,
                json!({"type": "error", "error": {"type": kind, "message": format!("fake model: HTTP {code}")}}),
            );
        }
        Turn::Stall => {
            return sse::response(vec![sse::frame(Some("message_start"), &start)], End::Stall);
        }
        Turn::Drop => {
            return sse::response(vec![sse::frame(Some("message_start"), &start)], End::Break);
        }
        Turn::Shell(cmd) if r.tool.is_some() => {
            let tool = r.tool.as_ref().expect("checked");
            let input = tool.args(cmd);
            (
                json!({"type": "tool_use", "id": format!("toolu_fake_{}", r.serial), "name": tool.name, "input": {}}),
                json!({"type": "input_json_delta", "partial_json": input.to_string()}),
                "tool_use",
            )
        }
        Turn::Shell(cmd) => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": format!("(no shell tool offered for {cmd})")}),
            "end_turn",
        ),
        Turn::Text(t) => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": t}),
            "end_turn",
        ),
        Turn::SayThenShell(..) => unreachable!("comes as Shell and say"),
    };
    if !r.stream {
        let content = if stop_reason == "tool_use" {
            let mut b = block.clone();
            b["input"] = serde_json::from_str(delta["partial_json"].as_str().unwrap_or("{}"))
                .unwrap_or(json!({}));
            b
        } else {
            json!({"type": "text", "text": delta["text"]})
        };
        let mut all: Vec<Value> = say
            .map(|t| json!({"type": "text", "text": t}))
            .into_iter()
            .collect();
        all.push(content);
        return axum::Json(json!({"id": id, "type": "message", "role": "assistant", "model": r.model, "content": all, "stop_reason": stop_reason, "stop_sequence": null, "usage": usage(&r.usage, r.usage.output)})).into_response();
    }
    let mut blocks = Vec::new();
    if let Some(t) = say {
        blocks.push((
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": t}),
        ));
    }
    blocks.push((block, delta));
    let mut frames = vec![sse::frame(Some("message_start"), &start)];
    for (index, (block, delta)) in blocks.into_iter().enumerate() {
        frames.extend([
            sse::frame(
                Some("content_block_start"),
                &json!({"type": "content_block_start", "index": index, "content_block": block}),
            ),
            sse::frame(
                Some("content_block_delta"),
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ),
            sse::frame(
                Some("content_block_stop"),
                &json!({"type": "content_block_stop", "index": index}),
            ),
        ]);
    }
    frames.extend([
        sse::frame(
            Some("message_delta"),
            &json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": usage(&r.usage, r.usage.output)}),
        ),
        sse::frame(Some("message_stop"), &json!({"type": "message_stop"})),
    ]);
    sse::response(frames, End::Done)
}
