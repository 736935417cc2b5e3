//! A JSON document read in place, and the read-only view of a JSON value the protocol checks
//! take, whichever way the document was read.
//!
//! # Why a second tree
//!
//! [`serde_json::Value`] owns every string and keeps every object in a `BTreeMap`: reading an
//! A2A Task of half a kilobyte into it costs about fifty allocations (a key, a value, a node per
//! object), and dropping it as many frees. Most of what the gateway reads of an agent's
//! SendMessage answer it only checks and writes out again. A [`Node`] borrows every string that
//! has no escape from the body it was read from, and keeps an object's members in one `Vec`, in
//! document order: a Task reads with one allocation per object and list.
//!
//! Both trees are read by [`crate::protocol::json`]'s one seed, so they take exactly the same
//! documents (serde_json's grammar and limits, no duplicate key, numbers within f64), and a
//! [`Node`] writes ([`Json::write_json`]) the bytes serde_json writes for the same document:
//! its members in key order, as a `BTreeMap` keeps them.
//!
//! # The view
//!
//! The checks of [`crate::protocol::a2a::check`] and [`crate::protocol::a2a::answer`] read a
//! [`Json`] (a value) and an [`Object`] (an object's members), implemented for both trees, so a
//! document is checked by the same tables however it was read.

use std::borrow::Cow;
use std::collections::HashSet;

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::{Map, Number, Value};

/// A JSON value, read in place: its strings borrowed from the input where they have no escape.
#[derive(Debug, Clone, PartialEq)]
pub enum Node<'a> {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, as serde_json reads it.
    Number(Number),
    /// A string.
    Str(Cow<'a, str>),
    /// A list.
    Array(Vec<Node<'a>>),
    /// An object.
    Object(Members<'a>),
}

/// An object's members in document order, no key twice.
#[derive(Debug, Clone, Default)]
pub struct Members<'a> {
    items: Vec<(Cow<'a, str>, Node<'a>)>,
    /// The keys, once the object is large enough that a scan per new member would make reading
    /// it quadratic (a hostile agent's object of a million keys). Boxed: a set and its hasher
    /// inline would more than double every node's size, for the rare large object.
    #[allow(clippy::box_collection)]
    index: Option<Box<HashSet<Cow<'a, str>, ahash::RandomState>>>,
}

/// Members up to which a duplicate is found by scanning the keys.
const SCAN: usize = 16;

impl PartialEq for Members<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.items.len() == other.items.len()
            && self
                .items
                .iter()
                .all(|(k, v)| other.get_node(k).is_some_and(|o| o == v))
    }
}

impl<'a> Members<'a> {
    /// Whether `key` is a member.
    pub fn holds(&self, key: &str) -> bool {
        match &self.index {
            Some(index) => index.contains(key),
            None => self.items.iter().any(|(k, _)| k == key),
        }
    }

    /// Adds a member whose key is not one yet (the caller asked [`Members::holds`]).
    pub(crate) fn push(&mut self, key: Cow<'a, str>, value: Node<'a>) {
        debug_assert!(!self.holds(&key), "a member added twice");
        if let Some(index) = &mut self.index {
            index.insert(key.clone());
        } else if self.items.len() == SCAN {
            let mut index: HashSet<Cow<'a, str>, ahash::RandomState> =
                HashSet::with_capacity_and_hasher(SCAN * 4, ahash::RandomState::new());
            index.extend(self.items.iter().map(|(k, _)| k.clone()));
            index.insert(key.clone());
            self.index = Some(Box::new(index));
        }
        self.items.push((key, value));
    }

    /// Takes member `key` out.
    pub fn take(&mut self, key: &str) -> Option<Node<'a>> {
        let i = self.items.iter().position(|(k, _)| k == key)?;
        if let Some(index) = &mut self.index {
            index.remove(key);
        }
        Some(self.items.remove(i).1)
    }

    /// The value of `key`.
    pub fn get_node(&self, key: &str) -> Option<&Node<'a>> {
        self.items.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The value of `key`, to change (its key stays).
    pub fn get_node_mut(&mut self, key: &str) -> Option<&mut Node<'a>> {
        self.items
            .iter_mut()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// How many members.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The members in the order serde_json's `Map` writes them (by key): as they are when the
    /// document had them in that order (serde_json's writers do), else references to them
    /// sorted (never a copy of what they hold: an agent's answer nests up to 128 levels).
    fn sorted(&self) -> Sorted<'_, 'a> {
        if self.items.is_sorted_by(|a, b| a.0 <= b.0) {
            return Sorted::InOrder(&self.items);
        }
        let mut v: Vec<&(Cow<'a, str>, Node<'a>)> = self.items.iter().collect();
        v.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Sorted::Refs(v)
    }
}

/// An object's members by key (see [`Members::sorted`]).
enum Sorted<'m, 'a> {
    InOrder(&'m [(Cow<'a, str>, Node<'a>)]),
    Refs(Vec<&'m (Cow<'a, str>, Node<'a>)>),
}

impl Node<'_> {
    /// The same document as serde_json's own tree (its strings are copied either way: most
    /// are borrowed).
    pub fn into_value(self) -> Value {
        Json::to_value(&self)
    }
}

impl Serialize for Node<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Node::Null => s.serialize_unit(),
            Node::Bool(b) => s.serialize_bool(*b),
            Node::Number(n) => n.serialize(s),
            Node::Str(v) => s.serialize_str(v),
            Node::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Node::Object(m) => {
                let mut map = s.serialize_map(Some(m.len()))?;
                match m.sorted() {
                    Sorted::InOrder(items) => {
                        for (k, v) in items {
                            map.serialize_entry(&**k, v)?;
                        }
                    }
                    Sorted::Refs(items) => {
                        for (k, v) in items {
                            map.serialize_entry(&**k, v)?;
                        }
                    }
                }
                map.end()
            }
        }
    }
}

/// A JSON value, read: what the protocol checks ask of one, whichever tree holds it.
pub trait Json: Sync {
    /// The string, if it is one.
    fn as_str(&self) -> Option<&str>;
    /// The number as an i64, if it is an integer within one.
    fn as_i64(&self) -> Option<i64>;
    /// The number, if it is one.
    fn as_number(&self) -> Option<&Number>;
    /// Whether it is `true` or `false`.
    fn is_boolean(&self) -> bool;
    /// Whether it is `null`.
    fn is_null(&self) -> bool;
    /// Its members, if it is an object.
    fn as_object(&self) -> Option<&dyn Object>;
    /// Its length, if it is a list.
    fn array_len(&self) -> Option<usize>;
    /// Element `i`, if it is a list that long.
    fn at(&self, i: usize) -> Option<&dyn Json>;
    /// serde_json's own tree of it.
    fn to_value(&self) -> Value;
    /// Writes it as serde_json writes the same document.
    fn write_json(&self, w: &mut Vec<u8>);
    /// How many bytes [`Json::write_json`] writes, counted without writing them (what the
    /// ledger's bounds measure of a large document's members).
    fn json_len(&self) -> usize;

    /// Member `key`, if it is an object that has one.
    fn get(&self, key: &str) -> Option<&dyn Json> {
        self.as_object()?.get(key)
    }
    /// Whether it is an object.
    fn is_object(&self) -> bool {
        self.as_object().is_some()
    }
}

/// An object's members, read.
pub trait Object: Sync {
    /// The value of `key`.
    fn get(&self, key: &str) -> Option<&dyn Json>;
    /// Whether some key passes `f`.
    fn any_key(&self, f: &dyn Fn(&str) -> bool) -> bool;
    /// Each member, in the object's order: by key for serde_json's `Map`, as the document
    /// wrote them for a [`Node`]'s members (so a check that reports per member, `T::MapOf`,
    /// reports in that order).
    fn for_each(&self, f: &mut dyn FnMut(&str, &dyn Json));

    /// Whether `key` is a member.
    fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
}

impl Json for Value {
    fn as_str(&self) -> Option<&str> {
        Value::as_str(self)
    }
    fn as_i64(&self) -> Option<i64> {
        Value::as_i64(self)
    }
    fn as_number(&self) -> Option<&Number> {
        match self {
            Value::Number(n) => Some(n),
            _ => None,
        }
    }
    fn is_boolean(&self) -> bool {
        Value::is_boolean(self)
    }
    fn is_null(&self) -> bool {
        Value::is_null(self)
    }
    fn as_object(&self) -> Option<&dyn Object> {
        Value::as_object(self).map(|m| m as &dyn Object)
    }
    fn array_len(&self) -> Option<usize> {
        self.as_array().map(Vec::len)
    }
    fn at(&self, i: usize) -> Option<&dyn Json> {
        self.as_array()?.get(i).map(|v| v as &dyn Json)
    }
    fn to_value(&self) -> Value {
        self.clone()
    }
    fn write_json(&self, w: &mut Vec<u8>) {
        // A Value holds no map with non-string keys: writing it cannot fail.
        let _ = serde_json::to_writer(w, self);
    }
    fn json_len(&self) -> usize {
        counted(self)
    }
}

impl Object for Map<String, Value> {
    fn get(&self, key: &str) -> Option<&dyn Json> {
        Map::get(self, key).map(|v| v as &dyn Json)
    }
    fn any_key(&self, f: &dyn Fn(&str) -> bool) -> bool {
        self.keys().any(|k| f(k))
    }
    fn for_each(&self, f: &mut dyn FnMut(&str, &dyn Json)) {
        for (k, v) in self {
            f(k, v);
        }
    }
    fn contains_key(&self, key: &str) -> bool {
        Map::contains_key(self, key)
    }
}

impl Json for Node<'_> {
    fn as_str(&self) -> Option<&str> {
        match self {
            Node::Str(s) => Some(s),
            _ => None,
        }
    }
    fn as_i64(&self) -> Option<i64> {
        match self {
            Node::Number(n) => n.as_i64(),
            _ => None,
        }
    }
    fn as_number(&self) -> Option<&Number> {
        match self {
            Node::Number(n) => Some(n),
            _ => None,
        }
    }
    fn is_boolean(&self) -> bool {
        matches!(self, Node::Bool(_))
    }
    fn is_null(&self) -> bool {
        matches!(self, Node::Null)
    }
    fn as_object(&self) -> Option<&dyn Object> {
        match self {
            Node::Object(m) => Some(m),
            _ => None,
        }
    }
    fn array_len(&self) -> Option<usize> {
        match self {
            Node::Array(items) => Some(items.len()),
            _ => None,
        }
    }
    fn at(&self, i: usize) -> Option<&dyn Json> {
        match self {
            Node::Array(items) => items.get(i).map(|v| v as &dyn Json),
            _ => None,
        }
    }
    fn to_value(&self) -> Value {
        // One allocation per string, list and member, as reading it into a `Value` makes.
        match self {
            Node::Null => Value::Null,
            Node::Bool(b) => Value::Bool(*b),
            Node::Number(n) => Value::Number(n.clone()),
            Node::Str(s) => Value::String(s.to_string()),
            Node::Array(items) => Value::Array(items.iter().map(Json::to_value).collect()),
            Node::Object(m) => Value::Object(
                m.items
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_value()))
                    .collect::<Map<String, Value>>(),
            ),
        }
    }
    fn write_json(&self, w: &mut Vec<u8>) {
        // Strings, numbers and string-keyed maps: writing cannot fail.
        let _ = serde_json::to_writer(w, self);
    }
    fn json_len(&self) -> usize {
        counted(self)
    }
}

/// The bytes serde_json writes for `v`, counted as they go by (nothing is kept).
pub fn counted(v: &impl Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    // String-keyed maps only, and a sink that never fails: writing cannot fail.
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

impl Object for Members<'_> {
    fn get(&self, key: &str) -> Option<&dyn Json> {
        self.get_node(key).map(|v| v as &dyn Json)
    }
    fn any_key(&self, f: &dyn Fn(&str) -> bool) -> bool {
        self.items.iter().any(|(k, _)| f(k))
    }
    fn for_each(&self, f: &mut dyn FnMut(&str, &dyn Json)) {
        for (k, v) in &self.items {
            f(k, v);
        }
    }
    fn contains_key(&self, key: &str) -> bool {
        self.holds(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::json::{parse, read_in_place};

    const DOCS: &[&str] = &[
        r#"{"input":{"topic":"t","filename":"f.py","n":[1,-2,3.5,1e3,true,null,{}]}}"#,
        r#"[]"#,
        r#" "s\u00e9\n" "#,
        r#"{"b":{"a":{"a":1}},"a":[{"z":1,"y":2},{"a":2}]}"#,
        r#"-0"#,
        r#"18446744073709551615"#,
        r#"-9223372036854775808"#,
        r#"{"\u0061":1,"b":"x\"y"}"#,
        r#"{"task":{"status":{"state":"TASK_STATE_COMPLETED"},"id":"t","contextId":"c","history":[{"role":"ROLE_USER","messageId":"m","parts":[{"text":"hi"}]}]}}"#,
        r#"{"z":{"y":{"x":[{"b":1,"a":{"d":null,"c":"\u00e9"}}],"w":2},"\u0062":3},"a":0}"#,
    ];

    #[test]
    fn a_node_is_the_document_serde_json_reads_and_writes_it_alike() {
        for doc in DOCS {
            let value = parse(doc.as_bytes()).expect("a Value");
            let node = read_in_place(doc.as_bytes()).expect("a Node");
            let mut written = Vec::new();
            node.write_json(&mut written);
            assert_eq!(
                String::from_utf8_lossy(&written),
                serde_json::to_string(&value).expect("written"),
                "{doc}"
            );
            assert_eq!(node.to_value(), value, "{doc}");
            assert_eq!(node.clone().into_value(), value, "{doc}");
            // Counted, the same length as written, either tree.
            assert_eq!(node.json_len(), written.len(), "{doc}");
            assert_eq!(Json::json_len(&value), written.len(), "{doc}");
        }
    }

    #[test]
    fn a_deep_document_out_of_key_order_writes_in_one_pass() {
        // Every level out of order, 120 deep, a long list at the bottom: written as serde_json
        // writes it, the members sorted by reference (a copy per level would be 120 copies of
        // the list).
        let depth = 120;
        let list = format!("[{}]", vec!["0"; 2_000].join(","));
        let mut doc = list.clone();
        for i in 0..depth {
            doc = format!(r#"{{"z{i}":{i},"a":{doc}}}"#);
        }
        let node = read_in_place(doc.as_bytes()).expect("a node");
        let mut written = Vec::new();
        node.write_json(&mut written);
        let value = parse(doc.as_bytes()).expect("a value");
        assert_eq!(written, serde_json::to_vec(&value).expect("written"));
        // Out of order, the members are sorted as references to themselves, not copies.
        let Node::Object(top) = &node else {
            panic!("an object")
        };
        match top.sorted() {
            Sorted::Refs(refs) => {
                assert_eq!(refs.len(), 2);
                assert_eq!(&*refs[0].0, "a");
                for r in refs {
                    assert!(top.items.iter().any(|m| std::ptr::eq(m, r)), "a copy");
                }
            }
            Sorted::InOrder(_) => panic!("the document's members are out of order"),
        }
        let Node::Object(sorted) = read_in_place(br#"{"a":1,"b":2}"#).expect("read") else {
            panic!("an object")
        };
        assert!(
            matches!(sorted.sorted(), Sorted::InOrder(items) if std::ptr::eq(items, &*sorted.items))
        );
    }

    #[test]
    fn strings_without_escapes_are_borrowed() {
        let body = br#"{"id":"abc","e":"a\nb"}"#;
        let Node::Object(m) = read_in_place(body).expect("read") else {
            panic!("an object")
        };
        assert!(matches!(
            m.get_node("id"),
            Some(Node::Str(Cow::Borrowed("abc")))
        ));
        assert!(matches!(m.get_node("e"), Some(Node::Str(Cow::Owned(s))) if s == "a\nb"));
    }

    #[test]
    fn a_large_object_finds_its_duplicate_by_its_index() {
        for n in [SCAN - 1, SCAN, SCAN + 1, 200] {
            let keys: Vec<String> = (0..n).map(|i| format!("\"k{i}\":{i}")).collect();
            let ok = format!("{{{}}}", keys.join(","));
            let Node::Object(m) = read_in_place(ok.as_bytes()).expect("no duplicate") else {
                panic!("an object")
            };
            assert_eq!(m.len(), n);
            assert!(m.holds("k0") && m.holds(&format!("k{}", n - 1)) && !m.holds("k-1"));
            for dup in [0, n / 2, n - 1] {
                let bad = format!("{},\"k{dup}\":0}}", &ok[..ok.len() - 1]);
                let e = read_in_place(bad.as_bytes()).expect_err("a duplicate");
                assert_eq!(e.pointer(), format!("/k{dup}"), "{n} keys, k{dup} twice");
            }
        }
    }

    #[test]
    fn both_trees_answer_the_view_alike() {
        let doc = br#"{"s":"x","i":-3,"b":false,"n":null,"o":{"k_1":1},"a":[1,"two"]}"#;
        let value = parse(doc).expect("value");
        let node = read_in_place(doc).expect("node");
        for v in [&value as &dyn Json, &node as &dyn Json] {
            assert_eq!(v.get("s").and_then(|s| s.as_str()), Some("x"));
            assert_eq!(v.get("i").and_then(|s| s.as_i64()), Some(-3));
            assert!(v.get("b").is_some_and(|b| b.is_boolean()));
            assert!(v.get("n").is_some_and(|n| n.is_null()));
            assert!(v.get("missing").is_none());
            let o = v.get("o").and_then(|o| o.as_object()).expect("object");
            assert!(o.any_key(&|k| k.contains('_')) && o.contains_key("k_1"));
            let a = v.get("a").expect("list");
            assert_eq!(a.array_len(), Some(2));
            assert_eq!(a.at(1).and_then(|s| s.as_str()), Some("two"));
            assert!(a.at(2).is_none() && a.as_object().is_none());
            let mut keys = Vec::new();
            v.as_object()
                .expect("object")
                .for_each(&mut |k, _| keys.push(k.to_owned()));
            keys.sort();
            assert_eq!(keys, ["a", "b", "i", "n", "o", "s"]);
        }
    }
}
