//! What warden draws on a terminal: a status line redrawn in place where
//! the terminal can move the cursor, plain lines where it says it cannot
//! (`TERM=dumb`).

use std::process::{Command, Stdio};

use crate::support::{Case, WARDEN};

/// What a sized terminal showed while `warden ARGS` ran in it with `TERM`
/// set to `term`; `None` where `script` (util-linux) is not installed.
pub(crate) fn on_a_terminal(case: &Case, term: &str, args: &str) -> Option<String> {
    let have_script = Command::new("sh")
        .args(["-c", "command -v script"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_script {
        eprintln!("SKIPPED: script (util-linux) is not installed");
        return None;
    }
    let inner = format!("stty rows 24 cols 80; TERM={term} '{WARDEN}' {args}; echo EXIT=$?");
    let out = Command::new("script")
        .args(["-qfc", &inner, "/dev/null"])
        .current_dir(case.path())
        .env_remove("NO_COLOR")
        .stdin(Stdio::null())
        .output()
        .expect("run script");
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn a_dumb_terminal_gets_plain_lines_and_no_escape_sequences() {
    let case = Case::new();
    let args = "run exec -- sh -c 'echo one; sleep 0.5; echo two'";
    let Some(xterm) = on_a_terminal(&case, "xterm", args) else {
        return;
    };
    assert!(xterm.contains("EXIT=0"), "{xterm}");
    assert!(
        xterm.contains('\x1b'),
        "a terminal that can redraw gets the status line: {xterm:?}"
    );
    let Some(dumb) = on_a_terminal(&case, "dumb", args) else {
        return;
    };
    assert!(dumb.contains("EXIT=0"), "{dumb}");
    assert!(!dumb.contains('\x1b'), "{dumb:?}");
    assert!(
        dumb.contains("out| one") && dumb.contains("out| two"),
        "{dumb}"
    );
}
