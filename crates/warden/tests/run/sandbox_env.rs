//! The environment each agent profile gets inside the real bubblewrap:
//! what its documented provider set-ups read passes (Bedrock, Vertex AI,
//! telemetry), the rest is stripped, the credentials file and `~/.aws`
//! are readable (read-only), and what the set-up refers to but does not
//! pass is warned about, on stderr and in `run.json`.

use std::path::{Path, PathBuf};

use crate::support::{Case, Finished, bwrap_works, home_with_ssh_key, write_script};

/// A stand-in for the agent's CLI: prints its environment and what it
/// can read of the credentials.
fn stand_in(case: &Case) -> PathBuf {
    let bin = case.path().join("stand-in");
    write_script(
        &bin,
        "#!/bin/sh\n\
         env | sort\n\
         echo \"KEYFILE=$(cat \"$GOOGLE_APPLICATION_CREDENTIALS\" 2>/dev/null || echo unreadable)\"\n\
         echo \"AWSCONFIG=$(cat \"$HOME/.aws/config\" 2>/dev/null || echo unreadable)\"\n\
         (echo x >> \"$HOME/.aws/config\") 2>/dev/null && echo AWS-WRITABLE || echo aws-read-only\n\
         echo \"SSH=$(cat \"$HOME/.ssh/id_test\" 2>/dev/null || echo hidden)\"\n",
    );
    bin
}

/// The host's provider set-up: Bedrock through a profile and keys,
/// Vertex AI with a service account key, OpenTelemetry.
const HOST: &[(&str, &str)] = &[
    ("CLAUDE_CODE_USE_BEDROCK", "1"),
    ("CLAUDE_CODE_USE_VERTEX", "1"),
    ("CLAUDE_CODE_ENABLE_TELEMETRY", "1"),
    ("AWS_REGION", "us-west-2"),
    ("AWS_PROFILE", "bedrock-profile"),
    ("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE0000001"),
    ("AWS_SECRET_ACCESS_KEY", "aws-Secret-Example-9"),
    ("AWS_SESSION_TOKEN", "aws-Session-Example-9"),
    ("AWS_BEARER_TOKEN_BEDROCK", "bedrock-Bearer-Example-9"),
    ("AWS_DEFAULT_REGION", "eu-central-1"),
    ("ANTHROPIC_BEDROCK_BASE_URL", "https://bedrock.example"),
    ("CLOUD_ML_REGION", "us-east5"),
    ("ANTHROPIC_VERTEX_PROJECT_ID", "vertex-project"),
    ("GOOGLE_CLOUD_PROJECT", "gcp-project"),
    ("GOOGLE_CLOUD_LOCATION", "us-central1"),
    ("GOOGLE_GENAI_USE_VERTEXAI", "true"),
    ("VERTEX_LOCATION", "europe-west4"),
    (
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "http://collector.example:4317",
    ),
    ("OTEL_METRICS_EXPORTER", "otlp"),
    ("MY_PROVIDER_KEY", "custom-Provider-Key-9"),
    ("UNRELATED_HOST_VARIABLE", "never"),
];

fn run(case: &Case, home: &Path, agent: &str) -> Finished {
    run_with(case, home, agent, &[], &[])
}

/// [`run`] with `over` set on top of [`HOST`] and `args` added.
fn run_with(
    case: &Case,
    home: &Path,
    agent: &str,
    over: &[(&str, &str)],
    args: &[&str],
) -> Finished {
    let bin = stand_in(case);
    let mut cmd = case.command(&[
        "run",
        agent,
        "print the environment",
        "--agent-bin",
        bin.to_str().unwrap(),
        "--sandbox",
        "bwrap",
        "--kill-grace",
        "500ms",
        "--startup-timeout",
        "20s",
        "--completion-timeout",
        "1s",
    ]);
    cmd.args(args);
    cmd.env("HOME", home)
        .env(
            "GOOGLE_APPLICATION_CREDENTIALS",
            home.join(".config/gcloud/service-account.json"),
        )
        .envs(HOST.iter().copied())
        .envs(over.iter().copied());
    case.finished(cmd.output().unwrap(), std::time::Instant::now())
}

/// A HOME with a service account key, an AWS profile, an SSH key that
/// must stay hidden, and a Codex config naming a custom provider's key.
fn make_home(case: &Case) -> PathBuf {
    let home = home_with_ssh_key(case);
    std::fs::create_dir_all(home.join(".config/gcloud")).unwrap();
    std::fs::write(
        home.join(".config/gcloud/service-account.json"),
        "SERVICE-ACCOUNT-KEY",
    )
    .unwrap();
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    std::fs::write(home.join(".aws/config"), "[profile bedrock-profile]").unwrap();
    std::fs::create_dir_all(home.join(".codex")).unwrap();
    std::fs::write(
        home.join(".codex/config.toml"),
        "[model_providers.corp]\nbase_url = \"https://llm.corp\"\nenv_key = \"MY_PROVIDER_KEY\"\n",
    )
    .unwrap();
    home
}

fn names_inside(done: &Finished) -> (Vec<String>, String) {
    let out = String::from_utf8_lossy(&done.log("stdout.log")).into_owned();
    let names = out
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k.to_string()))
        .collect();
    (names, out)
}

fn env_dropped(done: &Finished) -> Vec<String> {
    done.report()["env_dropped"]
        .as_array()
        .unwrap_or_else(|| panic!("no env_dropped in run.json:\n{}", done.stderr))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn each_agent_gets_what_its_provider_set_ups_read_and_no_more() {
    if !bwrap_works() {
        eprintln!("skipped: bubblewrap cannot make its namespaces here");
        return;
    }
    // (agent, passes, stripped)
    let cases: &[(&str, &[&str], &[&str])] = &[
        (
            "claude",
            &[
                "CLAUDE_CODE_USE_VERTEX",
                "AWS_REGION",
                "AWS_PROFILE",
                "AWS_ACCESS_KEY_ID",
                "AWS_SECRET_ACCESS_KEY",
                "AWS_SESSION_TOKEN",
                "AWS_BEARER_TOKEN_BEDROCK",
                "ANTHROPIC_BEDROCK_BASE_URL",
                "CLOUD_ML_REGION",
                "ANTHROPIC_VERTEX_PROJECT_ID",
                "GOOGLE_APPLICATION_CREDENTIALS",
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "OTEL_METRICS_EXPORTER",
                "CLAUDE_CODE_USE_BEDROCK",
                "CLAUDE_CODE_ENABLE_TELEMETRY",
            ],
            &[
                "AWS_DEFAULT_REGION",
                "VERTEX_LOCATION",
                "GOOGLE_GENAI_USE_VERTEXAI",
                "MY_PROVIDER_KEY",
                "UNRELATED_HOST_VARIABLE",
            ],
        ),
        (
            "gemini",
            &[
                "GOOGLE_CLOUD_PROJECT",
                "GOOGLE_CLOUD_LOCATION",
                "GOOGLE_GENAI_USE_VERTEXAI",
                "GOOGLE_APPLICATION_CREDENTIALS",
            ],
            &[
                "AWS_REGION",
                "AWS_ACCESS_KEY_ID",
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "CLOUD_ML_REGION",
                "UNRELATED_HOST_VARIABLE",
            ],
        ),
        (
            "pi",
            &[
                "AWS_BEARER_TOKEN_BEDROCK",
                "AWS_REGION",
                "GOOGLE_CLOUD_PROJECT",
                "GOOGLE_CLOUD_LOCATION",
            ],
            &[
                // Cloud credentials: only with --env.
                "AWS_PROFILE",
                "AWS_ACCESS_KEY_ID",
                "AWS_SECRET_ACCESS_KEY",
                "AWS_SESSION_TOKEN",
                "GOOGLE_APPLICATION_CREDENTIALS",
                "AWS_DEFAULT_REGION",
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "CLOUD_ML_REGION",
                "UNRELATED_HOST_VARIABLE",
            ],
        ),
        (
            "opencode",
            &[
                "AWS_BEARER_TOKEN_BEDROCK",
                "AWS_REGION",
                "VERTEX_LOCATION",
                "GOOGLE_CLOUD_PROJECT",
            ],
            &[
                // Cloud credentials: only with --env.
                "AWS_PROFILE",
                "AWS_ACCESS_KEY_ID",
                "AWS_SECRET_ACCESS_KEY",
                "AWS_SESSION_TOKEN",
                "GOOGLE_APPLICATION_CREDENTIALS",
                "AWS_DEFAULT_REGION",
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "CLOUD_ML_REGION",
                "UNRELATED_HOST_VARIABLE",
            ],
        ),
        (
            "codex",
            &[],
            &[
                "AWS_REGION",
                "AWS_ACCESS_KEY_ID",
                "GOOGLE_APPLICATION_CREDENTIALS",
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "MY_PROVIDER_KEY",
                "UNRELATED_HOST_VARIABLE",
            ],
        ),
    ];
    for (agent, passes, stripped) in cases {
        let case = Case::new();
        let home = make_home(&case);
        let done = run(&case, &home, agent);
        let (names, out) = names_inside(&done);
        for n in *passes {
            assert!(
                names.iter().any(|x| x == n),
                "{agent}: {n} did not pass into the sandbox:\n{out}\nstderr:\n{}",
                done.stderr
            );
        }
        for n in *stripped {
            assert!(
                !names.iter().any(|x| x == n),
                "{agent}: {n} passed into the sandbox:\n{out}"
            );
        }
        assert!(
            out.contains("SSH=hidden"),
            "{agent}: ~/.ssh was readable:\n{out}"
        );
        let key_bound = passes.contains(&"GOOGLE_APPLICATION_CREDENTIALS");
        assert_eq!(
            out.contains("KEYFILE=SERVICE-ACCOUNT-KEY"),
            key_bound,
            "{agent}: the key file is readable exactly when its variable passes:\n{out}"
        );
        let aws_bound = passes.contains(&"AWS_PROFILE");
        assert_eq!(
            out.contains("AWSCONFIG=[profile bedrock-profile]"),
            aws_bound,
            "{agent}: ~/.aws is readable exactly when AWS_PROFILE passes:\n{out}"
        );
        assert!(
            !out.contains("AWS-WRITABLE"),
            "{agent}: ~/.aws was writable:\n{out}"
        );
    }
}

#[test]
fn what_the_set_up_refers_to_but_does_not_pass_is_warned_about() {
    if !bwrap_works() {
        eprintln!("skipped: bubblewrap cannot make its namespaces here");
        return;
    }
    // Claude Code with CLAUDE_CODE_USE_BEDROCK=1: AWS_DEFAULT_REGION is
    // not one of the variables its Bedrock set-up documents.
    let case = Case::new();
    let home = make_home(&case);
    let done = run(&case, &home, "claude");
    let line =
        "AWS_DEFAULT_REGION: set with CLAUDE_CODE_USE_BEDROCK, but not passed into the sandbox";
    assert!(
        done.stderr.contains(&format!("warden: warning: {line}")),
        "{}",
        done.stderr
    );
    let dropped = env_dropped(&done);
    assert!(dropped.iter().any(|d| d.starts_with(line)), "{dropped:?}");
    assert!(
        !dropped.iter().any(|d| d.starts_with("AWS_REGION")),
        "{dropped:?}"
    );

    // Codex with a custom provider whose key's variable config.toml names.
    let case = Case::new();
    let home = make_home(&case);
    let done = run(&case, &home, "codex");
    let dropped = env_dropped(&done);
    assert!(
        dropped
            .iter()
            .any(|d| d.starts_with("MY_PROVIDER_KEY: named in") && d.contains("config.toml")),
        "{dropped:?}\n{}",
        done.stderr
    );
    assert!(
        done.stderr.contains("MY_PROVIDER_KEY: named in"),
        "{}",
        done.stderr
    );

    // A --env NAME warden does not have; a missing credentials file.
    let case = Case::new();
    let home = make_home(&case);
    std::fs::remove_file(home.join(".config/gcloud/service-account.json")).unwrap();
    let bin = stand_in(&case);
    let mut cmd = case.command(&[
        "run",
        "gemini",
        "hi",
        "--agent-bin",
        bin.to_str().unwrap(),
        "--sandbox",
        "bwrap",
        "--env",
        "NOT_SET_ANYWHERE",
        "--completion-timeout",
        "1s",
    ]);
    cmd.env("HOME", &home)
        .env("GOOGLE_GENAI_USE_VERTEXAI", "true")
        .env(
            "GOOGLE_APPLICATION_CREDENTIALS",
            home.join(".config/gcloud/service-account.json"),
        );
    let done = case.finished(cmd.output().unwrap(), std::time::Instant::now());
    let dropped = env_dropped(&done);
    assert!(
        dropped
            .iter()
            .any(|d| d.starts_with("NOT_SET_ANYWHERE: given with --env but not set")),
        "{dropped:?}"
    );
    assert!(
        dropped
            .iter()
            .any(|d| d.starts_with("GOOGLE_APPLICATION_CREDENTIALS:") && d.contains("not a file")),
        "{dropped:?}"
    );

    // Nothing dropped, nothing said: an empty list.
    let case = Case::new();
    let done = case.run(&["run", "exec", "--", "true"]);
    assert_eq!(env_dropped(&done), Vec::<String>::new());
}

/// The gate, both ways, on the real bubblewrap: with every provider
/// switch off (`0`, `false`, unset) Claude Code gets none of the cloud
/// credentials the host holds, nor their files; OpenCode and pi get them
/// only with `--env NAME`, and warden says so.
#[test]
fn cloud_credentials_stay_out_unless_their_set_up_is_switched_on_or_asked_for() {
    if !bwrap_works() {
        eprintln!("skipped: bubblewrap cannot make its namespaces here");
        return;
    }
    let secrets = [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "CLOUD_ML_REGION",
    ];
    let case = Case::new();
    let home = make_home(&case);
    let done = run_with(
        &case,
        &home,
        "claude",
        &[
            ("CLAUDE_CODE_USE_BEDROCK", "0"),
            ("CLAUDE_CODE_USE_VERTEX", "false"),
            ("CLAUDE_CODE_ENABLE_TELEMETRY", ""),
        ],
        &[],
    );
    let (names, out) = names_inside(&done);
    for n in secrets {
        assert!(!names.iter().any(|x| x == n), "claude: {n} got in:\n{out}");
    }
    assert!(out.contains("KEYFILE=unreadable"), "{out}");
    assert!(out.contains("AWSCONFIG=unreadable"), "~/.aws bound: {out}");

    for agent in ["opencode", "pi"] {
        let case = Case::new();
        let home = make_home(&case);
        let done = run_with(&case, &home, agent, &[], &[]);
        let (names, out) = names_inside(&done);
        assert!(
            !names.iter().any(|x| x == "AWS_SECRET_ACCESS_KEY"),
            "{agent}: {out}"
        );
        assert!(out.contains("AWSCONFIG=unreadable"), "{agent}: {out}");
        let dropped = env_dropped(&done);
        assert!(
            dropped.iter().any(|d| d.starts_with(
                "AWS_SECRET_ACCESS_KEY: a cloud credential, not passed into the sandbox unless asked for"
            )),
            "{agent}: {dropped:?}"
        );
        let case = Case::new();
        let home = make_home(&case);
        let done = run_with(
            &case,
            &home,
            agent,
            &[],
            &["--env", "AWS_SECRET_ACCESS_KEY", "--env", "AWS_PROFILE"],
        );
        let (names, out) = names_inside(&done);
        assert!(
            names.iter().any(|x| x == "AWS_SECRET_ACCESS_KEY"),
            "{agent}: --env did not pass it: {out}"
        );
        assert!(
            out.contains("AWSCONFIG=[profile bedrock-profile]"),
            "{agent}: --env AWS_PROFILE binds ~/.aws: {out}"
        );
    }
}
