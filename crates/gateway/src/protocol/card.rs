//! AgentCard: the spec's schema, checking a fetched card, and compiling the card's own
//! `input_schema` / `output_schema` once so every task is validated without recompiling.
//!
//! Every schema is compiled as draft-07 with `$ref` resolution offline (a card must not be able
//! to make the gateway fetch a URL or read a file), the linear-time `regex` engine for `pattern`
//! (a card must not be able to stall a core with a backtracking pattern), and `format: uuid`
//! registered, because draft-07 does not know it and would otherwise ignore it silently.

use std::sync::OnceLock;

use bytes::Bytes;
use jsonschema::{Draft, PatternOptions, Validator};
use serde_json::Value;

use super::{Violation, MAX_VIOLATIONS};

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

/// Compile a schema the way the gateway compiles every schema (see the module docs).
pub fn compile_schema(schema: &Value) -> Result<Validator, String> {
    jsonschema::options()
        .with_draft(Draft::Draft7)
        .offline()
        .should_validate_formats(true)
        .with_format("uuid", is_uuid)
        .with_pattern_options(PatternOptions::regex())
        .build(schema)
        .map_err(|e| e.to_string())
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

/// Why a fetched card was refused.
#[derive(Debug, Clone)]
pub struct InvalidCard {
    /// Why, for a person.
    pub message: String,
    /// Each problem found in the card.
    pub details: Vec<Violation>,
}

impl Card {
    /// Validate a fetched card and compile its schemas. The auth header is dropped here, so no
    /// later code path can serve or log it by mistake.
    pub fn compile(mut doc: Value) -> Result<Card, InvalidCard> {
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
                message: "agent card does not match the A2A 1.0 AgentCard schema".into(),
                details,
            });
        }
        let schema_error = |which: &str, e: String| InvalidCard {
            message: format!("agent card {which} does not compile as a draft-07 schema: {e}"),
            details: vec![Violation::new(format!("/{which}"), "", e)],
        };
        let input =
            compile_schema(&doc["input_schema"]).map_err(|e| schema_error("input_schema", e))?;
        let output = match doc.get("output_schema") {
            Some(s) => Some(compile_schema(s).map_err(|e| schema_error("output_schema", e))?),
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

    #[test]
    fn strict_uuid_form() {
        assert!(is_uuid("f47ac10b-58cc-4372-a567-0e02b2c3d479"));
        assert!(!is_uuid("f47ac10b58cc4372a5670e02b2c3d479"));
        assert!(!is_uuid("{f47ac10b-58cc-4372-a567-0e02b2c3d479}"));
        assert!(!is_uuid("g47ac10b-58cc-4372-a567-0e02b2c3d479"));
    }
}
