//! The fake server answers each API the way the CLIs expect.

use serde_json::{Value, json};
use warden_fake_model::{FakeModel, Turn};

fn post(url: &str, body: Value) -> (u16, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut resp = agent
        .post(url)
        .header("content-type", "application/json")
        .send(body.to_string())
        .expect("request");
    let status = resp.status().as_u16();
    (status, resp.body_mut().read_to_string().expect("body"))
}

#[test]
fn scripted_turns_are_played_in_order_and_requests_recorded() {
    let server = FakeModel::start(vec![Turn::Shell("echo hi".into()), Turn::Status(401)]);
    let tools = json!([{"type": "function", "function": {"name": "bash", "parameters": {"properties": {"command": {}, "timeout": {}}}}}]);
    let url = format!("{}/v1/chat/completions", server.url());
    let (status, body) = post(&url, json!({"model": "m", "stream": true, "tools": tools}));
    assert_eq!(status, 200);
    assert!(
        body.contains(r#""name":"bash""#) && body.contains(r#"{\"command\":\"echo hi\"}"#),
        "{body}"
    );
    assert!(body.trim_end().ends_with("data: [DONE]"), "{body}");
    // A request without tools is a side request: it does not use a turn.
    let (status, body) = post(&url, json!({"model": "m", "stream": false}));
    assert_eq!(status, 200);
    assert!(body.contains(r#""content":"ok""#), "{body}");
    let (status, body) = post(&url, json!({"model": "m", "stream": true, "tools": tools}));
    assert_eq!(status, 401, "{body}");
    let (_, body) = post(&url, json!({"model": "m", "stream": true, "tools": tools}));
    assert!(
        body.contains(r#""content":"done""#),
        "an exhausted script answers done: {body}"
    );
    assert_eq!(server.requests().len(), 4);
}

#[test]
fn each_api_names_the_shell_tool_its_own_way() {
    let server = FakeModel::start(vec![
        Turn::Shell("ls".into()),
        Turn::Shell("ls".into()),
        Turn::Shell("ls".into()),
    ]);
    let (_, body) = post(
        &format!("{}/v1/messages?beta=true", server.url()),
        json!({"model": "c", "stream": true, "tools": [{"name": "Bash", "input_schema": {"properties": {"command": {}, "description": {}}}}]}),
    );
    assert!(
        body.contains("event: message_start") && body.contains(r#""name":"Bash""#),
        "{body}"
    );
    assert!(
        body.contains(r#"\"description\""#),
        "a description when the schema has one: {body}"
    );
    let (_, body) = post(
        &format!("{}/v1/responses", server.url()),
        json!({"model": "g", "stream": true, "tools": [{"type": "function", "name": "exec_command", "parameters": {"properties": {"cmd": {}}}}]}),
    );
    assert!(
        body.contains(r#"{\"cmd\":\"ls\"}"#) && body.contains("response.completed"),
        "{body}"
    );
    let (_, body) = post(
        &format!(
            "{}/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
            server.url()
        ),
        json!({"tools": [{"functionDeclarations": [{"name": "run_shell_command", "parameters": {"properties": {"command": {}}}}]}]}),
    );
    assert!(
        body.contains(r#""functionCall":{"args":{"command":"ls"},"name":"run_shell_command"}"#),
        "{body}"
    );
}

#[test]
fn a_request_naming_a_lanes_marker_takes_that_lanes_turns() {
    let server = FakeModel::start(vec![Turn::Text("from the script".into())]);
    server.add_lane(
        "TASK-A",
        vec![Turn::Text("a one".into()), Turn::Text("a two".into())],
    );
    server.add_lane("TASK-B", vec![Turn::Text("b one".into())]);
    let tools = json!([{"type": "function", "function": {"name": "bash", "parameters": {"properties": {"command": {}}}}}]);
    let url = format!("{}/v1/chat/completions", server.url());
    let ask = |prompt: &str| {
        let (status, body) = post(
            &url,
            json!({"model": "m", "stream": false, "tools": tools, "messages": [{"role": "user", "content": prompt}]}),
        );
        assert_eq!(status, 200, "{body}");
        body
    };
    // Interleaved as agents running at once would be: each lane in its
    // own order, the rest from the server's script.
    assert!(ask("do TASK-B now").contains("b one"));
    assert!(ask("do TASK-A now").contains("a one"));
    assert!(ask("something else").contains("from the script"));
    assert!(ask("TASK-A again").contains("a two"));
    let done = ask("TASK-B again");
    assert!(
        done.contains(r#""content":"done""#),
        "an exhausted lane answers done: {done}"
    );
    // A side request (no tools) takes no turn of a lane.
    let (_, side) = post(
        &url,
        json!({"model": "m", "stream": false, "messages": [{"role": "user", "content": "TASK-A title"}]}),
    );
    assert!(side.contains(r#""content":"ok""#), "{side}");
}
