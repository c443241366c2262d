//! Retries: every CLI, scripted to fail a model request with transient
//! HTTP errors and then succeed, is reported with one retry per repeated
//! request, however the CLI says so (a stdout event or a stderr line).

use warden_fake_model::Turn;

use crate::kit::Kit;

/// Sets each CLI's retry budget to `budget` and its backoff down where
/// it can be.
fn allow_retries(kit: &mut Kit, budget: u32) {
    let home = kit.case.path().join("home");
    match kit.agent {
        "claude" => {
            kit.env.retain(|(k, _)| k != "CLAUDE_CODE_MAX_RETRIES");
            kit.env
                .push(("CLAUDE_CODE_MAX_RETRIES".into(), budget.to_string()));
        }
        "codex" => {
            let path = home.join("codex/config.toml");
            let config = std::fs::read_to_string(&path).unwrap();
            // Codex's HTTP-level retries (`request_max_retries`) are
            // silent; its stream retries are announced.
            let config = config.replace(
                "stream_max_retries = 0",
                &format!("stream_max_retries = {budget}"),
            );
            std::fs::write(&path, config).unwrap();
        }
        "pi" => {
            std::fs::write(
                home.join("pi/settings.json"),
                // `provider.maxRetries` 0: the provider SDK's own retries
                // are silent; pi's are announced.
                format!(
                    r#"{{"retry":{{"enabled":true,"maxRetries":{budget},"baseDelayMs":50,"provider":{{"maxRetries":0,"maxRetryDelayMs":200}}}}}}"#
                ),
            )
            .unwrap();
        }
        // OpenCode and Gemini CLI have no setting for their backoff.
        _ => {}
    }
}

/// `failures` transient errors, then an answer: the run succeeds and
/// `retries` is what the server saw minus the one request that recovered.
fn recovers_after(agent: &'static str, failures: &[u16]) {
    check(agent, failures, 5, true);
}

/// More transient errors than the CLI's budget allows: the error that
/// ends the run is not a retry, so `retries` is still what the server saw
/// minus the first attempt.
fn gives_up_after(agent: &'static str, failures: &[u16], budget: u32) {
    check(agent, failures, budget, false);
}

fn check(agent: &'static str, failures: &[u16], budget: u32, recovers: bool) {
    let mut script: Vec<Turn> = failures.iter().map(|s| Turn::Status(*s)).collect();
    script.push(Turn::Text("recovered".into()));
    let Some(mut kit) = Kit::new(agent, script) else {
        return;
    };
    allow_retries(&mut kit, budget);
    let expected_requests = if recovers {
        failures.len() as u64 + 1
    } else {
        u64::from(budget) + 1
    };
    let done = kit.run("say recovered", &["--timeout", "120s"]);
    let log = |name: &str| {
        String::from_utf8_lossy(&std::fs::read(done.run_dir.join(name)).unwrap_or_default())
            .into_owned()
    };
    // To refresh the recorded fixtures: the real CLI's streams, kept.
    if let Some(dir) = std::env::var_os("WARDEN_RECORD_DIR") {
        let dir = std::path::Path::new(&dir).join(agent);
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["stdout.log", "stderr.log"] {
            let _ = std::fs::copy(done.run_dir.join(name), dir.join(name));
        }
    }
    // Main requests only: those that offer tools (not titles and the like).
    let main_requests = kit
        .server
        .requests()
        .iter()
        .filter(|r| {
            r.method == "POST"
                && r.body
                    .get("tools")
                    .and_then(|t| t.as_array())
                    .is_some_and(|t| !t.is_empty())
        })
        .count() as u64;
    let why = format!(
        "{agent} exited {} after {:?}; server saw {main_requests} main requests\n--- warden stderr:\n{}\n--- stdout.log:\n{}\n--- stderr.log:\n{}",
        done.code,
        done.elapsed,
        done.stderr,
        log("stdout.log"),
        log("stderr.log"),
    );
    assert_eq!(
        main_requests, expected_requests,
        "the CLI did not retry as scripted\n{why}"
    );
    let r = done.report();
    if recovers {
        assert_eq!(r["verdict"], "succeeded", "{why}");
    } else {
        assert_ne!(r["verdict"], "succeeded", "{why}");
    }
    assert_eq!(
        r["retries"].as_u64(),
        Some(main_requests - 1),
        "retries in run.json\n{why}"
    );
    let retry_events = done.events_of("retry").len() as u64;
    assert_eq!(retry_events, main_requests - 1, "retry events\n{why}");
    let shown = match main_requests - 1 {
        0 => None,
        1 => Some("; 1 retry".to_string()),
        n => Some(format!("; {n} retries")),
    };
    let summary = done
        .stderr
        .lines()
        .find(|l| l.contains(" in ") && l.contains("turn(s)"))
        .unwrap_or_default();
    match shown {
        Some(s) => assert!(
            summary.contains(&s),
            "the summary line does not show {s}\n{why}"
        ),
        // (The agent's own error text, before the counts, may say "retry".)
        None => assert!(
            !summary
                .split(" cached")
                .nth(1)
                .unwrap_or("")
                .contains("retr"),
            "no retry, yet: {summary}\n{why}"
        ),
    }
}

mod claude {
    #[test]
    fn retries_counted_after_transient_errors() {
        super::recovers_after("claude", &[429, 500]);
    }

    #[test]
    fn retries_counted_when_it_gives_up() {
        super::gives_up_after("claude", &[500, 500, 500], 1);
    }
}

mod codex {
    // Codex sends a 429 again only at the HTTP level (silent, and off
    // here): 500s are what it announces.
    #[test]
    fn retries_counted_after_transient_errors() {
        super::recovers_after("codex", &[500, 500]);
    }

    /// A 429 it does not retry: its `error` line, then `turn.failed`.
    #[test]
    fn final_error_is_not_a_retry() {
        super::gives_up_after("codex", &[429], 0);
    }

    #[test]
    fn retries_counted_when_it_gives_up() {
        super::gives_up_after("codex", &[500, 500, 500], 2);
    }
}

mod pi {
    #[test]
    fn retries_counted_after_transient_errors() {
        super::recovers_after("pi", &[429, 500]);
    }

    #[test]
    fn retries_counted_when_it_gives_up() {
        super::gives_up_after("pi", &[500, 500, 500], 1);
    }
}

mod opencode {
    #[test]
    fn retries_counted_after_transient_errors() {
        super::recovers_after("opencode", &[429, 500]);
    }
}

mod gemini {
    #[test]
    fn retries_counted_after_transient_errors() {
        super::recovers_after("gemini", &[429, 500]);
    }
}
