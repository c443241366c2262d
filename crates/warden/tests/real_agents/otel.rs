//! OpenTelemetry with the real CLIs against the fake model: warden's run
//! span with a child per tool call and per model request, carrying the
//! GenAI attributes, and with `--otel-agent` the CLI's own spans nested
//! under the run's span through `TRACEPARENT`.

use std::time::Instant;

use warden_fake_model::Turn;
use warden_telemetry_backends::otlp::{Receiver, Span, SpanKind, SpanTree, Transport};
use warden_telemetry_backends::pki::TestPki;

use crate::kit::Kit;

fn run_with_export(agent: &'static str) -> Option<(Kit, Receiver, Vec<Span>)> {
    run_with_export_to(agent, None)
}

/// As [`run_with_export`], to a collector over TLS when `pki` is given
/// (trusted through `OTEL_EXPORTER_OTLP_CERTIFICATE`).
fn run_with_export_to(
    agent: &'static str,
    pki: Option<&TestPki>,
) -> Option<(Kit, Receiver, Vec<Span>)> {
    let kit = Kit::new(
        agent,
        vec![
            Turn::Shell("echo hello-from-tool".into()),
            Turn::Text("all done".into()),
        ],
    )?;
    let rx = match pki {
        Some(pki) => Receiver::start_tls(Transport::Http, pki, false),
        None => Receiver::start_http(),
    };
    let endpoint = rx.endpoint();
    let mut cmd = kit.command(
        "say hello through the shell",
        &["--timeout", "120s", "--otel", &endpoint, "--otel-agent"],
    );
    crate::support::without_own_telemetry(&mut cmd);
    if let Some(pki) = pki {
        cmd.env("OTEL_EXPORTER_OTLP_CERTIFICATE", pki.ca_file());
        // A value of the user's own would win over the CA warden gives
        // Claude Code (this machine's may set one).
        cmd.env_remove("NODE_EXTRA_CA_CERTS");
    }
    let start = Instant::now();
    let done = kit.case.finished(cmd.output().expect("run warden"), start);
    assert_eq!(done.code, 0, "{agent}: {}", done.stderr);
    // warden's end waited for its own spans; the CLI sent its own before
    // it exited.
    let spans = rx.spans();
    Some((kit, rx, spans))
}

#[test]
fn a_real_run_has_tool_and_model_spans_and_the_cli_s_own_under_it() {
    for agent in ["claude", "codex"] {
        let Some((_kit, _rx, spans)) = run_with_export(agent) else {
            continue;
        };
        let tree = spans.render();
        let ours: Vec<Span> = spans
            .iter()
            .filter(|s| s.resource.get("service.name").and_then(|v| v.as_str()) == Some("warden"))
            .cloned()
            .collect();
        let run = ours.one(&format!("invoke_agent {agent}"));
        assert_eq!(run.str_attr("warden.verdict"), Some("succeeded"), "{tree}");
        // Claude Code names its model in its stream; Codex does not (it
        // is in its config file here), and no model is made up.
        if agent == "claude" {
            assert!(
                run.str_attr("gen_ai.request.model").is_some(),
                "{agent}: {tree}"
            );
        }
        assert!(
            run.str_attr("gen_ai.conversation.id").is_some(),
            "{agent}: {tree}"
        );
        assert!(
            run.int_attr("gen_ai.usage.input_tokens").unwrap_or(0) > 0,
            "{tree}"
        );
        let children = ours.children(run);
        let tools: Vec<&&Span> = children
            .iter()
            .filter(|s| s.name.starts_with("execute_tool "))
            .collect();
        assert_eq!(tools.len(), 1, "{agent}: one tool call\n{tree}");
        assert_eq!(
            tools[0].str_attr("gen_ai.operation.name"),
            Some("execute_tool")
        );
        assert!(
            tools[0]
                .str_attr("warden.tool.input")
                .is_some_and(|i| i.contains("hello-from-tool")),
            "{agent}: {:?}",
            tools[0].attributes
        );
        // A model request where the stream shows one: Claude Code reports
        // usage per request; Codex only per turn, as a running total.
        let chats: Vec<&&Span> = children
            .iter()
            .filter(|s| s.name.starts_with("chat"))
            .collect();
        if agent == "claude" {
            assert!(!chats.is_empty(), "{agent}: a model request span\n{tree}");
        }
        for c in &chats {
            assert_eq!(c.kind, SpanKind::Client, "{agent}");
            assert!(
                c.int_attr("gen_ai.usage.output_tokens").unwrap_or(0) > 0,
                "{agent}: {c:?}"
            );
            assert!(
                c.start_unix_nano >= run.start_unix_nano && c.end_unix_nano <= run.end_unix_nano,
                "{agent}: a model request inside its run\n{tree}"
            );
        }
        // The CLI's own spans: its top one a child of the run's span (a CLI
        // may also make traces of its own, for work outside the task).
        let theirs: Vec<&Span> = spans
            .iter()
            .filter(|s| s.resource.get("service.name").and_then(|v| v.as_str()) != Some("warden"))
            .collect();
        assert!(
            !theirs.is_empty(),
            "{agent}: the CLI's own spans (--otel-agent)\n{tree}"
        );
        assert!(
            theirs.iter().any(|s| s.parent_span_id == run.span_id),
            "{agent}: the CLI's top span nests under the run's\n{tree}"
        );
    }
}

/// Over TLS, with the collector's CA given to warden: warden's spans and,
/// with `--otel-agent`, the CLI's own reach it, the CLI's nested under
/// the run's.
#[test]
fn a_real_run_exports_to_an_https_collector_and_so_does_the_cli() {
    let pki = TestPki::new();
    for agent in ["claude", "codex"] {
        let Some((_kit, _rx, spans)) = run_with_export_to(agent, Some(&pki)) else {
            continue;
        };
        let tree = spans.render();
        let run = spans
            .iter()
            .find(|s| s.name == format!("invoke_agent {agent}"))
            .unwrap_or_else(|| panic!("{agent}: warden's run span\n{tree}"));
        assert!(
            spans.iter().any(|s| s.parent_span_id == run.span_id
                && s.resource.get("service.name").and_then(|v| v.as_str()) != Some("warden")),
            "{agent}: the CLI's own spans over TLS, under the run's\n{tree}"
        );
    }
}

/// A batch of real Claude Code runs with only the standard variable set:
/// one trace, the batch's span at its top, a span per run and per tool
/// call under each run, with the GenAI attributes.
#[test]
fn a_batch_of_real_runs_is_one_trace_with_a_span_per_run_and_tool_call() {
    let Some(kit) = Kit::new(
        "claude",
        vec![
            Turn::Shell("echo first-tool".into()),
            Turn::Text("one done".into()),
            Turn::Shell("echo second-tool".into()),
            Turn::Text("two done".into()),
        ],
    ) else {
        return;
    };
    let rx = Receiver::start_http();
    let base = kit.case.path().to_path_buf();
    let file = base.join("runs.toml");
    let extra: Vec<String> = kit.extra.iter().map(|a| format!("{a:?}")).collect();
    let mut toml = String::from("[defaults]\nagent = \"claude\"\ntimeout = \"120s\"\n");
    toml.push_str(&format!(
        "agent_bin = {:?}\nextra_args = [{}]\n",
        kit.bin.to_string_lossy(),
        extra.join(", ")
    ));
    for name in ["one", "two"] {
        toml.push_str(&format!(
            "[[run]]\nname = \"{name}\"\nprompt = \"run the command\"\n"
        ));
    }
    std::fs::write(&file, toml).unwrap();
    let dir = base.join("batch");
    let mut cmd = kit.case.command(&[
        "batch",
        file.to_str().unwrap(),
        "-j",
        "1",
        "--dir",
        dir.to_str().unwrap(),
    ]);
    for (k, v) in &kit.env {
        cmd.env(k, v);
    }
    crate::support::without_own_telemetry(&mut cmd);
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", rx.endpoint());
    let done = kit
        .case
        .finished(cmd.output().expect("warden batch"), Instant::now());
    assert_eq!(done.code, 0, "{}", done.stderr);
    let spans = rx.spans();
    let tree = spans.render();
    let tops = spans.tops();
    assert_eq!(tops.len(), 1, "one trace, the batch at its top\n{tree}");
    let batch = tops[0];
    assert!(batch.name.starts_with("batch "), "{tree}");
    assert!(spans.iter().all(|s| s.trace_id == batch.trace_id), "{tree}");
    let runs = spans.named("invoke_agent claude");
    assert_eq!(runs.len(), 2, "{tree}");
    for run in runs {
        assert_eq!(run.str_attr("gen_ai.agent.name"), Some("claude"));
        assert_eq!(run.str_attr("gen_ai.provider.name"), Some("anthropic"));
        assert!(run.str_attr("gen_ai.request.model").is_some(), "{tree}");
        assert!(run.int_attr("gen_ai.usage.output_tokens").unwrap_or(0) > 0);
        let tools: Vec<&Span> = spans
            .children(run)
            .into_iter()
            .filter(|s| s.name.starts_with("execute_tool "))
            .collect();
        assert_eq!(tools.len(), 1, "{tree}");
        assert!(tools[0].str_attr("gen_ai.tool.name").is_some());
    }
}
