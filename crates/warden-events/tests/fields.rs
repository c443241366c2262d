//! The summary's fields mean the same for every agent: tokens in warden's
//! terms, turns as model calls that answered.

use warden_events::{Agent, AgentDecoder, Summary, Tokens};

fn decode(agent: Agent, lines: &[&str]) -> Summary {
    let mut d = AgentDecoder::new(agent);
    let mut events = Vec::new();
    for l in lines {
        assert!(d.line(l.as_bytes(), &mut events), "not well formed: {l}");
    }
    d.summary().clone()
}

#[test]
fn claude_counts_the_last_usage_of_each_message() {
    // With partial messages: message_start says 1 output token, the
    // assistant line too, message_delta the real count.
    let s = decode(
        Agent::Claude,
        &[
            r#"{"type":"stream_event","event":{"type":"message_start","message":{"id":"m1","model":"c","usage":{"input_tokens":996,"cache_read_input_tokens":15,"cache_creation_input_tokens":0,"output_tokens":1}}},"parent_tool_use_id":null}"#,
            r#"{"type":"assistant","message":{"id":"m1","model":"c","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"sleep 60"}}],"usage":{"input_tokens":996,"cache_read_input_tokens":15,"cache_creation_input_tokens":0,"output_tokens":1}},"parent_tool_use_id":null}"#,
            r#"{"type":"stream_event","event":{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":103}},"parent_tool_use_id":null}"#,
            // A line repeating the first usage takes nothing back.
            r#"{"type":"assistant","message":{"id":"m1","model":"c","content":[],"usage":{"input_tokens":996,"output_tokens":1}},"parent_tool_use_id":null}"#,
        ],
    );
    let mut want = Tokens::default();
    want.input = Some(996);
    want.output = Some(103);
    want.cache_read = Some(15);
    want.cache_write = Some(0);
    assert_eq!(s.reported.tokens, want);
    assert_eq!(s.reported.turns, 1);
}

#[test]
fn codex_input_leaves_out_the_cached_tokens_and_turns_are_model_calls() {
    let s = decode(
        Agent::Codex,
        &[
            r#"{"type":"thread.started","thread_id":"t"}"#,
            r#"{"type":"turn.started"}"#,
            r#"{"type":"item.started","item":{"id":"i0","type":"command_execution","command":"a","status":"in_progress"}}"#,
            r#"{"type":"item.started","item":{"id":"i1","type":"command_execution","command":"b","status":"in_progress"}}"#,
            r#"{"type":"item.completed","item":{"id":"i0","type":"command_execution","command":"a","exit_code":0,"status":"completed"}}"#,
            r#"{"type":"item.completed","item":{"id":"i1","type":"command_execution","command":"b","exit_code":0,"status":"completed"}}"#,
            r#"{"type":"item.completed","item":{"id":"i2","type":"reasoning","text":"ok"}}"#,
            r#"{"type":"item.completed","item":{"id":"i3","type":"agent_message","text":"done"}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":1011,"cached_input_tokens":15,"output_tokens":103,"reasoning_output_tokens":40}}"#,
        ],
    );
    assert_eq!(
        (s.reported.tokens.input, s.reported.tokens.cache_read),
        (Some(996), Some(15))
    );
    assert_eq!(
        (s.reported.tokens.output, s.reported.tokens.reasoning),
        (Some(103), Some(40))
    );
    assert_eq!(s.reported.tokens.total(), Some(1114));
    // Two tools asked for at once, then the answer: two model calls.
    assert_eq!(s.reported.turns, 2);
}

#[test]
fn gemini_output_includes_the_thoughts() {
    let s = decode(
        Agent::Gemini,
        &[
            r#"{"type":"init","session_id":"s","model":"g"}"#,
            r#"{"type":"message","role":"user","content":"hi"}"#,
            r#"{"type":"tool_use","tool_name":"run_shell_command","tool_id":"t1","parameters":{}}"#,
            r#"{"type":"tool_result","tool_id":"t1","status":"success","output":"x"}"#,
            r#"{"type":"message","role":"assistant","content":"do","delta":true}"#,
            r#"{"type":"message","role":"assistant","content":"ne","delta":true}"#,
            r#"{"type":"result","status":"success","stats":{"total_tokens":1114,"input_tokens":1011,"output_tokens":63,"cached":15,"input":996}}"#,
        ],
    );
    assert_eq!(
        (s.reported.tokens.input, s.reported.tokens.cache_read),
        (Some(996), Some(15))
    );
    assert_eq!(
        (s.reported.tokens.output, s.reported.tokens.reasoning),
        (Some(103), Some(40))
    );
    assert_eq!(s.reported.turns, 2);
}

#[test]
fn pi_counts_a_retried_call_once() {
    let ok = r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"done"}],"model":"m","usage":{"input":996,"output":103,"cacheRead":15,"cacheWrite":0},"stopReason":"stop"}}"#;
    let failed = r#"{"type":"message_end","message":{"role":"assistant","content":[],"model":"m","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0},"stopReason":"error","errorMessage":"429"}}"#;
    let s = decode(
        Agent::Pi,
        &[
            r#"{"type":"turn_start"}"#,
            failed,
            r#"{"type":"agent_end","messages":[]}"#,
            r#"{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":10,"errorMessage":"429"}"#,
            r#"{"type":"turn_start"}"#,
            ok,
        ],
    );
    assert_eq!(s.reported.turns, 1);
    assert_eq!(s.reported.tokens.total(), Some(1114));
}

#[test]
fn opencode_output_includes_reasoning_and_tools_keep_their_duration() {
    let mut d = AgentDecoder::new(Agent::OpenCode);
    let mut events = Vec::new();
    for l in [
        r#"{"type":"step_start","sessionID":"s","part":{}}"#,
        r#"{"type":"tool_use","sessionID":"s","part":{"callID":"c1","tool":"bash","state":{"status":"completed","input":{"command":"sleep 127"},"output":"","time":{"start":1000,"end":128000}}}}"#,
        r#"{"type":"step_finish","sessionID":"s","part":{"reason":"stop","tokens":{"input":996,"output":63,"reasoning":40,"cache":{"read":15,"write":0}}}}"#,
    ] {
        d.line(l.as_bytes(), &mut events);
    }
    let s = d.summary();
    assert_eq!(
        (s.reported.tokens.output, s.reported.tokens.reasoning),
        (Some(103), Some(40))
    );
    assert_eq!(s.reported.turns, 1);
    let took = events.iter().find_map(|e| match e {
        warden_events::Event::ToolFinished { duration_ms, .. } => *duration_ms,
        _ => None,
    });
    assert_eq!(took, Some(127_000));
}

#[test]
fn forged_token_counts_saturate_instead_of_overflowing() {
    let big = "1e30";
    let s = decode(
        Agent::OpenCode,
        &[
            &format!(
                r#"{{"type":"step_finish","sessionID":"s","part":{{"reason":"tool-calls","tokens":{{"input":{big},"output":{big},"reasoning":{big},"cache":{{"read":{big},"write":0}}}}}}}}"#
            ),
            &format!(
                r#"{{"type":"step_finish","sessionID":"s","part":{{"reason":"stop","tokens":{{"input":{big},"output":{big},"reasoning":0}}}}}}"#
            ),
        ],
    );
    assert_eq!(s.reported.tokens.output, Some(u64::MAX));
    assert_eq!(s.reported.tokens.total(), Some(u64::MAX));
    let s = decode(
        Agent::Gemini,
        &[&format!(
            r#"{{"type":"result","status":"success","stats":{{"total_tokens":{big},"input_tokens":{big},"output_tokens":{big},"cached":{big}}}}}"#
        )],
    );
    assert_eq!(s.reported.tokens.output, Some(u64::MAX));
}
