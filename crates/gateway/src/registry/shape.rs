//! One card per agent: every replica of an agent must serve the same card.
//!
//! A card's *shape* is what makes it this agent rather than another: its skills, its
//! capabilities and its interfaces (each by binding, version, URL path and tenant, never by
//! host: each replica names itself). A Clawpedia card's shape is its `agent_id` (every task an
//! agent answers names it, and the gateway holds each answer to its card's), capabilities and
//! schemas.
//! After each refresh of an agent with several replicas, every replica's card is fetched and
//! compared with the serving card's shape; one that differs is `card_mismatch` (it takes no new
//! work, but still takes the calls of the tasks pinned to it), so that a half-rolled-out upgrade
//! does not mix two agents and does not strand tasks. A replica whose card cannot be fetched
//! keeps its flag: its circuit answers for whether it can be reached.

use futures_util::StreamExt;
use serde_json::{json, Value};

use super::replicas::Replica;
use super::*;
use crate::config::Protocol;

/// Replica cards fetched at once, per agent.
const CHECKS_AT_ONCE: usize = 4;

/// The comparable part of a card ([`Shape::of`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Shape(Value);

impl Shape {
    /// The shape of a raw card of `protocol`.
    pub(super) fn of(protocol: Protocol, card: &Value) -> Shape {
        match protocol {
            Protocol::A2a => Shape(json!({
                "skills": sorted_by_id(card.get("skills")),
                "capabilities": card.get("capabilities").cloned().unwrap_or(Value::Null),
                "interfaces": interfaces(card),
            })),
            Protocol::Clawpedia => {
                let mut capabilities: Vec<Value> = card
                    .get("capabilities")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                capabilities.sort_by_key(Value::to_string);
                Shape(json!({
                    "agent_id": card.get("agent_id"),
                    "protocol_version": card.get("protocol_version"),
                    "capabilities": capabilities,
                    "input_schema": card.get("input_schema"),
                    "output_schema": card.get("output_schema"),
                }))
            }
        }
    }
}

/// Skills in the order of their ids, so that a replica listing them otherwise is the same.
fn sorted_by_id(skills: Option<&Value>) -> Value {
    let mut skills: Vec<Value> = skills
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    skills.sort_by(|a, b| {
        let id = |s: &Value| s.get("id").and_then(Value::as_str).map(str::to_owned);
        id(a)
            .cmp(&id(b))
            .then_with(|| a.to_string().cmp(&b.to_string()))
    });
    Value::Array(skills)
}

/// The card's interfaces as a sorted set of `[binding, version, path, tenant]`: a 1.0 card's
/// `supportedInterfaces`, else a 0.3 card's `url` (`preferredTransport`, JSONRPC if absent) and
/// `additionalInterfaces` (`transport`), at the card's `protocolVersion`.
fn interfaces(card: &Value) -> Value {
    let s = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_owned();
    let mut out: Vec<[String; 4]> = Vec::new();
    if let Some(list) = card.get("supportedInterfaces").and_then(Value::as_array) {
        for i in list {
            out.push([
                s(i.get("protocolBinding")),
                s(i.get("protocolVersion")),
                path(&s(i.get("url"))),
                s(i.get("tenant")),
            ]);
        }
    } else {
        let version = s(card.get("protocolVersion"));
        if card.get("url").is_some() {
            let preferred = card.get("preferredTransport").and_then(Value::as_str);
            out.push([
                preferred.unwrap_or("JSONRPC").to_owned(),
                version.clone(),
                path(&s(card.get("url"))),
                String::new(),
            ]);
        }
        for i in card
            .get("additionalInterfaces")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            out.push([
                s(i.get("transport")),
                version.clone(),
                path(&s(i.get("url"))),
                String::new(),
            ]);
        }
    }
    out.sort();
    out.dedup();
    json!(out)
}

/// A URL's path (`/` for none): what of it is the agent's, not the replica's.
fn path(url: &str) -> String {
    match url.parse::<hyper::Uri>() {
        Ok(u) if u.host().is_some() => u.path().to_owned(),
        _ => url.to_owned(),
    }
}

/// Fetch the raw card at `base` (the agent's `card_path` under it), with the agent's
/// credential, its timeout and [`MAX_CARD_BYTES`]; `host` is sent as `Host` when given.
pub(super) async fn fetch_raw(
    agent: &Agent,
    up: &Upstream,
    base: &str,
    host: Option<&HeaderValue>,
) -> Result<Value, CardError> {
    let mut req = Request::get(format!("{base}{}", agent.cfg.card_path()))
        .header(header::ACCEPT, "application/json")
        .header(header::ACCEPT_ENCODING, "identity")
        .body(Full::new(Bytes::new()))
        .map_err(|e| CardError::Invalid(format!("card URL: {e}")))?;
    if let Some(host) = host {
        req.headers_mut().insert(header::HOST, host.clone());
    }
    let _ = agent.authorize(req.headers_mut(), OnBehalf::Nobody);
    let (parts, body) = up
        .exchange(req, agent.cfg.timeout, MAX_CARD_BYTES)
        .await
        .map_err(CardError::Upstream)?;
    if parts.status != StatusCode::OK {
        return Err(CardError::Status(parts.status));
    }
    crate::protocol::json::parse(&body).map_err(|e| CardError::Invalid(e.to_string()))
}

/// Fetch every live replica's card (when there are several) and mark each whose shape differs
/// from `serving` as `card_mismatch`, and each that matches as not; said once per change.
pub(super) async fn check(agent: &Agent, up: &Upstream, serving: &Shape) {
    let live = agent.replicas.live();
    if live.len() < 2 {
        return;
    }
    let protocol = agent.cfg.protocol;
    let one = |r: &Arc<Replica>| {
        let r = r.clone();
        async move {
            let got = fetch_raw(agent, up, &r.base, r.host.as_ref()).await;
            (r, got.map(|card| Shape::of(protocol, &card)))
        }
    };
    let results: Vec<_> = futures_util::stream::iter(live.iter().map(one))
        .buffer_unordered(CHECKS_AT_ONCE)
        .collect()
        .await;
    let name = agent.cfg.name.as_str();
    for (r, got) in results {
        match got {
            Ok(shape) => {
                let differs = shape != *serving;
                if differs != r.card_mismatch() {
                    if differs {
                        tracing::warn!(agent = name, replica = %r.address,
                            "replica serves another card (skills, capabilities or interfaces): no new work goes to it");
                    } else {
                        tracing::warn!(agent = name, replica = %r.address,
                            "replica serves the agent's card again: it takes new work");
                    }
                }
                r.set_card_mismatch(differs);
            }
            Err(e) => tracing::debug!(agent = name, replica = %r.address, error = %e,
                "replica card check failed; its card_mismatch flag is kept"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card(host: &str) -> Value {
        json!({
            "name": "echo",
            "description": format!("served by {host}"),
            "supportedInterfaces": [
                {"url": format!("http://{host}/rpc"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": format!("http://{host}"), "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0", "tenant": "t1"},
            ],
            "capabilities": {"streaming": true},
            "skills": [
                {"id": "b", "name": "B", "tags": []},
                {"id": "a", "name": "A", "tags": []},
            ],
        })
    }

    fn a2a(c: &Value) -> Shape {
        Shape::of(Protocol::A2a, c)
    }

    #[test]
    fn the_same_card_on_other_hosts_is_the_same_shape() {
        assert_eq!(a2a(&card("10.0.0.1:9000")), a2a(&card("10.0.0.2:9001")));
        // Skills and interfaces listed in another order.
        let mut other = card("b:1");
        other["skills"].as_array_mut().unwrap().reverse();
        other["supportedInterfaces"]
            .as_array_mut()
            .unwrap()
            .reverse();
        assert_eq!(a2a(&card("a:1")), a2a(&other));
    }

    #[test]
    fn a_skill_added_differs() {
        let mut other = card("a:1");
        other["skills"]
            .as_array_mut()
            .unwrap()
            .push(json!({"id": "c", "name": "C", "tags": []}));
        assert_ne!(a2a(&card("a:1")), a2a(&other));
    }

    #[test]
    fn capabilities_interface_path_tenant_or_version_differ() {
        let base = a2a(&card("a:1"));
        let mut c = card("a:1");
        c["capabilities"]["pushNotifications"] = json!(true);
        assert_ne!(base, a2a(&c));
        let mut c = card("a:1");
        c["supportedInterfaces"][0]["url"] = json!("http://a:1/v2/rpc");
        assert_ne!(base, a2a(&c));
        let mut c = card("a:1");
        c["supportedInterfaces"][1]["tenant"] = json!("t2");
        assert_ne!(base, a2a(&c));
        let mut c = card("a:1");
        c["supportedInterfaces"][0]["protocolVersion"] = json!("0.3");
        assert_ne!(base, a2a(&c));
    }

    #[test]
    fn v0_3_cards_compare_by_transport_and_path() {
        let v03 = |host: &str, path: &str| {
            json!({
                "protocolVersion": "0.3.0",
                "url": format!("https://{host}{path}"),
                "preferredTransport": "JSONRPC",
                "additionalInterfaces": [{"url": format!("https://{host}/rest"), "transport": "HTTP+JSON"}],
                "capabilities": {}, "skills": [],
            })
        };
        assert_eq!(a2a(&v03("a", "/rpc")), a2a(&v03("b:8443", "/rpc")));
        assert_ne!(a2a(&v03("a", "/rpc")), a2a(&v03("a", "/jsonrpc")));
    }

    #[test]
    fn clawpedia_cards_compare_id_capabilities_and_schemas_not_hosts() {
        let claw = |host: &str| {
            json!({
                "protocol_version": "1.0",
                "agent_id": "7f1c2a4e-0000-4000-8000-000000000001",
                "display_name": "Echo",
                "description": "echoes its input",
                "capabilities": ["b", "a"],
                "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
                "notification_config": {"endpoint_url": format!("http://{host}/hook")},
            })
        };
        let shape = |c: &Value| Shape::of(Protocol::Clawpedia, c);
        assert_eq!(shape(&claw("a:1")), shape(&claw("b:2")));
        let mut c = claw("a:1");
        c["input_schema"]["required"] = json!(["q"]);
        assert_ne!(shape(&claw("a:1")), shape(&c));
        let mut c = claw("a:1");
        c["capabilities"] = json!(["a"]);
        assert_ne!(shape(&claw("a:1")), shape(&c));
        // Another agent_id is another agent: each of its answers would be refused.
        let mut c = claw("a:1");
        c["agent_id"] = json!("7f1c2a4e-0000-4000-8000-000000000002");
        assert_ne!(shape(&claw("a:1")), shape(&c));
    }
}
