//! The install steps' decisions, from their scripts run by themselves:
//! which warden is used or built, which agent CLI is installed. Nothing
//! is built or installed: `WARDEN_ACTION_DRY_RUN=1` prints the command.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::runner::{Runner, parse_file_command};
use super::*;
use crate::support::write_script;

/// A directory of links to the few tools the install scripts use, as a
/// PATH where no agent CLI, npm or cargo is found unless a test puts one.
fn tools(dir: &Path) -> PathBuf {
    let tools = dir.join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    for t in [
        "bash",
        "cat",
        "dirname",
        "basename",
        "sed",
        "awk",
        "head",
        "find",
        "sort",
        "xargs",
        "sha256sum",
        "uname",
        "od",
        "tr",
        "grep",
        "timeout",
        "mktemp",
        "rm",
    ] {
        let found = ["/usr/bin", "/bin", "/usr/local/bin"]
            .iter()
            .map(|d| Path::new(d).join(t))
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("{t} is not installed"));
        std::os::unix::fs::symlink(found, tools.join(t)).unwrap();
    }
    tools
}

/// One script of the action run by itself, as its step would run it.
struct Script {
    status: i32,
    stdout: String,
    stderr: String,
    outputs: BTreeMap<String, String>,
    path_added: String,
}

fn script(
    runner: &Runner,
    path: &[&Path],
    name: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Script {
    let out_file = runner.temp.join("script_output");
    let path_file = runner.temp.join("script_path");
    std::fs::write(&out_file, "").unwrap();
    std::fs::write(&path_file, "").unwrap();
    let path: Vec<String> = path.iter().map(|p| p.display().to_string()).collect();
    let out = Command::new("bash")
        .arg(repo_root().join("action").join(name))
        .args(args)
        .env_clear()
        .envs(&runner.env)
        .env("PATH", path.join(":"))
        .env("GITHUB_OUTPUT", &out_file)
        .env("GITHUB_PATH", &path_file)
        .envs(env.iter().copied())
        .current_dir(&runner.workspace)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Script {
        status: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        outputs: parse_file_command(&out_file).unwrap(),
        path_added: std::fs::read_to_string(&path_file).unwrap(),
    }
}

#[test]
fn warden_is_built_only_when_no_warden_of_the_actions_version_is_at_hand() {
    let t = tempfile::tempdir().unwrap();
    let runner = Runner::new(t.path(), &repo_root(), Vec::new());
    let tools = tools(t.path());
    let root = runner.temp.join("warden");
    let root_s = root.display().to_string();
    let dry = ("WARDEN_ACTION_DRY_RUN", "1");
    let build_line = format!(
        "would run: cargo install --locked --force --path {}/crates/warden --root {}\n",
        repo_root().display(),
        root_s
    );
    let install = |path: &[&Path], env: &[(&str, &str)]| {
        let mut all = vec![("WARDEN_FOUND", ""), ("WARDEN_ROOT", root_s.as_str())];
        all.extend_from_slice(env);
        script(&runner, path, "install-warden.sh", &["install"], &all)
    };

    // On PATH with the same version: used; the cache key is the same on
    // every lookup.
    let s = script(
        &runner,
        &[&warden_dir(), &tools],
        "install-warden.sh",
        &["lookup"],
        &[],
    );
    assert_eq!(s.status, 0, "{}", s.stderr);
    assert_eq!(Path::new(&s.outputs["path"]), Path::new(WARDEN));
    assert_eq!(s.outputs["version"], warden_version());
    assert_eq!(s.outputs["root"], root_s);
    let again = script(
        &runner,
        &[&warden_dir(), &tools],
        "install-warden.sh",
        &["lookup"],
        &[],
    );
    assert_eq!(again.outputs["cache-key"], s.outputs["cache-key"]);

    // Another version on PATH: not used, and built (dry run).
    let other = t.path().join("other");
    std::fs::create_dir(&other).unwrap();
    write_script(&other.join("warden"), "#!/bin/sh\necho warden 0.0.1\n");
    let s = script(
        &runner,
        &[&other, &tools],
        "install-warden.sh",
        &["lookup"],
        &[],
    );
    assert_eq!(s.outputs["path"], "");
    assert!(s.stderr.contains("is warden 0.0.1, not"), "{}", s.stderr);
    let s = install(&[&other, &tools], &[dry]);
    assert_eq!(s.status, 0, "{}", s.stderr);
    assert_eq!(s.stdout, build_line);
    assert_eq!(s.path_added, format!("{root_s}/bin\n"));
    assert_eq!(s.outputs["warden"], format!("{root_s}/bin/warden"));
    assert_eq!(s.outputs["built"], "false", "a dry run builds nothing");

    // `path`: the warden on PATH whatever its version; none is an error.
    let s = script(
        &runner,
        &[&other, &tools],
        "install-warden.sh",
        &["lookup"],
        &[("INPUT_WARDEN_INSTALL", "path")],
    );
    assert_eq!(Path::new(&s.outputs["path"]), other.join("warden"));
    let s = install(&[&tools], &[("INPUT_WARDEN_INSTALL", "path")]);
    assert_eq!(s.status, 1);
    assert!(
        s.stderr
            .contains("input `warden-install` is `path` but there is no `warden` on PATH"),
        "{}",
        s.stderr
    );

    // `build`: built even with the same version on PATH and in the cache.
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::os::unix::fs::symlink(WARDEN, root.join("bin/warden")).unwrap();
    let s = script(
        &runner,
        &[&warden_dir(), &tools],
        "install-warden.sh",
        &["lookup"],
        &[("INPUT_WARDEN_INSTALL", "build")],
    );
    assert_eq!(s.outputs["path"], "");
    let s = install(
        &[&warden_dir(), &tools],
        &[dry, ("INPUT_WARDEN_INSTALL", "build")],
    );
    assert_eq!(s.stdout, build_line);
    // `auto` takes the one in the cache's folder.
    let s = install(&[&tools], &[dry]);
    assert_eq!(s.stdout, "", "{}", s.stderr);
    assert!(s.stderr.contains("from the cache"), "{}", s.stderr);
    assert_eq!(s.path_added, format!("{root_s}/bin\n"));

    // Without cargo, a build says what to do, with the workspace's Rust.
    let rust = std::fs::read_to_string(repo_root().join("Cargo.toml"))
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix("rust-version = \"")
                .map(|v| v.trim_end_matches('"').to_string())
        })
        .unwrap();
    let s = install(&[&tools], &[("INPUT_WARDEN_INSTALL", "build")]);
    assert_eq!(s.status, 1);
    assert!(
        s.stderr.contains(&format!(
            "building warden needs cargo, and there is none on PATH: add a Rust toolchain step ({rust} or later)"
        )),
        "{}",
        s.stderr
    );
    // An older cargo is refused before it starts a build that would fail.
    let old = t.path().join("old-cargo");
    std::fs::create_dir(&old).unwrap();
    write_script(
        &old.join("cargo"),
        "#!/bin/sh
[ \"$1\" = --version ] && echo 'cargo 1.88.0 (873a06493 2025-05-10)' && exit 0
exit 9
",
    );
    let s = install(&[&old, &tools], &[("INPUT_WARDEN_INSTALL", "build")]);
    assert_eq!(s.status, 1);
    assert!(
        s.stderr.contains(&format!(
            "building warden needs Rust {rust} or later, and cargo on PATH is 1.88.0"
        )),
        "{}",
        s.stderr
    );
}

#[test]
fn the_agent_cli_is_installed_at_the_pinned_version_unless_there_is_nothing_to_do() {
    let t = tempfile::tempdir().unwrap();
    let runner = Runner::new(t.path(), &repo_root(), Vec::new());
    let tools = tools(t.path());
    let dry = ("WARDEN_ACTION_DRY_RUN", "1");
    let pins = pins();
    let npm = |specs: &str| {
        format!("would run: npm install --global --no-audit --no-fund --loglevel=error {specs}\n")
    };
    let run = |path: &[&Path], env: &[(&str, &str)]| {
        let mut all = vec![dry];
        all.extend_from_slice(env);
        script(&runner, path, "install-agent.sh", &[], &all)
    };

    // exec, install-agent false, and a batch without agents: nothing.
    for env in [
        &[("INPUT_AGENT", "exec")][..],
        &[("INPUT_AGENT", "claude"), ("INPUT_INSTALL_AGENT", "false")][..],
        &[("INPUT_AGENT", "")][..],
    ] {
        let s = run(&[&tools], env);
        assert_eq!(s.status, 0, "{env:?}: {}", s.stderr);
        assert_eq!(s.stdout, "", "{env:?}");
        assert_eq!(s.outputs["installed"], "", "{env:?}");
    }

    // The pinned version, from .ci/agents.txt.
    let (pkg, ver) = &pins["claude"];
    let s = run(&[&tools], &[("INPUT_AGENT", "claude")]);
    assert_eq!(s.stdout, npm(&format!("{pkg}@{ver}")));
    assert_eq!(s.outputs["installed"], format!("{pkg}@{ver}"));
    // Another version asked for.
    let s = run(
        &[&tools],
        &[("INPUT_AGENT", "claude"), ("INPUT_AGENT_VERSION", "latest")],
    );
    assert_eq!(s.stdout, npm(&format!("{pkg}@latest")));

    // Already there at that version: nothing; at another: installed.
    let bin = t.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    write_script(
        &bin.join("claude"),
        &format!("#!/bin/sh\necho '{ver} (Claude Code)'\n"),
    );
    let s = run(&[&bin, &tools], &[("INPUT_AGENT", "claude")]);
    assert_eq!(s.stdout, "", "{}", s.stderr);
    assert!(s.stderr.contains("already installed"), "{}", s.stderr);
    // pi says its version on stderr.
    let (_, pi_ver) = &pins["pi"];
    write_script(
        &bin.join("pi"),
        &format!(
            "#!/bin/sh
echo '{pi_ver}' >&2
"
        ),
    );
    let s = run(&[&bin, &tools], &[("INPUT_AGENT", "pi")]);
    assert_eq!(s.stdout, "", "{}", s.stderr);
    assert!(
        s.stderr
            .contains(&format!("pi {pi_ver} is already installed")),
        "{}",
        s.stderr
    );
    let s = run(
        &[&bin, &tools],
        &[("INPUT_AGENT", "claude"), ("INPUT_AGENT_VERSION", "2.0.1")],
    );
    assert_eq!(s.stdout, npm(&format!("{pkg}@2.0.1")));

    // A batch's several CLIs at once (exec among them installs nothing).
    let (cpkg, cver) = &pins["codex"];
    let s = run(&[&tools], &[("INPUT_AGENT", "codex, exec claude")]);
    assert_eq!(s.stdout, npm(&format!("{cpkg}@{cver} {pkg}@{ver}")));

    // Without npm, a real install says what to do.
    let s = script(
        &runner,
        &[&tools],
        "install-agent.sh",
        &[],
        &[("INPUT_AGENT", "pi")],
    );
    assert_eq!(s.status, 1);
    assert!(s.stderr.contains("needs npm"), "{}", s.stderr);
}

/// `.ci/agents.txt`: agent → (npm package, version).
fn pins() -> BTreeMap<String, (String, String)> {
    std::fs::read_to_string(repo_root().join(".ci/agents.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 3, "AGENT PACKAGE VERSION: {l}");
            (f[0].to_string(), (f[1].to_string(), f[2].to_string()))
        })
        .collect()
}

#[test]
fn the_pinned_agents_are_wardens_agents_with_their_packages() {
    let mut expected = BTreeMap::new();
    for p in warden_agents::profiles() {
        if p.npm_package.is_empty() {
            continue;
        }
        // The scripts look for the CLI by the agent's name.
        assert_eq!(p.program, p.agent.name(), "{:?}", p.agent);
        expected.insert(p.agent.name().to_string(), p.npm_package.to_string());
    }
    let got: BTreeMap<String, String> = pins().into_iter().map(|(a, (p, _))| (a, p)).collect();
    assert_eq!(
        got, expected,
        ".ci/agents.txt against warden-agents' profiles"
    );
}
