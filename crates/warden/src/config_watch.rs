//! The config file a later warden would read, looked at again when the
//! work is done. `warden.toml` sits in the agent's work tree (in the
//! directory warden runs in or one above it, up to the work tree's top),
//! so an agent can write the settings of the next warden started there: turn
//! its sandbox off, lift its budgets, send its spans elsewhere. warden
//! cannot refuse that write without touching the user's files (under
//! `bwrap` the work tree is writable by design); it can say that it
//! happened, once the run, session or batch has ended, before anything
//! reads the file again. A batch file in the runs' reach is watched the
//! same way: it says what the next batch of that file runs, and how.

use std::path::{Path, PathBuf};

use warden_run::regular_file;

use crate::render::console;

/// What was at the path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Absent,
    Text(String),
    /// There, but not a config file warden can read (a FIFO, a
    /// directory, a link to something unreadable, not UTF-8).
    Unreadable,
}

/// What the file is to a later warden.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// A `warden.toml` found from the directory up to its work tree's top
    /// (or looked for there and not found).
    Found,
    /// Named with `--config` or `WARDEN_CONFIG`.
    Named,
    /// The user's own, in `$XDG_CONFIG_HOME/warden/`.
    User,
    /// A `.git` whose presence decides which `warden.toml` a warden
    /// started below it finds.
    GitMark,
    /// The file of `warden batch FILE`.
    BatchFile,
}

#[derive(Debug, Clone)]
pub(crate) struct ConfigWatch {
    path: PathBuf,
    role: Role,
    before: Seen,
}

impl ConfigWatch {
    /// The file at `path` as the settings read it (`None`: not there).
    pub(crate) fn new(path: &Path, named: bool, text: Option<&str>) -> Self {
        Self {
            path: path.to_path_buf(),
            role: if named { Role::Named } else { Role::Found },
            before: text.map_or(Seen::Absent, |t| Seen::Text(t.to_string())),
        }
    }

    /// The user's own file at `path` as the settings read it.
    pub(crate) fn user(path: &Path, text: Option<&str>) -> Self {
        Self {
            role: Role::User,
            ..Self::new(path, false, text)
        }
    }

    /// The `.git` at `path` as it is now (see [`Role::GitMark`]).
    pub(crate) fn git_mark(path: &Path) -> Self {
        Self::now(path, Role::GitMark)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The `warden.toml` a warden started in `cwd` would read, and the
    /// nearer places it looks in first, as they are now.
    pub(crate) fn found_now(cwd: &Path) -> Vec<Self> {
        let mut watches = Vec::new();
        for path in crate::settings::discover::candidates(cwd) {
            let watch = Self::now(&path, Role::Found);
            let found = watch.before != Seen::Absent;
            watches.push(watch);
            if found {
                let marks = crate::settings::discover::git_marks(cwd, &path);
                watches.extend(marks.iter().map(|m| Self::git_mark(m)));
                break;
            }
        }
        watches
    }

    /// The file at `path` as it is now.
    pub(crate) fn now(path: &Path, role: Role) -> Self {
        Self {
            path: path.to_path_buf(),
            role,
            before: look(path),
        }
    }
}

fn look(path: &Path) -> Seen {
    match regular_file::read_text(path, warden_run::defaults::MAX_WORK_TREE_FILE) {
        Ok(text) => Seen::Text(text),
        Err(e) if e.is_not_found() => Seen::Absent,
        Err(_) => Seen::Unreadable,
    }
}

impl ConfigWatch {
    /// How the file changed since the settings were read, in words;
    /// `None` when it did not.
    pub(crate) fn change(&self) -> Option<&'static str> {
        let now = look(&self.path);
        if now == self.before {
            return None;
        }
        Some(match (&self.before, &now) {
            (Seen::Absent, _) => "created",
            (_, Seen::Absent) => "removed",
            (_, Seen::Unreadable) => "replaced by something that is not a readable file",
            _ => "changed",
        })
    }

    /// Says so on stderr (even with `--quiet`) and, under GitHub
    /// Actions, as a warning annotation, when the file changed.
    pub(crate) fn warn_if_changed(&self) {
        let Some(change) = self.change() else { return };
        let (next, remedy) = match self.role {
            Role::Found => (
                "a warden started in its directory or below reads it",
                "keep settings out of the agent's reach with --config FILE outside the work tree",
            ),
            Role::Named => (
                "a warden given the same config file reads it",
                "keep settings out of the agent's reach with --config FILE outside the work tree",
            ),
            Role::User => (
                "every warden this user starts reads it",
                "keep the agent from writing your home directory with a sandbox",
            ),
            Role::GitMark => (
                "it decides which warden.toml a warden started below it reads",
                "keep settings out of the agent's reach with --config FILE outside the work tree",
            ),
            Role::BatchFile => (
                "a batch of this file runs what it says",
                "keep batch files outside the runs' work trees",
            ),
        };
        let msg = format!(
            "{} was {change} while warden ran: {next}, so check it before running again ({remedy})",
            self.path.display()
        );
        console::important(&format!("warden: warning: {msg}"));
        if let Some(g) = crate::render::github::GitHub::from_env() {
            g.warning(&msg);
        }
    }
}

/// Warns once per file, for every file in `watches` that changed.
pub(crate) fn warn_changed(watches: &[ConfigWatch]) {
    let mut said: Vec<&Path> = Vec::new();
    for w in watches {
        if !said.contains(&w.path.as_path()) {
            said.push(&w.path);
            w.warn_if_changed();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_change_is_named_and_no_change_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("warden.toml");
        let absent = ConfigWatch::new(&path, false, None);
        assert_eq!(absent.change(), None);
        std::fs::write(&path, "timeout = \"1m\"\n").unwrap();
        assert_eq!(absent.change(), Some("created"));

        let read = ConfigWatch::new(&path, false, Some("timeout = \"1m\"\n"));
        assert_eq!(read.change(), None);
        std::fs::write(&path, "timeout = \"1m\"\nsandbox = \"none\"\n").unwrap();
        assert_eq!(read.change(), Some("changed"));
        std::fs::remove_file(&path).unwrap();
        assert_eq!(read.change(), Some("removed"));
        std::fs::create_dir(&path).unwrap();
        assert_eq!(
            read.change(),
            Some("replaced by something that is not a readable file")
        );
    }
}
