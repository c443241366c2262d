//! The run directory: the files that make "output is never lost" true.
//!
//! - `stdout.log`, `stderr.log`: the raw bytes, appended as they arrive,
//!   before anything is decoded;
//! - `events.jsonl`: one JSON object per event, flushed as the run goes;
//! - `run.json`: the report, written when the run starts (verdict `null`)
//!   and again when it ends, always by write-then-rename so a reader never
//!   sees half a file.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use warden_events::event::Stamped;

use crate::report::Report;

pub struct RunDir {
    path: PathBuf,
    pub stdout: File,
    pub stderr: File,
    events: BufWriter<File>,
}

impl RunDir {
    /// Creates the run directory (and, under a `.warden` directory, a
    /// `.gitignore` so an agent never commits warden's logs).
    pub fn create(path: &Path) -> io::Result<Self> {
        fs::create_dir_all(path)?;
        if let Some(warden_dir) = path
            .ancestors()
            .find(|p| p.file_name() == Some(".warden".as_ref()))
        {
            let ignore = warden_dir.join(".gitignore");
            if !ignore.exists() {
                fs::write(ignore, "# warden's run logs; never committed\n*\n")?;
            }
        }
        let open = |name: &str| {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(path.join(name))
        };
        Ok(Self {
            path: path.to_path_buf(),
            stdout: open("stdout.log")?,
            stderr: open("stderr.log")?,
            events: BufWriter::with_capacity(64 * 1024, open("events.jsonl")?),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn event(&mut self, e: &Stamped) -> io::Result<()> {
        serde_json::to_writer(&mut self.events, e)?;
        self.events.write_all(b"\n")
    }

    pub fn flush_events(&mut self) -> io::Result<()> {
        self.events.flush()
    }

    pub fn write_report(&self, report: &Report) -> io::Result<()> {
        write_report(&self.path, report)
    }
}

/// Writes `run.json` in `dir` atomically.
pub fn write_report(dir: &Path, report: &Report) -> io::Result<()> {
    let tmp = dir.join(".run.json.tmp");
    let mut bytes = serde_json::to_vec_pretty(report)?;
    bytes.push(b'\n');
    fs::write(&tmp, bytes)?;
    fs::rename(tmp, dir.join("run.json"))
}
