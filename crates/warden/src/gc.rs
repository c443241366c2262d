//! `warden gc`, and the retention applied after `warden run` when
//! `keep_runs` / `keep_days` are set: the settings wired to
//! `warden_run::gc`.

use std::path::{Path, PathBuf};

use warden_run::gc::{Action, GcOptions, GcReport, Item};

use crate::args::GcArgs;
use crate::error::{Outcome, usage};
use crate::settings::{RawSettings, SettingFlags, find};

pub(crate) async fn gc(args: &GcArgs) -> Outcome {
    let cwd = crate::request::working_dir(args.cwd.as_deref())?;
    // The flags, WARDEN_KEEP_RUNS / WARDEN_KEEP_DAYS and warden.toml, as
    // for every setting.
    let mut flags = SettingFlags::default();
    flags.config = args.config.clone();
    for (name, value) in [
        ("keep_runs", &args.keep_runs),
        ("keep_days", &args.keep_days),
    ] {
        if let (Some(setting), Some(v)) = (find(name), value) {
            flags.set(setting, v.clone());
        }
    }
    let raw = RawSettings::gather(&flags, &cwd).map_err(usage)?;
    let project = raw.project_root(&cwd);
    let resolved = raw.resolve().map_err(usage)?;
    let options = GcOptions {
        keep_runs: resolved.keep_runs,
        keep_days: resolved.keep_days,
        dry_run: args.dry_run,
        spare: Vec::new(),
    };
    let report = warden_run::gc::collect(
        &projects(&cwd, &project).await,
        &options,
        std::time::SystemTime::now(),
    )
    .await
    .map_err(usage)?;
    if args.json {
        let text = serde_json::to_string_pretty(&report).unwrap_or_default();
        println!("{text}");
    } else {
        for line in lines(&report) {
            println!("{line}");
        }
        println!("{}", summary(&report, args.dry_run));
    }
    let failed = report.items.iter().any(|i| i.action == Action::Failed);
    Ok(u8::from(failed))
}

/// After a run: applies `keep_runs` / `keep_days` if either is set, and
/// says on stderr what went. `spare`: the directories of the run (or
/// session) just ended, kept whatever the rules say (`keep_runs = 0`
/// would otherwise delete the report warden just printed the path of).
pub(crate) async fn after_run(
    cwd: &Path,
    project: &Path,
    (keep_runs, keep_days): (Option<u64>, Option<u64>),
    spare: Vec<PathBuf>,
) {
    if keep_runs.is_none() && keep_days.is_none() {
        return;
    }
    let options = GcOptions {
        keep_runs,
        keep_days,
        dry_run: false,
        spare,
    };
    match warden_run::gc::collect(
        &projects(cwd, project).await,
        &options,
        std::time::SystemTime::now(),
    )
    .await
    {
        Ok(report) => {
            for line in lines(&report)
                .into_iter()
                .filter(|l| !l.starts_with("kept"))
            {
                eprintln!("warden: gc: {line}");
            }
        }
        Err(e) => eprintln!("warden: gc: {e}"),
    }
}

/// The working directory and the top of its repository (sessions and
/// worktrees live there).
/// The directories whose `.warden/` gc cleans: the project's root (where
/// runs go), the current directory (runs made there by an older warden)
/// and the top of its git repository.
async fn projects(cwd: &Path, project: &Path) -> Vec<PathBuf> {
    let mut all = vec![project.to_path_buf()];
    let root = warden_run::git::repo_root(cwd).await;
    for dir in std::iter::once(cwd.to_path_buf()).chain(root) {
        if !all.contains(&dir) {
            all.push(dir);
        }
    }
    all
}

fn lines(report: &GcReport) -> Vec<String> {
    report.items.iter().map(line).collect()
}

fn line(i: &Item) -> String {
    let action = match i.action {
        Action::Removed => "removed",
        Action::WouldRemove => "would remove",
        Action::Kept => "kept",
        Action::Failed => "failed to remove",
        _ => "?",
    };
    format!(
        "{action} {} {}: {}",
        i.kind.as_str(),
        i.path.display(),
        i.why
    )
}

fn summary(report: &GcReport, dry_run: bool) -> String {
    let count = |a: Action| report.items.iter().filter(|i| i.action == a).count();
    let gone = if dry_run {
        format!("{} would be removed", count(Action::WouldRemove))
    } else {
        format!("{} removed", count(Action::Removed))
    };
    format!(
        "warden gc: {gone}, {} kept (see why above), {} failed{}",
        count(Action::Kept),
        count(Action::Failed),
        if dry_run {
            " (dry run: nothing was touched)"
        } else {
            ""
        }
    )
}
