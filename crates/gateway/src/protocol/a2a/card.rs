//! Official A2A 1.0 agent cards (§8, a2a.proto's AgentCard): the check, the choice of the
//! interface the gateway talks to, and the card the gateway serves in the agent's place.
//!
//! The check follows the proto's REQUIRED fields and enums. One leniency, on purpose: §5.7 says a
//! REQUIRED repeated field needs at least one element, but only `supportedInterfaces` is held to
//! that; `skills`, `tags` and the media-type lists must be present lists, possibly empty, since
//! they are descriptive and refusing the card would make the agent unusable for no safety gain.

use serde_json::{json, Value};

use super::check::{fields, oneof, opt, req, Ck, T};
use super::version::is_served;
use crate::protocol::node::{Json, Object};
use crate::protocol::Violation;

fn interface(ck: &mut Ck, o: &dyn Object, at: &str) {
    fields(
        ck,
        o,
        at,
        "AgentInterface",
        &[
            req("url", "url", T::Str),
            req("protocolBinding", "protocol_binding", T::Str),
            opt("tenant", "tenant", T::Str),
            req("protocolVersion", "protocol_version", T::Str),
        ],
    );
}

fn provider(ck: &mut Ck, o: &dyn Object, at: &str) {
    fields(
        ck,
        o,
        at,
        "AgentProvider",
        &[
            opt("url", "url", T::Str),
            req("organization", "organization", T::Str),
        ],
    );
}

fn extension(ck: &mut Ck, o: &dyn Object, at: &str) {
    fields(
        ck,
        o,
        at,
        "AgentExtension",
        &[
            opt("uri", "uri", T::Str),
            opt("description", "description", T::Str),
            opt("required", "required", T::Bool),
            opt("params", "params", T::Struct),
        ],
    );
}

fn capabilities(ck: &mut Ck, o: &dyn Object, at: &str) {
    fields(
        ck,
        o,
        at,
        "AgentCapabilities",
        &[
            opt("streaming", "streaming", T::Bool),
            opt("pushNotifications", "push_notifications", T::Bool),
            opt("extensions", "extensions", T::Msgs(extension)),
            opt("extendedAgentCard", "extended_agent_card", T::Bool),
        ],
    );
}

fn string_list(ck: &mut Ck, o: &dyn Object, at: &str) {
    fields(ck, o, at, "StringList", &[opt("list", "list", T::Strs)]);
}

fn requirement(ck: &mut Ck, o: &dyn Object, at: &str) {
    fields(
        ck,
        o,
        at,
        "SecurityRequirement",
        &[opt("schemes", "schemes", T::MapOf(string_list))],
    );
}

fn scheme(ck: &mut Ck, o: &dyn Object, at: &str) {
    let members = [
        "apiKeySecurityScheme",
        "httpAuthSecurityScheme",
        "oauth2SecurityScheme",
        "openIdConnectSecurityScheme",
        "mtlsSecurityScheme",
    ];
    oneof(ck, o, at, "SecurityScheme", &members);
    fields(
        ck,
        o,
        at,
        "SecurityScheme",
        &[
            opt("apiKeySecurityScheme", "api_key_security_scheme", T::Struct),
            opt(
                "httpAuthSecurityScheme",
                "http_auth_security_scheme",
                T::Struct,
            ),
            opt("oauth2SecurityScheme", "oauth2_security_scheme", T::Struct),
            opt(
                "openIdConnectSecurityScheme",
                "open_id_connect_security_scheme",
                T::Struct,
            ),
            opt("mtlsSecurityScheme", "mtls_security_scheme", T::Struct),
        ],
    );
}

fn skill(ck: &mut Ck, o: &dyn Object, at: &str) {
    fields(
        ck,
        o,
        at,
        "AgentSkill",
        &[
            req("id", "id", T::Str),
            req("name", "name", T::Str),
            opt("description", "description", T::Str),
            opt("tags", "tags", T::Strs),
            opt("examples", "examples", T::Strs),
            opt("inputModes", "input_modes", T::Strs),
            opt("outputModes", "output_modes", T::Strs),
            opt(
                "securityRequirements",
                "security_requirements",
                T::Msgs(requirement),
            ),
        ],
    );
    present_list(ck, o, at, "AgentSkill", "tags");
    present_string(ck, o, at, "AgentSkill", "description");
}

fn signature(ck: &mut Ck, o: &dyn Object, at: &str) {
    fields(
        ck,
        o,
        at,
        "AgentCardSignature",
        &[
            req("protected", "protected", T::Str),
            req("signature", "signature", T::Str),
            opt("header", "header", T::Struct),
        ],
    );
}

fn present_list(ck: &mut Ck, o: &dyn Object, at: &str, rule: &str, name: &str) {
    // Only its absence: a wrong type is already reported by the field table.
    if o.get(name).is_none_or(|v| v.is_null()) {
        ck.push(
            &format!("{at}/{name}"),
            rule,
            format!("{name} is required (a list)"),
        );
    }
}

fn present_string(ck: &mut Ck, o: &dyn Object, at: &str, rule: &str, name: &str) {
    if o.get(name).is_none_or(|v| v.is_null()) {
        ck.push(
            &format!("{at}/{name}"),
            rule,
            format!("{name} is required (a string)"),
        );
    }
}

/// An agent card checked against a2a.proto's AgentCard.
pub fn check_card(card: &dyn Json) -> Vec<Violation> {
    let mut ck = Ck::default();
    let Some(o) = card.as_object() else {
        ck.push("", "AgentCard", "an agent card is a JSON object");
        return ck.out;
    };
    fields(
        &mut ck,
        o,
        "",
        "AgentCard",
        &[
            req("name", "name", T::Str),
            opt("description", "description", T::Str),
            req(
                "supportedInterfaces",
                "supported_interfaces",
                T::Msgs(interface),
            ),
            opt("provider", "provider", T::Msg(provider)),
            req("version", "version", T::Str),
            opt("documentationUrl", "documentation_url", T::Str),
            req("capabilities", "capabilities", T::Msg(capabilities)),
            opt("securitySchemes", "security_schemes", T::MapOf(scheme)),
            opt(
                "securityRequirements",
                "security_requirements",
                T::Msgs(requirement),
            ),
            opt("defaultInputModes", "default_input_modes", T::Strs),
            opt("defaultOutputModes", "default_output_modes", T::Strs),
            opt("skills", "skills", T::Msgs(skill)),
            opt("signatures", "signatures", T::Msgs(signature)),
            opt("iconUrl", "icon_url", T::Str),
        ],
    );
    present_string(&mut ck, o, "", "AgentCard", "description");
    for name in ["defaultInputModes", "defaultOutputModes", "skills"] {
        present_list(&mut ck, o, "", "AgentCard", name);
    }
    ck.out
}

/// A core binding the gateway speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Binding {
    /// `JSONRPC` (§9).
    JsonRpc,
    /// `HTTP+JSON` (§11).
    HttpJson,
}

impl Binding {
    /// The card's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Binding::JsonRpc => "JSONRPC",
            Binding::HttpJson => "HTTP+JSON",
        }
    }

    /// The binding a card names (case-insensitively, as @a2a-js/sdk matches; a2a-sdk matches
    /// exactly); `None` for GRPC and custom bindings.
    pub fn parse(s: &str) -> Option<Binding> {
        [Binding::JsonRpc, Binding::HttpJson]
            .into_iter()
            .find(|b| b.as_str().eq_ignore_ascii_case(s))
    }
}

impl From<crate::config::Binding> for Binding {
    fn from(b: crate::config::Binding) -> Binding {
        match b {
            crate::config::Binding::JsonRpc => Binding::JsonRpc,
            crate::config::Binding::HttpJson => Binding::HttpJson,
        }
    }
}

/// The interface the gateway talks to: the card's URL (of which the gateway takes only the path:
/// it calls the agent at its configured origin), binding, version, tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// The card's URL for it.
    pub url: String,
    /// Its binding.
    pub binding: Binding,
    /// Its protocolVersion as the card says it.
    pub version: String,
    /// Its tenant, when it declares a non-empty one.
    pub tenant: Option<String>,
}

/// A card with no interface the gateway can use: reason `no_supported_interface` on `/agents`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoSupportedInterface {
    /// What the card offered, for the operator.
    pub message: String,
}

impl NoSupportedInterface {
    /// The refusal reason on `/agents`.
    pub const REASON: &'static str = "no_supported_interface";
}

/// The first of `supportedInterfaces` (the card's preference order, §8.3.1) with a JSONRPC or
/// HTTP+JSON binding — or only `prefer`'s, when configured — and protocolVersion 1.0 (a patch
/// part is ignored, §3.6).
pub fn choose_interface(
    card: &Value,
    prefer: Option<Binding>,
) -> Result<Interface, NoSupportedInterface> {
    let offered: Vec<&Value> = card
        .get("supportedInterfaces")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    for i in &offered {
        let Some(binding) = i
            .get("protocolBinding")
            .and_then(Value::as_str)
            .and_then(Binding::parse)
        else {
            continue;
        };
        if prefer.is_some_and(|p| p != binding) {
            continue;
        }
        let version = i
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let Some(url) = i
            .get("url")
            .and_then(Value::as_str)
            .filter(|u| !u.is_empty())
        else {
            continue;
        };
        if !is_served(version) {
            continue;
        }
        return Ok(Interface {
            url: url.to_owned(),
            binding,
            version: version.to_owned(),
            tenant: i
                .get("tenant")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(str::to_owned),
        });
    }
    let listed: Vec<String> = offered
        .iter()
        .take(8)
        .map(|i| {
            format!(
                "{} {}",
                i.get("protocolBinding")
                    .and_then(Value::as_str)
                    .unwrap_or("?"),
                i.get("protocolVersion")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
            )
        })
        .collect();
    let wanted = prefer.map_or("JSONRPC or HTTP+JSON".to_owned(), |b| b.as_str().to_owned());
    Err(NoSupportedInterface {
        message: format!(
            "no {wanted} interface at protocolVersion 1.0 among [{}]",
            listed.join(", ")
        ),
    })
}

/// What the gateway serves in an agent's card.
#[derive(Debug, Clone, Copy)]
pub struct ServeOptions<'a> {
    /// The gateway's public URL (`public_url`), without a trailing `/`.
    pub base: &'a str,
    /// The agent's name in the gateway.
    pub name: &'a str,
    /// The host of the agent's configured `url` (its URLs are not served).
    pub agent_host: &'a str,
    /// Whether clients are configured (then the card names a bearer scheme).
    pub bearer: bool,
    /// `capabilities.streaming` as served.
    pub streaming: bool,
    /// `capabilities.pushNotifications` as served.
    pub push_notifications: bool,
}

/// The card fields of 0.3 that name the agent's endpoints or its auth. a2a-sdk's server merges
/// them into 1.0 cards when the agent also speaks 0.3; a 0.3 client would follow them straight
/// to the agent, around the gateway.
const LEGACY_FIELDS: [&str; 5] = [
    "url",
    "preferredTransport",
    "additionalInterfaces",
    "protocolVersion",
    "security",
];

/// The card the gateway serves for an agent: `supportedInterfaces` replaced by exactly the
/// gateway's two (HTTP+JSON at `{base}/agents/{name}`, JSONRPC at `{base}/agents/{name}/jsonrpc`,
/// both 1.0, no tenant: the agent's name is the route); `securitySchemes` and
/// `securityRequirements` describing only the gateway's client auth (an HTTP bearer scheme when
/// clients are configured, none otherwise; skills' own requirements are dropped, they name the
/// agent's schemes); `signatures` dropped (the rewrite breaks them); 0.3's endpoint fields
/// dropped; `documentationUrl`, `iconUrl` and `provider.url` dropped when on the agent's host or
/// a host the card's own interfaces name; capabilities.streaming/pushNotifications set.
pub fn serve_card(card: &Value, opts: &ServeOptions<'_>) -> Value {
    let mut out = card.as_object().cloned().unwrap_or_default();
    let mut hidden: Vec<String> = vec![opts.agent_host.to_ascii_lowercase()];
    if let Some(ifaces) = out.get("supportedInterfaces").and_then(Value::as_array) {
        hidden.extend(
            ifaces
                .iter()
                .filter_map(|i| i.get("url")?.as_str())
                .filter_map(host_of),
        );
    }
    if let Some(u) = out.get("url").and_then(Value::as_str).and_then(host_of) {
        hidden.push(u);
    }
    let hides = |v: Option<&Value>| match v.and_then(Value::as_str) {
        Some(u) => host_of(u).is_none_or(|h| hidden.contains(&h)),
        None => false,
    };
    for key in ["documentationUrl", "iconUrl"] {
        if hides(out.get(key)) {
            out.remove(key);
        }
    }
    if let Some(Value::Object(p)) = out.get_mut("provider") {
        if hides(p.get("url")) {
            p.remove("url");
        }
    }
    for key in LEGACY_FIELDS {
        out.remove(key);
    }
    out.remove("signatures");
    let root = format!("{}/agents/{}", opts.base.trim_end_matches('/'), opts.name);
    out.insert(
        "supportedInterfaces".to_owned(),
        json!([
            {"url": root, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
            {"url": format!("{root}/jsonrpc"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        ]),
    );
    if opts.bearer {
        out.insert(
            "securitySchemes".to_owned(),
            json!({"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer",
                "description": "a client token of the gateway"}}}),
        );
        out.insert(
            "securityRequirements".to_owned(),
            json!([{"schemes": {"bearer": {"list": []}}}]),
        );
    } else {
        out.remove("securitySchemes");
        out.remove("securityRequirements");
    }
    if let Some(Value::Array(skills)) = out.get_mut("skills") {
        for s in skills.iter_mut().filter_map(Value::as_object_mut) {
            s.remove("securityRequirements");
            s.remove("security");
        }
    }
    let caps = out.entry("capabilities").or_insert_with(|| json!({}));
    if !caps.is_object() {
        *caps = json!({});
    }
    if let Value::Object(c) = caps {
        c.insert("streaming".to_owned(), Value::Bool(opts.streaming));
        c.insert(
            "pushNotifications".to_owned(),
            Value::Bool(opts.push_notifications),
        );
    }
    Value::Object(out)
}

/// The lower-cased host of an absolute URL (`scheme://[userinfo@]host[:port]/...`, IPv6 in
/// brackets); `None` when it is not one.
pub fn host_of(url: &str) -> Option<String> {
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = hostport.strip_prefix('[') {
        v6.split_once(']')?.0
    } else {
        hostport.split(':').next()?
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sdk_card(binding: &str, url: &str) -> Value {
        // a2a-sdk 1.3.0's card for tests/a2a/agent.py, as served.
        json!({"name": "sdk-scripted-agent", "description": "d", "version": "1.0.0",
            "supportedInterfaces": [{"url": url, "protocolBinding": binding, "protocolVersion": "1.0"}],
            "capabilities": {"streaming": true, "pushNotifications": false},
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "script", "name": "Scripted replies", "description": "x", "tags": ["test"]}]})
    }

    fn paths(v: &[Violation]) -> Vec<&str> {
        v.iter().map(|v| v.instance_path.as_str()).collect()
    }

    #[test]
    fn sdk_cards_pass_and_broken_ones_name_the_field() {
        assert_eq!(
            check_card(&sdk_card("JSONRPC", "http://127.0.0.1:1/a2a/jsonrpc")),
            []
        );
        let mut c = sdk_card("JSONRPC", "http://x");
        c.as_object_mut().map(|o| o.remove("capabilities"));
        c["supportedInterfaces"] = json!([]);
        c["skills"][0]["tags"] = json!("t");
        c["securitySchemes"] =
            json!({"s": {"httpAuthSecurityScheme": {}, "mtlsSecurityScheme": {}}});
        assert_eq!(
            paths(&check_card(&c)),
            [
                "/supportedInterfaces",
                "/capabilities",
                "/securitySchemes/s",
                "/skills/0/tags"
            ]
        );
        assert_eq!(
            paths(&check_card(&json!({"name": "n"})))[0],
            "/supportedInterfaces"
        );
        assert_eq!(paths(&check_card(&json!([]))), [""]);
        let mut c = sdk_card("JSONRPC", "http://x");
        c["supportedInterfaces"][0]
            .as_object_mut()
            .map(|o| o.remove("protocolVersion"));
        assert_eq!(
            paths(&check_card(&c)),
            ["/supportedInterfaces/0/protocolVersion"]
        );
    }

    #[test]
    fn the_first_usable_interface_is_chosen() {
        let card = json!({"supportedInterfaces": [
            {"url": "grpc://a", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
            {"url": "http://a/v03", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
            {"url": "http://a/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0.1", "tenant": "t1"},
            {"url": "http://a/rpc", "protocolBinding": "jsonrpc", "protocolVersion": "1.0"}]});
        let i = choose_interface(&card, None).expect("one");
        assert_eq!(
            (i.url.as_str(), i.binding, i.tenant.as_deref()),
            ("http://a/rest", Binding::HttpJson, Some("t1"))
        );
        let i = choose_interface(&card, Some(Binding::JsonRpc)).expect("one");
        assert_eq!(
            (i.url.as_str(), i.binding, i.tenant),
            ("http://a/rpc", Binding::JsonRpc, None)
        );
        let only_03 = json!({"supportedInterfaces": [{"url": "http://a", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}]});
        let e = choose_interface(&only_03, None).expect_err("none");
        assert!(e.message.contains("JSONRPC 0.3"));
        assert!(
            choose_interface(&sdk_card("JSONRPC", "http://a"), Some(Binding::HttpJson)).is_err()
        );
        assert!(choose_interface(&json!({}), None).is_err());
        assert_eq!(NoSupportedInterface::REASON, "no_supported_interface");
    }

    #[test]
    fn the_served_card_names_only_the_gateway() {
        let mut card = sdk_card("JSONRPC", "http://agent.internal:9000/a2a");
        card["documentationUrl"] = json!("http://AGENT.internal/docs");
        card["iconUrl"] = json!("https://cdn.example.com/icon.png");
        card["provider"] = json!({"organization": "Org", "url": "http://10.0.0.7:81/"});
        card["signatures"] = json!([{"protected": "p", "signature": "s"}]);
        card["securitySchemes"] = json!({"agent_oauth": {"oauth2SecurityScheme": {"flows": {}}}});
        card["securityRequirements"] = json!([{"schemes": {"agent_oauth": {"list": ["x"]}}}]);
        card["skills"][0]["securityRequirements"] =
            json!([{"schemes": {"agent_oauth": {"list": []}}}]);
        card["url"] = json!("http://10.0.0.7:81/v03");
        card["additionalInterfaces"] =
            json!([{"url": "http://10.0.0.7:81/v03", "transport": "JSONRPC"}]);
        card["x-extension"] = json!({"kept": true});
        let opts = ServeOptions {
            base: "https://gw.example.com/",
            name: "echo",
            agent_host: "127.0.0.1",
            bearer: true,
            streaming: false,
            push_notifications: false,
        };
        let served = serve_card(&card, &opts);
        assert_eq!(
            served["supportedInterfaces"],
            json!([{"url": "https://gw.example.com/agents/echo", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
                   {"url": "https://gw.example.com/agents/echo/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}])
        );
        assert_eq!(
            served.get("documentationUrl"),
            None,
            "on an interface's host"
        );
        assert_eq!(served["iconUrl"], "https://cdn.example.com/icon.png");
        assert_eq!(
            served["provider"],
            json!({"organization": "Org"}),
            "on the 0.3 url's host"
        );
        for gone in ["signatures", "url", "additionalInterfaces"] {
            assert_eq!(served.get(gone), None, "{gone}");
        }
        assert_eq!(
            served["securitySchemes"],
            json!({"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "description": "a client token of the gateway"}}})
        );
        assert_eq!(
            served["securityRequirements"],
            json!([{"schemes": {"bearer": {"list": []}}}])
        );
        assert_eq!(served["skills"][0].get("securityRequirements"), None);
        assert_eq!(
            served["capabilities"],
            json!({"streaming": false, "pushNotifications": false})
        );
        assert_eq!(served["x-extension"], json!({"kept": true}));
        assert_eq!(check_card(&served), []);
        // Chosen by the SDKs' rules, the served card leads to the gateway only.
        assert_eq!(
            choose_interface(&served, None).expect("usable").url,
            "https://gw.example.com/agents/echo"
        );
        let open = serve_card(
            &card,
            &ServeOptions {
                bearer: false,
                streaming: true,
                ..opts
            },
        );
        assert_eq!(open.get("securitySchemes"), None);
        assert_eq!(open.get("securityRequirements"), None);
        assert_eq!(open["capabilities"]["streaming"], true);
        // A URL on the configured agent host is dropped too, and so is one that is no URL.
        let mut c = sdk_card("JSONRPC", "http://public.example.com/a2a");
        c["documentationUrl"] = json!("http://127.0.0.1:8080/docs");
        c["iconUrl"] = json!("not a url");
        let s = serve_card(&c, &opts);
        assert_eq!((s.get("documentationUrl"), s.get("iconUrl")), (None, None));
    }

    #[test]
    fn hosts_are_read_from_urls() {
        assert_eq!(
            host_of("https://User@Host.EXAMPLE:8443/p?q").as_deref(),
            Some("host.example")
        );
        assert_eq!(host_of("http://[::1]:80/").as_deref(), Some("::1"));
        assert_eq!(host_of("http://h#frag").as_deref(), Some("h"));
        assert_eq!(host_of("mailto:x@y"), None);
        assert_eq!(host_of("http:///path"), None);
    }
}
