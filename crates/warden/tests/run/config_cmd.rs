//! `warden config`: each setting in effect and where it came from, found
//! as `warden run` finds them, from a subdirectory of a real git
//! repository with a real project file, a user file (XDG_CONFIG_HOME)
//! and variables; a bad file is an error naming the file, the key and
//! what it must be. And the project's root, where `warden run` started
//! in a subdirectory puts its `.warden/`.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::schemas::{assert_valid, validator};
use crate::support::{Case, git};

/// `<case>/repo`, a git work tree with `sub/deeper` in it; and
/// `<case>/xdg`, the user's config home.
fn layout(case: &Case) -> (PathBuf, PathBuf, PathBuf) {
    let repo = case.path().join("repo");
    let deeper = repo.join("sub/deeper");
    std::fs::create_dir_all(&deeper).unwrap();
    git(&repo, &["init", "-q"]);
    let xdg = case.path().join("xdg");
    std::fs::create_dir_all(xdg.join("warden")).unwrap();
    (
        repo.canonicalize().unwrap(),
        deeper.canonicalize().unwrap(),
        xdg,
    )
}

/// warden with `args` in `dir`, with the user's config home `xdg` and the
/// variables `env`; the run directory left to warden.
fn warden_in(case: &Case, dir: &Path, xdg: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = case.command(args);
    cmd.current_dir(dir)
        .env_remove("WARDEN_RUN_DIR")
        .env("XDG_CONFIG_HOME", xdg);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn setting<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["settings"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("no setting {name} in {doc}"))
}

#[test]
fn config_says_each_settings_value_and_its_source() {
    let case = Case::new();
    let (repo, deeper, xdg) = layout(&case);
    let project = repo.join("warden.toml");
    std::fs::write(
        &project,
        "stall_timeout = \"3m\"\nrun_dir = \"out/runs\"\n\
         allow_socket = [\"sockets/a.sock\", \"/run/b.sock\"]\n\
         [agent.claude]\nimage = \"claude:1\"\n",
    )
    .unwrap();
    let user = xdg.join("warden/warden.toml");
    std::fs::write(&user, "kill_grace = \"2s\"\nstall_timeout = \"9m\"\n").unwrap();
    let env = [("WARDEN_TIMEOUT", "90m")];

    let out = warden_in(&case, &deeper, &xdg, &env, &["config", "--json"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("config --json is JSON");
    assert_valid(&validator("config.schema.json"), &doc, "config --json");

    let is = |name: &str, value: Value, source: &str, from: Value| {
        let s = setting(&doc, name);
        assert_eq!(
            (&s["value"], s["source"].as_str(), &s["from"]),
            (&value, Some(source), &from),
            "{name}: {s}"
        );
    };
    let path = |p: &Path| Value::from(p.display().to_string());
    is(
        "timeout",
        "90m".into(),
        "environment",
        "WARDEN_TIMEOUT".into(),
    );
    // The project's file beats the user's, key by key.
    is("stall_timeout", "3m".into(), "project_file", path(&project));
    is("kill_grace", "2s".into(), "user_file", path(&user));
    is("drain_grace", "5s".into(), "default", Value::Null);
    is("max_cost", Value::Null, "default", Value::Null);
    // Paths in a file are the file's directory's, not the cwd's.
    is(
        "run_dir",
        path(&repo.join("out/runs")),
        "project_file",
        path(&project),
    );
    is(
        "allow_socket",
        format!("{},/run/b.sock", repo.join("sockets/a.sock").display()).into(),
        "project_file",
        path(&project),
    );
    assert_eq!(doc["cwd"], path(&deeper));
    assert_eq!(doc["project_root"], path(&repo));
    assert_eq!(doc["runs_dir"], path(&repo.join(".warden/runs")));
    assert_eq!(
        doc["files"],
        serde_json::json!([
            { "path": project, "scope": "project" },
            { "path": user, "scope": "user" },
        ])
    );
    assert_eq!(
        doc["agent_images"],
        serde_json::json!([{ "agent": "claude", "image": "claude:1", "from": project }])
    );

    // The same, as text: each line says where its value came from.
    let out = warden_in(&case, &deeper, &xdg, &env, &["config"]);
    let text = String::from_utf8(out.stdout).unwrap();
    for line in [
        format!("# project file: {}", project.display()),
        format!("# user file: {}", user.display()),
        "timeout = \"90m\"  # environment variable WARDEN_TIMEOUT".to_string(),
        format!(
            "stall_timeout = \"3m\"  # project file {}",
            project.display()
        ),
        format!("kill_grace = \"2s\"  # user file {}", user.display()),
        "drain_grace = \"5s\"  # default".to_string(),
        "# max_cost: not set  # default".to_string(),
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "no line {line:?} in\n{text}"
        );
    }

    // A file named with --config replaces the project's.
    let named = case.path().join("named.toml");
    std::fs::write(&named, "stall_timeout = \"4m\"\n").unwrap();
    let out = warden_in(
        &case,
        &deeper,
        &xdg,
        &[],
        &["config", "--json", "--config", named.to_str().unwrap()],
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(setting(&doc, "stall_timeout")["source"], "config_file");
    assert_eq!(setting(&doc, "stall_timeout")["value"], "4m");
    assert_eq!(setting(&doc, "timeout")["source"], "default");
    // A named file is no project's root: the work tree's top is.
    assert_eq!(doc["project_root"], path(&repo));
}

#[test]
fn a_bad_file_is_named_with_its_key_and_what_it_must_be() {
    let case = Case::new();
    let (repo, deeper, xdg) = layout(&case);
    let near = repo.join("sub/warden.toml");
    for (text, says) in [
        (
            "kill_grace = \"fast\"\n",
            vec![
                format!("`kill_grace` in {}", near.display()),
                "`fast`".into(),
                "expected a duration such as".into(),
            ],
        ),
        (
            "stal_timeout = \"1m\"\n",
            vec![
                format!("unknown key `stal_timeout` in {}", near.display()),
                "stall_timeout".into(),
            ],
        ),
        (
            "timeout = [\n",
            vec![
                format!("{}", near.display()),
                "TOML parse error at line".into(),
            ],
        ),
    ] {
        std::fs::write(&near, text).unwrap();
        let out = warden_in(&case, &deeper, &xdg, &[], &["config"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text:?}: {err}");
        for s in says {
            assert!(err.contains(&s), "{text:?}: {s:?} not in {err}");
        }
    }
    // The user's file is named the same way.
    std::fs::remove_file(&near).unwrap();
    let user = xdg.join("warden/warden.toml");
    std::fs::write(&user, "max_turns = 0\n").unwrap();
    let out = warden_in(&case, &deeper, &xdg, &[], &["config", "--json"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("`max_turns` in {}", user.display()))
            && err.contains("a whole number of at least 1"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "nothing is shown as in effect");
}

/// The directories under `<dir>/.warden/runs`.
fn runs_under(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir.join(".warden/runs"))
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default()
}

#[test]
fn a_run_started_in_a_subdirectory_goes_to_the_projects_root() {
    let case = Case::new();
    let (repo, deeper, xdg) = layout(&case);
    let run = ["run", "exec", "-q", "--", "true"];

    // No warden.toml: the work tree's top.
    let out = warden_in(&case, &deeper, &xdg, &[], &run);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(runs_under(&repo).len(), 1, "the run is at the top");
    assert!(!deeper.join(".warden").exists(), "no second .warden/");

    // A warden.toml in `sub`: its directory is the project's root.
    let sub = repo.join("sub");
    std::fs::write(sub.join("warden.toml"), "kill_grace = \"1s\"\n").unwrap();
    let out = warden_in(&case, &deeper, &xdg, &[], &run);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(runs_under(&sub).len(), 1, "the run is beside the file");
    assert!(!deeper.join(".warden").exists(), "no .warden/ in the cwd");

    // `run_dir` in that file is relative to the file, not to the cwd.
    std::fs::write(sub.join("warden.toml"), "run_dir = \"mine\"\n").unwrap();
    let out = warden_in(&case, &deeper, &xdg, &[], &run);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(sub.join("mine/run.json").is_file(), "run_dir is the file's");
    assert!(!deeper.join("mine").exists());

    // One path is never split at a comma (only a list like allow_socket
    // is): `a,b` is the one directory `sub/a,b`, in `config` and for a run.
    std::fs::write(sub.join("warden.toml"), "run_dir = \"a,b\"\n").unwrap();
    let out = warden_in(&case, &deeper, &xdg, &[], &["config", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("config --json is JSON");
    assert_eq!(
        setting(&doc, "run_dir")["value"],
        Value::from(sub.join("a,b").display().to_string()),
        "run_dir with a comma is one path"
    );
    let out = warden_in(&case, &deeper, &xdg, &[], &run);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(sub.join("a,b/run.json").is_file(), "the run is in `a,b`");
    assert!(!sub.join("a").exists(), "no run in a bogus `a`");

    // A session too: its directory under the root's `.warden/sessions`.
    std::fs::write(sub.join("warden.toml"), "").unwrap();
    let out = warden_in(
        &case,
        &deeper,
        &xdg,
        &[],
        &["run", "exec", "-q", "--iterations", "2", "--", "true"],
    );
    assert!(
        std::fs::read_dir(sub.join(".warden/sessions")).is_ok_and(|mut d| d.next().is_some()),
        "the session is beside the file: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!deeper.join(".warden").exists());
}
