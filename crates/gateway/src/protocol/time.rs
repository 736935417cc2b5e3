//! The protocol's timestamps: ISO 8601 UTC with milliseconds, `YYYY-MM-DDTHH:MM:SS.sssZ`.
//!
//! Conformance wants the exact form; ordering of updates only needs an instant, so a lenient
//! RFC 3339 parse is kept for agents run in `report` mode.

use chrono::{DateTime, NaiveDate, SecondsFormat, Utc};

/// Milliseconds since the Unix epoch, if `s` is exactly `YYYY-MM-DDTHH:MM:SS.sssZ` and a real date.
pub fn parse_strict(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 24
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'.'
        || b[23] != b'Z'
    {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<u32> {
        b[from..to].iter().try_fold(0u32, |acc, &c| {
            c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
        })
    };
    let date = NaiveDate::from_ymd_opt(num(0, 4)? as i32, num(5, 7)?, num(8, 10)?)?;
    let dt = date.and_hms_milli_opt(num(11, 13)?, num(14, 16)?, num(17, 19)?, num(20, 23)?)?;
    Some(dt.and_utc().timestamp_millis())
}

/// Milliseconds since the epoch for any RFC 3339 timestamp (strict form first, it is the fast path).
pub fn parse_lenient(s: &str) -> Option<i64> {
    parse_strict(s).or_else(|| {
        DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|d| d.timestamp_millis())
    })
}

/// How far ahead of the gateway's clock an `updated_at` may be. Further ahead, an update would
/// make every honest later one look stale and freeze the task.
pub const MAX_SKEW_MS: i64 = 5 * 60 * 1000;

/// Now, in ms since the epoch (the edge passes it into the checks; the core reads no clock).
pub fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

/// Now, in the protocol's form.
pub fn now() -> String {
    format(Utc::now())
}

/// A UTC instant in the protocol's form.
pub fn format(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_accepts_only_the_protocol_form() {
        assert_eq!(parse_strict("1970-01-01T00:00:01.500Z"), Some(1500));
        assert_eq!(
            parse_strict("2023-10-27T10:05:00.000Z"),
            Some(1_698_401_100_000)
        );
        for bad in [
            "2023-10-27T10:05:00Z",
            "2023-10-27T10:05:00.000+00:00",
            "2023-10-27 10:05:00.000Z",
            "2023-02-30T10:05:00.000Z",
            "2023-10-27T25:05:00.000Z",
            "2023-10-27T10:05:00.00aZ",
            "",
            "2023-10-27T10:05:00.0000Z",
        ] {
            assert_eq!(parse_strict(bad), None, "{bad}");
        }
    }

    #[test]
    fn lenient_orders_offsets_correctly() {
        assert_eq!(
            parse_lenient("2023-10-27T12:05:00+02:00"),
            parse_strict("2023-10-27T10:05:00.000Z")
        );
        assert_eq!(parse_lenient("yesterday"), None);
    }

    #[test]
    fn now_round_trips_strictly() {
        assert!(parse_strict(&now()).is_some());
    }
}
