//! Percent-encoding of URL components (RFC 3986), and a raw query string's parameters read
//! within a bound: what every route that takes a query reads it with.

/// At most this many query parameters are read from one request.
pub const MAX_QUERY_PARAMS: usize = 64;

/// The query parameter `name` of a raw query string, decoded (for `A2A-Version`).
pub fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    query?
        .split('&')
        .take(MAX_QUERY_PARAMS)
        .filter_map(|p| p.split_once('=').or(Some((p, ""))))
        .find(|(k, _)| decode_query(k).is_some_and(|k| k.eq_ignore_ascii_case(name)))
        .and_then(|(_, v)| decode_query(v))
}

/// A query string's name or value, decoded (`+` is a space); `None` for a bad escape or UTF-8.
pub fn decode_query(s: &str) -> Option<String> {
    decode(s, true)
}

/// `%XX` decoding (and `+` as space in a query); `None` for a bad escape or invalid UTF-8.
pub fn decode(s: &str, plus_is_space: bool) -> Option<String> {
    String::from_utf8(decode_bytes(s, plus_is_space)?).ok()
}

/// `%XX` decoding (and `+` as space in a query) to bytes, which need not be UTF-8; `None` for a
/// bad escape.
pub fn decode_bytes(s: &str, plus_is_space: bool) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = b.get(i + 1..i + 3)?;
                let hi = (hex[0] as char).to_digit(16)?;
                let lo = (hex[1] as char).to_digit(16)?;
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Some(out)
}

/// Percent-encodes everything but RFC 3986's unreserved characters, for a path segment or a
/// query value.
pub fn encode_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
