//! Short checks of what this machine can do, for `--sandbox auto` and
//! `warden doctor`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs a command with a time limit; `Ok(stdout)` if it exited 0.
pub fn run(program: &str, args: &[&str], limit: Duration) -> Result<String, String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("`{program}` could not be started: {e}"))?;
    let until = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("`{program}` did not answer within {limit:?}"));
            }
        }
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(err.lines().last().unwrap_or("failed").trim().to_string())
    }
}

/// Whether bubblewrap can start a process here with the options warden
/// uses; the reason if not.
pub fn bwrap() -> Result<String, String> {
    let version = run("bwrap", &["--version"], Duration::from_secs(5)).map_err(|_| {
        "bubblewrap is not installed (Debian: apt-get install bubblewrap)".to_string()
    })?;
    let mut args: Vec<String> = crate::bwrap::base_args()
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    args.extend(["--".into(), "true".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run("bwrap", &args, Duration::from_secs(5)).map_err(|e| {
        format!(
            "{} is installed but cannot start a sandbox with the options warden needs \
             (its own user namespace without capabilities and --disable-userns, which need \
             bubblewrap 0.8 or later and user namespaces): {e}",
            version.trim()
        )
    })?;
    Ok(version.trim().to_string())
}

/// The container engine's version if its client is installed and its
/// engine answers.
pub fn engine(engine: &str) -> Result<String, String> {
    let version = run(engine, &["--version"], Duration::from_secs(5))
        .map_err(|_| format!("{engine} is not installed"))?;
    // Each engine names its version its own way: Podman's `info` has no
    // `ServerVersion`, and asking for it fails as if no engine answered.
    let format = match engine {
        "podman" => "{{.Version.Version}}",
        _ => "{{.ServerVersion}}",
    };
    let server = run(
        engine,
        &["info", "--format", format],
        Duration::from_secs(10),
    )
    .map_err(|e| {
        format!(
            "the {engine} client is installed ({}) but no engine answers: {e}",
            version.trim()
        )
    })?;
    Ok(format!("{}; engine {}", version.trim(), server.trim()))
}

/// Whether `env` can start a program with SIGTERM ignored and give the
/// next program its default back (GNU coreutils 8.31 or later). Checked
/// once per process.
pub fn signal_env() -> bool {
    static SUPPORTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SUPPORTED.get_or_init(|| {
        run(
            "env",
            &[
                "--ignore-signal=TERM",
                "env",
                "--default-signal=TERM",
                "true",
            ],
            Duration::from_secs(5),
        )
        .is_ok()
    })
}

/// Whether this process may create user namespaces.
pub fn user_namespaces() -> Result<(), String> {
    run("unshare", &["--user", "true"], Duration::from_secs(5))
        .map(|_| ())
        .map_err(|e| format!("no: {e}"))
}

/// Resolves `--sandbox auto`: bwrap where it works here, else host, with
/// a sentence saying which and why.
pub fn resolve_auto() -> (crate::Sandbox, String) {
    match bwrap() {
        Ok(v) => (crate::Sandbox::Bwrap, format!("sandbox auto: bwrap ({v})")),
        Err(why) => (
            crate::Sandbox::Host,
            format!("sandbox auto: host, because {why}"),
        ),
    }
}
