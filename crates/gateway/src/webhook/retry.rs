//! The retry policy: when to try a failed delivery again, and what a response means.
//!
//! Subscribers go down for minutes (deploys) or hours (outages); the schedule spreads attempts over
//! about a day, like Standard Webhooks' (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h), so a short blip
//! costs seconds and a long outage does not mean a dead letter by lunchtime. Jitter (±20 %) keeps
//! the deliveries that failed together during an outage from all coming back in the same second
//! when it ends. Everything here is pure: the random number and the clock are passed in, so the
//! policy is tested exactly.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chrono::{DateTime, NaiveDateTime};

use crate::config::WebhookConfig;

/// The longest the gateway ever waits between two attempts, whatever the schedule or a
/// `Retry-After` says: a subscriber asking for a week is treated as asking for a day, so a
/// delivery is not parked out of sight for longer than an operator would look for it.
pub const MAX_DELAY: Duration = Duration::from_secs(24 * 3600);

/// More retries than this is certainly a config mistake (and keeps attempt counts small).
pub const MAX_RETRIES: usize = 100;

/// The waits before each retry: entry `n` is the wait after attempt `n + 1` failed. The first
/// attempt is immediate and not part of the list, so `max_attempts` is one more than its length.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(try_from = "Vec<u64>")]
pub struct Schedule(Vec<Duration>);

/// Why a configured retry schedule was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// A zero wait would hammer a failing subscriber in a tight loop.
    #[error("retry delay #{index} is zero; every retry must wait at least a second")]
    Zero {
        /// Which wait, from 0.
        index: usize,
    },
    /// A wait longer than [`MAX_DELAY`].
    #[error("retry delay #{index} is {secs} s, longer than the maximum of {} s", MAX_DELAY.as_secs())]
    TooLong {
        /// Which wait, from 0.
        index: usize,
        /// The wait configured, in seconds.
        secs: u64,
    },
    /// More than [`MAX_RETRIES`] waits.
    #[error("{0} retries configured; at most {MAX_RETRIES}")]
    TooMany(usize),
}

impl Schedule {
    /// From config: a list of waits in seconds. An empty list means one attempt and no retry.
    pub fn from_secs(secs: &[u64]) -> Result<Schedule, ScheduleError> {
        if secs.len() > MAX_RETRIES {
            return Err(ScheduleError::TooMany(secs.len()));
        }
        let mut delays = Vec::with_capacity(secs.len());
        for (index, &s) in secs.iter().enumerate() {
            if s == 0 {
                return Err(ScheduleError::Zero { index });
            }
            if s > MAX_DELAY.as_secs() {
                return Err(ScheduleError::TooLong { index, secs: s });
            }
            delays.push(Duration::from_secs(s));
        }
        Ok(Schedule(delays))
    }

    /// The waits, in order.
    pub fn delays(&self) -> &[Duration] {
        &self.0
    }

    /// Attempts in all, the first one included.
    pub fn max_attempts(&self) -> u32 {
        // len <= MAX_RETRIES, so this never saturates in practice.
        u32::try_from(self.0.len())
            .unwrap_or(u32::MAX)
            .saturating_add(1)
    }

    /// How long to wait after `attempt` attempts have been made (1 after the first one failed),
    /// or `None` when they are exhausted and the delivery goes to the dead letters. `attempt` 0
    /// means none was made yet: go now.
    ///
    /// The scheduled wait is spread by ±20 % from `rand` (any uniformly random u64). A
    /// `Retry-After` is honoured when it asks for longer than that, capped at [`MAX_DELAY`] and
    /// spread by up to +20 % (never earlier than asked), so that every delivery a throttling
    /// subscriber answered with the same value does not come back at the same instant. One
    /// shorter than the schedule is ignored: the subscriber failed, so it does not get to
    /// shorten the back-off. No wait is longer than [`MAX_DELAY`].
    pub fn next_delay(
        &self,
        attempt: u32,
        retry_after: Option<Duration>,
        rand: u64,
    ) -> Option<Duration> {
        if attempt == 0 {
            return Some(Duration::ZERO);
        }
        let index = usize::try_from(attempt - 1).ok()?;
        let scheduled = *self.0.get(index)?;
        let jittered = scale_permille(scheduled, 800 + rand % 401).min(MAX_DELAY);
        let asked = retry_after
            .map(|ra| scale_permille(ra.min(MAX_DELAY), 1000 + (rand >> 32) % 201).min(MAX_DELAY))
            .unwrap_or(Duration::ZERO);
        Some(jittered.max(asked))
    }
}

/// `d * permille / 1000`, at millisecond precision, saturating.
fn scale_permille(d: Duration, permille: u64) -> Duration {
    let ms = d.as_millis().saturating_mul(u128::from(permille)) / 1000;
    Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

impl Schedule {
    /// From `[webhooks]`: `retry_schedule_secs` after `max_attempts`.
    pub fn from_config(cfg: &WebhookConfig) -> Result<Schedule, ScheduleError> {
        Schedule::from_secs(&cfg.retry_waits_secs())
    }
}

/// The config's default schedule (Standard Webhooks': 7 retries, 8 attempts in all).
impl Default for Schedule {
    fn default() -> Schedule {
        Schedule::from_config(&WebhookConfig::default()).expect("the default schedule is valid")
    }
}

impl TryFrom<Vec<u64>> for Schedule {
    type Error = ScheduleError;
    fn try_from(secs: Vec<u64>) -> Result<Schedule, ScheduleError> {
        Schedule::from_secs(&secs)
    }
}

/// What one attempt's result means for the delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// 2xx: done.
    Delivered,
    /// Try again on the schedule. `throttle`: the subscriber is overloaded or unreachable
    /// (429, 502, 503, 504, timeout, connection error), so the worker should also slow down
    /// everything else it sends to that subscriber rather than pile on.
    Retry {
        /// Slow down the subscriber's other deliveries too.
        throttle: bool,
    },
    /// A response that will not fix itself by retrying the same request (3xx: redirects are never
    /// followed, since their target has not been through the URL guard). Still retried on the
    /// schedule, since the subscriber's config may be fixed meanwhile, but counted as a failure.
    Failed,
    /// 410 Gone: the subscriber says the endpoint is gone for good; stop delivering to it until
    /// an operator re-enables it.
    Disable,
}

impl Outcome {
    /// Whether the delivery goes back on the schedule.
    pub fn retries(&self) -> bool {
        matches!(self, Outcome::Retry { .. } | Outcome::Failed)
    }
}

/// Classify an attempt by its status code; `None` is a timeout or connection error.
pub fn classify(status: Option<u16>) -> Outcome {
    match status {
        None | Some(429 | 502 | 503 | 504) => Outcome::Retry { throttle: true },
        Some(200..=299) => Outcome::Delivered,
        Some(410) => Outcome::Disable,
        Some(300..=399) => Outcome::Failed,
        // Other 4xx and 5xx, and anything outside the standard classes.
        Some(_) => Outcome::Retry { throttle: false },
    }
}

/// Parse a `Retry-After` value: delta-seconds (`120`) or an HTTP-date in any of the three forms
/// RFC 9110 says recipients must accept (IMF-fixdate, RFC 850, asctime). A date in the past is a
/// zero wait. Anything else is `None`: a malformed header is ignored, not an error.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    if value.bytes().all(|b| b.is_ascii_digit()) {
        // All digits: only overflow can fail, and an absurd wait is capped by the caller anyway.
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    let at = http_date_secs(value)?;
    let Ok(at) = u64::try_from(at) else {
        return Some(Duration::ZERO); // before 1970: long past
    };
    let at = UNIX_EPOCH.checked_add(Duration::from_secs(at))?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

fn http_date_secs(value: &str) -> Option<i64> {
    if let Ok(t) = DateTime::parse_from_rfc2822(value) {
        return Some(t.timestamp());
    }
    // RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`).
    ["%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"]
        .iter()
        .find_map(|fmt| NaiveDateTime::parse_from_str(value, fmt).ok())
        .map(|t| t.and_utc().timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1;
    const M: u64 = 60;
    const H: u64 = 3600;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// rand values that hit the ends and the middle of the jitter range.
    const LOW: u64 = 0; // -20 %
    const MID: u64 = 200; // 0 %
    const HIGH: u64 = 400; // +20 %

    #[test]
    fn default_is_close_to_standard_webhooks() {
        let s = Schedule::default();
        assert_eq!(
            s.delays(),
            &[
                secs(5 * S),
                secs(5 * M),
                secs(30 * M),
                secs(2 * H),
                secs(5 * H),
                secs(10 * H),
                secs(10 * H)
            ]
        );
        assert_eq!(s.max_attempts(), 8);
    }

    #[test]
    fn next_delay_follows_the_schedule_then_stops() {
        let s = Schedule::default();
        assert_eq!(s.next_delay(0, None, MID), Some(Duration::ZERO));
        for (i, want) in s.delays().iter().enumerate() {
            assert_eq!(s.next_delay(i as u32 + 1, None, MID), Some(*want));
        }
        assert_eq!(s.next_delay(7, None, MID), Some(secs(10 * H)));
        assert_eq!(
            s.next_delay(8, None, MID),
            None,
            "8 attempts made: exhausted"
        );
        assert_eq!(s.next_delay(9, None, MID), None);
        assert_eq!(s.next_delay(u32::MAX, None, MID), None);
    }

    #[test]
    fn jitter_spans_plus_minus_twenty_percent() {
        let s = Schedule::default();
        assert_eq!(s.next_delay(2, None, LOW), Some(secs(240)));
        assert_eq!(s.next_delay(2, None, HIGH), Some(secs(360)));
        assert_eq!(
            s.next_delay(1, None, LOW),
            Some(Duration::from_millis(4000))
        );
        assert_eq!(
            s.next_delay(1, None, HIGH),
            Some(Duration::from_millis(6000))
        );
        // Any rand stays within the bounds, and different rands spread.
        let mut seen = std::collections::HashSet::new();
        for r in (0..10_000u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)) {
            let d = s.next_delay(2, None, r).unwrap();
            assert!(d >= secs(240) && d <= secs(360), "{d:?}");
            seen.insert(d);
        }
        assert!(seen.len() > 100, "jitter barely varies: {}", seen.len());
    }

    #[test]
    fn retry_after_longer_than_the_schedule_is_honoured_never_earlier() {
        let s = Schedule::default();
        // After attempt 1 the schedule says 5 s; the subscriber asks for 60 s.
        for r in [0, u64::MAX, 12345 << 32, 200 << 32] {
            let d = s.next_delay(1, Some(secs(60)), r).unwrap();
            assert!(d >= secs(60) && d <= secs(72), "{d:?}");
        }
        assert_eq!(s.next_delay(1, Some(secs(60)), 0), Some(secs(60)));
        assert_eq!(s.next_delay(1, Some(secs(60)), 200 << 32), Some(secs(72)));
    }

    #[test]
    fn retry_after_shorter_than_the_schedule_is_ignored() {
        let s = Schedule::default();
        assert_eq!(s.next_delay(3, Some(secs(1)), MID), Some(secs(30 * M)));
        assert_eq!(
            s.next_delay(3, Some(Duration::ZERO), LOW),
            Some(secs(24 * M))
        );
    }

    #[test]
    fn retry_after_is_capped_at_a_day() {
        let s = Schedule::default();
        for r in [0, u64::MAX] {
            assert_eq!(s.next_delay(1, Some(secs(7 * 24 * H)), r), Some(MAX_DELAY));
            assert_eq!(s.next_delay(1, Some(Duration::MAX), r), Some(MAX_DELAY));
        }
        // Retry-After does not revive an exhausted delivery.
        assert_eq!(s.next_delay(8, Some(secs(60)), MID), None);
    }

    #[test]
    fn no_wait_exceeds_a_day_even_with_jitter() {
        let s = Schedule::from_secs(&[24 * H]).unwrap();
        assert_eq!(s.next_delay(1, None, HIGH), Some(MAX_DELAY));
        assert_eq!(s.next_delay(1, None, LOW), Some(secs(24 * H * 8 / 10)));
    }

    #[test]
    fn schedule_parses_from_config() {
        let s = Schedule::from_secs(&[1, 10, 100]).unwrap();
        assert_eq!(s.delays(), &[secs(1), secs(10), secs(100)]);
        assert_eq!(s.max_attempts(), 4);
        assert_eq!(s.next_delay(3, None, MID), Some(secs(100)));
        assert_eq!(s.next_delay(4, None, MID), None);

        let none = Schedule::from_secs(&[]).unwrap();
        assert_eq!(none.max_attempts(), 1);
        assert_eq!(none.next_delay(1, Some(secs(5)), MID), None);

        let s: Schedule = serde_json::from_str("[5, 300]").unwrap();
        assert_eq!(s.delays(), &[secs(5), secs(300)]);
        assert!(serde_json::from_str::<Schedule>("[5, 0]").is_err());
    }

    #[test]
    fn schedule_refuses_bad_config() {
        assert_eq!(
            Schedule::from_secs(&[5, 0, 10]),
            Err(ScheduleError::Zero { index: 1 })
        );
        assert_eq!(
            Schedule::from_secs(&[5, 24 * H + 1]),
            Err(ScheduleError::TooLong {
                index: 1,
                secs: 24 * H + 1
            })
        );
        assert!(Schedule::from_secs(&[24 * H]).is_ok());
        assert_eq!(
            Schedule::from_secs(&[1; MAX_RETRIES + 1]),
            Err(ScheduleError::TooMany(MAX_RETRIES + 1))
        );
        assert_eq!(
            Schedule::from_secs(&[1; MAX_RETRIES])
                .unwrap()
                .max_attempts(),
            MAX_RETRIES as u32 + 1
        );
    }

    #[test]
    fn classify_every_class() {
        use Outcome::*;
        let cases = [
            (None, Retry { throttle: true }),
            (Some(200), Delivered),
            (Some(201), Delivered),
            (Some(204), Delivered),
            (Some(299), Delivered),
            (Some(300), Failed),
            (Some(301), Failed),
            (Some(302), Failed),
            (Some(307), Failed),
            (Some(308), Failed),
            (Some(400), Retry { throttle: false }),
            (Some(401), Retry { throttle: false }),
            (Some(404), Retry { throttle: false }),
            (Some(409), Retry { throttle: false }),
            (Some(410), Disable),
            (Some(413), Retry { throttle: false }),
            (Some(429), Retry { throttle: true }),
            (Some(500), Retry { throttle: false }),
            (Some(501), Retry { throttle: false }),
            (Some(502), Retry { throttle: true }),
            (Some(503), Retry { throttle: true }),
            (Some(504), Retry { throttle: true }),
            (Some(505), Retry { throttle: false }),
            (Some(100), Retry { throttle: false }),
            (Some(599), Retry { throttle: false }),
            (Some(0), Retry { throttle: false }),
        ];
        for (status, want) in cases {
            assert_eq!(classify(status), want, "{status:?}");
        }
    }

    #[test]
    fn only_retry_and_failure_go_back_on_the_schedule() {
        assert!(Outcome::Retry { throttle: true }.retries());
        assert!(Outcome::Retry { throttle: false }.retries());
        assert!(Outcome::Failed.retries());
        assert!(!Outcome::Delivered.retries());
        assert!(!Outcome::Disable.retries());
    }

    /// 1994-11-06T08:49:37Z, the RFC's example date.
    const RFC_EXAMPLE: u64 = 784_111_777;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn retry_after_delta_seconds() {
        let now = at(RFC_EXAMPLE);
        assert_eq!(parse_retry_after("120", now), Some(secs(120)));
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("007", now), Some(secs(7)));
        assert_eq!(
            parse_retry_after("99999999999999999999999", now),
            Some(secs(u64::MAX))
        );
    }

    #[test]
    fn retry_after_http_date_in_all_three_forms() {
        let now = at(RFC_EXAMPLE - 90);
        for v in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(parse_retry_after(v, now), Some(secs(90)), "{v}");
        }
    }

    #[test]
    fn retry_after_date_counts_from_now_at_sub_second_precision() {
        let now = at(RFC_EXAMPLE - 10) + Duration::from_millis(250);
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now),
            Some(Duration::from_millis(9750))
        );
    }

    #[test]
    fn retry_after_date_in_the_past_is_zero() {
        let now = at(RFC_EXAMPLE + 3600);
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(
            parse_retry_after("Thu, 01 Jan 1970 00:00:00 GMT", now),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn retry_after_garbage_is_ignored() {
        let now = at(RFC_EXAMPLE);
        for v in [
            "",
            "   ",
            "-5",
            "+5",
            "1.5",
            "5s",
            "soon",
            "Sun, 06 Nov 1994",
            "Sun, 32 Nov 1994 08:49:37 GMT",
        ] {
            assert_eq!(parse_retry_after(v, now), None, "{v:?}");
        }
    }
}
