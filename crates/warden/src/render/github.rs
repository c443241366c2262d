//! GitHub Actions: workflow annotations and the step summary.
//!
//! Anything that came from the agent is neutralized before it reaches a
//! line start or an annotation, so an agent cannot issue workflow commands
//! (`::error::`, `::add-mask::`, `::stop-commands::`) through warden.

use std::io::Write;

use warden_run::Report;

pub struct GitHub {
    summary: Option<std::path::PathBuf>,
}

impl GitHub {
    pub fn from_env() -> Option<Self> {
        if std::env::var_os("GITHUB_ACTIONS").is_none_or(|v| v != "true") {
            return None;
        }
        Some(Self {
            summary: std::env::var_os("GITHUB_STEP_SUMMARY").map(Into::into),
        })
    }

    pub fn warning(&self, msg: &str) {
        eprintln!("::warning title=warden::{}", escape_data(msg));
    }

    pub fn error(&self, msg: &str) {
        eprintln!("::error title=warden::{}", escape_data(msg));
    }

    /// Appends a Markdown summary of the run to `$GITHUB_STEP_SUMMARY`.
    pub fn step_summary(&self, r: &Report) {
        let Some(path) = &self.summary else { return };
        let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        else {
            return;
        };
        let _ = f.write_all(summary_markdown(r).as_bytes());
    }
}

/// Escapes an annotation's message the way the runner decodes it.
pub fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Makes a line that would start a workflow command harmless.
pub fn neutralize(line: &str) -> String {
    if line.trim_start().starts_with("::") {
        format!("\u{2024}{line}")
    } else {
        line.to_string()
    }
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|")
        .replace('\n', " ")
        .replace("::", ":\u{200b}:")
}

pub fn summary_markdown(r: &Report) -> String {
    let verdict = r.verdict.map_or("unknown", |v| v.as_str());
    let icon = if verdict == "succeeded" { "✅" } else { "❌" };
    let mut md = format!("### {icon} warden: `{}` {verdict}\n\n", r.agent);
    md.push_str("| | |\n|---|---|\n");
    let mut row = |k: &str, v: String| md.push_str(&format!("| {k} | {} |\n", cell(&v)));
    row("why", r.reason.clone());
    row("duration", super::ms(r.duration_ms));
    row("longest silence", super::ms(r.longest_silence_ms));
    row("stall warnings", r.stall_warnings.to_string());
    if r.agent != "exec" {
        row("tool calls", r.tool_calls.to_string());
        row(
            "tokens",
            format!(
                "{} in, {} out, {} cache read",
                r.tokens.input, r.tokens.output, r.tokens.cache_read
            ),
        );
        if let Some(c) = r.cost_usd {
            row("cost", format!("${c:.4}"));
        }
    }
    if r.orphans_killed > 0 {
        row("orphans killed", r.orphans_killed.to_string());
    }
    if !r.commits.is_empty() {
        row(
            "commits",
            r.commits
                .iter()
                .map(|c| format!("`{}` {}", &c.sha[..c.sha.len().min(10)], c.subject))
                .collect::<Vec<_>>()
                .join("<br>"),
        );
    }
    row("run", r.run_id.clone());
    md.push('\n');
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workflow_commands_from_the_agent_are_neutralized() {
        assert!(!neutralize("::error::injected").starts_with("::"));
        assert!(!neutralize("  ::add-mask::x").trim_start().starts_with("::"));
        assert_eq!(neutralize("plain"), "plain");
        assert_eq!(escape_data("a%b\nc"), "a%25b%0Ac");
    }
}
