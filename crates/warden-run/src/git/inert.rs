//! The configuration that makes warden's own git run nothing the
//! repository names. The agent can write the configuration of the
//! repository it works in (its `.git` is in its work tree), and every key
//! that names a program (a hook, a clean or smudge filter, a file-system
//! monitor, a diff driver, a credential helper, a pager) would run that
//! program on the host, outside any sandbox, the next time warden asks git
//! something. So warden lists the configuration git would read (with its
//! includes and where each key comes from; listing runs nothing) and
//! overrides, on the command line's level which wins over every file,
//! each such key the repository's own files set, plus the ones that are
//! off whatever the files say (hooks, which live in the repository).
//!
//! Why the user's git and not a library reading the repository in
//! warden's own process: every file of a repository the agent wrote may
//! be a FIFO or a device, and a read that blocks on one cannot be cut
//! short in a thread, while a git in a process group of its own is
//! killed at its time limit or on a signal (see `bounded`); a library
//! would also map packs the agent wrote into warden's memory, and apply
//! the same filters unless told not to.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

/// Settings every git warden runs gets, whatever the repository says.
const ALWAYS: &[(&str, &str)] = &[
    // Hooks: `post-checkout` (worktree add), `reference-transaction`
    // (branch -D), `pre-auto-gc`, ...: none exists under /dev/null.
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.pager", "cat"),
    // An empty value empties the list of helpers.
    ("credential.helper", ""),
    // No transport at all: nothing warden asks goes over one.
    ("protocol.allow", "never"),
    // A submodule is another repository, with a configuration of its own
    // that these overrides were not made from: never entered.
    ("submodule.recurse", "false"),
    ("diff.ignoreSubmodules", "all"),
    ("status.submoduleSummary", "false"),
    // `gpg.program` runs for a signature shown by `git log`.
    ("log.showSignature", "false"),
    // No automatic gc or maintenance after a command that writes.
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
];

/// What a key of `section.subsection.name` is set to when the repository
/// sets it (the section and the name as git lists them, in lower case).
fn neutral(section: &str, name: &str) -> Option<&'static str> {
    Some(match (section, name) {
        // A filter driver with neither command is no filter; one that is
        // not required is skipped when it cannot run.
        ("filter", "clean" | "smudge" | "process") => "",
        ("filter", "required") => "false",
        ("diff", "textconv" | "command") => "",
        // A merge driver the repository names (chosen by an attribute in
        // `info/attributes` or a `core.attributesFile`, which a merge's
        // `--attr-source` does not reach): one that cannot run leaves its
        // file in conflict.
        ("merge", "driver") => "",
        ("credential", "helper") => "",
        ("protocol", "allow") => "never",
        ("pager", _) => "false",
        ("core", "sshcommand" | "gitproxy" | "askpass" | "alternaterefscommand") => "",
        ("gpg", "program") => "",
        // Git LFS runs what the repository's configuration names too (an
        // extension's clean and smudge, a custom transfer's program) when
        // a user's own `filter.lfs` runs it on a file the agent's
        // attributes mark: `cat` passes the bytes through untouched.
        ("lfs", "clean" | "smudge") => "cat",
        ("lfs", "path") => "false",
        ("lfs", "standalonetransferagent") => "",
        // What a fetch from a path named as a remote would run there.
        ("remote", "uploadpack") => "git-upload-pack",
        ("remote", "receivepack") => "git-receive-pack",
        _ => return None,
    })
}

/// The overrides for a repository whose configuration lists `listed` (as
/// `git config --list --show-scope --name-only -z` prints it: scope and
/// key, each ended by NUL): [`ALWAYS`], then one for every key that names
/// a program and comes from a file of the repository (scope `local` or
/// `worktree`, includes from them too), which the agent may have written.
/// The system's and the user's own files (`system`, `global`) and
/// warden's own environment (`command`) are the user's, and stay: a
/// filter such as Git LFS's keeps working. Keys are bytes: git takes any
/// byte but NUL and newline in a subsection.
pub(super) fn overrides(listed: &[u8]) -> Vec<(OsString, OsString)> {
    let mut out: Vec<(OsString, OsString)> = ALWAYS
        .iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect();
    let mut fields = listed.split(|b| *b == 0);
    while let (Some(scope), Some(key)) = (fields.next(), fields.next()) {
        if matches!(scope, b"system" | b"global" | b"command") {
            continue;
        }
        // `section.subsection.name`: the subsection may hold dots.
        let Some(dot) = key.iter().position(|b| *b == b'.') else {
            continue;
        };
        let section = String::from_utf8_lossy(&key[..dot]).to_ascii_lowercase();
        let rest = &key[dot + 1..];
        let name = match rest.iter().rposition(|b| *b == b'.') {
            Some(last) => &rest[last + 1..],
            None => rest,
        };
        let name = String::from_utf8_lossy(name).to_ascii_lowercase();
        // A hook the configuration defines (git 2.54 on: `hook.<name>.command`
        // run on each `hook.<name>.event`), which `core.hooksPath` does not
        // reach: that hook switched off (`enabled`, 2.54 on) and its command
        // made one that does nothing, whichever of its keys is found.
        if section == "hook"
            && let Some(last) = rest.iter().rposition(|b| *b == b'.')
        {
            let hook = &key[..dot + 1 + last];
            for (suffix, value) in [(&b".enabled"[..], "false"), (b".command", "true")] {
                let k = OsString::from_vec([hook, suffix].concat());
                if !out.iter().any(|(o, _)| *o == k) {
                    out.push((k, value.into()));
                }
            }
            continue;
        }
        let key = OsString::from_vec(key.to_vec());
        if let Some(value) = neutral(&section, &name)
            && !out.iter().any(|(k, _)| *k == key)
        {
            out.push((key, value.into()));
        }
    }
    out
}

/// Whether the listed configuration holds [`ALWAYS`]'s hooks setting at
/// the command line's level: a git older than 2.31 ignores
/// `GIT_CONFIG_COUNT`, and would run every program the repository names.
pub(super) fn honoured(listed: &[u8]) -> bool {
    let mut fields = listed.split(|b| *b == 0);
    while let (Some(scope), Some(key)) = (fields.next(), fields.next()) {
        if scope == b"command" && key.eq_ignore_ascii_case(b"core.hooksPath") {
            return true;
        }
    }
    false
}

/// The environment that gives git `overrides` on the command line's level
/// (`GIT_CONFIG_COUNT`, `GIT_CONFIG_KEY_<n>`, `GIT_CONFIG_VALUE_<n>`:
/// unlike `-c`, a key holding `=` cannot be misread), after any such
/// settings warden itself was started with.
pub(super) fn environment(overrides: &[(OsString, OsString)]) -> Vec<(OsString, OsString)> {
    let first = std::env::var("GIT_CONFIG_COUNT")
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
        .unwrap_or(0);
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    for (i, (k, v)) in overrides.iter().enumerate() {
        env.push((format!("GIT_CONFIG_KEY_{}", first + i).into(), k.clone()));
        env.push((format!("GIT_CONFIG_VALUE_{}", first + i).into(), v.clone()));
    }
    env.push((
        "GIT_CONFIG_COUNT".into(),
        (first + overrides.len()).to_string().into(),
    ));
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_program_key_found_is_overridden_and_others_are_left() {
        let listed = b"local\0user.name\0local\0filter.Evil.clean\0local\0filter.a.b.smudge\0\
local\0FILTER.x.process\0worktree\0diff.t.textconv\0local\0credential.https://h.helper\0\
local\0core.sshCommand\0local\0protocol.ext.allow\0local\0core.fsmonitor\0\
local\0alias.st\0local\0filter.y.required\0global\0filter.lfs.process\0\
local\0remote./x.uploadpack\0local\0merge.evil.driver\0local\0merge.renormalize\0\
local\0lfs.extension.x.clean\0local\0lfs.extension.x.smudge\0local\0lfs.customtransfer.t.path\0\
local\0lfs.standalonetransferagent\0local\0lfs.url\0";
        let o = overrides(listed);
        let get = |k: &str| {
            o.iter()
                .rev()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.to_str().unwrap())
        };
        assert_eq!(get("filter.Evil.clean"), Some(""));
        assert_eq!(get("filter.a.b.smudge"), Some(""));
        assert_eq!(get("FILTER.x.process"), Some(""));
        assert_eq!(get("diff.t.textconv"), Some(""));
        assert_eq!(get("credential.https://h.helper"), Some(""));
        assert_eq!(get("core.sshCommand"), Some(""));
        assert_eq!(get("protocol.ext.allow"), Some("never"));
        assert_eq!(get("filter.y.required"), Some("false"));
        assert_eq!(get("core.fsmonitor"), Some("false"));
        assert_eq!(get("core.hooksPath"), Some("/dev/null"));
        assert_eq!(get("user.name"), None);
        assert_eq!(get("alias.st"), None);
        assert_eq!(get("filter.lfs.process"), None, "the user's own file");
        assert_eq!(get("remote./x.uploadpack"), Some("git-upload-pack"));
        assert_eq!(get("merge.evil.driver"), Some(""));
        assert_eq!(get("merge.renormalize"), None);
        assert_eq!(get("lfs.extension.x.clean"), Some("cat"));
        assert_eq!(get("lfs.extension.x.smudge"), Some("cat"));
        assert_eq!(get("lfs.customtransfer.t.path"), Some("false"));
        assert_eq!(get("lfs.standalonetransferagent"), Some(""));
        assert_eq!(get("lfs.url"), None, "no program");
    }

    #[test]
    fn a_hook_the_repository_configures_is_switched_off() {
        let o = overrides(b"local\0hook.evil.event\0local\0hook.evil.command\0local\0hook.Odd.Name.event\0local\0hook.jobs\0global\0hook.mine.command\0");
        let get = |k: &str| {
            o.iter()
                .rev()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.to_str().unwrap())
        };
        assert_eq!(get("hook.evil.enabled"), Some("false"));
        assert_eq!(get("hook.evil.command"), Some("true"));
        assert_eq!(
            o.iter().filter(|(k, _)| k == "hook.evil.command").count(),
            1
        );
        assert_eq!(get("hook.Odd.Name.enabled"), Some("false"));
        assert_eq!(get("hook.Odd.Name.command"), Some("true"));
        assert_eq!(get("hook.jobs"), None, "no hook of its own");
        assert_eq!(get("hook.mine.enabled"), None, "the user's own file");
    }

    #[test]
    fn overrides_that_git_ignored_are_seen() {
        assert!(honoured(b"global\0user.name\0command\0core.hookspath\0"));
        assert!(!honoured(b"local\0core.hookspath\0"));
        assert!(!honoured(b""));
    }

    #[test]
    fn a_key_that_is_not_utf8_is_overridden_as_it_is() {
        let o = overrides(b"local\0filter.\xff.clean\0");
        assert!(
            o.iter()
                .any(|(k, v)| k.as_encoded_bytes() == b"filter.\xff.clean" && v.is_empty())
        );
    }
}
