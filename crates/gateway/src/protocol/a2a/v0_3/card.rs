//! Cards across the versions: a 0.3 agent's card read as a 1.0 card (what the registry checks
//! and holds), and the 0.3 fields the served card carries beside 1.0's, as a2a-sdk 1.3's
//! compatibility layer writes them (its `agent_card_to_dict`: the 0.3 card of the 0.3
//! interfaces merged into the 1.0 card, 1.0's members kept where both name one).

use serde_json::{json, Map, Value};

use super::{CARD_VERSION, VERSION};

/// Whether a card is 0.3's: it has no `supportedInterfaces` (a2a-sdk 1.3's client reads a card
/// as 0.3 exactly then).
pub fn is_v0_3_card(card: &Value) -> bool {
    card.is_object() && card.get("supportedInterfaces").is_none()
}

/// The members a 0.3 card shares with 1.0's, by name.
const SAME: [&str; 9] = [
    "name",
    "description",
    "version",
    "provider",
    "documentationUrl",
    "iconUrl",
    "defaultInputModes",
    "defaultOutputModes",
    "skills",
];

/// A 0.3 card as a 1.0 card: `supportedInterfaces` from `url` (`preferredTransport`, JSONRPC
/// if absent) and `additionalInterfaces` (one already listed is not listed twice), each at the
/// card's `protocolVersion` (0.3.0 if absent); `supportsAuthenticatedExtendedCard` as
/// `capabilities.extendedAgentCard`; skills as they are but their `security`. The agent's
/// security schemes and signatures are not carried: the gateway calls the agent with its
/// configured credentials and serves its own schemes, and a signature over the 0.3 card does
/// not hold for another.
pub fn to_v1(card: Value) -> Value {
    let Value::Object(mut c) = card else {
        return card;
    };
    let version = c
        .get("protocolVersion")
        .and_then(Value::as_str)
        .filter(|v| !v.trim().is_empty())
        .unwrap_or(CARD_VERSION)
        .to_owned();
    let mut out = Map::new();
    for k in SAME {
        if let Some(v) = c.remove(k).filter(|v| !v.is_null()) {
            out.insert(k.to_owned(), v);
        }
    }
    let mut interfaces: Vec<Value> = Vec::new();
    let mut add = |url: Option<&Value>, binding: Option<&Value>| {
        let (Some(url), binding) = (url.and_then(Value::as_str), binding.and_then(Value::as_str))
        else {
            return;
        };
        let binding = binding.unwrap_or("JSONRPC");
        let seen = interfaces.iter().any(|i| {
            i["url"].as_str() == Some(url)
                && i["protocolBinding"]
                    .as_str()
                    .is_some_and(|b| b.eq_ignore_ascii_case(binding))
        });
        if !seen {
            interfaces.push(
                json!({"url": url, "protocolBinding": binding, "protocolVersion": version.clone()}),
            );
        }
    };
    add(c.get("url"), c.get("preferredTransport"));
    if let Some(Value::Array(extra)) = c.get("additionalInterfaces") {
        for i in extra {
            add(i.get("url"), i.get("transport"));
        }
    }
    out.insert("supportedInterfaces".to_owned(), Value::Array(interfaces));
    let mut caps = match c.remove("capabilities") {
        Some(Value::Object(o)) => o,
        _ => Map::new(),
    };
    caps.remove("stateTransitionHistory");
    if c.get("supportsAuthenticatedExtendedCard") == Some(&Value::Bool(true)) {
        caps.insert("extendedAgentCard".to_owned(), Value::Bool(true));
    }
    out.insert("capabilities".to_owned(), Value::Object(caps));
    if let Some(Value::Array(skills)) = out.get_mut("skills") {
        for s in skills.iter_mut() {
            if let Some(o) = s.as_object_mut() {
                o.remove("security");
            }
        }
    }
    Value::Object(out)
}

/// Adds to a served (1.0) card the 0.3 fields for its interfaces of protocolVersion 0.3:
/// `url` and `preferredTransport` from the first, `additionalInterfaces` the rest,
/// `protocolVersion` 0.3.0, a skill's required `tags`, and (`bearer`) the scheme in both
/// shapes (`type`/`scheme` beside `httpAuthSecurityScheme`) with 0.3's `security`. A card with
/// no 0.3 interface is left as it is.
pub fn add_fields(card: &mut Map<String, Value>, bearer: bool) {
    let legacy: Vec<(String, String)> = card
        .get("supportedInterfaces")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|i| i.get("protocolVersion").and_then(Value::as_str) == Some(VERSION))
        .filter_map(|i| {
            Some((
                i.get("url")?.as_str()?.to_owned(),
                i.get("protocolBinding")?.as_str()?.to_owned(),
            ))
        })
        .collect();
    let Some(((url, binding), rest)) = legacy.split_first() else {
        return;
    };
    card.insert("url".to_owned(), Value::from(url.as_str()));
    card.insert(
        "preferredTransport".to_owned(),
        Value::from(binding.as_str()),
    );
    card.insert("protocolVersion".to_owned(), Value::from(CARD_VERSION));
    if !rest.is_empty() {
        let extra: Vec<Value> = rest
            .iter()
            .map(|(u, b)| json!({"url": u, "transport": b}))
            .collect();
        card.insert("additionalInterfaces".to_owned(), Value::Array(extra));
    }
    for k in ["defaultInputModes", "defaultOutputModes", "skills"] {
        card.entry(k).or_insert_with(|| Value::Array(Vec::new()));
    }
    if let Some(Value::Array(skills)) = card.get_mut("skills") {
        for s in skills.iter_mut().filter_map(Value::as_object_mut) {
            s.entry("tags").or_insert_with(|| Value::Array(Vec::new()));
        }
    }
    if card
        .get("capabilities")
        .and_then(|c| c.get("extendedAgentCard"))
        == Some(&Value::Bool(true))
    {
        card.insert(
            "supportsAuthenticatedExtendedCard".to_owned(),
            Value::Bool(true),
        );
    }
    if bearer {
        let mut security = vec![json!({"bearer": []})];
        if let Some(Value::Object(schemes)) = card.get_mut("securitySchemes") {
            if let Some(Value::Object(b)) = schemes.get_mut("bearer") {
                b.insert("type".to_owned(), Value::from("http"));
                b.insert("scheme".to_owned(), Value::from("bearer"));
                b.insert(
                    "description".to_owned(),
                    Value::from("a client token of the gateway"),
                );
            }
            // Each `[[auth.oidc]]` issuer's scheme, in 0.3's shape too.
            for (name, s) in schemes.iter_mut() {
                let url = s
                    .pointer("/openIdConnectSecurityScheme/openIdConnectUrl")
                    .cloned();
                if let (Some(url), Value::Object(s)) = (url, s) {
                    s.insert("type".to_owned(), Value::from("openIdConnect"));
                    s.insert("openIdConnectUrl".to_owned(), url);
                    security.push(json!({ name.clone(): [] }));
                }
            }
        }
        card.insert("security".to_owned(), Value::Array(security));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_0_3_card_reads_as_1_0_with_its_interfaces_at_its_version() {
        let card = json!({
            "name": "n", "description": "d", "version": "1", "protocolVersion": "0.3.0",
            "url": "http://a:9/rpc", "preferredTransport": "JSONRPC",
            "additionalInterfaces": [{"url": "http://a:9/rpc", "transport": "JSONRPC"},
                {"url": "http://a:9", "transport": "HTTP+JSON"}],
            "capabilities": {"streaming": true, "stateTransitionHistory": false},
            "supportsAuthenticatedExtendedCard": true,
            "securitySchemes": {"k": {"type": "apiKey", "in": "header", "name": "X"}},
            "security": [{"k": []}],
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "s", "name": "s", "description": "s", "tags": [], "security": [{"k": []}]}]
        });
        assert!(is_v0_3_card(&card));
        let v1 = to_v1(card);
        assert!(!is_v0_3_card(&v1));
        assert_eq!(
            v1["supportedInterfaces"],
            json!([{"url": "http://a:9/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "0.3.0"},
                {"url": "http://a:9", "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3.0"}])
        );
        assert_eq!(
            v1["capabilities"],
            json!({"streaming": true, "extendedAgentCard": true})
        );
        for gone in [
            "url",
            "security",
            "securitySchemes",
            "protocolVersion",
            "preferredTransport",
        ] {
            assert_eq!(v1.get(gone), None, "{gone}");
        }
        assert_eq!(v1["skills"][0].get("security"), None);
        let none = to_v1(json!({"name": "n", "url": "http://a:9/"}));
        assert_eq!(
            none["supportedInterfaces"][0],
            json!({"url": "http://a:9/", "protocolBinding": "JSONRPC", "protocolVersion": "0.3.0"})
        );
    }

    #[test]
    fn the_served_card_gains_0_3_fields_from_its_0_3_interfaces() {
        let Value::Object(mut card) = json!({
            "name": "n",
            "supportedInterfaces": [
                {"url": "https://g/agents/e", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
                {"url": "https://g/agents/e/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
                {"url": "https://g/agents/e", "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3"}],
            "capabilities": {"streaming": true},
            "skills": [{"id": "s", "name": "s", "description": "s"}],
            "securitySchemes": {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}}
        }) else {
            unreachable!()
        };
        add_fields(&mut card, true);
        assert_eq!(card["url"], "https://g/agents/e/jsonrpc");
        assert_eq!(card["preferredTransport"], "JSONRPC");
        assert_eq!(card["protocolVersion"], "0.3.0");
        assert_eq!(
            card["additionalInterfaces"],
            json!([{"url": "https://g/agents/e", "transport": "HTTP+JSON"}])
        );
        assert_eq!(card["skills"][0]["tags"], json!([]));
        assert_eq!(card["defaultInputModes"], json!([]));
        assert_eq!(card["securitySchemes"]["bearer"]["type"], "http");
        assert_eq!(
            card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
            "Bearer"
        );
        assert_eq!(card["security"], json!([{"bearer": []}]));
        let Value::Object(mut only_1_0) = json!({"supportedInterfaces": [
            {"url": "u", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]})
        else {
            unreachable!()
        };
        add_fields(&mut only_1_0, true);
        assert_eq!(only_1_0.get("url"), None);
    }

    #[test]
    fn an_openid_connect_scheme_is_served_in_0_3_shape_too() {
        let url = "https://idp.example.com/.well-known/openid-configuration";
        let Value::Object(mut card) = json!({
            "name": "n",
            "supportedInterfaces": [
                {"url": "https://g/agents/e/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}],
            "securitySchemes": {
                "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}},
                "oidc-corp": {"openIdConnectSecurityScheme": {"openIdConnectUrl": url}}}
        }) else {
            unreachable!()
        };
        add_fields(&mut card, true);
        let s = &card["securitySchemes"]["oidc-corp"];
        assert_eq!(s["type"], "openIdConnect");
        assert_eq!(s["openIdConnectUrl"], url);
        assert_eq!(s["openIdConnectSecurityScheme"]["openIdConnectUrl"], url);
        assert_eq!(card["security"], json!([{"bearer": []}, {"oidc-corp": []}]));
    }
}
