//! The one way the gateway reads a JSON body it judges: a client's create request, an agent's
//! push notification, an admin call, an agent's card and an agent's answers.
//!
//! # One document
//!
//! The gateway validates a document and then forwards the client's bytes as they came, so the
//! agent's view is byte-identical to the client's: signatures over the body still hold, and
//! number formatting, key order and whitespace are the client's. That only works if every
//! reader of those bytes sees the same document. An object that names a key twice does not
//! have one reading: RFC 8259 §4 says names SHOULD be unique and that with duplicates "the
//! behavior of software that receives such an object is unpredictable". serde_json keeps the
//! last value, other parsers keep the first or fail, so `{"topic":"!!!","topic":"aaa"}` could
//! pass the gateway's schema on `"aaa"` and reach an agent that acts on `"!!!"`.
//!
//! The gateway could instead forward the parsed document re-serialized. It does not: that would
//! silently change what the client sent (a signed body would no longer verify, `1.0` could become
//! `1`, keys would be reordered) for every request, to paper over a document that has no agreed
//! meaning. So [`parse`] refuses a duplicate key, naming it and where it is, and the HTTP edge
//! answers 400 `INVALID_JSON` (an agent's answer with one is a protocol violation).
//!
//! # How
//!
//! [`parse`] drives `serde_json::Deserializer::from_slice` with a `DeserializeSeed` that builds a
//! [`Value`] the way serde_json's own does, so serde_json's syntax rules, its recursion limit
//! (128 levels) and its refusal of trailing data all still apply. Each member goes in through
//! `Map::entry`, the lookup the insert needs anyway: a duplicate costs nothing until it is found.
//! The path to the object is only assembled when there is an error, as it unwinds.
//!
//! [`read_in_place`] drives the same seed to build a [`Node`] instead (the seed is generic over
//! what it builds, `Build`): its members are checked for a duplicate by a scan of the keys up to
//! 16 members and by a hash set of them past that, so a large object still reads in linear time.
//!
//! # Numbers
//!
//! Numbers are read as serde_json reads them: integers within 64 bits exactly, every other number
//! as an f64. A number beyond f64 (`1e400`) is valid JSON, but the gateway cannot judge it: it
//! would have to compare it with a schema's `maximum` or `multipleOf` as infinity. It is refused
//! as [`JsonError::NumberOutOfRange`] (400 `INVALID_JSON`, "number out of range") rather than
//! judged wrongly. Taking such numbers needs serde_json's `arbitrary_precision` together with
//! jsonschema's `arbitrary-precision` (with only the first, jsonschema compares big numbers
//! wrongly); jsonschema 0.61's feature could not be resolved here (see docs/api.md).
//!
//! Should `arbitrary_precision` be enabled, a number that is not a 64-bit integer reaches a
//! visitor as a one-member map under serde_json's private key `$serde_json::private::Number`.
//! [`parse`] already turns that back into a number, and only when the key did not come from the
//! input: an object in the body that uses that key itself stays an object (serde_json's own
//! `Value` would turn it into a number, which the agent would not see).

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Range;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Number, Value};

use super::node::{Members, Node};

/// The map key serde_json (with `arbitrary_precision`) uses to hand a number to a visitor.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// Why a body is not one JSON document.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    /// Not JSON: a syntax error, trailing data after the value, nesting deeper than serde_json's
    /// limit (128), or invalid UTF-8. serde_json's message says what and where.
    #[error("{0}")]
    Syntax(serde_json::Error),
    /// A number beyond f64 (about ±1.8e308), which the gateway cannot compare with a schema.
    #[error("number out of range at line {line} column {column}: the gateway takes numbers within f64 (about ±1.8e308)")]
    NumberOutOfRange {
        /// Where the number ends: line, from 1.
        line: usize,
        /// Where the number ends: column, from 1.
        column: usize,
    },
    /// An object names the same key twice.
    #[error("duplicate key {key:?} in {} (line {line}, column {column})", object(.at))]
    DuplicateKey {
        /// The repeated key.
        key: String,
        /// The object that repeats it, as a JSON pointer (empty for the top level).
        at: String,
        /// Where the second occurrence was read: line, from 1.
        line: usize,
        /// Where the second occurrence was read: column, from 1.
        column: usize,
    },
}

impl JsonError {
    /// The JSON pointer of the offending member for a duplicate key (`/input/topic`); empty
    /// otherwise.
    pub fn pointer(&self) -> String {
        match self {
            JsonError::Syntax(_) | JsonError::NumberOutOfRange { .. } => String::new(),
            JsonError::DuplicateKey { key, at, .. } => format!("{at}/{}", escape(key)),
        }
    }
}

fn object(at: &str) -> String {
    if at.is_empty() {
        "the top-level object".to_owned()
    } else {
        format!("the object at {at}")
    }
}

/// `key` as one JSON pointer segment (RFC 6901: `~` is `~0`, `/` is `~1`).
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Parse `bytes` as exactly one JSON document: serde_json's grammar and limits, with no trailing
/// data and no object naming a key twice (see the module docs).
pub fn parse(bytes: &[u8]) -> Result<Value, JsonError> {
    read::<Value>(bytes)
}

/// [`parse`], into a [`Node`] that borrows the strings it can from `bytes`: the same documents
/// read, the same errors, fewer allocations (see [`crate::protocol::node`]).
pub fn read_in_place(bytes: &[u8]) -> Result<Node<'_>, JsonError> {
    read::<Node<'_>>(bytes)
}

fn read<'de, B: Build<'de>>(bytes: &'de [u8]) -> Result<B, JsonError> {
    let cx = Cx {
        input: bytes.as_ptr_range(),
        dup: RefCell::new(None),
    };
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let out = Seed::<B> {
        cx: &cx,
        build: PhantomData,
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v));
    out.map_err(|e| match cx.dup.into_inner() {
        Some(Dup { key, mut path }) => {
            path.reverse();
            JsonError::DuplicateKey {
                key,
                at: path.concat(),
                line: e.line(),
                column: e.column(),
            }
        }
        // serde_json has no public error kind for it; its message is stable (and tested below).
        None if e.to_string().starts_with("number out of range") => JsonError::NumberOutOfRange {
            line: e.line(),
            column: e.column(),
        },
        None => JsonError::Syntax(e),
    })
}

/// What a parse builds: serde_json's [`Value`], or a [`Node`]. One seed reads both, so both
/// take exactly the same documents.
trait Build<'de>: Sized {
    /// An object being read.
    type Members: Default;
    fn null() -> Self;
    fn bool(v: bool) -> Self;
    fn number(n: Number) -> Self;
    fn string(s: Cow<'de, str>) -> Self;
    fn array(items: Vec<Self>) -> Self;
    fn object(m: Self::Members) -> Self;
    /// Puts member `key` in `m`, its value read by `value` (given the key, for an error's
    /// pointer); `Ok(Some(key))`, nothing read, when `m` holds `key` already.
    fn member<E>(
        m: &mut Self::Members,
        key: Cow<'de, str>,
        value: impl FnOnce(&str) -> Result<Self, E>,
    ) -> Result<Option<String>, E>;
}

impl<'de> Build<'de> for Value {
    type Members = Map<String, Value>;
    fn null() -> Self {
        Value::Null
    }
    fn bool(v: bool) -> Self {
        Value::Bool(v)
    }
    fn number(n: Number) -> Self {
        Value::Number(n)
    }
    fn string(s: Cow<'de, str>) -> Self {
        Value::String(s.into_owned())
    }
    fn array(items: Vec<Self>) -> Self {
        Value::Array(items)
    }
    fn object(m: Self::Members) -> Self {
        Value::Object(m)
    }
    #[inline]
    fn member<E>(
        m: &mut Self::Members,
        key: Cow<'de, str>,
        value: impl FnOnce(&str) -> Result<Self, E>,
    ) -> Result<Option<String>, E> {
        // The lookup the insert needs anyway: a duplicate costs nothing until it is found.
        match m.entry(key.into_owned()) {
            Entry::Vacant(slot) => {
                let v = value(slot.key())?;
                slot.insert(v);
                Ok(None)
            }
            Entry::Occupied(taken) => Ok(Some(taken.key().clone())),
        }
    }
}

impl<'de> Build<'de> for Node<'de> {
    type Members = Members<'de>;
    fn null() -> Self {
        Node::Null
    }
    fn bool(v: bool) -> Self {
        Node::Bool(v)
    }
    fn number(n: Number) -> Self {
        Node::Number(n)
    }
    fn string(s: Cow<'de, str>) -> Self {
        Node::Str(s)
    }
    fn array(items: Vec<Self>) -> Self {
        Node::Array(items)
    }
    fn object(m: Self::Members) -> Self {
        Node::Object(m)
    }
    #[inline]
    fn member<E>(
        m: &mut Self::Members,
        key: Cow<'de, str>,
        value: impl FnOnce(&str) -> Result<Self, E>,
    ) -> Result<Option<String>, E> {
        if m.holds(&key) {
            return Ok(Some(key.into_owned()));
        }
        let v = value(&key)?;
        m.push(key, v);
        Ok(None)
    }
}

/// What every seed of one parse shares: where the input lies (to tell serde_json's number token
/// from a key of the input) and the duplicate found, if any.
struct Cx {
    input: Range<*const u8>,
    dup: RefCell<Option<Dup>>,
}

struct Dup {
    key: String,
    /// Pointer segments (`/name`, `/3`), innermost first: pushed while the error unwinds.
    path: Vec<String>,
}

impl Cx {
    /// A child of the value at `segment` failed: if it failed on a duplicate, note the segment.
    fn unwind(&self, segment: impl FnOnce() -> String) {
        if let Some(d) = self.dup.borrow_mut().as_mut() {
            d.path.push(format!("/{}", segment()));
        }
    }
}

struct Seed<'c, B> {
    cx: &'c Cx,
    build: PhantomData<fn() -> B>,
}

impl<B> Clone for Seed<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<B> Copy for Seed<'_, B> {}

impl<'de, B: Build<'de>> DeserializeSeed<'de> for Seed<'_, B> {
    type Value = B;

    #[inline]
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<B, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, B: Build<'de>> Visitor<'de> for Seed<'_, B> {
    type Value = B;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    #[inline]
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<B, E> {
        Ok(B::bool(v))
    }

    #[inline]
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<B, E> {
        Ok(B::number(v.into()))
    }

    #[inline]
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<B, E> {
        Ok(B::number(v.into()))
    }

    #[inline]
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<B, E> {
        // serde_json's parser never yields a non-finite f64; its own Value maps one to null.
        Ok(Number::from_f64(v).map_or_else(B::null, B::number))
    }

    #[inline]
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<B, E> {
        Ok(B::string(Cow::Borrowed(v)))
    }

    #[inline]
    fn visit_str<E: de::Error>(self, v: &str) -> Result<B, E> {
        Ok(B::string(Cow::Owned(v.to_owned())))
    }

    #[inline]
    fn visit_string<E: de::Error>(self, v: String) -> Result<B, E> {
        Ok(B::string(Cow::Owned(v)))
    }

    #[inline]
    fn visit_unit<E: de::Error>(self) -> Result<B, E> {
        Ok(B::null())
    }

    #[inline]
    fn visit_none<E: de::Error>(self) -> Result<B, E> {
        Ok(B::null())
    }

    #[inline]
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<B, D::Error> {
        self.deserialize(d)
    }

    #[inline]
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<B, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        loop {
            match seq.next_element_seed(self) {
                Ok(Some(v)) => out.push(v),
                Ok(None) => return Ok(B::array(out)),
                Err(e) => {
                    let i = out.len();
                    self.cx.unwind(|| i.to_string());
                    return Err(e);
                }
            }
        }
    }

    #[inline]
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<B, A::Error> {
        let mut key = match map.next_key_seed(FirstKey { cx: self.cx })? {
            None => return Ok(B::object(B::Members::default())),
            Some(First::Number) => {
                let n: String = map.next_value()?;
                return n
                    .parse::<Number>()
                    .map(B::number)
                    .map_err(de::Error::custom);
            }
            Some(First::Key(k)) => k,
        };
        let mut obj = B::Members::default();
        loop {
            let member = B::member(&mut obj, key, |k| {
                map.next_value_seed(self).inspect_err(|_| {
                    self.cx.unwind(|| escape(k));
                })
            })?;
            if let Some(key) = member {
                let message = format!("duplicate key {key:?}");
                *self.cx.dup.borrow_mut() = Some(Dup {
                    key,
                    path: Vec::new(),
                });
                return Err(de::Error::custom(message));
            }
            key = match map.next_key_seed(Key)? {
                Some(k) => k,
                None => return Ok(B::object(obj)),
            };
        }
    }
}

/// The first key of a map: serde_json's number token (only when it does not come from the
/// input), or a key.
enum First<'de> {
    Number,
    Key(Cow<'de, str>),
}

struct FirstKey<'c> {
    cx: &'c Cx,
}

impl<'de> DeserializeSeed<'de> for FirstKey<'_> {
    type Value = First<'de>;

    #[inline]
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<First<'de>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for FirstKey<'_> {
    type Value = First<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object key")
    }

    #[inline]
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<First<'de>, E> {
        // serde_json hands its token over as a `&'static str`; a key of the input is borrowed
        // from the input (an escaped one arrives through `visit_str`).
        if v == NUMBER_TOKEN && !self.cx.input.contains(&v.as_ptr()) {
            Ok(First::Number)
        } else {
            Ok(First::Key(Cow::Borrowed(v)))
        }
    }

    #[inline]
    fn visit_str<E: de::Error>(self, v: &str) -> Result<First<'de>, E> {
        Ok(First::Key(Cow::Owned(v.to_owned())))
    }

    #[inline]
    fn visit_string<E: de::Error>(self, v: String) -> Result<First<'de>, E> {
        Ok(First::Key(Cow::Owned(v)))
    }
}

/// Every key after the first: borrowed from the input when it has no escape.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;

    #[inline]
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Cow<'de, str>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object key")
    }

    #[inline]
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(v))
    }

    #[inline]
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v.to_owned()))
    }

    #[inline]
    fn visit_string<E: de::Error>(self, v: String) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dup(body: &str) -> (String, String, usize, usize) {
        match parse(body.as_bytes()) {
            Err(JsonError::DuplicateKey {
                key,
                at,
                line,
                column,
            }) => (key, at, line, column),
            other => panic!("expected a duplicate key in {body}, got {other:?}"),
        }
    }

    #[test]
    fn a_document_reads_as_serde_json_reads_it() {
        for body in [
            r#"{"input":{"topic":"t","filename":"f.py","n":[1,-2,3.5,1e3,true,null,{}]}}"#,
            r#"[]"#,
            r#" "s\u00e9\n" "#,
            r#"{"a":{"a":{"a":1}},"b":[{"a":1},{"a":2}]}"#,
            r#"-0"#,
            r#"18446744073709551615"#,
            r#"-9223372036854775808"#,
            r#"{"\u0061":1,"b":2}"#,
        ] {
            let want: Value = serde_json::from_str(body).expect("serde_json reads it");
            assert_eq!(
                parse(body.as_bytes()).expect("parse reads it"),
                want,
                "{body}"
            );
        }
    }

    #[test]
    fn a_duplicate_key_is_named_with_its_object() {
        let (key, at, line, column) =
            dup(r#"{"input":{"topic":"!!! not matching","topic":"aaa"}}"#);
        assert_eq!((key.as_str(), at.as_str(), line), ("topic", "/input", 1));
        // Read just after the second "topic" (column 43), before its value.
        assert!((43..=45).contains(&column), "column {column}");
        assert_eq!(dup(r#"{"a":1,"a":1}"#).1, "", "the top level");
        let (key, at, ..) = dup(r#"{"input":{"deep":[0,{"x":{"k~/":1,"k~/":2}}]}}"#);
        assert_eq!((key.as_str(), at.as_str()), ("k~/", "/input/deep/1/x"));
        let e = parse(br#"{"a/b":{"x~":{"k":1,"k":2}}}"#).expect_err("duplicate");
        assert_eq!(e.pointer(), "/a~1b/x~0/k");
        assert_eq!(
            e.to_string(),
            r#"duplicate key "k" in the object at /a~1b/x~0 (line 1, column 23)"#
        );
        // Escapes do not hide a duplicate: the keys are compared as decoded.
        assert_eq!(dup(r#"{"topic":1,"t\u006fpic":2}"#).0, "topic");
    }

    #[test]
    fn the_same_key_at_different_depths_is_no_duplicate() {
        let v = parse(br#"{"topic":"a","input":{"topic":"b","deep":{"topic":"c"}},"list":[{"topic":1},{"topic":2}]}"#)
            .expect("no duplicate");
        assert_eq!(v["input"]["deep"]["topic"], "c");
    }

    #[test]
    fn what_serde_json_refuses_stays_refused() {
        for body in [
            "",
            "{",
            r#"{"a":1} x"#,
            r#"{"a":1}{}"#,
            "[1,]",
            "nul",
            "\"\u{7f}\\x\"",
        ] {
            assert!(
                matches!(parse(body.as_bytes()), Err(JsonError::Syntax(_))),
                "{body:?}"
            );
        }
        assert!(matches!(parse(b"\"\xff\""), Err(JsonError::Syntax(_))));
        // The recursion limit is serde_json's: 128 levels.
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let e = parse(deep.as_bytes()).expect_err("too deep");
        assert!(e.to_string().contains("recursion limit"), "{e}");
        let ok = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(parse(ok.as_bytes()).is_ok());
    }

    #[test]
    fn numbers_beyond_f64_are_refused_as_out_of_range() {
        for body in [
            "1e400",
            r#"{"input":{"n":-1e400}}"#,
            "[1, 2e308]",
            "1.8e308",
        ] {
            match parse(body.as_bytes()) {
                Err(e @ JsonError::NumberOutOfRange { .. }) => {
                    assert!(
                        e.to_string().starts_with("number out of range at line 1"),
                        "{e}"
                    )
                }
                other => panic!("{body}: {other:?}"),
            }
        }
        let e = parse(br#"{"n":1e400}"#).expect_err("out of range");
        assert!(
            matches!(
                e,
                JsonError::NumberOutOfRange {
                    line: 1,
                    column: 10
                }
            ),
            "{e:?}"
        );
        // The largest finite f64, and an integer past 64 bits (read as an f64, like serde_json).
        assert!(parse(b"1.7976931348623157e308").is_ok());
        assert!(parse(b"-1e308").is_ok());
        assert!(parse(format!("1{}", "0".repeat(300)).as_bytes()).is_ok());
    }

    #[test]
    fn trailing_whitespace_is_fine() {
        assert_eq!(parse(b" {\"a\":1} \r\n\t").expect("json"), json!({"a": 1}));
    }

    #[test]
    fn an_input_key_that_spells_the_number_token_stays_an_object() {
        // serde_json's own Value would read this as the number 5 (with arbitrary_precision);
        // the agent reads an object, so the gateway must too.
        let body = br#"{"n":{"$serde_json::private::Number":"5"}}"#;
        let v = parse(body).expect("json");
        assert!(v["n"].is_object(), "{v}");
        assert_eq!(v["n"]["$serde_json::private::Number"], "5");
        let escaped = br#"{"n":{"\u0024serde_json::private::Number":"5"}}"#;
        assert!(parse(escaped).expect("json")["n"].is_object());
    }

    #[test]
    fn numbers_keep_their_value() {
        let v = parse(br#"[0, -1, 1.5, 2.5e-3, 12345678901234567890, -0.0]"#).expect("json");
        let want: Value =
            serde_json::from_str("[0, -1, 1.5, 2.5e-3, 12345678901234567890, -0.0]").expect("json");
        assert_eq!(v, want);
        assert_eq!(v[2].as_f64(), Some(1.5));
        assert_eq!(v[4].as_u64(), Some(12_345_678_901_234_567_890));
    }
}
