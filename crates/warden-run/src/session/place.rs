//! Where a session's runs work: its directory (held for its lifetime), the
//! worktree made for it if asked, the branch and commit it starts from;
//! and, at its end, the commits it made and what became of the worktree.

use std::os::fd::OwnedFd;
use std::path::PathBuf;

use super::control::SessionControl;
use super::report::{SessionReport, StopReason, WorktreeReport};
use crate::git::{self, Commit, GitError, Worktree};
use crate::held_dir::HeldDir;
use crate::held_dir::off_clock;
use crate::update::{Outbox, Update};
use crate::{RunRequest, SetupError};
use warden_events::Tokens;

/// Where a session works, held until it ends.
pub(super) struct Place {
    pub(super) session_dir: PathBuf,
    pub(super) held: HeldDir,
    pub(super) worktree: Option<Worktree>,
    /// Where the agent works: the worktree, else the request's directory.
    pub(super) workdir: PathBuf,
    /// What an own repository borrows, shown read-only to the agent (a
    /// container sees nothing of the host but what it is given).
    pub(super) borrowed: Option<PathBuf>,
    pub(super) branch: Option<String>,
    /// The commit the session starts from.
    pub(super) base: Option<String>,
    /// `--merge`: the branch checked out where the session started.
    merge_into: Option<String>,
    /// Held for the session's lifetime: `warden gc` never removes a
    /// directory (or a worktree) whose lock it cannot take.
    _session_in_use: OwnedFd,
    /// Held for the session's lifetime: `warden gc` leaves a locked
    /// worktree alone (no `session.json` names it until the end).
    _worktree_in_use: Option<OwnedFd>,
}

/// Whether the session's branch, in the user's repository, holds the
/// session's commits once [`Place::finish`] is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Home {
    Yes,
    /// A repository of the session's own could not be fetched from.
    No,
    /// A cancel stopped the git work of the end.
    Cancelled,
}

/// What git said at the end: the session's commits, the head, the
/// worktree's end, and why the commits did not reach the repository.
type Ending = (
    Result<Vec<Commit>, GitError>,
    Option<String>,
    Option<WorktreeReport>,
    Option<String>,
);

impl Place {
    /// Makes the session's directory and its worktree, if asked (saying so
    /// through `out`). Before anything else is made: a session directory
    /// that cannot be used (not empty, a planted link) leaves nothing
    /// behind.
    pub(super) async fn make(
        request: &RunRequest,
        name: &str,
        session_id: &str,
        out: &mut Outbox,
    ) -> Result<Place, SetupError> {
        // Before anything is made: a merge needs a branch to merge into.
        let merge_into = match request.session.merge {
            true => Some(git::branch(&request.cwd).await.ok_or_else(|| {
                SetupError::Request(crate::RequestError::Invalid(crate::Finding::new(
                    format!(
                        "{{0}} merges into the branch checked out in {}, and none is (HEAD is detached, or it is no repository): check out the branch to merge into",
                        request.cwd.display()
                    ),
                    &["session.merge"],
                )))
            })?),
            false => None,
        };
        // The top of the repository is asked for only when it names the
        // directory (a batch names every run's).
        let session_dir = match (request.dir.clone(), &request.project) {
            (Some(dir), _) => dir,
            (None, Some(project)) => project.join(".warden/sessions").join(session_id),
            (None, None) => git::repo_root(&request.cwd)
                .await
                .unwrap_or_else(|| request.cwd.clone())
                .join(".warden/sessions")
                .join(session_id),
        };
        // File system work (slow on a busy disk), kept off the thread that
        // drives the clocks of the runs already going.
        let held = off_clock(&session_dir, HeldDir::create_empty).await?;
        let session_in_use = held.claim().map_err(SetupError::RunDir)?;

        let entry = out.entry();
        let mut worktree_in_use = None;
        let worktree = match &request.session.worktree {
            Some(req) => {
                let branch = req.branch.clone().unwrap_or_else(|| {
                    format!(
                        "warden/{}/{}",
                        git::dir_name(name),
                        session_id.to_ascii_lowercase()
                    )
                });
                let (wt, lock) = Worktree::create(
                    &request.cwd,
                    &branch,
                    req.base.as_deref(),
                    Some(&session_dir),
                    request.sandbox.sandbox != crate::Sandbox::Host,
                )
                .await
                .map_err(|e| {
                    // Nothing was started: the (still empty) directory goes too.
                    let _ = std::fs::remove_dir(&session_dir);
                    SetupError::Git(e)
                })?;
                out.send(Update::Worktree {
                    entry,
                    worktree: wt.clone(),
                })
                .await;
                worktree_in_use = Some(lock);
                Some(wt)
            }
            None => None,
        };
        let workdir = worktree
            .as_ref()
            .map_or_else(|| request.cwd.clone(), |w| w.path.clone());
        let borrowed = match worktree.as_ref().and_then(|w| w.home.as_deref()) {
            Some(root) => git::objects_dir(root).await.ok(),
            None => None,
        };
        let branch = match &worktree {
            Some(w) => Some(w.branch.clone()),
            None => git::branch(&workdir).await,
        };
        let base = match worktree.as_ref().and_then(|w| w.base.clone()) {
            Some(b) => Some(b),
            None => git::head(&workdir).await,
        };
        Ok(Place {
            session_dir,
            held,
            worktree,
            workdir,
            borrowed,
            branch,
            base,
            merge_into,
            _session_in_use: session_in_use,
            _worktree_in_use: worktree_in_use,
        })
    }

    /// Puts `plan`'s run in this place: in the work directory, with what
    /// an own repository borrows shown read-only, and the session's
    /// directory (its report, every run's logs, maybe its worktree)
    /// hidden from a sandboxed agent wherever `--dir` put it: it is
    /// warden's.
    pub(super) fn fit(&self, plan: &mut crate::plan::RunPlan) {
        plan.cwd = self.workdir.clone();
        if let Some(objects) = &self.borrowed
            && !plan.sandbox.ro.contains(objects)
        {
            plan.sandbox.ro.push(objects.clone());
        }
        let record =
            std::path::absolute(&self.session_dir).unwrap_or_else(|_| self.session_dir.clone());
        if !plan.sandbox.records.contains(&record) {
            plan.sandbox.records.push(record);
        }
    }

    /// Puts the commits of the whole session, from where it started, and
    /// the worktree's end into `report`; whether the session's branch
    /// holds them now. Each git is bounded in time; a
    /// cancel from now on (a second Ctrl-C after a cancelled session, say)
    /// stops them at once, since dropping the work kills the git it waits
    /// for.
    pub(super) async fn finish(
        &self,
        request: &RunRequest,
        control: &SessionControl,
        report: &mut SessionReport,
    ) -> Home {
        let seen = control.cancels();
        let mut home = Home::Yes;
        let keep = request.session.worktree.as_ref().is_some_and(|w| w.keep);
        let mut end_error;
        tokio::select! {
            // Work that has finished wins over a cancel in the same instant.
            biased;
            (commits, head, worktree_report, not_home) = self.wrap_up(keep) => {
                if not_home.is_some() {
                    home = Home::No;
                }
                end_error = not_home;
                match commits {
                    Ok(c) if self.base.is_some() || head.is_some() => report.commits = Some(c),
                    Ok(_) => {}
                    Err(e) if git::in_work_tree(&self.workdir) => {
                        report.commits = None;
                        let e = format!("could not collect the session's commits: {e}");
                        end_error = Some(match end_error.take() {
                            Some(first) => format!("{first}; {e}"),
                            None => e,
                        });
                    }
                    Err(_) => {}
                }
                report.worktree = worktree_report;
            }
            () = control.cancelled_after(seen) => {
                home = Home::Cancelled;
                report.commits = None;
                end_error = Some(
                    "cancelled while git was reading the session's commits; the worktree, if any, is kept"
                        .into(),
                );
                report.worktree = self.worktree.as_ref().map(|wt| WorktreeReport {
                    path: wt.path.clone(),
                    branch: wt.branch.clone(),
                    base: wt.base.clone(),
                    removed: false,
                    dirty: false,
                    own_repository: wt.home.is_some(),
                });
            }
        }
        if let Some(e) = end_error {
            report.error = Some(match report.error.take() {
                Some(prev) => format!("{prev}; {e}"),
                None => e,
            });
        }
        home
    }

    /// `--merge`, after a session that succeeded (and once its branch is
    /// home): its branch merged into the branch checked out where it
    /// started; a conflict makes it `merge_conflict` and leaves both as
    /// they were. A cancel stops the git at once (nothing is moved
    /// until the merge is known to be clean).
    pub(super) async fn merge(
        &self,
        request: &RunRequest,
        control: &SessionControl,
        report: &mut SessionReport,
        home: Home,
        checked: Option<&Result<String, String>>,
    ) {
        let (Some(into), Some(wt)) = (&self.merge_into, &self.worktree) else {
            return;
        };
        // The branch in the user's repository does not hold the session's
        // commits (the agent's repository could not be fetched from, or
        // the git was cancelled): merging it would merge nothing, and
        // call that a success.
        match home {
            Home::Yes => {}
            Home::No => {
                report.verdict = Some(crate::Verdict::MergeConflict);
                report.note_error(format!(
                    "{} was not merged into {into}: the session's commits did not reach it; both are as they were",
                    wt.branch
                ));
                return;
            }
            Home::Cancelled => {
                report.verdict = Some(crate::Verdict::Cancelled);
                report.note_error(format!(
                    "cancelled before {} was merged into {into}; both are as they were",
                    wt.branch
                ));
                return;
            }
        }
        // With a check, only what it passed on is merged.
        let checked = match (&request.session.check, checked) {
            (None, _) => None,
            (Some(_), Some(Ok(commit))) => Some(commit.as_str()),
            (Some(_), Some(Err(why))) => {
                report.verdict = Some(crate::Verdict::MergeConflict);
                report.note_error(format!(
                    "{} was not merged into {into}: {why}; both are as they were",
                    wt.branch
                ));
                return;
            }
            (Some(_), None) => {
                report.verdict = Some(crate::Verdict::MergeConflict);
                report.note_error(format!(
                    "{} was not merged into {into}: no check passed on a commit of it; both are as they were",
                    wt.branch
                ));
                return;
            }
        };
        let repo = wt.home.clone().unwrap_or_else(|| request.cwd.clone());
        let message = format!(
            "Merge branch '{}' (warden session {})",
            wt.branch, report.session_id
        );
        let seen = control.cancels();
        let merged = tokio::select! {
            biased;
            m = git::merge(&repo, into, &wt.branch, &message, checked) => m,
            () = control.cancelled_after(seen) => {
                report.verdict = Some(crate::Verdict::Cancelled);
                report.note_error(format!("cancelled before {} was merged into {into}; both are as they were", wt.branch));
                return;
            }
        };
        match merged {
            Ok(m) => {
                report.merged_into = Some(into.clone());
                report.merge_commit = Some(m.commit);
            }
            Err(e) => {
                report.verdict = Some(crate::Verdict::MergeConflict);
                report.merge_conflicts = e.files().to_vec();
                report.note_error(format!("{e}; both branches are as they were"));
            }
        }
        if report.worktree.as_ref().is_some_and(|w| w.dirty) {
            report.note_error(format!(
                "the worktree {} had changes that were never committed: they are not in the merge",
                wt.path.display()
            ));
        }
    }

    /// The git work of the end: the session's commits, the head, and the
    /// worktree brought home (a repository of its own fetched into the
    /// user's) and removed unless kept.
    async fn wrap_up(&self, keep: bool) -> Ending {
        let commits = git::commits_since(&self.workdir, self.base.as_deref()).await;
        let head = git::head(&self.workdir).await;
        let mut worktree_report = None;
        let mut not_home = None;
        if let Some(wt) = &self.worktree {
            let home = wt.bring_home().await;
            let dirty = git::is_dirty(&wt.path).await;
            let removed = wt.finish(keep, home.is_ok()).await;
            not_home = home.err().map(|e| {
                format!(
                    "the session's commits were not fetched into branch {} (the repository {} is kept): {e}",
                    wt.branch,
                    wt.path.display()
                )
            });
            worktree_report = Some(WorktreeReport {
                path: wt.path.clone(),
                branch: wt.branch.clone(),
                base: wt.base.clone(),
                removed,
                dirty,
                own_repository: wt.home.is_some(),
            });
        }
        (commits, head, worktree_report, not_home)
    }
}

impl SessionReport {
    /// The report of a session that starts now in `place`, before any run.
    pub(super) fn begin(
        session_id: String,
        name: String,
        place: &Place,
        started_at: std::time::SystemTime,
        iterations: u32,
    ) -> SessionReport {
        SessionReport {
            schema_version: warden_events::SchemaVersion,
            session_id,
            name,
            session_dir: place.session_dir.clone(),
            workdir: place.workdir.clone(),
            worktree: None,
            branch: place.branch.clone(),
            started_at: humantime::format_rfc3339_millis(started_at).to_string(),
            duration_ms: 0,
            iterations_requested: iterations,
            iterations_run: 0,
            stopped_because: StopReason::IterationsExhausted,
            verdict: None,
            runs: Vec::new(),
            tokens: Tokens::default(),
            cost_usd: None,
            turns: 0,
            budgets: Vec::new(),
            budget_exceeded: None,
            commits: Some(Vec::new()),
            otel: None,
            output: None,
            error: None,
            output_lost: None,
            checks: Vec::new(),
            hooks: Vec::new(),
            merged_into: None,
            merge_commit: None,
            merge_conflicts: Vec::new(),
            written: false,
        }
    }
}
