//! The release's archives, install.sh and cargo-binstall's template: the
//! archive `.ci/package` makes of this build's real programs (both
//! programs, executable, and the packaged warden starting the packaged
//! shim), install.sh run against a real HTTP server on 127.0.0.1 serving
//! that archive (installed and working; a wrong checksum and a machine
//! with no archive refused, nothing installed), the binstall template in
//! crates/warden/Cargo.toml resolving to that archive and its layout, and
//! the release workflow (.github/workflows/release.yml): it packages with
//! `.ci/package` and pins every action by commit; its steps after the
//! build (package, run the packaged programs, checksums and install.sh
//! for the release) and its version check run here with bash as the
//! runner runs them.
//!
//! The packaged programs are this test build's (glibc, debug), named for
//! this machine's musl target as the release's are: what is checked is
//! the packaging and the installing, not the release build itself, which
//! only the workflow's runners make.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use yaml_rust2::{Yaml, YamlLoader};

use crate::support::*;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The workspace's version, as `.ci/package` reads it.
fn version() -> String {
    let text = std::fs::read_to_string(repo_root().join("Cargo.toml")).unwrap();
    let doc: toml::Value = toml::from_str(&text).unwrap();
    doc["workspace"]["package"]["version"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The release's target for this machine.
fn host_target() -> String {
    format!("{}-unknown-linux-musl", std::env::consts::ARCH)
}

/// A release tree laid out as GitHub's `releases/` (what install.sh's
/// WARDEN_INSTALL_BASE points at), holding this build packaged once.
struct Release {
    root: PathBuf,
    /// `download/vVERSION`, where the archive and its .sha256 are.
    dir: PathBuf,
    archive: String,
}

fn release() -> &'static Release {
    static RELEASE: OnceLock<Release> = OnceLock::new();
    RELEASE.get_or_init(|| {
        // One per test process (a runner may start one per test); those
        // of processes that are gone are removed.
        let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
        for entry in std::fs::read_dir(tmp).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name.strip_prefix("install-script-release-")
                && !Path::new("/proc").join(pid).exists()
            {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        let root = tmp.join(format!("install-script-release-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let dir = root.join(format!("download/v{}", version()));
        let out = package(&host_target(), Path::new(WARDEN).parent().unwrap(), &dir);
        assert!(
            out.status.success(),
            ".ci/package failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let latest = root.join("latest/download");
        std::fs::create_dir_all(&latest).unwrap();
        std::fs::write(
            latest.join("warden-version.txt"),
            format!("{}\n", version()),
        )
        .unwrap();
        Release {
            root,
            dir,
            archive: format!("warden-{}-{}.tar.gz", version(), host_target()),
        }
    })
}

/// `.ci/package TARGET OUT` on the programs in `bin_dir`.
fn package(target: &str, bin_dir: &Path, out: &Path) -> Output {
    Command::new(repo_root().join(".ci/package"))
        .args([target, out.to_str().unwrap()])
        .env("WARDEN_BIN_DIR", bin_dir)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// An HTTP server on 127.0.0.1 serving the files under `root` (GET only;
/// 404 for anything else), with `overrides` (a path's bytes instead of
/// its file's). Runs until the test process ends.
fn serve(root: PathBuf, overrides: BTreeMap<String, Vec<u8>>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let root = root.clone();
            let overrides = overrides.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut request = String::new();
                if reader.read_line(&mut request).is_err() {
                    return;
                }
                // The headers, up to the empty line.
                loop {
                    let mut line = String::new();
                    match reader.read_line(&mut line) {
                        Ok(0) | Err(_) => break,
                        Ok(_) if line.trim().is_empty() => break,
                        Ok(_) => {}
                    }
                }
                let mut parts = request.split_whitespace();
                let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
                let body = if method != "GET" || path.contains("..") {
                    None
                } else if let Some(bytes) = overrides.get(path) {
                    Some(bytes.clone())
                } else {
                    std::fs::read(root.join(path.trim_start_matches('/'))).ok()
                };
                let _ = match body {
                    Some(body) => conn
                        .write_all(
                            format!(
                                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n",
                                body.len()
                            )
                            .as_bytes(),
                        )
                        .and_then(|()| conn.write_all(&body)),
                    None => conn.write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    ),
                };
            });
        }
    });
    format!("http://{addr}")
}

/// install.sh from the repository's top, with `env` on top of a clean
/// HOME and no WARDEN_* of the caller's.
fn install_sh(home: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new("sh");
    cmd.arg(repo_root().join("install.sh"))
        .current_dir(home)
        .env("HOME", home)
        .stdin(Stdio::null());
    for key in [
        "WARDEN_VERSION",
        "WARDEN_INSTALL_DIR",
        "WARDEN_INSTALL_BASE",
        "WARDEN_INSTALL_MACHINE",
    ] {
        cmd.env_remove(key);
    }
    cmd.envs(env.iter().copied());
    cmd.output().unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The name of the process the agent of a run of `warden` saw as its
/// parent (its shim): `warden-shim` when warden used the shim beside it.
fn shim_of(case: &Case, warden: &Path) -> String {
    let cmd = case.command(&["run", "exec", "--", "sh", "-c", "cat /proc/$PPID/comm"]);
    let out = Command::new(warden)
        .args(cmd.get_args())
        .current_dir(case.path())
        .envs(cmd.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .env_remove("WARDEN_SHIM_OF")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Everything under `dir`, as paths relative to it.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            out.push(p.strip_prefix(dir).unwrap().display().to_string());
            if p.is_dir() {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

fn sha256_of(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn the_archive_holds_both_programs_of_one_build() {
    let rel = release();
    let archive = rel.dir.join(&rel.archive);
    let sums = std::fs::read_to_string(rel.dir.join(format!("{}.sha256", rel.archive))).unwrap();
    assert_eq!(sums, format!("{}  {}\n", sha256_of(&archive), rel.archive));

    let case = Case::new();
    let x = case.path().join("x");
    std::fs::create_dir(&x).unwrap();
    let untar = Command::new("tar")
        .args(["-xzf", archive.to_str().unwrap(), "-C", x.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(untar.success());
    let top = format!("warden-{}-{}", version(), host_target());
    assert_eq!(
        tree(&x),
        [
            top.clone(),
            format!("{top}/warden"),
            format!("{top}/warden-shim")
        ]
    );
    let bin = x.join(&top);
    for program in ["warden", "warden-shim"] {
        assert_eq!(mode(&bin.join(program)), 0o755, "{program}");
    }
    // The shim is of warden's build: warden starts it for its runs.
    assert_eq!(shim_of(&case, &bin.join("warden")), "warden-shim");
    case.assert_nothing_left();
}

#[test]
fn packaging_refuses_a_shim_of_another_build() {
    let case = Case::new();
    let bin = case.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::copy(WARDEN, bin.join("warden")).unwrap();
    write_script(&bin.join("warden-shim"), "#!/bin/sh\nexit 1\n");
    let out_dir = case.path().join("out");
    let out = package(&host_target(), &bin, &out_dir);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("are not of the same build"), "{err}");
    assert!(tree(&out_dir).is_empty(), "{:?}", tree(&out_dir));

    std::fs::remove_file(bin.join("warden-shim")).unwrap();
    let out = package(&host_target(), &bin, &out_dir);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("warden-shim is missing or not executable"),
        "{}",
        text(&out)
    );
}

#[test]
fn install_sh_installs_the_latest_release_from_a_server() {
    let rel = release();
    let base = serve(rel.root.clone(), BTreeMap::new());
    let case = Case::new();
    let dir = case.path().join("opt/bin");
    let out = install_sh(
        case.path(),
        &[
            ("WARDEN_INSTALL_BASE", &base),
            ("WARDEN_INSTALL_DIR", dir.to_str().unwrap()),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!(
            "installed warden {} ({}): {}/warden and {}/warden-shim",
            version(),
            host_target(),
            dir.display(),
            dir.display()
        )),
        "{said}"
    );
    assert_eq!(tree(&dir), ["warden", "warden-shim"]);
    for program in ["warden", "warden-shim"] {
        assert_eq!(mode(&dir.join(program)), 0o755, "{program}");
    }
    let v = Command::new(dir.join("warden"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(v.status.success(), "{}", text(&v));
    assert_eq!(
        String::from_utf8_lossy(&v.stdout).trim(),
        format!("warden {}", version())
    );
    assert_eq!(shim_of(&case, &dir.join("warden")), "warden-shim");
    case.assert_nothing_left();
}

/// With wget and no curl on PATH, a version named, into ~/.local/bin.
#[test]
fn install_sh_downloads_with_wget_when_there_is_no_curl() {
    let rel = release();
    let base = serve(rel.root.clone(), BTreeMap::new());
    let case = Case::new();
    let tools = case.path().join("tools");
    std::fs::create_dir(&tools).unwrap();
    for tool in [
        "sh",
        "uname",
        "tr",
        "cut",
        "sha256sum",
        "tar",
        "gzip",
        "mktemp",
        "rm",
        "mkdir",
        "cp",
        "chmod",
        "mv",
        "wget",
    ] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .unwrap();
        let path = String::from_utf8_lossy(&found.stdout).trim().to_string();
        assert!(
            found.status.success() && !path.is_empty(),
            "{tool} is not installed"
        );
        std::os::unix::fs::symlink(&path, tools.join(tool)).unwrap();
    }
    let out = install_sh(
        case.path(),
        &[
            ("WARDEN_INSTALL_BASE", &base),
            ("WARDEN_VERSION", &format!("v{}", version())),
            ("PATH", tools.to_str().unwrap()),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let dir = case.path().join(".local/bin");
    assert_eq!(tree(&dir), ["warden", "warden-shim"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("is not on your PATH"),
        "{}",
        text(&out)
    );
    // wget would follow a redirect from https to plain http: over https
    // only curl is used.
    let other = Case::new();
    let out = install_sh(
        other.path(),
        &[
            ("WARDEN_INSTALL_BASE", "https://127.0.0.1:9/releases"),
            ("WARDEN_VERSION", &version()),
            ("PATH", tools.to_str().unwrap()),
        ],
    );
    assert!(!out.status.success());
    assert!(
        text(&out).contains("curl is not installed"),
        "{}",
        text(&out)
    );
    // A version that is not one never makes a URL.
    let out = install_sh(
        other.path(),
        &[
            ("WARDEN_INSTALL_BASE", &base),
            ("WARDEN_VERSION", "0.1.0/../../x"),
            ("PATH", tools.to_str().unwrap()),
        ],
    );
    assert!(!out.status.success());
    assert!(text(&out).contains("is not a version"), "{}", text(&out));
    assert!(!other.path().join(".local/bin").exists());
}

#[test]
fn install_sh_refuses_a_wrong_checksum_and_installs_nothing() {
    let rel = release();
    let sums = format!("/download/v{}/{}.sha256", version(), rel.archive);
    let wrong = format!("{}  {}\n", "0".repeat(64), rel.archive);
    let base = serve(
        rel.root.clone(),
        BTreeMap::from([(sums, wrong.into_bytes())]),
    );
    let case = Case::new();
    let dir = case.path().join("bin");
    let out = install_sh(
        case.path(),
        &[
            ("WARDEN_INSTALL_BASE", &base),
            ("WARDEN_INSTALL_DIR", dir.to_str().unwrap()),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "checksum mismatch for {}: {}.sha256 says {}, the download is {}; nothing installed",
            rel.archive,
            rel.archive,
            "0".repeat(64),
            sha256_of(&rel.dir.join(&rel.archive))
        )),
        "{err}"
    );
    assert!(!dir.exists(), "{:?}", tree(&dir));
}

#[test]
fn install_sh_refuses_a_machine_with_no_archive_by_name() {
    let rel = release();
    let base = serve(rel.root.clone(), BTreeMap::new());
    let case = Case::new();
    let dir = case.path().join("bin");
    let out = install_sh(
        case.path(),
        &[
            ("WARDEN_INSTALL_BASE", &base),
            ("WARDEN_INSTALL_DIR", dir.to_str().unwrap()),
            ("WARDEN_INSTALL_MACHINE", "riscv64"),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "no warden release archive for machine 'riscv64': the releases have x86_64 and aarch64"
        ),
        "{err}"
    );
    assert!(!dir.exists());

    // A machine the script knows, whose archive the release lacks.
    let other = if std::env::consts::ARCH == "x86_64" {
        "aarch64"
    } else {
        "x86_64"
    };
    let out = install_sh(
        case.path(),
        &[
            ("WARDEN_INSTALL_BASE", &base),
            ("WARDEN_INSTALL_DIR", dir.to_str().unwrap()),
            ("WARDEN_INSTALL_MACHINE", other),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "is there a release {} with an archive for {other}-unknown-linux-musl?",
            version()
        )),
        "{err}"
    );
    assert!(!dir.exists());
}

/// The copy of install.sh in the repository has no release location yet.
#[test]
fn install_sh_without_a_base_says_there_is_no_release_location() {
    let case = Case::new();
    let out = install_sh(case.path(), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("set WARDEN_INSTALL_BASE"),
        "{}",
        text(&out)
    );
    // A base that is not a URL is named.
    let out = install_sh(case.path(), &[("WARDEN_INSTALL_BASE", "/srv/mirror")]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "WARDEN_INSTALL_BASE must be an https://, http:// or file:// URL, not '/srv/mirror'"
        ),
        "{}",
        text(&out)
    );
}

/// cargo-binstall's rendering of a template: `{ var }` (spaces optional)
/// replaced by its value; an unknown variable fails the test.
fn render(template: &str, vars: &BTreeMap<&str, String>) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let end = rest[start..].find('}').expect("an unclosed {") + start;
        let key = rest[start + 1..end].trim();
        out.push_str(
            vars.get(key)
                .unwrap_or_else(|| panic!("unknown template variable {key}")),
        );
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// The targets the release workflow builds (its build job's matrix).
fn workflow() -> Yaml {
    let text = std::fs::read_to_string(repo_root().join(".github/workflows/release.yml")).unwrap();
    YamlLoader::load_from_str(&text).unwrap().remove(0)
}

fn release_targets() -> Vec<String> {
    workflow()["jobs"]["build"]["strategy"]["matrix"]["include"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|e| e["target"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn binstall_resolves_to_the_archives_the_release_publishes() {
    let manifest = std::fs::read_to_string(repo_root().join("crates/warden/Cargo.toml")).unwrap();
    let doc: toml::Value = toml::from_str(&manifest).unwrap();
    let meta = &doc["package"]["metadata"]["binstall"];
    let pkg_url = meta["pkg-url"].as_str().unwrap();
    let bin_dir = meta["bin-dir"].as_str().unwrap();
    assert_eq!(meta["pkg-fmt"].as_str(), Some("tgz"));
    let bins: Vec<&str> = doc["bin"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(bins, ["warden", "warden-shim"]);

    let rel = release();
    let repo = "https://github.com/OWNER/REPO";
    let targets = release_targets();
    assert_eq!(
        targets,
        ["x86_64-unknown-linux-musl", "aarch64-unknown-linux-musl"]
    );
    assert!(targets.contains(&host_target()));
    for target in &targets {
        // binstall tries each file extension of the format: .tgz, .tar.gz.
        for (format, suffix) in [("tgz", ".tgz"), ("tar.gz", ".tar.gz")] {
            let mut vars = BTreeMap::from([
                ("name", doc["package"]["name"].as_str().unwrap().to_string()),
                ("version", version()),
                ("target", target.clone()),
                ("repo", repo.to_string()),
                ("archive-format", format.to_string()),
                ("archive-suffix", suffix.to_string()),
                ("binary-ext", String::new()),
            ]);
            let archive = format!("warden-{}-{target}.tar.gz", version());
            // install.sh's URL with base https://github.com/OWNER/REPO/releases.
            assert_eq!(
                render(pkg_url, &vars),
                format!("{repo}/releases/download/v{}/{archive}", version())
            );
            if *target == host_target() {
                assert_eq!(archive, rel.archive, "the name .ci/package gives");
                let listing = Command::new("tar")
                    .arg("-tzf")
                    .arg(rel.dir.join(&rel.archive))
                    .output()
                    .unwrap();
                let listing = String::from_utf8_lossy(&listing.stdout).into_owned();
                for bin in &bins {
                    vars.insert("bin", bin.to_string());
                    let path = render(bin_dir, &vars);
                    assert!(
                        listing.lines().any(|l| l == path),
                        "{path} is not in the archive:\n{listing}"
                    );
                }
                vars.remove("bin");
            }
        }
    }
}

#[test]
fn the_release_workflow_packages_with_ci_package_and_pins_every_action() {
    let text = std::fs::read_to_string(repo_root().join(".github/workflows/release.yml")).unwrap();
    let wf = workflow();
    let tags: Vec<&str> = wf["on"]["push"]["tags"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(tags, ["v*"]);

    let steps = |job: &str| wf["jobs"][job]["steps"].as_vec().unwrap().clone();
    let runs = |job: &str| -> String {
        steps(job)
            .iter()
            .filter_map(|s| s["run"].as_str().map(str::to_string))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        runs("build").contains(".ci/package \"$TARGET\" dist"),
        "the build job packages with .ci/package"
    );
    assert!(
        runs("build")
            .contains("cargo build --release --locked --target \"$TARGET\" -p agent-warden --bins")
    );
    assert!(runs("release").contains("gh release create"));

    let mut uses = Vec::new();
    for job in ["build", "release"] {
        for step in steps(job) {
            if let Some(u) = step["uses"].as_str() {
                uses.push(u.to_string());
            }
        }
    }
    assert!(
        uses.iter()
            .any(|u| u.starts_with("actions/attest-build-provenance@")),
        "{uses:?}"
    );
    for u in &uses {
        let (_, pin) = u.split_once('@').unwrap_or_else(|| panic!("{u}: no @"));
        assert!(
            pin.len() == 40
                && pin
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
            "{u} is not pinned by a full commit SHA"
        );
        // The tag the commit was, in a comment on the same line.
        let line = text.lines().find(|l| l.contains(u.as_str())).unwrap();
        assert!(
            line.trim_end().rsplit_once("# v").is_some(),
            "{line}: no `# vTAG` comment"
        );
    }
    // The attestation covers the archives.
    let attest = steps("release")
        .into_iter()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/attest-build-provenance@"))
        })
        .unwrap();
    assert_eq!(
        attest["with"]["subject-path"].as_str(),
        Some("dist/*.tar.gz")
    );
}

/// A `run:` step of the release workflow by its name, run as the runner
/// runs it (`bash --noprofile --norc -eo pipefail`), in `dir`.
fn run_step(job: &str, name: &str, dir: &Path, env: &[(&str, &str)]) -> Output {
    let wf = workflow();
    let steps = wf["jobs"][job]["steps"].as_vec().unwrap();
    let step = steps
        .iter()
        .find(|s| s["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no step {name:?} in job {job}"));
    let body = step["run"].as_str().unwrap();
    assert!(!body.contains("${{"), "{name}: an expression in run:");
    let script = dir.join(".step.sh");
    std::fs::write(&script, body).unwrap();
    let out = Command::new("bash")
        .args(["--noprofile", "--norc", "-eo", "pipefail"])
        .arg(&script)
        .current_dir(dir)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    std::fs::remove_file(&script).unwrap();
    out
}

/// The release job's step before the attestation, on two packaged
/// archives (this build under both targets' names): the checksums
/// verified, install.sh with the repository written in, the version file
/// and the notes.
#[test]
fn the_release_step_writes_install_sh_for_its_repository() {
    let rel = release();
    let case = Case::new();
    let ws = case.path();
    std::fs::copy(repo_root().join("install.sh"), ws.join("install.sh")).unwrap();
    std::fs::copy(repo_root().join("CHANGELOG.md"), ws.join("CHANGELOG.md")).unwrap();
    let dist = ws.join("dist");
    std::fs::create_dir(&dist).unwrap();
    for target in release_targets() {
        let archive = format!("warden-{}-{target}.tar.gz", version());
        std::fs::copy(rel.dir.join(&rel.archive), dist.join(&archive)).unwrap();
        std::fs::write(
            dist.join(format!("{archive}.sha256")),
            format!("{}  {archive}\n", sha256_of(&dist.join(&archive))),
        )
        .unwrap();
    }
    let tag = format!("v{}", version());
    let env = [
        ("TAG", tag.as_str()),
        ("GITHUB_REPOSITORY", "someone/warden"),
    ];
    let out = run_step(
        "release",
        "Checksums, install.sh and the version file",
        ws,
        &env,
    );
    assert!(out.status.success(), "{}", text(&out));
    let script = std::fs::read_to_string(dist.join("install.sh")).unwrap();
    assert!(script.lines().any(|l| l == "repository=someone/warden"));
    assert_eq!(
        std::fs::read_to_string(dist.join("warden-version.txt")).unwrap(),
        format!("{}\n", version())
    );
    assert!(
        !std::fs::read_to_string(ws.join("notes.md"))
            .unwrap()
            .trim()
            .is_empty()
    );

    // A corrupted archive stops the release before anything is published.
    let first = dist.join(format!(
        "warden-{}-{}.tar.gz",
        version(),
        release_targets()[0]
    ));
    std::fs::write(&first, b"not the archive").unwrap();
    let out = run_step(
        "release",
        "Checksums, install.sh and the version file",
        ws,
        &env,
    );
    assert!(!out.status.success(), "{}", text(&out));
}

/// The build job's first step: a tag that is not the workspace's version,
/// or a version the CHANGELOG does not date, is not released.
#[test]
fn a_release_needs_its_version_tagged_and_dated() {
    let case = Case::new();
    let ws = case.path();
    std::fs::copy(repo_root().join("Cargo.toml"), ws.join("Cargo.toml")).unwrap();
    let step = "The tag is the workspace's version, and the CHANGELOG dates it";
    let tag = format!("v{}", version());

    std::fs::write(
        ws.join("CHANGELOG.md"),
        format!("# Changelog\n\n## {} (unreleased)\n\n- x\n", version()),
    )
    .unwrap();
    let out = run_step("build", step, ws, &[("TAG", &tag)]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("has no heading"));

    std::fs::write(
        ws.join("CHANGELOG.md"),
        format!("# Changelog\n\n## {} (2026-12-24)\n\n- x\n", version()),
    )
    .unwrap();
    let out = run_step("build", step, ws, &[("TAG", &tag)]);
    assert!(out.status.success(), "{}", text(&out));
    let out = run_step("build", step, ws, &[("TAG", "v9.9.9")]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("is not v"));
}

/// The build job's packaging steps as the workflow has them, on this
/// build's programs (in place of the release build of TARGET): `Package`
/// makes the archive in `dist/`, and `Run the packaged programs` finds
/// that the packaged warden runs and starts the packaged shim.
#[test]
fn the_build_jobs_package_and_check_steps_run_on_this_build() {
    let case = Case::new();
    let ws = case.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::os::unix::fs::symlink(repo_root().join(".ci"), ws.join(".ci")).unwrap();
    std::fs::copy(repo_root().join("Cargo.toml"), ws.join("Cargo.toml")).unwrap();
    let tmp = case.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let target = host_target();
    let bin_dir = Path::new(WARDEN)
        .parent()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let env = [
        ("TARGET", target.as_str()),
        ("WARDEN_BIN_DIR", bin_dir.as_str()),
        ("TMPDIR", tmp.to_str().unwrap()),
        ("WARDEN_TEST_MARK", case.mark.as_str()),
    ];
    let out = run_step("build", "Package", &ws, &env);
    assert!(out.status.success(), "{}", text(&out));
    let archive = format!("warden-{}-{target}.tar.gz", version());
    assert_eq!(
        tree(&ws.join("dist")),
        [archive.clone(), format!("{archive}.sha256")]
    );

    let out = run_step("build", "Run the packaged programs", &ws, &env);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("warden {}", version())),
        "{}",
        text(&out)
    );

    // The same step fails when the packaged shim is not warden's.
    let dist = ws.join("dist");
    let x = case.path().join("x");
    std::fs::create_dir(&x).unwrap();
    let untar = Command::new("tar")
        .args([
            "-xzf",
            dist.join(&archive).to_str().unwrap(),
            "-C",
            x.to_str().unwrap(),
        ])
        .status()
        .unwrap();
    assert!(untar.success());
    let top = format!("warden-{}-{target}", version());
    write_script(&x.join(&top).join("warden-shim"), "#!/bin/sh\nexit 1\n");
    let retar = Command::new("tar")
        // gzip's fastest: the debug build is large.
        .args([
            "--use-compress-program=gzip -1",
            "-cf",
            dist.join(&archive).to_str().unwrap(),
            "-C",
            x.to_str().unwrap(),
            &top,
        ])
        .status()
        .unwrap();
    assert!(retar.success());
    let out = run_step("build", "Run the packaged programs", &ws, &env);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(
            "the packaged warden did not use the packaged warden-shim (its runs' shim: warden)"
        ),
        "{}",
        text(&out)
    );
    case.assert_nothing_left();
}
