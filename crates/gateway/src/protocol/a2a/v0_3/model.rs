//! 0.3's objects translated to and from 1.0's ProtoJSON, in either of 0.3's JSON spellings
//! ([`Style`]): one walk over the objects (parts, messages, statuses, artifacts, tasks, stream
//! events), the spellings differing only at the leaves (parts, states, roles, `kind`). The calls
//! around them (params, push configs, each method's answer) are [`super::calls`]'.
//!
//! Reading 0.3 (`*_in`) is strict where the meaning would be lost (a part of no known kind, a
//! role or state 0.3 does not have: a [`Violation`] naming the field) and lenient elsewhere
//! (fields 0.3 added later, and 1.0's spellings where they are unambiguous, pass); writing
//! 0.3 (`*_out`) cannot fail: what 0.3 cannot say is left out (a 1.0 part's `filename` on
//! 0.3's proto, which has none) or written as its nearest (`unknown` for a state of no 0.3
//! name; a non-object `data` wrapped as `{"value": ...}` with `data_part_compat`, as a2a-sdk
//! 1.3's compatibility layer writes it).

use serde_json::{Map, Value};

use crate::protocol::Violation;

/// Which of 0.3's JSON spellings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// a2a.json's (JSON-RPC): `kind`, `input-required`, `user`.
    Json,
    /// The JSON of a2a.proto 0.3 (HTTP+JSON): `content`, `TASK_STATE_CANCELLED`, `ROLE_USER`.
    Proto,
}

/// A JSON object.
pub(super) type Obj = Map<String, Value>;
/// What reading 0.3 gives: the 1.0 value, or the first field it could not read.
pub(super) type In<T> = Result<T, Violation>;

/// A violation at `at` (a JSON pointer relative to what was being read).
pub(super) fn bad(at: &str, message: impl Into<String>) -> Violation {
    Violation::new(at, "a2a-0.3", message)
}

/// `v` under `prefix`: a violation found inside a member, named from the outer object.
pub(super) fn under(mut v: Violation, prefix: &str) -> Violation {
    v.instance_path.insert_str(0, prefix);
    v
}

pub(super) fn object(v: Value, what: &str) -> In<Obj> {
    match v {
        Value::Object(o) => Ok(o),
        _ => Err(bad("", format!("{what} is an object"))),
    }
}

/// (a2a.json, 0.3 proto, 1.0) for each state.
const STATES: [(&str, &str, &str); 9] = [
    ("submitted", "TASK_STATE_SUBMITTED", "TASK_STATE_SUBMITTED"),
    ("working", "TASK_STATE_WORKING", "TASK_STATE_WORKING"),
    (
        "input-required",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_INPUT_REQUIRED",
    ),
    (
        "auth-required",
        "TASK_STATE_AUTH_REQUIRED",
        "TASK_STATE_AUTH_REQUIRED",
    ),
    ("completed", "TASK_STATE_COMPLETED", "TASK_STATE_COMPLETED"),
    ("canceled", "TASK_STATE_CANCELLED", "TASK_STATE_CANCELED"),
    ("failed", "TASK_STATE_FAILED", "TASK_STATE_FAILED"),
    ("rejected", "TASK_STATE_REJECTED", "TASK_STATE_REJECTED"),
    (
        "unknown",
        "TASK_STATE_UNSPECIFIED",
        "TASK_STATE_UNSPECIFIED",
    ),
];

/// The 1.0 state of a 0.3 state (the 1.0 spelling is read too).
fn state_in(s: Style, state: &str) -> Option<&'static str> {
    STATES.iter().find_map(|(json, proto, v1)| {
        let own = match s {
            Style::Json => *json,
            Style::Proto => *proto,
        };
        (own == state || *v1 == state).then_some(*v1)
    })
}

/// The 0.3 state of a 1.0 state: `unknown` for one 0.3 has no name for.
fn state_out(s: Style, state: &str) -> &'static str {
    let (json, proto, _) = STATES
        .iter()
        .find(|(_, _, v1)| *v1 == state)
        .unwrap_or(&STATES[8]);
    match s {
        Style::Json => json,
        Style::Proto => proto,
    }
}

fn role_in(s: Style, role: &str) -> Option<&'static str> {
    match (s, role) {
        (_, "ROLE_USER") | (Style::Json, "user") => Some("ROLE_USER"),
        (_, "ROLE_AGENT") | (Style::Json, "agent") => Some("ROLE_AGENT"),
        _ => None,
    }
}

fn role_out(s: Style, role: &str) -> &'static str {
    match (s, role) {
        (Style::Json, "ROLE_USER") => "user",
        (Style::Json, _) => "agent",
        (Style::Proto, "ROLE_USER") => "ROLE_USER",
        (Style::Proto, _) => "ROLE_AGENT",
    }
}

/// Whether a 1.0 state is one a stream ends at (final or interrupted): its status update is
/// 0.3's `final: true`.
pub fn ends_stream(state: &str) -> bool {
    matches!(
        state,
        "TASK_STATE_COMPLETED"
            | "TASK_STATE_CANCELED"
            | "TASK_STATE_FAILED"
            | "TASK_STATE_REJECTED"
            | "TASK_STATE_INPUT_REQUIRED"
            | "TASK_STATE_AUTH_REQUIRED"
    )
}

fn kind_is(o: &mut Obj, s: Style, want: &str, what: &str) -> In<()> {
    if s == Style::Json {
        if let Some(k) = o.remove("kind") {
            if k.as_str() != Some(want) {
                return Err(bad("/kind", format!("{what}'s kind is {want:?}")));
            }
        }
    }
    Ok(())
}

fn with_kind(mut o: Obj, s: Style, kind: &str) -> Obj {
    if s == Style::Json {
        o.insert("kind".to_owned(), Value::from(kind));
    }
    o
}

/// Whether a member is worth writing (present and not null).
pub(super) fn some(v: Option<Value>) -> Option<Value> {
    v.filter(|v| !v.is_null())
}

// ---------------------------------------------------------------------------------------------
// Parts

fn part_in(s: Style, v: Value) -> In<Value> {
    let mut p = object(v, "a Part")?;
    // The common part, a text (and its metadata), read in place: no new map, no new keys.
    let plain = p
        .keys()
        .all(|k| matches!(k.as_str(), "kind" | "text" | "metadata"))
        && p.get("text").is_some_and(Value::is_string)
        && p.get("metadata")
            .is_none_or(|m| m.is_object() && m.get("data_part_compat").is_none());
    if plain {
        match (s, p.get("kind").and_then(Value::as_str)) {
            (Style::Json, Some("text")) | (Style::Proto, None) => {
                p.remove("kind");
                if p.get("metadata")
                    .is_some_and(|m| m.as_object().is_some_and(Map::is_empty))
                {
                    p.remove("metadata");
                }
                return Ok(Value::Object(p));
            }
            _ => {}
        }
    }
    let mut out = Obj::new();
    let mut metadata = some(p.remove("metadata"));
    match s {
        Style::Json => {
            let kind = p.remove("kind");
            match kind.as_ref().and_then(Value::as_str) {
                Some("text") => {
                    let text = p
                        .remove("text")
                        .filter(Value::is_string)
                        .ok_or_else(|| bad("/text", "a text part's text is a string"))?;
                    out.insert("text".to_owned(), text);
                }
                Some("file") => {
                    let f = object(
                        p.remove("file").unwrap_or(Value::Null),
                        "a file part's file",
                    )
                    .map_err(|v| under(v, "/file"))?;
                    file_in(f, "bytes", "uri", "name", &mut out).map_err(|v| under(v, "/file"))?;
                }
                Some("data") => {
                    let mut data = p
                        .remove("data")
                        .filter(Value::is_object)
                        .ok_or_else(|| bad("/data", "a data part's data is an object"))?;
                    // A 1.0 value that was not an object, wrapped by a 1.0-aware writer.
                    let compat = metadata
                        .as_mut()
                        .and_then(Value::as_object_mut)
                        .and_then(|m| m.remove("data_part_compat"))
                        .and_then(|f| f.as_bool())
                        .unwrap_or(false);
                    if compat {
                        data = data
                            .get_mut("value")
                            .map(Value::take)
                            .unwrap_or(Value::Null);
                    }
                    out.insert("data".to_owned(), data);
                }
                _ => {
                    return Err(bad(
                        "/kind",
                        "a part's kind is \"text\", \"file\" or \"data\"",
                    ))
                }
            }
        }
        Style::Proto => {
            if let Some(text) = p.remove("text") {
                out.insert("text".to_owned(), text);
            } else if let Some(f) = p.remove("file") {
                let f = object(f, "a file part").map_err(|v| under(v, "/file"))?;
                file_in(f, "fileWithBytes", "fileWithUri", "name", &mut out)
                    .map_err(|v| under(v, "/file"))?;
            } else if let Some(d) = p.remove("data") {
                let mut d = object(d, "a data part").map_err(|v| under(v, "/data"))?;
                let data = d
                    .remove("data")
                    .unwrap_or_else(|| Value::Object(Obj::new()));
                out.insert("data".to_owned(), data);
            } else {
                return Err(bad("", "a part holds text, file or data"));
            }
        }
    }
    if let Some(m) = metadata.filter(|m| m.as_object().is_some_and(|o| !o.is_empty())) {
        out.insert("metadata".to_owned(), m);
    }
    Ok(Value::Object(out))
}

fn file_in(mut f: Obj, bytes: &str, uri: &str, name: &str, out: &mut Obj) -> In<()> {
    if let Some(b) = some(f.remove(bytes)) {
        out.insert("raw".to_owned(), b);
    } else if let Some(u) = some(f.remove(uri)) {
        out.insert("url".to_owned(), u);
    } else {
        return Err(bad("", format!("a file holds {bytes} or {uri}")));
    }
    if let Some(mt) = some(f.remove("mimeType")) {
        out.insert("mediaType".to_owned(), mt);
    }
    if let Some(n) = some(f.remove(name)) {
        out.insert("filename".to_owned(), n);
    }
    Ok(())
}

fn part_out(s: Style, v: Value) -> Value {
    let Value::Object(mut p) = v else {
        return v;
    };
    // The common part, a text (and its metadata), written in place.
    if p.get("text").is_some() && p.keys().all(|k| matches!(k.as_str(), "text" | "metadata")) {
        match s {
            Style::Json => {
                p.insert("kind".to_owned(), Value::from("text"));
            }
            Style::Proto => {
                p.remove("metadata");
            }
        }
        return Value::Object(p);
    }
    let mut metadata = some(p.remove("metadata"));
    let media = some(p.remove("mediaType"));
    let name = some(p.remove("filename"));
    let file = |key_bytes: bool, v: Value| -> Value {
        let mut f = Obj::new();
        let key = match (s, key_bytes) {
            (Style::Json, true) => "bytes",
            (Style::Json, false) => "uri",
            (Style::Proto, true) => "fileWithBytes",
            (Style::Proto, false) => "fileWithUri",
        };
        f.insert(key.to_owned(), v);
        if let Some(m) = media.clone() {
            f.insert("mimeType".to_owned(), m);
        }
        if let (Style::Json, Some(n)) = (s, name.clone()) {
            f.insert("name".to_owned(), n);
        }
        Value::Object(f)
    };
    let mut out = Obj::new();
    let kind = if let Some(t) = p.remove("text") {
        out.insert("text".to_owned(), t);
        "text"
    } else if let Some(b) = p.remove("raw") {
        out.insert("file".to_owned(), file(true, b));
        "file"
    } else if let Some(u) = p.remove("url") {
        out.insert("file".to_owned(), file(false, u));
        "file"
    } else {
        let mut data = p.remove("data").unwrap_or(Value::Null);
        if !data.is_object() {
            data = Value::Object(Obj::from_iter([("value".to_owned(), data)]));
            let m = metadata.get_or_insert_with(|| Value::Object(Obj::new()));
            if let Some(m) = m.as_object_mut() {
                m.insert("data_part_compat".to_owned(), Value::Bool(true));
            }
        }
        match s {
            Style::Json => out.insert("data".to_owned(), data),
            Style::Proto => out.insert(
                "data".to_owned(),
                Value::Object(Obj::from_iter([("data".to_owned(), data)])),
            ),
        };
        "data"
    };
    if s == Style::Json {
        if let Some(m) = metadata {
            out.insert("metadata".to_owned(), m);
        }
        out.insert("kind".to_owned(), Value::from(kind));
    }
    Value::Object(out)
}

fn parts_in(s: Style, v: Value) -> In<Value> {
    let Value::Array(parts) = v else {
        return Err(bad("", "parts is an array"));
    };
    parts
        .into_iter()
        .enumerate()
        .map(|(i, p)| part_in(s, p).map_err(|v| under(v, &format!("/{i}"))))
        .collect::<In<Vec<Value>>>()
        .map(Value::Array)
}

fn parts_out(s: Style, v: Value) -> Value {
    match v {
        Value::Array(parts) => Value::Array(parts.into_iter().map(|p| part_out(s, p)).collect()),
        other => other,
    }
}

// ---------------------------------------------------------------------------------------------
// Messages, statuses, artifacts, tasks

/// The member holding a message's parts.
fn parts_key(s: Style) -> &'static str {
    match s {
        Style::Json => "parts",
        Style::Proto => "content",
    }
}

/// A 0.3 Message as 1.0's.
pub fn message_in(s: Style, v: Value) -> In<Value> {
    let mut m = object(v, "a Message")?;
    kind_is(&mut m, s, "message", "a message")?;
    if let Some(r) = m.get_mut("role") {
        let role = r
            .as_str()
            .and_then(|r| role_in(s, r))
            .ok_or_else(|| bad("/role", "a message's role is user or agent"))?;
        *r = Value::from(role);
    }
    let key = parts_key(s);
    if let Some(parts) = m.get_mut("parts") {
        *parts = parts_in(s, parts.take()).map_err(|v| under(v, "/parts"))?;
    } else if let Some(parts) = m.remove(key) {
        let parts = parts_in(s, parts).map_err(|v| under(v, &format!("/{key}")))?;
        m.insert("parts".to_owned(), parts);
    }
    for k in ["contextId", "taskId"] {
        if m.get(k).is_some_and(Value::is_null) {
            m.remove(k);
        }
    }
    Ok(Value::Object(m))
}

/// A 1.0 Message as 0.3's.
pub fn message_out(s: Style, v: Value) -> Value {
    let Value::Object(mut m) = v else {
        return v;
    };
    if let Some(r) = m.get_mut("role") {
        *r = Value::from(role_out(s, r.as_str().unwrap_or("")));
    }
    match (s, m.get_mut("parts")) {
        (Style::Json, Some(parts)) => *parts = parts_out(s, parts.take()),
        (_, parts) => {
            let parts = parts.map(Value::take).unwrap_or(Value::Array(Vec::new()));
            m.remove("parts");
            m.insert(parts_key(s).to_owned(), parts_out(s, parts));
        }
    }
    Value::Object(with_kind(m, s, "message"))
}

fn status_in(s: Style, v: Value) -> In<Value> {
    let mut st = object(v, "a TaskStatus")?;
    if let Some(state) = st.get_mut("state") {
        let v1 = state
            .as_str()
            .and_then(|x| state_in(s, x))
            .ok_or_else(|| bad("/state", "not a task state of A2A 0.3"))?;
        *state = Value::from(v1);
    }
    match st.get_mut("message") {
        Some(Value::Null) => {
            st.remove("message");
        }
        Some(m) => *m = message_in(s, m.take()).map_err(|v| under(v, "/message"))?,
        None => {}
    }
    if st.get("timestamp").is_some_and(Value::is_null) {
        st.remove("timestamp");
    }
    Ok(Value::Object(st))
}

fn status_out(s: Style, v: Value) -> Value {
    let Value::Object(mut st) = v else {
        return v;
    };
    let state = state_out(s, st.get("state").and_then(Value::as_str).unwrap_or(""));
    match st.get_mut("state") {
        Some(v) => *v = Value::from(state),
        None => {
            st.insert("state".to_owned(), Value::from(state));
        }
    }
    if let Some(m) = st.get_mut("message") {
        *m = message_out(s, m.take());
    }
    Value::Object(st)
}

fn artifact_in(s: Style, v: Value) -> In<Value> {
    let mut a = object(v, "an Artifact")?;
    if let Some(parts) = a.get_mut("parts") {
        *parts = parts_in(s, parts.take()).map_err(|v| under(v, "/parts"))?;
    }
    for k in ["name", "description"] {
        if a.get(k).is_some_and(Value::is_null) {
            a.remove(k);
        }
    }
    Ok(Value::Object(a))
}

fn artifact_out(s: Style, v: Value) -> Value {
    let Value::Object(mut a) = v else {
        return v;
    };
    match a.get_mut("parts") {
        Some(parts) => *parts = parts_out(s, parts.take()),
        None => {
            a.insert("parts".to_owned(), Value::Array(Vec::new()));
        }
    }
    Value::Object(a)
}

fn each_in(s: Style, v: Value, f: fn(Style, Value) -> In<Value>) -> In<Value> {
    match v {
        Value::Array(items) => items
            .into_iter()
            .enumerate()
            .map(|(i, x)| f(s, x).map_err(|v| under(v, &format!("/{i}"))))
            .collect::<In<Vec<Value>>>()
            .map(Value::Array),
        Value::Null => Ok(Value::Array(Vec::new())),
        _ => Err(bad("", "an array")),
    }
}

pub(super) fn each_out(s: Style, v: Value, f: fn(Style, Value) -> Value) -> Value {
    match v {
        Value::Array(items) => Value::Array(items.into_iter().map(|x| f(s, x)).collect()),
        other => other,
    }
}

/// A 0.3 Task as 1.0's.
pub fn task_in(s: Style, v: Value) -> In<Value> {
    let mut t = object(v, "a Task")?;
    kind_is(&mut t, s, "task", "a task")?;
    if let Some(st) = t.get_mut("status") {
        *st = status_in(s, st.take()).map_err(|v| under(v, "/status"))?;
    }
    if let Some(h) = t.get_mut("history") {
        *h = each_in(s, h.take(), message_in).map_err(|v| under(v, "/history"))?;
    }
    if let Some(a) = t.get_mut("artifacts") {
        *a = each_in(s, a.take(), artifact_in).map_err(|v| under(v, "/artifacts"))?;
    }
    Ok(Value::Object(t))
}

/// A 1.0 Task as 0.3's.
pub fn task_out(s: Style, v: Value) -> Value {
    let Value::Object(mut t) = v else {
        return v;
    };
    match t.get_mut("status") {
        Some(st) => *st = status_out(s, st.take()),
        None => {
            let st = serde_json::json!({"state": "TASK_STATE_UNSPECIFIED"});
            t.insert("status".to_owned(), status_out(s, st));
        }
    }
    if let Some(h) = t.get_mut("history") {
        *h = each_out(s, h.take(), message_out);
    }
    if let Some(a) = t.get_mut("artifacts") {
        *a = each_out(s, a.take(), artifact_out);
    }
    if !t.contains_key("contextId") {
        t.insert("contextId".to_owned(), Value::from(""));
    }
    Value::Object(with_kind(t, s, "task"))
}

fn status_update_in(s: Style, v: Value) -> In<Value> {
    let mut u = object(v, "a TaskStatusUpdateEvent")?;
    kind_is(&mut u, s, "status-update", "a status update")?;
    u.remove("final");
    if let Some(st) = u.remove("status") {
        u.insert(
            "status".to_owned(),
            status_in(s, st).map_err(|v| under(v, "/status"))?,
        );
    }
    Ok(Value::Object(u))
}

fn status_update_out(s: Style, v: Value) -> Value {
    let Value::Object(mut u) = v else {
        return v;
    };
    let ends = u
        .get("status")
        .and_then(|st| st.get("state"))
        .and_then(Value::as_str)
        .is_some_and(ends_stream);
    if let Some(st) = u.remove("status") {
        u.insert("status".to_owned(), status_out(s, st));
    }
    u.insert("final".to_owned(), Value::Bool(ends));
    Value::Object(with_kind(u, s, "status-update"))
}

fn artifact_update_in(s: Style, v: Value) -> In<Value> {
    let mut u = object(v, "a TaskArtifactUpdateEvent")?;
    kind_is(&mut u, s, "artifact-update", "an artifact update")?;
    if let Some(a) = u.remove("artifact") {
        u.insert(
            "artifact".to_owned(),
            artifact_in(s, a).map_err(|v| under(v, "/artifact"))?,
        );
    }
    for k in ["append", "lastChunk"] {
        if u.get(k).is_some_and(Value::is_null) {
            u.remove(k);
        }
    }
    Ok(Value::Object(u))
}

fn artifact_update_out(s: Style, v: Value) -> Value {
    let Value::Object(mut u) = v else {
        return v;
    };
    if let Some(a) = u.remove("artifact") {
        u.insert("artifact".to_owned(), artifact_out(s, a));
    }
    Value::Object(with_kind(u, s, "artifact-update"))
}

// ---------------------------------------------------------------------------------------------
// Send results and stream events

/// The 1.0 StreamResponse members, each with its 0.3 `kind`.
const EVENTS: [(&str, &str); 4] = [
    ("task", "task"),
    ("message", "message"),
    ("statusUpdate", "status-update"),
    ("artifactUpdate", "artifact-update"),
];

/// A 1.0 StreamResponse (or SendMessageResponse) as 0.3 writes it: a2a.json's bare object
/// with its `kind`, or the proto's one-member object.
pub fn event_out(s: Style, v: Value) -> Value {
    let Value::Object(mut o) = v else {
        return v;
    };
    let Some((key, inner)) = EVENTS
        .iter()
        .find_map(|(k, _)| o.remove(*k).map(|inner| (*k, inner)))
    else {
        return Value::Object(o);
    };
    let out = match key {
        "task" => task_out(s, inner),
        "message" => message_out(s, inner),
        "statusUpdate" => status_update_out(s, inner),
        _ => artifact_update_out(s, inner),
    };
    match s {
        Style::Json => out,
        Style::Proto => Value::Object(Obj::from_iter([(key.to_owned(), out)])),
    }
}

/// A 0.3 stream event (or send result) as 1.0's StreamResponse (SendMessageResponse).
pub fn event_in(s: Style, v: Value) -> In<Value> {
    let (key, inner) = match s {
        Style::Json => {
            let kind = v.get("kind").and_then(Value::as_str).unwrap_or("");
            let key = EVENTS
                .iter()
                .find(|(_, k)| *k == kind)
                .map(|(key, _)| *key)
                .ok_or_else(|| {
                    bad(
                        "/kind",
                        "an event's kind is task, message, status-update or artifact-update",
                    )
                })?;
            (key, v)
        }
        Style::Proto => {
            let mut o = object(v, "a StreamResponse")?;
            EVENTS
                .iter()
                .find_map(|(k, _)| o.remove(*k).map(|inner| (*k, inner)))
                .ok_or_else(|| {
                    bad(
                        "",
                        "an event holds a task, message, statusUpdate or artifactUpdate",
                    )
                })?
        }
    };
    let inner = match key {
        "task" => task_in(s, inner),
        "message" => message_in(s, inner),
        "statusUpdate" => status_update_in(s, inner),
        _ => artifact_update_in(s, inner),
    }
    .map_err(|v| match s {
        Style::Json => v,
        Style::Proto => under(v, &format!("/{key}")),
    })?;
    Ok(Value::Object(Obj::from_iter([(key.to_owned(), inner)])))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Obj {
        v.as_object().cloned().expect("an object")
    }

    #[test]
    fn a_bad_part_or_role_names_its_field() {
        let p = obj(
            json!({"message": {"messageId": "m", "role": "user", "parts": [
            {"kind": "text", "text": "ok"}, {"kind": "video"}]}}),
        );
        let e = super::super::calls::send_in(Style::Json, p).expect_err("refused");
        assert_eq!(e.instance_path, "/message/parts/1/kind");
        let p = obj(json!({"message": {"messageId": "m", "role": "ROLE_ROBOT", "parts": []}}));
        assert_eq!(
            super::super::calls::send_in(Style::Json, p)
                .expect_err("refused")
                .instance_path,
            "/message/role"
        );
        let e = event_in(
            Style::Json,
            json!({"kind": "task", "id": "t", "contextId": "c",
            "status": {"state": "paused"}}),
        )
        .expect_err("refused");
        assert_eq!(e.instance_path, "/status/state");
    }

    #[test]
    fn every_state_has_its_spelling_each_way() {
        for (json, proto, v1) in STATES {
            assert_eq!(state_in(Style::Json, json), Some(v1));
            assert_eq!(state_in(Style::Proto, proto), Some(v1));
            assert_eq!(state_out(Style::Json, v1), json);
            assert_eq!(state_out(Style::Proto, v1), proto);
        }
        assert_eq!(state_out(Style::Json, "TASK_STATE_FROZEN"), "unknown");
        assert_eq!(state_in(Style::Json, "TASK_STATE_CANCELLED"), None);
    }

    #[test]
    fn stream_events_carry_kind_and_final_in_json_and_keys_in_proto() {
        let update = json!({"statusUpdate": {"taskId": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_INPUT_REQUIRED",
                "message": {"messageId": "a", "role": "ROLE_AGENT", "parts": [{"text": "more?"}]}}}});
        let j = event_out(Style::Json, update.clone());
        assert_eq!(j["kind"], "status-update");
        assert_eq!(j["final"], true);
        assert_eq!(j["status"]["state"], "input-required");
        assert_eq!(
            j["status"]["message"]["parts"][0],
            json!({"kind": "text", "text": "more?"})
        );
        assert_eq!(event_in(Style::Json, j).expect("reads"), update);
        let p = event_out(Style::Proto, update.clone());
        assert_eq!(
            p["statusUpdate"]["status"]["message"]["content"][0],
            json!({"text": "more?"})
        );
        assert_eq!(p["statusUpdate"]["status"]["message"]["role"], "ROLE_AGENT");
        assert_eq!(event_in(Style::Proto, p).expect("reads"), update);
        let working = event_out(
            Style::Json,
            json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}}),
        );
        assert_eq!(working["final"], false);
        let canceled = json!({"task": {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_CANCELED"},
            "artifacts": [{"artifactId": "a", "parts": [{"data": [1, 2]}]}]}});
        let p = event_out(Style::Proto, canceled.clone());
        assert_eq!(p["task"]["status"]["state"], "TASK_STATE_CANCELLED");
        assert_eq!(
            p["task"]["artifacts"][0]["parts"][0],
            json!({"data": {"data": {"value": [1, 2]}}})
        );
        let j = event_out(Style::Json, canceled.clone());
        assert_eq!(j["kind"], "task");
        assert_eq!(
            j["artifacts"][0]["parts"][0]["metadata"]["data_part_compat"],
            true
        );
        // The wrapped value reads back as the value it wrapped.
        assert_eq!(event_in(Style::Json, j).expect("reads"), canceled);
    }
}
