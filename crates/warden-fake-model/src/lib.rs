//! A scripted fake model server, for driving the real agent CLIs offline.
//!
//! It listens on 127.0.0.1 on an ephemeral port and speaks just enough of
//! four APIs: Anthropic Messages (Claude Code), OpenAI Responses (Codex),
//! OpenAI Chat Completions (pi, OpenCode) and Gemini `streamGenerateContent`
//! (Gemini CLI), streaming with server-sent events. Each main request (one
//! that offers tools) is answered by the next [`Turn`] of the script; side
//! requests (titles and the like, with no tools) get a short text. Every
//! request is recorded. Agents that run at the same time (a batch) ask in
//! no set order: each can be given a script of its own, a lane, that the
//! requests naming its marker take their turns from
//! ([`FakeModel::add_lane`]).
//!
//! This is test support: it is not part of warden.

#![forbid(unsafe_code)]

mod anthropic;
mod chat;
mod gemini;
mod responses;
mod sse;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{OriginalUri, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

/// What the model does for one main request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Turn {
    /// Answer with this text and end the turn.
    Text(String),
    /// Call the shell tool (whatever the agent calls it) with this command.
    Shell(String),
    /// Send the headers and the first event, then nothing, forever.
    Stall,
    /// Send the headers, then break the connection.
    Drop,
    /// Answer with this HTTP error status (401, 429, 500, ...).
    Status(u16),
    /// Say this text, then call the shell tool with this command, in one
    /// answer. Only the Anthropic API says the text; the others answer
    /// it as [`Turn::Shell`]. Protocol modules see it as a `Shell` turn
    /// with `Reply::say`.
    SayThenShell(String, String),
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub body: Value,
}

/// Token counts every answer reports, so tests can check what the agent
/// passed on.
pub const INPUT_TOKENS: u64 = 21;
pub const OUTPUT_TOKENS: u64 = 8;

/// The usage one answer reports, in warden's terms; each API module
/// renders it in that API's own shape (where prompt tokens include the
/// cached ones, or not; where reasoning is part of the output, or not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Prompt tokens neither read from nor written to the cache.
    pub input: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    /// Every generated token, reasoning included.
    pub output: u64,
    /// The part of `output` that was reasoning.
    pub reasoning: u64,
}

impl Default for Usage {
    fn default() -> Self {
        Self {
            input: INPUT_TOKENS,
            cache_read: 0,
            cache_write: 0,
            output: OUTPUT_TOKENS,
            reasoning: 0,
        }
    }
}

impl Usage {
    /// All prompt tokens, cached or not.
    pub fn prompt(&self) -> u64 {
        self.input + self.cache_read + self.cache_write
    }

    pub fn total(&self) -> u64 {
        self.prompt() + self.output
    }
}

/// What a protocol module needs to answer one request.
pub(crate) struct Reply<'a> {
    /// Never a `SayThenShell`: that comes as a `Shell` and `say`.
    pub turn: Turn,
    /// Text to say before the turn's tool call.
    pub say: Option<String>,
    /// The shell tool as the request declared it: its name, the argument
    /// that carries the command, and whether it wants a description.
    pub tool: Option<ShellTool>,
    pub model: &'a str,
    pub stream: bool,
    pub serial: u64,
    pub usage: Usage,
}

#[derive(Debug, Clone)]
pub(crate) struct ShellTool {
    pub name: String,
    pub command_key: String,
    pub wants_description: bool,
}

impl ShellTool {
    pub(crate) fn args(&self, command: &str) -> Value {
        let mut args = serde_json::Map::new();
        args.insert(self.command_key.clone(), Value::String(command.to_string()));
        if self.wants_description {
            args.insert("description".into(), Value::String("run a command".into()));
        }
        Value::Object(args)
    }
}

const SHELL_TOOLS: &[&str] = &[
    "Bash",
    "bash",
    "exec_command",
    "shell",
    "run_shell_command",
    "shell_command",
];

/// Finds the shell tool among `(name, parameter properties)` pairs.
pub(crate) fn shell_tool<'a>(
    tools: impl Iterator<Item = (&'a str, Option<&'a Value>)>,
) -> Option<ShellTool> {
    tools
        .filter(|(name, _)| SHELL_TOOLS.contains(name))
        .map(|(name, props)| {
            let has = |k: &str| props.and_then(|p| p.get(k)).is_some();
            ShellTool {
                name: name.to_string(),
                command_key: if has("cmd") && !has("command") {
                    "cmd"
                } else {
                    "command"
                }
                .to_string(),
                wants_description: has("description"),
            }
        })
        .next()
}

struct Shared {
    script: Mutex<VecDeque<Turn>>,
    /// Scripts of their own for the requests whose body contains the
    /// marker, first match first.
    lanes: Mutex<Vec<(String, VecDeque<Turn>)>>,
    requests: Mutex<Vec<Request>>,
    serial: Mutex<u64>,
    usage: Usage,
    /// Seconds every error answer's `retry-after` header says, if any.
    retry_after: Mutex<Option<u64>>,
}

/// A running fake model server; stops when dropped.
pub struct FakeModel {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeModel {
    /// Starts a server on 127.0.0.1 that plays `script`, then answers
    /// "done" to every further main request.
    pub fn start(script: Vec<Turn>) -> Self {
        Self::start_with_usage(script, Usage::default())
    }

    /// Like [`FakeModel::start`], with every main answer reporting `usage`
    /// (side requests keep the default).
    pub fn start_with_usage(script: Vec<Turn>, usage: Usage) -> Self {
        let shared = Arc::new(Shared {
            script: Mutex::new(script.into()),
            lanes: Mutex::new(Vec::new()),
            requests: Mutex::new(Vec::new()),
            serial: Mutex::new(0),
            usage,
            retry_after: Mutex::new(None),
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("local addr");
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let state = shared.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                let app = Router::new().fallback(handle).with_state(state);
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = rx.await;
                    })
                    .await;
            });
        });
        Self {
            addr,
            shared,
            shutdown: Some(tx),
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// From now on, every error answer ([`Turn::Status`]) carries a
    /// `retry-after: SECONDS` header, as a rate-limited API's does.
    pub fn send_retry_after(&self, seconds: u64) {
        *self.shared.retry_after.lock().expect("lock") = Some(seconds);
    }

    /// From now on, a main request whose body contains `marker` (the
    /// agent's prompt names it, say) takes its turn from `script` rather
    /// than from the server's: then agents that run at once each play
    /// their own script whatever the order of their requests. A lane's
    /// exhausted script answers "done" as the server's does. The first
    /// lane added whose marker a request contains is its lane.
    pub fn add_lane(&self, marker: &str, script: Vec<Turn>) {
        self.shared
            .lanes
            .lock()
            .expect("lock")
            .push((marker.to_string(), script.into()));
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Request> {
        self.shared.requests.lock().expect("lock").clone()
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        // A stalled stream keeps a connection open; do not wait for it.
        drop(self.thread.take());
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    OriginalUri(uri): OriginalUri,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    shared.requests.lock().expect("lock").push(Request {
        method: method.to_string(),
        path: uri.to_string(),
        body: json.clone(),
    });
    if method != Method::POST {
        return (StatusCode::OK, "{}").into_response();
    }
    let serial = {
        let mut s = shared.serial.lock().expect("lock");
        *s += 1;
        *s
    };
    // A main request offers tools and takes the next turn of the script;
    // a side request (a title, say) gets a short text.
    let has_tools = json
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    let turn = || {
        if !has_tools {
            return Turn::Text("ok".into());
        }
        let mut lanes = shared.lanes.lock().expect("lock");
        let text = if lanes.is_empty() {
            String::new()
        } else {
            String::from_utf8_lossy(&body).into_owned()
        };
        match lanes
            .iter_mut()
            .find(|(marker, _)| text.contains(marker.as_str()))
        {
            Some((_, script)) => script.pop_front(),
            None => shared.script.lock().expect("lock").pop_front(),
        }
        .unwrap_or_else(|| Turn::Text("done".into()))
    };
    let model = |default: &'static str| {
        json.get("model")
            .and_then(Value::as_str)
            .unwrap_or(default)
            .to_string()
    };
    let stream = json.get("stream").and_then(Value::as_bool).unwrap_or(false);
    if path.ends_with("/count_tokens") || path.ends_with(":countTokens") {
        return axum::Json(
            serde_json::json!({"input_tokens": INPUT_TOKENS, "totalTokens": INPUT_TOKENS}),
        )
        .into_response();
    }
    type Answer = fn(Reply<'_>) -> Response;
    type FindTool = fn(&Value) -> Option<ShellTool>;
    let (answer, find_tool, model, stream): (Answer, FindTool, String, bool) =
        if path.ends_with("/messages") {
            (
                anthropic::reply,
                anthropic::shell_tool,
                model("claude-fake"),
                stream,
            )
        } else if path.ends_with("/responses") {
            (
                responses::reply,
                responses::shell_tool,
                model("gpt-fake"),
                stream,
            )
        } else if path.ends_with("/chat/completions") {
            (chat::reply, chat::shell_tool, model("fake-model"), stream)
        } else if let Some(rest) = path.split("/models/").nth(1)
            && (rest.ends_with(":streamGenerateContent") || rest.ends_with(":generateContent"))
        {
            let name = rest.split(':').next().unwrap_or("gemini-fake").to_string();
            (
                gemini::reply,
                gemini::shell_tool,
                name,
                rest.ends_with(":streamGenerateContent"),
            )
        } else {
            return (
                StatusCode::NOT_FOUND,
                "no such endpoint in the fake model server",
            )
                .into_response();
        };
    let (turn, say) = match turn() {
        Turn::SayThenShell(text, cmd) => (Turn::Shell(cmd), Some(text)),
        t => (t, None),
    };
    let mut response = answer(Reply {
        turn,
        say,
        tool: find_tool(&json),
        model: &model,
        stream,
        serial,
        usage: if has_tools {
            shared.usage
        } else {
            Usage::default()
        },
    });
    let retry_after = *shared.retry_after.lock().expect("lock");
    if let Some(seconds) = retry_after
        && (response.status().is_client_error() || response.status().is_server_error())
    {
        response.headers_mut().insert(
            axum::http::header::RETRY_AFTER,
            axum::http::HeaderValue::from(seconds),
        );
    }
    response
}
