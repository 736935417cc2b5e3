//! The budget a card's schemas compile within, checked by one walk before `jsonschema` compiles
//! anything: what a small card could otherwise make the gateway allocate or compute.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::protocol::Violation;

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
