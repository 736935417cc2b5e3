//! The Clawpedia AgentCard: the spec's schema, checking a fetched card, and compiling the card's own
//! `input_schema` / `output_schema` once so every task is validated without recompiling.
//!
//! Every schema is compiled as draft-07 with `$ref` resolution offline (a card must not be able
//! to make the gateway fetch a URL or read a file), the linear-time `regex` engine for `pattern`
//! (a card must not be able to stall a core with a backtracking pattern), and `format: uuid`
//! registered, because draft-07 does not know it and would otherwise ignore it silently.
//!
//! A card's schemas are also compiled within a [`Budget`]: a small card can otherwise describe a
//! large compiled program (1,000 `"pattern": "\\w{20000}"` in 12 KB of JSON took 3 GB). The
//! budget is checked by one walk over the schemas before `jsonschema` compiles anything
//! ([`check_budget`]), and each pattern is compiled under the regex engine's size limits.

use std::sync::OnceLock;

use bytes::Bytes;
use jsonschema::{Draft, PatternOptions, Validator};
use serde_json::Value;

pub use super::budget::{check_budget, Budget};
use crate::protocol::{CardRefusal as Refusal, InvalidCard, Violation, MAX_VIOLATIONS};

/// The AgentCard JSON Schema, verbatim from the A2A 1.0 reference.
pub const AGENT_CARD_SCHEMA: &str = r#"{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "title": "AgentCard",
  "type": "object",
  "properties": {
    "protocol_version": { "type": "string", "const": "1.0" },
    "agent_id": { "type": "string", "format": "uuid" },
    "display_name": { "type": "string", "minLength": 1 },
    "description": { "type": "string", "minLength": 10 },
    "capabilities": { "type": "array", "items": { "type": "string" } },
    "input_schema": { "type": "object", "minProperties": 1 },
    "output_schema": { "type": "object" },
    "notification_config": {
      "type": "object",
      "properties": {
        "endpoint_url": { "type": "string", "format": "uri" },
        "auth_header": { "type": "string" }
      },
      "required": ["endpoint_url"]
    }
  },
  "required": ["protocol_version", "agent_id", "display_name", "description", "capabilities", "input_schema"]
}"#;

/// A UUID in its hyphenated 8-4-4-4-12 form, the form the protocol's examples use. Braced, URN
/// and unhyphenated forms are refused: ids are compared as strings everywhere.
pub fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, &c)| match i {
            8 | 13 | 18 | 23 => c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// Compile a schema the way the gateway compiles every schema (see the module docs), each
/// pattern within the default [`Budget`]'s regex size limits.
pub fn compile_schema(schema: &Value) -> Result<Validator, String> {
    compile_schema_within(schema, &Budget::DEFAULT).map_err(|e| e.to_string())
}

/// [`compile_schema`] with the regex size limits of `budget`, and `jsonschema`'s own error.
/// Only the regex limits apply here: the rest of the budget is [`check_budget`]'s, which must
/// run first on untrusted schemas.
pub fn compile_schema_within(
    schema: &Value,
    budget: &Budget,
) -> Result<Validator, jsonschema::ValidationError<'static>> {
    jsonschema::options()
        .with_draft(Draft::Draft7)
        .offline()
        .should_validate_formats(true)
        .with_format("uuid", is_uuid)
        .with_pattern_options(
            PatternOptions::regex()
                .size_limit(budget.regex_size_limit)
                .dfa_size_limit(budget.regex_dfa_size_limit),
        )
        .build(schema)
}

/// Whether a compile error is a pattern the regex engine refused although it is a valid ECMA 262
/// pattern of the kind it runs (no look-around, no back-reference): the size limit, then.
/// `jsonschema` reports every refused pattern alike, and finding out for certain would mean
/// compiling the pattern without the limit, which is what the limit is there to prevent.
fn is_pattern_over_limit(e: &jsonschema::ValidationError<'_>) -> bool {
    static ECMA: OnceLock<Option<Validator>> = OnceLock::new();
    let is_regex_error = matches!(
        e.kind(),
        jsonschema::error::ValidationErrorKind::Format { format } if format == "regex"
    );
    let Some(p) = e.instance().as_str().filter(|_| is_regex_error) else {
        return false;
    };
    let Some(ecma) = ECMA.get_or_init(|| {
        compile_schema_within(&serde_json::json!({"format": "regex"}), &Budget::DEFAULT).ok()
    }) else {
        return false;
    };
    let unsupported = ["(?=", "(?!", "(?<=", "(?<!", "\\k<"]
        .iter()
        .any(|s| p.contains(s))
        || p.as_bytes()
            .windows(2)
            .any(|w| w[0] == b'\\' && (b'1'..=b'9').contains(&w[1]));
    !unsupported && ecma.is_valid(&Value::String(p.to_owned()))
}

/// Every violation of `instance` against `validator`, at most [`MAX_VIOLATIONS`].
/// `prefix` is prepended to instance paths (e.g. `/input` when validating a task's input).
pub fn violations(validator: &Validator, instance: &Value, prefix: &str) -> Vec<Violation> {
    validator
        .iter_errors(instance)
        .take(MAX_VIOLATIONS)
        .map(|e| {
            // Masked: the message names the rule, not the value. A quoted instance could be
            // the whole 1 MiB input, repeated once per failing branch.
            Violation::new(
                format!("{prefix}{}", e.instance_path()),
                e.schema_path().to_string(),
                e.masked().to_string(),
            )
        })
        .collect()
}

fn card_schema() -> &'static Validator {
    static V: OnceLock<Validator> = OnceLock::new();
    V.get_or_init(|| {
        let schema: Value = match serde_json::from_str(AGENT_CARD_SCHEMA) {
            Ok(v) => v,
            Err(e) => unreachable!("the embedded AgentCard schema is valid JSON: {e}"),
        };
        match compile_schema(&schema) {
            Ok(v) => v,
            Err(e) => unreachable!("the embedded AgentCard schema compiles: {e}"),
        }
    })
}

/// Where a card keeps the credential the agent sends with its push notifications (and, when the
/// table is malformed, possibly the credential itself as a value of the wrong type).
const SECRET_POINTER: &str = "/notification_config";

/// A card that passed validation, with its compiled validators.
#[derive(Debug)]
pub struct Card {
    /// The card's `agent_id`: the agent's other name in routes, and the one its tasks must carry.
    pub agent_id: String,
    /// The card's `display_name`, listed in the catalog.
    pub display_name: String,
    /// The card's `capabilities`, listed in the catalog.
    pub capabilities: Vec<String>,
    /// The compiled `input_schema`, checked against every task input before it reaches the agent.
    pub input: Validator,
    /// The compiled `output_schema`, when the card has one: a task's `output` is checked against
    /// it.
    pub output: Option<Validator>,
    /// `notification_config.endpoint_url`, to warn when it is not this gateway.
    pub notification_endpoint: Option<String>,
    /// The card as served by the gateway: serialized once, with `notification_config.auth_header`
    /// removed (it is the agent's credential for push notifications and never leaves the gateway).
    pub served: Bytes,
}

impl Card {
    /// An agent's pushes only reach the ledger (and the webhooks) through this gateway's ingest
    /// route; a card naming any other endpoint means status changes the gateway will not see.
    /// The warning to log for an agent routed as `name`, if so.
    pub fn ingest_warning(&self, name: &str) -> Option<String> {
        let url = self.notification_endpoint.as_deref()?;
        let path = url
            .parse::<hyper::Uri>()
            .map(|u| u.path().to_owned())
            .unwrap_or_default();
        let ours = [
            format!("/agents/{name}/notifications"),
            format!("/agents/{}/notifications", self.agent_id),
        ];
        (!ours.iter().any(|p| path.ends_with(p.as_str()))).then(|| {
            format!(
                "the agent's card sends push notifications to {url:?}, somewhere other than this gateway (expected a path ending in {})",
                ours[0]
            )
        })
    }

    /// Validate a fetched card and compile its schemas within [`Budget::DEFAULT`]. The auth
    /// header is dropped here, so no later code path can serve or log it by mistake.
    pub fn compile(doc: Value) -> Result<Card, InvalidCard> {
        Card::compile_within(doc, &Budget::DEFAULT)
    }

    /// [`Card::compile`] within `budget`: the card is checked against the AgentCard schema, its
    /// schemas against the budget ([`check_budget`]), and only then compiled.
    pub fn compile_within(mut doc: Value, budget: &Budget) -> Result<Card, InvalidCard> {
        let details: Vec<Violation> = card_schema()
            .iter_errors(&doc)
            .take(MAX_VIOLATIONS)
            .map(|e| {
                let at = e.instance_path().to_string();
                // A malformed auth_header is still the agent's credential: say where and why the
                // card is wrong, never the value (these messages are served and logged).
                let message = if at.starts_with(SECRET_POINTER) {
                    e.masked().to_string()
                } else {
                    e.to_string()
                };
                Violation::new(at, e.schema_path().to_string(), message)
            })
            .collect();
        if !details.is_empty() {
            return Err(InvalidCard {
                kind: Refusal::Invalid,
                message: "agent card does not match the A2A 1.0 AgentCard schema".into(),
                details,
            });
        }
        let schemas: Vec<(&str, &Value)> = ["input_schema", "output_schema"]
            .into_iter()
            .filter_map(|k| doc.get(k).map(|v| (k, v)))
            .collect();
        check_budget(&schemas, budget).map_err(|v| InvalidCard {
            kind: Refusal::Budget,
            message: format!(
                "agent card is over the gateway's schema budget at {}: {}",
                v.instance_path, v.message
            ),
            details: vec![v],
        })?;
        let schema_error = |which: &str, e: jsonschema::ValidationError<'static>| {
            let at = format!("/{which}{}", e.schema_path());
            if is_pattern_over_limit(&e) {
                let message = format!(
                    "pattern compiles to more than {} bytes (the limit per pattern)",
                    budget.regex_size_limit
                );
                return InvalidCard {
                    kind: Refusal::Budget,
                    message: format!(
                        "agent card is over the gateway's schema budget at {at}: {message}"
                    ),
                    details: vec![Violation::new(at, "budget/regex_size_limit", message)],
                };
            }
            let e = e.to_string();
            InvalidCard {
                kind: Refusal::Invalid,
                message: format!("agent card {which} does not compile as a draft-07 schema: {e}"),
                details: vec![Violation::new(at, "", e)],
            }
        };
        let input = compile_schema_within(&doc["input_schema"], budget)
            .map_err(|e| schema_error("input_schema", e))?;
        let output = match doc.get("output_schema") {
            Some(s) => Some(
                compile_schema_within(s, budget).map_err(|e| schema_error("output_schema", e))?,
            ),
            None => None,
        };
        let str_of = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let notification_endpoint = doc
            .pointer("/notification_config/endpoint_url")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if let Some(nc) = doc
            .get_mut("notification_config")
            .and_then(Value::as_object_mut)
        {
            nc.remove("auth_header");
        }
        let served = serde_json::to_vec(&doc).map_err(|e| InvalidCard {
            kind: Refusal::Invalid,
            message: format!("agent card cannot be serialized: {e}"),
            details: Vec::new(),
        })?;
        Ok(Card {
            agent_id: str_of(&doc["agent_id"]),
            display_name: str_of(&doc["display_name"]),
            capabilities: doc["capabilities"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            input,
            output,
            notification_endpoint,
            served: Bytes::from(served),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn spec_example() -> Value {
        a2a_sample_agent::spec_example_card()
    }

    #[test]
    fn the_spec_example_compiles_and_validates_input() {
        let card = Card::compile(spec_example()).expect("valid card");
        assert_eq!(card.agent_id, "f47ac10b-58cc-4372-a567-0e02b2c3d479");
        assert!(card
            .input
            .is_valid(&json!({"topic": "t", "filename": "a.py"})));
        let v = violations(
            &card.input,
            &json!({"topic": 1, "filename": "a.sh"}),
            "/input",
        );
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(v.iter().any(|v| v.instance_path == "/input/filename"));
        assert!(v.iter().any(|v| v.instance_path == "/input/topic"));
    }

    #[test]
    fn auth_header_never_reaches_the_served_card() {
        let card = Card::compile(spec_example()).expect("valid card");
        let served = String::from_utf8(card.served.to_vec()).expect("utf8");
        assert!(!served.contains("auth_header"));
        assert!(!served.contains("dG9rZW4tZm9yLXdlYmhvb2tz"));
        assert!(served.contains("endpoint_url"));
    }

    #[test]
    fn a_malformed_auth_header_is_not_quoted_in_the_violations() {
        let mut c = spec_example();
        c["notification_config"]["auth_header"] = json!(["Authorization: Bearer s3cr3t"]);
        let e = Card::compile(c).expect_err("auth_header must be a string");
        let d = e
            .details
            .iter()
            .find(|d| d.instance_path == "/notification_config/auth_header")
            .expect("the violation is reported");
        assert!(d.message.contains("string"), "{d:?}");
        assert!(!format!("{e:?}").contains("s3cr3t"), "{e:?}");
    }

    #[test]
    fn uuid_and_uri_formats_are_asserted() {
        let mut c = spec_example();
        c["agent_id"] = json!("nope");
        let e = Card::compile(c).expect_err("bad uuid");
        assert!(
            e.details.iter().any(|d| d.instance_path == "/agent_id"),
            "{e:?}"
        );
        let mut c = spec_example();
        c["notification_config"]["endpoint_url"] = json!("not a uri");
        let e = Card::compile(c).expect_err("bad uri");
        assert!(e
            .details
            .iter()
            .any(|d| d.instance_path == "/notification_config/endpoint_url"));
    }

    #[test]
    fn every_card_violation_is_reported() {
        let e = Card::compile(json!({"protocol_version": "2.0", "description": "short"}))
            .expect_err("bad card");
        // const, minLength, and four missing required properties.
        assert!(e.details.len() >= 3, "{e:?}");
    }

    #[test]
    fn remote_refs_do_not_compile() {
        let mut c = spec_example();
        c["input_schema"] = json!({"$ref": "http://169.254.169.254/latest/meta-data"});
        assert!(Card::compile(c).is_err());
        let mut c = spec_example();
        c["input_schema"] = json!({"$ref": "file:///etc/passwd"});
        assert!(Card::compile(c).is_err());
    }

    #[test]
    fn patterns_run_on_a_linear_time_engine() {
        // Catastrophic for a backtracking engine; immediate for `regex`.
        let schema = json!({"type": "string", "pattern": "^(a+)+$"});
        let v = compile_schema(&schema).expect("compiles");
        let evil = format!("{}!", "a".repeat(100_000));
        assert!(!v.is_valid(&json!(evil)));
        // Look-around is not linear-time and is refused at compile time rather than run.
        assert!(compile_schema(&json!({"type":"string","pattern":"(?=a)a"})).is_err());
    }

    /// The spec's example card with `input_schema` replaced.
    fn with_input(schema: Value) -> Value {
        let mut c = spec_example();
        c["input_schema"] = schema;
        c
    }

    /// `n` properties, each `{"type": "string", "pattern": p}`.
    fn patterned(n: usize, p: &str) -> Value {
        let props: serde_json::Map<String, Value> = (0..n)
            .map(|i| (format!("p{i:04}"), json!({"type": "string", "pattern": p})))
            .collect();
        json!({"type": "object", "properties": props})
    }

    fn refused(card: Value) -> InvalidCard {
        let e = Card::compile(card).expect_err("over budget");
        assert_eq!(e.kind, Refusal::Budget, "{e:?}");
        e
    }

    #[test]
    fn the_cards_of_the_examples_are_within_budget() {
        let spec = spec_example();
        let sample = a2a_sample_agent::card_for("Sample", None);
        for c in [&spec, &sample] {
            let schemas = [
                ("input_schema", &c["input_schema"]),
                ("output_schema", &c["output_schema"]),
            ];
            assert_eq!(check_budget(&schemas, &Budget::DEFAULT), Ok(()));
        }
        Card::compile(sample).expect("the sample agent's card compiles");
    }

    #[test]
    fn a_pattern_over_the_size_limit_is_refused_fast() {
        let started = std::time::Instant::now();
        let e = refused(with_input(patterned(1, "\\w{20000}")));
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        let d = &e.details[0];
        assert_eq!(d.schema_path, "budget/regex_size_limit", "{e:?}");
        assert_eq!(d.instance_path, "/input_schema/properties/p0000/pattern");
        assert!(e.message.contains("limit per pattern"), "{e:?}");
        // A pattern the engine cannot run is still invalid, not over budget.
        let e = Card::compile(with_input(patterned(1, "(?<=a)b"))).expect_err("look-behind");
        assert_eq!(e.kind, Refusal::Invalid, "{e:?}");
        // The same repeat under the limit compiles.
        Card::compile(with_input(patterned(1, "\\w{200}"))).expect("small repeat");
    }

    #[test]
    fn the_regex_bomb_card_is_refused_before_compiling() {
        // The issue's card: 1,000 properties of `\w{20000}`, 3 GB when compiled unbounded.
        let started = std::time::Instant::now();
        let e = refused(with_input(patterned(1_000, "\\w{20000}")));
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(e.details[0].schema_path, "budget/max_patterns", "{e:?}");
    }

    #[test]
    fn too_many_patterns_are_refused_across_both_schemas() {
        let b = Budget::DEFAULT;
        Card::compile(with_input(patterned(b.max_patterns, "^a+b$"))).expect("at the limit");
        let e = refused(with_input(patterned(b.max_patterns + 1, "^a+b$")));
        assert_eq!(e.details[0].schema_path, "budget/max_patterns");
        assert!(e.message.contains("64 patterns"), "{e:?}");
        // Counted for the card: half in each schema, plus one patternProperties key.
        let mut c = with_input(patterned(b.max_patterns / 2, "^a+b$"));
        let mut out = patterned(b.max_patterns / 2, "^c+d$");
        out["patternProperties"] = json!({"^x-": {}});
        c["output_schema"] = out;
        let e = refused(c);
        assert_eq!(
            e.details[0].instance_path, "/output_schema/properties/p0031/pattern",
            "{e:?}"
        );
    }

    #[test]
    fn too_much_pattern_source_is_refused() {
        let long = format!("^{}$", "ab|".repeat(2_000));
        let e = refused(with_input(patterned(3, &long)));
        assert_eq!(
            e.details[0].schema_path, "budget/max_pattern_bytes",
            "{e:?}"
        );
    }

    #[test]
    fn too_many_nodes_are_refused() {
        let props: serde_json::Map<String, Value> = (0..5_000)
            .map(|i| (format!("p{i}"), json!({"type": "string"})))
            .collect();
        let e = refused(with_input(json!({"type": "object", "properties": props})));
        assert_eq!(e.details[0].schema_path, "budget/max_nodes", "{e:?}");
        assert!(e.message.contains("10000 JSON values"), "{e:?}");
    }

    #[test]
    fn too_deep_a_schema_is_refused() {
        let nest = |depth: usize| {
            let mut s = json!({"type": "string"});
            for _ in 0..depth {
                s = json!({"anyOf": [s]});
            }
            s
        };
        // Two levels per anyOf: the object and its array.
        Card::compile(with_input(
            json!({"type":"object","properties":{"x": nest(30)}}),
        ))
        .expect("60 deep");
        let e = refused(with_input(nest(40)));
        assert_eq!(e.details[0].schema_path, "budget/max_depth", "{e:?}");
        assert!(e.details[0]
            .instance_path
            .starts_with("/input_schema/anyOf/0/anyOf/0"));
    }

    #[test]
    fn a_huge_enum_is_refused() {
        let members: Vec<Value> = (0..1_001).map(|i| json!(i)).collect();
        let e = refused(with_input(
            json!({"type":"object","properties":{"code":{"enum": members}}}),
        ));
        assert_eq!(
            (
                e.details[0].instance_path.as_str(),
                e.details[0].schema_path.as_str()
            ),
            ("/input_schema/properties/code/enum", "budget/max_enum")
        );
        let members: Vec<Value> = (0..1_000).map(|i| json!(i)).collect();
        Card::compile(with_input(
            json!({"type":"object","properties":{"code":{"enum": members}}}),
        ))
        .expect("1,000 members");
    }

    #[test]
    fn doubling_refs_are_refused_and_recursion_is_not() {
        // d1 refers twice to d0, d2 twice to d1...: 2^n checks per value at level n.
        let mut defs = serde_json::Map::new();
        defs.insert("d0".into(), json!({"type": "string"}));
        for i in 1..=30 {
            let r = format!("#/definitions/d{}", i - 1);
            defs.insert(
                format!("d{i}"),
                json!({"allOf": [{"$ref": r}, {"$ref": r}]}),
            );
        }
        let e = refused(with_input(json!({
            "type": "object",
            "definitions": defs,
            "properties": {"x": {"$ref": "#/definitions/d30"}}
        })));
        assert_eq!(e.details[0].schema_path, "budget/max_expanded", "{e:?}");
        // A tree refers to itself: bounded by the instance, counted once.
        let tree = json!({
            "type": "object",
            "definitions": {"node": {
                "type": "object",
                "properties": {"children": {"type": "array", "items": {"$ref": "#/definitions/node"}}}
            }},
            "properties": {"root": {"$ref": "#/definitions/node"}, "self": {"$ref": "#"}}
        });
        let card = Card::compile(with_input(tree)).expect("recursive schema");
        assert!(card
            .input
            .is_valid(&json!({"root": {"children": [{"children": []}]}})));
        assert!(!card.input.is_valid(&json!({"root": {"children": [1]}})));
    }

    #[test]
    fn refs_the_walk_cannot_follow_are_refused_only_when_they_could_resolve() {
        // An embedded resource changes what `#/...` means below it.
        let e = refused(with_input(json!({
            "type": "object",
            "properties": {"x": {"$id": "http://example.com/x.json", "type": "string"}}
        })));
        assert_eq!(e.details[0].instance_path, "/input_schema/properties/x/$id");
        // With a base URI of its own, another spelling of the schema itself is refused...
        let e = refused(with_input(json!({
            "$id": "http://example.com/in.json",
            "type": "object",
            "properties": {"x": {"$ref": "in.json#/definitions/s"}},
            "definitions": {"s": {"type": "string"}}
        })));
        assert!(e.message.contains("in.json"), "{e:?}");
        // ...its own $id and plain-name ids are followed.
        Card::compile(with_input(json!({
            "$id": "http://example.com/in.json",
            "type": "object",
            "properties": {
                "x": {"$ref": "http://example.com/in.json#/definitions/s"},
                "y": {"$ref": "#s"}
            },
            "definitions": {"s": {"$id": "#s", "type": "string"}}
        })))
        .expect("resolvable refs");
        // Without one, what the walk cannot follow `jsonschema` cannot either: invalid.
        let e = Card::compile(with_input(
            json!({"$ref": "http://example.com/elsewhere.json"}),
        ))
        .expect_err("offline");
        assert_eq!(e.kind, Refusal::Invalid, "{e:?}");
    }

    #[test]
    fn strict_uuid_form() {
        assert!(is_uuid("f47ac10b-58cc-4372-a567-0e02b2c3d479"));
        assert!(!is_uuid("f47ac10b58cc4372a5670e02b2c3d479"));
        assert!(!is_uuid("{f47ac10b-58cc-4372-a567-0e02b2c3d479}"));
        assert!(!is_uuid("g47ac10b-58cc-4372-a567-0e02b2c3d479"));
    }
}
