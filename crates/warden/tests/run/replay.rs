//! `warden replay` on recordings larger than it should hold in memory.

use std::io::Write;
use std::process::Stdio;

use crate::support::*;

/// Where GNU time is, to measure a child's peak memory. Not the test's
/// own `wait4`: a child's peak counts the memory of the process that
/// spawned it (the kernel records the old address space's peak at
/// `exec`), and this test process holds whatever the other tests hold.
/// `time` is small, so the peak it reports is replay's own.
const GNU_TIME: &str = "/usr/bin/time";

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
    if !std::path::Path::new(GNU_TIME).exists() {
        eprintln!("skipped: {GNU_TIME} (GNU time) is not installed to measure peak memory");
        return;
    }
    let peak_file = case.dir.path().join("peak");
    let status = std::process::Command::new(GNU_TIME)
        .args(["-f", "%M", "-o", peak_file.to_str().unwrap(), WARDEN])
        .args(["replay", "exec", file.to_str().unwrap()])
        .current_dir(case.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0), "replay of plain lines succeeds");
    let peak_kib: u64 = std::fs::read_to_string(&peak_file)
        .unwrap()
        .trim()
        .parse()
        .expect("GNU time writes the peak in KiB");
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
    // The summary: the last line of stderr.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let summary: serde_json::Value =
        serde_json::from_str(stderr.lines().last().expect("a summary line")).unwrap();
    assert_eq!(summary["lines"], 61, "summary: {summary}");
    assert_eq!(summary["oversized_lines"], 0, "summary: {summary}");
}

#[test]
fn a_replayed_recording_cannot_start_a_workflow_command_or_drive_the_terminal() {
    let case = Case::new();
    let file = case.dir.path().join("hostile.log");
    std::fs::write(
        &file,
        "progress\r::error title=x::owned\n##[error]owned too\nclear\x1b[2Jscreen\n",
    )
    .unwrap();
    for json in [false, true] {
        let mut args = vec!["replay", "exec", file.to_str().unwrap()];
        if json {
            args.push("--json");
        }
        let out = std::process::Command::new(WARDEN)
            .args(&args)
            .current_dir(case.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        for piece in text.split(['\n', '\r']) {
            assert!(
                !piece.trim_start().starts_with("::"),
                "a command starts a line (json: {json}): {text:?}"
            );
        }
        assert!(
            !text.contains("##["),
            "an old-style command (json: {json}): {text:?}"
        );
        assert!(
            !text.contains('\x1b'),
            "an escape reached the output (json: {json}): {text:?}"
        );
    }
}
