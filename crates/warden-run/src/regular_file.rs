//! Reading a file the agent may have planted: only a regular file, never
//! more than a bound, and never blocking.
//!
//! Everything under the work tree is the agent's to change, and the agent
//! is untrusted. A FIFO where warden expects a file blocks `open(2)` until
//! someone writes it; a link to `/dev/zero` never ends. So the file is
//! first opened with `O_PATH`, which reaches the file without opening it
//! (no driver's `open` runs: a link to `/dev/watchdog` arms nothing, a
//! FIFO blocks nothing), its type is checked on that descriptor, and only
//! a regular file is then opened for reading, through that same
//! descriptor (`/proc/self/fd`), so it cannot be swapped between the
//! check and the read; at most `limit` bytes are read.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Why a file was not read.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("it is {kind}, not a regular file")]
    NotRegular { kind: &'static str },
    #[error("it is {size} bytes long, more than the {limit} bytes warden reads")]
    TooLarge { size: u64, limit: u64 },
    #[error("it is not UTF-8 text (byte {at} is not valid)")]
    NotUtf8 { at: usize },
}

impl ReadError {
    /// Whether the file simply is not there.
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::Io(e) if e.kind() == std::io::ErrorKind::NotFound)
    }
}

/// What a file type is, in words, for an error message.
pub fn kind_of(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_symlink() {
        "a symbolic link"
    } else {
        "a regular file"
    }
}

/// The regular file at `path` (links are followed, but what they lead to
/// must be a regular file), open for reading, and its metadata.
fn open_regular(path: &Path) -> Result<(File, std::fs::Metadata), ReadError> {
    use rustix::fs::{Mode, OFlags};
    let probe = rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
        .map_err(std::io::Error::from)?;
    let probe = File::from(probe);
    let meta = probe.metadata()?;
    if !meta.file_type().is_file() {
        return Err(ReadError::NotRegular {
            kind: kind_of(meta.file_type()),
        });
    }
    let through = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&probe));
    let file = match File::options()
        .read(true)
        .custom_flags((OFlags::NONBLOCK | OFlags::CLOEXEC).bits() as i32)
        .open(&through)
    {
        Ok(f) => f,
        // Without /proc, by its path again: the check below still holds
        // for what was opened (O_NONBLOCK keeps a FIFO from blocking).
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => File::options()
            .read(true)
            .custom_flags(OFlags::NONBLOCK.bits() as i32)
            .open(path)?,
        Err(e) => return Err(e.into()),
    };
    let opened = file.metadata()?;
    if !opened.file_type().is_file() {
        return Err(ReadError::NotRegular {
            kind: kind_of(opened.file_type()),
        });
    }
    Ok((file, opened))
}

/// The bytes of the regular file at `path` (links are followed, but what
/// they lead to must be a regular file), at most `limit` of them.
pub fn read(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let (file, meta) = open_regular(path)?;
    if meta.len() > limit {
        return Err(ReadError::TooLarge {
            size: meta.len(),
            limit,
        });
    }
    let mut bytes = Vec::new();
    // A file that grows while it is read still stops at the bound.
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge {
            size: bytes.len() as u64,
            limit,
        });
    }
    Ok(bytes)
}

/// The last `limit` bytes (at most) of the regular file at `path`, with
/// the same checks as [`read`]: a log can be far longer than what a
/// summary shows of it, so its start is skipped rather than refused.
pub fn read_tail(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    use std::io::{Seek, SeekFrom};
    let (mut file, meta) = open_regular(path)?;
    file.seek(SeekFrom::Start(meta.len().saturating_sub(limit)))?;
    let mut bytes = Vec::new();
    // A file that grows while it is read still stops at the bound.
    file.take(limit).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The first `limit` bytes (at most) of the regular file at `path`, with
/// the same checks as [`read`], and whether there was more.
pub fn read_head(path: &Path, limit: u64) -> Result<(Vec<u8>, bool), ReadError> {
    let (file, _) = open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes)?;
    let more = bytes.len() as u64 > limit;
    bytes.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    Ok((bytes, more))
}

/// The regular file at `path` as UTF-8 text, at most `limit` bytes.
pub fn read_text(path: &Path, limit: u64) -> Result<String, ReadError> {
    let bytes = read(path, limit)?;
    String::from_utf8(bytes).map_err(|e| ReadError::NotUtf8 {
        at: e.utf8_error().valid_up_to(),
    })
}

/// Whether `path`, if it exists, is something other than a regular file
/// (links followed), without opening it: a `stat` never blocks.
pub fn not_regular(path: &Path) -> Option<&'static str> {
    let meta = std::fs::metadata(path).ok()?;
    (!meta.file_type().is_file()).then(|| kind_of(meta.file_type()))
}

/// Opens a file warden wrote in a run directory, for reading: never
/// through a link, never a FIFO or a device (which could block the reader
/// forever); warden writes neither.
pub fn open_written(path: &Path) -> std::io::Result<File> {
    use rustix::fs::{CWD, FileType, Mode, OFlags, fstat, openat};
    let fd = openat(
        CWD,
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| {
        if e == rustix::io::Errno::LOOP {
            std::io::Error::other("it is a symbolic link, which warden never writes")
        } else {
            e.into()
        }
    })?;
    if FileType::from_raw_mode(fstat(&fd)?.st_mode) != FileType::RegularFile {
        return Err(std::io::Error::other(
            "it is not a regular file, which warden never writes",
        ));
    }
    Ok(File::from(fd))
}

/// Creates `path` for writing with `mode`: never through a link planted
/// in its place, never over a file already there.
pub(crate) fn create_new(path: &Path, mode: u32) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    File::options()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fifo_in(dir: &Path) -> std::path::PathBuf {
        let fifo = dir.join("fifo");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        fifo
    }

    #[test]
    fn a_fifo_a_directory_a_device_and_a_big_file_are_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = fifo_in(dir.path());
        let e = read(&fifo, 100).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        assert!(matches!(
            read(&link, 100),
            Err(ReadError::NotRegular { .. })
        ));
        assert!(
            read(dir.path(), 100)
                .unwrap_err()
                .to_string()
                .contains("directory")
        );
        assert!(matches!(
            read(Path::new("/dev/zero"), 100),
            Err(ReadError::NotRegular { .. })
        ));
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'x'; 101]).unwrap();
        assert!(matches!(read(&big, 100), Err(ReadError::TooLarge { .. })));
        std::fs::write(&big, b"ok\xff").unwrap();
        assert!(matches!(
            read_text(&big, 100),
            Err(ReadError::NotUtf8 { at: 2 })
        ));
        assert!(
            read(&dir.path().join("none"), 100)
                .unwrap_err()
                .is_not_found()
        );
        assert_eq!(not_regular(&fifo), Some("a FIFO (named pipe)"));
        assert_eq!(not_regular(&big), None);
    }

    /// What is not a regular file is never opened: a writer waiting on a
    /// FIFO (its open blocks until a reader opens the other end) is still
    /// waiting after the FIFO was refused, through a link too.
    #[test]
    fn what_is_refused_is_never_opened() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = fifo_in(dir.path());
        let link = dir.path().join("warden.toml");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        let (opened, writer_opened) = std::sync::mpsc::channel();
        let path = fifo.clone();
        let writer = std::thread::spawn(move || {
            let f = std::fs::OpenOptions::new().write(true).open(&path);
            let _ = opened.send(());
            f
        });
        // The writer is in its open before anything is read (else the
        // test would prove nothing); the kernel does not show where a
        // thread waits to all, so this gives it time.
        std::thread::sleep(std::time::Duration::from_millis(200));
        for p in [&fifo, &link] {
            assert!(matches!(read(p, 100), Err(ReadError::NotRegular { .. })));
            assert!(matches!(
                read_tail(p, 100),
                Err(ReadError::NotRegular { .. })
            ));
        }
        assert!(
            writer_opened
                .recv_timeout(std::time::Duration::from_millis(300))
                .is_err(),
            "the FIFO was opened for reading: its writer got through"
        );
        // Let the writer go.
        let _reader = File::open(&fifo).unwrap();
        writer.join().unwrap().unwrap();
    }
}
