//! Official A2A 1.0 agent cards (§8, a2a.proto's AgentCard): the check, the choice of the
//! interface the gateway talks to, and the card the gateway serves in the agent's place.
//!
//! The check follows the proto's REQUIRED fields and enums. One leniency, on purpose: §5.7 says a
//! REQUIRED repeated field needs at least one element, but only `supportedInterfaces` is held to
//! that; `skills`, `tags` and the media-type lists must be present lists, possibly empty, since
//! they are descriptive and refusing the card would make the agent unusable for no safety gain.

use serde_json::{json, Map, Value};

use super::check::{fields, oneof, opt, req, Ck, T};
use super::version::is_served;
use crate::protocol::node::{Json, Object};
use crate::protocol::origin::Origin;
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
            // Required by the proto, yet left out by agents in the field: read as 1.0 with a
            // warning (`choose_interface`), as a2a-sdk's client reads it.
            opt("protocolVersion", "protocol_version", T::Str),
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
    /// `GRPC` (§10).
    Grpc,
}

impl Binding {
    /// The card's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Binding::JsonRpc => "JSONRPC",
            Binding::HttpJson => "HTTP+JSON",
            Binding::Grpc => "GRPC",
        }
    }

    /// The binding a card names (case-insensitively, as @a2a-js/sdk matches; a2a-sdk matches
    /// exactly); `None` for custom bindings.
    pub fn parse(s: &str) -> Option<Binding> {
        [Binding::JsonRpc, Binding::HttpJson, Binding::Grpc]
            .into_iter()
            .find(|b| b.as_str().eq_ignore_ascii_case(s))
    }
}

impl From<crate::config::Binding> for Binding {
    fn from(b: crate::config::Binding) -> Binding {
        match b {
            crate::config::Binding::JsonRpc => Binding::JsonRpc,
            crate::config::Binding::HttpJson => Binding::HttpJson,
            crate::config::Binding::Grpc => Binding::Grpc,
        }
    }
}

/// A version of A2A the gateway speaks to agents (and serves clients in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProtocolVersion {
    /// 1.0, with or without a patch part.
    V1_0,
    /// 0.3, with or without a patch part.
    V0_3,
}

impl ProtocolVersion {
    /// As `/agents` and the metric label write it: `1.0`, `0.3`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolVersion::V1_0 => "1.0",
            ProtocolVersion::V0_3 => "0.3",
        }
    }

    /// The version an interface's `protocolVersion` names, if the gateway speaks it.
    pub fn parse(v: &str) -> Option<ProtocolVersion> {
        if is_served(v) {
            Some(ProtocolVersion::V1_0)
        } else if super::v0_3::is_v0_3(v) {
            Some(ProtocolVersion::V0_3)
        } else {
            None
        }
    }
}

impl From<crate::config::A2aVersion> for ProtocolVersion {
    fn from(v: crate::config::A2aVersion) -> ProtocolVersion {
        match v {
            crate::config::A2aVersion::V1_0 => ProtocolVersion::V1_0,
            crate::config::A2aVersion::V0_3 => ProtocolVersion::V0_3,
        }
    }
}

/// What an agent's entry asks of the interface chosen from its card (`[[agents]] binding` and
/// `a2a_version`): nothing, by default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Prefer {
    /// Only this binding.
    pub binding: Option<Binding>,
    /// Only this version.
    pub version: Option<ProtocolVersion>,
}

impl Prefer {
    /// What `cfg` asks.
    pub fn of(cfg: &crate::config::AgentConfig) -> Prefer {
        Prefer {
            binding: cfg.binding.map(Into::into),
            version: cfg.a2a_version.map(Into::into),
        }
    }

    /// Whether `interface` is one this asks for.
    pub fn fits(&self, interface: &Interface) -> bool {
        self.binding.is_none_or(|b| b == interface.binding)
            && self.version.is_none_or(|v| v == interface.version)
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
    /// Its protocolVersion.
    pub version: ProtocolVersion,
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

/// A card warning on `/agents` (`card_warnings`): an interface of a 1.0 card without
/// `protocolVersion`, taken as 1.0 as a2a-sdk's client takes it.
pub const MISSING_PROTOCOL_VERSION: &str = "missing_protocol_version";

/// The interface chosen from a card, and the warnings its choice gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    /// The interface.
    pub interface: Interface,
    /// Codes for `/agents`' `card_warnings`.
    pub warnings: Vec<&'static str>,
}

/// The first of `supportedInterfaces` (the card's preference order, §8.3.1) with a JSONRPC or
/// HTTP+JSON binding — or only `prefer`'s, when configured — at the newest version the card
/// offers (1.0 before 0.3), or only `version`'s when configured; without `prefer`, a GRPC
/// interface only when the card has no usable JSON one (the gateway reads and writes JSON:
/// gRPC costs a translation each way). gRPC is spoken at 1.0 only (0.3's package `a2a.v1` is
/// not). A patch part is ignored (§3.6); an interface without `protocolVersion` is 1.0, with
/// the warning [`MISSING_PROTOCOL_VERSION`].
pub fn choose_interface(
    card: &Value,
    prefer: Option<Binding>,
    version: Option<ProtocolVersion>,
) -> Result<Chosen, NoSupportedInterface> {
    let offered: Vec<&Value> = card
        .get("supportedInterfaces")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let wanted: &[ProtocolVersion] = match version {
        Some(ProtocolVersion::V1_0) => &[ProtocolVersion::V1_0],
        Some(ProtocolVersion::V0_3) => &[ProtocolVersion::V0_3],
        None => &[ProtocolVersion::V1_0, ProtocolVersion::V0_3],
    };
    // Without a binding asked: the JSON bindings first, gRPC after.
    let passes: &[bool] = if prefer.is_some() {
        &[true]
    } else {
        &[false, true]
    };
    for (pass, want) in passes
        .iter()
        .flat_map(|p| wanted.iter().map(move |w| (*p, w)))
    {
        for i in &offered {
            let Some(binding) = i
                .get("protocolBinding")
                .and_then(Value::as_str)
                .and_then(Binding::parse)
            else {
                continue;
            };
            if prefer.is_some_and(|p| p != binding)
                || (prefer.is_none() && pass != (binding == Binding::Grpc))
                || (binding == Binding::Grpc && *want != ProtocolVersion::V1_0)
            {
                continue;
            }
            let stated = i
                .get("protocolVersion")
                .and_then(Value::as_str)
                .filter(|v| !v.trim().is_empty());
            let (at, warning) = match stated {
                Some(v) => (ProtocolVersion::parse(v), None),
                None => (Some(ProtocolVersion::V1_0), Some(MISSING_PROTOCOL_VERSION)),
            };
            if at != Some(*want) {
                continue;
            }
            let Some(url) = i
                .get("url")
                .and_then(Value::as_str)
                .filter(|u| !u.is_empty())
            else {
                continue;
            };
            return Ok(Chosen {
                interface: Interface {
                    url: url.to_owned(),
                    binding,
                    version: *want,
                    tenant: i
                        .get("tenant")
                        .and_then(Value::as_str)
                        .filter(|t| !t.is_empty())
                        .map(str::to_owned),
                },
                warnings: warning.into_iter().collect(),
            });
        }
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
    let wanted_binding = prefer.map_or("JSONRPC, HTTP+JSON or GRPC".to_owned(), |b| {
        b.as_str().to_owned()
    });
    let wanted_version = match version {
        Some(v) => v.as_str(),
        None => "1.0 or 0.3",
    };
    Err(NoSupportedInterface {
        message: format!(
            "no {wanted_binding} interface at protocolVersion {wanted_version} among [{}]",
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
    /// The agent's configured `url`: no URL on its host is served.
    pub agent_url: &'a str,
    /// Whether clients are configured (then the card names a bearer scheme).
    pub bearer: bool,
    /// `capabilities.streaming` as served.
    pub streaming: bool,
    /// `capabilities.pushNotifications` as served.
    pub push_notifications: bool,
    /// The gateway's own interfaces for the agent, as its wire forms write them
    /// (`http::a2a::wire::served_interfaces`), in its order of preference.
    pub interfaces: &'a [Value],
    /// The `[[auth.oidc]]` issuers, by name, with their discovery URLs: each an
    /// `openIdConnect` scheme beside the bearer scheme.
    pub openid: &'a [(std::sync::Arc<str>, String)],
}

/// The members of each card message the gateway passes on, by the proto's JSON names: what
/// the proto does not know is not served (an agent's `x-internal` field, 0.3's endpoint fields
/// `url`, `additionalInterfaces`, `preferredTransport`, `security`...), since nothing can say
/// what it holds, and a 0.3 client would follow 0.3's fields straight to the agent.
const CARD: [&str; 10] = [
    "name",
    "description",
    "provider",
    "version",
    "documentationUrl",
    "capabilities",
    "defaultInputModes",
    "defaultOutputModes",
    "skills",
    "iconUrl",
];
const PROVIDER: [&str; 2] = ["organization", "url"];
const CAPABILITIES: [&str; 2] = ["extensions", "extendedAgentCard"];
const EXTENSION: [&str; 4] = ["uri", "description", "required", "params"];
/// A skill's `securityRequirements` name the agent's schemes, which are not served.
const SKILL: [&str; 7] = [
    "id",
    "name",
    "description",
    "tags",
    "examples",
    "inputModes",
    "outputModes",
];

/// The members of `v` (an object) named in `keep`; an empty object for anything else.
fn only(v: Option<&Value>, keep: &[&str]) -> Map<String, Value> {
    v.and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .filter(|(k, _)| keep.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// The card the gateway serves for an agent: only the fields a2a.proto's AgentCard knows
/// ([`CARD`], and within each message its own fields), with `supportedInterfaces` replaced by
/// exactly the gateway's own ([`ServeOptions::interfaces`]: one per wire form it serves
/// clients in, under `{base}/agents/{name}`, no tenant: the agent's name is the route);
/// `securitySchemes` and `securityRequirements` describing only the gateway's client auth (an
/// HTTP bearer scheme when clients are configured, none otherwise; skills' own requirements
/// are dropped, they name the agent's schemes); `signatures` dropped (the rewrite breaks them);
/// every URL field that names the agent's host (in any spelling: `protocol::origin`) or a host
/// the card's own interfaces name dropped (`documentationUrl`, `iconUrl`, `provider.url`, an
/// extension whose `uri` does); capabilities.streaming/pushNotifications set.
pub fn serve_card(card: &Value, opts: &ServeOptions<'_>) -> Value {
    let agent = Origin::parse(opts.agent_url);
    let mut hidden: Vec<Origin> = agent.into_iter().collect();
    if let Some(ifaces) = card.get("supportedInterfaces").and_then(Value::as_array) {
        hidden.extend(
            ifaces
                .iter()
                .filter_map(|i| i.get("url")?.as_str())
                .filter_map(Origin::parse),
        );
    }
    if let Some(u) = card.get("url").and_then(Value::as_str) {
        hidden.extend(Origin::parse(u));
    }
    // A URL that cannot be read, has no host, or names a hidden host, is the agent's.
    let hides = |v: &Value| match v.as_str() {
        Some(u) => {
            hidden.iter().any(|o| o.names_host(u))
                || url::Url::parse(u.trim()).map_or(true, |p| p.host().is_none())
        }
        None => true,
    };
    let mut out = only(Some(card), &CARD);
    for key in ["documentationUrl", "iconUrl"] {
        if out.get(key).is_some_and(hides) {
            out.remove(key);
        }
    }
    if out.contains_key("provider") {
        let mut p = only(out.get("provider"), &PROVIDER);
        if p.get("url").is_some_and(hides) {
            p.remove("url");
        }
        out.insert("provider".to_owned(), Value::Object(p));
    }
    if let Some(Value::Array(skills)) = out.get_mut("skills") {
        for s in skills.iter_mut() {
            *s = Value::Object(only(Some(s), &SKILL));
        }
    }
    let mut caps = only(out.get("capabilities"), &CAPABILITIES);
    if let Some(Value::Array(exts)) = caps.get_mut("extensions") {
        exts.retain(|e| !e.get("uri").is_some_and(hides));
        for e in exts.iter_mut() {
            *e = Value::Object(only(Some(e), &EXTENSION));
        }
    }
    caps.insert("streaming".to_owned(), Value::Bool(opts.streaming));
    caps.insert(
        "pushNotifications".to_owned(),
        Value::Bool(opts.push_notifications),
    );
    out.insert("capabilities".to_owned(), Value::Object(caps));
    out.insert(
        "supportedInterfaces".to_owned(),
        Value::Array(opts.interfaces.to_vec()),
    );
    if opts.bearer {
        out.insert(
            "securitySchemes".to_owned(),
            json!({"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer",
                "description": "a client token of the gateway"}}}),
        );
        let mut requirements = vec![json!({"schemes": {"bearer": {"list": []}}})];
        if let Some(Value::Object(schemes)) = out.get_mut("securitySchemes") {
            for (name, url) in opts.openid {
                let key = format!("oidc-{name}");
                schemes.insert(
                    key.clone(),
                    json!({"openIdConnectSecurityScheme": {"openIdConnectUrl": url,
                        "description": "a token of this identity provider, as a bearer token"}}),
                );
                requirements.push(json!({"schemes": {key: {"list": []}}}));
            }
        }
        out.insert(
            "securityRequirements".to_owned(),
            Value::Array(requirements),
        );
    }
    // A 0.3 client reads the card too: the 0.3 fields of the gateway's 0.3 interfaces.
    super::v0_3::card::add_fields(&mut out, opts.bearer);
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The interfaces the gateway's wire forms serve an agent at `root` (as
    /// `http::a2a::wire::served_interfaces` writes them).
    fn gateway_interfaces(root: &str) -> Vec<Value> {
        vec![
            json!({"url": root, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}),
            json!({"url": format!("{root}/jsonrpc"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}),
        ]
    }

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
        c["supportedInterfaces"][0]["protocolVersion"] = json!(1);
        assert_eq!(
            paths(&check_card(&c)),
            ["/supportedInterfaces/0/protocolVersion"]
        );
        // Left out, it passes the check (and is chosen as 1.0 with a warning).
        c["supportedInterfaces"][0]
            .as_object_mut()
            .map(|o| o.remove("protocolVersion"));
        assert_eq!(paths(&check_card(&c)), Vec::<&str>::new());
    }

    #[test]
    fn the_first_usable_interface_is_chosen() {
        let card = json!({"supportedInterfaces": [
            {"url": "grpc://a", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
            {"url": "http://a/v03", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
            {"url": "http://a/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0.1", "tenant": "t1"},
            {"url": "http://a/rpc", "protocolBinding": "jsonrpc", "protocolVersion": "1.0"}]});
        let i = choose_interface(&card, None, None).expect("one").interface;
        assert_eq!(
            (i.url.as_str(), i.binding, i.tenant.as_deref()),
            ("http://a/rest", Binding::HttpJson, Some("t1"))
        );
        let i = choose_interface(&card, Some(Binding::JsonRpc), None)
            .expect("one")
            .interface;
        assert_eq!(
            (i.url.as_str(), i.binding, i.tenant),
            ("http://a/rpc", Binding::JsonRpc, None)
        );
        // At 0.3 when asked, or when it is all the card offers.
        let i = choose_interface(&card, None, Some(ProtocolVersion::V0_3))
            .expect("one")
            .interface;
        assert_eq!(
            (i.url.as_str(), i.version),
            ("http://a/v03", ProtocolVersion::V0_3)
        );
        let only_03 = json!({"supportedInterfaces": [{"url": "http://a", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}]});
        let i = choose_interface(&only_03, None, None)
            .expect("0.3")
            .interface;
        assert_eq!(i.version, ProtocolVersion::V0_3);
        let e = choose_interface(&only_03, None, Some(ProtocolVersion::V1_0)).expect_err("none");
        assert!(e.message.contains("JSONRPC 0.3"), "{}", e.message);
        let only_02 = json!({"supportedInterfaces": [{"url": "http://a", "protocolBinding": "JSONRPC", "protocolVersion": "0.2.5"}]});
        assert!(choose_interface(&only_02, None, None).is_err());
        assert!(choose_interface(
            &sdk_card("JSONRPC", "http://a"),
            Some(Binding::HttpJson),
            None
        )
        .is_err());
        assert!(choose_interface(&json!({}), None, None).is_err());
        assert_eq!(NoSupportedInterface::REASON, "no_supported_interface");
        // gRPC when asked, or when the card has no usable JSON interface; at 1.0 only.
        let i = choose_interface(&card, Some(Binding::Grpc), None)
            .expect("grpc")
            .interface;
        assert_eq!((i.url.as_str(), i.binding), ("grpc://a", Binding::Grpc));
        let only_grpc = json!({"supportedInterfaces": [
            {"url": "http://a:1", "protocolBinding": "GRPC", "protocolVersion": "0.3"},
            {"url": "http://a:2", "protocolBinding": "GRPC", "protocolVersion": "1.0", "tenant": "x"}]});
        let i = choose_interface(&only_grpc, None, None)
            .expect("grpc")
            .interface;
        assert_eq!(
            (i.url.as_str(), i.tenant.as_deref()),
            ("http://a:2", Some("x"))
        );
        assert!(choose_interface(&only_grpc, None, Some(ProtocolVersion::V0_3)).is_err());
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
            agent_url: "http://127.0.0.1:9",
            bearer: true,
            streaming: false,
            push_notifications: false,
            interfaces: &gateway_interfaces("https://gw.example.com/agents/echo"),
            openid: &[],
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
        assert_eq!(
            served.get("x-extension"),
            None,
            "no field the proto does not know"
        );
        assert_eq!(check_card(&served), []);
        // Chosen by the SDKs' rules, the served card leads to the gateway only.
        assert_eq!(
            choose_interface(&served, None, None)
                .expect("usable")
                .interface
                .url,
            "https://gw.example.com/agents/echo"
        );
        let issuers = [(
            std::sync::Arc::from("corp"),
            "https://idp.example.com/.well-known/openid-configuration".to_owned(),
        )];
        let with_oidc = serve_card(
            &card,
            &ServeOptions {
                openid: &issuers,
                ..opts
            },
        );
        assert_eq!(
            with_oidc["securitySchemes"]["oidc-corp"],
            json!({"openIdConnectSecurityScheme": {"openIdConnectUrl": "https://idp.example.com/.well-known/openid-configuration",
                "description": "a token of this identity provider, as a bearer token"}})
        );
        assert_eq!(
            with_oidc["securityRequirements"],
            json!([{"schemes": {"bearer": {"list": []}}}, {"schemes": {"oidc-corp": {"list": []}}}])
        );
        assert_eq!(check_card(&with_oidc), []);
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

    /// Every URL field naming the configured agent's host, in any spelling a browser reads as
    /// it, is dropped, and nothing the proto does not know is served, at any depth.
    #[test]
    fn the_agents_host_in_any_spelling_and_unknown_fields_are_not_served() {
        let mut c = sdk_card("JSONRPC", "https://public.example.com/a2a");
        c["documentationUrl"] = json!("HTTP://LOCALHOST.:18103/docs");
        c["iconUrl"] = json!("http://127.1:18103/icon.png");
        c["provider"] = json!({"organization": "Org", "url": "http://%31%32%37.0.0.1:18103/",
            "x-contact": "http://127.0.0.1:18103/who"});
        c["x-internal"] = json!("http://127.0.0.1:18103/internal");
        c["capabilities"]["x-debug"] = json!("http://127.0.0.1:18103/debug");
        c["capabilities"]["extensions"] = json!([
            {"uri": "http://[::1]:18103/ext/one", "description": "the agent's own"},
            {"uri": "https://a2a.example.org/ext/two", "required": true,
                "params": {"k": "v"}, "x-where": "http://127.0.0.1:18103/"},
        ]);
        c["skills"][0]["x-endpoint"] = json!("http://127.0.0.1:18103/skill");
        c["preferredTransport"] = json!("JSONRPC");
        let opts = ServeOptions {
            base: "https://gw.example.com",
            name: "echo",
            agent_url: "http://127.0.0.1:18103",
            bearer: false,
            streaming: true,
            push_notifications: true,
            interfaces: &gateway_interfaces("https://gw.example.com/agents/echo"),
            openid: &[],
        };
        let s = serve_card(&c, &opts);
        assert!(!s.to_string().contains("18103"), "{s}");
        assert_eq!(s["provider"], json!({"organization": "Org"}));
        assert_eq!(
            s["capabilities"],
            json!({"streaming": true, "pushNotifications": true, "extensions": [
                {"uri": "https://a2a.example.org/ext/two", "required": true, "params": {"k": "v"}}]})
        );
        assert_eq!(s["skills"][0].get("x-endpoint"), None);
        let mut keys: Vec<&str> = s
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "capabilities",
                "defaultInputModes",
                "defaultOutputModes",
                "description",
                "name",
                "provider",
                "skills",
                "supportedInterfaces",
                "version"
            ]
        );
        assert_eq!(check_card(&s), []);
        // A URL elsewhere stays.
        c["documentationUrl"] = json!("https://docs.example.com/agent");
        assert_eq!(
            serve_card(&c, &opts)["documentationUrl"],
            "https://docs.example.com/agent"
        );
    }
}
