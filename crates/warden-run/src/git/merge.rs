//! `--merge`: a session's branch merged into the branch the user had
//! checked out. The merge is computed without a work tree
//! (`merge-tree --write-tree`, `commit-tree`), so a conflict leaves both
//! branches and every checkout as they were; only then is the target
//! moved: a fast-forward of its checkout when it is checked out (which
//! refuses local changes in the way), else its ref alone, compared and
//! swapped. Every git runs with the repository's programs off (see the
//! private `inert` module): no hook, no filter, no merge driver it names.

use std::path::{Path, PathBuf};

use super::command::{git_output, git_with};
use super::{GitError, git};
use crate::defaults;

/// A merge made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    /// The commit the target branch points at now.
    pub commit: String,
    /// The target was moved to the session's last commit (or already
    /// held it): no merge commit was made.
    pub fast_forward: bool,
}

/// Why no merge was made; both branches are as they were.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("merging {branch} into {into} conflicts in {}", .files.join(", "))]
    Conflict {
        branch: String,
        into: String,
        files: Vec<String>,
    },
    #[error(
        "{into} is checked out in {} with local changes the merge would overwrite ({}): commit or stash them, then merge {branch} by hand",
        .checkout.display(), .files.join(", ")
    )]
    LocalChanges {
        branch: String,
        into: String,
        checkout: PathBuf,
        files: Vec<String>,
    },
    #[error(
        "{branch} is at {tip}, not at {checked} where the check passed: what came after the check was never checked, so nothing is merged"
    )]
    Unchecked {
        branch: String,
        into: String,
        checked: String,
        tip: String,
    },
    #[error("could not merge {branch} into {into}: {source}")]
    Git {
        branch: String,
        into: String,
        source: GitError,
    },
}

impl MergeError {
    /// The files in the way: in conflict, or changed in the checkout.
    pub fn files(&self) -> &[String] {
        match self {
            MergeError::Conflict { files, .. } | MergeError::LocalChanges { files, .. } => files,
            MergeError::Git { .. } | MergeError::Unchecked { .. } => &[],
        }
    }
}

/// Merges `branch` into `into` in the repository `repo` is in, with
/// `message` for a merge commit. `checked`: the commit the session's
/// check passed on; a branch that is anywhere else then is not merged.
pub async fn merge(
    repo: &Path,
    into: &str,
    branch: &str,
    message: &str,
    checked: Option<&str>,
) -> Result<Merged, MergeError> {
    let failed = |source| MergeError::Git {
        branch: branch.to_string(),
        into: into.to_string(),
        source,
    };
    // One merge at a time into a repository, the target read under the
    // lock: the sessions of a batch end together, and of two merges
    // computed from the same tip the second could not fast-forward the
    // checkout the first had just moved.
    let _one_at_a_time = one_at_a_time(repo).await.map_err(failed)?;
    let commit_of = |name: &str| format!("refs/heads/{name}^{{commit}}");
    let old = git(repo, ["rev-parse", "--verify", &commit_of(into)])
        .await
        .map_err(failed)?;
    let new = git(repo, ["rev-parse", "--verify", &commit_of(branch)])
        .await
        .map_err(failed)?;
    if let Some(checked) = checked
        && checked != new
    {
        return Err(MergeError::Unchecked {
            branch: branch.to_string(),
            into: into.to_string(),
            checked: checked.to_string(),
            tip: new,
        });
    }
    if is_ancestor(repo, &new, &old).await.map_err(failed)? {
        // Nothing of the session's is missing from the target.
        return Ok(Merged {
            commit: old,
            fast_forward: true,
        });
    }
    let fast_forward = is_ancestor(repo, &old, &new).await.map_err(failed)?;
    let target = if fast_forward {
        new.clone()
    } else {
        let tree = merged_tree(repo, &old, &new)
            .await
            .map_err(failed)?
            .map_err(|files| MergeError::Conflict {
                branch: branch.to_string(),
                into: into.to_string(),
                files,
            })?;
        commit_tree(repo, &tree, &old, &new, message)
            .await
            .map_err(failed)?
    };
    match checkout_of(repo, into).await.map_err(failed)? {
        Some(checkout) => {
            // Never past what is in the user's checkout: no stash of
            // their changes to re-apply (`merge.autoStash` would leave
            // conflict markers in their files), and no ignored file
            // overwritten by a file of the session's (git's default; the
            // user's `.env`, say).
            // The files are checked out by the attributes of the
            // user's own tree, not of the branch the agent wrote (whose
            // attributes could pick a filter of the user's for any
            // file); Git LFS files stay pointers (`git lfs pull` fetches
            // them): the branch's `.lfsconfig` could send the download
            // anywhere.
            let attr_source = format!("--attr-source={old}");
            let out = git_output(
                &checkout,
                [
                    attr_source.as_str(),
                    "merge",
                    "--ff-only",
                    "--no-autostash",
                    "--no-overwrite-ignore",
                    "--no-stat",
                    "--quiet",
                    &target,
                ],
                &[
                    ("filter.lfs.smudge", "git-lfs smudge --skip -- %f"),
                    ("filter.lfs.process", "git-lfs filter-process --skip"),
                ],
                defaults::GIT_WORKTREE_TIMEOUT,
            )
            .await
            .map_err(failed)?;
            if !out.status.success() {
                let said = String::from_utf8_lossy(&out.stderr).into_owned();
                let files = files_in_the_way(&said);
                if files.is_empty() {
                    return Err(failed(GitError {
                        args: format!("merge --ff-only {target}"),
                        message: said.trim().to_string(),
                    }));
                }
                return Err(MergeError::LocalChanges {
                    branch: branch.to_string(),
                    into: into.to_string(),
                    checkout,
                    files,
                });
            }
        }
        None => {
            git(
                repo,
                [
                    "update-ref",
                    "-m",
                    message,
                    &format!("refs/heads/{into}"),
                    &target,
                    &old,
                ],
            )
            .await
            .map_err(failed)?;
        }
    }
    Ok(Merged {
        commit: target,
        fast_forward,
    })
}

/// The lock of the repository's `.warden/worktrees` (the one a
/// worktree is made under), held until dropped; waited for without
/// blocking the thread.
async fn one_at_a_time(repo: &Path) -> Result<std::os::fd::OwnedFd, GitError> {
    let root = git(repo, ["rev-parse", "--show-toplevel"]).await?;
    let dir = Path::new(&root).join(".warden/worktrees");
    let locked = match crate::held_dir::HeldDir::open_or_create(&dir) {
        Ok(held) => held.lock().await.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    locked.map_err(|e| GitError {
        args: "merge".into(),
        message: format!("could not lock {}: {e}", dir.display()),
    })
}

/// Whether `a` is an ancestor of `b` (or is `b`).
async fn is_ancestor(repo: &Path, a: &str, b: &str) -> Result<bool, GitError> {
    let out = git_output(
        repo,
        ["merge-base", "--is-ancestor", a, b],
        &[],
        defaults::GIT_QUERY_TIMEOUT,
    )
    .await?;
    match out.status.code() {
        Some(0) => Ok(true),
        Some(1) => Ok(false),
        _ => Err(GitError {
            args: format!("merge-base --is-ancestor {a} {b}"),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        }),
    }
}

/// The tree of `ours` and `theirs` merged, or the files in conflict.
/// The repository's attributes are read from an empty tree: the agent
/// wrote `.gitattributes` in its branch, and an attribute may pick a
/// merge driver that the user's own configuration names.
async fn merged_tree(
    repo: &Path,
    ours: &str,
    theirs: &str,
) -> Result<Result<String, Vec<String>>, GitError> {
    let empty = git(repo, ["hash-object", "-t", "tree", "/dev/null"]).await?;
    let attr_source = format!("--attr-source={empty}");
    let out = git_output(
        repo,
        [
            attr_source.as_str(),
            "merge-tree",
            "--write-tree",
            "--name-only",
            "--no-messages",
            "-z",
            ours,
            theirs,
        ],
        &[],
        defaults::GIT_WORKTREE_TIMEOUT,
    )
    .await?;
    let mut fields = out
        .stdout
        .split(|b| *b == 0)
        .map(|f| String::from_utf8_lossy(f).into_owned());
    let tree = fields.next().unwrap_or_default();
    match out.status.code() {
        Some(0) => Ok(Ok(tree.trim().to_string())),
        Some(1) => {
            let mut files: Vec<String> = fields.filter(|f| !f.is_empty()).collect();
            files.dedup();
            Ok(Err(files))
        }
        _ => Err(GitError {
            args: format!("merge-tree --write-tree {ours} {theirs}"),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        }),
    }
}

/// A merge commit of `tree` with parents `ours` and `theirs`, by the
/// user's identity (warden's where git has none).
async fn commit_tree(
    repo: &Path,
    tree: &str,
    ours: &str,
    theirs: &str,
    message: &str,
) -> Result<String, GitError> {
    let args = ["commit-tree", tree, "-p", ours, "-p", theirs, "-m", message];
    let known = git(repo, ["var", "GIT_COMMITTER_IDENT"]).await.is_ok()
        && git(repo, ["var", "GIT_AUTHOR_IDENT"]).await.is_ok();
    let identity: &[(&str, &str)] = if known {
        &[]
    } else {
        &[("user.name", "warden"), ("user.email", "warden@localhost")]
    };
    git_with(repo, args, identity, defaults::GIT_QUERY_TIMEOUT).await
}

/// The work tree where `branch` is checked out, if one has it.
async fn checkout_of(repo: &Path, branch: &str) -> Result<Option<PathBuf>, GitError> {
    let listed = git(repo, ["worktree", "list", "--porcelain", "-z"]).await?;
    let want = format!("branch refs/heads/{branch}");
    let mut path = None;
    for field in listed.split('\0') {
        if let Some(p) = field.strip_prefix("worktree ") {
            path = Some(PathBuf::from(p));
        } else if field == want {
            return Ok(path);
        }
    }
    Ok(None)
}

/// The files git names as in the way of a fast-forward: each on a line
/// of its own, after a tab.
fn files_in_the_way(said: &str) -> Vec<String> {
    said.lines()
        .filter_map(|l| l.strip_prefix('\t'))
        .map(|f| f.trim().to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_in_the_way_are_read_from_gits_message() {
        let said = "error: Your local changes to the following files would be overwritten by merge:\n\tsrc/a.rs\n\tb.txt\nPlease commit your changes or stash them before you merge.\nAborting\n";
        assert_eq!(files_in_the_way(said), vec!["src/a.rs", "b.txt"]);
        assert!(files_in_the_way("fatal: Not possible to fast-forward, aborting.").is_empty());
    }

    fn run(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Two sessions of a batch end at once, both merging into the branch
    /// checked out: both land, the second as a merge commit on top of
    /// the first (not refused for the checkout the first just moved).
    #[tokio::test]
    async fn merges_into_one_branch_at_once_both_land() {
        let t = tempfile::tempdir().unwrap();
        let repo = t.path();
        run(repo, &["init", "-q", "-b", "main"]);
        run(repo, &["commit", "-q", "--allow-empty", "-m", "base"]);
        for name in ["a", "b"] {
            run(repo, &["checkout", "-q", "-b", name, "main"]);
            std::fs::write(repo.join(name), name).unwrap();
            run(repo, &["add", name]);
            run(repo, &["commit", "-q", "-m", name]);
        }
        run(repo, &["checkout", "-q", "main"]);
        let (a, b) = tokio::join!(
            merge(repo, "main", "a", "merge a", None),
            merge(repo, "main", "b", "merge b", None)
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(
            a.fast_forward != b.fast_forward,
            "one moves main forward, the other merges: {a:?} {b:?}"
        );
        let last = if a.fast_forward { &b } else { &a };
        assert_eq!(run(repo, &["rev-parse", "main"]), last.commit);
        assert!(repo.join("a").exists() && repo.join("b").exists());
        assert_eq!(run(repo, &["status", "--porcelain"]), "");
    }
}
