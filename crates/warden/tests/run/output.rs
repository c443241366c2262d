//! Output is never lost: byte-exact tees, bounded memory, no deadlock.

use std::process::Command;
use std::time::Duration;

use crate::support::{Case, WARDEN, ms};

/// Tens of MB of everything an agent can write: invalid UTF-8, NULs, CRLF,
/// a 20 MB line, and a last line with no newline.
fn nasty_stream() -> Vec<u8> {
    let mut data = Vec::with_capacity(40 << 20);
    let mut x: u32 = 0x1234_5678;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    for i in 0..800_000 {
        match i % 5 {
            0 => data.extend_from_slice(b"plain ascii line\n"),
            1 => data.extend_from_slice(b"crlf line\r\n"),
            2 => data.extend_from_slice(b"nul \0 in \0 line\n"),
            3 => data.extend_from_slice(b"bad utf8 \xff\xfe \xc3\x28\n"),
            _ => {
                for _ in 0..16 {
                    data.push((next() & 0xff) as u8);
                }
                data.push(b'\n');
            }
        }
        if i == 400_000 {
            data.extend(std::iter::repeat_n(b'x', 20 << 20));
            data.push(b'\n');
        }
    }
    data.extend_from_slice(b"last line without newline \xff");
    data
}

#[test]
fn stdout_log_is_byte_exact_and_memory_stays_bounded() {
    let case = Case::new();
    let data = nasty_stream();
    let input = case.path().join("input.bin");
    std::fs::write(&input, &data).unwrap();
    let done = case.run(&[
        "run",
        "exec",
        "--quiet",
        "--",
        "cat",
        input.to_str().unwrap(),
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let logged = done.log("stdout.log");
    assert_eq!(logged.len(), data.len(), "byte count differs");
    assert!(logged == data, "stdout.log differs from what was written");
    let report = done.report();
    assert_eq!(ms(&report["stdout_bytes"]), data.len() as u64);
    let oversized = done.events_of("oversized_line");
    assert_eq!(oversized.len(), 1, "the 20 MB line is reported once");
    assert_eq!(ms(&oversized[0]["bytes"]), 20 << 20);
    let rss = ms(&report["warden_peak_rss_kib"]);
    eprintln!("warden peak RSS for {} MB: {} KiB", data.len() >> 20, rss);
    assert!(
        rss < 96 * 1024,
        "warden's memory grew with the stream: {rss} KiB"
    );
}

#[test]
fn stderr_flood_with_silent_stdout_does_not_deadlock() {
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--quiet",
        "--timeout",
        "60s",
        "--",
        "sh",
        "-c",
        "head -c 20000000 /dev/zero | tr '\\0' 'e' | fold -w 99 >&2; echo done",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let report = done.report();
    assert_eq!(ms(&report["stderr_bytes"]), 20_000_000 + 20_000_000 / 99);
    assert_eq!(done.log("stdout.log"), b"done\n");
    assert!(done.elapsed < Duration::from_secs(30));
}

#[test]
fn json_flag_streams_events_on_stdout() {
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--json",
        "--",
        "sh",
        "-c",
        "echo one; echo two >&2",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let kinds: Vec<String> = done
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).expect("JSON line")["kind"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(kinds.first().map(String::as_str), Some("spawned"));
    assert_eq!(kinds.last().map(String::as_str), Some("finished"));
    assert!(
        kinds.contains(&"text".to_string()) && kinds.contains(&"stderr".to_string()),
        "{kinds:?}"
    );
    // events.jsonl points at the plain lines in the logs; read back, they
    // are the events --json showed.
    let on_disk = Command::new(WARDEN)
        .args(["report", "--events"])
        .arg(&done.run_dir)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&on_disk.stdout),
        done.stdout,
        "--json and events.jsonl carry the same events"
    );
}

#[test]
fn quiet_hides_the_commands_lines_but_not_the_summary() {
    let case = Case::new();
    let done = case.run(&["run", "exec", "-q", "--", "echo", "secret-line"]);
    assert!(!done.stderr.contains("secret-line"), "{}", done.stderr);
    assert!(done.stderr.contains("succeeded"), "{}", done.stderr);
    let loud = Case::new().run(&["run", "exec", "--", "echo", "shown-line"]);
    assert!(loud.stderr.contains("shown-line"), "{}", loud.stderr);
}

#[test]
fn warden_directory_ignores_itself_in_git() {
    let case = Case::new();
    let mut cmd = case.command(&["run", "exec", "--", "true"]);
    cmd.env_remove("WARDEN_RUN_DIR");
    assert!(cmd.status().unwrap().success());
    let ignore = std::fs::read_to_string(case.path().join(".warden/.gitignore")).unwrap();
    assert!(ignore.lines().any(|l| l == "*"));
    let runs: Vec<_> = std::fs::read_dir(case.path().join(".warden/runs"))
        .unwrap()
        .collect();
    assert_eq!(runs.len(), 1);
}
