//! A stand-in for the GitHub Actions runner, for the repository's
//! composite action (`action.yml`): it runs the action's steps as the
//! runner does, with real bash and real files, so the tests
//! in this module can check what a workflow would see.
//!
//! What it does as the runner does:
//! - each `run:` step is a script file run as `bash --noprofile --norc -eo
//!   pipefail FILE` (`shell: bash`), in the workspace, with the step's
//!   `env:` on top of the job's environment;
//! - each step gets fresh `GITHUB_OUTPUT`, `GITHUB_ENV`, `GITHUB_PATH` and
//!   `GITHUB_STEP_SUMMARY` files; outputs are read in both the
//!   `name=value` and the `name<<DELIMITER` forms, `GITHUB_ENV` entries
//!   reach the later steps, and `GITHUB_PATH` lines go in front of their
//!   PATH;
//! - after a step fails, only steps whose `if:` calls `always()` run;
//! - `uses:` steps are not run (no network, no other actions here): their
//!   `if:` is evaluated and their `with:` recorded, for the tests to check.
//!
//! Expressions: only the few forms the action uses are understood
//! (`inputs.NAME`, `steps.ID.outputs.NAME`, `github.action_path` and the
//! few `github` paths of `expr::GITHUB_PATHS`, `runner.temp`, `always()`, `==`, `!=`, `&&`, `||`, parentheses, string
//! literals). Anything else fails the test, so the action cannot grow an
//! expression this runner would silently get wrong. `${{ }}` in a `run:`
//! body is refused too: inputs reach the scripts through `env:` only.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use yaml_rust2::{Yaml, YamlLoader};

use super::expr::{Context, condition, template};

/// How long one step may take before the runner kills it (a hung step
/// fails its test rather than the whole suite).
const STEP_LIMIT: Duration = Duration::from_secs(60);

/// A scalar as the runner reads it: every scalar is text.
fn text(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        Yaml::Null => Some(String::new()),
        _ => None,
    }
}

/// A mapping's entries in order, every key and value text.
fn text_map(y: &Yaml, what: &str) -> Vec<(String, String)> {
    match y {
        Yaml::BadValue | Yaml::Null => Vec::new(),
        Yaml::Hash(h) => h
            .iter()
            .map(|(k, v)| {
                let k = text(k).unwrap_or_else(|| panic!("{what}: a key that is not text"));
                let v = text(v).unwrap_or_else(|| panic!("{what}.{k}: not text"));
                (k, v)
            })
            .collect(),
        _ => panic!("{what} is not a mapping"),
    }
}

#[derive(Debug, Clone)]
pub struct Input {
    pub name: String,
    pub description: String,
    pub default: String,
    pub required: bool,
}

#[derive(Debug, Clone)]
pub struct Output {
    pub name: String,
    pub description: String,
    pub value: String,
}

#[derive(Debug, Clone)]
pub enum StepKind {
    /// A `run:` script and its `shell:`.
    Run { script: String, shell: String },
    /// A `uses:` action and its `with:`.
    Uses {
        action: String,
        with: Vec<(String, String)>,
    },
}

#[derive(Debug, Clone)]
pub struct Step {
    pub id: Option<String>,
    pub name: String,
    pub condition: Option<String>,
    pub env: Vec<(String, String)>,
    pub kind: StepKind,
}

/// `action.yml`, read and checked for what the runner requires of a
/// composite action.
#[derive(Debug)]
pub struct Action {
    pub name: String,
    pub description: String,
    pub inputs: Vec<Input>,
    pub outputs: Vec<Output>,
    pub steps: Vec<Step>,
}

impl Action {
    pub fn load(path: &Path) -> Self {
        let source = std::fs::read_to_string(path).unwrap();
        let docs = YamlLoader::load_from_str(&source)
            .unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()));
        assert_eq!(docs.len(), 1, "one document in {}", path.display());
        let y = &docs[0];
        let top: Vec<String> = y
            .as_hash()
            .expect("a mapping at the top")
            .keys()
            .map(|k| text(k).unwrap())
            .collect();
        for k in &top {
            assert!(
                [
                    "name",
                    "description",
                    "author",
                    "branding",
                    "inputs",
                    "outputs",
                    "runs"
                ]
                .contains(&k.as_str()),
                "unknown top-level key `{k}` in action.yml"
            );
        }
        let name = text(&y["name"]).unwrap_or_default();
        let description = text(&y["description"]).unwrap_or_default();
        assert!(!name.is_empty(), "action.yml needs a `name`");
        assert!(!description.is_empty(), "action.yml needs a `description`");
        assert_eq!(
            text(&y["runs"]["using"]).as_deref(),
            Some("composite"),
            "runs.using"
        );

        let mut inputs = Vec::new();
        if let Some(h) = y["inputs"].as_hash() {
            for (k, v) in h {
                let name = text(k).unwrap();
                for (key, _) in text_map(v, &format!("inputs.{name}")) {
                    assert!(
                        ["description", "required", "default", "deprecationMessage"]
                            .contains(&key.as_str()),
                        "inputs.{name}: unknown key `{key}`"
                    );
                }
                inputs.push(Input {
                    description: text(&v["description"]).unwrap_or_default(),
                    default: text(&v["default"]).unwrap_or_default(),
                    required: text(&v["required"]).as_deref() == Some("true"),
                    name,
                });
            }
        }
        let mut outputs = Vec::new();
        if let Some(h) = y["outputs"].as_hash() {
            for (k, v) in h {
                let name = text(k).unwrap();
                let value = text(&v["value"])
                    .unwrap_or_else(|| panic!("outputs.{name} needs a `value` in a composite"));
                outputs.push(Output {
                    description: text(&v["description"]).unwrap_or_default(),
                    value,
                    name,
                });
            }
        }
        let mut steps = Vec::new();
        for (i, s) in y["runs"]["steps"]
            .as_vec()
            .expect("runs.steps is a list")
            .iter()
            .enumerate()
        {
            let what = format!("runs.steps[{i}]");
            for (key, _) in s.as_hash().expect("a step is a mapping") {
                let key = text(key).unwrap();
                assert!(
                    ["id", "name", "if", "env", "run", "shell", "uses", "with"]
                        .contains(&key.as_str()),
                    "{what}: `{key}` is not something this runner understands"
                );
            }
            let kind = match (text(&s["run"]), text(&s["uses"])) {
                (Some(script), None) => StepKind::Run {
                    script,
                    shell: text(&s["shell"])
                        .unwrap_or_else(|| panic!("{what}: a `run` step needs `shell`")),
                },
                (None, Some(action)) => StepKind::Uses {
                    action,
                    with: text_map(&s["with"], &format!("{what}.with")),
                },
                _ => panic!("{what}: a step has either `run` or `uses`"),
            };
            steps.push(Step {
                id: text(&s["id"]),
                name: text(&s["name"]).unwrap_or_default(),
                condition: text(&s["if"]),
                env: text_map(&s["env"], &format!("{what}.env")),
                kind,
            });
        }
        Self {
            name,
            description,
            inputs,
            outputs,
            steps,
        }
    }

    pub fn input(&self, name: &str) -> Option<&Input> {
        self.inputs.iter().find(|i| i.name == name)
    }

    pub fn step(&self, id: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.id.as_deref() == Some(id))
    }

    /// Checks every expression of the action against its own inputs and
    /// steps, without running anything: each refers to a declared input or
    /// to an earlier step with an id (an output's value: to any step), and
    /// uses nothing this runner does not understand.
    pub fn check_expressions(&self) -> Result<(), String> {
        let inputs: BTreeMap<String, String> = self
            .inputs
            .iter()
            .map(|i| (i.name.clone(), i.default.clone()))
            .collect();
        let mut known: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        let ctx_with = |steps: &BTreeMap<String, BTreeMap<String, String>>| Context {
            inputs: inputs.clone(),
            steps: steps.clone(),
            action_path: "/action".into(),
            runner_temp: "/tmp".into(),
            github: BTreeMap::new(),
        };
        for (i, s) in self.steps.iter().enumerate() {
            let ctx = ctx_with(&known);
            let at = |e: String| format!("step {i} ({}): {e}", s.name);
            if let Some(c) = &s.condition {
                condition(c, &ctx).map_err(at)?;
            }
            for (k, v) in &s.env {
                template(v, &ctx).map_err(|e| at(format!("env {k}: {e}")))?;
            }
            match &s.kind {
                StepKind::Run { script, .. } => {
                    if script.contains("${{") {
                        return Err(at(
                            "an expression in a `run:` script; pass it through `env:`".into(),
                        ));
                    }
                }
                StepKind::Uses { with, .. } => {
                    for (k, v) in with {
                        template(v, &ctx).map_err(|e| at(format!("with {k}: {e}")))?;
                    }
                }
            }
            if let Some(id) = &s.id
                && known.insert(id.clone(), BTreeMap::new()).is_some()
            {
                return Err(at(format!("the id `{id}` twice")));
            }
        }
        let ctx = ctx_with(&known);
        for o in &self.outputs {
            template(&o.value, &ctx).map_err(|e| format!("output {}: {e}", o.name))?;
        }
        Ok(())
    }
}

/// What one step did.
#[derive(Debug, Clone, Default)]
pub struct StepResult {
    pub id: Option<String>,
    pub name: String,
    /// `if:` held (or there was none) and the step was not skipped after
    /// an earlier failure.
    pub ran: bool,
    /// A `run:` step's exit status.
    pub status: Option<i32>,
    pub outputs: BTreeMap<String, String>,
    pub stdout: String,
    pub stderr: String,
    /// A `uses:` step's `with:`, evaluated.
    pub with: BTreeMap<String, String>,
}

/// What the whole action did.
#[derive(Debug)]
pub struct Outcome {
    pub steps: Vec<StepResult>,
    /// The composite's outputs, as the workflow reads them.
    pub outputs: BTreeMap<String, String>,
    /// A step failed: the action's step fails.
    pub failed: bool,
    /// Everything appended to `GITHUB_STEP_SUMMARY`.
    pub summary: String,
    /// The job's PATH additions (`GITHUB_PATH`), the first searched first:
    /// what the workflow's later steps find.
    pub path_added: Vec<String>,
}

impl Outcome {
    pub fn step(&self, id: &str) -> &StepResult {
        self.steps
            .iter()
            .find(|s| s.id.as_deref() == Some(id))
            .unwrap_or_else(|| panic!("no step `{id}`"))
    }

    /// Every step's stderr, for a failure message.
    pub fn log(&self) -> String {
        self.steps
            .iter()
            .filter(|s| s.ran)
            .map(|s| {
                format!(
                    "--- {} (status {:?})\n{}{}",
                    s.name, s.status, s.stdout, s.stderr
                )
            })
            .collect()
    }
}

/// A simulated runner machine: a workspace, a temp directory, a home,
/// and the environment every step starts from.
pub struct Runner {
    pub action_path: PathBuf,
    pub workspace: PathBuf,
    pub temp: PathBuf,
    pub env: BTreeMap<String, String>,
    /// PATH before any `GITHUB_PATH` addition.
    pub path: Vec<PathBuf>,
    /// The `github` context (see [`super::expr::GITHUB_PATHS`]): by
    /// default a `workflow_dispatch` by the repository's owner, with no
    /// API to ask (a test that needs one serves it).
    pub github: BTreeMap<String, String>,
}

impl Runner {
    /// A runner in `root` (a temporary directory) for the action at
    /// `action_path`, with `path` as the machine's PATH.
    pub fn new(root: &Path, action_path: &Path, path: Vec<PathBuf>) -> Self {
        let workspace = root.join("workspace");
        let temp = root.join("runner_temp");
        let home = root.join("home");
        for d in [&workspace, &temp, &home] {
            std::fs::create_dir_all(d).unwrap();
        }
        let mut env = BTreeMap::new();
        for (k, v) in [
            ("GITHUB_ACTIONS", "true"),
            ("CI", "true"),
            ("RUNNER_OS", "Linux"),
            ("GITHUB_WORKFLOW", "test"),
            ("GITHUB_RUN_ID", "1"),
            ("LANG", "C.UTF-8"),
        ] {
            env.insert(k.to_string(), v.to_string());
        }
        env.insert("HOME".into(), home.display().to_string());
        env.insert("RUNNER_TEMP".into(), temp.display().to_string());
        env.insert("GITHUB_WORKSPACE".into(), workspace.display().to_string());
        env.insert(
            "GITHUB_ACTION_PATH".into(),
            action_path.display().to_string(),
        );
        let github = [
            ("actor", "octocat"),
            ("repository", "octocat/project"),
            ("repository_owner", "octocat"),
            ("event_name", "workflow_dispatch"),
            // Nothing listens on the discard port: a test that asks the
            // API without serving one fails at once.
            ("api_url", "http://127.0.0.1:9"),
            ("token", "ghs_simulated0token"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        Self {
            action_path: action_path.to_path_buf(),
            workspace,
            temp,
            env,
            path,
            github,
        }
    }

    /// Runs the action with `given` inputs.
    pub fn run(&self, action: &Action, given: &[(&str, &str)]) -> Outcome {
        self.run_with(action, given, |_, _| {})
    }

    /// Runs the action; `started(step id, pid)` is called as each `run:`
    /// step's process starts (to signal it, say).
    pub fn run_with(
        &self,
        action: &Action,
        given: &[(&str, &str)],
        mut started: impl FnMut(&str, u32),
    ) -> Outcome {
        let mut inputs = BTreeMap::new();
        for i in &action.inputs {
            inputs.insert(i.name.clone(), i.default.clone());
        }
        for (k, v) in given {
            assert!(
                inputs.contains_key(*k),
                "`{k}` is not an input of the action (the runner would warn and drop it)"
            );
            inputs.insert(k.to_string(), v.to_string());
        }
        for i in &action.inputs {
            assert!(
                !i.required || !inputs[&i.name].is_empty(),
                "input {} is required",
                i.name
            );
        }
        let mut ctx = Context {
            inputs,
            steps: BTreeMap::new(),
            action_path: self.action_path.display().to_string(),
            runner_temp: self.temp.display().to_string(),
            github: self.github.clone(),
        };
        let files = self.temp.join("_runner_file_commands");
        std::fs::create_dir_all(&files).unwrap();
        let mut job_env: BTreeMap<String, String> = BTreeMap::new();
        let mut added_path: Vec<String> = Vec::new();
        let mut failed = false;
        let mut summary = String::new();
        let mut results = Vec::new();

        for (n, step) in action.steps.iter().enumerate() {
            let mut r = StepResult {
                id: step.id.clone(),
                name: step.name.clone(),
                ..Default::default()
            };
            r.ran = match &step.condition {
                None => !failed,
                Some(c) => {
                    let (holds, always) = condition(c, &ctx)
                        .unwrap_or_else(|e| panic!("step {}: if: {e}", step.name));
                    // Without a status function the runner reads the
                    // condition as `success() && (...)`.
                    holds && (always || !failed)
                }
            };
            if r.ran {
                match &step.kind {
                    StepKind::Uses { with, .. } => {
                        for (k, v) in with {
                            let v = template(v, &ctx)
                                .unwrap_or_else(|e| panic!("step {}: with {k}: {e}", step.name));
                            r.with.insert(k.clone(), v);
                        }
                    }
                    StepKind::Run { script, shell } => {
                        assert_eq!(shell, "bash", "step {}: only `shell: bash`", step.name);
                        assert!(
                            !script.contains("${{"),
                            "step {}: an expression in a `run:` script; pass it through `env:`",
                            step.name
                        );
                        let file = |what: &str| files.join(format!("{what}_{n}"));
                        let (output, env_file, path_file, summary_file) = (
                            file("set_output"),
                            file("set_env"),
                            file("add_path"),
                            file("step_summary"),
                        );
                        for f in [&output, &env_file, &path_file, &summary_file] {
                            std::fs::write(f, "").unwrap();
                        }
                        let script_file = self.temp.join(format!("step_{n}.sh"));
                        std::fs::write(&script_file, script).unwrap();
                        let mut path: Vec<String> = added_path.clone();
                        path.extend(self.path.iter().map(|p| p.display().to_string()));
                        let mut cmd = Command::new("bash");
                        cmd.args(["--noprofile", "--norc", "-eo", "pipefail"])
                            .arg(&script_file)
                            .current_dir(&self.workspace)
                            .env_clear()
                            .envs(&self.env)
                            .envs(&job_env)
                            .env("PATH", path.join(":"))
                            .env("GITHUB_OUTPUT", &output)
                            .env("GITHUB_ENV", &env_file)
                            .env("GITHUB_PATH", &path_file)
                            .env("GITHUB_STEP_SUMMARY", &summary_file)
                            .stdin(Stdio::null())
                            .stdout(Stdio::piped())
                            .stderr(Stdio::piped());
                        for (k, v) in &step.env {
                            let v = template(v, &ctx)
                                .unwrap_or_else(|e| panic!("step {}: env {k}: {e}", step.name));
                            cmd.env(k, v);
                        }
                        // The runner starts a step with the default
                        // signal actions; a test run from a script's
                        // background job would have SIGINT ignored, and
                        // bash cannot trap what it starts ignoring.
                        // SAFETY: signal() with constants, between fork
                        // and exec; nothing allocates.
                        unsafe {
                            cmd.pre_exec(|| {
                                for sig in
                                    [libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGHUP]
                                {
                                    libc::signal(sig, libc::SIG_DFL);
                                }
                                Ok(())
                            });
                        }
                        let child = cmd.spawn().expect("start bash");
                        let pid = child.id();
                        started(step.id.as_deref().unwrap_or(""), pid);
                        let (done, watch) = mpsc::channel::<()>();
                        std::thread::spawn(move || {
                            if watch.recv_timeout(STEP_LIMIT).is_err() {
                                let _ = Command::new("kill")
                                    .args(["-KILL", &pid.to_string()])
                                    .status();
                            }
                        });
                        let out = child.wait_with_output().unwrap();
                        let _ = done.send(());
                        r.status = Some(out.status.code().unwrap_or(-1));
                        r.stdout = String::from_utf8_lossy(&out.stdout).into_owned();
                        r.stderr = String::from_utf8_lossy(&out.stderr).into_owned();
                        r.outputs = parse_file_command(&output)
                            .unwrap_or_else(|e| panic!("step {}: GITHUB_OUTPUT: {e}", step.name));
                        job_env.extend(
                            parse_file_command(&env_file)
                                .unwrap_or_else(|e| panic!("step {}: GITHUB_ENV: {e}", step.name)),
                        );
                        // Each line goes in front, so the last one added
                        // is searched first, as the runner does.
                        for line in std::fs::read_to_string(&path_file).unwrap().lines() {
                            if !line.trim().is_empty() {
                                added_path.insert(0, line.to_string());
                            }
                        }
                        summary.push_str(&std::fs::read_to_string(&summary_file).unwrap());
                        if out.status.code() != Some(0) {
                            failed = true;
                        }
                    }
                }
            }
            if let Some(id) = &step.id {
                ctx.steps.insert(id.clone(), r.outputs.clone());
            }
            results.push(r);
        }
        let outputs = action
            .outputs
            .iter()
            .map(|o| {
                let v =
                    template(&o.value, &ctx).unwrap_or_else(|e| panic!("output {}: {e}", o.name));
                (o.name.clone(), v)
            })
            .collect();
        Outcome {
            steps: results,
            outputs,
            failed,
            summary,
            path_added: added_path,
        }
    }
}

/// A `GITHUB_OUTPUT` or `GITHUB_ENV` file as the runner reads it: `name=value`
/// lines and `name<<DELIMITER` blocks. A name twice is an error here
/// (the runner keeps the last; the action never means to write one twice).
pub fn parse_file_command(file: &Path) -> Result<BTreeMap<String, String>, String> {
    let text = std::fs::read_to_string(file).map_err(|e| e.to_string())?;
    let mut out = BTreeMap::new();
    let mut lines = text.split('\n');
    while let Some(line) = lines.next() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        let (name, value) = match (line.split_once('='), line.split_once("<<")) {
            // `=` before any `<<` (or no `<<`): the plain form.
            (Some((n, v)), h) if h.is_none_or(|(hn, _)| hn.len() > n.len()) => {
                (n.to_string(), v.to_string())
            }
            (_, Some((n, delim))) => {
                let mut value = Vec::new();
                let mut closed = false;
                for l in lines.by_ref() {
                    let l = l.strip_suffix('\r').unwrap_or(l);
                    if l == delim {
                        closed = true;
                        break;
                    }
                    value.push(l);
                }
                if !closed {
                    return Err(format!("`{n}<<{delim}` is never closed"));
                }
                (n.to_string(), value.join("\n"))
            }
            _ => return Err(format!("a line that sets nothing: {line:?}")),
        };
        if name.is_empty() {
            return Err(format!("an empty name: {line:?}"));
        }
        if out.insert(name.clone(), value).is_some() {
            return Err(format!("`{name}` twice"));
        }
    }
    Ok(out)
}

#[test]
fn outputs_are_read_in_both_forms_and_a_name_twice_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("out");
    std::fs::write(
        &f,
        "a=1\nb=x<<y\nc<<EOF\nline 1\nline=2\nEOF\nd=\ne<<Z\r\nq\r\nZ\r\n",
    )
    .unwrap();
    let o = parse_file_command(&f).unwrap();
    assert_eq!(o["a"], "1");
    assert_eq!(o["b"], "x<<y");
    assert_eq!(o["c"], "line 1\nline=2");
    assert_eq!(o["d"], "");
    assert_eq!(o["e"], "q");
    std::fs::write(&f, "a=1\na=2\n").unwrap();
    assert!(parse_file_command(&f).is_err());
    std::fs::write(&f, "a<<EOF\nnever closed\n").unwrap();
    assert!(parse_file_command(&f).is_err());
}
