//! Writes that an agent cannot redirect.
//!
//! The run directory sits inside the agent's writable work tree, and the
//! agent knows the run's id. Whatever it plants there (a symbolic link
//! named like one of warden's files, a link in place of a directory on the
//! way, a dangling link where a file is about to be created) must never
//! make warden write anywhere else. So every directory warden writes in is
//! reached one component at a time from `/`, each opened with
//! `O_DIRECTORY | O_NOFOLLOW` (a link on the way is refused with an error
//! that names it), and kept open as a [`HeldDir`]. Every file is then made
//! relative to that handle: created with `O_CREAT | O_EXCL | O_NOFOLLOW`
//! (it can only be a new file of warden's), and a JSON file is written
//! under a unique temporary name and renamed over the old one, which
//! replaces a planted link instead of following it.
//!
//! A `.warden` directory met on the way gets a `.gitignore` (created the
//! same way; an existing entry of that name is left alone), so an agent
//! never commits warden's files.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{
    AtFlags, CWD, FileType, Mode, OFlags, mkdirat, openat, renameat, statat, unlinkat,
};
use rustix::io::Errno;

/// What `.warden/.gitignore` says.
/// How often [`HeldDir::lock`] tries again while another holds the lock
/// (held for the length of a `git worktree add`: a fraction of a second).
const LOCK_RETRY: std::time::Duration = std::time::Duration::from_millis(10);

const GITIGNORE: &str = "# warden's run logs and worktrees; never committed\n*\n";

/// Why a directory could not be made or used.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    #[error(
        "{} is a symbolic link: warden never follows a link on the way to a directory it writes in (an agent could have planted it); use the real path",
        .path.display()
    )]
    Symlink { path: PathBuf },
    #[error("{} is not a directory", .path.display())]
    NotADirectory { path: PathBuf },
    #[error(
        "{} is not empty: a run directory holds exactly one run; pick a new directory (or leave the run directory unset for a fresh one per run)",
        .path.display()
    )]
    NotEmpty { path: PathBuf },
    #[error("{}: {source}", .path.display())]
    Io { path: PathBuf, source: io::Error },
}

impl DirError {
    /// The underlying I/O error, when the file system (not the request)
    /// was at fault: a full disk, a read-only mount.
    pub fn io(&self) -> Option<&io::Error> {
        match self {
            DirError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// An open directory that warden writes in. Cloning shares the handle.
#[derive(Debug, Clone)]
pub(crate) struct HeldDir {
    fd: Arc<OwnedFd>,
    path: PathBuf,
}

impl HeldDir {
    /// Opens `path`, creating what is missing; refuses a link anywhere on
    /// the way.
    pub(crate) fn open_or_create(path: &Path) -> Result<Self, DirError> {
        walk(path)
    }

    /// Like [`HeldDir::open_or_create`], and the directory must be new or
    /// empty: it is the home of exactly one run (or session, or batch).
    pub(crate) fn create_empty(path: &Path) -> Result<Self, DirError> {
        let dir = walk(path)?;
        // The walk holds search-only handles; listing needs to read.
        let readable = openat(
            &*dir.fd,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| dir.io(e))?;
        let mut entries = rustix::fs::Dir::new(readable).map_err(|e| dir.io(e))?;
        for entry in &mut entries {
            let entry = entry.map_err(|e| dir.io(e))?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." {
                return Err(DirError::NotEmpty { path: dir.path });
            }
        }
        Ok(dir)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, e: impl Into<io::Error>) -> DirError {
        DirError::Io {
            path: self.path.clone(),
            source: e.into(),
        }
    }

    /// Creates the file `name`, which must not exist yet (whatever is
    /// there, a link included, is an error), for appending.
    pub(crate) fn create_file(&self, name: &str) -> io::Result<File> {
        self.create(name, OFlags::APPEND)
    }

    fn create(&self, name: &str, extra: OFlags) -> io::Result<File> {
        let fd = openat(
            &*self.fd,
            name,
            OFlags::WRONLY
                | OFlags::CREATE
                | OFlags::EXCL
                | OFlags::NOFOLLOW
                | OFlags::CLOEXEC
                | extra,
            Mode::from_raw_mode(0o644),
        )?;
        Ok(File::from(fd))
    }

    /// Replaces `name` with `bytes` at once: written to a new file with a
    /// name of its own, then renamed over `name` (a reader sees the old
    /// file or the new one, never half of one; concurrent writers never
    /// share a temporary file; a link at `name` is replaced, not
    /// followed).
    pub(crate) fn write_atomic(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let tmp = format!(".{name}.{:016x}.tmp", random_u64());
        let renamed = self.create_file(&tmp).and_then(|mut f| {
            f.write_all(bytes)?;
            self.rename_own(&f, &tmp, name)
        });
        if renamed.is_err() {
            let _ = unlinkat(&*self.fd, &tmp, AtFlags::empty());
        }
        renamed
    }

    /// [`write_atomic`](Self::write_atomic), but only where no `name` is
    /// there yet: one that is (written since, by a write that must not be
    /// undone) is left as it is, and this write dropped. The file is
    /// linked into place, which never replaces anything.
    pub(crate) fn write_if_absent(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let tmp = format!(".{name}.{:016x}.tmp", random_u64());
        let linked = self.create_file(&tmp).and_then(|mut f| {
            f.write_all(bytes)?;
            self.still_own(&f, &tmp)?;
            match rustix::fs::linkat(&*self.fd, tmp.as_str(), &*self.fd, name, AtFlags::empty()) {
                Ok(()) | Err(Errno::EXIST) => Ok(()),
                Err(e) => Err(e.into()),
            }
        });
        let _ = unlinkat(&*self.fd, tmp.as_str(), AtFlags::empty());
        linked
    }

    /// Sets aside `bytes` of disk for a later [`HeldDir::write_atomic`] of
    /// `name` (a new file of its own filled with zeros), so that file can
    /// still be written when the disk has filled up in between.
    pub(crate) fn reserve(&self, name: &str, bytes: usize) -> io::Result<Reserved> {
        let tmp = format!(".{name}.{:016x}.tmp", random_u64());
        // Not for appending: the report is written at its start later.
        let filled = self
            .create(&tmp, OFlags::empty())
            .and_then(|mut f| f.write_all(&vec![0; bytes]).map(|()| f));
        match filled {
            Ok(file) => Ok(Reserved {
                dir: self.clone(),
                tmp,
                file,
                name: name.to_string(),
                done: false,
            }),
            Err(e) => {
                let _ = unlinkat(&*self.fd, &tmp, AtFlags::empty());
                Err(e)
            }
        }
    }

    /// Takes an exclusive lock on the directory (`flock`), held until the
    /// returned handle is dropped; waits for another holder by trying
    /// again now and then, never blocking the thread: the holder may be
    /// another session of the same batch, on the same thread, that must
    /// run to let go (a blocking `flock` there waits for it forever).
    pub(crate) async fn lock(&self) -> io::Result<OwnedFd> {
        loop {
            if let Some(fd) = self.try_lock()? {
                return Ok(fd);
            }
            tokio::time::sleep(LOCK_RETRY).await;
        }
    }

    /// Takes the exclusive lock of [`HeldDir::lock`] if no one holds it;
    /// `None` when someone does (a run, session or batch in progress holds
    /// its directory's lock for its lifetime: `warden gc` never removes
    /// one it cannot lock).
    pub(crate) fn try_lock(&self) -> io::Result<Option<OwnedFd>> {
        try_lock_at(&self.fd, OsStr::new("."))
    }

    /// Takes the lock of a directory just made by
    /// [`HeldDir::create_empty`], for its owner's lifetime. Without
    /// waiting: someone else holding a brand-new directory is `warden gc`
    /// taking it to remove it, so waiting would leave this warden writing
    /// in a removed directory. For the same reason a directory already
    /// gone once locked (no link left to it) is refused.
    pub(crate) fn claim(&self) -> Result<OwnedFd, DirError> {
        let refused = |why: &str| DirError::Io {
            path: self.path.clone(),
            source: io::Error::other(why.to_string()),
        };
        let fd = self.try_lock().map_err(|e| self.io(e))?.ok_or_else(|| {
            refused("another process holds its lock (another warden using it, or a `warden gc` removing it); pick a new directory")
        })?;
        let st = rustix::fs::fstat(&fd).map_err(|e| self.io(e))?;
        if st.st_nlink == 0 {
            return Err(refused(
                "it was removed (by `warden gc` with keep_runs = 0?) before warden could lock it",
            ));
        }
        Ok(fd)
    }

    /// The handle, for walking below it.
    pub(crate) fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// Opens `path` without creating anything and without following a
    /// link on the way; `None` if some part of it does not exist.
    pub(crate) fn open_existing(path: &Path) -> Result<Option<Self>, DirError> {
        match walk_with(path, false) {
            Ok(dir) => Ok(Some(dir)),
            Err(DirError::Io { source, .. })
                if source.raw_os_error() == Some(Errno::NOENT.raw_os_error()) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Renames `tmp` to `name` if `tmp` is still the file warden wrote:
    /// a file swapped in under that name by someone else is refused, not
    /// passed off as warden's.
    fn rename_own(&self, file: &File, tmp: &str, name: &str) -> io::Result<()> {
        self.still_own(file, tmp)?;
        Ok(renameat(&*self.fd, tmp, &*self.fd, name)?)
    }

    /// Whether `tmp` is still `file`, the file warden wrote: an error if
    /// someone swapped something else in under its name.
    fn still_own(&self, file: &File, tmp: &str) -> io::Result<()> {
        let ours = rustix::fs::fstat(file)?;
        let there = statat(&*self.fd, tmp, AtFlags::SYMLINK_NOFOLLOW)?;
        if (ours.st_dev, ours.st_ino) != (there.st_dev, there.st_ino) {
            return Err(io::Error::other(format!(
                "{tmp} was replaced by something else while warden wrote it"
            )));
        }
        Ok(())
    }

    /// Creates `name` with `bytes` unless something of that name exists
    /// (which is then left as it is, whatever it is).
    fn ensure_file(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        match self.create_file(name) {
            Ok(mut f) => f.write_all(bytes),
            Err(e) if e.raw_os_error() == Some(Errno::EXIST.raw_os_error()) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Space set aside for one atomic write (see [`HeldDir::reserve`]).
#[derive(Debug)]
pub(crate) struct Reserved {
    dir: HeldDir,
    tmp: String,
    file: File,
    name: String,
    /// Renamed (or removed) already: nothing to give back.
    done: bool,
}

impl Reserved {
    /// Whether the reserved file is still where warden put it (not
    /// removed, renamed or replaced by someone else).
    pub(crate) fn is_intact(&self) -> bool {
        let (Ok(ours), Ok(there)) = (
            rustix::fs::fstat(&self.file),
            statat(&*self.dir.fd, &self.tmp, AtFlags::SYMLINK_NOFOLLOW),
        ) else {
            return false;
        };
        (ours.st_dev, ours.st_ino) == (there.st_dev, there.st_ino)
    }

    /// Writes `bytes` over the reserved space (growing it if needed), cuts
    /// what is left of it, and renames it over the file it was reserved
    /// for.
    pub(crate) fn write(mut self, bytes: &[u8]) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        let fd = &*self.dir.fd;
        let renamed = self
            .file
            .write_all_at(bytes, 0)
            .and_then(|()| self.file.set_len(bytes.len() as u64))
            .and_then(|()| self.dir.rename_own(&self.file, &self.tmp, &self.name));
        if renamed.is_err() {
            let _ = unlinkat(fd, &self.tmp, AtFlags::empty());
        }
        self.done = true;
        renamed
    }
}

impl Drop for Reserved {
    /// Never used: the space is given back.
    fn drop(&mut self) {
        if !self.done {
            let _ = unlinkat(&*self.dir.fd, &self.tmp, AtFlags::empty());
        }
    }
}

/// The exclusive `flock` of the directory `name` in `dir` (a directory
/// opened without following a link), if no one else holds it: `None`
/// when someone does.
pub(crate) fn try_lock_at(dir: &OwnedFd, name: &OsStr) -> io::Result<Option<OwnedFd>> {
    let fd = openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    loop {
        match rustix::fs::flock(&fd, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(Some(fd)),
            Err(Errno::INTR) => {}
            Err(Errno::WOULDBLOCK) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Opens every component of `path` from the root (or the current
/// directory, for a relative path), creating the missing ones.
fn walk(path: &Path) -> Result<HeldDir, DirError> {
    walk_with(path, true)
}

/// [`walk`], creating what is missing only with `create` (without it a
/// missing component is an `Io` error of `ENOENT`, and no `.gitignore`
/// is written).
fn walk_with(path: &Path, create: bool) -> Result<HeldDir, DirError> {
    let start = if path.is_absolute() { "/" } else { "." };
    let mut fd = openat(
        CWD,
        start,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| DirError::Io {
        path: start.into(),
        source: e.into(),
    })?;
    let mut so_far = PathBuf::from(start);
    for component in path.components() {
        let name: &OsStr = match component {
            Component::Prefix(_) | Component::RootDir | Component::CurDir => continue,
            Component::ParentDir => OsStr::new(".."),
            Component::Normal(n) => n,
        };
        so_far.push(component);
        fd = step(&fd, name, &so_far, create)?;
        if create && name.as_bytes() == b".warden" {
            let warden = HeldDir {
                fd: Arc::new(fd),
                path: so_far.clone(),
            };
            warden
                .ensure_file(".gitignore", GITIGNORE.as_bytes())
                .map_err(|e| warden.io(e))?;
            fd = Arc::try_unwrap(warden.fd).expect("the only handle");
        }
    }
    Ok(HeldDir {
        fd: Arc::new(fd),
        path: path.to_path_buf(),
    })
}

/// Opens (making it first if missing) the directory `name` in `dir`.
/// `O_PATH`: a directory on the way may be search-only (`0711`), as
/// `/home/<user>` often is.
fn step(dir: &OwnedFd, name: &OsStr, path: &Path, create: bool) -> Result<OwnedFd, DirError> {
    let open = || {
        openat(
            dir,
            name,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
    };
    let io = |e: Errno| DirError::Io {
        path: path.to_path_buf(),
        source: e.into(),
    };
    match open() {
        Ok(fd) => Ok(fd),
        Err(Errno::NOENT) if !create => Err(io(Errno::NOENT)),
        Err(Errno::NOENT) => {
            match mkdirat(dir, name, Mode::from_raw_mode(0o755)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(io(e)),
            }
            open().map_err(|e| refused(dir, name, path, e))
        }
        Err(e) => Err(refused(dir, name, path, e)),
    }
}

/// Why opening `name` as a directory failed: a link, something else, or
/// the error itself.
fn refused(dir: &OwnedFd, name: &OsStr, path: &Path, e: Errno) -> DirError {
    if matches!(e, Errno::LOOP | Errno::NOTDIR) {
        match statat(dir.as_fd(), name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                return DirError::Symlink {
                    path: path.to_path_buf(),
                };
            }
            Ok(_) => {
                return DirError::NotADirectory {
                    path: path.to_path_buf(),
                };
            }
            Err(_) => {}
        }
    }
    DirError::Io {
        path: path.to_path_buf(),
        source: e.into(),
    }
}

/// 64 bits from the kernel's random source (for names no one can guess or
/// collide with).
pub(crate) fn random_u64() -> u64 {
    let mut buf = [0u8; 8];
    let mut filled = 0;
    while filled < buf.len() {
        match rustix::rand::getrandom(&mut buf[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(Errno::INTR) => {}
            // No getrandom(2) (a kernel before 3.17, a seccomp filter):
            // the clock and a counter still keep names apart in this
            // process; O_EXCL catches the rest.
            Err(_) => return fallback_u64(),
        }
    }
    u64::from_le_bytes(buf)
}

fn fallback_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // std seeds each RandomState from the OS once and then varies it.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    h.finish()
}

/// Makes the directory `path` with `make` on a blocking thread: creating
/// a run's files can take milliseconds on a busy disk, and a batch starts
/// hundreds at once while the clocks of the runs already going must keep
/// time on the runtime's thread.
pub(crate) async fn off_clock<T: Send + 'static>(
    path: &Path,
    make: fn(&Path) -> Result<T, DirError>,
) -> Result<T, DirError> {
    let owned = path.to_path_buf();
    tokio::task::spawn_blocking(move || make(&owned))
        .await
        .unwrap_or_else(|e| {
            Err(DirError::Io {
                path: path.to_path_buf(),
                source: std::io::Error::other(format!("the task making it failed: {e}")),
            })
        })
}

/// `20261129T193152Z-1a2b3c4d5e6f7a8b`: sortable by start time, and 64
/// random bits from the kernel, so ids never collide, across processes
/// and machines, and cannot be guessed before the run starts.
pub fn new_run_id(at: std::time::SystemTime) -> String {
    let stamp: String = humantime::format_rfc3339_seconds(at)
        .to_string()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    format!("{stamp}-{:016x}", random_u64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_if_absent_never_replaces_and_leaves_no_temporary_file() {
        let t = tempfile::tempdir().unwrap();
        let dir = HeldDir::create_empty(&t.path().join("run")).unwrap();
        dir.write_if_absent("run.json", b"first").unwrap();
        assert_eq!(
            std::fs::read(t.path().join("run/run.json")).unwrap(),
            b"first"
        );
        // The report of the end, written in between, stays.
        dir.write_atomic("run.json", b"final").unwrap();
        dir.write_if_absent("run.json", b"late first").unwrap();
        assert_eq!(
            std::fs::read(t.path().join("run/run.json")).unwrap(),
            b"final"
        );
        let names: Vec<_> = std::fs::read_dir(t.path().join("run"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["run.json"]);
    }

    #[test]
    fn a_link_on_the_way_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), t.path().join("runs")).unwrap();
        let err = HeldDir::open_or_create(&t.path().join("runs/one")).unwrap_err();
        assert!(matches!(err, DirError::Symlink { .. }), "{err}");
        assert!(
            std::fs::read_dir(elsewhere.path())
                .unwrap()
                .next()
                .is_none()
        );
    }

    #[test]
    fn a_dangling_gitignore_link_is_not_followed() {
        let t = tempfile::tempdir().unwrap();
        let victim = t.path().join("victim");
        std::fs::create_dir(t.path().join(".warden")).unwrap();
        std::os::unix::fs::symlink(&victim, t.path().join(".warden/.gitignore")).unwrap();
        HeldDir::open_or_create(&t.path().join(".warden/runs/x")).unwrap();
        assert!(!victim.exists());
    }

    #[test]
    fn an_atomic_write_replaces_a_planted_link() {
        let t = tempfile::tempdir().unwrap();
        let victim = t.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let d = HeldDir::create_empty(&t.path().join("run")).unwrap();
        std::os::unix::fs::symlink(&victim, t.path().join("run/run.json")).unwrap();
        d.write_atomic("run.json", b"{}").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(
            std::fs::read_to_string(t.path().join("run/run.json")).unwrap(),
            "{}"
        );
    }

    #[test]
    fn a_reservation_swapped_for_a_link_is_not_passed_off_as_the_report() {
        let t = tempfile::tempdir().unwrap();
        let d = HeldDir::create_empty(&t.path().join("run")).unwrap();
        let r = d.reserve("run.json", 16).unwrap();
        let tmp = std::fs::read_dir(d.path())
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        std::fs::remove_file(&tmp).unwrap();
        std::fs::write(&tmp, "forged").unwrap();
        assert!(r.write(b"{}").is_err());
        assert!(!d.path().join("run.json").exists());
    }

    #[test]
    fn a_used_directory_is_refused() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("stdout.log"), "old").unwrap();
        let err = HeldDir::create_empty(t.path()).unwrap_err();
        assert!(matches!(err, DirError::NotEmpty { .. }), "{err}");
    }

    #[test]
    fn open_existing_creates_nothing_and_follows_no_link() {
        let t = tempfile::tempdir().unwrap();
        assert!(
            HeldDir::open_existing(&t.path().join(".warden/runs"))
                .unwrap()
                .is_none()
        );
        assert!(!t.path().join(".warden").exists(), "nothing was made");
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), t.path().join("link")).unwrap();
        let err = HeldDir::open_existing(&t.path().join("link")).unwrap_err();
        assert!(matches!(err, DirError::Symlink { .. }), "{err}");
    }

    #[tokio::test]
    async fn a_held_lock_is_not_taken_twice() {
        let t = tempfile::tempdir().unwrap();
        let dir = HeldDir::open_or_create(&t.path().join("run")).unwrap();
        let held = dir.lock().await.unwrap();
        assert!(dir.try_lock().unwrap().is_none(), "taken while held");
        drop(held);
        assert!(dir.try_lock().unwrap().is_some(), "free once dropped");
    }

    /// Waiting for a lock another holds leaves the thread to the rest:
    /// on a runtime of one thread, the holder may be a task that has to
    /// run to let go.
    #[tokio::test(start_paused = true)]
    async fn waiting_for_a_lock_leaves_the_thread_to_others() {
        let t = tempfile::tempdir().unwrap();
        let dir = HeldDir::open_or_create(&t.path().join("run")).unwrap();
        let theirs = dir.try_lock().unwrap().unwrap();
        let mine = dir.lock();
        tokio::pin!(mine);
        tokio::select! {
            _ = &mut mine => panic!("taken while another held it"),
            () = tokio::time::sleep(std::time::Duration::from_secs(60)) => {}
        }
        // The holder (this task) ran meanwhile, and lets go.
        drop(theirs);
        let _mine = mine.await.unwrap();
        assert!(dir.try_lock().unwrap().is_none(), "taken once let go");
    }

    #[test]
    fn a_new_directory_gc_holds_or_removed_is_not_claimed() {
        // gc's try_lock came first: the new directory is refused at once
        // (a blocking lock would wait, then write in a removed directory).
        let t = tempfile::tempdir().unwrap();
        let dir = HeldDir::create_empty(&t.path().join("run")).unwrap();
        let gc = try_lock_at(dir.fd(), OsStr::new(".")).unwrap().unwrap();
        let err = dir.claim().unwrap_err();
        assert!(err.to_string().contains("holds its lock"), "{err}");
        // gc removed it and let go: refused too.
        std::fs::remove_dir(t.path().join("run")).unwrap();
        drop(gc);
        let err = dir.claim().unwrap_err();
        assert!(err.to_string().contains("removed"), "{err}");
        // A directory no one touched is claimed.
        let dir = HeldDir::create_empty(&t.path().join("other")).unwrap();
        assert!(dir.claim().is_ok());
    }

    #[test]
    fn random_names_differ() {
        assert_ne!(random_u64(), random_u64());
    }
}
