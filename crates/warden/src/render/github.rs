//! GitHub Actions: workflow annotations and the step summary.
//!
//! Anything that came from the agent is neutralized before it is printed,
//! so an agent cannot issue workflow commands (`::error::`, `::add-mask::`,
//! `::stop-commands::`) through warden. The runner splits lines at `\n`,
//! `\r` and `\r\n`, trims leading whitespace before it looks for `::`, and
//! honours the older `##[command]` form anywhere in a line. So no piece of
//! a line, however split, may start with `::` after whitespace, and no
//! `##[` is left whole: in the log, in an annotation's data, in a `--json`
//! line. The view applies this to every line it prints, also when
//! `GITHUB_ACTIONS` is not set (a container step may not pass it on while
//! the runner still reads the output).

use std::io::Write;

use warden_run::Report;

use super::console::{self, Priority, Stream};

pub(crate) struct GitHub {
    summary: Option<std::path::PathBuf>,
}

impl GitHub {
    pub(crate) fn from_env() -> Option<Self> {
        if std::env::var_os("GITHUB_ACTIONS").is_none_or(|v| v != "true") {
            return None;
        }
        Some(Self {
            summary: std::env::var_os("GITHUB_STEP_SUMMARY").map(Into::into),
        })
    }

    /// A warning annotation (written as it is: `escape_data` makes the
    /// message safe, and `eprintln!` would neutralize the command itself).
    pub(crate) fn warning(&self, msg: &str) {
        self.warning_titled("warden", msg);
    }

    /// A warning annotation with its own title (a batch run's name, say).
    pub(crate) fn warning_titled(&self, title: &str, msg: &str) {
        console::line(
            Stream::Stderr,
            Priority::Droppable,
            &format!(
                "::warning title={}::{}",
                escape_property(title),
                escape_data(msg)
            ),
        );
    }

    /// The failed verdict's annotation: it gets the queue's reserve, like
    /// the summary line.
    pub(crate) fn error(&self, msg: &str) {
        self.error_titled("warden", msg);
    }

    /// An error annotation with its own title.
    pub(crate) fn error_titled(&self, title: &str, msg: &str) {
        console::line(
            Stream::Stderr,
            Priority::Important,
            &format!(
                "::error title={}::{}",
                escape_property(title),
                escape_data(msg)
            ),
        );
    }

    /// Appends a Markdown summary of the run to `$GITHUB_STEP_SUMMARY`.
    pub(crate) fn step_summary(&self, r: &Report) {
        self.append_summary(&summary_markdown(r));
    }

    /// Appends Markdown to `$GITHUB_STEP_SUMMARY`. A failure is a warning:
    /// the outcome and exit code stay.
    pub(crate) fn append_summary(&self, markdown: &str) {
        let Some(path) = &self.summary else { return };
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(markdown.as_bytes()));
        if let Err(e) = written {
            eprintln!(
                "warden: warning: could not write the step summary to {}: {e}",
                path.display()
            );
        }
    }
}

/// Where the step's outputs go: `$GITHUB_OUTPUT`, under GitHub Actions
/// only (`GITHUB_ACTIONS=true`); `None` elsewhere.
pub(crate) fn output_file() -> Option<std::path::PathBuf> {
    if std::env::var_os("GITHUB_ACTIONS").is_none_or(|v| v != "true") {
        return None;
    }
    std::env::var_os("GITHUB_OUTPUT")
        .filter(|p| !p.is_empty())
        .map(Into::into)
}

/// Appends `outputs` to `$GITHUB_OUTPUT` (the runner's file, opened as it
/// is). A failure is a warning: the run's outcome and exit code stay.
pub(crate) fn write_outputs(path: &std::path::Path, outputs: &warden_run::outputs::Outputs) {
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(outputs.render().as_bytes()));
    if let Err(e) = written {
        eprintln!(
            "warden: warning: could not write the step outputs to {}: {e}",
            path.display()
        );
    }
}

/// The agent's final text in `dir` (a run's or session's directory), for
/// the `final_text_file` output: its path, or `None` when there is no
/// text or it could not be written (which is said).
pub(crate) fn final_text_file(
    dir: &std::path::Path,
    text: Option<&str>,
) -> Option<std::path::PathBuf> {
    let text = text?;
    match warden_run::outputs::write_final_text(dir, text) {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!(
                "warden: warning: could not write {} in {}: {e}",
                warden_run::outputs::FINAL_TEXT_FILE,
                dir.display()
            );
            None
        }
    }
}

/// Escapes an annotation's message the way the runner decodes it; the
/// result is one line with no `##[` left whole.
pub(crate) fn escape_data(s: &str) -> String {
    break_old_commands(
        &s.replace('%', "%25")
            .replace('\r', "%0D")
            .replace('\n', "%0A"),
    )
}

/// An annotation's property (its title) escaped the way the runner
/// decodes it: as its message, and `:` and `,` too, which end a property.
pub(crate) fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// Where a reader of the log may start a new line. The runner splits at
/// `\r` and `\n` only; the others are line breaks to other readers, kept
/// out of reach too.
pub(crate) const BREAKS: [char; 7] = [
    '\n', '\r', '\u{0B}', '\u{0C}', '\u{85}', '\u{2028}', '\u{2029}',
];

/// Makes text from the agent safe to print in a CI log: a piece (after
/// any line break) that would start a workflow command gets a one-dot
/// leader (`\u{2024}`) in front, and every `##[` a word joiner inside
/// (invisible, and not a `[`).
///
/// Then every control character but newline and tab is shown as a symbol
/// rather than sent: an escape sequence from the agent would otherwise
/// reach the user's terminal (clear the screen, retitle the window, set
/// the clipboard, move the cursor over warden's own lines), and a bare CR
/// would let a line overwrite the timestamp warden put before it. The
/// bidirectional overrides go the same way, so text cannot be shown in
/// an order other than the one it has.
pub(crate) fn neutralize(text: &str) -> std::borrow::Cow<'_, str> {
    if already_inert(text) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 3);
    for piece in text.split_inclusive(BREAKS) {
        if piece.trim_start().starts_with("::") {
            out.push('\u{2024}');
        }
        out.push_str(piece);
    }
    std::borrow::Cow::Owned(inert_controls(&break_old_commands(&out)))
}

/// Whether [`neutralize`] would leave `text` as it is, decided from its
/// bytes alone for the common case: one line of printable ASCII (or tabs)
/// that does not start a workflow command and holds no `##[`. Anything
/// else (a line break, a control, any non-ASCII character) takes the full
/// path. A replay or a flood prints millions of such lines.
fn already_inert(text: &str) -> bool {
    let b = text.as_bytes();
    // Without a branch per byte, so that the compiler vectorizes it: bit 0
    // for a byte to make inert, bit 1 for a `#` (then `##[` is looked for).
    let class =
        |c: &u8| u8::from((*c < 0x20 && *c != b'\t') | (*c >= 0x7f)) | u8::from(*c == b'#') << 1;
    let mut seen = 0;
    for chunk in b.chunks(64) {
        seen |= chunk.iter().fold(0, |n, c| n | class(c));
        if seen & 1 != 0 {
            return false;
        }
    }
    !text.trim_start().starts_with("::") && (seen == 0 || memchr::memmem::find(b, b"##[").is_none())
}

/// C0 controls as their Unicode control pictures (`ESC` as `␛`), DEL as
/// `␡`, C1 controls and the bidirectional embeddings, overrides and
/// isolates as `�`; newline and tab stay.
fn inert_controls(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\n' | '\t' => c,
            '\0'..='\u{1f}' => char::from_u32(0x2400 + c as u32).unwrap_or('\u{fffd}'),
            '\u{7f}' => '\u{2421}',
            '\u{80}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => '\u{fffd}',
            c => c,
        })
        .collect()
}

fn break_old_commands(s: &str) -> String {
    s.replace("##[", "##\u{2060}[")
}

/// A `--json` line made safe for a CI log: JSON strings already escape
/// every line break and a line starts with `{`; what is left is `##[`
/// inside a string, written `#\u0023[` (the same text to a JSON reader).
pub(crate) fn json_line(line: Vec<u8>) -> Vec<u8> {
    if memchr::memmem::find(&line, b"##[").is_none() {
        return line;
    }
    let mut out = Vec::with_capacity(line.len() + 8);
    write_json_line(&mut out, &line).expect("a Vec takes every write");
    out
}

/// [`json_line`] written straight to `out`, without a copy of the line.
pub(crate) fn write_json_line(out: &mut impl std::io::Write, line: &[u8]) -> std::io::Result<()> {
    let mut from = 0;
    for at in memchr::memmem::find_iter(line, b"##[") {
        out.write_all(&line[from..at])?;
        out.write_all(br"#\u0023")?;
        from = at + 2;
    }
    out.write_all(&line[from..])
}

/// A table cell from text that may be the agent's: one line, with
/// Markdown and HTML taken literally, so it cannot add rows, links,
/// images or headings to the summary.
fn cell(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            c if BREAKS.contains(&c) => out.push(' '),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '(' | ')' | '!' | '|' | '#' | '~' | '{' | '}' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.replace("::", ":\u{200b}:")
}

pub(crate) fn summary_markdown(r: &Report) -> String {
    let verdict = r.verdict.map_or("unknown", |v| v.as_str());
    let icon = if verdict == "succeeded" { "✅" } else { "❌" };
    let mut md = format!("### {icon} warden: `{}` {verdict}\n\n", cell(&r.agent));
    md.push_str("| | |\n|---|---|\n");
    // `v` is Markdown already made safe (see `cell`).
    let mut row_md = |k: &str, v: String| md.push_str(&format!("| {k} | {v} |\n"));
    row_md("why", cell(&r.reason));
    row_md("duration", super::ms(r.duration_ms));
    row_md("longest silence", super::ms(r.longest_silence_ms));
    row_md("stall warnings", r.stall_warnings.to_string());
    if r.agent != "exec" {
        row_md("tool calls", r.reported.tool_calls.to_string());
        row_md(
            "tokens",
            format!(
                "{} in, {} out, {} cache read",
                warden_events::Tokens::shown(r.reported.tokens.input),
                warden_events::Tokens::shown(r.reported.tokens.output),
                warden_events::Tokens::shown(r.reported.tokens.cache_read)
            ),
        );
        if let Some(c) = r.reported.cost_usd {
            row_md("cost", format!("${c:.4}"));
        }
    }
    if !r.budgets.is_empty() {
        let spent: Vec<String> = r
            .budgets
            .iter()
            .map(|b| {
                format!(
                    "{}: {}",
                    b.name_and_limit(),
                    warden_run::budget::amount(b.budget, b.reached)
                )
            })
            .collect();
        row_md("budgets", cell(&spent.join("; ")));
    }
    if r.orphans_killed > 0 {
        row_md("orphans killed", r.orphans_killed.to_string());
    }
    if r.commits.is_none() {
        row_md("commits", "unknown (see the error)".into());
    }
    if let Some(commits) = r.commits.as_ref().filter(|c| !c.is_empty()) {
        row_md(
            "commits",
            commits
                .iter()
                .map(|c| {
                    format!(
                        "`{}` {}",
                        cell(&c.sha[..c.sha.len().min(10)]).replace('`', ""),
                        cell(&c.subject)
                    )
                })
                .collect::<Vec<_>>()
                .join("<br>"),
        );
    }
    row_md("run", cell(&r.run_id));
    md.push('\n');
    md
}

/// The annotation of a session's own failed verdict (`check_failed`,
/// `setup_failed`, `hook_failed`, `merge_conflict`): no run failed, so
/// no run's annotation said it.
pub(crate) fn annotate_session(g: &GitHub, s: &warden_run::SessionReport) {
    if let Some(msg) = session_verdict_message(s) {
        g.error(&msg);
    }
}

/// `check_failed: check `make test` after iteration 3 exited with status
/// 1 ...`: what a session's own failed verdict says; `None` for another
/// verdict (a run's, which its run's end said).
pub(crate) fn session_verdict_message(s: &warden_run::SessionReport) -> Option<String> {
    use warden_run::Verdict;
    let v @ (Verdict::CheckFailed
    | Verdict::SetupFailed
    | Verdict::HookFailed
    | Verdict::MergeConflict) = s.verdict?
    else {
        return None;
    };
    let failed_hook = s.hooks.iter().find(|h| !h.passed);
    let why = match v {
        Verdict::CheckFailed => s
            .checks
            .last()
            .filter(|c| !c.passed)
            .map(super::lines::step_finished_line),
        Verdict::SetupFailed | Verdict::HookFailed => {
            failed_hook.map(super::lines::step_finished_line)
        }
        _ if !s.merge_conflicts.is_empty() => Some(format!(
            "merge conflict in {}: both branches are as they were",
            s.merge_conflicts.join(", ")
        )),
        _ => None,
    };
    let why = why.or_else(|| s.error.clone()).unwrap_or_default();
    Some(format!("{}: {why}", v.as_str()))
}

/// A table of Markdown rows, the cells already made safe (see `cell`).
fn table(head: &[&str], rows: &[Vec<String>]) -> String {
    let mut md = format!("| {} |\n|{}\n", head.join(" | "), "---|".repeat(head.len()));
    for row in rows {
        md.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    md
}

fn verdict_cell(v: Option<warden_run::Verdict>, none: &str) -> String {
    match v {
        Some(warden_run::Verdict::Succeeded) => "✅ succeeded".into(),
        Some(v) => format!("❌ {}", v.as_str()),
        None => format!("❌ {none}"),
    }
}

fn cost_cell(c: Option<f64>) -> String {
    c.map_or("-".into(), |c| format!("${c:.4}"))
}

/// A path as the summary shows it: relative to the workflow's workspace
/// when it is inside it (as an artifact of it would name it).
fn path_cell(p: &std::path::Path) -> String {
    let workspace = std::env::var_os("GITHUB_WORKSPACE").map(std::path::PathBuf::from);
    let shown = workspace
        .as_deref()
        .and_then(|w| p.strip_prefix(w).ok())
        .unwrap_or(p);
    format!("`{}`", cell(&shown.display().to_string()).replace('`', ""))
}

/// The batch's one step summary: its counts, then a row per entry.
pub(crate) fn batch_summary_markdown(
    r: &warden_run::BatchReport,
    batch_dir: &std::path::Path,
) -> String {
    let icon = if r.succeeded == r.runs.len() {
        "✅"
    } else {
        "❌"
    };
    let mut md = format!(
        "### {icon} warden batch `{}`: {} succeeded, {} failed, {} cancelled of {}, in {}\n\n",
        cell(&r.batch_id).replace('`', ""),
        r.succeeded,
        r.failed,
        r.cancelled,
        r.runs.len(),
        super::ms(r.duration_ms)
    );
    let rows: Vec<Vec<String>> = r
        .runs
        .iter()
        .map(|run| {
            let s = run.session.as_ref();
            // A verdict of the session's own (its check, a hook, the
            // merge) is not its last run's.
            let why = s
                .and_then(session_verdict_message)
                .or_else(|| s.and_then(|s| s.runs.last()).map(|l| l.reason.clone()))
                .or_else(|| run.error.clone())
                .unwrap_or_default();
            vec![
                cell(&run.name),
                verdict_cell(run.verdict, "not run"),
                cell(&why),
                super::ms(run.duration_ms),
                s.map_or("-".into(), |s| {
                    format!(
                        "{} in, {} out",
                        warden_events::Tokens::shown(s.tokens.input),
                        warden_events::Tokens::shown(s.tokens.output)
                    )
                }),
                cost_cell(s.and_then(|s| s.cost_usd)),
                s.map_or("-".into(), |s| {
                    warden_run::git::count_shown(s.commits.as_deref())
                }),
                path_cell(&s.map_or_else(|| batch_dir.join(&run.name), |s| s.session_dir.clone())),
            ]
        })
        .collect();
    md.push_str(&table(
        &[
            "run",
            "verdict",
            "why",
            "duration",
            "tokens",
            "cost",
            "commits",
            "directory",
        ],
        &rows,
    ));
    md.push_str(&format!(
        "\nThe batch's report: {}\n\n",
        path_cell(&batch_dir.join("batch.json"))
    ));
    md
}

/// A session's one step summary: how it ended, then a row per run.
pub(crate) fn session_summary_markdown(s: &warden_run::SessionReport) -> String {
    let verdict = s.verdict.map_or("unknown", |v| v.as_str());
    let icon = if verdict == "succeeded" { "✅" } else { "❌" };
    let mut md = format!(
        "### {icon} warden session `{}`: {verdict}\n\n",
        cell(&s.name).replace('`', "")
    );
    let mut facts = vec![
        vec![
            "iterations".into(),
            format!("{} of {}", s.iterations_run, s.iterations_requested),
        ],
        vec![
            "stopped by".into(),
            s.stopped_because.as_str().replace('_', " "),
        ],
        vec!["duration".into(), super::ms(s.duration_ms)],
        vec![
            "tokens".into(),
            format!(
                "{} in, {} out",
                warden_events::Tokens::shown(s.tokens.input),
                warden_events::Tokens::shown(s.tokens.output)
            ),
        ],
        vec!["cost".into(), cost_cell(s.cost_usd)],
        vec![
            "commits".into(),
            warden_run::git::count_shown(s.commits.as_deref()),
        ],
    ];
    if let Some(wt) = &s.worktree {
        facts.push(vec![
            "branch".into(),
            format!("`{}`", cell(&wt.branch).replace('`', "")),
        ]);
    }
    if let Some(last) = s.checks.last() {
        facts.push(vec![
            "check".into(),
            // Not as code: a code span would show the cell's escapes
            // (`&gt;`) as they are.
            format!(
                "{} {}: {}",
                if last.passed { "✅" } else { "❌" },
                cell(&last.command),
                cell(&super::lines::step_how(last))
            ),
        ]);
    }
    if let (Some(into), Some(commit)) = (&s.merged_into, &s.merge_commit) {
        facts.push(vec![
            "merged into".into(),
            format!(
                "`{}` at `{}`",
                cell(into).replace('`', ""),
                cell(&commit[..commit.len().min(12)]).replace('`', "")
            ),
        ]);
    }
    if !s.merge_conflicts.is_empty() {
        facts.push(vec![
            "merge conflict".into(),
            s.merge_conflicts
                .iter()
                .map(|f| format!("`{}`", cell(f).replace('`', "")))
                .collect::<Vec<_>>()
                .join(", "),
        ]);
    }
    facts.push(vec!["directory".into(), path_cell(&s.session_dir)]);
    md.push_str(&table(&["", ""], &facts));
    md.push('\n');
    // Each check and hook, in the order they ran.
    let steps = super::lines::steps_in_order(s);
    if !steps.is_empty() {
        let rows: Vec<Vec<String>> = steps
            .iter()
            .map(|st| {
                vec![
                    cell(st.kind.as_str()),
                    st.iteration.map_or("-".into(), |i| i.to_string()),
                    cell(&st.command),
                    if st.passed {
                        "✅ passed".into()
                    } else {
                        format!("❌ {}", cell(&st.how()))
                    },
                    super::ms(st.duration_ms),
                    path_cell(&st.run_dir),
                ]
            })
            .collect();
        md.push_str(&table(
            &[
                "step",
                "iteration",
                "command",
                "result",
                "duration",
                "output",
            ],
            &rows,
        ));
        md.push('\n');
    }
    let rows: Vec<Vec<String>> = s
        .runs
        .iter()
        .map(|r| {
            vec![
                r.iteration.to_string(),
                r.attempt.to_string(),
                verdict_cell(r.verdict, "unknown"),
                cell(&r.reason),
                super::ms(r.duration_ms),
                format!(
                    "{} in, {} out",
                    warden_events::Tokens::shown(r.tokens.input),
                    warden_events::Tokens::shown(r.tokens.output)
                ),
                cost_cell(r.cost_usd),
                warden_run::git::count_shown(r.commits.as_deref()),
            ]
        })
        .collect();
    md.push_str(&table(
        &[
            "iteration",
            "attempt",
            "verdict",
            "why",
            "duration",
            "tokens",
            "cost",
            "commits",
        ],
        &rows,
    ));
    md.push('\n');
    md
}

#[cfg(test)]
mod tests {

    #[test]
    fn agent_escape_sequences_and_carriage_returns_never_reach_a_terminal() {
        let shown = neutralize("a\x1b]0;owned\x07b\x1b[2Jc\rd\u{9b}31me\u{202e}f\tg");
        assert!(
            !shown.chars().any(|c| c.is_control() && c != '\t'),
            "no control character is sent: {shown:?}"
        );
        assert_eq!(
            shown,
            "a\u{241b}]0;owned\u{2407}b\u{241b}[2Jc\u{240d}d\u{fffd}31me\u{fffd}f\tg"
        );
        assert_eq!(neutralize("two\nlines"), "two\nlines");
    }

    use super::*;

    /// Every line a runner would see, split as it splits them.
    fn runner_lines(s: &str) -> Vec<&str> {
        s.split("\r\n")
            .flat_map(|l| l.split(['\r', '\n']))
            .collect()
    }

    fn starts_a_command(line: &str) -> bool {
        line.trim_start().starts_with("::") || line.contains("##[")
    }

    #[test]
    fn workflow_commands_from_the_agent_are_neutralized() {
        assert!(!neutralize("::error::injected").starts_with("::"));
        assert!(!neutralize("  ::add-mask::x").trim_start().starts_with("::"));
        assert_eq!(neutralize("plain"), "plain");
        // The quick path for plain lines sends nothing doubtful around it.
        for (text, inert) in [
            ("\t ::warning::x", false),
            ("x ##[error]y", false),
            ("tab\there", true),
            ("del\x7f", false),
            ("caf\u{e9}", false),
            ("cr\r", false),
        ] {
            assert_eq!(already_inert(text), inert, "{text:?}");
            if inert {
                assert_eq!(neutralize(text), text);
            }
        }
        assert_eq!(neutralize("a::b std::vec"), "a::b std::vec");
        assert_eq!(escape_data("a%b\nc"), "a%25b%0Ac");
    }

    #[test]
    fn no_split_of_a_neutralized_line_starts_a_command() {
        let hostile = [
            "progress\r::error title=x::owned",
            "progress\r\n::error::owned",
            "a\n::add-mask::secret",
            "a\r \t::stop-commands::tok",
            "a\r\u{a0}::error::nbsp",
            "a\u{2028}::error::ls",
            "\r\r\n\n::warning::x",
            "see ##[error]old style",
            "see ###[error]x ##[add-mask]y",
            "##[set-output name=a]b",
        ];
        for h in hostile {
            for text in [
                neutralize(h).into_owned(),
                format!("[00:01]   say| {}", neutralize(h)),
            ] {
                for line in runner_lines(&text) {
                    assert!(!starts_a_command(line), "{h:?} gave the line {line:?}");
                }
            }
            let data = escape_data(h);
            assert_eq!(runner_lines(&data).len(), 1, "{h:?}");
            assert!(!data.contains("##["), "{data:?}");
        }
    }

    #[test]
    fn json_lines_keep_their_meaning_without_old_style_commands() {
        for text in ["x ##[error]y ###[z", "##[", "###[##[", "#[ ##", "##[##[##["] {
            let v = serde_json::json!({ "text": text });
            let line = json_line(serde_json::to_vec(&v).unwrap());
            assert!(!line.windows(3).any(|w| w == b"##["), "{text}");
            let back: serde_json::Value = serde_json::from_slice(&line).unwrap();
            assert_eq!(back, v);
        }
    }

    #[test]
    fn summary_cells_take_markdown_and_html_literally() {
        let c = cell("done\r| x | y |\n![i](http://e/x.png) <img src=x> [l](u) ::error::z");
        assert!(!c.contains(['\r', '\n']), "{c}");
        assert!(!c.contains("<img"), "{c}");
        assert!(!c.contains("!["), "{c}");
        assert!(!c.contains(" | "), "{c}");
        assert!(!c.contains("::"), "{c}");
    }
}
