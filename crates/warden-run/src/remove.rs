//! Removing a directory tree the agent wrote, without following a link.
//!
//! The tree is in the agent's reach (a run directory in its work tree, a
//! session's own repository), so it may hold symbolic links anywhere, and
//! they may change while warden walks it. Every directory below the top is
//! opened `O_NOFOLLOW` relative to its parent's handle, every entry is
//! looked at with `lstat` semantics and removed with `unlinkat` relative to
//! that handle: a link is removed as a link, what it points to is never
//! touched.

use std::ffi::{OsStr, OsString};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, openat, statat, unlinkat};

/// How deep a removal goes below a directory it removes: deeper is refused (an
/// agent could nest directories until the walk runs out of handles).
const MAX_DEPTH: usize = 256;

/// Removes the directory tree at `path` without following a link below
/// its parent (a session's own repository, which the agent wrote).
pub(crate) fn remove_tree(path: &Path) -> std::io::Result<()> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(std::io::Error::other("no parent directory"));
    };
    let parent = openat(
        rustix::fs::CWD,
        parent,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    remove_at(&parent, name, 0)
}

/// Removes the entry `name` in `parent` and, for a directory, everything
/// in it, without following a link anywhere. An entry below that is gone
/// meanwhile is no error: another gc removing the same tree.
pub(crate) fn remove_at(parent: &OwnedFd, name: &OsStr, depth: usize) -> std::io::Result<()> {
    let st = statat(parent, name, AtFlags::SYMLINK_NOFOLLOW)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
        // A file, or a link: the entry itself goes, never its target.
        return Ok(unlinkat(parent, name, AtFlags::empty())?);
    }
    if depth >= MAX_DEPTH {
        return Err(std::io::Error::other(format!(
            "more than {MAX_DEPTH} directories deep; remove it yourself"
        )));
    }
    // O_NOFOLLOW: a link swapped in since the stat is refused, not
    // entered.
    let dir = openat(
        parent,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    for child in list(&dir)? {
        match remove_at(&dir, &child, depth + 1) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    drop(dir);
    Ok(unlinkat(parent, name, AtFlags::REMOVEDIR)?)
}

/// Every name in `dir` but `.` and `..`.
pub(crate) fn list(dir: &OwnedFd) -> std::io::Result<Vec<OsString>> {
    let readable = openat(
        dir,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::new(readable)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(OsStr::from_bytes(name).to_os_string());
        }
    }
    Ok(names)
}
