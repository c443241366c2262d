//! Who and what reaches the agent: the credential inputs reach the
//! agent's environment (and only the run step's), masked in the log and
//! never printed; the actor check refuses a pull request from a fork and
//! an actor without write permission, asking a stand-in GitHub API on
//! 127.0.0.1.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::release::Server;
use super::runner::{Outcome, Runner, StepKind};
use super::*;

/// Every line of the log but the `::add-mask::` commands, which the
/// runner consumes rather than shows.
fn shown_lines(o: &Outcome) -> Vec<String> {
    o.steps
        .iter()
        .flat_map(|s| s.stdout.lines().chain(s.stderr.lines()))
        .filter(|l| !l.starts_with("::add-mask::"))
        .map(str::to_string)
        .collect()
}

fn masked(o: &Outcome) -> Vec<String> {
    o.steps
        .iter()
        .flat_map(|s| s.stdout.lines())
        .filter_map(|l| l.strip_prefix("::add-mask::"))
        .map(str::to_string)
        .collect()
}

/// Every file under `dir`, read as text.
fn all_text(dir: &Path) -> String {
    let mut out = String::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else if let Ok(b) = std::fs::read(&p) {
                out.push_str(&String::from_utf8_lossy(&b));
            }
        }
    }
    out
}

#[test]
fn credentials_reach_the_agent_only_and_never_the_log() {
    let t = tempfile::tempdir().unwrap();
    let mut runner = Runner::new(t.path(), &repo_root(), machine_path(true));
    // Bedrock's variables, as aws-actions/configure-aws-credentials
    // leaves them on the job.
    runner.env.insert("AWS_REGION".into(), "eu-west-3".into());
    runner
        .env
        .insert("AWS_SECRET_ACCESS_KEY".into(), "aws-Secret-0000".into());
    let secrets = [
        (
            "anthropic_api_key",
            "ANTHROPIC_API_KEY",
            "sk-ant-api03-Secret-1111",
        ),
        (
            "claude_code_oauth_token",
            "CLAUDE_CODE_OAUTH_TOKEN",
            "sk-ant-oat01-Secret-2222",
        ),
        ("openai_api_key", "OPENAI_API_KEY", "sk-proj-Secret-3333"),
        ("gemini_api_key", "GEMINI_API_KEY", "AIzaSecret-4444"),
    ];
    let mut inputs: Vec<(&str, &str)> = secrets.iter().map(|(i, _, v)| (*i, *v)).collect();
    inputs.extend([
        ("use_bedrock", "true"),
        ("agent", "exec"),
        // The command prints nothing of them: it saves what it was given.
        ("command", "env > seen-env.txt"),
    ]);
    let o = runner.run(&action(), &inputs);
    assert!(!o.failed, "{}", o.log());

    let env = std::fs::read_to_string(runner.workspace.join("seen-env.txt")).unwrap();
    for (_, name, value) in secrets {
        assert!(
            env.lines().any(|l| l == format!("{name}={value}")),
            "{name}: {env}"
        );
    }
    assert!(
        env.lines().any(|l| l == "CLAUDE_CODE_USE_BEDROCK=1"),
        "{env}"
    );
    assert!(env.lines().any(|l| l == "AWS_REGION=eu-west-3"), "{env}");
    // None of the action's inputs, under their INPUT_ names either.
    assert!(!env.contains("INPUT_"), "{env}");

    // Each was masked before anything else of the run step was written,
    // and appears on no line the log shows; warden got them by name.
    let m = masked(&o);
    // The secrets, once each; not the switches (a masked `1` would hide
    // every 1 of the log).
    let mut want: Vec<String> = secrets.iter().map(|(_, _, v)| v.to_string()).collect();
    let mut got = m.clone();
    want.sort();
    got.sort();
    assert_eq!(got, want);
    for (_, name, value) in secrets {
        assert!(m.iter().any(|l| l == value), "{name} not masked: {m:?}");
        for line in shown_lines(&o) {
            assert!(!line.contains(value), "{name} in the log: {line}");
        }
        assert!(
            o.step("run").stderr.contains(&format!("--env {name}")),
            "{}",
            o.step("run").stderr
        );
    }
    assert!(
        o.step("run")
            .stderr
            .contains("--env AWS_REGION --env AWS_SECRET_ACCESS_KEY")
    );
    // warden masks what it was given with --env in the run's records.
    let records = all_text(Path::new(&o.outputs["run_dir"]));
    for (_, name, value) in secrets {
        assert!(!records.contains(value), "{name} in the run directory");
    }
    // The step summary and the outputs hold none either.
    let outputs = format!("{:?}{}", o.outputs, o.summary);
    for (_, name, value) in secrets {
        assert!(
            !outputs.contains(value),
            "{name} in the outputs or the summary"
        );
    }

    // In action.yml, the credential inputs go to the run step alone.
    let a = action();
    for step in &a.steps {
        let mut text: Vec<&str> = step.env.iter().map(|(_, v)| v.as_str()).collect();
        if let StepKind::Uses { with, .. } = &step.kind {
            text.extend(with.iter().map(|(_, v)| v.as_str()));
        }
        for (input, _, _) in secrets {
            let used = text.iter().any(|v| v.contains(&format!("inputs.{input} ")));
            assert_eq!(
                used,
                step.id.as_deref() == Some("run"),
                "inputs.{input} in step {}",
                step.name
            );
        }
    }
}

#[test]
fn bedrock_and_vertex_say_what_they_need_before_anything_is_installed() {
    let t = tempfile::tempdir().unwrap();
    let runner = Runner::new(t.path(), &repo_root(), machine_path(false));
    let a = action();
    for (inputs, says) in [
        (
            vec![("use_bedrock", "true")],
            "input `use_bedrock` needs AWS_REGION",
        ),
        (
            vec![("use_vertex", "true")],
            "input `use_vertex` needs ANTHROPIC_VERTEX_PROJECT_ID",
        ),
        (
            vec![("use_vertex", "true"), ("use_bedrock", "true")],
            "inputs `use_bedrock` and `use_vertex` exclude each other",
        ),
        (vec![("use_vertex", "yes")], "input `use_vertex`: `yes`"),
    ] {
        let mut given = vec![("agent", "claude"), ("prompt", "hi")];
        given.extend(inputs);
        let o = runner.run(&a, &given);
        assert!(o.failed);
        let check = o.step("check");
        assert!(check.stderr.contains(says), "{says}: {}", check.stderr);
        assert!(!o.step("warden-lookup").ran);
    }
}

/// A runner where `actor` triggered the run on acme/project (an
/// organisation's), with the API at `api`.
fn runner_for(root: &Path, actor: &str, api: &str) -> Runner {
    let mut runner = Runner::new(root, &repo_root(), machine_path(true));
    for (k, v) in [
        ("actor", actor),
        ("repository", "acme/project"),
        ("repository_owner", "acme"),
        ("api_url", api),
        ("token", "ghs_jobToken1234"),
    ] {
        runner.github.insert(k.into(), v.into());
    }
    runner
}

fn permission(p: &str) -> (u16, Vec<u8>) {
    // As the API answers: the user's own `permissions` map comes first.
    (
        200,
        format!(
            r#"{{"user":{{"login":"x","permissions":{{"admin":false,"push":false}}}},"permission":"{p}","role_name":"{p}"}}"#
        )
        .into_bytes(),
    )
}

#[test]
fn the_actor_check_refuses_a_fork_and_an_actor_without_write_permission() {
    let t = tempfile::tempdir().unwrap();
    let api = Server::start(BTreeMap::from([
        (
            "/repos/acme/project/collaborators/mallory/permission".to_string(),
            permission("read"),
        ),
        (
            "/repos/acme/project/collaborators/alice/permission".to_string(),
            permission("write"),
        ),
        (
            "/repos/acme/project/collaborators/helper[bot]/permission".to_string(),
            permission("write"),
        ),
    ]));
    let a = action();
    let run = |runner: &Runner, extra: &[(&str, &str)]| {
        let mut given = vec![("agent", "exec"), ("command", "true")];
        given.extend_from_slice(extra);
        runner.run(&a, &given)
    };
    let refused = |o: &Outcome, says: &str| {
        assert!(o.failed);
        let s = o.step("actor");
        assert_eq!(s.status, Some(1));
        assert!(s.stderr.contains(says), "{says}: {}", s.stderr);
        assert!(!o.step("warden-lookup").ran, "nothing installed");
        assert!(!o.step("run").ran);
    };
    let allowed = |o: &Outcome, says: &str| {
        assert!(!o.failed, "{}", o.log());
        assert!(
            o.step("actor").stderr.contains(says),
            "{}",
            o.step("actor").stderr
        );
        assert_eq!(o.outputs["verdict"], "succeeded");
    };

    // An actor with read permission: refused, by name, after asking.
    let dir = |n: &str| -> PathBuf { t.path().join(n) };
    let o = run(&runner_for(&dir("1"), "mallory", &api.base), &[]);
    refused(
        &o,
        "refused: actor mallory has read permission on acme/project, and only actors with write or admin permission trigger this action",
    );
    let asked = api.requests.lock().unwrap().last().cloned().unwrap();
    assert_eq!(
        asked.path,
        "/repos/acme/project/collaborators/mallory/permission"
    );
    assert!(
        asked
            .headers
            .contains(&("authorization".into(), "Bearer ghs_jobToken1234".into())),
        "{asked:?}"
    );
    // Not a collaborator at all (404): refused.
    let o = run(&runner_for(&dir("2"), "eve", &api.base), &[]);
    refused(&o, "refused: actor eve has no permission on acme/project");
    // No API to ask: refused, not let through.
    let o = run(&runner_for(&dir("3"), "mallory", "http://127.0.0.1:9"), &[]);
    refused(&o, "refused: cannot ask GitHub for mallory's permission");

    // Write permission: allowed. Named in allowed_actors (any case), or
    // `*`: allowed without asking.
    let o = run(&runner_for(&dir("4"), "alice", &api.base), &[]);
    allowed(
        &o,
        "actor alice: allowed (write permission on acme/project)",
    );
    let before = api.requests.lock().unwrap().len();
    let o = run(
        &runner_for(&dir("5"), "mallory", &api.base),
        &[("allowed_actors", "bob, Mallory")],
    );
    allowed(&o, "actor mallory: allowed (in allowed_actors)");
    let o = run(
        &runner_for(&dir("6"), "eve", &api.base),
        &[("allowed_actors", "*")],
    );
    allowed(&o, "actor eve: allowed (allowed_actors is *)");
    assert_eq!(api.requests.lock().unwrap().len(), before, "no API call");

    // A pull request from a fork: refused even for an actor with write
    // permission, unless allow_forks.
    let fork = |n: &str| {
        let mut r = runner_for(&dir(n), "alice", &api.base);
        r.github.insert("event_name".into(), "pull_request".into());
        r.github.insert(
            "event.pull_request.head.repo.full_name".into(),
            "mallory/project".into(),
        );
        r
    };
    let o = run(&fork("7"), &[]);
    refused(
        &o,
        "refused: this pull_request comes from a fork (mallory/project)",
    );
    assert!(o.step("actor").stderr.contains("set `allow_forks: true`"));
    let o = run(&fork("8"), &[("allow_forks", "true")]);
    allowed(
        &o,
        "actor alice: allowed (write permission on acme/project)",
    );
    assert!(
        o.step("actor")
            .stderr
            .contains("allowed (allow_forks is true)")
    );

    // A deleted fork's pull request (no head repository) is a fork's; a
    // pull request between branches of this repository is not, even in a
    // repository that is itself a fork; a workflow_run of a fork's run is.
    let mut gone = runner_for(&dir("10"), "alice", &api.base);
    gone.github
        .insert("event_name".into(), "pull_request_target".into());
    let o = run(&gone, &[]);
    refused(&o, "comes from a fork ((a deleted repository))");
    let mut own_branch = runner_for(&dir("11"), "alice", &api.base);
    own_branch
        .github
        .insert("event_name".into(), "pull_request".into());
    own_branch.github.insert(
        "event.pull_request.head.repo.full_name".into(),
        "Acme/Project".into(),
    );
    let o = run(&own_branch, &[]);
    allowed(
        &o,
        "actor alice: allowed (write permission on acme/project)",
    );
    let mut after = runner_for(&dir("12"), "alice", &api.base);
    after
        .github
        .insert("event_name".into(), "workflow_run".into());
    after.github.insert(
        "event.workflow_run.head_repository.full_name".into(),
        "mallory/project".into(),
    );
    let o = run(&after, &[]);
    refused(&o, "this workflow_run comes from a fork (mallory/project)");

    // A bot's login has brackets, which curl would take for a range.
    let o = run(&runner_for(&dir("13"), "helper[bot]", &api.base), &[]);
    allowed(
        &o,
        "actor helper[bot]: allowed (write permission on acme/project)",
    );

    // The repository's owner (a user's repository) needs no API.
    let mut own = runner_for(&dir("9"), "acme", "http://127.0.0.1:9");
    own.github.insert("repository_owner".into(), "acme".into());
    let o = run(&own, &[]);
    allowed(&o, "actor acme: allowed (the owner of acme/project)");
}
