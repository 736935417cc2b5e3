//! GET /ui: the live fleet page, served from files compiled into the binary (no CDN, nothing
//! fetched at run time, no build step: plain HTML, CSS and a script, in `crates/gateway/ui/`).
//!
//! The page itself is public, like `/openapi.json`: it holds no data. What it shows comes from
//! the routes it calls with the key the operator types in (`/api/fleet`, `/events`, the task
//! routes), each admitted as any other request. Its Content-Security-Policy lets it load only
//! its own two files and talk only to this origin: no inline script, no third party.

use std::sync::OnceLock;

use hyper::header::{
    HeaderMap, HeaderValue, CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG,
    IF_NONE_MATCH, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use hyper::{Response, StatusCode};

use crate::http::body::Body;
use crate::http::error::ApiResult;
use crate::http::route::UiAsset;

const PAGE: &str = include_str!("../../../ui/index.html");
const SCRIPT: &str = include_str!("../../../ui/app.js");
const STYLE: &str = include_str!("../../../ui/app.css");

/// Only the page's own files, only this origin to talk to (fetch and EventSource), no frames;
/// and no HTML sink at all (Trusted Types with no policy: `innerHTML` and the like throw), so
/// "values go in as text" is enforced by the browser, not only by the script's care.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; \
                   require-trusted-types-for 'script'; trusted-types 'none'";

fn file(a: UiAsset) -> (&'static str, &'static str) {
    match a {
        UiAsset::Page => (PAGE, "text/html; charset=utf-8"),
        UiAsset::Script => (SCRIPT, "text/javascript; charset=utf-8"),
        UiAsset::Style => (STYLE, "text/css; charset=utf-8"),
    }
}

/// The entity tag of each file (FNV-1a of its bytes): a browser revalidates (`no-cache`) and
/// gets a 304 until the binary changes.
fn etag(a: UiAsset) -> &'static HeaderValue {
    static TAGS: OnceLock<[HeaderValue; 3]> = OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        [UiAsset::Page, UiAsset::Script, UiAsset::Style].map(|a| {
            let hash = file(a).0.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
            HeaderValue::try_from(format!("\"{hash:016x}\""))
                .unwrap_or(HeaderValue::from_static("\"0\""))
        })
    });
    &tags[a as usize]
}

/// One of the page's files, or 304 if the browser holds it already.
pub fn asset(a: UiAsset, req: &HeaderMap) -> ApiResult {
    let (body, content_type) = file(a);
    let tag = etag(a);
    // Weak comparison (RFC 9110 §13.1.2): a proxy that compresses the file marks the tag weak.
    let fresh = req.get(IF_NONE_MATCH).is_some_and(|v| {
        v.as_bytes().split(|&b| b == b',').any(|t| {
            let t = t.trim_ascii();
            t == b"*" || t.strip_prefix(b"W/").unwrap_or(t) == tag.as_bytes()
        })
    });
    let mut res = if fresh {
        let mut r = Response::new(Body::empty());
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        r
    } else {
        let mut r = Response::new(Body::full(body));
        r.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        r
    };
    let h = res.headers_mut();
    h.insert(ETAG, tag.clone());
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    if a == UiAsset::Page {
        h.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
        h.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    }
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_only_its_own_files() {
        // No inline script or style (the CSP would block them), and no other origin.
        assert!(PAGE.contains(r#"<script src="/ui/app.js" defer></script>"#));
        assert!(PAGE.contains(r#"<link rel="stylesheet" href="/ui/app.css">"#));
        assert!(
            !PAGE.contains("<script>") && !PAGE.contains("<style") && !PAGE.contains(" style=")
        );
        for f in [PAGE, SCRIPT, STYLE] {
            // SVG's namespace is a name (createElementNS), never fetched: the one URL allowed.
            let f = f.replace("\"http://www.w3.org/2000/svg\"", "");
            assert!(
                !f.contains("http://") && !f.contains("https://"),
                "no third party"
            );
        }
        assert_eq!(SCRIPT.matches("http://").count(), 1, "only SVG's namespace");
    }

    #[test]
    fn a_browser_holding_the_file_gets_304() {
        let mut h = HeaderMap::new();
        let tag = etag(UiAsset::Script).clone();
        h.insert(IF_NONE_MATCH, tag.clone());
        let res = asset(UiAsset::Script, &h).expect("answer");
        assert_eq!(res.status(), StatusCode::NOT_MODIFIED);
        h.insert(
            IF_NONE_MATCH,
            HeaderValue::try_from(format!("\"x\", W/{}", tag.to_str().expect("ascii")))
                .expect("value"),
        );
        assert_eq!(
            asset(UiAsset::Script, &h).expect("answer").status(),
            StatusCode::NOT_MODIFIED,
            "a weak tag matches"
        );
        h.insert(IF_NONE_MATCH, HeaderValue::from_static("\"other\""));
        assert_eq!(
            asset(UiAsset::Script, &h).expect("answer").status(),
            StatusCode::OK
        );
        assert_ne!(etag(UiAsset::Page), etag(UiAsset::Style));
    }
}
