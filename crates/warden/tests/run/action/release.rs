//! The action's warden from a release: a stand-in release on 127.0.0.1
//! (an archive made from the warden under test and its warden-shim, laid
//! out as the release workflow makes them, and its `.sha256`) is found,
//! downloaded, checked and run, in seconds; a wrong checksum is refused;
//! without a release the action builds from source and says so.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use super::runner::{Outcome, Runner};
use super::*;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
}

/// A plain HTTP server on 127.0.0.1 serving fixed answers by path (404
/// for any other), and keeping every request it got.
pub struct Server {
    pub base: String,
    pub requests: Arc<Mutex<Vec<Request>>>,
}

impl Server {
    pub fn start(routes: BTreeMap<String, (u16, Vec<u8>)>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        // Lives as long as the test's process; one connection at a time.
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                let mut parts = line.split_whitespace();
                let method = parts.next().unwrap_or("").to_string();
                let path = parts.next().unwrap_or("").to_string();
                let mut headers = Vec::new();
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                        break;
                    }
                    if let Some((k, v)) = h.trim_end().split_once(':') {
                        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
                    }
                }
                let (status, body) = routes
                    .get(&path)
                    .cloned()
                    .unwrap_or((404, b"Not Found".to_vec()));
                seen.lock().unwrap().push(Request {
                    method: method.clone(),
                    path,
                    headers,
                });
                let reason = if status == 200 { "OK" } else { "Other" };
                let _ = write!(
                    conn,
                    "HTTP/1.1 {status} {reason}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                if method != "HEAD" {
                    let _ = conn.write_all(&body);
                }
            }
        });
        Self { base, requests }
    }

    pub fn paths(&self) -> Vec<String> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.path.clone())
            .collect()
    }
}

/// The release's target name for this machine as the action looks for it
/// second (the glibc one; the static musl one is looked for first).
fn gnu_target() -> String {
    format!("{}-unknown-linux-gnu", std::env::consts::ARCH)
}

/// A release archive as the release workflow makes it:
/// `warden-<version>-<target>.tar.gz` holding the folder of the same name
/// with `warden` and `warden-shim`. Returns its bytes and SHA-256.
fn release_archive(dir: &Path, version: &str, target: &str) -> (Vec<u8>, String) {
    let name = format!("warden-{version}-{target}");
    let folder = dir.join(&name);
    std::fs::create_dir_all(&folder).unwrap();
    for prog in ["warden", "warden-shim"] {
        std::fs::copy(warden_dir().join(prog), folder.join(prog)).unwrap();
    }
    let archive = dir.join(format!("{name}.tar.gz"));
    let st = Command::new("tar")
        .arg("-czf")
        .arg(&archive)
        .arg("-C")
        .arg(dir)
        .arg(&name)
        .status()
        .unwrap();
    assert!(st.success());
    let out = Command::new("sha256sum").arg(&archive).output().unwrap();
    let sha = String::from_utf8(out.stdout).unwrap()[..64].to_string();
    (std::fs::read(&archive).unwrap(), sha)
}

/// The routes of a release `v<version>` holding one archive, with the
/// checksum file saying `sha` (as `sha256sum` writes it).
fn release_routes(
    version: &str,
    target: &str,
    bytes: Vec<u8>,
    sha: &str,
) -> BTreeMap<String, (u16, Vec<u8>)> {
    let name = format!("warden-{version}-{target}.tar.gz");
    BTreeMap::from([
        (
            format!("/releases/download/v{version}/{name}"),
            (200, bytes),
        ),
        (
            format!("/releases/download/v{version}/{name}.sha256"),
            (200, format!("{sha}  {name}\n").into_bytes()),
        ),
    ])
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The action run from a step's start to its end on a runner without
/// warden, the agent a command that writes the time it started; returns
/// the outcome and the seconds from the step's start to the agent's.
fn run_timed(runner: &Runner, extra: &[(&str, &str)]) -> (Outcome, f64) {
    let a = action();
    let mut inputs = vec![
        ("agent", "exec"),
        ("command", "date +%s.%N > agent-started\nenv > seen-env.txt"),
    ];
    inputs.extend_from_slice(extra);
    let _ = std::fs::remove_file(runner.workspace.join("agent-started"));
    let start = now();
    let o = runner.run(&a, &inputs);
    let started = std::fs::read_to_string(runner.workspace.join("agent-started"))
        .map(|t| t.trim().parse::<f64>().unwrap() - start)
        .unwrap_or(f64::NAN);
    (o, started)
}

#[test]
fn the_release_archive_is_downloaded_checked_cached_and_run_in_seconds() {
    let t = tempfile::tempdir().unwrap();
    let version = warden_version();
    let target = gnu_target();
    let (bytes, sha) = release_archive(&t.path().join("dist"), &version, &target);
    let server = Server::start(release_routes(&version, &target, bytes, &sha));
    let base = format!("{}/releases", server.base);
    let runner = Runner::new(&t.path().join("r"), &repo_root(), machine_path(false));

    let (o, took) = run_timed(&runner, &[("release-url", &base)]);
    assert!(!o.failed, "{}", o.log());
    eprintln!("download path: step start -> agent start: {took:.2} s");
    assert!(took < 20.0, "{took} s from the step's start to the agent's");

    // The lookup found the archive (the static one first: not there).
    let lookup = o.step("warden-lookup");
    let name = format!("warden-{version}-{target}.tar.gz");
    assert_eq!(lookup.outputs["source"], "release");
    assert_eq!(
        lookup.outputs["url"],
        format!("{base}/download/v{version}/{name}")
    );
    assert_eq!(lookup.outputs["sha256"], sha);
    assert_eq!(
        lookup.outputs["cache-key"],
        format!("warden-{version}-{target}-{}", &sha[..16])
    );
    let musl = format!(
        "/releases/download/v{version}/warden-{version}-{}-unknown-linux-musl.tar.gz.sha256",
        std::env::consts::ARCH
    );
    assert_eq!(
        server.paths(),
        [
            musl.clone(),
            format!("/releases/download/v{version}/{name}.sha256"),
            format!("/releases/download/v{version}/{name}"),
        ],
        "the checksum is read before the archive, once each"
    );
    // Restored from and saved to the cache under that key.
    let root = runner.temp.join("warden");
    for id in ["warden-cache", "warden-cache-save"] {
        let s = o.step(id);
        assert!(s.ran, "{id} did not run\n{}", o.log());
        assert_eq!(Path::new(&s.with["path"]), root);
        assert_eq!(s.with["key"], lookup.outputs["cache-key"]);
    }
    let install = o.step("warden");
    assert_eq!(install.outputs["downloaded"], "true");
    assert_eq!(install.outputs["built"], "false");
    assert!(
        install.stderr.contains(&format!("{name}: SHA-256 {sha}")),
        "{}",
        install.stderr
    );
    // Both programs, side by side, executable, the ones released; the run
    // used that warden, which is on the job's PATH.
    for prog in ["warden", "warden-shim"] {
        let got = std::fs::read(root.join("bin").join(prog)).unwrap();
        assert_eq!(
            got,
            std::fs::read(warden_dir().join(prog)).unwrap(),
            "{prog}"
        );
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(root.join("bin").join(prog))
                .unwrap()
                .permissions(),
        );
        assert_eq!(mode & 0o111, 0o111, "{prog} is executable");
    }
    assert_eq!(PathBuf::from(&o.outputs["warden"]), root.join("bin/warden"));
    assert_eq!(o.path_added, [root.join("bin").display().to_string()]);
    assert_eq!(o.outputs["verdict"], "succeeded", "{}", o.log());

    // The next job, with the cache restored into the folder: the probe
    // only, no download, nothing saved again.
    let (o, took_cached) = run_timed(&runner, &[("release-url", &base)]);
    assert!(!o.failed, "{}", o.log());
    eprintln!("download path, cache hit: step start -> agent start: {took_cached:.2} s");
    assert!(
        o.step("warden").stderr.contains("from the cache"),
        "{}",
        o.log()
    );
    assert_eq!(o.step("warden").outputs["downloaded"], "false");
    assert!(!o.step("warden-cache-save").ran);
    assert_eq!(server.paths().len(), 5, "{:?}", server.paths());
    assert!(!server.paths()[3..].iter().any(|p| p.ends_with(".tar.gz")));

    // A cache someone else filled: a program that says the right version
    // and an archive that is not the release's. Neither is believed: the
    // archive fails the release's checksum and is fetched again, and the
    // programs are the release's once more.
    let fake = "#!/bin/sh\necho 'warden 0.1.0'\necho EVIL >&2\n";
    std::fs::write(root.join("bin/warden"), fake).unwrap();
    std::fs::write(root.join("archive").join(&name), b"not the archive").unwrap();
    let (o, _) = run_timed(&runner, &[("release-url", &base)]);
    assert!(!o.failed, "{}", o.log());
    assert_eq!(o.step("warden").outputs["downloaded"], "true");
    assert_eq!(
        std::fs::read(root.join("bin/warden")).unwrap(),
        std::fs::read(warden_dir().join("warden")).unwrap()
    );
    assert!(!o.log().contains("EVIL"));
}

#[test]
fn a_release_archive_whose_checksum_does_not_match_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let version = warden_version();
    let target = gnu_target();
    let (bytes, sha) = release_archive(&t.path().join("dist"), &version, &target);
    // The checksum of other bytes: one digit changed.
    let wrong = format!(
        "{}{}",
        if sha.starts_with('0') { '1' } else { '0' },
        &sha[1..]
    );
    let server = Server::start(release_routes(&version, &target, bytes, &wrong));
    let runner = Runner::new(t.path(), &repo_root(), machine_path(false));
    let (o, _) = run_timed(
        &runner,
        &[("release-url", &format!("{}/releases", server.base))],
    );
    assert!(o.failed);
    let install = o.step("warden");
    assert_eq!(install.status, Some(1));
    let name = format!("warden-{version}-{target}.tar.gz");
    assert!(
        install.stderr.contains(&format!(
            "checksum mismatch: {name} has SHA-256 {sha}, but {name}.sha256 says {wrong}: refused"
        )),
        "{}",
        install.stderr
    );
    // Nothing installed, nothing cached, nothing run.
    assert!(!runner.temp.join("warden/bin/warden").exists());
    assert!(!o.step("warden-cache-save").ran);
    assert!(!o.step("run").ran);
    assert!(!runner.workspace.join("agent-started").exists());
}

#[test]
fn without_a_release_for_its_version_the_action_builds_from_source_and_says_so() {
    let t = tempfile::tempdir().unwrap();
    let version = warden_version();
    // A release of another version only.
    let (bytes, sha) = release_archive(&t.path().join("dist"), "0.0.1", &gnu_target());
    let server = Server::start(release_routes("0.0.1", &gnu_target(), bytes, &sha));
    let base = format!("{}/releases", server.base);
    let mut runner = Runner::new(t.path(), &repo_root(), machine_path(false));
    // The build is printed, not run (minutes; measured by hand, see the
    // book's chapter): what is tested is the decision.
    runner
        .env
        .insert("WARDEN_ACTION_DRY_RUN".into(), "1".into());
    let o = runner.run(
        &action(),
        &[
            ("agent", "exec"),
            ("command", "true"),
            ("release-url", &base),
        ],
    );
    let lookup = o.step("warden-lookup");
    assert_eq!(lookup.outputs["source"], "build");
    assert_eq!(lookup.outputs["url"], "");
    assert!(
        lookup.outputs["cache-key"].starts_with(&format!(
            "warden-{version}-{}-linux-source-",
            std::env::consts::ARCH
        )),
        "{}",
        lookup.outputs["cache-key"]
    );
    assert!(
        lookup.stderr.contains(&format!(
            "no release of warden {version} for this machine under {base}"
        )) && lookup
            .stderr
            .contains("will be built from source with cargo"),
        "{}",
        lookup.stderr
    );
    assert_eq!(
        server.paths().len(),
        2,
        "musl, then gnu: {:?}",
        server.paths()
    );
    let install = o.step("warden");
    assert_eq!(
        install.stdout,
        format!(
            "would run: cargo install --locked --force --path {}/crates/warden --root {}\n",
            repo_root().display(),
            runner.temp.join("warden").display()
        )
    );

    // The ref a version tag: that release is the one looked for.
    runner.github.insert("action_ref".into(), "v0.0.1".into());
    let o = runner.run(
        &action(),
        &[
            ("agent", "exec"),
            ("command", "true"),
            ("release-url", &base),
        ],
    );
    let lookup = o.step("warden-lookup");
    assert_eq!(lookup.outputs["source"], "release", "{}", o.log());
    assert!(
        lookup.outputs["url"].contains("/download/v0.0.1/warden-0.0.1-"),
        "{}",
        lookup.outputs["url"]
    );
    // Its archive holds a warden of another version: refused.
    let install = o.step("warden");
    assert_eq!(install.status, Some(1));
    assert!(
        install.stderr.contains("does not run as warden 0.0.1"),
        "{}",
        install.stderr
    );

    // A server that fails is not taken for "no release": the step fails
    // and says so, rather than building for minutes.
    runner.github.remove("action_ref");
    let broken = Server::start(BTreeMap::from([(
        format!(
            "/download/v{version}/warden-{version}-{}-unknown-linux-musl.tar.gz.sha256",
            std::env::consts::ARCH
        ),
        (503, b"busy".to_vec()),
    )]));
    let o = runner.run(
        &action(),
        &[
            ("agent", "exec"),
            ("command", "true"),
            ("release-url", &broken.base),
        ],
    );
    assert!(o.failed);
    let lookup = o.step("warden-lookup");
    assert!(
        lookup.stderr.contains("answered HTTP 503"),
        "{}",
        lookup.stderr
    );
    assert!(!o.step("warden").ran);

    // No release location at all (a checkout without a GitHub origin, no
    // input, no variable): built, and the log says why.
    let o = runner.run(&action(), &[("agent", "exec"), ("command", "true")]);
    let lookup = o.step("warden-lookup");
    assert_eq!(lookup.outputs["source"], "build");
    assert!(
        lookup.stderr.contains("no release location"),
        "{}",
        lookup.stderr
    );
}

#[test]
fn used_as_owner_repo_at_a_tag_the_action_finds_that_release_by_itself() {
    // The runner checks `uses: acme/warden@vX` out as
    // _actions/acme/warden/vX, and github.action_ref and
    // action_repository may be empty in a composite's steps: the path
    // says both. No release-url: the server's releases are GitHub's.
    let t = tempfile::tempdir().unwrap();
    let version = warden_version();
    let target = gnu_target();
    let (bytes, sha) = release_archive(&t.path().join("dist"), &version, &target);
    let routes = release_routes(&version, &target, bytes, &sha)
        .into_iter()
        .map(|(p, v)| (format!("/acme/warden{p}"), v))
        .collect();
    let server = Server::start(routes);
    let checkout = t.path().join(format!("_actions/acme/warden/v{version}"));
    std::fs::create_dir_all(checkout.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(repo_root(), &checkout).unwrap();
    let mut runner = Runner::new(&t.path().join("r"), &checkout, machine_path(false));
    runner
        .env
        .insert("GITHUB_SERVER_URL".into(), server.base.clone());
    let (o, took) = run_timed(&runner, &[]);
    assert!(!o.failed, "{}", o.log());
    let lookup = o.step("warden-lookup");
    assert_eq!(
        lookup.outputs["url"],
        format!(
            "{}/acme/warden/releases/download/v{version}/warden-{version}-{target}.tar.gz",
            server.base
        )
    );
    assert_eq!(o.step("warden").outputs["downloaded"], "true");
    assert_eq!(o.outputs["verdict"], "succeeded");
    assert!(took < 20.0, "{took}");
}
