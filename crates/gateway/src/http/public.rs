//! The gateway's own address as its clients reach it, and what keeps an agent's address from
//! reaching them: an agent's URLs are rewritten to the gateway's routes before an answer
//! leaves (a client usually cannot reach the agent, and one that can would skip the gateway's
//! auth).
//!
//! The base of a URL is `public_url` when it is set. Without it, it comes from the request:
//! `https` exactly when `[tls]` is set, and the `Host` header (or HTTP/2's `:authority`), never
//! `X-Forwarded-*`, which any client can send; the answer then carries `Vary: Host`.

use std::borrow::Cow;

use hyper::header::{HeaderMap, HOST};
use hyper::Uri;
use serde_json::Value;

use crate::registry::Agent;
use crate::state::State;

/// The base of the URLs written in one answer.
pub struct Base<'a> {
    url: Cow<'a, str>,
    /// Taken from the request's `Host`: the answer must say `Vary: Host`.
    from_host: bool,
}

impl<'a> Base<'a> {
    /// The base for an answer to a request with these `headers` and `uri`.
    pub fn of(state: &'a State, headers: &HeaderMap, uri: &Uri) -> Base<'a> {
        if let Some(u) = state.config.public_url.as_deref() {
            return Base {
                url: Cow::Borrowed(u.trim_end_matches('/')),
                from_host: false,
            };
        }
        let scheme = if state.tls.is_some() { "https" } else { "http" };
        let host = headers
            .get(HOST)
            .and_then(|v| v.to_str().ok())
            .or_else(|| uri.authority().map(|a| a.as_str()))
            .filter(|h| plain_host(h));
        let host = match host {
            Some(h) => Cow::Borrowed(h),
            None => Cow::Owned(state.config.listen.to_string()),
        };
        Base {
            url: Cow::Owned(format!("{scheme}://{host}")),
            from_host: true,
        }
    }

    /// The base itself, without a trailing `/`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `{base}/agents/{name}/artifacts/{id}/content`.
    pub fn artifact_content(&self, agent: &str, artifact_id: &str) -> String {
        format!(
            "{}/agents/{agent}/artifacts/{artifact_id}/content",
            self.url
        )
    }

    /// `Vary: Host` on `headers` when the base came from the request.
    pub fn mark(&self, headers: &mut HeaderMap) {
        if self.from_host {
            crate::http::response::vary(headers, "host");
        }
    }
}

/// A `Host` that is a host and port, nothing a URL could be steered with.
fn plain_host(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 255
        && h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b))
}

/// Where `url` points, if it is on `agent`'s configured origin: its path and query (empty for
/// a URL that cannot be read, which counts as the agent's). Read as a browser reads it, with the
/// loopback names as one host: see [`crate::protocol::origin`].
///
/// With replicas, any replica's origin counts: each names its own files.
pub(crate) fn on_agent(agent: &Agent, url: &str) -> Option<String> {
    let on = |base: &str| crate::protocol::origin::Origin::parse(base)?.path_of(url);
    on(&agent.cfg.url).or_else(|| {
        let live = agent.replicas.live();
        live.iter()
            .filter(|r| *r.base != agent.cfg.url)
            .find_map(|r| on(&r.base))
    })
}

/// The `content` of each `file` artifact of a list that is on the agent's origin, rewritten to
/// the gateway's content route. Whether any was; an error for such a link whose artifact has no
/// usable id (it could be neither rewritten nor passed on).
pub fn rewrite_file_links(
    list: &mut Value,
    agent: &Agent,
    base: &Base<'_>,
) -> Result<bool, String> {
    let Some(items) = list.get_mut("artifacts").and_then(Value::as_array_mut) else {
        return Ok(false);
    };
    let mut changed = false;
    for a in items {
        if a.get("type").and_then(Value::as_str) != Some("file") {
            continue;
        }
        let Some(content) = a.get("content").and_then(Value::as_str) else {
            continue;
        };
        if on_agent(agent, content).is_none() {
            continue;
        }
        let id = a.get("artifact_id").and_then(Value::as_str);
        let Some(id) = id.filter(|id| crate::http::route::valid_id(id)) else {
            return Err(
                "a file artifact links to the agent's own address but has no valid artifact_id to link the gateway's content route with".into(),
            );
        };
        let link = base.artifact_content(&agent.cfg.name, id);
        a["content"] = Value::String(link);
        changed = true;
    }
    Ok(changed)
}

/// Headers of an agent's answer that name URLs: those that name the agent's own origin are
/// dropped on the way to the client (a create's `Location`, a `Content-Location`, a `Link`).
/// The content route's redirects are judged before this ([`redirect`]) and keep theirs.
pub fn drop_agent_urls(agent: &Agent, headers: &mut HeaderMap) {
    use hyper::header::{CONTENT_LOCATION, LINK, LOCATION};
    for name in [
        LOCATION,
        CONTENT_LOCATION,
        LINK,
        hyper::header::HeaderName::from_static("refresh"),
    ] {
        let names_agent = headers.get_all(&name).iter().any(|v| {
            // Not plain text: it cannot be judged, so it goes.
            let Ok(v) = v.to_str() else { return true };
            v.split([',', ';', '<', '>', '='])
                .map(str::trim)
                .filter(|part| part.contains("://") || part.starts_with('/'))
                .any(|part| on_agent(agent, part).is_some())
        });
        if names_agent {
            headers.remove(&name);
        }
    }
}

/// What to do with a redirect's `Location` from the agent's content route of `artifact_id`.
#[derive(Debug, PartialEq, Eq)]
pub enum Redirect {
    /// Not on the agent's origin: passed unchanged (a presigned storage URL, say).
    Elsewhere,
    /// The agent's own content route: rewritten to this.
    Gateway(String),
    /// Anywhere else on the agent's origin: an address no client should see.
    Refused,
}

/// Judge a `Location` from the agent's content route of `artifact_id`.
pub fn redirect(agent: &Agent, base: &Base<'_>, artifact_id: &str, location: &str) -> Redirect {
    let Some(path) = on_agent(agent, location) else {
        return Redirect::Elsewhere;
    };
    let (path, query) = match path.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path.as_str(), None),
    };
    // The agent's content route, under the agent's own base path if its url has one.
    let prefix = agent
        .cfg
        .url
        .parse::<Uri>()
        .ok()
        .map(|u| u.path().trim_end_matches('/').to_owned())
        .unwrap_or_default();
    let want = format!("{prefix}/artifacts/{artifact_id}/content");
    if path != want {
        return Redirect::Refused;
    }
    let mut to = base.artifact_content(&agent.cfg.name, artifact_id);
    if let Some(q) = query.filter(|q| !q.is_empty()) {
        to.push('?');
        to.push_str(q);
    }
    Redirect::Gateway(to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AgentConfig;
    use crate::registry::Registry;
    use hyper::header::HeaderValue;
    use std::sync::Arc;

    fn agent(url: &str) -> Arc<Agent> {
        let cfg = AgentConfig {
            name: "a".into(),
            url: url.into(),
            ..AgentConfig::default()
        };
        Registry::new(&[cfg]).by_name("a").cloned().expect("agent")
    }

    #[test]
    fn every_spelling_of_the_agents_origin_is_the_agents() {
        let a = agent("http://127.0.0.1:19101");
        for on in [
            "http://127.0.0.1:19101/files/x",
            "HTTP://127.0.0.1:19101/files/x",
            "http://127.0.0.1:19101./files/x",
            "//127.0.0.1:19101/files/x",
            "/files/x",
            "http:\\\\127.0.0.1:19101\\files\\x",
            "http://127.1:19101/files/x",
            "http://0x7f.0.0.1:19101/files/x",
            "http://127.0.0.1:19101\\@evil.example/files/x",
            "ht\ttp://127.0.0.1:19101/files/x",
            "http://user:pw@127.0.0.1:19101/files/x",
            "http://127.0.0.1:19101/a b.pdf",
        ] {
            assert!(on_agent(&a, on).is_some(), "{on:?} is the agent's");
        }
        for off in [
            "https://bucket.s3.example.com/x?sig=1",
            "http://127.0.0.1:19102/files/x",
            "https://127.0.0.1:19101/files/x",
            "http://evil.example/@127.0.0.1:19101",
        ] {
            assert!(on_agent(&a, off).is_none(), "{off:?} is elsewhere");
        }
        let d = agent("https://agent.example");
        assert!(on_agent(&d, "https://AGENT.example:443/x").is_some());
    }

    #[test]
    fn links_without_a_usable_id_are_refused_not_passed_on() {
        let a = agent("http://127.0.0.1:19101");
        let base = Base {
            url: Cow::Borrowed("https://gw.example"),
            from_host: false,
        };
        let mut ok = serde_json::json!({"artifacts": [
            {"artifact_id": "f1", "type": "file", "content": "http://127.0.0.1:19101/files/f1"},
            {"artifact_id": "f2", "type": "file", "content": "https://cdn.example/f2"},
        ]});
        assert_eq!(rewrite_file_links(&mut ok, &a, &base), Ok(true));
        assert_eq!(
            ok["artifacts"][0]["content"],
            "https://gw.example/agents/a/artifacts/f1/content"
        );
        assert_eq!(ok["artifacts"][1]["content"], "https://cdn.example/f2");
        for id in [
            serde_json::json!("../x"),
            serde_json::json!(7),
            serde_json::Value::Null,
        ] {
            let mut bad = serde_json::json!({"artifacts": [
                {"artifact_id": id, "type": "file", "content": "/files/x"},
            ]});
            assert!(rewrite_file_links(&mut bad, &a, &base).is_err(), "{bad}");
        }
    }

    #[test]
    fn url_headers_naming_the_agent_are_dropped_and_others_kept() {
        use hyper::header::{CONTENT_LOCATION, LINK, LOCATION};
        let a = agent("http://127.0.0.1:19101");
        let mut h = HeaderMap::new();
        h.insert(
            LOCATION,
            HeaderValue::from_static("http://127.0.0.1:19101/tasks/t1"),
        );
        h.insert(
            CONTENT_LOCATION,
            HeaderValue::from_static("https://cdn.example/t1"),
        );
        h.insert(
            LINK,
            HeaderValue::from_static(
                "<https://docs.example>; rel=help, <//127.0.0.1:19101/x>; rel=self",
            ),
        );
        drop_agent_urls(&a, &mut h);
        assert!(h.get(LOCATION).is_none() && h.get(LINK).is_none(), "{h:?}");
        assert_eq!(
            h.get(CONTENT_LOCATION).map(|v| v.as_bytes()),
            Some(&b"https://cdn.example/t1"[..])
        );
        let mut gw = HeaderMap::new();
        gw.insert(
            LOCATION,
            HeaderValue::from_static("https://gw.example/agents/a/artifacts/f1/content"),
        );
        drop_agent_urls(&a, &mut gw);
        assert!(gw.get(LOCATION).is_some(), "the gateway's own URL stays");
    }

    #[test]
    fn a_redirect_is_rewritten_only_to_its_own_content_route() {
        let a = agent("http://127.0.0.1:19101/v1");
        let base = Base {
            url: Cow::Borrowed("https://gw.example"),
            from_host: false,
        };
        assert_eq!(
            redirect(
                &a,
                &base,
                "f1",
                "http://127.0.0.1:19101/v1/artifacts/f1/content?dl=1"
            ),
            Redirect::Gateway("https://gw.example/agents/a/artifacts/f1/content?dl=1".into())
        );
        assert_eq!(
            redirect(&a, &base, "f1", "/v1/artifacts/f2/content"),
            Redirect::Refused
        );
        assert_eq!(
            redirect(&a, &base, "f1", "/downloads/f1"),
            Redirect::Refused
        );
        assert_eq!(
            redirect(&a, &base, "f1", "https://cdn.example/f1"),
            Redirect::Elsewhere
        );
    }
}
