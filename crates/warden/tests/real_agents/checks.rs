//! A session that verifies its work, with a real CLI: the first
//! iteration's answer fails the repository's own check, the check's
//! output reaches the model in the second iteration's request, the second
//! answer passes it, and `--merge` fast-forwards the branch the session
//! started from.

use std::path::{Path, PathBuf};

use serde_json::Value;
use warden_fake_model::{Request, Turn};

use crate::kit::Kit;
use crate::support::{Finished, git, unique_sleep, write_script};

/// What the check prints when the answer is wrong: distinctive enough
/// that finding it in a request can only mean the check's output was
/// passed on.
const WRONG: &str = "EXPECTED 42 GOT 41";

/// A secret given to the session (`--env`), which the check prints.
const TOKEN: &str = "ANSWER_TOKEN=tok-9f8e7d6c5b";

/// The repository's test: `answer.txt` must say 42.
const CHECK: &str = r#"#!/bin/sh
got=$(cat answer.txt 2>/dev/null)
[ -n "$ANSWER_TOKEN" ] && echo "checking with token $ANSWER_TOKEN"
if [ "$got" = 42 ]; then echo "ANSWER IS RIGHT"; exit 0; fi
echo "EXPECTED 42 GOT ${got:-nothing}"
exit 1
"#;

/// A repository in `dir` on branch `main`, with the check committed; its
/// HEAD.
fn repository(dir: &Path) -> String {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.name", "Test Agent"]);
    git(dir, &["config", "user.email", "agent@example.com"]);
    write_script(&dir.join("check.sh"), CHECK);
    git(dir, &["add", "check.sh"]);
    git(dir, &["commit", "-qm", "the answer's test"]);
    git(dir, &["rev-parse", "HEAD"])
}

fn session_json(done: &Finished) -> Value {
    let text = std::fs::read_to_string(done.run_dir.join("session.json")).unwrap_or_default();
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// The requests that asked for a turn of the main loop (the ones that
/// offer tools; a CLI's side requests, a title say, offer none).
fn main_requests(kit: &Kit) -> Vec<Request> {
    kit.server
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.body["tools"].as_array().is_some_and(|t| !t.is_empty()))
        .collect()
}

/// The conversation a request sends (Anthropic's `messages`, the
/// Responses API's `input`): its texts, one a line, without the system
/// prompt and the tools (which quote the repository's recent commits, and
/// so much else that a failure would drown in them).
fn conversation(r: &Request) -> String {
    fn texts(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Array(a) => a.iter().for_each(|v| texts(v, out)),
            Value::Object(o) => o.values().for_each(|v| texts(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    texts(&r.body["messages"], &mut out);
    texts(&r.body["input"], &mut out);
    out.join("\n")
}

/// The end of `text`, for a failure's message.
fn end(text: &str) -> &str {
    let mut start = text.len().saturating_sub(2000);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

fn explain(kit: &Kit, done: &Finished) -> String {
    let tail = |path: PathBuf| {
        let bytes = std::fs::read(path).unwrap_or_default();
        let start = bytes.len().saturating_sub(3000);
        String::from_utf8_lossy(&bytes[start..]).into_owned()
    };
    let iteration = |n: u32, file: &str| tail(done.run_dir.join(format!("iteration-{n}/{file}")));
    format!(
        "{} exited {} after {:?}\n--- warden stderr:\n{}\n--- session.json:\n{}\n--- iteration 1 stdout (tail):\n{}\n--- iteration 2 stdout (tail):\n{}\n--- iteration 2 stderr (tail):\n{}\n--- main requests: {}",
        kit.agent,
        done.code,
        done.elapsed,
        done.stderr,
        session_json(done),
        iteration(1, "stdout.log"),
        iteration(2, "stdout.log"),
        iteration(2, "stderr.log"),
        main_requests(kit).len(),
    )
}

/// Iteration 1 commits a wrong answer, the check fails and says why;
/// iteration 2 is told, commits the right one, the check passes and the
/// session's branch is merged into `main`.
pub fn check_feedback_fix_and_merge(agent: &'static str, sandbox: &str) {
    let commit = |n: u32| {
        format!(
            "echo {n} > answer.txt && git add answer.txt && git commit -qm 'answer {n}' && echo committed-{n}"
        )
    };
    let script = vec![
        // Iteration 1: a wrong answer, committed.
        Turn::Shell(commit(41)),
        Turn::Text("wrote the answer".into()),
        // Iteration 2: the right one.
        Turn::Shell(commit(42)),
        Turn::Text("fixed the answer".into()),
    ];
    let Some(kit) = Kit::new(agent, script) else {
        return;
    };
    let repo = kit.case.path().join("repo");
    let base = repository(&repo);
    let mut flags = vec![
        "--worktree",
        "--merge",
        "--check",
        "./check.sh",
        "--check-timeout",
        "60s",
        "--iterations",
        "3",
        "--timeout",
        "120s",
        "--kill-grace",
        "1s",
        "--sandbox",
        sandbox,
        // A secret the check uses, and prints: what the model is told of
        // the check's output is masked.
        "--env",
        TOKEN,
    ];
    for name in &kit.sandbox_env {
        flags.extend(["--env", name]);
    }
    let done = run_in(
        &kit,
        &repo,
        "write the answer to answer.txt and commit it",
        &flags,
    );
    let why = explain(&kit, &done);
    assert_eq!(done.code, 0, "{why}");

    // The report: the check failed once, then passed; the merge is named.
    let s = session_json(&done);
    assert_eq!(s["verdict"], "succeeded", "{why}");
    assert_eq!(s["stopped_because"], "check_passed", "{why}");
    assert_eq!(s["iterations_run"], 2, "{why}");
    let checks = s["checks"].as_array().cloned().unwrap_or_default();
    assert_eq!(checks.len(), 2, "{why}");
    assert_eq!(checks[0]["passed"], false, "{why}");
    assert_eq!(checks[0]["iteration"], 1, "{why}");
    assert_eq!(checks[0]["exit_code"], 1, "{why}");
    assert_eq!(checks[1]["passed"], true, "{why}");
    assert_eq!(checks[1]["iteration"], 2, "{why}");
    assert_eq!(checks[1]["exit_code"], 0, "{why}");
    let first_check = PathBuf::from(checks[0]["run_dir"].as_str().unwrap_or_default());
    let said = std::fs::read_to_string(first_check.join("stdout.log")).unwrap_or_default();
    assert!(
        said.contains(WRONG),
        "the first check's log says: {said}\n{why}"
    );
    // In a sandbox the worktree is a repository of its own (the agent
    // cannot reach the user's), fetched home before the merge.
    assert_eq!(s["worktree"]["own_repository"], sandbox != "host", "{why}");
    assert_eq!(s["merged_into"], "main", "{why}");
    let merged = s["merge_commit"].as_str().unwrap_or_default().to_string();
    assert!(!merged.is_empty(), "{why}");

    // The model was told: the first request of iteration 2 carries the
    // check's output (the first two are iteration 1's, and the tool's
    // output there never had it).
    let main = main_requests(&kit);
    assert!(main.len() >= 4, "{why}");
    let bodies: Vec<String> = main.iter().map(conversation).collect();
    assert!(
        !bodies[0].contains(WRONG) && !bodies[1].contains(WRONG),
        "iteration 1 was told what only its check could say\n{why}"
    );
    assert!(
        bodies[2].contains(WRONG) && bodies[2].contains("./check.sh"),
        "iteration 2's first request does not carry the check's output: {}\n{why}",
        end(&bodies[2])
    );
    assert!(
        bodies[2].contains("checking with token ***")
            && !main
                .iter()
                .any(|r| r.body.to_string().contains("tok-9f8e7d6c5b")),
        "the model was told the check's secret: {}\n{why}",
        end(&bodies[2])
    );

    // `main` moved forward to the session's last commit, and the
    // checkout with it: a fast-forward, no merge commit.
    let head = git(&repo, &["rev-parse", "main"]);
    assert_eq!(head, merged, "{why}");
    assert_eq!(git(&repo, &["symbolic-ref", "--short", "HEAD"]), "main");
    assert_eq!(
        git(&repo, &["rev-list", "--count", &format!("{base}..main")]),
        "2",
        "both answers are on main, in order\n{why}"
    );
    assert_eq!(
        git(
            &repo,
            &["rev-list", "--merges", "--count", &format!("{base}..main")]
        ),
        "0",
        "a fast-forward makes no merge commit\n{why}"
    );
    assert_eq!(
        git(&repo, &["log", "-1", "--format=%s", "main"]),
        "answer 42"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("answer.txt")).unwrap_or_default(),
        "42\n",
        "the checkout of main has the answer\n{why}"
    );
    assert_eq!(git(&repo, &["status", "--porcelain"]), "", "{why}");
}

/// Runs `warden run AGENT PROMPT FLAGS` in `repo`.
fn run_in(kit: &Kit, repo: &Path, prompt: &str, flags: &[&str]) -> Finished {
    let mut cmd = kit.command(prompt, flags);
    cmd.current_dir(repo);
    let start = std::time::Instant::now();
    kit.case.finished(cmd.output().expect("run warden"), start)
}

/// A check that hangs is ended by its own clock, named as such (never
/// blamed on the agent), and the next iteration is told it timed out;
/// with the check never passing, the session is `check_failed`.
pub fn a_hanging_check_is_ended_by_its_own_clock(agent: &'static str) {
    let sleep = unique_sleep();
    let script = vec![
        Turn::Text("nothing to change".into()),
        Turn::Text("still nothing".into()),
    ];
    let Some(kit) = Kit::new(agent, script) else {
        return;
    };
    let repo = kit.case.path().join("repo");
    repository(&repo);
    let check = format!("echo CHECK-$((6*7))-STARTED; {sleep}");
    let done = run_in(
        &kit,
        &repo,
        "make the check pass",
        &[
            "--check",
            &check,
            "--check-timeout",
            "1s",
            "--iterations",
            "2",
            "--timeout",
            "120s",
            "--kill-grace",
            "1s",
        ],
    );
    let why = explain(&kit, &done);
    assert_eq!(done.code, 8, "{why}");
    let s = session_json(&done);
    assert_eq!(s["verdict"], "check_failed", "{why}");
    assert_eq!(s["stopped_because"], "iterations_exhausted", "{why}");
    let checks = s["checks"].as_array().cloned().unwrap_or_default();
    assert_eq!(checks.len(), 2, "{why}");
    for c in &checks {
        assert_eq!(c["verdict"], "timed_out", "{why}");
        assert_eq!(c["passed"], false, "{why}");
    }
    // The agent's runs are not blamed for it.
    for r in s["runs"].as_array().cloned().unwrap_or_default() {
        assert_eq!(r["verdict"], "succeeded", "{why}");
    }
    let main = main_requests(&kit);
    assert!(main.len() >= 2, "{why}");
    let second = conversation(&main[1]);
    assert!(
        second.contains("timed out")
            && second.contains("--check-timeout")
            && second.contains("CHECK-42-STARTED"),
        "iteration 2 is not told the check timed out: {}\n{why}",
        end(&second)
    );
    let left = kit.leftovers(&sleep);
    assert!(
        left.is_empty(),
        "the check's process survived: {left:?}\n{why}"
    );
}

/// A setup hook that fails ends the session before any agent starts: the
/// model is never asked anything.
pub fn a_failing_setup_hook_ends_the_session_before_the_agent(agent: &'static str) {
    let Some(kit) = Kit::new(agent, vec![Turn::Text("should not run".into())]) else {
        return;
    };
    let repo = kit.case.path().join("repo");
    repository(&repo);
    let done = run_in(
        &kit,
        &repo,
        "anything",
        &[
            "--worktree",
            "--setup",
            "echo no dependencies here >&2; exit 3",
            "--check",
            "./check.sh",
            "--timeout",
            "120s",
        ],
    );
    let why = explain(&kit, &done);
    assert_eq!(done.code, 9, "{why}");
    let s = session_json(&done);
    assert_eq!(s["verdict"], "setup_failed", "{why}");
    assert_eq!(s["stopped_because"], "setup_failed", "{why}");
    assert_eq!(s["iterations_run"], 0, "{why}");
    assert_eq!(s["runs"].as_array().map(Vec::len), Some(0), "{why}");
    let error = s["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("--setup") && error.contains("exited with status 3"),
        "{error}\n{why}"
    );
    assert!(
        kit.server.requests().is_empty(),
        "the agent started: {:?}\n{why}",
        kit.server.requests()
    );
}

/// A prompt file (a template): `{{$ CMD}}` runs before each iteration
/// (here it shows the last commit, which iteration 1 changes) and
/// `{{CHECK_OUTPUT}}` takes the failed check's output in place of the note
/// warden would append.
pub fn a_template_prompt_takes_commands_and_the_check_output(agent: &'static str) {
    let commit = |n: u32| {
        format!("echo {n} > answer.txt && git add answer.txt && git commit -qm 'answer {n}'")
    };
    let script = vec![
        Turn::Shell(commit(41)),
        Turn::Text("wrote the answer".into()),
        Turn::Shell(commit(42)),
        Turn::Text("fixed the answer".into()),
    ];
    let Some(kit) = Kit::new(agent, script) else {
        return;
    };
    let repo = kit.case.path().join("repo");
    repository(&repo);
    // A prompt file: only a text the user wrote runs commands.
    let task = kit.case.path().join("task.md");
    std::fs::write(
        &task,
        "Task {{TASK}}. Last commit: <<{{$ git log -1 --format=%s}}>>. Check said: <<{{CHECK_OUTPUT}}>>.",
    )
    .unwrap();
    let mut cmd = kit.command_with(
        &["-f", &task.to_string_lossy()],
        &[
            "--arg",
            "TASK=answer",
            "--worktree",
            "--check",
            "./check.sh",
            "--iterations",
            "3",
            "--timeout",
            "120s",
            "--kill-grace",
            "1s",
        ],
    );
    cmd.current_dir(&repo);
    let start = std::time::Instant::now();
    let done = kit.case.finished(cmd.output().expect("run warden"), start);
    let why = explain(&kit, &done);
    assert_eq!(done.code, 0, "{why}");
    let s = session_json(&done);
    assert_eq!(s["stopped_because"], "check_passed", "{why}");
    let main = main_requests(&kit);
    assert!(main.len() >= 4, "{why}");
    let (first, third) = (conversation(&main[0]), conversation(&main[2]));
    assert!(
        first.contains("Last commit: <<the answer's test>>") && first.contains("Check said: <<>>"),
        "iteration 1's prompt: {}\n{why}",
        end(&first)
    );
    assert!(
        third.contains("Last commit: <<answer 41>>")
            && third.contains(&format!("Check said: <<{WRONG}>>")),
        "iteration 2's prompt: {}\n{why}",
        end(&third)
    );
    assert!(
        !third.contains("warden ran the check"),
        "the note is appended although the prompt takes the output\n{why}"
    );
    let hooks = s["hooks"].as_array().cloned().unwrap_or_default();
    let commands: Vec<_> = hooks
        .iter()
        .filter(|h| h["kind"] == "prompt_command")
        .map(|h| h["iteration"].clone())
        .collect();
    assert_eq!(commands, [1, 2], "{why}");
}

/// While the agent works, someone commits to `main` too (the agent's own
/// tool call does it here, through the user's checkout). When that
/// commit touches another file, `--merge` makes a merge commit; when it
/// writes the same file, the merge is `merge_conflict`, naming the file,
/// and both branches are as they were.
pub fn merge_after_main_moved(agent: &'static str, conflicting: bool) {
    let file = if conflicting {
        "answer.txt"
    } else {
        "notes.txt"
    };
    let script = move |dir: &Path| {
        let repo = dir.join("repo");
        vec![
            Turn::Shell(format!(
                "echo 42 > answer.txt && git add answer.txt && git commit -qm 'answer 42' && \
                 echo 40 > '{repo}/{file}' && git -C '{repo}' add {file} && git -C '{repo}' commit -qm 'meanwhile on main'",
                repo = repo.display()
            )),
            Turn::Text("done".into()),
        ]
    };
    let Some(kit) = Kit::with(agent, script) else {
        return;
    };
    let repo = kit.case.path().join("repo");
    repository(&repo);
    let done = run_in(
        &kit,
        &repo,
        "write the answer",
        &[
            "--worktree",
            "--merge",
            "--check",
            "./check.sh",
            "--timeout",
            "120s",
            "--kill-grace",
            "1s",
        ],
    );
    let why = explain(&kit, &done);
    let s = session_json(&done);
    let branch = s["worktree"]["branch"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!branch.is_empty(), "{why}");
    assert_eq!(
        git(&repo, &["log", "-1", "--format=%s", &branch]),
        "answer 42",
        "{why}"
    );
    let meanwhile = git(&repo, &["rev-parse", "main^{/meanwhile on main}"]);
    assert_eq!(git(&repo, &["symbolic-ref", "--short", "HEAD"]), "main");
    assert_eq!(git(&repo, &["status", "--porcelain"]), "", "{why}");
    if conflicting {
        assert_eq!(done.code, 11, "{why}");
        assert_eq!(s["verdict"], "merge_conflict", "{why}");
        assert_eq!(
            s["merge_conflicts"],
            serde_json::json!(["answer.txt"]),
            "{why}"
        );
        assert_eq!(s["merged_into"], Value::Null, "{why}");
        // Both as they were: main at the other commit, with its answer.
        assert_eq!(git(&repo, &["rev-parse", "main"]), meanwhile, "{why}");
        assert_eq!(
            std::fs::read_to_string(repo.join("answer.txt")).unwrap_or_default(),
            "40\n"
        );
    } else {
        assert_eq!(done.code, 0, "{why}");
        assert_eq!(s["verdict"], "succeeded", "{why}");
        assert_eq!(s["merged_into"], "main", "{why}");
        let head = git(&repo, &["rev-parse", "main"]);
        assert_eq!(s["merge_commit"], head.as_str(), "{why}");
        // A merge commit of the two, in the checkout too.
        assert_eq!(
            git(&repo, &["rev-parse", "main^1", "main^2"]),
            format!("{meanwhile}\n{}", git(&repo, &["rev-parse", &branch])),
            "{why}"
        );
        assert_eq!(
            std::fs::read_to_string(repo.join("answer.txt")).unwrap_or_default(),
            "42\n"
        );
        assert_eq!(
            std::fs::read_to_string(repo.join("notes.txt")).unwrap_or_default(),
            "40\n"
        );
    }
}

/// Two sessions of a batch at once, each in its worktree, each with its
/// check, each merging into `main` when its check passes: both land,
/// whichever ends first (the other then makes a merge commit).
pub fn a_batch_of_sessions_all_merge_into_the_branch(agent: &'static str, sandbox: &str) {
    let Some(kit) = Kit::new(agent, Vec::new()) else {
        return;
    };
    let names = ["alpha", "bravo"];
    for name in names {
        // The agents ask at the same time: each plays its own script,
        // found by the marker its prompt names.
        kit.server.add_lane(
            &format!("TASK-{}", name.to_uppercase()),
            vec![
                Turn::Shell(format!(
                    "echo {name} > {name}.txt && git add {name}.txt && git commit -qm 'add {name}.txt'"
                )),
                Turn::Text("done".into()),
            ],
        );
    }
    let repo = kit.case.path().join("repo");
    repository(&repo);
    let quoted = |list: &[String]| {
        list.iter()
            .map(|a| format!("{a:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut file = format!(
        "[defaults]\nagent = {agent:?}\nagent_bin = {:?}\nextra_args = [{}]\nworktree = true\nmerge = true\ntimeout = \"120s\"\nkill_grace = \"1s\"\nsandbox = {sandbox:?}\nenv = [{}]\n",
        kit.bin.to_string_lossy(),
        quoted(&kit.extra),
        quoted(
            &kit.sandbox_env
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
        ),
    );
    for name in names {
        file.push_str(&format!(
            "\n[[run]]\nname = {name:?}\nprompt = \"TASK-{}: write {name}.txt and commit it\"\ncheck = \"test -f {name}.txt\"\n",
            name.to_uppercase()
        ));
    }
    let path = kit.case.path().join("runs.toml");
    std::fs::write(&path, file).unwrap();
    let dir = kit.case.path().join("batch");
    let mut cmd = kit.case.command(&[
        "batch",
        &path.to_string_lossy(),
        "-j",
        "2",
        "--dir",
        &dir.to_string_lossy(),
    ]);
    cmd.current_dir(&repo);
    for (k, v) in &kit.env {
        cmd.env(k, v);
    }
    let start = std::time::Instant::now();
    let done = kit
        .case
        .finished(cmd.output().expect("run warden batch"), start);
    let sessions: Vec<Value> = names
        .iter()
        .map(|n| {
            serde_json::from_str(
                &std::fs::read_to_string(dir.join(n).join("session.json")).unwrap_or_default(),
            )
            .unwrap_or(Value::Null)
        })
        .collect();
    let why = format!(
        "batch exited {} after {:?}\n{}\n--- sessions:\n{}\n{}",
        done.code, done.elapsed, done.stderr, sessions[0], sessions[1]
    );
    assert_eq!(done.code, 0, "{why}");
    for s in &sessions {
        assert_eq!(s["verdict"], "succeeded", "{why}");
        assert_eq!(s["stopped_because"], "check_passed", "{why}");
        assert_eq!(s["merged_into"], "main", "{why}");
        assert_eq!(s["worktree"]["own_repository"], sandbox != "host", "{why}");
    }
    for name in names {
        assert_eq!(
            std::fs::read_to_string(repo.join(format!("{name}.txt"))).unwrap_or_default(),
            format!("{name}\n"),
            "{why}"
        );
        git(
            &repo,
            &[
                "merge-base",
                "--is-ancestor",
                &format!(":/add {name}.txt"),
                "main",
            ],
        );
    }
    assert_eq!(git(&repo, &["status", "--porcelain"]), "", "{why}");
    // One of the two was merged after the other moved main.
    assert_eq!(
        git(&repo, &["rev-list", "--merges", "--count", "main"]),
        "1",
        "{why}"
    );
}

macro_rules! per_agent {
    ($($agent:ident),*) => {
        $(
            mod $agent {
                #[test]
                fn check_feedback_fix_and_merge() {
                    super::check_feedback_fix_and_merge(stringify!($agent), "host");
                }

                #[test]
                fn check_feedback_fix_and_merge_in_bwrap() {
                    super::check_feedback_fix_and_merge(stringify!($agent), "bwrap");
                }

                #[test]
                fn a_merge_commit_when_main_moved_meanwhile() {
                    super::merge_after_main_moved(stringify!($agent), false);
                }

                #[test]
                fn a_conflict_leaves_both_branches_as_they_were() {
                    super::merge_after_main_moved(stringify!($agent), true);
                }

                #[test]
                fn a_batch_of_sessions_all_merge_into_the_branch() {
                    super::a_batch_of_sessions_all_merge_into_the_branch(stringify!($agent), "host");
                }

                #[test]
                fn a_batch_of_sandboxed_sessions_all_merge_into_the_branch() {
                    super::a_batch_of_sessions_all_merge_into_the_branch(stringify!($agent), "bwrap");
                }

                #[test]
                fn a_hanging_check_is_ended_by_its_own_clock() {
                    super::a_hanging_check_is_ended_by_its_own_clock(stringify!($agent));
                }

                #[test]
                fn a_failing_setup_hook_ends_the_session_before_the_agent() {
                    super::a_failing_setup_hook_ends_the_session_before_the_agent(stringify!($agent));
                }

                #[test]
                fn a_template_prompt_takes_commands_and_the_check_output() {
                    super::a_template_prompt_takes_commands_and_the_check_output(stringify!($agent));
                }
            }
        )*
    };
}

per_agent!(claude, codex);
