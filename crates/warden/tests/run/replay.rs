//! `warden replay` on recordings larger than it should hold in memory.

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;

use crate::support::*;

/// Runs `child` to its end and returns its exit code and its peak
/// resident memory in KiB (from `wait4`, for this child alone: other
/// tests run children at the same time).
fn wait_with_peak_rss(child: std::process::Child) -> (i32, i64) {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `pid` is our own unreaped child (`Child` never waited on it,
    // and it is forgotten below so it never will); `status` and `usage`
    // are ours and of the right types.
    let got = unsafe { libc::wait4(pid, &mut status, 0, usage.as_mut_ptr()) };
    assert_eq!(
        got,
        pid,
        "wait4 failed: {}",
        std::io::Error::last_os_error()
    );
    std::mem::forget(child);
    // SAFETY: `wait4` returned the child, so it filled in `usage`.
    let usage = unsafe { usage.assume_init() };
    let code = std::process::ExitStatus::from_raw(status)
        .code()
        .unwrap_or(-1);
    (code, usage.ru_maxrss)
}

#[test]
fn replay_streams_a_recording_larger_than_its_memory_bound() {
    let case = Case::new();
    // 48 MiB of plain lines: a replay that read the whole file first
    // would hold all of it at once.
    let file = case.dir.path().join("big.log");
    let mut w = std::io::BufWriter::new(std::fs::File::create(&file).unwrap());
    let line = [b'x'; 99];
    for _ in 0..(48 << 20) / 100 {
        w.write_all(&line).unwrap();
        w.write_all(b"\n").unwrap();
    }
    // One line with no newline at the end, cut across reads.
    w.write_all(b"the last line").unwrap();
    w.flush().unwrap();
    drop(w);
    let child = case
        .command(&["replay", "exec", file.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (code, peak_kib) = wait_with_peak_rss(child);
    assert_eq!(code, 0, "replay of plain lines succeeds");
    assert!(
        peak_kib <= 32 * 1024,
        "replay of a 48 MiB file peaked at {peak_kib} KiB of memory: it should read the file \
         a chunk at a time, not all at once"
    );
}

#[test]
fn replay_counts_every_line_when_read_in_chunks() {
    let case = Case::new();
    // Lines longer than a read, and a last line without its newline.
    let file = case.dir.path().join("lines.log");
    let mut bytes = Vec::new();
    for i in 0..60 {
        bytes.extend(std::iter::repeat_n(
            b'a' + (i % 26) as u8,
            100 + i * 110_017 % 700_000,
        ));
        bytes.push(b'\n');
    }
    bytes.extend_from_slice(b"last");
    std::fs::write(&file, &bytes).unwrap();
    let out = case
        .command(&["replay", "exec", file.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary: serde_json::Value =
        serde_json::from_str(stdout.lines().last().expect("a summary line")).unwrap();
    assert_eq!(summary["lines"], 61, "summary: {summary}");
    assert_eq!(summary["oversized_lines"], 0, "summary: {summary}");
}
