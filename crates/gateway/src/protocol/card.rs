//! AgentCard: the spec's schema, checking a fetched card, and compiling the card's own
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

use std::collections::{HashMap, HashSet};
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

/// What compiling one card's `input_schema` and `output_schema` together may cost.
///
/// Every limit is about the *compiled* size or the work per validated value, not the card's
/// bytes (already at most 1 MiB): what amplifies in `jsonschema` 0.61 is
///
/// - `pattern` (and `patternProperties` keys): the `regex` crate compiles `\w{20000}` into a
///   program of over 1 MiB, and 1,000 of them fit in 12 KB. Bounded by `regex_size_limit` per
///   pattern (the engine stops compiling past it, so a refusal costs at most that much),
///   `max_patterns` and `max_pattern_bytes`. Worst case for an accepted card: `max_patterns ×
///   regex_size_limit` of compiled programs (16 MiB with the defaults; the engine keeps a forward
///   and a reverse program, so about twice that), plus lazy-DFA caches of at most
///   `regex_dfa_size_limit` per pattern per thread that matches it. Patterns of the form
///   `^X{m,n}$` over one class are counted by `jsonschema` without the engine and cost nothing.
/// - `$ref`: a target is compiled once, but validation walks it once per reference, so a chain
///   of definitions each referring twice to the previous one doubles the work per level
///   (measured: 18 levels compile in 1 ms and take 30 ms to validate one string; 30 levels
///   would take minutes). Bounded by `max_expanded`: the number of subschemas with every `$ref`
///   counted as the subschema it names (a reference cycle is counted once; it can only recurse
///   as deep as the instance).
/// - deep `allOf`/`anyOf`/`oneOf`/`not` nesting: compiled and validated recursively. Bounded by
///   `max_depth` (serde_json already refuses JSON nested more than 128 deep).
/// - `enum`: each value is compared with every member. Bounded by `max_enum`, and with every
///   other value by `max_nodes` (every JSON value of the schemas counts).
/// - `uniqueItems`: `jsonschema` hashes the items (pairwise only below a small threshold), so its
///   cost is linear in the instance, which `max_body_bytes` bounds (100,000 objects: 0.1 s in a
///   debug build). Nothing to bound here.
/// - `multipleOf`: exact in `i128` when both numbers fit, otherwise one big-rational division
///   per number. A tiny divisor (`1e-300`) takes that path for every number (10 times slower
///   than `0.01`), but so does an ordinary divisor against a huge instance number (`1e300`
///   against `0.01`: 30 times slower), which the card does not control. No loop depends on the
///   divisor, so refusing small divisors would not bound it: the bound is `max_body_bytes` on
///   the request. Nothing refused here.
/// - `format`: every format `jsonschema` checks is a linear scan (`regex` only parses its
///   instance, it does not compile it; unknown formats are ignored). Nothing to bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// The `regex` crate's `size_limit` for each pattern: the largest compiled program, in bytes.
    pub regex_size_limit: usize,
    /// The `regex` crate's `dfa_size_limit` for each pattern: the largest lazy-DFA cache.
    pub regex_dfa_size_limit: usize,
    /// Patterns (`pattern` values and `patternProperties` keys) in the whole card.
    pub max_patterns: usize,
    /// Bytes of pattern source in the whole card.
    pub max_pattern_bytes: usize,
    /// JSON values (every object, array, string, number, boolean and null) in the schemas.
    pub max_nodes: usize,
    /// Nesting of JSON values below a schema's root.
    pub max_depth: usize,
    /// Members of one `enum`.
    pub max_enum: usize,
    /// Subschemas walked with every `$ref` counted as the subschema it names.
    pub max_expanded: usize,
}

impl Budget {
    /// The budget every card is compiled within.
    ///
    /// - regex limits 256 KiB each: hand-written patterns compile small (measured: an e-mail
    ///   address, an IBAN 4 KiB or less, the official semver pattern, an ISO 8601 timestamp
    ///   4 KiB, a host name or a URL 16 KiB), and a refused pattern costs at most 256 KiB to find
    ///   out. Refused: long bounded repeats (`\w{2000}` fits, `\w{20000}` needs over 1 MiB) and
    ///   bounded repeats of Unicode classes inside a larger pattern (`^\p{L}[\p{L} '-]{0,99}$`
    ///   needs over 4 MiB; `^[\p{L} '-]{1,100}$` alone, or `*` with `maxLength`, costs nothing).
    /// - 64 patterns and 16 KiB of pattern source: a card describes one task's input and output;
    ///   cards in the wild carry a handful. With the size limit, at most 16 MiB of programs.
    /// - 10,000 JSON values: a large hand-written schema is a few hundred; compiled, each costs
    ///   well under a KiB.
    /// - depth 64: far past any hand-written schema, well inside the stack.
    /// - 1,000 `enum` members: a long list of codes, compared one by one per value.
    /// - 20,000 expanded subschemas: twice `max_nodes`, so shared definitions can be referred to
    ///   freely while the work per validated value stays of the order of the schema's size.
    pub const DEFAULT: Budget = Budget {
        regex_size_limit: 256 << 10,
        regex_dfa_size_limit: 256 << 10,
        max_patterns: 64,
        max_pattern_bytes: 16 << 10,
        max_nodes: 10_000,
        max_depth: 64,
        max_enum: 1_000,
        max_expanded: 20_000,
    };
}

impl Default for Budget {
    fn default() -> Budget {
        Budget::DEFAULT
    }
}

/// Check `schemas` (each a card key such as `input_schema`, and its value) against `budget`
/// before anything is compiled: one walk over every JSON value, then one over the subschemas
/// with `$ref`s followed (and abandoned as soon as the expanded count is over). The limits are
/// for all the schemas together. The refusal names the JSON pointer in the card and the limit.
pub fn check_budget(schemas: &[(&str, &Value)], budget: &Budget) -> Result<(), Violation> {
    let mut walk = Walk {
        budget,
        nodes: 0,
        patterns: 0,
        pattern_bytes: 0,
        expanded: 0,
    };
    for &(key, schema) in schemas {
        let mut at = format!("/{key}");
        let mut ids = HashMap::new();
        walk.structure(schema, &mut at, 0, &mut ids)?;
        let doc = Doc {
            root: schema,
            key,
            ids,
        };
        let mut seen = HashSet::new();
        // A `$ref` back to the root is a cycle like any other.
        let mut refs = vec![schema as *const Value];
        walk.schema(&doc, schema, &mut at, &mut seen, &mut refs)?;
    }
    Ok(())
}

/// Where the refusal points and which limit (as the `schema_path` of the violation).
fn over(at: &str, limit: &str, message: String) -> Violation {
    Violation::new(at, format!("budget/{limit}"), message)
}

/// One schema document: its root, the card key it is under, and its plain-name `$id`s
/// (`"#name"` → pointer in the card, subschema).
struct Doc<'a> {
    root: &'a Value,
    key: &'a str,
    ids: HashMap<&'a str, (String, &'a Value)>,
}

struct Walk<'b> {
    budget: &'b Budget,
    nodes: usize,
    patterns: usize,
    pattern_bytes: usize,
    expanded: usize,
}

/// `~` and `/` escaped for a JSON pointer segment.
fn push_segment(at: &mut String, key: &str) {
    at.push('/');
    for c in key.chars() {
        match c {
            '~' => at.push_str("~0"),
            '/' => at.push_str("~1"),
            c => at.push(c),
        }
    }
}

/// Subschema keywords of draft-07 holding one schema, an array of schemas, or a map of them.
const ONE: &[&str] = &[
    "additionalItems",
    "additionalProperties",
    "contains",
    "propertyNames",
    "if",
    "then",
    "else",
    "not",
    "items",
];
const MANY: &[&str] = &["allOf", "anyOf", "oneOf", "items"];
const MAP: &[&str] = &[
    "properties",
    "patternProperties",
    "definitions",
    "dependencies",
];

impl<'b> Walk<'b> {
    /// Every JSON value: the node count, the depth, and the `$id`s for resolving `$ref`s.
    fn structure<'a>(
        &mut self,
        v: &'a Value,
        at: &mut String,
        depth: usize,
        ids: &mut HashMap<&'a str, (String, &'a Value)>,
    ) -> Result<(), Violation> {
        let b = self.budget;
        self.nodes += 1;
        if self.nodes > b.max_nodes {
            return Err(over(
                at,
                "max_nodes",
                format!(
                    "the card's schemas have more than {} JSON values (the limit for the whole card)",
                    b.max_nodes
                ),
            ));
        }
        if depth > b.max_depth {
            return Err(over(
                at,
                "max_depth",
                format!(
                    "schema nested more than {} levels deep (the limit)",
                    b.max_depth
                ),
            ));
        }
        let len = at.len();
        match v {
            Value::Array(items) => {
                for (i, x) in items.iter().enumerate() {
                    at.push('/');
                    at.push_str(&i.to_string());
                    self.structure(x, at, depth + 1, ids)?;
                    at.truncate(len);
                }
            }
            Value::Object(map) => {
                if let Some(Value::String(id)) = map.get("$id") {
                    if id.starts_with('#') {
                        ids.entry(id.as_str()).or_insert_with(|| (at.clone(), v));
                    } else if depth > 0 {
                        // A resource embedded in the schema changes what `#/...` means below it;
                        // the expanded count would have to follow draft-07 URI resolution.
                        at.push_str("/$id");
                        return Err(over(
                            at,
                            "refs",
                            "a $id naming a resource below the schema's root is not accepted: the gateway bounds $ref expansion by following `#/...` pointers and `#name` ids".into(),
                        ));
                    }
                }
                for (k, x) in map {
                    push_segment(at, k);
                    self.structure(x, at, depth + 1, ids)?;
                    at.truncate(len);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// One subschema at `at`, then its subschemas and the targets of its `$ref`.
    /// `seen`: subschemas whose own keywords were checked; `refs`: `$ref` targets being expanded.
    fn schema<'a>(
        &mut self,
        doc: &Doc<'a>,
        v: &'a Value,
        at: &mut String,
        seen: &mut HashSet<*const Value>,
        refs: &mut Vec<*const Value>,
    ) -> Result<(), Violation> {
        let b = self.budget;
        self.expanded += 1;
        if self.expanded > b.max_expanded {
            return Err(over(
                at,
                "max_expanded",
                format!(
                    "the card's schemas, each $ref counted as the subschema it names, have more than {} subschemas (the limit)",
                    b.max_expanded
                ),
            ));
        }
        let Value::Object(map) = v else {
            return Ok(());
        };
        let len = at.len();
        if seen.insert(v as *const Value) {
            if let Some(Value::String(p)) = map.get("pattern") {
                at.push_str("/pattern");
                self.pattern(p, at)?;
                at.truncate(len);
            }
            if let Some(Value::Object(pp)) = map.get("patternProperties") {
                for p in pp.keys() {
                    at.push_str("/patternProperties");
                    push_segment(at, p);
                    self.pattern(p, at)?;
                    at.truncate(len);
                }
            }
            if let Some(Value::Array(members)) = map.get("enum") {
                if members.len() > b.max_enum {
                    at.push_str("/enum");
                    return Err(over(
                        at,
                        "max_enum",
                        format!(
                            "enum has {} members, more than {} (the limit)",
                            members.len(),
                            b.max_enum
                        ),
                    ));
                }
            }
        }
        for (k, x) in map {
            let k = k.as_str();
            let mut child = |walk: &mut Self, x: &'a Value, at: &mut String, seg: Option<&str>| {
                push_segment(at, k);
                if let Some(seg) = seg {
                    push_segment(at, seg);
                }
                let r = walk.schema(doc, x, at, seen, refs);
                at.truncate(len);
                r
            };
            match x {
                Value::Object(_) | Value::Bool(_) if ONE.contains(&k) => child(self, x, at, None)?,
                Value::Array(items) if MANY.contains(&k) => {
                    for (i, x) in items.iter().enumerate() {
                        child(self, x, at, Some(&i.to_string()))?;
                    }
                }
                Value::Object(m) if MAP.contains(&k) => {
                    for (name, x) in m {
                        if matches!(x, Value::Object(_) | Value::Bool(_)) {
                            child(self, x, at, Some(name))?;
                        }
                    }
                }
                _ => {}
            }
        }
        if let Some(Value::String(r)) = map.get("$ref") {
            at.push_str("/$ref");
            let Some((mut to, target)) = resolve(doc, r) else {
                // With a base URI of its own, a relative `$ref` may name the schema itself under
                // another spelling. Without one, `jsonschema` (offline) cannot resolve a `$ref`
                // this cannot either, and refuses it when it compiles (the bundled draft-07
                // meta-schema aside, whose cost is fixed).
                if r.split('#').next().is_some_and(|b| !b.is_empty()) && root_id(doc).is_some() {
                    return Err(over(
                        at,
                        "refs",
                        format!(
                            "$ref {r:?} is not followed within the card, so what it costs cannot be bounded: write it as `#/...` or the schema's own $id"
                        ),
                    ));
                }
                at.truncate(len);
                return Ok(());
            };
            at.truncate(len);
            let target_ptr = target as *const Value;
            // A cycle recurses only as deep as the instance; counted once.
            if !refs.contains(&target_ptr) {
                refs.push(target_ptr);
                self.schema(doc, target, &mut to, seen, refs)?;
                refs.pop();
            }
        }
        Ok(())
    }

    fn pattern(&mut self, p: &str, at: &str) -> Result<(), Violation> {
        let b = self.budget;
        self.patterns += 1;
        self.pattern_bytes += p.len();
        if self.patterns > b.max_patterns {
            return Err(over(
                at,
                "max_patterns",
                format!(
                    "the card's schemas have more than {} patterns (the limit for the whole card)",
                    b.max_patterns
                ),
            ));
        }
        if self.pattern_bytes > b.max_pattern_bytes {
            return Err(over(
                at,
                "max_pattern_bytes",
                format!(
                    "the card's patterns have more than {} bytes of source (the limit for the whole card)",
                    b.max_pattern_bytes
                ),
            ));
        }
        Ok(())
    }
}

/// The base URI the schema's root declares (`$id` without its fragment), if any.
fn root_id<'a>(doc: &Doc<'a>) -> Option<&'a str> {
    let id = doc.root.get("$id")?.as_str()?;
    id.split('#').next().filter(|b| !b.is_empty())
}

/// The target of `$ref` `r` within `doc`, with its pointer in the card: `#`, `#/json/pointer`,
/// `#name` (a `$id: "#name"`), each optionally after the root's own `$id`. Embedded resources
/// are refused by the structure walk, so the root is the only base a `#/...` can be relative to.
fn resolve<'a>(doc: &Doc<'a>, r: &str) -> Option<(String, &'a Value)> {
    let (base, fragment) = match r.split_once('#') {
        Some((b, f)) => (b, Some(f)),
        None => (r, None),
    };
    if !base.is_empty() && root_id(doc) != Some(base) {
        return None;
    }
    let (mut at, root) = (format!("/{}", doc.key), doc.root);
    match fragment {
        None | Some("") => Some((at, root)),
        Some(f) if f.starts_with('/') => {
            let f = percent_decode(f)?;
            let target = root.pointer(&f)?;
            at.push_str(&f);
            Some((at, target))
        }
        // A plain-name fragment: `$id: "#name"`.
        Some(f) => {
            let (at, v) = doc.ids.get(format!("#{f}").as_str())?;
            Some((at.clone(), *v))
        }
    }
}

/// `%XX` escapes of a URI fragment decoded; `None` if they are not valid UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (b[i], b.get(i + 1).copied(), b.get(i + 2).copied()) {
            (b'%', Some(h), Some(l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h)? * 16 + hex(l)?) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
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

/// Why a fetched card was refused, in the words of `a2a_gateway_card_refusals_total{reason}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The card is not a valid A2A 1.0 card, or its schemas do not compile.
    Invalid,
    /// The card is over a limit of the gateway's (its size, or the schema [`Budget`]).
    Budget,
}

impl Refusal {
    /// The metric label: `invalid` or `budget`.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Invalid => "invalid",
            Refusal::Budget => "budget",
        }
    }
}

/// Why a fetched card was refused.
#[derive(Debug, Clone)]
pub struct InvalidCard {
    /// Which kind of refusal.
    pub kind: Refusal,
    /// Why, for a person.
    pub message: String,
    /// Each problem found in the card.
    pub details: Vec<Violation>,
}

impl Card {
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
