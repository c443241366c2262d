//! One agent CLI, set up to talk only to a fake model server.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use warden_fake_model::{FakeModel, Turn, Usage};

use crate::support::{Case, Finished};

/// A CLI ready to run in a throwaway home against its own fake server.
pub struct Kit {
    pub agent: &'static str,
    pub case: Case,
    pub server: FakeModel,
    pub bin: PathBuf,
    /// Flags for `warden run` (before `--`).
    pub flags: Vec<String>,
    /// Extra arguments for the CLI (after `--`).
    pub extra: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Variables the CLI needs that a sandbox's allowlist does not pass:
    /// they must be named with `--env`, as a user would.
    pub sandbox_env: Vec<&'static str>,
}

fn agents_bin() -> PathBuf {
    match std::env::var_os("WARDEN_AGENTS_BIN") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.agents/node_modules/.bin"),
    }
}

impl Kit {
    /// Sets up `agent` with `script`; `None` (after saying so) when the CLI
    /// is not installed and this is not CI.
    pub fn new(agent: &'static str, script: Vec<Turn>) -> Option<Kit> {
        Self::with(agent, |_| script)
    }

    /// Like [`Kit::new`], with a script that can name files in the test's
    /// directory.
    pub fn with(
        agent: &'static str,
        script: impl FnOnce(&std::path::Path) -> Vec<Turn>,
    ) -> Option<Kit> {
        Self::with_usage(agent, script, Usage::default())
    }

    /// Like [`Kit::with`], with the server reporting `usage` for every
    /// main answer.
    pub fn with_usage(
        agent: &'static str,
        script: impl FnOnce(&std::path::Path) -> Vec<Turn>,
        usage: Usage,
    ) -> Option<Kit> {
        let bin = agents_bin().join(agent);
        if !bin.exists() {
            let msg = format!(
                "the {agent} CLI is not installed at {} (run .ci/install-agents, or set WARDEN_AGENTS_BIN)",
                bin.display()
            );
            if std::env::var_os("CI").is_some_and(|v| v == "true") {
                panic!("{msg}");
            }
            eprintln!("SKIPPED: {msg}");
            return None;
        }
        let case = Case::new();
        let server = FakeModel::start_with_usage(script(case.path()), usage);
        let home = case.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let url = server.url();
        let h = |p: &str| home.join(p).to_string_lossy().into_owned();
        let mut env: Vec<(String, String)> = vec![
            ("HOME".into(), h("")),
            ("XDG_CONFIG_HOME".into(), h(".config")),
            ("XDG_DATA_HOME".into(), h(".local/share")),
            ("XDG_CACHE_HOME".into(), h(".cache")),
            ("XDG_STATE_HOME".into(), h(".local/state")),
            ("TMPDIR".into(), h("tmp")),
            ("NO_COLOR".into(), "1".into()),
        ];
        std::fs::create_dir_all(home.join("tmp")).unwrap();
        let mut flags = Vec::new();
        let mut extra = Vec::new();
        let mut sandbox_env = Vec::new();
        match agent {
            "claude" => {
                env.extend([
                    ("ANTHROPIC_BASE_URL".into(), url.clone()),
                    ("ANTHROPIC_API_KEY".into(), "sk-ant-fake".into()),
                    ("CLAUDE_CODE_TMPDIR".into(), h("tmp")),
                    ("CLAUDE_CODE_MAX_RETRIES".into(), "0".into()),
                    ("DISABLE_TELEMETRY".into(), "1".into()),
                    ("DISABLE_ERROR_REPORTING".into(), "1".into()),
                ]);
                extra.extend([
                    "--strict-mcp-config".into(),
                    "--mcp-config".into(),
                    r#"{"mcpServers":{}}"#.into(),
                ]);
            }
            "codex" => {
                let codex_home = home.join("codex");
                std::fs::create_dir_all(&codex_home).unwrap();
                std::fs::write(
                    codex_home.join("config.toml"),
                    format!(
                        r#"model = "gpt-5.5"
model_provider = "fake"
check_for_update_on_startup = false
[analytics]
enabled = false
[feedback]
enabled = false
[features]
plugins = false
apps = false
remote_models = false
[model_providers.fake]
name = "Fake local"
base_url = "{url}/v1"
wire_api = "responses"
env_key = "FAKE_API_KEY"
request_max_retries = 0
stream_max_retries = 0
"#
                    ),
                )
                .unwrap();
                env.extend([
                    (
                        "CODEX_HOME".into(),
                        codex_home.to_string_lossy().into_owned(),
                    ),
                    ("FAKE_API_KEY".into(), "fake".into()),
                ]);
                // A provider's own key name is not on any allowlist.
                sandbox_env.push("FAKE_API_KEY");
            }
            "pi" => {
                let dir = home.join("pi");
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(
                    dir.join("models.json"),
                    format!(
                        r#"{{"providers":{{"fake":{{"baseUrl":"{url}/v1","api":"openai-completions","apiKey":"fake","compat":{{"supportsDeveloperRole":false,"supportsReasoningEffort":false}},"models":[{{"id":"fake-model"}}]}}}}}}"#
                    ),
                )
                .unwrap();
                std::fs::write(dir.join("settings.json"), r#"{"retry":{"enabled":false}}"#)
                    .unwrap();
                env.extend([
                    (
                        "PI_CODING_AGENT_DIR".into(),
                        dir.to_string_lossy().into_owned(),
                    ),
                    ("PI_TELEMETRY".into(), "0".into()),
                ]);
                flags.extend(["--model".into(), "fake-model".into()]);
                extra.extend(["--provider".into(), "fake".into(), "--no-session".into()]);
            }
            "opencode" => {
                env.extend([
                    (
                        "OPENCODE_CONFIG_CONTENT".into(),
                        format!(
                            r#"{{"provider":{{"fake":{{"npm":"@ai-sdk/openai-compatible","name":"Fake","options":{{"baseURL":"{url}/v1","apiKey":"fake"}},"models":{{"fake-model":{{"name":"Fake"}}}}}}}},"model":"fake/fake-model","autoupdate":false,"share":"disabled","permission":{{"bash":"allow","edit":"allow","external_directory":"allow"}}}}"#
                        ),
                    ),
                    ("OPENCODE_DISABLE_MODELS_FETCH".into(), "1".into()),
                    ("OPENCODE_DISABLE_AUTOUPDATE".into(), "1".into()),
                    ("OPENCODE_DISABLE_LSP_DOWNLOAD".into(), "1".into()),
                    ("OPENCODE_DISABLE_DEFAULT_PLUGINS".into(), "1".into()),
                    ("OPENCODE_DISABLE_SHARE".into(), "1".into()),
                ]);
                flags.extend(["--model".into(), "fake/fake-model".into()]);
            }
            "gemini" => {
                let dir = home.join(".gemini");
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(
                    dir.join("settings.json"),
                    r#"{"security":{"auth":{"selectedType":"gemini-api-key"},"folderTrust":{"enabled":false}},"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false},"general":{"enableAutoUpdate":false,"enableAutoUpdateNotification":false}}"#,
                )
                .unwrap();
                env.extend([
                    ("GOOGLE_GEMINI_BASE_URL".into(), url.clone()),
                    ("GEMINI_API_KEY".into(), "fake".into()),
                ]);
                flags.extend(["--model".into(), "gemini-2.5-flash".into()]);
            }
            other => panic!("no kit for {other}"),
        }
        Some(Kit {
            agent,
            case,
            server,
            bin,
            flags,
            extra,
            env,
            sandbox_env,
        })
    }

    /// `warden run AGENT PROMPT` with the kit's settings plus `flags`.
    pub fn command(&self, prompt: &str, flags: &[&str]) -> Command {
        self.command_with(&[prompt], flags)
    }

    /// `warden run AGENT PROMPT_ARGS` (the prompt, or `-f FILE`) with the
    /// kit's settings plus `flags`.
    pub fn command_with(&self, prompt: &[&str], flags: &[&str]) -> Command {
        let mut args: Vec<String> = vec!["run".into(), self.agent.into()];
        args.extend(prompt.iter().map(|s| s.to_string()));
        args.extend([
            "--agent-bin".into(),
            self.bin.to_string_lossy().into_owned(),
        ]);
        args.extend(self.flags.iter().cloned());
        args.extend(flags.iter().map(|s| s.to_string()));
        args.push("--".into());
        args.extend(self.extra.iter().cloned());
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut cmd = self.case.command(&refs);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    pub fn run(&self, prompt: &str, flags: &[&str]) -> Finished {
        let start = Instant::now();
        let out = self.command(prompt, flags).output().expect("run warden");
        self.case.finished(out, start)
    }

    /// Processes of this test still alive: by the marker in their
    /// environment, or by `token` in their command line (for CLIs that
    /// give their tools a cleaned environment).
    pub fn leftovers(&self, token: &str) -> Vec<(i32, String)> {
        let mut left = self
            .case
            .survivors_after(std::time::Duration::from_millis(500));
        for found in crate::support::kill_leftovers(token) {
            if !left.iter().any(|(p, _)| *p == found.0) {
                left.push(found);
            }
        }
        for (pid, _) in &left {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
        left
    }
}
