//! The realistic streams the benchmarks generate, shared by the decode
//! benchmark and the end-to-end one (`#[path]`-included there).

/// A tool result's text: source-like lines with quotes, tabs and
/// newlines, so the JSON has escapes to work through.
pub(crate) fn big_text(n: usize, seed: usize) -> String {
    let mut s = String::with_capacity(n + 64);
    let mut i = seed;
    while s.len() < n {
        s.push_str(&format!(
            "    let value_{i} = parse(\"field {i}\")?;\t// checks {i}\n"
        ));
        i += 1;
    }
    s
}

pub(crate) fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// One round of Claude with `--include-partial-messages`: the API's
/// events of one message (start with usage, text and tool-input deltas,
/// final usage), the two assistant lines, and the tool result. 21 of its
/// 24 lines are `stream_event`s.
pub(crate) fn claude_partial(i: usize, big: &str) -> Vec<String> {
    const TAIL: &str =
        r#""session_id":"3f0c9a2e-1b7d-4e55-9c1a-0d2b7c6e9f10","parent_tool_use_id":null"#;
    let event =
        |e: String| format!(r#"{{"type":"stream_event","event":{e},{TAIL},"uuid":"e{i}"}}"#);
    let mut lines = vec![
        event(format!(
            r#"{{"type":"message_start","message":{{"model":"claude-sonnet-4-5","id":"msg_{i}","type":"message","role":"assistant","content":[],"stop_reason":null,"stop_sequence":null,"usage":{{"input_tokens":812,"cache_creation_input_tokens":0,"cache_read_input_tokens":12400,"output_tokens":1,"service_tier":"standard"}}}}}}"#
        )),
        event(
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#
                .to_string(),
        ),
    ];
    let words = [
        "I will",
        " look at",
        " the parser",
        " and run",
        r#" the \"tests\""#,
        " again",
        " to see",
        " what fails",
        " now",
        ".",
    ];
    for w in words {
        lines.push(event(format!(
            r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":"{w} {i}"}}}}"#
        )));
    }
    lines.push(event(
        r#"{"type":"content_block_stop","index":0}"#.to_string(),
    ));
    lines.push(format!(
        r#"{{"type":"assistant","message":{{"id":"msg_{i}","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{{"type":"text","text":"Step {i}: I will look at the parser and run the tests again."}}],"stop_reason":null,"usage":{{"input_tokens":812,"cache_creation_input_tokens":0,"cache_read_input_tokens":12400,"output_tokens":1}}}},{TAIL},"uuid":"a{i}"}}"#
    ));
    lines.push(event(format!(
        r#"{{"type":"content_block_start","index":1,"content_block":{{"type":"tool_use","id":"toolu_{i}","name":"Bash","input":{{}}}}}}"#
    )));
    let parts = [
        r#"{\"command\": \"cargo"#,
        r#" test -p parser"#,
        r#" -- --nocapture\", \"timeout\""#,
        r#": 120000}"#,
    ];
    for p in parts {
        lines.push(event(format!(
            r#"{{"type":"content_block_delta","index":1,"delta":{{"type":"input_json_delta","partial_json":"{p}"}}}}"#
        )));
    }
    lines.push(event(
        r#"{"type":"content_block_stop","index":1}"#.to_string(),
    ));
    lines.push(format!(
        r#"{{"type":"assistant","message":{{"id":"msg_{i}","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{{"type":"tool_use","id":"toolu_{i}","name":"Bash","input":{{"command":"cargo test -p parser -- --nocapture","timeout":120000}}}}],"stop_reason":null,"usage":{{"input_tokens":812,"cache_creation_input_tokens":0,"cache_read_input_tokens":12400,"output_tokens":1}}}},{TAIL},"uuid":"b{i}"}}"#
    ));
    lines.push(event(
        r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":812,"cache_creation_input_tokens":0,"cache_read_input_tokens":12400,"output_tokens":61}}"#.to_string(),
    ));
    lines.push(event(r#"{"type":"message_stop"}"#.to_string()));
    lines.push(format!(
        r#"{{"type":"user","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"toolu_{i}","content":{},"is_error":false}}]}},"tool_use_result":{{"stdout":{},"stderr":"","interrupted":false}},{TAIL},"uuid":"c{i}"}}"#,
        json_str(big),
        json_str(big)
    ));
    lines
}
