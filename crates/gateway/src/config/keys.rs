//! The keys a config may have, learnt from the serde derives themselves (so every field name is
//! written once, on its struct), and the first pass over a parsed TOML table: every unknown key
//! (with the nearest valid one) and every value of the wrong type, each with its key.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use toml::{Table, Value};

use super::Problem;

/// The serialized field names of the struct found at `path` (field names, array indices left
/// out) inside `T`, or `None` when there is no struct there (a scalar, a list of scalars).
///
/// The derived `Deserialize` hands its field list to `deserialize_struct`; a probing
/// deserializer walks down `path` one map entry at a time and catches that list.
pub fn fields_of<'de, T: Deserialize<'de>>(path: &[&str]) -> Option<&'static [&'static str]> {
    let found = Cell::new(None);
    let _ = T::deserialize(Probe {
        path,
        found: &found,
    });
    found.get()
}

#[derive(Debug)]
struct Stop;

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("probe stopped")
    }
}

impl std::error::Error for Stop {}

impl de::Error for Stop {
    fn custom<M: fmt::Display>(_: M) -> Stop {
        Stop
    }
}

struct Probe<'p> {
    path: &'p [&'p str],
    found: &'p Cell<Option<&'static [&'static str]>>,
}

impl<'de> Deserializer<'de> for Probe<'_> {
    type Error = Stop;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
        Err(Stop)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Stop> {
        match self.path.split_first() {
            None => {
                self.found.set(Some(fields));
                Err(Stop)
            }
            Some((key, rest)) => visitor.visit_map(OneEntry {
                key: Some(key),
                value: Some(Probe {
                    path: rest,
                    found: self.found,
                }),
            }),
        }
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Stop> {
        visitor.visit_seq(OneElement(Some(self)))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Stop> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Stop> {
        visitor.visit_newtype_struct(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct tuple tuple_struct map enum identifier ignored_any
    }
}

struct OneEntry<'p> {
    key: Option<&'p str>,
    value: Option<Probe<'p>>,
}

impl<'de> MapAccess<'de> for OneEntry<'_> {
    type Error = Stop;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Stop> {
        match self.key.take() {
            Some(k) => seed
                .deserialize(de::value::StrDeserializer::<Stop>::new(k))
                .map(Some),
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Stop> {
        seed.deserialize(self.value.take().ok_or(Stop)?)
    }
}

struct OneElement<'p>(Option<Probe<'p>>);

impl<'de> SeqAccess<'de> for OneElement<'_> {
    type Error = Stop;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Stop> {
        match self.0.take() {
            Some(p) => seed.deserialize(p).map(Some),
            None => Ok(None),
        }
    }
}

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    /// A table key.
    Key(String),
    /// An index into an array of tables.
    Index(usize),
}

/// `agents[0].timeout_ms`.
pub fn display(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) if s.is_empty() => s.push_str(k),
            Seg::Key(k) => {
                s.push('.');
                s.push_str(k);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// The inverse of [`display`] (keys in this config never contain `.` or `[`).
pub fn segments(key: &str) -> Vec<Seg> {
    let mut out = Vec::new();
    for part in key.split('.').filter(|p| !p.is_empty()) {
        let mut pieces = part.split('[');
        if let Some(name) = pieces.next().filter(|n| !n.is_empty()) {
            out.push(Seg::Key(name.to_owned()));
        }
        for idx in pieces {
            if let Ok(i) = idx.trim_end_matches(']').parse() {
                out.push(Seg::Index(i));
            }
        }
    }
    out
}

fn names(path: &[Seg]) -> Vec<&str> {
    path.iter()
        .filter_map(|s| match s {
            Seg::Key(k) => Some(k.as_str()),
            Seg::Index(_) => None,
        })
        .collect()
}

/// Where a key comes in document order: each field by its place on its struct (an unknown key
/// before every known one), each array entry by its index.
pub fn rank<'de, T: Deserialize<'de>>(key: &str) -> Vec<i64> {
    let segs = segments(key);
    let mut out = Vec::with_capacity(segs.len());
    for (i, seg) in segs.iter().enumerate() {
        match seg {
            Seg::Index(n) => out.push(*n as i64),
            Seg::Key(k) => {
                let place =
                    fields_of::<T>(&names(&segs[..i])).and_then(|f| f.iter().position(|f| f == k));
                out.push(place.map_or(-1, |p| p as i64));
            }
        }
    }
    out
}

/// The valid key nearest to `key`, if one is near enough to be a likely misspelling.
pub fn nearest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let (best, dist) = known
        .iter()
        .map(|k| (*k, distance(key, k)))
        .min_by_key(|(_, d)| *d)?;
    (dist <= (key.chars().count() / 3).max(2)).then_some(best)
}

/// Levenshtein distance, by characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let up = row[j + 1];
            row[j + 1] = (diag + usize::from(ca != *cb)).min(up + 1).min(row[j] + 1);
            diag = up;
        }
    }
    row[b.len()]
}

/// The first pass over the document: reports every unknown key and every value `T` cannot take,
/// and removes them, so that what is left deserializes. The problems come with their ranks.
pub fn screen<T: for<'de> Deserialize<'de>>(doc: &mut Table) -> Vec<(Vec<i64>, Problem)> {
    let mut out = Vec::new();
    screen_table::<T>(doc, &mut Vec::new(), &mut out);
    out
}

fn screen_table<T: for<'de> Deserialize<'de>>(
    table: &mut Table,
    path: &mut Vec<Seg>,
    out: &mut Vec<(Vec<i64>, Problem)>,
) {
    let Some(known) = fields_of::<T>(&names(path)) else {
        return;
    };
    let report = |path: &[Seg], message: String, out: &mut Vec<(Vec<i64>, Problem)>| {
        let key = display(path);
        out.push((rank::<T>(&key), Problem::new(key, message)));
    };
    let unknown: Vec<String> = table
        .keys()
        .filter(|k| !known.contains(&k.as_str()))
        .cloned()
        .collect();
    for k in unknown {
        table.remove(&k);
        path.push(Seg::Key(k.clone()));
        let message = match nearest(&k, known) {
            Some(near) => format!("unknown key; did you mean {near}?"),
            None => format!("unknown key; valid keys here: {}", known.join(", ")),
        };
        report(path, message, out);
        path.pop();
    }
    let keys: Vec<String> = table.keys().cloned().collect();
    for k in keys {
        path.push(Seg::Key(k.clone()));
        let nested = fields_of::<T>(&names(path)).is_some();
        match table.get_mut(&k) {
            Some(Value::Table(inner)) if nested => screen_table::<T>(inner, path, out),
            Some(Value::Array(list)) if nested => {
                for (i, v) in list.iter_mut().enumerate() {
                    path.push(Seg::Index(i));
                    match v {
                        Value::Table(inner) => screen_table::<T>(inner, path, out),
                        _ => {
                            report(path, format!("must be a table ([[{k}]])"), out);
                            *v = Value::Table(Table::new());
                        }
                    }
                    path.pop();
                }
            }
            Some(v) => {
                if let Err(message) = try_leaf::<T>(path, v.clone()) {
                    table.remove(&k);
                    report(path, message, out);
                }
            }
            None => {}
        }
        path.pop();
    }
}

/// Whether `T` takes `value` at `path`: a document holding that value alone (every other field
/// takes its default, arrays are padded with empty tables) is deserialized.
fn try_leaf<T: for<'de> Deserialize<'de>>(path: &[Seg], value: Value) -> Result<(), String> {
    let mut v = value;
    for seg in path.iter().rev() {
        v = match seg {
            Seg::Key(k) => Value::Table(Table::from_iter([(k.clone(), v)])),
            Seg::Index(i) => {
                let mut list = vec![Value::Table(Table::new()); *i];
                list.push(v);
                Value::Array(list)
            }
        };
    }
    v.try_into::<T>()
        .map(drop)
        .map_err(|e| plain_message(e.message()))
}

/// serde's `invalid type: string "x", expected u64` as `must be an integer`.
fn plain_message(m: &str) -> String {
    let m = m.trim();
    let Some((_, expected)) = m
        .strip_prefix("invalid type: ")
        .and_then(|rest| rest.rsplit_once(", expected "))
    else {
        return m.to_owned();
    };
    let what = match expected {
        e if e.starts_with('u') || e.starts_with('i') && e[1..].parse::<u8>().is_ok() => {
            "an integer"
        }
        "a string" | "string" => "a string",
        e if e.starts_with("struct ") => "a table",
        "a sequence" => "a list",
        "a boolean" => "true or false",
        "f64" => "a number",
        "socket address" => "an IP:port address such as \"127.0.0.1:8080\"",
        e => return format!("must be {e}"),
    };
    format!("must be {what}")
}

#[cfg(test)]
mod tests {
    use crate::config::*;

    #[test]
    fn unknown_keys_name_the_nearest_valid_key() {
        let problems = Config::parse(
            r#"
            listn = "127.0.0.1:0"
            listen = "127.0.0.1:0"
            [[agents]]
            name = "a"
            url = "http://x"
            [[agents]]
            name = "b"
            url = "http://y"
            timout_ms = 5
            [redis]
            url = "redis://h"
            prefx = "a:{t}:"
            [streams]
            ping_interval = 5
            colour = "blue"
        "#,
        )
        .expect_err("unknown keys");
        let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "listn: unknown key; did you mean listen?",
                "agents[1].timout_ms: unknown key; did you mean timeout_ms?",
                "redis.prefx: unknown key; did you mean prefix?",
                "streams.colour: unknown key; valid keys here: ping_interval_ms, linger_ms, \
                 replay_events, replay_bytes, subscriber_lag_bytes, max_topics, max_event_bytes, \
                 reconnect_max_ms, max_buffer_bytes",
                "streams.ping_interval: unknown key; did you mean ping_interval_ms?",
            ],
        );
    }

    #[test]
    fn wrong_types_are_reported_with_their_keys_alongside_the_rest() {
        let problems = Config::parse(
            r#"
            listen = 8080
            max_tasks = "many"
            [[agents]]
            name = "a"
            url = "http://x"
            refresh_secs = -1
            conformance = "maybe"
            [[agents]]
            name = "a"
            url = 5
            [webhooks]
            allow = "10.0.0.0/8"
        "#,
        )
        .expect_err("broken");
        let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "listen",
                "max_tasks",
                "agents[0].refresh_secs",
                "agents[0].conformance",
                "agents[1].name",
                "agents[1].url",
                "webhooks.allow",
            ],
            "{problems:?}"
        );
        assert_eq!(problems[1].message, "must be an integer");
    }

    #[test]
    fn the_field_lists_come_from_the_serde_derives() {
        assert_eq!(
            keys::fields_of::<Config>(&["redis"]),
            Some(
                &[
                    "url",
                    "url_file",
                    "cluster",
                    "urls",
                    "ca_file",
                    "prefix",
                    "partitions",
                    "wait_replicas",
                    "wait_timeout_ms"
                ][..]
            )
        );
        assert!(keys::fields_of::<Config>(&["agents"]).is_some_and(|f| f.contains(&"timeout_ms")));
        assert_eq!(keys::fields_of::<Config>(&["listen"]), None);
        assert_eq!(
            keys::nearest("subscriber", &["subscribers", "streams"]),
            Some("subscribers")
        );
        assert_eq!(keys::nearest("colour", &["listen", "workers"]), None);
    }
}
