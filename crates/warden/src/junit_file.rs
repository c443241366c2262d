//! `--junit FILE`: the JUnit XML of a run, a session or a batch
//! (`warden_run::junit`), written where the CI system looks for it.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{CliError, usage};

/// Checks before anything runs that FILE can be written there: a typo in
/// its directory should not cost a whole run.
pub(crate) fn check(path: Option<&Path>) -> Result<Option<PathBuf>, CliError> {
    let Some(path) = path else {
        return Ok(None);
    };
    if path.as_os_str().is_empty() {
        return Err(usage("--junit needs a file name"));
    }
    if path.is_dir() {
        return Err(usage(format_args!(
            "--junit {}: it is a directory; name the file to write",
            path.display()
        )));
    }
    let parent = dir_of(path);
    if !parent.is_dir() {
        return Err(usage(format_args!(
            "--junit {}: the directory {} does not exist",
            path.display(),
            parent.display()
        )));
    }
    Ok(Some(path.to_path_buf()))
}

fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Writes `xml` to `path` whole or not at all: into a temporary file in
/// the same directory, then renamed over it, so a reader (or a CI step
/// after a killed warden) never sees half a file. Says what happened on
/// stderr; returns the code to exit with instead when it failed.
pub(crate) fn write(path: &Path, xml: &str, code: u8) -> u8 {
    match write_atomically(path, xml.as_bytes()) {
        Ok(()) => {
            crate::render::console::important(&format!("warden: JUnit report: {}", path.display()));
            code
        }
        Err(e) => {
            crate::render::console::important(&format!(
                "warden: error: could not write the JUnit report {}: {e}",
                path.display()
            ));
            // The result was asked for and is lost: as for any lost output.
            warden_run::report::OUTPUT_LOST_EXIT
        }
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = tempfile::Builder::new()
        .prefix(".warden-junit-")
        .suffix(".tmp")
        .tempfile_in(dir_of(path))?;
    // A report for others to read (a CI step, a test viewer), not a
    // secret: the temporary file's own mode is 0600.
    std::fs::set_permissions(
        tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}
