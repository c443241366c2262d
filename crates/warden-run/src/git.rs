//! The run's git side: the base commit, worktrees, and the commits an
//! agent made. warden shells out to the user's own `git`, so config,
//! hooks and repository layouts behave exactly as they do for the agent.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// A commit made during a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Commit {
    pub sha: String,
    pub subject: String,
    pub author: String,
    pub files_changed: u32,
}

#[derive(Debug, thiserror::Error)]
#[error("git {args}: {message}")]
pub struct GitError {
    pub args: String,
    pub message: String,
}

/// Runs git in `dir`; its stdout, trimmed at the end.
pub fn git<I, S>(dir: &Path, args: I) -> Result<String, GitError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
    let shown = args
        .iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(&args)
        .env("LC_ALL", "C")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| GitError {
            args: shown.clone(),
            message: format!("could not run git: {e}"),
        })?;
    if !out.status.success() {
        return Err(GitError {
            args: shown,
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_string())
}

/// The top of the repository `dir` is in, if it is in one.
pub fn repo_root(dir: &Path) -> Option<PathBuf> {
    git(dir, ["rev-parse", "--show-toplevel"])
        .ok()
        .map(PathBuf::from)
}

/// The commit HEAD points at (`None` in a repository with no commit yet).
pub fn head(dir: &Path) -> Option<String> {
    git(dir, ["rev-parse", "--verify", "--quiet", "HEAD"])
        .ok()
        .filter(|s| !s.is_empty())
}

/// The current branch, if HEAD is on one. Read from the HEAD file (no git
/// process: it is asked at the end of every run), with git as the fallback.
pub fn branch(dir: &Path) -> Option<String> {
    if let Some(git_dir) = git_dir(dir)
        && let Ok(head) = std::fs::read_to_string(git_dir.join("HEAD"))
    {
        return head
            .trim()
            .strip_prefix("ref: refs/heads/")
            .map(str::to_string);
    }
    git(dir, ["symbolic-ref", "--quiet", "--short", "HEAD"]).ok()
}

/// Whether `dir` is inside a git work tree, found by looking for `.git`
/// upwards (no git process: every run asks).
pub fn in_work_tree(dir: &Path) -> bool {
    dir.ancestors().any(|d| d.join(".git").exists())
}

/// The git directory of the work tree `dir` is in: `.git` itself, or where
/// a worktree's `.git` file points.
fn git_dir(dir: &Path) -> Option<PathBuf> {
    let dot_git = dir
        .ancestors()
        .map(|d| d.join(".git"))
        .find(|p| p.exists())?;
    if dot_git.is_dir() {
        return Some(dot_git);
    }
    let text = std::fs::read_to_string(&dot_git).ok()?;
    let target = PathBuf::from(text.trim().strip_prefix("gitdir:")?.trim());
    Some(if target.is_absolute() {
        target
    } else {
        dot_git.parent()?.join(target)
    })
}

/// Whether the work tree has changes not committed (untracked files too).
pub fn is_dirty(dir: &Path) -> bool {
    git(dir, ["status", "--porcelain"]).is_ok_and(|s| !s.is_empty())
}

/// Commits reachable from HEAD and not from `base` (all of HEAD's
/// history when there was no base commit), oldest first.
pub fn commits_since(dir: &Path, base: Option<&str>) -> Result<Vec<Commit>, GitError> {
    if head(dir).is_none() {
        return Ok(Vec::new());
    }
    let range = match base {
        Some(b) => format!("{b}..HEAD"),
        None => "HEAD".to_string(),
    };
    let log = git(
        dir,
        [
            "log",
            "--reverse",
            "--no-color",
            "--format=%x1e%H%x1f%s%x1f%an <%ae>",
            "--name-only",
            range.as_str(),
        ],
    )?;
    Ok(log
        .split('\u{1e}')
        .filter(|r| !r.trim().is_empty())
        .filter_map(|record| {
            let mut lines = record.lines();
            let mut head = lines.next()?.split('\u{1f}');
            let sha = head.next()?.to_string();
            let subject = head.next().unwrap_or_default().to_string();
            let author = head.next().unwrap_or_default().to_string();
            let files_changed = lines.filter(|l| !l.trim().is_empty()).count() as u32;
            Some(Commit {
                sha,
                subject,
                author,
                files_changed,
            })
        })
        .collect())
}

/// A branch name made safe as a directory name.
pub fn dir_name(branch: &str) -> String {
    branch
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// A worktree warden made for a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Worktree {
    pub path: PathBuf,
    pub branch: String,
    /// The commit it started from.
    pub base: Option<String>,
}

impl Worktree {
    /// Creates `branch` from `base` (a ref; HEAD if `None`) in a new
    /// worktree under `<repo>/.warden/worktrees/`. Fails if the branch
    /// exists: two sessions never share a branch.
    pub fn create(repo: &Path, branch: &str, base: Option<&str>) -> Result<Self, GitError> {
        let root = repo_root(repo).ok_or_else(|| GitError {
            args: "rev-parse --show-toplevel".into(),
            message: format!("{} is not in a git repository", repo.display()),
        })?;
        let base_ref = base.unwrap_or("HEAD");
        let base_sha = git(
            &root,
            ["rev-parse", "--verify", &format!("{base_ref}^{{commit}}")],
        )
        .map_err(|e| GitError {
            args: e.args,
            message: format!("the base `{base_ref}` is not a commit: {}", e.message),
        })?;
        let dir = root.join(".warden/worktrees");
        // Made without following a link (and with `.warden/.gitignore`).
        let held = crate::held_dir::HeldDir::open_or_create(&dir).map_err(|e| GitError {
            args: "worktree add".into(),
            message: format!("could not create {}: {e}", dir.display()),
        })?;
        // One `git worktree add` at a time: git reads the other worktrees'
        // half-written entries and fails ("failed to read …/commondir").
        let _one_at_a_time = held.lock().map_err(|e| GitError {
            args: "worktree add".into(),
            message: format!("could not lock {}: {e}", dir.display()),
        })?;
        let path = dir.join(dir_name(branch));
        git(
            &root,
            [
                OsStr::new("-c"),
                OsStr::new("branch.autoSetupMerge=false"),
                OsStr::new("worktree"),
                OsStr::new("add"),
                OsStr::new("-b"),
                OsStr::new(branch),
                path.as_os_str(),
                OsStr::new(&base_sha),
            ],
        )?;
        Ok(Self {
            path,
            branch: branch.to_string(),
            base: Some(base_sha),
        })
    }

    /// Removes the worktree if it is clean (its branch stays, with its
    /// commits; a branch with no new commit is deleted too). Returns
    /// whether it was removed; a dirty worktree is always kept.
    pub fn finish(&self, keep: bool) -> bool {
        if keep || is_dirty(&self.path) {
            return false;
        }
        let made_commits =
            commits_since(&self.path, self.base.as_deref()).is_ok_and(|c| !c.is_empty());
        let removed = git(
            &self.path,
            [
                OsStr::new("worktree"),
                OsStr::new("remove"),
                self.path.as_os_str(),
            ],
        )
        .is_ok();
        if removed && !made_commits {
            let root = self
                .path
                .parent()
                .and_then(Path::parent)
                .and_then(Path::parent);
            if let Some(root) = root {
                let _ = git(root, ["branch", "-D", &self.branch]);
            }
        }
        removed
    }
}
