//! The man pages: `warden` and one per command (`warden-run`, ...), each
//! clap's sections (name, synopsis, description, options by heading,
//! commands) and warden's own: EXIT STATUS, ENVIRONMENT, FILES and
//! EXAMPLES, built from the same tables as `--help` (the verdicts, the
//! settings, each command's examples).

use roff::{Roff, bold, italic, roman};
use warden_run::Verdict;

use crate::args;
use crate::settings::table::SETTINGS;

/// Every page: its name and its command.
pub(crate) fn pages() -> Vec<(String, clap::Command)> {
    use clap::CommandFactory;
    let top = args::Cli::command();
    let mut pages: Vec<(String, clap::Command)> = vec![("warden".into(), top.clone())];
    for sub in top.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("warden-{}", sub.get_name());
        let page = sub.clone().name(&name).version(env!("CARGO_PKG_VERSION"));
        pages.push((name, page));
    }
    pages
}

/// Writes page `name` (of [`pages`]) as roff.
pub(crate) fn render(
    name: &str,
    page: &clap::Command,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let mut page_text = Vec::new();
    write_page(name, page, &mut page_text)?;
    out.write_all(escape_non_ascii(&String::from_utf8_lossy(&page_text)).as_bytes())
}

/// Every character roff has no plain input for (`\u{2026}`, `\u{2014}`)
/// as its `\[uXXXX]` escape: groff reads its input as Latin-1, and warns.
fn escape_non_ascii(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            out.push_str(&format!("\\[u{:04X}]", c as u32));
        }
    }
    out
}

/// [`render`], before the escapes.
fn write_page(
    name: &str,
    page: &clap::Command,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let man = clap_mangen::Man::new(page.clone());
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    if page.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(out)?;
    }
    if page.has_subcommands() {
        man.render_subcommands_section(out)?;
    }
    let command = name.strip_prefix("warden-");
    let mut roff = Roff::new();
    exit_status(&mut roff, command);
    environment(&mut roff, command);
    files(&mut roff);
    examples(&mut roff, command);
    roff.to_writer(out)?;
    if page.get_version().is_some() {
        man.render_version_section(out)?;
    }
    Ok(())
}

/// A tagged paragraph: `tag` in bold, then `text`.
fn item(roff: &mut Roff, tag: &str, text: &str) {
    roff.control("TP", []).text([bold(tag)]).text([roman(text)]);
}

fn exit_status(roff: &mut Roff, command: Option<&str>) {
    roff.control("SH", ["EXIT STATUS"]);
    match command {
        None | Some("run") => {
            roff.text([roman(
                "The verdict of the run (or of the session), each with its code:",
            )]);
            verdicts(roff, &Verdict::ALL);
            item(
                roff,
                "2",
                "A usage or settings error: a bad flag or value, an unknown key; nothing ran.",
            );
            item(
                roff,
                "74",
                "Output lost: warden could not keep all of the run's output (a full disk), or could not pass all of the command's output on to its own stdout or stderr; the verdict in run.json is still the agent's.",
            );
            roff.text([
                roman("With "),
                bold("--preserve-status"),
                roman(", succeeded and agent_failed exit with the command's own code (128 + the signal that killed it)."),
            ]);
        }
        Some("batch") => {
            roff.text([roman(
                "The batch's own verdict, from its runs': 130 when any was cancelled, else 7 when any exceeded a budget, else 1 when any did not succeed, else 0.",
            )]);
            verdicts(
                roff,
                &[
                    Verdict::Succeeded,
                    Verdict::AgentFailed,
                    Verdict::BudgetExceeded,
                    Verdict::Cancelled,
                ],
            );
            item(
                roff,
                "2",
                "A usage or settings error, or a batch file that is not one; nothing ran.",
            );
            item(roff, "74", "Output lost by one of its runs (a full disk).");
        }
        Some("report") => {
            roff.text([roman(
                "The code of the run, session or batch it reads (as warden-run(1) and warden-batch(1) list them), unless:",
            )]);
            item(
                roff,
                "1",
                "A log changed after the run (it is not what warden wrote), or an entry or run the directory lists is missing.",
            );
            item(
                roff,
                "2",
                "The directory is no run, session or batch, or a file in it is not warden's.",
            );
            item(
                roff,
                "75",
                "A run with no verdict yet (still running, or its warden was killed).",
            );
        }
        Some("replay") => {
            roff.text([roman(
                "0, or the code of the verdict in the run.json beside the recording (see warden-run(1)); 2 for a file that cannot be read.",
            )]);
        }
        Some(_) => {
            item(roff, "0", "It did what was asked.");
            item(
                roff,
                "2",
                "A usage or settings error: a bad flag or value, an unknown key, a file that is not what it must be.",
            );
        }
    }
}

/// A tagged paragraph per verdict: its code, its name and what it means.
fn verdicts(roff: &mut Roff, verdicts: &[Verdict]) {
    for v in verdicts {
        let extra = if *v == Verdict::Cancelled {
            "; or the reader of warden's stdout went away while the command ran"
        } else {
            ""
        };
        item(
            roff,
            &v.exit_code().to_string(),
            &format!("{}: {}{extra}.", v.as_str(), v.meaning()),
        );
    }
}

/// Variables that are not settings, and what they do.
const OTHER_VARIABLES: &[(&str, &str)] = &[
    (
        "WARDEN_CONFIG",
        "Read settings from this file instead of the nearest warden.toml (as --config).",
    ),
    ("NO_COLOR", "Set and not empty: no colour on the terminal."),
    (
        "TERM",
        "dumb: no status line redrawn in place and no colour; plain lines instead.",
    ),
    (
        "XDG_CONFIG_HOME",
        "Where the user's own settings file is: $XDG_CONFIG_HOME/warden/warden.toml (default ~/.config/warden/warden.toml).",
    ),
    (
        "XDG_STATE_HOME",
        "Where batch keys are kept: $XDG_STATE_HOME/warden/keys/ (default ~/.local/state/warden/keys/).",
    ),
    (
        "GITHUB_ACTIONS",
        "true: warnings and failed verdicts as workflow annotations; with GITHUB_STEP_SUMMARY, a Markdown summary appended to it; with GITHUB_OUTPUT, the run's outputs written to it.",
    ),
    (
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "With the other standard OTEL_* variables: where and how spans and metrics are exported (see --otel-endpoint).",
    ),
];

fn environment(roff: &mut Roff, command: Option<&str>) {
    roff.control("SH", ["ENVIRONMENT"]);
    let settings = matches!(command, None | Some("run" | "batch"));
    if settings {
        roff.text([
            roman("Every setting comes from its flag, its variable or a "),
            bold("warden.toml"),
            roman(" key of its name, in that order, then its default. The variables:"),
        ]);
        for s in SETTINGS {
            item(roff, &s.env(), &s.help());
        }
        roff.text([roman("Other variables:")]);
    }
    for (name, what) in OTHER_VARIABLES {
        item(roff, name, what);
    }
}

fn files(roff: &mut Roff) {
    roff.control("SH", ["FILES"]);
    let files: &[(&str, &str)] = &[
        (
            "warden.toml",
            "The project's settings: the nearest one from the current directory up to the top of its git work tree (never across a file system boundary), read alone.",
        ),
        (
            "$XDG_CONFIG_HOME/warden/warden.toml",
            "The user's own settings, beneath the project's, key by key.",
        ),
        (
            ".warden/runs/RUN-ID/",
            "A run's directory: run.json (the report), events.jsonl, stdout.log and stderr.log (the output byte for byte).",
        ),
        (
            ".warden/sessions/ID/, .warden/batches/ID/",
            "A session's (session.json, a directory per run) and a batch's (batch.json, plan.json, one directory per entry).",
        ),
        (
            "$XDG_STATE_HOME/warden/keys/",
            "The key of each batch, which authenticates what warden reads back from the batch's directory.",
        ),
    ];
    for (name, what) in files {
        item(roff, name, what);
    }
}

fn examples(roff: &mut Roff, command: Option<&str>) {
    let all = [
        ("run", args::RUN_EXAMPLES),
        ("batch", args::BATCH_EXAMPLES),
        ("report", args::REPORT_EXAMPLES),
        ("replay", args::REPLAY_EXAMPLES),
        ("doctor", args::DOCTOR_EXAMPLES),
        ("gc", args::GC_EXAMPLES),
        ("config", args::CONFIG_EXAMPLES),
    ];
    let shown: Vec<&str> = match command {
        None => all.iter().map(|(_, e)| *e).collect(),
        Some(c) => all
            .iter()
            .filter(|(n, _)| *n == c)
            .map(|(_, e)| *e)
            .collect(),
    };
    if shown.is_empty() {
        return;
    }
    roff.control("SH", ["EXAMPLES"]);
    for e in shown {
        roff.control("nf", []);
        for line in e.lines() {
            roff.text([roman(line.trim_start())]);
        }
        roff.control("fi", []);
    }
    roff.text([
        roman("More in the book (docs/ in the source) and "),
        italic("warden COMMAND --help"),
        roman("."),
    ]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(name: &str) -> String {
        let (_, cmd) = pages().into_iter().find(|(n, _)| n == name).unwrap();
        let mut out = Vec::new();
        render(name, &cmd, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn every_page_has_warden_s_sections() {
        for (name, _) in pages() {
            let text = page(&name);
            for section in ["EXIT STATUS", "ENVIRONMENT", "FILES"] {
                assert!(
                    text.contains(&format!(".SH \"{section}\""))
                        || text.contains(&format!(".SH {section}")),
                    "{name} has no {section}"
                );
            }
        }
        let run = page("warden-run");
        assert!(run.contains("EXAMPLES"));
        assert!(run.contains("WARDEN_STALL_TIMEOUT"));
        assert!(run.contains("CLOCKS"), "options under their headings");
    }
}
