//! The live status line on a terminal (indicatif), redrawn in place.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use super::{ViewState, short};

pub(crate) struct Live {
    bar: ProgressBar,
    color: bool,
    /// The terminal's settings before warden changed them.
    saved: Option<rustix::termios::Termios>,
}

impl Live {
    pub(crate) fn new() -> Self {
        let bar = ProgressBar::with_draw_target(None, super::console::QueuedTerm::target());
        // The message is cut to the terminal's width (less a column, so
        // the cursor never waits at the right edge): a line that wraps
        // cannot be redrawn in place.
        let style = ProgressStyle::with_template("{spinner} {msg}")
            .expect("a valid template")
            .tick_chars("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏ ");
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(120));
        Self {
            bar,
            color: super::console::color(),
            saved: keep_output_on_interrupt(),
        }
    }

    /// Prints a line above the status line.
    pub(crate) fn println(&self, text: &str) {
        self.bar.println(text);
    }

    pub(crate) fn update(&self, s: &ViewState) {
        let cols = usize::from(super::console::terminal_size().0);
        self.bar
            .set_message(fit(&status(s, self.color), cols.saturating_sub(3).max(8)));
    }

    /// Shows `text` as the status line (a check or hook running).
    pub(crate) fn show(&self, text: &str) {
        let cols = usize::from(super::console::terminal_size().0);
        self.bar
            .set_message(fit(text, cols.saturating_sub(3).max(8)));
    }

    /// Removes the status line, leaving nothing behind.
    pub(crate) fn clear(self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        if let Some(t) = self.saved.take() {
            // Sent to the background meanwhile, warden would be stopped by
            // SIGTTOU here: see `without_tty_stop`.
            let _ = crate::signals::without_tty_stop(|| {
                rustix::termios::tcsetattr(
                    std::io::stderr(),
                    rustix::termios::OptionalActions::Now,
                    &t,
                )
            });
        }
    }
}

/// Ctrl-C makes the terminal echo `^C` where the cursor is, which moves it
/// off the status line, and throw away output not yet shown, which can eat
/// half a redraw: either leaves a stale status line behind. While the view
/// is up the terminal does neither (no ECHOCTL, NOFLSH); the old settings
/// come back when the view ends.
fn keep_output_on_interrupt() -> Option<rustix::termios::Termios> {
    use rustix::termios::{LocalModes, OptionalActions, tcgetattr, tcsetattr};
    let saved = tcgetattr(std::io::stderr()).ok()?;
    let mut t = saved.clone();
    t.local_modes |= LocalModes::NOFLSH;
    t.local_modes -= LocalModes::ECHOCTL;
    crate::signals::without_tty_stop(|| tcsetattr(std::io::stderr(), OptionalActions::Now, &t))
        .ok()?;
    Some(saved)
}

/// `claude opus │ 01:23 │ quiet 12.0s │ Bash 45.0s │ 3 tools │ 1.2k/340 tok $0.04 │ 2 retries │ 2/5 │ last text`
pub(crate) fn status(s: &ViewState, color: bool) -> String {
    let mut parts = Vec::new();
    let mut who = s.agent.name().to_string();
    // The model, the tool's name and the last text come from the agent:
    // shown inert, like every line (see `github::neutralize`).
    if let Some(m) = &s.model {
        who.push(' ');
        who.push_str(&super::github::neutralize(m));
    }
    parts.push(who);
    parts.push(short(s.started.elapsed()));
    let quiet = s.last_activity.elapsed();
    let mut q = format!("quiet {}", short(quiet));
    // Coloured by the supervisor's own deadline (stretched while a tool
    // with a declared limit runs; none in the completion window), so the
    // colour never shows a stall that is not coming.
    if let Some(deadline) = s.stall_deadline
        && color
    {
        let stall = deadline.saturating_duration_since(s.last_activity);
        let frac = quiet.as_secs_f64() / stall.as_secs_f64().max(0.001);
        if frac >= 0.8 {
            q = format!("\x1b[31m{q}\x1b[0m");
        } else if frac >= 0.5 {
            q = format!("\x1b[33m{q}\x1b[0m");
        }
    }
    parts.push(q);
    if let Some((name, _, since)) = &s.tool {
        parts.push(format!(
            "{} {}",
            super::github::neutralize(name),
            short(since.elapsed())
        ));
    }
    if s.tool_calls > 0 {
        parts.push(format!("{} tools", s.tool_calls));
    }
    if s.tokens.input.unwrap_or(0) + s.tokens.output.unwrap_or(0) > 0 {
        let mut t = format!("{}/{} tok", kilo(s.tokens.input), kilo(s.tokens.output));
        if let Some(c) = s.cost {
            t.push_str(&format!(" ${c:.2}"));
        }
        parts.push(t);
    }
    match s.retries {
        0 => {}
        1 => parts.push("1 retry".into()),
        n => parts.push(format!("{n} retries")),
    }
    if let Some((i, n)) = s.iteration {
        parts.push(format!("iter {i}/{n}"));
    }
    if let Some(t) = &s.last_text {
        parts.push(super::github::neutralize(t).into_owned());
    }
    parts.join(" │ ")
}

/// A count, shortened; `?` when it is not known.
fn kilo(n: Option<u64>) -> String {
    let Some(n) = n else {
        return "?".into();
    };
    if n >= 10_000 {
        format!("{}k", n / 1000)
    } else if n >= 1000 {
        format!("{:.1}k", n as f64 / 1000.0)
    } else {
        n.to_string()
    }
}

/// `text` cut to `width` visible characters; colour escapes do not count,
/// and a cut inside a coloured stretch resets the colour.
pub(crate) fn fit(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len());
    let mut visible = 0;
    let mut chars = text.chars().peekable();
    let mut colored = false;
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            let mut seq = String::from(c);
            for n in chars.by_ref() {
                seq.push(n);
                if n.is_ascii_alphabetic() {
                    break;
                }
            }
            colored = seq != "\x1b[0m";
            out.push_str(&seq);
            continue;
        }
        if visible + 1 > width {
            if out.ends_with(' ') {
                out.pop();
            }
            out.push('…');
            if colored {
                out.push_str("\x1b[0m");
            }
            return out;
        }
        out.push(c);
        visible += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_is_red_only_near_the_supervisors_own_deadline() {
        use std::time::Instant;
        let limits = warden_run::Limits {
            stall_timeout: Some(Duration::from_secs(12)),
            ..warden_run::Limits::default()
        };
        let mut s = ViewState::new(warden_events::Agent::Claude, &limits);
        s.last_activity = Instant::now() - Duration::from_secs(10);
        // A tool with a declared 15 min limit is open: the deadline is far.
        s.stall_deadline = Some(s.last_activity + Duration::from_secs(930));
        assert!(
            !status(&s, true).contains("\x1b[31m"),
            "{}",
            status(&s, true)
        );
        s.stall_deadline = Some(s.last_activity + Duration::from_secs(12));
        assert!(status(&s, true).contains("\x1b[31m"));
        // The completion window: no stall is coming.
        s.stall_deadline = None;
        assert!(!status(&s, true).contains("\x1b["));
    }

    #[test]
    fn fit_cuts_by_visible_width_and_closes_colour() {
        assert_eq!(fit("abcdef", 10), "abcdef");
        assert_eq!(fit("abcdef", 4), "abcd…");
        let coloured = "ab\x1b[33mquiet 1s\x1b[0m tail";
        let cut = fit(coloured, 5);
        assert_eq!(cut, "ab\x1b[33mqui…\x1b[0m");
        assert_eq!(fit(coloured, 100), coloured);
    }

    #[test]
    fn status_shows_the_supervisors_retry_count() {
        use warden_events::Event;
        use warden_events::event::Stamped;
        let mut s = ViewState::new(warden_events::Agent::Gemini, &Default::default());
        assert!(!status(&s, false).contains("retr"));
        let snapshot = |retries| Stamped {
            schema_version: warden_events::SchemaVersion,
            t_ms: 10,
            event: Event::Status {
                last_activity_ms: Some(5),
                activity_lines: 1,
                silence_before_ms: 0,
                longest_silence_ms: 5,
                stall_deadline_ms: None,
                tokens: Default::default(),
                cost_usd: None,
                tool_calls: 0,
                retries,
                tool: None,
            },
        };
        s.observe(&snapshot(1));
        assert!(
            status(&s, false).contains("│ 1 retry"),
            "{}",
            status(&s, false)
        );
        s.observe(&snapshot(2));
        assert!(
            status(&s, false).contains("│ 2 retries"),
            "{}",
            status(&s, false)
        );
    }
}
