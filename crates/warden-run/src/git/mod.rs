//! The run's git side: the base commit, worktrees, and the commits an
//! agent made. warden shells out to the user's own `git`, so repository
//! layouts read as they do for the agent; but never runs a program the
//! repository's configuration names (hooks, filters, ...: see the
//! private `inert` module), since the agent may have written that configuration.

mod command;
mod inert;
mod merge;
mod own_repository;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::{defaults, regular_file};

// Declared with the reports that list them, below every run.
pub use crate::report::Commit;
pub(crate) use crate::report::required_commits;
use command::git_with;
pub use command::{GitError, git, git_within};
pub use merge::{MergeError, Merged, merge};

/// The top of the repository `dir` is in, if it is in one.
pub async fn repo_root(dir: &Path) -> Option<PathBuf> {
    check_repo_files(dir).ok()?;
    if outside_any_repo(dir) {
        return None;
    }
    git(dir, ["rev-parse", "--show-toplevel"])
        .await
        .ok()
        .map(PathBuf::from)
}

/// The commit HEAD points at (`None` in a repository with no commit yet,
/// or one whose HEAD cannot be read).
pub async fn head(dir: &Path) -> Option<String> {
    head_checked(dir).await.ok().flatten()
}

/// The commit HEAD points at: `None` outside a repository and in one with
/// no commit yet; an error when git could not say (it failed, or was
/// killed at its time limit), which is not the same as no commit.
pub async fn head_checked(dir: &Path) -> Result<Option<String>, GitError> {
    check_repo_files(dir)?;
    if outside_any_repo(dir) {
        return Ok(None);
    }
    if let Some(sha) = head_from_files(dir) {
        return Ok(Some(sha));
    }
    // `--verify --quiet` fails with no message for an unborn branch; any
    // other failure says something.
    match git(dir, ["rev-parse", "--verify", "--quiet", "HEAD"]).await {
        Ok(s) => Ok(Some(s).filter(|s| !s.is_empty())),
        Err(e) if e.message.is_empty() => Ok(None),
        Err(e) => Err(e),
    }
}

/// The commit HEAD points at, read from the repository's files with no
/// git process (every run asks at its start and at its end), in the one
/// layout where that is what git itself would answer: no `GIT_*`
/// variable steers git elsewhere, everything git would check for
/// ownership belongs to this user (otherwise `safe.directory` decides,
/// which only git reads), and HEAD is a commit id or names a branch whose
/// loose or packed ref is a commit id. Anything else (`None`) is left to
/// git. Only regular files are read: a planted FIFO never blocks this.
fn head_from_files(dir: &Path) -> Option<String> {
    if std::env::vars_os().any(|(k, _)| steers_git(k.as_encoded_bytes())) {
        return None;
    }
    let dot_git = dir
        .ancestors()
        .map(|d| d.join(".git"))
        .find(|p| p.exists())?;
    let git_dir = git_dir(dir)?;
    let common = match regular_file::read_text(&git_dir.join("commondir"), HEAD_FILE_LIMIT) {
        Ok(c) => git_dir.join(c.trim()),
        Err(e) if e.is_not_found() => git_dir.clone(),
        Err(_) => return None,
    };
    let me = rustix::process::geteuid().as_raw();
    let owned = |p: &Path| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(p).is_ok_and(|m| m.uid() == me)
    };
    if ![dot_git.parent()?, &dot_git, &git_dir, &common]
        .into_iter()
        .all(owned)
    {
        return None;
    }
    let head = regular_file::read_text(&git_dir.join("HEAD"), HEAD_FILE_LIMIT).ok()?;
    let head = head.strip_suffix('\n').unwrap_or(&head);
    let Some(name) = head.strip_prefix("ref: ") else {
        return is_object_id(head).then(|| head.to_string());
    };
    // Only a plain branch name: anything that could climb out of the
    // refs directory or that git spells differently is left to git.
    let branch = name.strip_prefix("refs/heads/")?;
    if branch.is_empty()
        || branch
            .split('/')
            .any(|c| c.is_empty() || c.starts_with('.') || c.ends_with(".lock"))
        || !branch
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./+@".contains(&b))
    {
        return None;
    }
    match regular_file::read_text(&common.join(name), HEAD_FILE_LIMIT) {
        Ok(loose) => {
            let loose = loose.strip_suffix('\n').unwrap_or(&loose);
            return is_object_id(loose).then(|| loose.to_string());
        }
        Err(e) if e.is_not_found() => {}
        Err(_) => return None,
    }
    let packed = regular_file::read_text(&common.join("packed-refs"), PACKED_REFS_LIMIT).ok()?;
    packed.lines().find_map(|line| {
        let (sha, refname) = line.split_once(' ')?;
        (refname == name && is_object_id(sha)).then(|| sha.to_string())
    })
}

/// Whether git would surely find no repository for `dir`: no `.git`
/// above it, no directory above it that is itself a git directory (a bare
/// repository: `HEAD`, `objects`, `refs`), and no variable that points
/// git at one (`GIT_DIR`, ...). Then no git is started: a batch outside a
/// repository would otherwise start several per run, for nothing. Only
/// `stat`s, which never block.
fn outside_any_repo(dir: &Path) -> bool {
    let looks_like_git_dir =
        |d: &Path| d.join("HEAD").exists() && d.join("objects").exists() && d.join("refs").exists();
    !in_work_tree(dir)
        && !dir.ancestors().any(looks_like_git_dir)
        && !std::env::vars_os().any(|(k, _)| steers_git(k.as_encoded_bytes()))
}

/// Whether an environment variable could make git read another
/// repository, other refs or other config than the files do: every
/// `GIT_*` but those known to be about identities, editors, transports
/// and prompts.
fn steers_git(name: &[u8]) -> bool {
    const HARMLESS: &[&[u8]] = &[
        b"GIT_SSL_",
        b"GIT_SSH",
        b"GIT_HTTP_",
        b"GIT_PROXY_",
        b"GIT_ASKPASS",
        b"GIT_AUTHOR_",
        b"GIT_COMMITTER_",
        b"GIT_EDITOR",
        b"GIT_SEQUENCE_EDITOR",
        b"GIT_PAGER",
        b"GIT_TERMINAL_PROMPT",
    ];
    name.starts_with(b"GIT_") && !HARMLESS.iter().any(|p| name.starts_with(p))
}

/// A full SHA-1 or SHA-256 object id in lower-case hex, as git writes it.
fn is_object_id(s: &str) -> bool {
    matches!(s.len(), 40 | 64) && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The most of `packed-refs` that is read for HEAD's branch; a larger one
/// is left to git.
const PACKED_REFS_LIMIT: u64 = 4 * 1024 * 1024;

/// The current branch, if HEAD is on one. Read from the HEAD file (no git
/// process: it is asked at the end of every run), with git as the fallback.
pub async fn branch(dir: &Path) -> Option<String> {
    check_repo_files(dir).ok()?;
    if outside_any_repo(dir) {
        return None;
    }
    if let Some(git_dir) = git_dir(dir) {
        return match regular_file::read_text(&git_dir.join("HEAD"), HEAD_FILE_LIMIT) {
            Ok(head) => head
                .trim()
                .strip_prefix("ref: refs/heads/")
                .map(str::to_string),
            // A HEAD that is not a regular file: git would block on it.
            Err(e) if !e.is_not_found() => None,
            Err(_) => git(dir, ["symbolic-ref", "--quiet", "--short", "HEAD"])
                .await
                .ok(),
        };
    }
    git(dir, ["symbolic-ref", "--quiet", "--short", "HEAD"])
        .await
        .ok()
}

/// The most of `.git/HEAD` or a `.git` file that is read: both hold one
/// short line.
const HEAD_FILE_LIMIT: u64 = 64 * 1024;

/// Whether `dir` is inside a git work tree, found by looking for `.git`
/// upwards (no git process: every run asks; a `stat` never blocks).
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
    let text = regular_file::read_text(&dot_git, HEAD_FILE_LIMIT).ok()?;
    let target = PathBuf::from(text.trim().strip_prefix("gitdir:")?.trim());
    Some(if target.is_absolute() {
        target
    } else {
        dot_git.parent()?.join(target)
    })
}

/// Refuses a repository whose first files git reads are not regular files
/// (the agent can plant a FIFO at `.git/HEAD`): git would block on them
/// until it is killed, so say why at once instead. Only a `stat`, which
/// never blocks; anything deeper is bounded by git's time limit.
pub fn check_repo_files(dir: &Path) -> Result<(), GitError> {
    let Some(git_dir) = git_dir(dir) else {
        if let Some(dot_git) = dir.ancestors().map(|d| d.join(".git")).find(|p| p.exists())
            && let Some(kind) = regular_file::not_regular(&dot_git).filter(|_| !dot_git.is_dir())
        {
            return Err(GitError {
                args: "rev-parse".into(),
                message: format!(
                    "{} is {kind}, not a regular file or a directory",
                    dot_git.display()
                ),
            });
        }
        return Ok(());
    };
    let common = regular_file::read_text(&git_dir.join("commondir"), HEAD_FILE_LIMIT)
        .ok()
        .map(|c| git_dir.join(c.trim()));
    let mut files = vec![git_dir.join("HEAD"), git_dir.join("index")];
    let common_dir = common.unwrap_or_else(|| git_dir.clone());
    files.push(common_dir.join("config"));
    // The loose ref of HEAD's branch, if HEAD names one: git opens it
    // for every question about HEAD.
    if let Ok(head) = regular_file::read_text(&git_dir.join("HEAD"), HEAD_FILE_LIMIT)
        && let Some(name) = head.trim().strip_prefix("ref: ")
        && name.starts_with("refs/")
        && !name.split('/').any(|c| c == "..")
    {
        files.push(common_dir.join(name));
    }
    for file in files {
        if let Some(kind) = regular_file::not_regular(&file) {
            return Err(GitError {
                args: "rev-parse".into(),
                message: format!(
                    "{} is {kind}, not a regular file: git would block on it",
                    file.display()
                ),
            });
        }
    }
    Ok(())
}

/// Whether the work tree has changes not committed (untracked files too).
pub async fn is_dirty(dir: &Path) -> bool {
    status(dir).await.is_ok_and(|s| !s.is_empty())
}

/// The commit a check that just passed in `dir` ran on: HEAD, when the
/// files are exactly HEAD's (no change, no untracked file, and no entry
/// of the index told to hide changes: `skip-worktree`,
/// `assume-unchanged`); else why not. Files git ignores are not looked
/// at.
pub async fn checked_commit(dir: &Path) -> Result<String, String> {
    let unsure = |e: GitError| format!("git could not say what the check ran on: {e}");
    let head = head_checked(dir)
        .await
        .map_err(unsure)?
        .ok_or("the check ran where there is no commit")?;
    let changes = status(dir).await.map_err(unsure)?;
    if let Some(first) = changes.lines().next() {
        return Err(format!(
            "the check passed on changes that were never committed ({})",
            first.trim()
        ));
    }
    // `H` tags a plain entry; `S` one whose changes are hidden
    // (skip-worktree), a lower-case tag one assumed unchanged.
    let index = git(dir, ["ls-files", "-v", "-z"]).await.map_err(unsure)?;
    if let Some(hidden) = index
        .split('\0')
        .find(|e| e.len() > 2 && !e.starts_with("H "))
    {
        return Err(format!(
            "the check passed on files whose changes the index hides ({}), so what it ran on may be no commit",
            &hidden[2..]
        ));
    }
    Ok(head)
}

/// `git status --porcelain`, refused at once where git would block.
async fn status(dir: &Path) -> Result<String, GitError> {
    check_repo_files(dir)?;
    // Submodules are other repositories, whose configuration warden did
    // not read: not entered (a worktree with one is never removed: `git
    // worktree remove` refuses it).
    git(dir, ["status", "--porcelain", "--ignore-submodules=all"]).await
}

/// Commits reachable from HEAD and not from `base` (all of HEAD's
/// history when there was no base commit), oldest first.
pub async fn commits_since(dir: &Path, base: Option<&str>) -> Result<Vec<Commit>, GitError> {
    check_repo_files(dir)?;
    if outside_any_repo(dir) {
        return Ok(Vec::new());
    }
    let Some(head) = head_checked(dir).await? else {
        return Ok(Vec::new());
    };
    // HEAD still at the base: `base..HEAD` is empty, no need to ask git.
    if base == Some(head.as_str()) {
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
            // A signature check runs the program the repository's config
            // names (`gpg.program`), which the agent may have set.
            "--no-show-signature",
            // Nothing of a diff driver either (`--name-only` needs none).
            "--no-ext-diff",
            "--no-textconv",
            "--format=%x1e%H%x1f%s%x1f%an <%ae>",
            "--name-only",
            range.as_str(),
        ],
    )
    .await?;
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

pub(crate) use own_repository::has_submodules;
pub use own_repository::objects_dir;

/// How many commits were made, as warden shows it: `?` when they are
/// unknown (git could not say).
pub fn count_shown(commits: Option<&[Commit]>) -> String {
    commits.map_or_else(|| "?".into(), |c| c.len().to_string())
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

/// The file in `.warden/worktrees/` that names the session directory of
/// the worktree `name` (a dot file: gc takes no dot name for a worktree).
pub(crate) fn owner_file(name: &str) -> String {
    format!(".{name}.session.json")
}

/// A worktree warden made for a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Worktree {
    pub path: PathBuf,
    pub branch: String,
    /// The commit it started from.
    pub base: Option<String>,
    /// The user's repository, when this is a repository of the session's
    /// own (a sandboxed session; see the private `own_repository` module) rather than a
    /// worktree of it.
    #[serde(skip)]
    pub home: Option<PathBuf>,
}

impl Worktree {
    /// Creates `branch` from `base` (a ref; HEAD if `None`) in a new
    /// worktree under `<repo>/.warden/worktrees/`. Fails if the branch
    /// exists: two sessions never share a branch.
    ///
    /// Also returns the worktree's lock (`flock` on its directory), for the
    /// session to hold for its lifetime. It is taken while the
    /// `.warden/worktrees` lock is still held, which `warden gc` holds for
    /// its whole worktree pass: gc never sees the new worktree unlocked
    /// (no `session.json` names it until the session ends).
    ///
    /// `owner`: the session directory, written next to the worktree (in
    /// `.warden/worktrees/.<name>.session.json`) so gc finds the session that names it wherever
    /// that session lives (a batch started in a subdirectory keeps it
    /// under `<subdirectory>/.warden/batches`, which a gc run from the top
    /// of the repository does not look in).
    ///
    /// `own`: a repository of the session's own instead of a worktree
    /// (for a sandboxed agent: see the private `own_repository` module); `branch` is made
    /// at the base in the user's repository too, and gets the session's
    /// commits at the end ([`Worktree::finish`]).
    pub async fn create(
        repo: &Path,
        branch: &str,
        base: Option<&str>,
        owner: Option<&Path>,
        own: bool,
    ) -> Result<(Self, std::os::fd::OwnedFd), GitError> {
        check_repo_files(repo)?;
        let root = repo_root(repo).await.ok_or_else(|| GitError {
            args: "rev-parse --show-toplevel".into(),
            message: format!("{} is not in a git repository", repo.display()),
        })?;
        let base_ref = base.unwrap_or("HEAD");
        let base_sha = git(
            &root,
            ["rev-parse", "--verify", &format!("{base_ref}^{{commit}}")],
        )
        .await
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
        let _one_at_a_time = held.lock().await.map_err(|e| GitError {
            args: "worktree add".into(),
            message: format!("could not lock {}: {e}", dir.display()),
        })?;
        let path = dir.join(dir_name(branch));
        if own {
            // The branch first: a name another session holds is refused
            // before anything is made.
            git(&root, ["branch", "--no-track", branch, &base_sha]).await?;
            if let Err(e) = own_repository::create(&root, &path, branch, &base_sha).await {
                let _ = crate::remove::remove_tree(&path);
                let _ = git(&root, ["branch", "-D", branch]).await;
                return Err(e);
            }
        } else {
            git_within(
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
                defaults::GIT_WORKTREE_TIMEOUT,
            )
            .await?;
        }
        let locked = crate::held_dir::try_lock_at(held.fd(), OsStr::new(&dir_name(branch)));
        let lock = match locked {
            Ok(Some(lock)) => lock,
            Ok(None) => {
                return Err(GitError {
                    args: "worktree add".into(),
                    message: format!(
                        "{}: another process holds its lock right after it was made",
                        path.display()
                    ),
                });
            }
            Err(e) => {
                return Err(GitError {
                    args: "worktree add".into(),
                    message: format!("could not lock {}: {e}", path.display()),
                });
            }
        };
        if let Some(owner) = owner {
            // Best effort: without it gc still finds the sessions of the
            // directories it looks in.
            let text = serde_json::json!({ "session_dir": owner }).to_string();
            let _ = held.write_atomic(&owner_file(&dir_name(branch)), text.as_bytes());
        }
        Ok((
            Self {
                path,
                branch: branch.to_string(),
                base: Some(base_sha),
                home: own.then_some(root),
            },
            lock,
        ))
    }

    /// For a repository of the session's own, fetches its branch into the
    /// user's repository (an error says why the commits stayed behind).
    /// Nothing to do for a worktree, whose branch is the user's already.
    pub async fn bring_home(&self) -> Result<(), GitError> {
        match &self.home {
            Some(root) => own_repository::bring_home(root, &self.path, &self.branch).await,
            None => Ok(()),
        }
    }

    /// Removes the worktree if it is clean (its branch stays, with its
    /// commits; a branch with no new commit is deleted too). Returns
    /// whether it was removed; a dirty worktree is always kept, and so is
    /// an own repository whose commits are not home (`brought_home`).
    pub async fn finish(&self, keep: bool, brought_home: bool) -> bool {
        // An own repository's submodules have their commits nowhere else.
        if keep || (self.home.is_some() && (!brought_home || has_submodules(&self.path))) {
            return false;
        }
        // Removed only when known to be clean: a git that fails or is
        // killed keeps the worktree.
        match status(&self.path).await {
            Ok(s) if s.is_empty() => {}
            _ => return false,
        }
        let made_commits = match &self.home {
            Some(root) => own_repository::tip(root, &self.branch)
                .await
                .is_ok_and(|tip| tip.is_some() && tip != self.base),
            None => commits_since(&self.path, self.base.as_deref())
                .await
                .is_ok_and(|c| !c.is_empty()),
        };
        let removed = match &self.home {
            // A plain directory to git: removed without following a link.
            Some(_) => crate::remove::remove_tree(&self.path).is_ok(),
            None => git_within(
                &self.path,
                [
                    OsStr::new("worktree"),
                    OsStr::new("remove"),
                    self.path.as_os_str(),
                ],
                defaults::GIT_WORKTREE_TIMEOUT,
            )
            .await
            .is_ok(),
        };
        if removed
            && let (Some(parent), Some(name)) = (self.path.parent(), self.path.file_name())
            && let Ok(Some(dir)) = crate::held_dir::HeldDir::open_existing(parent)
        {
            // Its owner file has nothing left to name.
            let _ = rustix::fs::unlinkat(
                dir.fd(),
                owner_file(&name.to_string_lossy()).as_str(),
                rustix::fs::AtFlags::empty(),
            );
        }
        if removed && !made_commits {
            let root = self
                .path
                .parent()
                .and_then(Path::parent)
                .and_then(Path::parent);
            if let Some(root) = root {
                let _ = git(root, ["branch", "-D", &self.branch]).await;
            }
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::Worktree;
    use std::ffi::OsStr;

    fn run(dir: &std::path::Path, args: &[&str]) {
        let st = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .status()
            .unwrap();
        assert!(st.success(), "git {args:?}");
    }

    /// The sessions of a batch make their worktrees at once, on one
    /// thread: each waits its turn for `.warden/worktrees` without
    /// holding the thread the others need to finish theirs.
    #[tokio::test]
    async fn worktrees_made_at_once_on_one_thread_all_get_made() {
        // A wait that blocked the thread would never end: fail instead.
        let (done, finished) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            if finished
                .recv_timeout(std::time::Duration::from_secs(120))
                .is_err()
            {
                eprintln!("worktrees made at once on one thread deadlocked");
                std::process::abort();
            }
        });
        let t = tempfile::tempdir().unwrap();
        run(t.path(), &["init", "-q"]);
        run(t.path(), &["commit", "-q", "--allow-empty", "-m", "one"]);
        let make = |n: u32| {
            let repo = t.path().to_path_buf();
            async move { Worktree::create(&repo, &format!("warden/t/{n}"), None, None, false).await }
        };
        let (a, b, c) = tokio::join!(make(1), make(2), make(3));
        let _ = done.send(());
        for made in [a, b, c] {
            let (wt, _lock) = made.unwrap();
            assert!(wt.path.join(".git").exists(), "{}", wt.path.display());
        }
    }

    #[tokio::test]
    async fn a_new_worktree_is_locked_before_create_returns() {
        let t = tempfile::tempdir().unwrap();
        run(t.path(), &["init", "-q"]);
        run(t.path(), &["commit", "-q", "--allow-empty", "-m", "one"]);
        let (wt, lock) = Worktree::create(t.path(), "warden/t/x", None, None, false)
            .await
            .unwrap();
        // What gc does: try the worktree's lock. It is taken.
        let root = crate::held_dir::HeldDir::open_existing(wt.path.parent().unwrap())
            .unwrap()
            .unwrap();
        let name = wt.path.file_name().unwrap();
        assert!(
            crate::held_dir::try_lock_at(root.fd(), name)
                .unwrap()
                .is_none(),
            "gc could take a worktree its session had not locked yet"
        );
        drop(lock);
        assert!(
            crate::held_dir::try_lock_at(root.fd(), OsStr::new(name))
                .unwrap()
                .is_some()
        );
    }
}
