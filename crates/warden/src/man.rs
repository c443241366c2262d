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
    let what = match command {
        Some("batch") => {
            "A batch exits 0 when every run succeeded, else 1 (the report names each run's verdict); 130 when it was cancelled."
        }
        Some("report") => {
            "The code of the run (or session, or batch) it reads, as below; 1 when a log changed after the run, or an entry or run it lists is missing; 75 for a run with no verdict yet."
        }
        Some("replay") => "0, or the code of the verdict in the run.json beside the file.",
        _ => "The verdict of the run (or of the session), each with its code:",
    };
    roff.text([roman(what)]);
    for v in Verdict::ALL {
        item(
            roff,
            &v.exit_code().to_string(),
            &format!("{}: {}.", v.as_str(), v.meaning()),
        );
    }
    item(
        roff,
        "2",
        "A usage or settings error: a bad flag or value, an unknown key; nothing ran.",
    );
    item(
        roff,
        "74",
        "Output lost: warden could not keep all of the run's output (a full disk); the verdict in run.json is still the agent's.",
    );
    roff.text([
        roman("With "),
        bold("--preserve-status"),
        roman(", succeeded and agent_failed exit with the command's own code (128 + the signal that killed it)."),
    ]);
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
