//! `A2A-Version` (§3.6): which versions the gateway serves.
//!
//! The version is `Major.Minor`; a patch part "MUST not be considered" in negotiation, so `1.0`
//! and `1.0.1` are both 1.0 and served. Anything else is refused with VersionNotSupportedError:
//! an empty or absent value, which §3.6.2 says MUST be read as 0.3 (0.3 clients are a later
//! issue), `0.3`, and also `1.1` or a bare `1` — the gateway only knows 1.0's semantics, and
//! §3.6.2 asks for the requested Major.Minor's. (a2a-sdk's server accepts any 1.x; @a2a-js/sdk's
//! accepts exactly the strings its card lists; both SDK clients send exactly `1.0`.)
//!
//! The header wins over the query parameter when both are given; the gateway sends `1.0` to
//! agents as a header only (a2a-sdk's server does not read the query parameter).

use super::error::{A2aError, ErrorKind};

/// The version the gateway speaks and sends.
pub const SERVED: &str = "1.0";

/// Whether `v` (trimmed) is 1.0 with or without a patch part.
pub fn is_served(v: &str) -> bool {
    is_version(v, SERVED)
}

/// Whether `v` (trimmed) is `major_minor` (`1.0`, `0.3`) with or without a patch part: the
/// patch "MUST not be considered" (§3.6).
pub fn is_version(v: &str, major_minor: &str) -> bool {
    match v.trim().strip_prefix(major_minor) {
        Some("") => true,
        Some(rest) => rest.strip_prefix('.').is_some_and(|p| {
            !p.is_empty() && p.len() <= 9 && p.bytes().all(|b| b.is_ascii_digit())
        }),
        None => false,
    }
}

/// Checks the version a request names, by header or else query parameter.
pub fn check(header: Option<&str>, query: Option<&str>) -> Result<(), A2aError> {
    let asked = header.or(query).map(str::trim).unwrap_or("");
    if is_served(asked) {
        return Ok(());
    }
    let message = if asked.is_empty() {
        "A2A-Version is empty or absent, which means 0.3; this gateway serves 1.0".to_owned()
    } else {
        format!(
            "A2A-Version {:?} is not supported; this gateway serves 1.0",
            asked.chars().take(32).collect::<String>()
        )
    };
    Err(A2aError::new(ErrorKind::VersionNotSupported, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_point_zero_with_any_patch_is_served() {
        for ok in ["1.0", " 1.0 ", "1.0.0", "1.0.1", "1.0.12"] {
            assert!(is_served(ok), "{ok}");
        }
        for bad in [
            "", "0.3", "0.3.0", "1", "1.1", "1.00", "1.0.", "1.0.x", "10.0", "1.0-rc1", "v1.0",
        ] {
            assert!(!is_served(bad), "{bad}");
        }
    }

    #[test]
    fn header_wins_and_absence_is_refused() {
        assert!(check(Some("1.0"), None).is_ok());
        assert!(check(None, Some("1.0")).is_ok());
        assert!(check(Some("1.0"), Some("0.3")).is_ok());
        let e = check(Some("0.3"), Some("1.0")).expect_err("header wins");
        assert_eq!(e.kind, ErrorKind::VersionNotSupported);
        let e = check(None, None).expect_err("absent is 0.3");
        assert!(e.message.contains("0.3"));
        assert!(check(Some(""), None).is_err());
        let long = "9".repeat(1000);
        assert!(check(Some(&long), None).is_err_and(|e| e.message.len() < 120));
    }
}
