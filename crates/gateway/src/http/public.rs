//! The gateway's own address as its clients reach it, and what keeps an agent's address from
//! reaching them: an agent's URLs are rewritten to the gateway's routes before an answer
//! leaves (a client usually cannot reach the agent, and one that can would skip the gateway's
//! auth).
//!
//! The base of a URL is `public_url` when it is set. Without it, it comes from the request:
//! `https` exactly when `[tls]` is set, and the `Host` header (or HTTP/2's `:authority`), never
//! `X-Forwarded-*`, which any client can send; the answer then carries `Vary: Host`.

use std::borrow::Cow;

use hyper::header::{HeaderMap, HeaderValue, HOST, VARY};
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
            headers.append(VARY, HeaderValue::from_static("host"));
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

/// Scheme, host and port (with the scheme's default), in lower case: what two URLs share when
/// they are on one origin. Read leniently, by hand: a URL `http::Uri` would refuse (a space in
/// its path, say) must still be recognised as the agent's, and a scheme-relative `//host/x`
/// takes `scheme`, the scheme of the answer it came in.
fn origin<'u>(url: &'u str, scheme: &str) -> Option<((String, String, u16), &'u str)> {
    let (scheme, rest) = match url.strip_prefix("//") {
        Some(rest) => (scheme.to_ascii_lowercase(), rest),
        None => {
            let (s, rest) = url.split_once("://")?;
            let plain = !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b));
            if !plain {
                return None;
            }
            (s.to_ascii_lowercase(), rest)
        }
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = match hostport.strip_prefix('[') {
        Some(v6) => {
            let (h, after) = v6.split_once(']')?;
            (h, after.strip_prefix(':'))
        }
        None => match hostport.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        },
    };
    let port = match port.filter(|p| !p.is_empty()) {
        Some(p) => p.parse().ok()?,
        None => match scheme.as_str() {
            "http" => 80,
            "https" => 443,
            _ => return None,
        },
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    Some((
        (scheme, host, port),
        if path.is_empty() { "/" } else { path },
    ))
}

/// Where `url` points, if it is on `agent`'s configured origin: its path and query. A path
/// alone (`/x`) is on the agent's origin: it is relative to the agent's answer.
fn on_agent<'u>(agent: &Agent, url: &'u str) -> Option<&'u str> {
    let url = url.trim();
    if url.starts_with('/') && !url.starts_with("//") {
        return Some(url);
    }
    let (ours, _) = origin(&agent.cfg.url, "http")?;
    let (theirs, path) = origin(url, &ours.0)?;
    (theirs == ours).then_some(path)
}

/// The `content` of each `file` artifact of a list that is on the agent's origin, rewritten to
/// the gateway's content route. Whether any was.
pub fn rewrite_file_links(list: &mut Value, agent: &Agent, base: &Base<'_>) -> bool {
    let Some(items) = list.get_mut("artifacts").and_then(Value::as_array_mut) else {
        return false;
    };
    let mut changed = false;
    for a in items {
        if a.get("type").and_then(Value::as_str) != Some("file") {
            continue;
        }
        let Some(id) = a.get("artifact_id").and_then(Value::as_str) else {
            continue;
        };
        let Some(content) = a.get("content").and_then(Value::as_str) else {
            continue;
        };
        if on_agent(agent, content).is_none() {
            continue;
        }
        let link = base.artifact_content(&agent.cfg.name, id);
        a["content"] = Value::String(link);
        changed = true;
    }
    changed
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
        None => (path, None),
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
