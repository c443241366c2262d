//! Where `warden.toml` is looked for when neither `--config` nor
//! `WARDEN_CONFIG` names a file: in the current directory, then in each
//! directory above it up to the top of the git work tree it is in (the
//! directory holding `.git`, a directory or a file), never past a
//! file-system boundary. Outside a work tree only the current directory
//! is looked in: a directory above an unrelated tree says nothing about
//! it. The nearest file wins, alone; files farther up are not merged in.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The name looked for in each directory.
pub(crate) const FILE_NAME: &str = "warden.toml";

/// The paths a config file may be at, nearest first: `cwd`'s, then each
/// parent's up to the work tree's top; only `cwd`'s outside a work tree.
pub(crate) fn candidates(cwd: &Path) -> Vec<PathBuf> {
    match work_tree_dirs(cwd) {
        Some(dirs) => dirs.iter().map(|d| d.join(FILE_NAME)).collect(),
        None => vec![cwd.join(FILE_NAME)],
    }
}

/// The `.git` entries whose presence made `found` the file read from
/// `cwd`: none between `cwd` and `found`'s directory (one there would end
/// the search below the file), one at the work tree's top (without it the
/// search would not stop there, or `cwd` would be in no work tree). Empty
/// when `found` is in `cwd` itself: nothing else decides that one.
pub(crate) fn git_marks(cwd: &Path, found: &Path) -> Vec<PathBuf> {
    let Some(dirs) = work_tree_dirs(cwd) else {
        return Vec::new();
    };
    let at = dirs
        .iter()
        .position(|d| Some(d.as_path()) == found.parent());
    match at {
        Some(at) if at > 0 => {
            let mut marks: Vec<PathBuf> = dirs[..at].iter().map(|d| d.join(".git")).collect();
            marks.extend(dirs.last().map(|top| top.join(".git")));
            marks
        }
        _ => Vec::new(),
    }
}

/// The top of the git work tree `cwd` is in (its physical path, the
/// directory holding `.git`), found as the config file is; `None` outside
/// one, or past a file-system boundary.
pub(crate) fn work_tree_top(cwd: &Path) -> Option<PathBuf> {
    work_tree_dirs(cwd)?.pop()
}

/// The directories from `cwd` (its physical path) up to its work tree's
/// top; `None` outside a work tree.
fn work_tree_dirs(cwd: &Path) -> Option<Vec<PathBuf>> {
    // The physical path, so that `..` of a linked directory is the
    // directory that holds it on disk, as git sees it.
    let start = cwd.canonicalize().unwrap_or_else(|_| cwd.to_path_buf());
    up_to_top(
        &start,
        |d| std::fs::metadata(d).ok().map(|m| m.dev()),
        |d| std::fs::symlink_metadata(d.join(".git")).is_ok(),
    )
}

/// The user's own `warden.toml`, read beneath the project's:
/// `$XDG_CONFIG_HOME/warden/warden.toml`, else
/// `~/.config/warden/warden.toml` (a relative `XDG_CONFIG_HOME` is
/// ignored, as the XDG base directory rules say); `None` without either.
pub(crate) fn user_file() -> Option<PathBuf> {
    user_file_of(
        std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from),
        std::env::var_os("HOME").map(PathBuf::from),
    )
}

fn user_file_of(xdg: Option<PathBuf>, home: Option<PathBuf>) -> Option<PathBuf> {
    let base = xdg
        .filter(|d| d.is_absolute())
        .or_else(|| home.filter(|h| h.is_absolute()).map(|h| h.join(".config")))?;
    Some(base.join("warden").join(FILE_NAME))
}

/// The directories from `start` up to the first one that `is_top`,
/// nearest first; `None` if none is before the root or before a
/// directory on another file system than `start` (`dev` of each).
fn up_to_top(
    start: &Path,
    dev: impl Fn(&Path) -> Option<u64>,
    is_top: impl Fn(&Path) -> bool,
) -> Option<Vec<PathBuf>> {
    let first_dev = dev(start)?;
    let mut dirs = Vec::new();
    let mut dir = start;
    loop {
        if dev(dir) != Some(first_dev) {
            return None;
        }
        dirs.push(dir.to_path_buf());
        if is_top(dir) {
            return Some(dirs);
        }
        dir = dir.parent()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(start: &str, top: &str, boundary: Option<&str>) -> Option<Vec<PathBuf>> {
        up_to_top(
            Path::new(start),
            |d| Some(u64::from(boundary.is_some_and(|b| !d.starts_with(b)))),
            |d| d == Path::new(top),
        )
    }

    #[test]
    fn the_walk_stops_at_the_top_and_never_crosses_a_file_system() {
        let got = walk("/r/a/b", "/r", None).unwrap();
        assert_eq!(
            got,
            [Path::new("/r/a/b"), Path::new("/r/a"), Path::new("/r")]
        );
        assert_eq!(walk("/r", "/r", None).unwrap(), [Path::new("/r")]);
        assert_eq!(walk("/r/a", "/elsewhere", None), None, "no top: none");
        // `/r/a` is a mount inside `/r`: the top beyond it is not reached.
        assert_eq!(walk("/r/a/b", "/r", Some("/r/a")), None);
        assert_eq!(
            walk("/r/a/b", "/r/a", Some("/r/a")).unwrap(),
            [Path::new("/r/a/b"), Path::new("/r/a")]
        );
    }

    #[test]
    fn the_user_file_is_under_xdg_config_home_else_home() {
        let p = |s: &str| Some(PathBuf::from(s));
        assert_eq!(user_file_of(p("/x"), p("/h")), p("/x/warden/warden.toml"));
        assert_eq!(
            user_file_of(p("rel"), p("/h")),
            p("/h/.config/warden/warden.toml")
        );
        assert_eq!(
            user_file_of(None, p("/h")),
            p("/h/.config/warden/warden.toml")
        );
        assert_eq!(user_file_of(None, p("")), None);
        assert_eq!(user_file_of(None, None), None);
    }

    #[test]
    fn a_git_directory_or_file_is_the_top() {
        let t = tempfile::tempdir().unwrap();
        let sub = t.path().join("a/b");
        std::fs::create_dir_all(&sub).unwrap();
        // Some directory above a temporary directory may be a work tree
        // (a home directory under git); below it, `.git` makes the top.
        std::fs::create_dir(t.path().join("a/.git")).unwrap();
        let real = sub.canonicalize().unwrap();
        assert_eq!(
            candidates(&sub),
            [real.join(FILE_NAME), real.parent().unwrap().join(FILE_NAME)]
        );
        assert_eq!(
            git_marks(&sub, &real.parent().unwrap().join(FILE_NAME)),
            [real.join(".git"), real.parent().unwrap().join(".git")],
            "none may appear below the file found, the top's must stay"
        );
        assert!(git_marks(&sub, &real.join(FILE_NAME)).is_empty());
        std::fs::write(t.path().join("a/b/.git"), "gitdir: elsewhere\n").unwrap();
        assert_eq!(
            candidates(&sub),
            [real.join(FILE_NAME)],
            "a .git file is a top too"
        );
    }
}
