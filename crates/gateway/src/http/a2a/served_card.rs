//! The card the gateway serves for an official A2A agent, at
//! `/agents/{name}/.well-known/agent-card.json` (and `/agents/{name}/agent-card.json`): the
//! agent's card with the gateway's own interfaces (one per wire form, `wire::served_interfaces`) in place of the agent's, the gateway's own
//! client authentication, the agent's URLs and signatures dropped (`protocol::a2a::card`). Built
//! per request: its URLs are the request's public base.

use hyper::header::{HeaderValue, CACHE_CONTROL};
use hyper::StatusCode;

use super::frame::json_response;
use crate::http::context::Ctx;
use crate::http::error::{ApiError, ApiResult, Code};
use crate::http::public::Base;
use crate::http::request::Request;
use crate::protocol::a2a::card::{serve_card, ServeOptions};
use crate::registry::Agent;
use crate::state::State;

/// The served card of `agent`.
pub fn served(state: &State, _ctx: &Ctx, agent: &Agent, req: &Request) -> ApiResult {
    let card = agent.card().map_err(ApiError::from)?;
    let held = card.a2a().ok_or_else(|| {
        ApiError::new(
            Code::AgentUnavailable,
            "the agent's card is not an official A2A card",
        )
    })?;
    let (doc, base) = rewrite(state, agent, req.headers(), req.uri(), &held.doc);
    let mut res = json_response(StatusCode::OK, "application/json", &doc);
    base.mark(res.headers_mut());
    res.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // As on a Clawpedia agent's card: whether the card is the last fetch's, or the last good
    // one while refreshes fail.
    res.headers_mut().insert(
        "x-a2a-card-state",
        HeaderValue::from_static(agent.slot().state.as_str()),
    );
    Ok(res)
}

/// `card` (the agent's public or extended card) as the gateway serves it, and the base its
/// URLs were written with (for `Vary: Host`).
pub fn rewrite<'a>(
    state: &'a State,
    agent: &Agent,
    headers: &hyper::HeaderMap,
    uri: &hyper::Uri,
    card: &serde_json::Value,
) -> (serde_json::Value, Base<'a>) {
    let base = Base::of(state, headers, uri);
    let root = format!(
        "{}/agents/{}",
        base.url().trim_end_matches('/'),
        agent.cfg.name
    );
    let origin = listener_origin(base.url());
    let interfaces = super::wire::served_interfaces(&super::wire::At {
        root: &root,
        origin: &origin,
        name: &agent.cfg.name,
    });
    let doc = serve_card(
        card,
        &ServeOptions {
            base: base.url(),
            name: &agent.cfg.name,
            agent_url: &agent.cfg.url,
            bearer: state.auth.enabled(),
            // The gateway serves the agent's streams itself, when the agent streams.
            streaming: card
                .pointer("/capabilities/streaming")
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(false),
            // The gateway keeps push configs and delivers them itself, whatever the agent
            // does (it pushes to the gateway, streams, or is polled).
            push_notifications: true,
            interfaces: &interfaces,
            openid: &state.auth.oidc_discovery(),
        },
    );
    (doc, base)
}

/// The gateway's listener as the public base names it, `scheme://host:port` with the port
/// always written (gRPC's targets default to 443 whatever the scheme: `http://gw` must say
/// `:80`). A base that is no URL is kept as it is.
fn listener_origin(base: &str) -> String {
    match url::Url::parse(base) {
        Ok(u) => {
            let host = match u.host() {
                Some(url::Host::Ipv6(a)) => format!("[{a}]"),
                Some(h) => h.to_string(),
                None => return base.trim_end_matches('/').to_owned(),
            };
            match u.port_or_known_default() {
                Some(p) => format!("{}://{host}:{p}", u.scheme()),
                None => format!("{}://{host}", u.scheme()),
            }
        }
        Err(_) => base.trim_end_matches('/').to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::listener_origin;

    #[test]
    fn the_grpc_address_is_the_bases_origin_with_its_port() {
        assert_eq!(
            listener_origin("http://gw.example.com"),
            "http://gw.example.com:80"
        );
        assert_eq!(
            listener_origin("https://gw.example.com/prefix/"),
            "https://gw.example.com:443"
        );
        assert_eq!(
            listener_origin("http://127.0.0.1:8080"),
            "http://127.0.0.1:8080"
        );
        assert_eq!(listener_origin("http://[::1]:9/"), "http://[::1]:9");
    }
}
