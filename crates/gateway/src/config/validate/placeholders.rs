//! No placeholder secret runs: a secret holding the marker `REPLACE-ME` (in any case), as
//! written, after a `whsec_` prefix, or base64- or hex-decoded, is refused at its key. Every
//! placeholder the repo ships carries the marker, so a copied example cannot go live with a
//! value anyone holding the repo knows.

use std::borrow::Cow;

use base64::Engine;

use super::*;

/// The marker every shipped placeholder carries.
const MARKER: &[u8] = b"replace-me";

impl Validator {
    /// Each secret of the config (after its `*_file` was read), at the key it came from.
    pub(super) fn placeholders(&mut self, c: &Config) {
        let at_file = |plain: String, file: &Option<String>| match file {
            Some(_) => format!("{plain}_file"),
            None => plain,
        };
        if let Some(t) = &c.admin_token {
            self.placeholder(
                at_file("admin_token".into(), &c.admin_token_file),
                t.expose(),
            );
        }
        if let Some(r) = &c.redis {
            self.placeholder(at_file("redis.url".into(), &r.url_file), &r.url);
            for (i, u) in r.urls.iter().enumerate() {
                self.placeholder(format!("redis.urls[{i}]"), u);
            }
        }
        for (i, a) in c.agents.iter().enumerate() {
            if let Some(t) = &a.ingest_token {
                let key = at_file(format!("agents[{i}].ingest_token"), &a.ingest_token_file);
                self.placeholder(key, t.expose());
            }
            if let Some((_, v)) = &a.upstream_auth_header {
                let key = at_file(
                    format!("agents[{i}].upstream_auth_header"),
                    &a.upstream_auth_header_file,
                );
                self.placeholder(key, v.expose());
            }
        }
        for (i, s) in c.subscribers.iter().enumerate() {
            let key = at_file(format!("subscribers[{i}].secret"), &s.secret_file);
            for k in &s.secret {
                self.placeholder(key.clone(), k.expose());
            }
            if let Some((_, v)) = &s.auth_header {
                let key = at_file(format!("subscribers[{i}].auth_header"), &s.auth_header_file);
                self.placeholder(key, v.expose());
            }
        }
    }

    fn placeholder(&mut self, key: String, secret: &str) {
        if is_placeholder(secret) {
            self.problem(
                key,
                "is a placeholder (it holds REPLACE-ME): put a secret of your own here",
            );
        }
    }
}

/// Whether `secret` carries the marker: as written, or any of its words (a header value is
/// `Bearer <token>`) after a `whsec_` prefix, as written or base64- or hex-decoded.
pub(super) fn is_placeholder(secret: &str) -> bool {
    if has_marker(secret.as_bytes()) || has_marker(&percent_decoded(secret)) {
        return true;
    }
    secret
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty())
        .map(|w| w.strip_prefix("whsec_").unwrap_or(w))
        .any(|w| decodings(w).any(|d| has_marker(&d)))
}

/// `%XX` decoded (a URL's password is written so).
fn percent_decoded(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hexed = (b[i] == b'%')
            .then(|| std::str::from_utf8(b.get(i + 1..i + 3)?).ok())
            .flatten()
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hexed {
            Some(v) => {
                out.push(v);
                i += 3;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    out
}

fn has_marker(b: &[u8]) -> bool {
    b.windows(MARKER.len())
        .any(|w| w.eq_ignore_ascii_case(MARKER))
}

/// `w` as written, base64 (standard or URL-safe, padded or not) and hex, where it decodes.
fn decodings(w: &str) -> impl Iterator<Item = Cow<'_, [u8]>> {
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    let unpadded = w.trim_end_matches('=');
    let b64 = [STANDARD_NO_PAD, URL_SAFE_NO_PAD]
        .into_iter()
        .filter_map(move |e| e.decode(unpadded).ok());
    std::iter::once(Cow::Borrowed(w.as_bytes()))
        .chain(b64.map(Cow::Owned))
        .chain(hex(w).map(Cow::Owned))
}

fn hex(w: &str) -> Option<Vec<u8>> {
    let b = w.as_bytes();
    if b.len() % 2 != 0 {
        return None;
    }
    let nib = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    b.chunks(2)
        .map(|p| Some(nib(p[0])? << 4 | nib(p[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_is_found_as_written_prefixed_and_encoded() {
        use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
        let text = "REPLACE-ME-placeholder-webhook-key";
        for placeholder in [
            text.to_owned(),
            "replace-me".to_owned(),
            "Bearer Replace-Me-token".to_owned(),
            format!("whsec_{}", STANDARD.encode(text)),
            format!("whsec_{}", URL_SAFE_NO_PAD.encode("xx-replace-me?>")),
            format!("Bearer {}", STANDARD.encode(text)),
            text.bytes().map(|b| format!("{b:02x}")).collect::<String>(),
            "redis://a2a-gateway:REPLACE-ME-redis-password@redis.example.internal:6379".into(),
            "redis://u:REPLACE%2dME@10.0.0.1:6379".into(),
        ] {
            assert!(is_placeholder(&placeholder), "{placeholder}");
        }
        for real in [
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "replace-with-a-secret",
            "Bearer 0123456789abcdef0123456789abcdef",
            "redis://:s3cret@10.0.0.1:6379",
        ] {
            assert!(!is_placeholder(real), "{real}");
        }
    }
}
