//! A sandboxed session's own repository: instead of a worktree of the
//! user's repository (whose `.git` the sandbox shows read-only, so the
//! agent could not commit, and which shares the user's configuration,
//! hooks and branches), the agent gets a repository of its own, with the
//! user's objects borrowed read-only (`objects/info/alternates`) and one
//! branch, the session's. Everything in it is the agent's to write; none
//! of it is the user's. At the end warden fetches that one branch back
//! into the user's repository, on the host, with the transport of a
//! local path only and every program the repository names turned off
//! (see [`super::inert`]); nothing else of it is taken.

use std::path::{Path, PathBuf};

use super::{GitError, git, git_with};
use crate::defaults;

/// The user's repository's object directory (the common one, for a
/// linked worktree): what the own repository borrows, and what a sandbox
/// must show read-only for the agent's git to read the history.
pub async fn objects_dir(root: &Path) -> Result<PathBuf, GitError> {
    let common = git(
        root,
        ["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )
    .await?;
    Ok(PathBuf::from(common).join("objects"))
}

/// Makes the repository at `path` (which must not exist) with `branch` at
/// `base` checked out, borrowing the objects of the repository at `root`.
/// Its configuration is git's defaults, the object format of `root`, and
/// the user's name and e-mail as `root` has them (the sandbox hides the
/// user's own configuration files, and a commit needs both).
pub(super) async fn create(
    root: &Path,
    path: &Path,
    branch: &str,
    base: &str,
) -> Result<(), GitError> {
    let format = git(root, ["rev-parse", "--show-object-format"]).await?;
    let objects = objects_dir(root).await?;
    let limit = defaults::GIT_WORKTREE_TIMEOUT;
    // `--template=`: no hooks, not even git's samples.
    super::git_within(
        root,
        [
            "init".as_ref(),
            "-q".as_ref(),
            "--template=".as_ref(),
            format!("--object-format={format}").as_ref(),
            format!("--initial-branch={branch}").as_ref(),
            path.as_os_str(),
        ] as [&std::ffi::OsStr; 6],
        limit,
    )
    .await?;
    let alternates = path.join(".git/objects/info/alternates");
    let mut line = objects.into_os_string().into_encoded_bytes();
    line.push(b'\n');
    std::fs::write(&alternates, line).map_err(|e| GitError {
        args: "init".into(),
        message: format!("could not write {}: {e}", alternates.display()),
    })?;
    for key in ["user.name", "user.email"] {
        if let Ok(value) = git(root, ["config", "--get", key]).await {
            git(path, ["config", key, &value]).await?;
        }
    }
    git(path, ["update-ref", &format!("refs/heads/{branch}"), base]).await?;
    super::git_within(path, ["reset", "-q", "--hard", "HEAD"], limit).await?;
    Ok(())
}

/// Fetches `branch` of the own repository at `path` into the same branch
/// of the repository at `root` (forced: the branch is the session's, and
/// the agent may have rewritten it). The own repository is read by `git
/// upload-pack`, which runs no hook and honours no program its
/// configuration names (`uploadpack.packObjectsHook` only from the
/// user's own files); every object it sends is hashed again on the way
/// in, so a forged one cannot pass for another. Before, the repository is
/// checked to hold nothing that would make `upload-pack`, with the
/// user's rights, read what the sandbox hides (see `make_plain`).
pub(super) async fn bring_home(root: &Path, path: &Path, branch: &str) -> Result<(), GitError> {
    let dot_git = path.join(".git");
    let objects = objects_dir(root).await?;
    tokio::task::spawn_blocking(move || make_plain(&dot_git, &objects))
        .await
        .map_err(|e| GitError {
            args: "fetch".into(),
            message: e.to_string(),
        })??;
    let refspec = format!("+refs/heads/{branch}:refs/heads/{branch}");
    // Read from its `.git` alone (no discovery, which could take the work
    // tree's root for a bare repository of the agent's making).
    let want = tip_in(path, Some(".git"), branch).await?;
    // From the `.git` that was checked, and only from it: `--strict`
    // keeps upload-pack from taking the work tree's root as a bare
    // repository when that `.git` is not a valid one (the agent's own
    // `HEAD`, `refs` and `objects` there could be links into what the
    // sandbox hides).
    let dot_git = path.join(".git");
    git_with(
        root,
        [
            "fetch".as_ref(),
            "-q".as_ref(),
            "--no-tags".as_ref(),
            "--no-write-fetch-head".as_ref(),
            "--no-recurse-submodules".as_ref(),
            "--no-auto-maintenance".as_ref(),
            "--upload-pack=git-upload-pack --strict".as_ref(),
            dot_git.as_os_str(),
            refspec.as_ref(),
        ] as [&std::ffi::OsStr; 9],
        &[("protocol.file.allow", "always")],
        defaults::GIT_WORKTREE_TIMEOUT,
    )
    .await?;
    // The branch is home only if it now points where the agent's did (a
    // `shallow` file, say, can make a fetch end quietly without it): the
    // caller keeps the agent's repository otherwise.
    let got = tip(root, branch).await?;
    if want.is_none() || got != want {
        return Err(GitError {
            args: "fetch".into(),
            message: format!(
                "refs/heads/{branch} did not come home from {} (it points at {}, the fetch left {})",
                path.display(),
                want.as_deref().unwrap_or("nothing"),
                got.as_deref().unwrap_or("nothing")
            ),
        });
    }
    Ok(())
}

/// The most entries of an own repository's `.git` that are looked at
/// before fetching from it; a larger one is left alone.
const MAX_ENTRIES: usize = 2_000_000;

/// Makes sure `git upload-pack`, which runs on the host with the user's
/// rights, reads nothing of the host through the agent's repository: its
/// `.git` is a directory holding only directories and regular files (a
/// symbolic link there, to a ref or a pack of a repository the sandbox
/// hides, would be followed), with no `commondir` (which would make it
/// another repository's), and its alternates are again only the user's
/// repository's objects, whatever the agent wrote there.
fn make_plain(dot_git: &Path, objects: &Path) -> Result<(), GitError> {
    let refuse = |what: String| GitError {
        args: "fetch".into(),
        message: format!("{what}: nothing is fetched from a repository that holds one"),
    };
    let io = |p: &Path, e: std::io::Error| refuse(format!("{}: {e}", p.display()));
    let mut seen = 0usize;
    let mut dirs = vec![dot_git.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let meta = std::fs::symlink_metadata(&dir).map_err(|e| io(&dir, e))?;
        if !meta.is_dir() {
            return Err(refuse(format!("{} is not a directory", dir.display())));
        }
        for entry in std::fs::read_dir(&dir).map_err(|e| io(&dir, e))? {
            let entry = entry.map_err(|e| io(&dir, e))?;
            seen += 1;
            if seen > MAX_ENTRIES {
                return Err(refuse(format!(
                    "{} holds more than {MAX_ENTRIES} entries",
                    dot_git.display()
                )));
            }
            let p = entry.path();
            let kind = entry.file_type().map_err(|e| io(&p, e))?;
            if kind.is_dir() {
                dirs.push(p);
            } else if !kind.is_file() {
                return Err(refuse(format!(
                    "{} is a symbolic link or a special file",
                    p.display()
                )));
            }
        }
    }
    let commondir = dot_git.join("commondir");
    if std::fs::symlink_metadata(&commondir).is_ok() {
        return Err(refuse(format!("{} exists", commondir.display())));
    }
    let alternates = dot_git.join("objects/info/alternates");
    let mut line = objects.as_os_str().as_encoded_bytes().to_vec();
    line.push(b'\n');
    // Replaced, not written through: the file is the agent's.
    let fresh = dot_git.join("objects/info/.alternates.warden");
    std::fs::write(&fresh, line)
        .and_then(|()| std::fs::rename(&fresh, &alternates))
        .map_err(|e| io(&alternates, e))?;
    Ok(())
}

/// The commit `branch` points at in the repository `dir`, if it exists.
pub(super) async fn tip(dir: &Path, branch: &str) -> Result<Option<String>, GitError> {
    tip_in(dir, None, branch).await
}

/// [`tip`], in the git directory `git_dir` (relative to `dir`) when
/// given rather than the one git would discover.
async fn tip_in(
    dir: &Path,
    git_dir: Option<&str>,
    branch: &str,
) -> Result<Option<String>, GitError> {
    let git_dir = git_dir.map(|d| format!("--git-dir={d}"));
    let rev = format!("refs/heads/{branch}^{{commit}}");
    let args = git_dir
        .iter()
        .map(String::as_str)
        .chain(["rev-parse", "--verify", "--quiet", &rev]);
    match git(dir, args).await {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.message.is_empty() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Whether a session's own repository holds submodules' repositories
/// (`.git/modules`): their commits are nowhere else.
pub(crate) fn has_submodules(own: &Path) -> bool {
    std::fs::read_dir(own.join(".git/modules")).is_ok_and(|mut d| d.next().is_some())
}
