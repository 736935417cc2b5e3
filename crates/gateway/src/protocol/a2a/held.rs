//! An official A2A agent card as the registry holds it: checked against a2a.proto's AgentCard,
//! within the card budget, with the interface the gateway talks to chosen once per fetch.
//!
//! What the gateway serves in the agent's place depends on the request (its public base URL)
//! and on the config (whether clients authenticate), so the served card is built per request
//! from [`HeldCard::doc`] by [`super::card::serve_card`]; nothing served is cached here.

use std::sync::OnceLock;

use hyper::http::uri::InvalidUri;
use hyper::Uri;
use serde_json::Value;

use super::card::{check_card, choose_interface, Chosen, Interface, NoSupportedInterface, Prefer};
use crate::protocol::{CardRefusal, InvalidCard, Violation};

/// More interfaces than this is over the card budget: the gateway walks them on every fetch
/// and the served card drops them all, so only a card built to cost is refused.
pub const MAX_INTERFACES: usize = 32;
/// More skills than this is over the card budget (`/agents` lists their ids).
pub const MAX_SKILLS: usize = 1024;

/// A checked A2A card.
#[derive(Debug)]
pub struct HeldCard {
    /// The card as the agent served it (its URLs are dropped when it is served).
    pub doc: Value,
    /// The interface the gateway calls the agent through: its path and tenant, under the
    /// agent's configured origin.
    pub interface: Interface,
    /// `name`.
    pub display_name: String,
    /// The skills' ids, as `/agents` lists an agent's capabilities.
    pub capabilities: Vec<String>,
    /// `capabilities.extendedAgentCard`: GetExtendedAgentCard is forwarded only then.
    pub extended: bool,
    /// What `/agents` warns of in the card (`card_warnings`), as codes.
    pub warnings: Vec<&'static str>,
    /// The interface's URL under the agent's configured origin, parsed once (see
    /// [`HeldCard::endpoint`]), with that origin.
    endpoint: OnceLock<(Box<str>, Uri)>,
}

impl HeldCard {
    /// Check a fetched card and choose its interface (as `prefer` asks, when configured). A
    /// 0.3 card (no `supportedInterfaces`) is read as the 1.0 card it is
    /// (`v0_3::card::to_v1`), its interfaces at 0.3. A card with no interface the gateway
    /// speaks is refused as [`CardRefusal::NoSupportedInterface`].
    pub fn compile(doc: Value, prefer: Prefer) -> Result<HeldCard, InvalidCard> {
        let doc = if super::v0_3::card::is_v0_3_card(&doc) {
            super::v0_3::card::to_v1(doc)
        } else {
            doc
        };
        let found = check_card(&doc);
        if !found.is_empty() {
            return Err(InvalidCard {
                kind: CardRefusal::Invalid,
                message: format!(
                    "the card is not an A2A 1.0 AgentCard ({} violation(s))",
                    found.len()
                ),
                details: found,
            });
        }
        let count = |k: &str| doc.get(k).and_then(Value::as_array).map_or(0, Vec::len);
        for (key, max) in [
            ("supportedInterfaces", MAX_INTERFACES),
            ("skills", MAX_SKILLS),
        ] {
            if count(key) > max {
                return Err(InvalidCard {
                    kind: CardRefusal::Budget,
                    message: format!("the card lists more than {max} {key}"),
                    details: vec![Violation::new(
                        format!("/{key}"),
                        "budget",
                        format!("at most {max}"),
                    )],
                });
            }
        }
        let Chosen {
            interface,
            warnings,
        } = choose_interface(&doc, prefer.binding, prefer.version).map_err(
            |NoSupportedInterface { message }| InvalidCard {
                kind: CardRefusal::NoSupportedInterface,
                message,
                details: Vec::new(),
            },
        )?;
        let display_name = doc
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let capabilities = doc
            .get("skills")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|s| s.get("id")?.as_str())
            .map(str::to_owned)
            .collect();
        let extended = doc
            .pointer("/capabilities/extendedAgentCard")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        Ok(HeldCard {
            doc,
            interface,
            display_name,
            capabilities,
            extended,
            warnings,
            endpoint: OnceLock::new(),
        })
    }

    /// The interface's URL under `origin` (the agent's configured `url`): where every JSON-RPC
    /// call goes. Written and parsed on the first call, then cloned (a `Uri` shares its bytes).
    /// A card is held for one origin (an agent whose `url` a reload changes starts without a
    /// card), so another origin is not expected; it is written anew rather than trusted.
    pub fn endpoint(&self, origin: &str) -> Result<Uri, InvalidUri> {
        if let Some((o, uri)) = self.endpoint.get() {
            if **o == *origin {
                return Ok(uri.clone());
            }
        }
        let uri = Uri::try_from(format!("{origin}{}", self.interface_path()))?;
        let _ = self.endpoint.set((origin.into(), uri.clone()));
        Ok(uri)
    }

    /// `capabilities.streaming`: the agent's streams are served only then.
    pub fn streams(&self) -> bool {
        self.doc
            .pointer("/capabilities/streaming")
            .and_then(Value::as_bool)
            == Some(true)
    }

    /// `capabilities.pushNotifications`: the agent takes push configs, so it can push each
    /// task's changes to the gateway.
    pub fn pushes(&self) -> bool {
        self.doc
            .pointer("/capabilities/pushNotifications")
            .and_then(Value::as_bool)
            == Some(true)
    }

    /// The path of the chosen interface's URL (`/a2a/jsonrpc`), without a trailing `/`, to be
    /// put after the agent's configured origin: a card never names the host the gateway calls.
    pub fn interface_path(&self) -> &str {
        path_of(&self.interface.url)
    }
}

/// The path of an absolute URL, without its query, fragment and trailing `/` (`""` for none).
fn path_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let path = rest.find('/').map_or("", |i| &rest[i..]);
    let path = path.split(['?', '#']).next().unwrap_or("");
    path.trim_end_matches('/')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::a2a::card::ProtocolVersion;
    use serde_json::json;

    fn card(interfaces: Value) -> Value {
        json!({
            "name": "Echo", "description": "echoes", "version": "1.0.0",
            "supportedInterfaces": interfaces,
            "capabilities": {"streaming": true},
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "echo", "name": "Echo", "description": "echoes", "tags": []}]
        })
    }

    #[test]
    fn the_first_spoken_interface_is_taken_and_only_its_path_is_kept() {
        let held = HeldCard::compile(
            card(json!([
                {"url": "grpc://elsewhere:50051", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
                {"url": "https://public.example.com/a2a/rest/?x=1", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
                {"url": "https://public.example.com/a2a/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ])),
            Prefer::default(),
        )
        .expect("valid");
        assert_eq!(held.interface.binding.as_str(), "HTTP+JSON");
        assert_eq!(held.interface_path(), "/a2a/rest");
        assert_eq!(held.display_name, "Echo");
        assert_eq!(held.capabilities, ["echo"]);
        assert!(!held.extended);
        // With `binding = "JSONRPC"` configured, as the config reads it.
        let configured: crate::config::Binding =
            serde_json::from_value(json!("JSONRPC")).expect("a binding");
        let rpc = HeldCard::compile(
            card(held.doc["supportedInterfaces"].clone()),
            Prefer {
                binding: Some(configured.into()),
                version: None,
            },
        )
        .expect("valid");
        assert_eq!(rpc.interface_path(), "/a2a/jsonrpc");
    }

    #[test]
    fn the_endpoint_is_the_configured_origin_and_the_interface_path_for_whichever_origin() {
        let rpc = HeldCard::compile(
            card(json!([{"url": "https://public.example.com/a2a/jsonrpc/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}])),
            Prefer::default(),
        )
        .expect("valid");
        let first = rpc.endpoint("http://127.0.0.1:9000").expect("parses");
        assert_eq!(first.to_string(), "http://127.0.0.1:9000/a2a/jsonrpc");
        assert_eq!(rpc.endpoint("http://127.0.0.1:9000").ok(), Some(first));
        // Another origin (a reload moved the agent) is never answered from the first one's.
        let moved = rpc.endpoint("http://10.0.0.2:8080").expect("parses");
        assert_eq!(moved.to_string(), "http://10.0.0.2:8080/a2a/jsonrpc");
        assert!(rpc.endpoint("http://bad host").is_err());
    }

    #[test]
    fn a_card_without_a_spoken_interface_is_refused_with_its_reason() {
        let e = HeldCard::compile(
            card(
                json!([{"url": "ws://x", "protocolBinding": "WEBSOCKET", "protocolVersion": "1.0"},
                {"url": "http://x:1", "protocolBinding": "GRPC", "protocolVersion": "0.3"},
                {"url": "http://x/old", "protocolBinding": "JSONRPC", "protocolVersion": "0.2"}]),
            ),
            Prefer::default(),
        )
        .expect_err("no interface");
        assert_eq!(e.kind, CardRefusal::NoSupportedInterface);
        assert_eq!(e.kind.as_str(), "no_supported_interface");
        let e = HeldCard::compile(json!({"name": "x"}), Prefer::default()).expect_err("invalid");
        assert_eq!(e.kind, CardRefusal::Invalid);
        let many: Vec<Value> = (0..=MAX_INTERFACES)
            .map(|_| json!({"url": "http://x/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}))
            .collect();
        let e = HeldCard::compile(card(Value::Array(many)), Prefer::default()).expect_err("budget");
        assert_eq!(e.kind, CardRefusal::Budget);
    }

    #[test]
    fn a_card_of_both_versions_is_used_at_1_0_unless_0_3_is_configured_and_a_0_3_card_at_0_3() {
        let both = card(json!([
            {"url": "http://x/v03", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
            {"url": "http://x/v10", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ]));
        let held = HeldCard::compile(both.clone(), Prefer::default()).expect("valid");
        assert_eq!(held.interface.version, ProtocolVersion::V1_0);
        assert_eq!(held.interface_path(), "/v10");
        let configured: crate::config::A2aVersion =
            serde_json::from_value(json!("0.3")).expect("a version");
        let old = HeldCard::compile(
            both,
            Prefer {
                binding: None,
                version: Some(configured.into()),
            },
        )
        .expect("valid");
        assert_eq!(old.interface.version, ProtocolVersion::V0_3);
        assert_eq!(old.interface_path(), "/v03");
        let v03 = json!({
            "name": "Old", "description": "d", "version": "1", "protocolVersion": "0.3.0",
            "url": "http://x/rpc", "preferredTransport": "JSONRPC",
            "capabilities": {"streaming": true}, "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "s", "name": "s", "description": "s", "tags": []}]
        });
        let held = HeldCard::compile(v03, Prefer::default()).expect("a 0.3 card is read");
        assert_eq!(held.interface.version, ProtocolVersion::V0_3);
        assert_eq!(held.interface_path(), "/rpc");
        assert!(held.warnings.is_empty());
        let unstated = card(json!([{"url": "http://x/a", "protocolBinding": "JSONRPC"}]));
        let held = HeldCard::compile(unstated, Prefer::default()).expect("taken as 1.0");
        assert_eq!(held.interface.version, ProtocolVersion::V1_0);
        assert_eq!(held.warnings, ["missing_protocol_version"]);
    }

    #[test]
    fn paths_of_urls() {
        assert_eq!(path_of("http://h:1"), "");
        assert_eq!(path_of("http://h:1/"), "");
        assert_eq!(path_of("http://h/a/b/#f"), "/a/b");
        assert_eq!(path_of("http://u@h/a?q=/x"), "/a");
    }
}
