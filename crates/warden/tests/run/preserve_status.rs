//! `--preserve-status`: the command's own exit code for the verdicts the
//! command decides (`succeeded`, `agent_failed`); warden's own otherwise.

use crate::support::Case;

#[test]
fn preserve_status_gives_the_commands_own_code() {
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--preserve-status",
        "--",
        "sh",
        "-c",
        "exit 3",
    ]);
    assert_eq!(done.code, 3, "{}", done.stderr);
    assert_eq!(done.verdict(), "agent_failed");

    // Without it, the verdict's code.
    let case = Case::new();
    let done = case.run(&["run", "exec", "--", "sh", "-c", "exit 3"]);
    assert_eq!(done.code, 1, "{}", done.stderr);

    // From the environment, as every setting; and success stays 0.
    let case = Case::new();
    let mut cmd = case.command(&["run", "exec", "--", "true"]);
    cmd.env("WARDEN_PRESERVE_STATUS", "true");
    assert_eq!(cmd.output().unwrap().status.code(), Some(0));
}

#[test]
fn preserve_status_gives_128_plus_the_signal_and_keeps_wardens_own_verdicts() {
    // Killed by a signal warden did not send: agent_failed, 128 + 9.
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--preserve-status",
        "--",
        "sh",
        "-c",
        "kill -9 $$",
    ]);
    assert_eq!(done.verdict(), "agent_failed", "{}", done.stderr);
    assert_eq!(done.code, 137, "{}", done.stderr);

    // A verdict warden decided keeps warden's code (timed_out: 5), not the
    // code of the command it killed.
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--preserve-status",
        "--timeout",
        "300ms",
        "--kill-grace",
        "200ms",
        "--",
        "sleep",
        "30",
    ]);
    assert_eq!(done.verdict(), "timed_out", "{}", done.stderr);
    assert_eq!(done.code, 5, "{}", done.stderr);
}

#[test]
fn preserve_status_holds_for_a_session() {
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--iterations",
        "2",
        "--preserve-status",
        "--",
        "sh",
        "-c",
        "exit 4",
    ]);
    assert_eq!(done.code, 4, "{}", done.stderr);
}

#[test]
fn preserve_status_keeps_wardens_code_when_warden_ended_the_run() {
    // The command said it was done, then did not exit: warden ends it at
    // the completion timeout and the verdict stays `succeeded`. The SIGTERM
    // was warden's, so the exit is 0, not 128 + 15.
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--preserve-status",
        "--completion-signal",
        "DONE_X",
        "--completion-timeout",
        "1s",
        "--",
        "sh",
        "-c",
        "echo DONE_X; exec sleep 30",
    ]);
    assert_eq!(done.verdict(), "succeeded", "{}", done.stderr);
    assert_eq!(done.code, 0, "{}", done.stderr);

    // The same in a session: its last run's status was warden's signal.
    let case = Case::new();
    let done = case.run(&[
        "run",
        "exec",
        "--iterations",
        "1",
        "--preserve-status",
        "--completion-signal",
        "DONE_X",
        "--completion-timeout",
        "1s",
        "--",
        "sh",
        "-c",
        "echo DONE_X; exec sleep 30",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
}
