//! Retries of transient failures: which ends of a run are worth another
//! attempt (`--retry-on`), how many (`--retries`), and how long to wait
//! before each (`--retry-backoff`, exponential with full jitter, never
//! shorter than a retry-after the agent reported).
//!
//! The decision reads only the run's report: its verdict (stalled, startup
//! timeout) and the class of the error the agent reported. An error no
//! retry fixes (credentials, a used-up quota, a request the API refuses)
//! is never retried, whatever the verdict.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use warden_events::ErrorClass;

use crate::{Report, Verdict};

/// A kind of transient failure that `--retry-on` may name.
#[derive(
    Serialize,
    Deserialize,
    schemars::JsonSchema,
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
)]
#[serde(rename_all = "snake_case")]
pub enum RetryOn {
    /// The agent failed on HTTP 429 (`error_class: rate_limit`).
    RateLimited,
    /// The agent failed on a server error (`error_class: api`: HTTP 5xx).
    ServerError,
    /// The agent failed because the API was overloaded
    /// (`error_class: overloaded`: HTTP 529, 503).
    Overloaded,
    /// The agent failed to reach the API (`error_class: network`).
    Network,
    /// The run was ended as `stalled`.
    Stalled,
    /// The run was ended as `startup_timeout`.
    StartupTimeout,
}

impl RetryOn {
    pub const ALL: [RetryOn; 6] = [
        RetryOn::RateLimited,
        RetryOn::ServerError,
        RetryOn::Overloaded,
        RetryOn::Network,
        RetryOn::Stalled,
        RetryOn::StartupTimeout,
    ];

    /// The name in settings and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            RetryOn::RateLimited => "rate_limited",
            RetryOn::ServerError => "server_error",
            RetryOn::Overloaded => "overloaded",
            RetryOn::Network => "network",
            RetryOn::Stalled => "stalled",
            RetryOn::StartupTimeout => "startup_timeout",
        }
    }

    /// For people: `rate limited`.
    pub fn words(self) -> String {
        self.as_str().replace('_', " ")
    }

    /// `--retry-on LIST`: names separated by commas, or `all`, or `none`.
    pub fn parse_list(s: &str) -> Result<Vec<RetryOn>, String> {
        let s = s.trim();
        match s {
            "all" => return Ok(Self::ALL.to_vec()),
            "none" | "" => return Ok(Vec::new()),
            _ => {}
        }
        let mut list = Vec::new();
        for name in s.split(',').map(str::trim) {
            let on: RetryOn = name.parse()?;
            if !list.contains(&on) {
                list.push(on);
            }
        }
        list.sort();
        Ok(list)
    }
}

impl std::str::FromStr for RetryOn {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        RetryOn::ALL
            .into_iter()
            .find(|o| o.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "`{s}` is not a transient failure warden retries; name some of {} (or `all`, `none`)",
                    RetryOn::ALL.map(RetryOn::as_str).join(", ")
                )
            })
    }
}

impl std::fmt::Display for RetryOn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What `--retry-on` covers when not given: every failure of the model's
/// API that passes, and a CLI that never got going. Not `stalled`: a stall
/// is as often the task's own (a test that hangs) as the API's, and each
/// retry of it costs the whole stall timeout again.
pub const DEFAULT_RETRY_ON: [RetryOn; 5] = [
    RetryOn::RateLimited,
    RetryOn::ServerError,
    RetryOn::Overloaded,
    RetryOn::Network,
    RetryOn::StartupTimeout,
];

/// `--retry-backoff` when not given: the first wait is up to this long.
pub const DEFAULT_BACKOFF: Duration = Duration::from_secs(5);

/// The longest a computed backoff gets, however many retries came before.
pub const MAX_BACKOFF: Duration = Duration::from_secs(5 * 60);

/// The longest retry-after warden honours: a longer one (a daily quota's
/// reset, say) is waited for only this long.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(15 * 60);

/// How a session retries runs that ended by a transient failure.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetryPolicy {
    /// How many times one run may be tried again (0: never).
    pub retries: u32,
    /// Which transient failures are retried.
    pub on: Vec<RetryOn>,
    /// The base of the exponential backoff.
    pub backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            retries: 0,
            on: DEFAULT_RETRY_ON.to_vec(),
            backoff: DEFAULT_BACKOFF,
        }
    }
}

/// The transient failure a run ended by, if it did. Reads the verdict and
/// the class of the error the run reports; an error no retry fixes wins
/// over any verdict, and a run refused for its structured output is the
/// output retries' business.
pub fn transient_failure(report: &Report) -> Option<RetryOn> {
    // The class is the last error's, or one no retry fixes if any came
    // (see `warden_events::Summary::error`).
    if report
        .reported
        .error_class
        .is_some_and(ErrorClass::no_retry_fixes)
    {
        return None;
    }
    match report.verdict? {
        Verdict::Stalled => Some(RetryOn::Stalled),
        Verdict::StartupTimeout => Some(RetryOn::StartupTimeout),
        Verdict::AgentFailed if report.output_error.is_none() => match report.reported.error_class?
        {
            ErrorClass::RateLimit => Some(RetryOn::RateLimited),
            ErrorClass::Api => Some(RetryOn::ServerError),
            ErrorClass::Overloaded => Some(RetryOn::Overloaded),
            ErrorClass::Network => Some(RetryOn::Network),
            _ => None,
        },
        _ => None,
    }
}

impl RetryPolicy {
    /// Whether a run that ended as `report` says, after `retries_done`
    /// retries of it, is tried again, and for which failure.
    pub fn should_retry(&self, report: &Report, retries_done: u32) -> Option<RetryOn> {
        transient_failure(report).filter(|&f| self.retries_again(f, retries_done))
    }

    /// Whether a run that ended by `failure`, after `retries_done`
    /// retries of it, is tried again.
    pub(crate) fn retries_again(&self, failure: RetryOn, retries_done: u32) -> bool {
        retries_done < self.retries && self.on.contains(&failure)
    }

    /// The wait before retry number `retry` (1 for the first): a uniform
    /// draw `jitter` in `[0, 1)` of `backoff * 2^(retry-1)` (at most
    /// [`MAX_BACKOFF`]), but never less than `retry_after` (at most
    /// [`MAX_RETRY_AFTER`]).
    pub fn delay(&self, retry: u32, jitter: f64, retry_after: Option<Duration>) -> Duration {
        let doublings = retry.saturating_sub(1).min(30);
        let ceiling = self
            .backoff
            .saturating_mul(1 << doublings)
            .min(MAX_BACKOFF.max(self.backoff));
        let drawn = ceiling.mul_f64(jitter.clamp(0.0, 1.0));
        let floor = retry_after.map_or(Duration::ZERO, |r| r.min(MAX_RETRY_AFTER));
        drawn.max(floor)
    }
}

/// A uniform draw in `[0, 1)` from the kernel's random source; the clock's
/// nanoseconds where there is none.
pub(crate) fn jitter() -> f64 {
    let mut buf = [0u8; 8];
    let filled = rustix::rand::getrandom(&mut buf, rustix::rand::GetRandomFlags::empty());
    let bits = match filled {
        Ok(8) => u64::from_le_bytes(buf),
        _ => u64::from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos()),
        )
        .wrapping_mul(0x9E37_79B9_7F4A_7C15),
    };
    // The top 53 bits: every value a float in [0, 1) can take evenly.
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// A retry-after said in an error message (`retry-after: 30`, `Please
/// retry in 41.6s`, `try again in 20 seconds`, `"retryDelay": "41s"`):
/// the CLIs that print their API's error put the server's hint there.
pub fn retry_after_in(message: &str) -> Option<Duration> {
    let m = message.to_ascii_lowercase();
    // With the unit a bare number is in: the `-ms` headers count in
    // milliseconds (and come first: `retry-after` is a prefix of one).
    const CUES: [(&str, f64); 8] = [
        ("retry-after-ms", 0.001),
        ("retry_after_ms", 0.001),
        ("retry-after", 1.0),
        ("retry after", 1.0),
        ("retry in", 1.0),
        ("try again in", 1.0),
        ("retrydelay", 1.0),
        ("retry_after", 1.0),
    ];
    CUES.iter().find_map(|&(cue, bare)| {
        let at = m.find(cue)? + cue.len();
        let rest = m[at..].trim_start_matches(|c: char| {
            c.is_whitespace() || c == ':' || c == '"' || c == '=' || c == '\''
        });
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let n: f64 = rest[..end].parse().ok().filter(|n: &f64| n.is_finite())?;
        let unit = rest[end..].trim_start();
        let unit = &unit[..unit
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(unit.len())];
        let secs = match unit {
            "ms" | "msec" | "millisecond" | "milliseconds" => n / 1000.0,
            "s" | "sec" | "secs" | "second" | "seconds" => n,
            "m" | "min" | "mins" | "minute" | "minutes" => n * 60.0,
            "h" | "hr" | "hrs" | "hour" | "hours" => n * 3600.0,
            _ => n * bare,
        };
        Duration::try_from_secs_f64(secs).ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(retries: u32, backoff_ms: u64) -> RetryPolicy {
        RetryPolicy {
            retries,
            on: DEFAULT_RETRY_ON.to_vec(),
            backoff: Duration::from_millis(backoff_ms),
        }
    }

    #[test]
    fn the_backoff_doubles_under_full_jitter_up_to_its_cap() {
        let p = policy(9, 1000);
        let ms = |retry, jitter| p.delay(retry, jitter, None).as_millis();
        assert_eq!(ms(1, 0.0), 0, "full jitter may be no wait at all");
        assert_eq!(ms(1, 0.5), 500);
        assert_eq!(ms(2, 0.5), 1000);
        assert_eq!(ms(3, 0.999_999), 3999);
        // 1s * 2^9 = 512s, cut to the 5 min cap.
        assert_eq!(ms(10, 0.5), 150_000);
        assert_eq!(ms(u32::MAX, 0.5), 150_000, "no overflow");
        // A base above the cap is the cap.
        let big = RetryPolicy {
            backoff: Duration::from_secs(600),
            ..policy(3, 0)
        };
        assert_eq!(big.delay(4, 0.5, None), Duration::from_secs(300));
    }

    #[test]
    fn a_retry_after_is_the_least_wait_up_to_its_cap() {
        let p = policy(3, 100);
        let after = |s| Some(Duration::from_secs(s));
        assert_eq!(p.delay(1, 0.5, after(7)), Duration::from_secs(7));
        assert_eq!(p.delay(1, 0.5, after(24 * 3600)), MAX_RETRY_AFTER);
        let p = policy(3, 60_000);
        assert_eq!(
            p.delay(1, 0.5, after(1)),
            Duration::from_secs(30),
            "a shorter hint does not shorten the backoff"
        );
    }

    #[test]
    fn jitter_draws_stay_in_bounds_and_vary() {
        let draws: Vec<f64> = (0..200).map(|_| jitter()).collect();
        assert!(draws.iter().all(|d| (0.0..1.0).contains(d)), "{draws:?}");
        let distinct: std::collections::BTreeSet<u64> = draws.iter().map(|d| d.to_bits()).collect();
        assert!(distinct.len() > 190, "the draws repeat: {}", distinct.len());
        let p = policy(5, 2000);
        for retry in 1..=5 {
            let ceiling = Duration::from_millis(2000 << (retry - 1));
            for _ in 0..50 {
                let d = p.delay(retry, jitter(), None);
                assert!(d < ceiling, "retry {retry}: {d:?} not under {ceiling:?}");
            }
        }
    }

    fn report(verdict: Verdict, class: Option<ErrorClass>) -> Report {
        let mut r = crate::report::sample();
        r.verdict = Some(verdict);
        r.reported.error_class = class;
        r
    }

    #[test]
    fn the_decision_table() {
        use ErrorClass as C;
        use RetryOn as O;
        use Verdict as V;
        let rows: &[(V, Option<C>, Option<O>)] = &[
            (V::Succeeded, None, None),
            (V::Succeeded, Some(C::RateLimit), None),
            (V::AgentFailed, Some(C::RateLimit), Some(O::RateLimited)),
            (V::AgentFailed, Some(C::Api), Some(O::ServerError)),
            (V::AgentFailed, Some(C::Overloaded), Some(O::Overloaded)),
            (V::AgentFailed, Some(C::Network), Some(O::Network)),
            (V::AgentFailed, Some(C::Authentication), None),
            (V::AgentFailed, Some(C::Quota), None),
            (V::AgentFailed, Some(C::InvalidRequest), None),
            (V::AgentFailed, Some(C::Tool), None),
            (V::AgentFailed, Some(C::Other), None),
            (V::AgentFailed, None, None),
            (V::Stalled, None, Some(O::Stalled)),
            (V::Stalled, Some(C::RateLimit), Some(O::Stalled)),
            (V::Stalled, Some(C::Authentication), None),
            (V::StartupTimeout, None, Some(O::StartupTimeout)),
            (V::TimedOut, Some(C::RateLimit), None),
            (V::Cancelled, Some(C::RateLimit), None),
            (V::SpawnFailed, None, None),
            (V::InternalError, None, None),
        ];
        for (verdict, class, want) in rows {
            let r = report(*verdict, *class);
            assert_eq!(transient_failure(&r), *want, "{verdict:?} {class:?}");
        }
        let mut r = report(V::AgentFailed, Some(C::RateLimit));
        r.output_error = Some("no <out> tag".into());
        assert_eq!(transient_failure(&r), None, "the output retries' business");

        let p = policy(2, 1);
        let limited = report(V::AgentFailed, Some(C::RateLimit));
        assert_eq!(p.should_retry(&limited, 0), Some(O::RateLimited));
        assert_eq!(p.should_retry(&limited, 1), Some(O::RateLimited));
        assert_eq!(p.should_retry(&limited, 2), None, "retries used up");
        let stalled = report(V::Stalled, None);
        assert_eq!(p.should_retry(&stalled, 0), None, "not in the default set");
        let p = RetryPolicy {
            on: vec![O::Stalled],
            ..policy(1, 1)
        };
        assert_eq!(p.should_retry(&stalled, 0), Some(O::Stalled));
        assert_eq!(p.should_retry(&limited, 0), None);
        assert_eq!(policy(0, 1).should_retry(&limited, 0), None);
    }

    #[test]
    fn retry_on_lists_are_read_by_name() {
        assert_eq!(
            RetryOn::parse_list("stalled, rate_limited,stalled").unwrap(),
            [RetryOn::RateLimited, RetryOn::Stalled]
        );
        assert_eq!(RetryOn::parse_list("all").unwrap(), RetryOn::ALL);
        assert!(RetryOn::parse_list("none").unwrap().is_empty());
        let e = RetryOn::parse_list("rate_limited,timeout").unwrap_err();
        assert!(
            e.contains("`timeout`") && e.contains("startup_timeout"),
            "{e}"
        );
    }

    #[test]
    fn retry_after_hints_are_read_from_error_text() {
        let s = |m: &str| retry_after_in(m).map(|d| d.as_millis());
        assert_eq!(s("429 Too Many Requests (retry-after: 30)"), Some(30_000));
        assert_eq!(s("Please retry in 41.6s."), Some(41_600));
        assert_eq!(s(r#""retryDelay": "7s""#), Some(7_000));
        assert_eq!(s("Rate limited; try again in 2 minutes"), Some(120_000));
        assert_eq!(s("retry after 250ms"), Some(250));
        assert_eq!(s("429 Too Many Requests"), None);
        assert_eq!(s("retry in soon"), None);
        assert_eq!(s("retry-after-ms: 500"), Some(500));
        assert_eq!(s(r#""retry_after_ms": 1500"#), Some(1_500));
        assert_eq!(s("quota resets; try again in 2 hours"), Some(7_200_000));
        assert_eq!(s("retry after 1h"), Some(3_600_000));
    }
}
