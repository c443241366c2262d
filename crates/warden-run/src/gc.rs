//! Retention: `warden gc` removes old run, session and batch directories
//! and the worktrees of sessions that are gone, never one in use.
//!
//! What is in use: a run, session or batch in progress holds an exclusive
//! `flock` on its directory for its whole lifetime (a session also on its
//! worktree), which the kernel releases if its warden dies. gc takes that
//! lock without waiting before it removes anything, and keeps what it
//! cannot lock. A run whose `run.json` has no verdict yet and whose agent
//! (`pid`) is still alive here is kept too, lock or not (a run started by
//! a warden from before the lock).
//!
//! The directories are in the agent's work tree, so the agent may have
//! planted symbolic links anywhere in them. Nothing here follows one:
//! each directory is opened from `/` component by component with
//! `O_NOFOLLOW` (a link on the way is refused), each entry is looked at
//! with `lstat` semantics, every directory below is opened `O_NOFOLLOW`
//! relative to its parent's handle, and every entry is removed with
//! `unlinkat` relative to that handle. A link is removed as a link; what
//! it points to is never touched.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, openat, statat, unlinkat};
use serde::Serialize;

use crate::git::has_submodules;
use crate::held_dir::{DirError, HeldDir, try_lock_at};
use crate::remove::{list, remove_at, remove_tree};

/// What to keep. A directory goes when it is not among the newest
/// `keep_runs` of its kind, or when it is older than `keep_days`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcOptions {
    /// Keep this many of the newest directories of each kind (runs,
    /// sessions, batches).
    pub keep_runs: Option<u64>,
    /// Remove directories last changed more than this many days ago.
    pub keep_days: Option<u64>,
    /// List what would go and why; touch nothing.
    pub dry_run: bool,
    /// Directories never removed whatever the rules say: the run or
    /// session the gc after `warden run` is called for (with `keep_runs =
    /// 0` it would otherwise delete the run that just ended).
    pub spare: Vec<PathBuf>,
}

/// What a directory gc looked at is.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ItemKind {
    Run,
    Session,
    Batch,
    Worktree,
}

impl ItemKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ItemKind::Run => "run",
            ItemKind::Session => "session",
            ItemKind::Batch => "batch",
            ItemKind::Worktree => "worktree",
        }
    }
}

/// What gc did with it.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Removed,
    /// `--dry-run`: it would have been removed.
    WouldRemove,
    /// Old enough to go, but kept (in use, uncommitted changes, ...).
    Kept,
    /// Its removal failed part way; `why` says how.
    Failed,
}

/// One directory gc decided about (directories it keeps because they are
/// new enough are not listed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Item {
    pub kind: ItemKind,
    pub path: PathBuf,
    pub action: Action,
    pub why: String,
}

/// Everything gc decided: `warden gc --json` (`schemas/gc.schema.json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct GcReport {
    pub schema_version: warden_events::SchemaVersion,
    pub items: Vec<Item>,
}

#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum GcError {
    #[error(
        "nothing says what to keep: give --keep-runs N or --keep-days D (or keep_runs / keep_days in warden.toml)"
    )]
    NoRule,
    #[error(transparent)]
    Dir(#[from] DirError),
}

/// The directories of each kind, relative to a project directory.
const KINDS: [(ItemKind, &str, &str); 3] = [
    (ItemKind::Run, ".warden/runs", "run.json"),
    (ItemKind::Session, ".warden/sessions", "session.json"),
    (ItemKind::Batch, ".warden/batches", "batch.json"),
];

/// Applies `options` to the `.warden` directories of each of `projects`
/// (a working directory, the top of its repository), as of `now`.
///
/// Only a missing rule is an error: a directory gc cannot open (a link an
/// agent planted, say) is a `Failed` item and gc goes on with the rest,
/// so one bad directory can neither stop retention nor hide what was
/// already removed.
pub async fn collect(
    projects: &[PathBuf],
    options: &GcOptions,
    now: SystemTime,
) -> Result<GcReport, GcError> {
    if options.keep_runs.is_none() && options.keep_days.is_none() {
        return Err(GcError::NoRule);
    }
    let mut seen: Vec<PathBuf> = Vec::new();
    for project in projects {
        if !seen.contains(project) {
            seen.push(project.clone());
        }
    }
    // The walks and deletes block (a big tree on a slow disk): off the
    // runtime's threads, which drive the clocks of runs still going.
    let mut report = {
        let (seen, options) = (seen.clone(), options.clone());
        match tokio::task::spawn_blocking(move || collect_dirs(&seen, &options, now)).await {
            Ok(report) => report,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    };
    // Which worktrees are still named, from the sessions of every project
    // at once: a batch started in a subdirectory keeps its sessions under
    // `<subdirectory>/.warden/batches` but their worktrees under the
    // repository's top, another project of this same gc.
    let named: Vec<PathBuf> = seen
        .iter()
        .flat_map(|p| worktrees_named(p, &report, options.dry_run))
        .collect();
    for project in &seen {
        collect_worktrees(project, options, &named, &mut report).await;
    }
    Ok(report)
}

/// The run, session and batch directories of every project.
fn collect_dirs(projects: &[PathBuf], options: &GcOptions, now: SystemTime) -> GcReport {
    let mut report = GcReport::default();

    for project in projects {
        for (kind, sub, file) in KINDS {
            let root = project.join(sub);
            let dir = match HeldDir::open_existing(&root) {
                Ok(Some(dir)) => dir,
                Ok(None) => continue,
                Err(e) => {
                    report.items.push(Item {
                        kind,
                        path: root,
                        action: Action::Failed,
                        why: format!("could not open it: {}", dir_error_text(&e)),
                    });
                    continue;
                }
            };
            report
                .items
                .extend(collect_kind(&dir, kind, file, options, now));
        }
    }
    report
}

/// A [`DirError`] as a gc item says it: the generic text speaks of "a
/// directory it writes in", which gc does not.
fn dir_error_text(e: &DirError) -> String {
    match e {
        DirError::Symlink { path } => format!(
            "{} is a symbolic link, which gc never follows (an agent could have planted it); remove the link yourself",
            path.display()
        ),
        other => other.to_string(),
    }
}

/// Whether an I/O error says the entry is not there (any more): another
/// gc (or the user) removed it meanwhile, which is what gc wanted.
fn is_gone(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::NotFound
}

/// One directory entry of a kind's root.
struct Entry {
    name: OsString,
    mtime: SystemTime,
}

fn collect_kind(
    root: &HeldDir,
    kind: ItemKind,
    file: &str,
    options: &GcOptions,
    now: SystemTime,
) -> Vec<Item> {
    let mut entries = match list_dirs(root.fd()) {
        Ok(e) => e,
        Err(e) => {
            return vec![Item {
                kind,
                path: root.path().to_path_buf(),
                action: Action::Failed,
                why: format!("could not list it: {e}"),
            }];
        }
    };
    // Newest first.
    entries.sort_by_key(|e| std::cmp::Reverse(e.mtime));
    let max_age = options
        .keep_days
        .map(|d| Duration::from_secs(d.saturating_mul(86_400)));
    let mut items = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let age = now.duration_since(e.mtime).unwrap_or_default();
        let why = match (options.keep_runs, max_age) {
            (Some(n), _) if i as u64 >= n => format!(
                "not among the newest {n} {}{}",
                kind.as_str(),
                if kind == ItemKind::Batch { "es" } else { "s" }
            ),
            (_, Some(max)) if age > max => format!(
                "last changed {} day(s) ago, more than keep_days {}",
                age.as_secs() / 86_400,
                options.keep_days.unwrap_or_default()
            ),
            _ => continue,
        };
        let path = root.path().join(&e.name);
        if options.spare.contains(&path) {
            continue;
        }
        let item = |action, why: String| Item {
            kind,
            path: path.clone(),
            action,
            why,
        };
        let lock = match try_lock_at(root.fd(), &e.name) {
            Ok(Some(lock)) => lock,
            Ok(None) => {
                items.push(item(Action::Kept, "in use: its warden is running".into()));
                continue;
            }
            Err(err) if is_gone(&err) => continue,
            Err(err) => {
                items.push(item(Action::Failed, format!("could not open it: {err}")));
                continue;
            }
        };
        if kind == ItemKind::Run
            && let Some(pid) = live_unfinished_run(&lock, file)
        {
            items.push(item(
                Action::Kept,
                format!("in use: no verdict yet and its agent (pid {pid}) is alive"),
            ));
            continue;
        }
        if options.dry_run {
            items.push(item(Action::WouldRemove, why));
            continue;
        }
        // A batch's key goes with its directory: the one its plan names,
        // only if that is the directory's own name (as a batch under
        // `.warden/batches/` is named), so no plan can point gc at another
        // batch's key.
        let key = (kind == ItemKind::Batch)
            .then(|| read_json_at(&lock, crate::batch_plan::PLAN_FILE))
            .flatten()
            .and_then(|plan| plan.get("batch_id")?.as_str().map(str::to_string))
            .filter(|id| e.name.to_str() == Some(id.as_str()))
            .and_then(|id| crate::batch_key::key_path(&id).ok());
        // The lock is held while the directory goes, so nothing can take
        // it meanwhile.
        match remove_at(root.fd(), &e.name, 0) {
            Ok(()) => {
                if let Some(key) = key {
                    let _ = std::fs::remove_file(key);
                }
                items.push(item(Action::Removed, why));
            }
            // Another gc took it first (it had the lock before this one).
            Err(err) if is_gone(&err) => {}
            Err(err) => items.push(item(
                Action::Failed,
                format!("{why}; removing it failed: {err}"),
            )),
        }
        drop(lock);
    }
    items
}

/// The pid of a run whose report has no verdict yet and whose agent is
/// still alive on this machine.
fn live_unfinished_run(dir: &OwnedFd, file: &str) -> Option<i32> {
    let report = read_json_at(dir, file)?;
    if !report
        .get("verdict")
        .is_some_and(serde_json::Value::is_null)
    {
        return None;
    }
    let pid = i32::try_from(report.get("pid")?.as_i64()?).ok()?;
    // EPERM: it exists, as another user's process.
    let alive = rustix::process::Pid::from_raw(pid).is_some_and(|p| {
        matches!(
            rustix::process::test_kill_process(p),
            Ok(()) | Err(rustix::io::Errno::PERM)
        )
    });
    alive.then_some(pid)
}

/// The JSON file `name` in `dir`, if it is a regular file (not a link)
/// of a report's size that parses.
fn read_json_at(dir: &OwnedFd, name: &str) -> Option<serde_json::Value> {
    let fd = openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    // A report is small; anything else is not warden's.
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile || st.st_size > 16 << 20 {
        return None;
    }
    let mut text = Vec::new();
    std::io::Read::read_to_end(&mut std::fs::File::from(fd), &mut text).ok()?;
    serde_json::from_slice(&text).ok()
}

/// The directories in `dir` (not links, not files), with their times.
fn list_dirs(dir: &OwnedFd) -> std::io::Result<Vec<Entry>> {
    let mut out = Vec::new();
    for name in list(dir)? {
        // Warden's own temporary files start with a dot; no run does.
        if name.as_bytes().starts_with(b".") {
            continue;
        }
        let Ok(st) = statat(dir, &name, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            continue;
        }
        let mtime = SystemTime::UNIX_EPOCH
            + Duration::new(
                u64::try_from(st.st_mtime).unwrap_or(0),
                u32::try_from(st.st_mtime_nsec).unwrap_or(0),
            );
        out.push(Entry { name, mtime });
    }
    Ok(out)
}

/// The worktrees under `<project>/.warden/worktrees/` whose session is
/// gone: no session directory left names it, and no session holds it.
/// A clean one is removed with `git worktree remove` (its branch stays,
/// with its commits); one with uncommitted changes or ignored files is
/// kept. `named`: the worktrees the remaining sessions of every project
/// name.
///
/// No `git worktree prune`: it acts on the whole repository, and would
/// drop the user's own worktrees whose directory is gone for a while (on
/// a removable disk, say). `git worktree remove` drops git's entry for
/// each worktree gc removes.
async fn collect_worktrees(
    project: &Path,
    options: &GcOptions,
    named: &[PathBuf],
    report: &mut GcReport,
) {
    let root = project.join(".warden/worktrees");
    let Ok(Some(dir)) = HeldDir::open_existing(&root) else {
        return;
    };
    // The lock `Worktree::create` holds until the new worktree is locked
    // by its session: held for the whole pass, so no worktree is seen
    // between its `git worktree add` and its session's lock.
    let _no_worktree_added = match dir.try_lock() {
        Ok(Some(lock)) => lock,
        Ok(None) => {
            report.items.push(Item {
                kind: ItemKind::Worktree,
                path: root,
                action: Action::Kept,
                why: "a session is making a worktree here now; worktrees are left for the next gc"
                    .into(),
            });
            return;
        }
        Err(err) => {
            report.items.push(Item {
                kind: ItemKind::Worktree,
                path: root,
                action: Action::Failed,
                why: format!("could not lock it: {err}"),
            });
            return;
        }
    };
    let Ok(entries) = list_dirs(dir.fd()) else {
        return;
    };
    for e in entries {
        let path = root.join(&e.name);
        let owner = crate::git::owner_file(&e.name.to_string_lossy());
        if named.contains(&path) || owner_names(dir.fd(), &owner, &path, report, options.dry_run) {
            continue;
        }
        let item = |action, why: String| Item {
            kind: ItemKind::Worktree,
            path: path.clone(),
            action,
            why,
        };
        let lock = match try_lock_at(dir.fd(), &e.name) {
            Ok(Some(lock)) => lock,
            Ok(None) => {
                report
                    .items
                    .push(item(Action::Kept, "in use: its session is running".into()));
                continue;
            }
            Err(err) if is_gone(&err) => continue,
            Err(err) => {
                report
                    .items
                    .push(item(Action::Failed, format!("could not open it: {err}")));
                continue;
            }
        };
        let why = "no session left names it".to_string();
        let own = match removable(project, &lock, &path, &why).await {
            Ok(own) => own,
            Err(kept) => {
                report.items.push(item(Action::Kept, kept));
                continue;
            }
        };
        if options.dry_run {
            report.items.push(item(Action::WouldRemove, why));
            continue;
        }
        let removed = if own {
            // Not a worktree of the project: a directory, removed without
            // following a link.
            remove_tree(&path)
                .map(|()| String::new())
                .map_err(|e| e.to_string())
        } else {
            // From inside it: the configuration git reads there (a
            // `config.worktree` of its own too) is what gets overridden.
            git_out(&path, &["worktree", "remove", &path.to_string_lossy()]).await
        };
        if removed.is_ok() {
            let _ = unlinkat(dir.fd(), owner.as_str(), AtFlags::empty());
        }
        drop(lock);
        report.items.push(match removed {
            Ok(_) => item(
                Action::Removed,
                format!("{why}; clean (its branch keeps the commits)"),
            ),
            Err(err) if own => item(Action::Failed, format!("{why}; could not remove it: {err}")),
            Err(err) => item(
                Action::Failed,
                format!("{why}; git worktree remove failed: {err}"),
            ),
        });
    }
}

/// Whether the worktree at `path` (`dir` its open handle), which no
/// session names, may go: `Ok(own)`, `own` for a sandboxed session's own
/// repository; else why it stays, as the line of gc's report: it is no
/// worktree, it has work no commit keeps, or commits that are nowhere
/// else.
async fn removable(
    project: &Path,
    dir: impl rustix::fd::AsFd,
    path: &Path,
    why: &str,
) -> Result<bool, String> {
    // A worktree has a `.git` file; without one, git would answer for
    // the repository around it instead.
    // A sandboxed session's own repository has a `.git` directory.
    let dot_git = statat(dir, ".git", AtFlags::SYMLINK_NOFOLLOW)
        .map(|st| FileType::from_raw_mode(st.st_mode))
        .ok();
    let own = dot_git == Some(FileType::Directory);
    if !own && dot_git != Some(FileType::RegularFile) {
        return Err(format!(
            "{why}, but it is not a git worktree (no .git file); remove it yourself"
        ));
    }
    // `--ignored=matching`: `git worktree remove` deletes ignored
    // files too (a `.env`, data), which no commit keeps.
    match git_out(
        path,
        &[
            "status",
            "--porcelain",
            "--untracked-files=all",
            "--ignored=matching",
            // Another repository, whose configuration was not read.
            "--ignore-submodules=all",
        ],
    )
    .await
    {
        Ok(s) if s.trim().is_empty() => {}
        Ok(_) => {
            return Err(format!(
                "{why}, but it has uncommitted changes or ignored files: commit them or remove it yourself"
            ));
        }
        Err(err) => {
            return Err(format!(
                "{why}, but git cannot read it as a worktree ({err}); remove it yourself"
            ));
        }
    }
    if own && has_submodules(path) {
        return Err(format!(
            "{why}, but it holds submodules, whose commits live only there; remove it yourself"
        ));
    }
    if own && let Err(left) = branches_home(project, path).await {
        return Err(format!("{why}, but {left}"));
    }
    Ok(own)
}

/// Whether the session directory the worktree's owner file (written by
/// `Worktree::create`) records still names `path` in its `session.json`,
/// and stays. Wherever that session lives: a batch started in a
/// subdirectory is not under any project this gc looks in. A forged
/// owner file can only keep a worktree, never remove one.
fn owner_names(dir: &OwnedFd, owner: &str, path: &Path, report: &GcReport, dry_run: bool) -> bool {
    let Some(session) =
        read_json_at(dir, owner).and_then(|v| v.get("session_dir")?.as_str().map(PathBuf::from))
    else {
        return false;
    };
    let gone = report.items.iter().any(|i| {
        session.starts_with(&i.path)
            && matches!(
                (i.action, dry_run),
                (Action::Removed, _) | (Action::WouldRemove, true)
            )
    });
    !gone
        && HeldDir::open_existing(&session)
            .ok()
            .flatten()
            .and_then(|d| read_json_at(d.fd(), "session.json"))
            .and_then(|v| Some(PathBuf::from(v.get("worktree")?.get("path")?.as_str()?)))
            .is_some_and(|p| p == path)
}

/// The worktrees the session directories that stay name (in their
/// `session.json`): under `.warden/sessions/` and in batch directories.
fn worktrees_named(project: &Path, report: &GcReport, dry_run: bool) -> Vec<PathBuf> {
    let gone = |p: &Path| {
        report.items.iter().any(|i| {
            p.starts_with(&i.path)
                && matches!(
                    (i.action, dry_run),
                    (Action::Removed, _) | (Action::WouldRemove, true)
                )
        })
    };
    let mut sessions: Vec<PathBuf> = Vec::new();
    let mut under = |root: PathBuf, depth: usize| {
        let Ok(Some(dir)) = HeldDir::open_existing(&root) else {
            return;
        };
        let Ok(entries) = list_dirs(dir.fd()) else {
            return;
        };
        for e in entries {
            let p = root.join(&e.name);
            if depth == 0 {
                sessions.push(p);
            } else if let Ok(Some(batch)) = HeldDir::open_existing(&p)
                && let Ok(inner) = list_dirs(batch.fd())
            {
                sessions.extend(inner.into_iter().map(|i| p.join(i.name)));
            }
        }
    };
    under(project.join(".warden/sessions"), 0);
    under(project.join(".warden/batches"), 1);
    sessions
        .into_iter()
        .filter(|s| !gone(s))
        .filter_map(|s| {
            let dir = HeldDir::open_existing(&s).ok()??;
            let v = read_json_at(dir.fd(), "session.json")?;
            Some(PathBuf::from(v.get("worktree")?.get("path")?.as_str()?))
        })
        .collect()
}

/// That every branch of a session's own repository at `own` is in the
/// same branch of the project: else removing it would lose commits
/// (its session ended before it could fetch them, or the agent made
/// more). What is missing otherwise, as a sentence.
async fn branches_home(project: &Path, own: &Path) -> Result<(), String> {
    let listed = git_out(
        own,
        &[
            "for-each-ref",
            "--format=%(objectname) %(refname)",
            "refs/heads/",
        ],
    )
    .await
    .map_err(|e| format!("git cannot list its branches ({e}); remove it yourself"))?;
    for line in listed.lines() {
        let Some((tip, name)) = line.split_once(' ') else {
            continue;
        };
        let home = git_out(project, &["merge-base", "--is-ancestor", tip, name]).await;
        if home.is_err() {
            return Err(format!(
                // No command to paste: the branch's name is the agent's
                // text, and a plain fetch from its repository is what
                // warden would not do.
                "its branch {:?} has commits that are not in the repository's: look at them there (the repository is the agent's: its configuration and hooks may run programs in a git you start there), or remove it yourself",
                name.trim_start_matches("refs/heads/"),
            ));
        }
    }
    Ok(())
}

/// Runs git, bounded as every git warden runs (a repository the agent
/// damaged must not hang gc): its stdout, or what went wrong.
async fn git_out(dir: &Path, args: &[&str]) -> Result<String, String> {
    crate::git::git_within(dir, args, crate::defaults::GIT_WORKTREE_TIMEOUT)
        .await
        .map_err(|e| e.message)
}
