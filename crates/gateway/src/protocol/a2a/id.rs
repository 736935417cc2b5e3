//! A2A ids: task, context, message, artifact and push-config ids.
//!
//! The spec leaves ids opaque (the agent's, "e.g. UUID"). The gateway still has to bound and
//! judge them: they become ledger keys, REST path segments and log fields. Its rule (issue 26):
//! 1 to [`MAX_ID_BYTES`] bytes of *visible* characters, where visible means no Unicode control
//! character (C0, DEL, C1), no whitespace of any kind, and no Unicode format/separator characters
//! that render as nothing (zero-width space and joiners, the BOM, bidi controls). Everything else
//! is allowed, including `/`, `:`, `%` and non-ASCII letters: REST paths percent-encode ids
//! (see [`super::rest`]), so those characters are data, not syntax. Whitespace is refused because
//! an id that differs from another only by a trailing space or a no-break space is a spoofing
//! tool in logs and listings, and no SDK generates one.

/// The longest id the gateway accepts, in UTF-8 bytes.
pub const MAX_ID_BYTES: usize = 256;

/// Whether `s` is an id the gateway accepts: 1..=256 bytes, every character visible.
pub fn valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_ID_BYTES
        && (s.bytes().all(|b| b.is_ascii_graphic()) || s.chars().all(visible))
}

/// Why `s` is not a valid id, for a violation message; `None` when it is one.
pub fn id_problem(s: &str) -> Option<String> {
    if s.is_empty() {
        return Some("an id must not be empty".to_owned());
    }
    if s.len() > MAX_ID_BYTES {
        return Some(format!(
            "an id is at most {MAX_ID_BYTES} bytes, this one is {}",
            s.len()
        ));
    }
    // Nearly every id is printable ASCII (a UUID): visible, read a byte at a time.
    if s.bytes().all(|b| b.is_ascii_graphic()) {
        return None;
    }
    s.chars().find(|c| !visible(*c)).map(|c| {
        format!(
            "an id holds visible characters only, not U+{:04X}",
            u32::from(c)
        )
    })
}

fn visible(c: char) -> bool {
    !(c.is_control()
        || c.is_whitespace()
        || matches!(
            c,
            '\u{200B}'..='\u{200F}' // zero-width space, joiners, LRM/RLM
                | '\u{202A}'..='\u{202E}' // bidi embeddings and overrides
                | '\u{2060}'..='\u{2064}' // word joiner, invisible operators
                | '\u{2066}'..='\u{2069}' // bidi isolates
                | '\u{FEFF}' // BOM / zero-width no-break space
                | '\u{00AD}' // soft hyphen
        ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opaque_ids_with_path_syntax_are_ids() {
        for ok in [
            "a",
            "3f2c9a4e-1b7d-4c1e-9f00-2a3b4c5d6e7f",
            "tasks/1:cancel",
            "a%2Fb",
            "ünïcødé-任务",
            "~!@#$^&*()_+={}[]|\\\"'<>?,.",
        ] {
            assert!(valid_id(ok), "{ok}");
            assert_eq!(id_problem(ok), None);
        }
        assert!(valid_id(&"x".repeat(256)));
    }

    #[test]
    fn empty_long_and_invisible_ids_are_not() {
        assert!(!valid_id(""));
        assert!(!valid_id(&"x".repeat(257)));
        // 300 bytes of two-byte characters: counted in bytes, not characters.
        assert!(!valid_id(&"é".repeat(150)));
        assert!(valid_id(&"é".repeat(128)));
        for bad in [
            "a b",
            "a\tb",
            "a\nb",
            "a\u{0}b",
            "a\u{7f}b",
            "a\u{85}b",
            "a\u{a0}b",
            "a\u{200b}b",
            "a\u{202e}b",
            "a\u{feff}",
            "a\u{3000}b",
        ] {
            assert!(!valid_id(bad), "{bad:?}");
            assert!(id_problem(bad).is_some());
        }
        assert!(id_problem(&"x".repeat(300)).is_some_and(|m| m.contains("300")));
    }
}
